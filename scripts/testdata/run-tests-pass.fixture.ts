// Run by scripts/run-tests.test.ts (not a *.test.ts: the full run never picks it up): one pass.
import { test } from 'node:test';

test('passes', () => {});
