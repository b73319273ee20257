// cnikit-kernel-features: macvlan ipvlan vlan
/**
 * ipvlan against the real kernel (in the kernel lab: this machine's kernel has no ipvlan). The sandbox's host
 * namespace plays the node: master `i0` (a veth) carries its default route. IPAM is cnikit's static/host-local from
 * dist-bin (exec'd like any delegate).
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import {
  cniCall,
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
  network: 'ipvnet',
  type: 'ipvlan',
  subnet: '10.72.0.0/24',
  rangeStart: '10.72.0.100',
});
const { env, opts, c, conf, hostLocal } = lab;

const staticIpam = (address: string) => ({
  ipam: {
    type: 'static',
    addresses: [{ address, gateway: address.replace(/\.\d+\/\d+$/, '.1') }],
    routes: [{ dst: '0.0.0.0/0' }],
  },
});
before(() => {
  env.sb.exec('ip', ['link', 'add', 'i0', 'type', 'veth', 'peer', 'name', 'i0p']);
  env.sb.exec('ip', ['link', 'set', 'i0', 'up']);
  env.sb.exec('ip', ['addr', 'add', '10.72.0.2/24', 'dev', 'i0']);
  env.sb.exec('ip', ['route', 'add', 'default', 'via', '10.72.0.1', 'dev', 'i0']);
});

describe('ipvlan ADD/CHECK/DEL', () => {
  for (const mode of ['', 'l2', 'l3', 'l3s']) {
    test(`mode ${mode || '(default l2)'}${mode ? ', explicit master, mtu' : ', default master'}`, async () => {
      const cf = conf({ ...(mode ? { mode, master: 'i0', mtu: 1400 } : {}), ...staticIpam('10.72.0.10/24') });
      const o = { ...opts, netns: c(0).path };
      const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
      assert.equal(res.interfaces.length, 1);
      assert.equal(res.interfaces[0].name, 'eth0');
      assert.equal(res.interfaces[0].sandbox, c(0).path);
      assert.equal(res.ips[0].address, '10.72.0.10/24');
      assert.equal(res.ips[0].interface, 0);
      const l = ipLink(c(0).name, 'eth0');
      assert.equal(l.linkinfo.info_kind, 'ipvlan');
      assert.equal(l.linkinfo.info_data.mode, mode || 'l2');
      assert.equal(l.mtu, mode ? 1400 : 1500);
      assert.equal(l.address, nl.getLinkOrThrow('i0').mac, 'an ipvlan shares its master MAC');
      assert.equal(res.interfaces[0].mac, l.address);
      assert.equal(
        nl.withNetns(c(0).path, () => nl.getLinkDetails('eth0'))?.linkIndex,
        nl.getLinkOrThrow('i0').index,
      );
      assert.deepEqual(globalAddrs(c(0).name, 'eth0'), ['10.72.0.10/24']);
      expectOk<J>(await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, o));
      expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
      assert.deepEqual(linkNames(c(0).name), ['lo']);
      expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
    });
  }

  lab.versions(['0.1.0', '0.2.0', '0.3.1', '0.4.0', '1.0.0'], staticIpam('10.72.0.11/24'), '10.72.0.11/24');

  test('chained without IPAM: prevResult gives the master and the addresses', async () => {
    const prevResult = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'i0' }],
      ips: [{ address: '10.72.0.20/24', gateway: '10.72.0.1', interface: 0 }],
      routes: [{ dst: '10.98.0.0/16', gw: '10.72.0.1' }],
    };
    const cf = { ...conf(), cniVersion: '1.0.0', prevResult };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, { netns: c(0).path }));
    assert.deepEqual(res.interfaces, [
      { name: 'eth0', mac: nl.getLinkOrThrow('i0').mac, sandbox: c(0).path },
    ]);
    assert.deepEqual(res.ips, [{ address: '10.72.0.20/24', gateway: '10.72.0.1', interface: 0 }]);
    assert.deepEqual(res.routes, [{ dst: '10.98.0.0/16', gw: '10.72.0.1' }]);
    assert.deepEqual(globalAddrs(c(0).name, 'eth0'), ['10.72.0.20/24']);
    expectOk<J>(
      await cniCall(
        plugin,
        'CHECK',
        { ...conf(), cniVersion: '1.0.0', prevResult: res },
        { netns: c(0).path },
      ),
    );
    expectOk<J>(await cniCall(plugin, 'DEL', cf, { netns: c(0).path }));
    assert.deepEqual(linkNames(c(0).name), ['lo']);
    // two interfaces in prevResult: no master to take
    const two = { ...cf, prevResult: { ...prevResult, interfaces: [{ name: 'a' }, { name: 'b' }] } };
    expectCniError(
      await cniCall(plugin, 'ADD', two, { netns: c(0).path }),
      999,
      'chained master failure. PrevResult lacks a single named interface',
    );
  });

  test('linkInContainer: the master in the container', async () => {
    env.sb.exec('ip', ['link', 'add', 'ci0', 'type', 'veth', 'peer', 'name', 'ci0p'], { ns: c(1) });
    env.sb.exec('ip', ['link', 'set', 'ci0', 'up'], { ns: c(1) });
    const cf = conf({ linkInContainer: true, master: 'ci0', mode: 'l3', ...staticIpam('10.73.0.10/24') });
    const o = { ...opts, netns: c(1).path, ifName: 'net1' };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
    const d = nl.withNetns(c(1).path, () => nl.getLinkDetails('net1'));
    assert.equal(d?.ipvlan?.mode, 'l3');
    assert.equal(
      d?.linkIndex,
      nl.withNetns(c(1).path, () => nl.getLinkOrThrow('ci0').index),
    );
    expectOk<J>(await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, o));
    expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
    assert.deepEqual(linkNames(c(1).name), ['ci0', 'ci0p', 'lo']);
    env.sb.exec('ip', ['link', 'del', 'ci0'], { ns: c(1) });
  });

  test('CHECK after tampering: mode, address, link; CHECK without master passes', async () => {
    const cf = conf(staticIpam('10.72.0.12/24'));
    const o = { ...opts, netns: c(0).path };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
    const check = (extra: object = {}) => cniCall(plugin, 'CHECK', { ...cf, prevResult: res, ...extra }, o);
    expectOk<J>(await check());
    expectOk<J>(await check({ master: 'i0' }));
    expectCniError(await check({ master: 'nope' }), 999, 'failed to lookup master "nope": Link not found');
    env.sb.exec('ip', ['link', 'set', 'eth0', 'type', 'ipvlan', 'mode', 'l3'], { ns: c(0) });
    expectCniError(await check(), 999, 'Container IPVlan mode l3 does not match expected value: l2');
    expectOk<J>(await check({ mode: 'l3' }));
    env.sb.exec('ip', ['addr', 'flush', 'dev', 'eth0'], { ns: c(0) });
    expectCniError(await check({ mode: 'l3' }), 999, 'Failed to match addr 10.72.0.12/24 on interface eth0');
    expectCniError(await check({ prevResult: undefined }), 999, 'Required prevResult missing');
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: c(0) });
    expectCniError(await check(), 999, 'Container Interface name in prevResult: eth0 not found');
    expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
  });
});

describe('ipvlan bad input, rollback, DEL with the namespace gone, GC, STATUS', () => {
  const clean = () => lab.clean(['i0', 'i0p', 'lo']);
  test('reference error texts, nothing left', async () => {
    const o = { ...opts, netns: c(0).path };
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ mode: 'l4', ...hostLocal() }), o),
      999,
      'unknown ipvlan mode: "l4"',
    );
    await lab.masterErrors({ mtu: false, extra: hostLocal() });
    // neither IPAM nor a prevResult with addresses: the reference's delegate error, the link is removed again
    expectCniError(await cniCall(plugin, 'ADD', conf(), o), 999, 'no plugin name provided');
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ ipam: { type: 'nope' } }), o),
      999,
      /failed to find plugin "nope"/,
    );
    expectCniError(await cniCall(plugin, 'ADD', conf({ mtu: [] }), o), 7, /^failed to load netconf: /);
    clean();
    // host-local allocates, then a route cannot be added: the reservation and the link are rolled back
    const bad = conf({
      ipam: { ...hostLocal().ipam, routes: [{ dst: '10.98.0.0/16', gw: '192.0.2.1' }] },
    });
    assert.notEqual((await cniCall(plugin, 'ADD', bad, o)).code, 0);
    clean();
  });
  test('DEL with the namespace gone releases the reservation; GC; STATUS', async () => {
    const cf = conf(hostLocal());
    await lab.delNetnsGone('cnikit-ipvgone', cf);
    await lab.gcKeepsValid(cf);
    expectOk<J>(await cniCall(plugin, 'STATUS', cf, opts));
    expectOk<J>(await cniCall(plugin, 'STATUS', conf({ master: 'i0', ...hostLocal() }), opts));
    await lab.statusMasterMissing();
  });
});
