// cnikit-kernel-features: dummy
// The dummy link type is missing from this machine's kernel: the runner starts this file in the kernel lab (Debian's
// 6.1 kernel under qemu). IPAM: cnikit's static/host-local from dist-bin, Debian's Go static where spec ≤ 1.0.0 is
// enough (a Go binary starts much faster under TCG; the Go 1.1.1 IPAMs have no spec 1.1.0, GC or STATUS).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, test } from 'node:test';
import { ALL_VERSIONS } from '@cnikit/skel';
import {
  cniCall,
  deleteNamedNetns,
  expectCniError,
  hostLocalReservations,
  ipAddrLink,
  type IpJson as J,
  requireKernelFeatures,
  sandboxForFile,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { IPAM_REQUIRED } from './config.ts';
import { plugin } from './index.ts';

const DIST = distBin();
const env = sandboxForFile({ enterHost: true, containers: 1 });

const link = (name: string): J | undefined => ipAddrLink(env.sb.container, name);
/** Links with their addresses, and the routes of every table, of the container (two processes: TCG makes each one costly). */
const containerState = () => ({
  links: env.sb.exec('ip', ['-d', '-j', 'addr', 'show'], { ns: 'container' }).stdout,
  routes: env.sb.exec('ip', ['-j', 'route', 'show', 'table', 'all'], { ns: 'container' }).stdout,
});
const reservations = () => hostLocalReservations(env.dir, 'dmnet');
const conf = (ipam?: object, extra: object = {}): J => ({
  cniVersion: '1.0.0',
  name: 'dmnet',
  type: 'dummy',
  ...(ipam ? { ipam } : {}),
  ...extra,
});
const hostLocal = (routes: object[] = []) => ({
  type: 'host-local',
  ranges: [[{ subnet: '10.76.0.0/24' }]],
  dataDir: env.dir,
  routes,
});
const staticIpam = {
  type: 'static',
  addresses: [{ address: '10.76.1.5/24', gateway: '10.76.1.1' }, { address: 'fd76::5/64' }],
  routes: [{ dst: '10.95.0.0/16' }],
};
const call = (cmd: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS', c: object, o: object = {}) =>
  cniCall(plugin, cmd, c, { path: DIST, netns: env.sb.container.path, containerId: 'dm1', ...o });

describe('dummy on a kernel with the dummy link type (kernel lab)', () => {
  requireKernelFeatures('dummy');
  beforeEach(() => {
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: 'container', check: false });
  });

  test('ADD: a dummy link, up, with the IPAM addresses and routes; CHECK; CHECK after tampering; DEL', async () => {
    const c = conf(staticIpam);
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const l = link('eth0');
    assert.equal(l.linkinfo.info_kind, 'dummy');
    assert.ok(l.flags.includes('UP'));
    assert.deepEqual(r.json.interfaces, [{ name: 'eth0', mac: l.address, sandbox: env.sb.container.path }]);
    assert.deepEqual(
      r.json.ips.map((i: J) => [i.address, i.interface]),
      [
        ['10.76.1.5/24', 0],
        ['fd76::5/64', 0],
      ],
    );
    assert.deepEqual(
      l.addr_info.filter((a: J) => a.scope === 'global').map((a: J) => `${a.local}/${a.prefixlen}`),
      ['10.76.1.5/24', 'fd76::5/64'],
    );
    assert.match(
      env.sb.exec('ip', ['route', 'show', '10.95.0.0/16'], { ns: 'container' }).stdout,
      /via 10\.76\.1\.1/,
    );
    assert.equal((await call('CHECK', { ...c, prevResult: r.json })).code, 0);

    // the IPAM's CHECK runs first (reference order): static needs the prevResult too and says so first
    expectCniError(await call('CHECK', c), 999, 'Required prevResult missing');
    const mac = structuredClone(r.json);
    mac.interfaces[0].mac = '0a:00:00:00:00:99';
    expectCniError(
      await call('CHECK', { ...c, prevResult: mac }),
      999,
      `Interface eth0 Mac 0a:00:00:00:00:99 doesn't match container Mac: ${l.address}`,
    );
    env.sb.exec('ip', ['link', 'set', 'eth0', 'down'], { ns: 'container' });
    expectCniError(await call('CHECK', { ...c, prevResult: r.json }), 999, 'Interface eth0 is down');
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: 'container' });
    env.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'bridge'], { ns: 'container' });
    expectCniError(
      await call('CHECK', { ...c, prevResult: r.json }),
      999,
      'Error: Container interface eth0 not of type dummy',
    );
    assert.equal((await call('DEL', c)).code, 0);
    assert.equal(link('eth0'), undefined);
    assert.equal((await call('DEL', c)).code, 0, 'DEL again');
  });

  test('every spec version: ADD prints it, CHECK (≥0.4.0) and DEL work', async () => {
    // Debian's Go static (fast under TCG) up to 1.0.0; cnikit's host-local for 1.1.0 (the Go 1.1.1 IPAMs lack it)
    for (const v of ALL_VERSIONS) {
      const go = v !== '1.1.0';
      const c = conf(go ? staticIpam : hostLocal(), { cniVersion: v });
      const o = go ? { path: '/usr/lib/cni' } : {};
      const r = await call('ADD', c, o);
      assert.equal(r.code, 0, `${v}: ${r.stdout}`);
      assert.equal(r.json.cniVersion, v);
      if (!['0.1.0', '0.2.0', '0.3.0', '0.3.1'].includes(v))
        assert.equal((await call('CHECK', { ...c, prevResult: r.json }, o)).code, 0, v);
      assert.equal((await call('DEL', c, o)).code, 0, v);
      assert.equal(link('eth0'), undefined);
      assert.deepEqual(reservations(), []);
    }
  });

  test('bad input: the reference messages, nothing created', async () => {
    const before = containerState();
    expectCniError(await call('ADD', conf()), 7, IPAM_REQUIRED);
    expectCniError(await call('CHECK', conf()), 7, IPAM_REQUIRED);
    expectCniError(
      await call('ADD', conf({ type: 5 })),
      7,
      /^failed to parse network config: config\.ipam\.type/,
    );
    expectCniError(
      await call('ADD', conf(staticIpam), { netns: '/run/netns/none' }),
      999,
      /^failed to open netns "\/run\/netns\/none"/,
    );
    // a configuration error of an exec'd host-local (not validated before the link is made: this test process is
    // not the multicall executable): the dummy is rolled back, and neither the rollback's IPAM DEL nor a DEL of a
    // container never added creates host-local's store
    const fresh = join(env.dir, 'ipam-fresh');
    expectCniError(
      await call('ADD', conf({ ...hostLocal(), dataDir: fresh, subnet: 1 })),
      7,
      'ipam.subnet: expected string, got number 1',
    );
    assert.equal((await call('DEL', conf({ ...hostLocal(), dataDir: fresh }))).code, 0);
    assert.equal(existsSync(fresh), false, 'no dataDir created by the rollback or the DEL');
    assert.deepEqual(containerState(), before);
    env.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'bridge'], { ns: 'container' });
    expectCniError(await call('ADD', conf(hostLocal())), 999, /^failed to create dummy: /);
    assert.equal(link('eth0').linkinfo.info_kind, 'bridge');
    assert.deepEqual(reservations(), []);
  });

  test('rollback: a failing IPAM route removes the dummy and releases the address', async () => {
    const before = containerState();
    const r = await call('ADD', conf(hostLocal([{ dst: '10.94.0.0/16', gw: '172.31.7.7' }])));
    assert.notEqual(r.code, 0);
    assert.match(r.json.msg, /failed to add route '10\.94\.0\.0\/16 via 172\.31\.7\.7 dev eth0/);
    assert.deepEqual(containerState(), before);
    assert.deepEqual(reservations(), []);
  });

  test('DEL with the namespace gone; GC and STATUS delegate to the IPAM', async () => {
    const cn = env.sb.newContainer();
    const c = conf(hostLocal(), { cniVersion: '1.1.0' });
    assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'gone' })).code, 0);
    deleteNamedNetns(cn);
    assert.equal((await call('DEL', c, { netns: cn.path, containerId: 'gone' })).code, 0);
    assert.deepEqual(reservations(), []);
    assert.equal((await call('ADD', c, { containerId: 'stale' })).code, 0);
    assert.equal(reservations().length, 1);
    const g = await cniCall(plugin, 'GC', { ...c, 'cni.dev/valid-attachments': [] }, { path: DIST });
    assert.equal(g.code, 0, g.stdout);
    assert.deepEqual(reservations(), []);
    assert.equal((await cniCall(plugin, 'STATUS', c, { path: DIST })).code, 0);
    assert.equal((await call('DEL', c, { containerId: 'stale' })).code, 0);
  });
});
