// cnikit-kernel-features: dummy vlan macvlan ipvlan vrf
/**
 * The conformance matrix, the rows that need link types this CI machine's kernel lacks: dummy, vrf, and
 * macvlan/ipvlan/vlan on a dummy parent (their fixture). They run in the kernel lab (Debian's 6.1 kernel under TCG),
 * inside npm test's one VM boot, restricted to the checks that exercise the link type (LAB_CHECKS: the dispatcher's
 * VERSION, environment and stdin checks are the host rows' job). Two kit runs at a time; the per-call timeout is the
 * host's 30 s through scaled(). The rules and the documented failures are in conformance-matrix.ts and
 * docs/conformance.md.
 */
import { describe, test } from 'node:test';
import { requireKernelFeatures, scaled } from '@cnikit/testing';
import { LAB_CHECKS, LAB_ROWS, runMatrix, selectRows } from './conformance-matrix.ts';

describe('conformance matrix in the kernel lab: dummy, ipvlan, macvlan, vlan, vrf', () => {
  test('every failure is a documented defect, every documented defect still fails', async (t) => {
    requireKernelFeatures(...new Set(Object.values(LAB_ROWS).flat()));
    await runMatrix(t, selectRows(Object.keys(LAB_ROWS).sort()), {
      parallel: 2,
      timeoutSeconds: scaled(30_000) / 1000,
      only: LAB_CHECKS,
    });
  });
});
