// scripts/run-tests.mjs: the project allows no skipped test, so a skip fails the run (with the count in the summary).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const runner = fileURLToPath(new URL('./run-tests.mjs', import.meta.url));
const fixture = (name: string) => `scripts/testdata/run-tests-${name}.fixture.ts`;
const run = (file: string) =>
  spawnSync(process.execPath, [runner, file], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    // NODE_TEST_CONTEXT would make the inner node --test think it runs inside this file's test and run nothing
    env: { ...process.env, NODE_OPTIONS: '', NODE_TEST_CONTEXT: undefined },
  });

test('a skipped test fails the run: exit 1, the summary counts it and says why', () => {
  const r = run(fixture('skip'));
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^ℹ pass 1$/m);
  assert.match(r.stdout, /^ℹ skipped 1$/m);
  assert.match(r.stdout, /^✖ 1 test\(s\) skipped or todo: the project allows none/m);
});

test('without skips the same run passes: exit 0, skipped 0, no complaint', () => {
  const r = run(fixture('pass'));
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ℹ skipped 0$/m);
  assert.doesNotMatch(r.stdout, /skipped or todo/);
});
