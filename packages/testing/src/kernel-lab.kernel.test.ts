// cnikit-kernel-features: dummy vlan macvlan macvtap ipvlan vrf bridge-vlan-filtering cls_matchall br_netfilter tun
// Runs wherever every feature of the table is there: on most kernels in the kernel lab's VM (docs/kernel-lab.md),
// which must provide all of them, so that a file declaring any subset can run there.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  KERNEL_FEATURES,
  type KernelFeatureName,
  parseKernelFeaturesMarker,
  probeKernelFeatures,
} from './kernel-features.ts';

test('the kernel this file runs on has every feature of the table', () => {
  const declared = parseKernelFeaturesMarker(readFileSync(new URL(import.meta.url), 'utf8'));
  assert.deepEqual([...declared].sort(), Object.keys(KERNEL_FEATURES).sort());
  const r = probeKernelFeatures(declared as KernelFeatureName[]);
  for (const n of declared) assert.equal(r[n].present, true, `${n}: ${r[n].reason}`);
});
