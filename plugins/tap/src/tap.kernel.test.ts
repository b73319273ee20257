import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { beforeEach, describe, test } from 'node:test';
import { ALL_VERSIONS } from '@cnikit/skel';
import {
  cniCall,
  deleteNamedNetns,
  expectCniError,
  hostLocalReservations,
  ipAddrLink,
  ipAddrLinks,
  type IpJson as J,
  sandboxForFile,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';
import { tempTapName } from './kernel.ts';

const DIST = distBin();
const env = sandboxForFile({ enterHost: true, containers: 2 });

const links = (k = 0): J[] => ipAddrLinks(env.sb.containers[k]);
const link = (name: string, k = 0): J | undefined => ipAddrLink(env.sb.containers[k], name);
const reservations = (net: string) => hostLocalReservations(env.dir, net);
const conf = (extra: object = {}): J => ({ cniVersion: '1.0.0', name: 'tapnet', type: 'tap', ...extra });
const hostLocal = (subnet: string, extra: object = {}) => ({
  type: 'host-local',
  ranges: [[{ subnet }]],
  dataDir: env.dir,
  ...extra,
});
const call = (cmd: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS', c: object, o: object = {}) =>
  cniCall(plugin, cmd, c, { path: DIST, netns: env.sb.containers[0]!.path, containerId: 'tap1', ...o });

describe('tap on the real kernel (in-process)', () => {
  beforeEach(() => {
    for (const c of env.sb.containers)
      for (const n of ['eth0', 'br0']) env.sb.exec('ip', ['-n', c.name, 'link', 'del', n], { check: false });
  });

  test('L2 defaults: a persistent tap, no vnet header, no packet information, no owner, up', async () => {
    const r = await call('ADD', conf());
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const l = link('eth0');
    assert.deepEqual(r.json, {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', mac: l.address, sandbox: env.sb.containers[0]!.path }],
    });
    assert.equal(l.linkinfo.info_kind, 'tun');
    const d = l.linkinfo.info_data;
    assert.equal(d.type, 'tap');
    assert.equal(d.pi, false);
    assert.equal(d.vnet_hdr, false);
    assert.equal(d.multi_queue, false);
    assert.equal(d.persist, true);
    assert.equal(d.user, undefined);
    assert.equal(d.group, undefined);
    assert.ok(l.flags.includes('UP'));
    assert.equal((await call('CHECK', { ...conf(), prevResult: r.json })).code, 0);
    assert.equal((await call('DEL', conf())).code, 0);
    assert.equal(link('eth0'), undefined);
    assert.equal((await call('DEL', conf())).code, 0, 'DEL again');
  });

  test('owner + group + multiQueue + mtu + mac: the reference netlink path (vnet header), every key applied', async () => {
    const c = conf({ owner: 1001, group: 1002, multiQueue: true, mtu: 1400, mac: '0A:58:0A:00:00:09' });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const l = link('eth0');
    const d = l.linkinfo.info_data;
    assert.equal(d.user, 1001);
    assert.equal(d.group, 1002);
    assert.equal(d.multi_queue, true);
    assert.equal(d.vnet_hdr, true);
    assert.equal(d.pi, false);
    assert.equal(l.mtu, 1400);
    assert.equal(l.address, '0a:58:0a:00:00:09');
    assert.equal(r.json.interfaces[0].mac, '0a:58:0a:00:00:09');
    assert.equal((await call('DEL', c)).code, 0);
  });

  test('owner only: the reference ip-tool path (no vnet header); runtimeConfig.mac > CNI_ARGS MAC > mac', async () => {
    const c = conf({ owner: 1001, mac: '0a:58:00:00:00:01', runtimeConfig: { mac: '0a:58:00:00:00:03' } });
    const r = await call('ADD', c, { args: 'IgnoreUnknown=1;MAC=0a:58:00:00:00:02' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const l = link('eth0');
    assert.equal(l.linkinfo.info_data.user, 1001);
    assert.equal(l.linkinfo.info_data.group, undefined);
    assert.equal(l.linkinfo.info_data.vnet_hdr, false);
    assert.equal(l.address, '0a:58:00:00:00:03');
    assert.equal((await call('DEL', c)).code, 0);
    const c2 = conf({ mac: '0a:58:00:00:00:01' });
    const r2 = await call('ADD', c2, { args: 'IgnoreUnknown=1;MAC=0a:58:00:00:00:02' });
    assert.equal(r2.code, 0, r2.stdout);
    assert.equal(link('eth0').address, '0a:58:00:00:00:02');
    assert.equal((await call('DEL', c2)).code, 0);
  });

  test('selinuxContext on a machine without SELinux: created (the label cannot apply), same flags as ip tuntap', async () => {
    assert.equal(existsSync('/sys/fs/selinux/enforce'), false, 'this test expects SELinux disabled');
    const c = conf({ selinuxContext: 'system_u:system_r:container_t:s0', owner: 4005, group: 4006 });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout);
    const d = link('eth0').linkinfo.info_data;
    assert.equal(d.vnet_hdr, false);
    assert.equal(d.user, 4005);
    assert.equal((await call('DEL', c)).code, 0);
  });

  test('bridge: the tap becomes a port of a bridge in the container; a missing bridge fails and leaves nothing', async () => {
    env.sb.exec('ip', ['link', 'add', 'br0', 'type', 'bridge'], { ns: env.sb.containers[0]! });
    const c = conf({ bridge: 'br0' });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout);
    assert.equal(link('eth0').master, 'br0');
    assert.equal((await call('DEL', c)).code, 0);
    const before = env.sb.snapshot(env.sb.containers[1]!);
    expectCniError(
      await call('ADD', conf({ bridge: 'nobr' }), { netns: env.sb.containers[1]!.path }),
      999,
      'failed to get bridge nobr: Link not found',
    );
    assert.deepEqual(env.sb.snapshot(env.sb.containers[1]!), before);
  });

  test('L3 with IPAM: addresses on the tap, CHECK, CHECK after tampering, every spec version', async () => {
    for (const v of ALL_VERSIONS) {
      const c = conf({
        cniVersion: v,
        ipam: hostLocal('10.73.0.0/24', { routes: [{ dst: '10.97.0.0/16' }] }),
      });
      const r = await call('ADD', c);
      assert.equal(r.code, 0, `${v}: ${r.stdout}`);
      assert.equal(r.json.cniVersion, v);
      const l = link('eth0');
      assert.match(l.addr_info.find((a: J) => a.family === 'inet').local, /^10\.73\.0\.\d+$/);
      assert.match(
        env.sb.exec('ip', ['route', 'show', '10.97.0.0/16'], { ns: env.sb.containers[0]! }).stdout,
        /via 10\.73\.0\.1 dev eth0/,
      );
      if (!['0.1.0', '0.2.0'].includes(v)) assert.equal(r.json.ips[0].interface, 0);
      if (!['0.1.0', '0.2.0', '0.3.0', '0.3.1'].includes(v)) {
        const chk = await call('CHECK', { ...c, prevResult: r.json });
        assert.equal(chk.code, 0, `${v}: ${chk.stdout}`);
      }
      assert.equal((await call('DEL', c)).code, 0);
      assert.deepEqual(reservations('tapnet'), []);
    }
    const c = conf({ ipam: hostLocal('10.73.0.0/24') });
    const r = await call('ADD', c);
    assert.equal(r.code, 0);
    expectCniError(await call('CHECK', c), 999, 'Required prevResult missing');
    const wrong = structuredClone(r.json);
    wrong.interfaces[0].mac = '0a:00:00:00:00:99';
    expectCniError(
      await call('CHECK', { ...c, prevResult: wrong }),
      999,
      `Interface eth0 Mac 0a:00:00:00:00:99 doesn't match container Mac: ${r.json.interfaces[0].mac}`,
    );
    const ip = r.json.ips[0].address;
    env.sb.exec('ip', ['addr', 'del', ip, 'dev', 'eth0'], { ns: env.sb.containers[0]! });
    expectCniError(
      await call('CHECK', { ...c, prevResult: r.json }),
      999,
      `Failed to match addr ${ip} on interface eth0`,
    );
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: env.sb.containers[0]! });
    expectCniError(
      await call('CHECK', { ...c, prevResult: r.json }),
      999,
      'Container Interface name in prevResult: eth0 not found',
    );
    assert.equal((await call('DEL', c)).code, 0);
    assert.deepEqual(reservations('tapnet'), []);
  });

  test('bad input: reference messages, nothing created', async () => {
    const before = env.sb.snapshot(env.sb.containers[0]!);
    expectCniError(
      await call('ADD', conf({ mac: 'zz' })),
      7,
      'invalid args zz for MAC addr: address zz: invalid MAC address',
    );
    expectCniError(await call('ADD', conf({ owner: -1 })), 7, /^failed to load netconf: config\.owner/);
    expectCniError(
      await call('ADD', conf({ multiQueue: 'yes' })),
      7,
      /^failed to load netconf: config\.multiQueue/,
    );
    expectCniError(
      await call('ADD', conf(), { netns: '/run/netns/none' }),
      999,
      /^failed to open netns "\/run\/netns\/none"/,
    );
    assert.deepEqual(env.sb.snapshot(env.sb.containers[0]!), before);
    // an existing eth0 in the container: the rename fails and the temporary tap goes
    env.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'bridge'], { ns: env.sb.containers[0]! });
    const mid = env.sb.snapshot(env.sb.containers[0]!);
    expectCniError(await call('ADD', conf()), 999, /^failed to rename tap to "eth0": /);
    assert.deepEqual(env.sb.snapshot(env.sb.containers[0]!), mid);
  });

  test('rollback: a failing IPAM route removes the tap and releases the address', async () => {
    const before = env.sb.snapshot(env.sb.containers[0]!);
    const c = conf({
      ipam: hostLocal('10.74.0.0/24', { routes: [{ dst: '10.96.0.0/16', gw: '172.31.9.9' }] }),
    });
    const r = await call('ADD', c);
    assert.notEqual(r.code, 0);
    assert.match(r.json.msg, /failed to add route '10\.96\.0\.0\/16 via 172\.31\.9\.9 dev eth0/);
    assert.deepEqual(env.sb.snapshot(env.sb.containers[0]!), before);
    assert.deepEqual(reservations('tapnet'), []);
  });

  test('SIGKILL between creating the tap and renaming it: DEL and the next ADD remove the tap left behind', async () => {
    // what an ADD killed right after TUNSETPERSIST leaves: a persistent tap under its temporary name
    const tmp = tempTapName('eth0');
    assert.match(tmp, /^cnitap[0-9a-f]{9}$/);
    const leftover = () =>
      env.sb.exec('ip', ['tuntap', 'add', 'mode', 'tap', 'name', tmp], { ns: env.sb.containers[0]! });
    leftover();
    assert.ok(link(tmp));
    assert.equal((await call('DEL', conf())).code, 0);
    assert.equal(link(tmp), undefined, 'DEL removes the half-made tap');
    leftover();
    const r = await call('ADD', conf());
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(
      links()
        .map((l) => l.ifname)
        .sort(),
      ['eth0', 'lo'],
      'ADD again: only its own tap',
    );
    // a link of that name that is not a tap is never deleted: ADD fails and says why
    assert.equal((await call('DEL', conf())).code, 0);
    env.sb.exec('ip', ['link', 'add', tmp, 'type', 'veth', 'peer', 'name', 'tmppeer'], {
      ns: env.sb.containers[0]!,
    });
    expectCniError(await call('ADD', conf()), 999, `failed to create tap: "${tmp}" exists and is not a tap`);
    assert.equal((await call('DEL', conf())).code, 0);
    assert.ok(link(tmp), 'the veth stays');
    env.sb.exec('ip', ['link', 'del', tmp], { ns: env.sb.containers[0]! });
  });

  test('DEL with the namespace gone; GC and STATUS delegate to the IPAM', async () => {
    const cn = env.sb.newContainer();
    const c = conf({ cniVersion: '1.1.0', ipam: hostLocal('10.75.0.0/24') });
    assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'gone' })).code, 0);
    deleteNamedNetns(cn);
    assert.equal((await call('DEL', c, { netns: cn.path, containerId: 'gone' })).code, 0);
    assert.deepEqual(reservations('tapnet'), []);
    assert.equal((await call('ADD', c, { containerId: 'stale' })).code, 0);
    assert.equal(reservations('tapnet').length, 1);
    const g = await cniCall(plugin, 'GC', { ...c, 'cni.dev/valid-attachments': [] }, { path: DIST });
    assert.equal(g.code, 0, g.stdout);
    assert.deepEqual(reservations('tapnet'), []);
    assert.equal((await cniCall(plugin, 'STATUS', c, { path: DIST })).code, 0);
    const st = await cniCall(plugin, 'STATUS', { ...c, ipam: { type: 'nope' } }, { path: DIST });
    assert.match(st.json.msg, /failed to find plugin "nope"/);
    assert.equal((await call('DEL', c, { containerId: 'stale' })).code, 0);
  });
});
