// scripts/run-tests.test.ts: a failing file (its progress line is marked ✖).
import assert from 'node:assert/strict';
import { test } from 'node:test';

test('fails', () => {
  assert.equal(1, 2);
});
