// cnikit-kernel-features: bridge-vlan-filtering
// Bridge VLAN filtering for real: runs in the kernel lab's VM (docs/kernel-lab.md) where this machine's kernel lacks
// CONFIG_BRIDGE_VLAN_FILTERING, on the host where it has it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import {
  type CniCallOptions,
  type CniCommand,
  cniCall,
  requireKernelFeatures,
  sandboxForFile,
} from '@cnikit/testing';
import { plugin } from './index.ts';
import { hostLocal } from './testenv.ts';

const env = sandboxForFile({ enterHost: true, containers: 2 });

async function ok(cmd: CniCommand, cf: object, o: CniCallOptions) {
  const r = await cniCall(plugin, cmd, cf, o);
  assert.equal(r.code, 0, `${cmd}: ${r.stdout}${r.stderr}`);
  return r.stdout ? JSON.parse(r.stdout) : undefined;
}

describe('bridge with VLAN filtering', () => {
  test('L2: vlan + vlanTrunk give the host veth exactly those VLANs (PVID untagged), DEL removes the port', async () => {
    requireKernelFeatures('bridge-vlan-filtering');
    const c = env.sb.containers[1]!.path;
    const cf = {
      cniVersion: '1.0.0',
      name: 'l2vlan',
      type: 'bridge',
      bridge: 'brvl',
      vlan: 100,
      vlanTrunk: [{ id: 101 }, { minID: 200, maxID: 210 }],
    };
    const res = await ok('ADD', cf, { netns: c });
    const hv = res.interfaces[1].name;
    assert.equal(nl.getLink('brvl')?.vlanFiltering, true);
    const vlans = nl.bridgeVlanList(hv).sort((a, b) => a.vid - b.vid);
    assert.deepEqual(
      vlans.map((v) => v.vid),
      [100, 101, ...Array.from({ length: 11 }, (_, i) => 200 + i)],
    );
    const pvid = vlans.filter((v) => v.pvid);
    assert.deepEqual(
      pvid.map((v) => [v.vid, v.untagged]),
      [[100, true]],
    );
    await ok('DEL', cf, { netns: c });
    assert.equal(nl.getLink(hv), undefined);
  });

  test('L3 with a VLAN gateway interface <bridge>.<vlan>', async () => {
    requireKernelFeatures('bridge-vlan-filtering');
    const c = env.sb.newContainer().path;
    const cf = {
      cniVersion: '1.0.0',
      name: 'l3vlan',
      type: 'bridge',
      bridge: 'brv',
      vlan: 100,
      isDefaultGateway: true,
      ipam: hostLocal(env.dir, '10.22.0.0/24'),
    };
    const res = await ok('ADD', cf, { netns: c });
    assert.equal(res.interfaces.length, 4);
    assert.equal(res.interfaces[3].name, 'brv.100');
    // like the reference: a veth pair whose peer is a bridge port with the VLAN as its untagged PVID
    assert.equal(nl.getLink('brv.100')?.kind, 'veth');
    const brv = nl.getLink('brv')!;
    const ports = nl
      .listLinks()
      .filter((l) => l.masterIndex === brv.index && l.name !== res.interfaces[1].name);
    assert.equal(ports.length, 1);
    const pvid = nl.bridgeVlanList(ports[0]!.name).filter((v) => v.pvid);
    assert.deepEqual(
      pvid.map((v) => [v.vid, v.untagged]),
      [[100, true]],
    );
    assert.ok(nl.listAddrs({ link: 'brv.100', family: 4 }).some((a) => a.cidr === '10.22.0.1/24'));
    assert.equal(nl.getLink('brv')?.vlanFiltering, true);
    await ok('CHECK', { ...cf, prevResult: res }, { netns: c });
    await ok('DEL', cf, { netns: c });
  });
});
