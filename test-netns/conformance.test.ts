/**
 * The conformance matrix, the rows this machine's kernel runs: every plugin with a list in
 * test-netns/conformance/ except those that need the kernel lab (LAB_ROWS). The rules and the documented
 * failures are in conformance-matrix.ts and docs/conformance.md. Kit runs go three at a time.
 */
import { describe, test } from 'node:test';
import { LAB_ROWS, PLUGINS, runMatrix, selectRows } from './conformance-matrix.ts';

describe('conformance matrix: cnikit and the Go reference plugins', () => {
  test('every failure is a documented defect, every documented defect still fails', async (t) => {
    await runMatrix(t, selectRows(PLUGINS.filter((p) => !LAB_ROWS[p])), { parallel: 3, timeoutSeconds: 60 });
  });
});
