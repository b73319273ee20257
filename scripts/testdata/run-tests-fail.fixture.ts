// scripts/run-tests.test.ts: a failing file (its progress line is marked ✖).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

// the slow fixture waits for this process to be gone (see there)
if (process.env.CNIKIT_FIXTURE_PIDS)
  writeFileSync(join(process.env.CNIKIT_FIXTURE_PIDS, String(process.pid)), '');

test('fails', () => {
  assert.equal(1, 2);
});
