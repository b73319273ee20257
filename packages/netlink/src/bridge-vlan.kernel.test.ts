// cnikit-kernel-features: bridge-vlan-filtering
// Bridge VLAN filtering against the real kernel (in the kernel lab's VM where this machine's kernel lacks it:
// docs/kernel-lab.md); state is verified independently with `ip -json` / `bridge -json`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bridgeVlanAdd, bridgeVlanDel, bridgeVlanList } from './bridge.ts';
import { createBridge, createVethPair, getLinkOrThrow, setMaster } from './link.ts';
import { type Sync, withNetns } from './netns.ts';
import { bridgeJson, ipLink, type TestNs, withTestNs } from './testns.ts';

function inNs<T>(ns: TestNs, fn: () => Sync<T>): T {
  return withNetns(ns.path, fn);
}

describe('bridge VLAN filtering (kernel)', () => {
  test('a VLAN-filtering bridge; port VLANs added (PVID untagged, a range) and removed', () =>
    withTestNs(1, (ns) => {
      inNs(ns, () => createBridge({ name: 'brv', vlanFiltering: true }));
      assert.equal(ipLink(ns, 'brv').linkinfo.info_data.vlan_filtering, 1);
      assert.equal(inNs(ns, () => getLinkOrThrow('brv')).vlanFiltering, true);
      inNs(ns, () => {
        createVethPair({ name: 'q0', peerName: 'q1' });
        setMaster('q0', 'brv');
        bridgeVlanDel('q0', { vid: 1 });
        bridgeVlanAdd('q0', { vid: 10, pvid: true, untagged: true });
        bridgeVlanAdd('q0', { vid: 20, vidEnd: 22 });
      });
      const mine = inNs(ns, () => bridgeVlanList('q0'));
      assert.deepEqual(
        mine.map((v) => [v.vid, v.pvid, v.untagged]),
        [
          [10, true, true],
          [20, false, false],
          [21, false, false],
          [22, false, false],
        ],
      );
      // independently: bridge -json vlan show
      const j = bridgeJson(ns, 'vlan', 'show', 'dev', 'q0') as Array<{
        vlans: Array<{ vlan: number; flags?: string[] }>;
      }>;
      const vlans = j.flatMap((p) => p.vlans);
      assert.deepEqual(
        vlans.map((v) => v.vlan),
        [10, 20, 21, 22],
      );
      assert.deepEqual(vlans[0]!.flags?.sort(), ['Egress Untagged', 'PVID']);
      inNs(ns, () => bridgeVlanDel('q0', { vid: 20, vidEnd: 22 }));
      assert.deepEqual(
        inNs(ns, () => bridgeVlanList('q0')).map((v) => v.vid),
        [10],
      );
    }));
});
