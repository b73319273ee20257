// scripts/run-tests.test.ts: a file that finishes after run-tests-pass.fixture.ts although it is listed first.
import { test } from 'node:test';

test('takes a while', async () => {
  await new Promise((resolve) => setTimeout(resolve, 1500));
});
