// cnikit-kernel-features: macvlan ipvlan vlan
/**
 * macvlan against the real kernel (in the kernel lab: this machine's kernel has no macvlan). The sandbox's host
 * namespace plays the node: master `m0` (a veth whose peer is in an "outside" namespace) carries its default route.
 * IPAM is cnikit's static/host-local from dist-bin (exec'd like any delegate).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import {
  cniCall,
  createNamedNetns,
  deleteNamedNetns,
  expectCniError,
  expectOk,
  globalAddrs,
  ipLink,
  type IpJson as J,
  linkLab,
  linkNames,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';

const lab = linkLab({
  plugin,
  dist: distBin(),
  network: 'mvnet',
  type: 'macvlan',
  subnet: '10.70.0.0/24',
  rangeStart: '10.70.0.100',
});
const { env, opts, c, conf, hostLocal } = lab;
const staticIpam = (address: string, extra: object = {}) => ({
  ipam: {
    type: 'static',
    addresses: [{ address, gateway: '10.70.0.1' }],
    routes: [{ dst: '10.99.0.0/16' }],
    dns: { nameservers: ['10.70.0.53'] },
    ...extra,
  },
});

let outside = '';
before(() => {
  const out = createNamedNetns('cnikit-outside');
  outside = out.name;
  env.sb.exec('ip', ['link', 'add', 'm0', 'type', 'veth', 'peer', 'name', 'm0p', 'netns', outside]);
  env.sb.exec('ip', ['link', 'set', 'm0', 'up']);
  env.sb.exec('ip', ['addr', 'add', '10.70.0.2/24', 'dev', 'm0']);
  env.sb.exec('ip', ['route', 'add', 'default', 'via', '10.70.0.1', 'dev', 'm0']);
  env.sb.exec('ip', ['-n', outside, 'link', 'set', 'm0p', 'up']);
  env.sb.exec('ip', ['-n', outside, 'addr', 'add', '10.70.0.1/24', 'dev', 'm0p']);
});
after(() => {
  if (outside) deleteNamedNetns(outside);
});

describe('macvlan ADD/DEL', () => {
  test('L2 (no IPAM), default master = the default route interface: link, result, DEL idempotent', async () => {
    const m0 = nl.getLinkOrThrow('m0');
    const res = expectOk<J>(await cniCall(plugin, 'ADD', conf(), { netns: c(0).path }));
    assert.equal(res.cniVersion, '1.1.0');
    assert.equal(res.interfaces.length, 1);
    assert.deepEqual(Object.keys(res.interfaces[0]).sort(), ['mac', 'name', 'sandbox']);
    assert.equal(res.interfaces[0].name, 'eth0');
    assert.equal(res.interfaces[0].sandbox, c(0).path);
    assert.equal(res.ips, undefined);
    const l = ipLink(c(0).name, 'eth0');
    assert.equal(l.linkinfo.info_kind, 'macvlan');
    assert.equal(l.linkinfo.info_data.mode, 'bridge');
    assert.equal(l.address, res.interfaces[0].mac);
    assert.ok(l.flags.includes('UP'));
    const d = nl.withNetns(c(0).path, () => nl.getLinkDetails('eth0'));
    assert.equal(d?.linkIndex, m0.index, 'parent is m0');
    assert.equal(d?.mtu, m0.mtu);
    // nothing in the host namespace but m0 and lo
    assert.deepEqual(linkNames(env.sb.host.name), ['lo', 'm0']);

    expectOk<J>(await cniCall(plugin, 'DEL', conf(), { netns: c(0).path }));
    assert.deepEqual(linkNames(c(0).name), ['lo']);
    expectOk<J>(await cniCall(plugin, 'DEL', conf(), { netns: c(0).path }));
    expectOk<J>(await cniCall(plugin, 'DEL', conf(), { netns: '' }));
    expectOk<J>(await cniCall(plugin, 'DEL', conf(), { netns: '/run/netns/cnikit-does-not-exist' }));
  });

  for (const mode of ['bridge', 'private', 'vepa', 'passthru']) {
    test(`mode ${mode}, mtu, mac, bcqueuelen, explicit master`, async () => {
      // passthru takes the master's MAC: the kernel refuses another one
      const mac = mode === 'passthru' ? nl.getLinkOrThrow('m0').mac : '02:42:ac:11:00:07';
      const cf = conf({
        master: 'm0',
        mode,
        mtu: 1400,
        bcqueuelen: 123,
        ...(mode === 'passthru' ? {} : { mac }),
      });
      const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, { netns: c(0).path }));
      const l = ipLink(c(0).name, 'eth0');
      assert.equal(l.linkinfo.info_data.mode, mode);
      assert.equal(l.mtu, 1400);
      assert.equal(l.address, mac);
      assert.equal(res.interfaces[0].mac, mac);
      const d = nl.withNetns(c(0).path, () => nl.getLinkDetails('eth0'));
      assert.equal(d?.macvlan?.mode, mode);
      assert.equal(d?.macvlan?.bcQueueLen, 123);
      expectOk<J>(await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, { netns: c(0).path }));
      expectOk<J>(await cniCall(plugin, 'DEL', cf, { netns: c(0).path }));
      assert.deepEqual(linkNames(c(0).name), ['lo']);
    });
  }

  test('MAC from CNI_ARGS, overridden by runtimeConfig.mac', async () => {
    const args = 'IgnoreUnknown=1;MAC=02:42:ac:11:00:08';
    let res = expectOk<J>(await cniCall(plugin, 'ADD', conf(), { netns: c(0).path, args }));
    assert.equal(ipLink(c(0).name, 'eth0').address, '02:42:ac:11:00:08');
    expectOk<J>(await cniCall(plugin, 'DEL', conf(), { netns: c(0).path, args }));
    const cf = conf({ runtimeConfig: { mac: '02:42:ac:11:00:09' } });
    res = expectOk<J>(await cniCall(plugin, 'ADD', cf, { netns: c(0).path, args }));
    assert.equal(res.interfaces[0].mac, '02:42:ac:11:00:09');
    assert.equal(ipLink(c(0).name, 'eth0').address, '02:42:ac:11:00:09');
    expectOk<J>(await cniCall(plugin, 'DEL', cf, { netns: c(0).path }));
  });

  test('linkInContainer: master and default route inside the container', async () => {
    env.sb.exec('ip', ['link', 'add', 'cm0', 'type', 'veth', 'peer', 'name', 'cm0p'], { ns: c(1) });
    env.sb.exec('ip', ['link', 'set', 'cm0', 'up'], { ns: c(1) });
    env.sb.exec('ip', ['addr', 'add', '10.71.0.2/24', 'dev', 'cm0'], { ns: c(1) });
    env.sb.exec('ip', ['route', 'add', 'default', 'via', '10.71.0.1'], { ns: c(1) });
    const cm0 = nl.withNetns(c(1).path, () => nl.getLinkOrThrow('cm0'));
    for (const cf of [conf({ linkInContainer: true }), conf({ linkInContainer: true, master: 'cm0' })]) {
      const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, { netns: c(1).path, ifName: 'net1' }));
      const d = nl.withNetns(c(1).path, () => nl.getLinkDetails('net1'));
      assert.equal(d?.kind, 'macvlan');
      assert.equal(d?.linkIndex, cm0.index);
      assert.equal(d?.linkNetnsId, undefined, 'parent in the same namespace');
      expectOk<J>(
        await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, { netns: c(1).path, ifName: 'net1' }),
      );
      expectOk<J>(await cniCall(plugin, 'DEL', cf, { netns: c(1).path, ifName: 'net1' }));
      assert.equal(ipLink(c(1).name, 'net1'), undefined);
    }
    // a master that exists only on the host is not found in the container
    const r = await cniCall(plugin, 'ADD', conf({ linkInContainer: true, master: 'm0' }), {
      netns: c(1).path,
    });
    expectCniError(r, 999, 'failed to lookup master "m0": Link not found');
    env.sb.exec('ip', ['link', 'del', 'cm0'], { ns: c(1) });
  });
});

describe('macvlan with IPAM, every version', () => {
  for (const v of ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`static IPAM, cniVersion ${v}`, async () => {
      const cf = { ...conf(staticIpam('10.70.0.10/24')), cniVersion: v, dns: { nameservers: ['10.0.0.10'] } };
      const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, { ...opts, netns: c(0).path }));
      assert.equal(res.cniVersion, v);
      if (v === '0.1.0' || v === '0.2.0') {
        assert.equal(res.ip4.ip, '10.70.0.10/24');
        assert.equal(res.ip4.gateway, '10.70.0.1');
      } else {
        assert.equal(res.interfaces.length, 1);
        assert.equal(res.ips.length, 1);
        assert.equal(res.ips[0].address, '10.70.0.10/24');
        assert.equal(res.ips[0].interface, 0);
        if (v.startsWith('0.')) assert.equal(res.ips[0].version, '4');
        assert.deepEqual(res.routes, [{ dst: '10.99.0.0/16' }]);
      }
      // the config's dns wins, like the reference (result.DNS = n.DNS)
      assert.deepEqual(res.dns, { nameservers: ['10.0.0.10'] });
      assert.deepEqual(globalAddrs(c(0).name, 'eth0'), ['10.70.0.10/24']);
      const routes = env.sb.exec('ip', ['-n', c(0).name, 'route']).stdout;
      assert.match(routes, /10\.99\.0\.0\/16 via 10\.70\.0\.1 dev eth0/);
      const notify = env.sb
        .exec('cat', ['/proc/sys/net/ipv4/conf/eth0/arp_notify'], { ns: c(0) })
        .stdout.trim();
      assert.equal(notify, '1');
      // CHECK exists from spec 0.4.0 on
      if (v === '0.4.0' || v.startsWith('1.')) {
        expectOk<J>(
          await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, { ...opts, netns: c(0).path }),
        );
      }
      expectOk<J>(await cniCall(plugin, 'DEL', cf, { ...opts, netns: c(0).path }));
      assert.deepEqual(linkNames(c(0).name), ['lo']);
    });
  }
});

describe('macvlan CHECK after tampering', () => {
  test('mode, MAC, address, route, link gone, master gone: the reference messages', async () => {
    const cf = conf({ master: 'm0', ...staticIpam('10.70.0.11/24') });
    const o = { ...opts, netns: c(0).path };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
    const check = (extra: object = {}) => cniCall(plugin, 'CHECK', { ...cf, prevResult: res, ...extra }, o);
    expectOk<J>(await check());
    const inC = (args: string[]) => env.sb.exec('ip', args, { ns: c(0) });

    inC(['link', 'set', 'eth0', 'type', 'macvlan', 'mode', 'vepa']);
    expectCniError(await check(), 999, 'container macvlan mode vepa does not match expected value: bridge');
    inC(['link', 'set', 'eth0', 'type', 'macvlan', 'mode', 'bridge']);
    expectOk<J>(await check());

    const mac = res.interfaces[0].mac;
    inC(['link', 'set', 'eth0', 'address', '02:42:ac:11:00:99']);
    expectCniError(
      await check(),
      999,
      `interface eth0 Mac ${mac} doesn't match container Mac: 02:42:ac:11:00:99`,
    );
    inC(['link', 'set', 'eth0', 'address', mac]);
    expectOk<J>(await check());

    inC(['route', 'del', '10.99.0.0/16']);
    expectCniError(await check(), 999, /Expected Route .*10\.99\.0\.0.* not found in routing table/);
    inC(['route', 'add', '10.99.0.0/16', 'via', '10.70.0.1']);
    expectOk<J>(await check());

    inC(['addr', 'del', '10.70.0.11/24', 'dev', 'eth0']);
    expectCniError(await check(), 999, 'Failed to match addr 10.70.0.11/24 on interface eth0');
    inC(['addr', 'add', '10.70.0.11/24', 'dev', 'eth0']);
    inC(['route', 'add', '10.99.0.0/16', 'via', '10.70.0.1']);
    expectOk<J>(await check());

    expectCniError(
      await check({ mode: 'private' }),
      999,
      'container macvlan mode bridge does not match expected value: private',
    );
    // the IPAM's CHECK runs first and wants the prevResult too (cnikit's static, like the reference's)
    expectCniError(await check({ prevResult: undefined }), 999, 'Required prevResult missing');
    expectCniError(
      await cniCall(plugin, 'CHECK', { ...conf({ master: 'm0' }) }, o),
      999,
      'required prevResult missing',
    );
    expectCniError(
      await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, { ...o, ifName: 'eth1' }),
      999,
      `sandbox in prevResult  doesn't match configured netns: ${c(0).path}`,
    );
    expectCniError(await check({ master: 'nope' }), 999, 'failed to lookup master "nope": Link not found');

    inC(['link', 'del', 'eth0']);
    expectCniError(await check(), 999, 'container Interface name in prevResult: eth0 not found');
    expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
  });
});

describe('macvlan bad input and rollback: nothing left behind', () => {
  const clean = () => lab.clean(['lo', 'm0']);
  test('reference error texts', async () => {
    const o = { ...opts, netns: c(0).path };
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ mode: 'bogus' }), o),
      999,
      'unknown macvlan mode: "bogus"',
    );
    clean();
    await lab.masterErrors({ mtu: true });
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ mac: 'zz:00' }), o),
      999,
      'invalid args zz:00 for MAC addr: address zz:00: invalid MAC address',
    );
    expectCniError(await cniCall(plugin, 'ADD', conf({ mtu: 'x' }), o), 7, /^failed to load netconf: /);
    expectCniError(await cniCall(plugin, 'ADD', conf(), { ...o, args: 'FOO=1' }), 999, /ARGS: unknown args/);
    clean();
  });
  test('the interface name is taken in the container: rename fails, the temporary link is removed', async () => {
    env.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0p'], { ns: c(0) });
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c(0).path });
    expectCniError(r, 999, 'failed to rename macvlan to "eth0": file exists');
    assert.deepEqual(linkNames(c(0).name), ['eth0', 'eth0p', 'lo']);
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: c(0) });
    clean();
  });
  test('IPAM missing, IPAM failing after allocation: link and reservation rolled back', async () => {
    const o = { ...opts, netns: c(0).path };
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ ipam: { type: 'nope' } }), o),
      999,
      /failed to find plugin "nope"/,
    );
    clean();
    // a configuration error of an exec'd host-local (this test process is not the multicall executable, so the
    // IPAM is not validated before the link is made): the link is rolled back, and the rollback's IPAM DEL creates
    // no store — neither does a DEL of a container never added
    const fresh = join(env.dir, 'ipam-fresh');
    const badConf = conf(hostLocal({ dataDir: fresh, subnet: 1 }));
    expectCniError(await cniCall(plugin, 'ADD', badConf, o), 7, 'ipam.subnet: expected string, got number 1');
    clean();
    expectOk(await cniCall(plugin, 'DEL', conf(hostLocal({ dataDir: fresh })), o));
    assert.equal(existsSync(fresh), false, 'no dataDir created by the rollback or the DEL');
    // host-local allocates, then the route cannot be added (unreachable gateway): ADD fails after allocation
    const bad = conf(hostLocal({ routes: [{ dst: '10.98.0.0/16', gw: '192.0.2.1' }] }));
    const r = await cniCall(plugin, 'ADD', bad, o);
    assert.notEqual(r.code, 0, r.stdout);
    clean();
  });
});

describe('macvlan DEL with the namespace gone, GC, STATUS', () => {
  test('DEL after the namespace was deleted releases the IPAM reservation', async () => {
    const cf = conf(hostLocal());
    await lab.delNetnsGone('cnikit-mvgone', cf);
    expectOk<J>(await cniCall(plugin, 'DEL', cf, { ...opts, netns: '', containerId: 'gone' }));
  });
  test('GC releases the reservations of attachments not in the valid list', async () => {
    await lab.gcKeepsValid(conf(hostLocal()));
  });
  test('STATUS: IPAM STATUS, then the master (code 50 when it is missing)', async () => {
    expectOk<J>(await cniCall(plugin, 'STATUS', conf(hostLocal()), opts));
    expectOk<J>(await cniCall(plugin, 'STATUS', conf({ master: 'm0' }), opts));
    await lab.statusMasterMissing();
    expectCniError(
      await cniCall(plugin, 'STATUS', conf({ ipam: { type: 'nope' } }), opts),
      999,
      /failed to find plugin/,
    );
  });
});
