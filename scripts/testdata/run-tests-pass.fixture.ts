// Run by scripts/run-tests.test.ts (not a *.test.ts: the full run never picks it up): one pass.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

// the slow fixture waits for this process to be gone (see there)
if (process.env.CNIKIT_FIXTURE_PIDS)
  writeFileSync(join(process.env.CNIKIT_FIXTURE_PIDS, String(process.pid)), '');

test('passes', () => {});
