// cnikit-kernel-features: macvlan ipvlan vlan
/**
 * vlan against the real kernel (in the kernel lab: this machine's kernel has no 8021q). The sandbox's host namespace
 * plays the node with master `v0` (a veth whose peer `v0p` sits in an "outside" namespace). IPAM is cnikit's
 * static/host-local from dist-bin. Tagged traffic end to end is in test-netns/stacked.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import {
  cniCall,
  createNamedNetns,
  deleteNamedNetns,
  expectCniError,
  expectOk,
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
  network: 'vlnet',
  type: 'vlan',
  base: { master: 'v0', vlanId: 42 },
  subnet: '10.74.0.0/24',
  rangeStart: '10.74.0.100',
});
const { env, opts, c, conf, hostLocal } = lab;

const staticIpam = (address: string) => ({
  ipam: {
    type: 'static',
    addresses: [{ address }],
    routes: [{ dst: '10.97.0.0/16', gw: address.replace(/\.\d+\/\d+$/, '.1') }],
  },
});
let outside = '';
before(() => {
  outside = createNamedNetns('cnikit-vloutside').name;
  env.sb.exec('ip', ['link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v0p', 'netns', outside]);
  env.sb.exec('ip', ['link', 'set', 'v0', 'up']);
  // the outside end: a vlan 42 with the gateway address
  for (const args of [
    ['link', 'set', 'v0p', 'up'],
    ['link', 'add', 'link', 'v0p', 'name', 'v0p.42', 'type', 'vlan', 'id', '42'],
    ['link', 'set', 'v0p.42', 'up'],
    ['addr', 'add', '10.74.0.1/24', 'dev', 'v0p.42'],
  ])
    env.sb.exec('ip', ['-n', outside, ...args]);
});
after(() => {
  if (outside) deleteNamedNetns(outside);
});

describe('vlan ADD/CHECK/DEL', () => {
  for (const [id, mtu] of [
    [42, 0],
    [0, 1400],
    [4094, 1500],
  ] as const) {
    test(`vlanId ${id}, mtu ${mtu || '(master)'}`, async () => {
      const cf = conf({ vlanId: id, ...(mtu ? { mtu } : {}), ...staticIpam('10.74.0.10/24') });
      const o = { ...opts, netns: c(0).path };
      const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
      assert.equal(res.interfaces.length, 1);
      assert.equal(res.interfaces[0].name, 'eth0');
      assert.equal(res.ips[0].interface, 0);
      const l = ipLink(c(0).name, 'eth0');
      assert.equal(l.linkinfo.info_kind, 'vlan');
      assert.equal(l.linkinfo.info_data.id, id);
      assert.equal(l.linkinfo.info_data.protocol, '802.1Q');
      assert.equal(l.mtu, mtu || 1500);
      assert.equal(l.address, res.interfaces[0].mac);
      assert.equal(
        nl.withNetns(c(0).path, () => nl.getLinkDetails('eth0'))?.linkIndex,
        nl.getLinkOrThrow('v0').index,
      );
      expectOk<J>(await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, o));
      expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
      assert.deepEqual(linkNames(c(0).name), ['lo']);
      expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
    });
  }

  lab.versions(['0.1.0', '0.2.0', '0.3.0', '0.4.0', '1.0.0'], staticIpam('10.74.0.11/24'), '10.74.0.11/24');

  test('linkInContainer: the master in the container', async () => {
    env.sb.exec('ip', ['link', 'add', 'cv0', 'type', 'veth', 'peer', 'name', 'cv0p'], { ns: c(1) });
    // a vlan cannot go up on a master that is down (ENETDOWN), with either implementation
    env.sb.exec('ip', ['link', 'set', 'cv0', 'up'], { ns: c(1) });
    const cf = conf({ master: 'cv0', linkInContainer: true, vlanId: 7, ...staticIpam('10.75.0.10/24') });
    const o = { ...opts, netns: c(1).path, ifName: 'net1' };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
    assert.equal(ipLink(c(1).name, 'net1').linkinfo.info_data.id, 7);
    expectOk<J>(await cniCall(plugin, 'CHECK', { ...cf, prevResult: res }, o));
    expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
    assert.deepEqual(linkNames(c(1).name), ['cv0', 'cv0p', 'lo']);
    env.sb.exec('ip', ['link', 'del', 'cv0'], { ns: c(1) });
  });

  test('CHECK after tampering: VLAN ID, MTU, MAC, link', async () => {
    const cf = conf({ mtu: 1400, ...staticIpam('10.74.0.12/24') });
    const o = { ...opts, netns: c(0).path };
    const res = expectOk<J>(await cniCall(plugin, 'ADD', cf, o));
    const check = (extra: object = {}) => cniCall(plugin, 'CHECK', { ...cf, prevResult: res, ...extra }, o);
    expectOk<J>(await check());
    expectCniError(
      await check({ vlanId: 43 }),
      999,
      'Error: Tuning link eth0 configured promisc is 43, current value is 42',
    );
    env.sb.exec('ip', ['link', 'set', 'eth0', 'mtu', '1300'], { ns: c(0) });
    expectCniError(await check(), 999, 'Error: Tuning configured MTU of eth0 is 1400, current value is 1300');
    env.sb.exec('ip', ['link', 'set', 'eth0', 'mtu', '1400'], { ns: c(0) });
    const mac = res.interfaces[0].mac;
    env.sb.exec('ip', ['link', 'set', 'eth0', 'address', '02:42:ac:11:00:99'], { ns: c(0) });
    expectCniError(
      await check(),
      999,
      `vlan: Interface eth0 Mac ${mac} doesn't match container Mac: 02:42:ac:11:00:99`,
    );
    // the IPAM's CHECK (static) runs first and wants the prevResult too, like the reference's
    expectCniError(await check({ prevResult: undefined }), 999, 'Required prevResult missing');
    expectCniError(await check({ master: 'nope' }), 999, 'failed to lookup master "nope": Link not found');
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: c(0) });
    expectCniError(await check(), 999, 'vlan: Container Interface name in prevResult: eth0 not found');
    expectOk<J>(await cniCall(plugin, 'DEL', cf, o));
  });
});

describe('vlan bad input, rollback, DEL with the namespace gone, GC, STATUS', () => {
  const clean = () => lab.clean(['lo', 'v0']);
  test('reference error texts, nothing left', async () => {
    const o = { ...opts, netns: c(0).path };
    const { master: _m, ...noMaster }: Record<string, unknown> = conf();
    expectCniError(
      await cniCall(plugin, 'ADD', noMaster, o),
      7,
      '"master" field is required. It specifies the host interface name to create the VLAN for',
    );
    expectCniError(
      await cniCall(plugin, 'ADD', conf({ vlanId: 4095 }), o),
      7,
      'invalid VLAN ID 4095 (must be between 0 and 4094 inclusive)',
    );
    await lab.masterErrors({ mtu: true });
    expectCniError(
      await cniCall(plugin, 'ADD', conf(), o),
      999,
      'failed to execute IPAM delegate: no plugin name provided',
    );
    clean();
    // the same VLAN on the same master twice: the kernel refuses the second
    const first = expectOk<J>(
      await cniCall(plugin, 'ADD', conf(staticIpam('10.74.0.13/24')), { ...o, netns: c(1).path }),
    );
    assert.ok(first);
    expectCniError(
      await cniCall(plugin, 'ADD', conf(staticIpam('10.74.0.14/24')), o),
      999,
      'failed to create vlan: file exists',
    );
    expectOk<J>(await cniCall(plugin, 'DEL', conf(staticIpam('10.74.0.13/24')), { ...o, netns: c(1).path }));
    // allocation, then a route that cannot be added: reservation and link rolled back
    const bad = conf({ ipam: { ...hostLocal().ipam, routes: [{ dst: '10.98.0.0/16', gw: '192.0.2.1' }] } });
    assert.notEqual((await cniCall(plugin, 'ADD', bad, o)).code, 0);
    clean();
  });
  test('DEL with the namespace or the master gone; GC; STATUS', async () => {
    const cf = conf(hostLocal());
    await lab.delNetnsGone('cnikit-vlgone', cf);
    // DEL needs no master (the reference's DEL fails when the master is gone)
    expectOk<J>(await cniCall(plugin, 'DEL', conf({ master: 'nope' }), { netns: c(0).path }));
    // the dropped attachment on another VLAN ID: the kernel refuses the same VLAN twice on one master
    await lab.gcKeepsValid(cf, conf({ vlanId: 43, ...hostLocal() }));
    expectOk<J>(await cniCall(plugin, 'STATUS', cf, opts));
    expectCniError(await cniCall(plugin, 'STATUS', conf(), opts), 999, 'no plugin name provided');
    await lab.statusMasterMissing(hostLocal());
  });
});
