// Run by scripts/run-tests.test.ts (not a *.test.ts: the full run never picks it up): one pass, one skip.
import { test } from 'node:test';

test('passes', () => {});
test('is skipped', (t) => t.skip('the runner must count this as a failure'));
