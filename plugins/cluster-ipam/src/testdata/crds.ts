/**
 * The k8s tests' common step after startControlPlane: cnikit's cluster-ipam CRDs (deploy/kubernetes/cluster-ipam-crds.yaml)
 * applied and established, so the first request of a test finds its resources.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../../../../scripts/k8s/control-plane.ts';

const CRDS = join(
  import.meta.dirname,
  '..',
  '..',
  '..',
  '..',
  'deploy',
  'kubernetes',
  'cluster-ipam-crds.yaml',
);

export function applyClusterIpamCrds(cp: ControlPlane): void {
  const crds = cp.kubectl(['apply', '-f', '-'], readFileSync(CRDS, 'utf8'));
  assert.equal(crds.status, 0, crds.stderr);
  const est = cp.kubectl([
    'wait',
    '--for',
    'condition=established',
    '--timeout=60s',
    'crd/ipamblocks.ipam.cnikit.dev',
    'crd/ipamallocations.ipam.cnikit.dev',
  ]);
  assert.equal(est.status, 0, est.stderr);
}
