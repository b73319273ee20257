import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scaled, TIME_SCALE_ENV, timeScale } from './timescale.ts';

test('CNIKIT_TEST_TIME_SCALE: unset or empty is 1; a positive number multiplies; rounded to whole ms', () => {
  assert.equal(TIME_SCALE_ENV, 'CNIKIT_TEST_TIME_SCALE');
  assert.equal(timeScale({}), 1);
  assert.equal(timeScale({ CNIKIT_TEST_TIME_SCALE: ' ' }), 1);
  assert.equal(scaled(30_000, {}), 30_000);
  assert.equal(timeScale({ CNIKIT_TEST_TIME_SCALE: '10' }), 10);
  assert.equal(scaled(30_000, { CNIKIT_TEST_TIME_SCALE: '10' }), 300_000);
  assert.equal(scaled(1001, { CNIKIT_TEST_TIME_SCALE: '2.5' }), 2503);
  assert.equal(scaled(100, { CNIKIT_TEST_TIME_SCALE: '0.5' }), 50);
  assert.equal(scaled(1, { CNIKIT_TEST_TIME_SCALE: '0.1' }), 1);
});

test('CNIKIT_TEST_TIME_SCALE: zero, negative, not a number: an error naming the variable, never a silent 1', () => {
  for (const bad of ['0', '-2', 'ten', '1x', 'Infinity', 'NaN']) {
    assert.throws(
      () => scaled(1000, { CNIKIT_TEST_TIME_SCALE: bad }),
      new RegExp(`^Error: CNIKIT_TEST_TIME_SCALE="${bad}": expected a positive number`),
      bad,
    );
  }
});

test('the process environment is the default', () => {
  const saved = process.env.CNIKIT_TEST_TIME_SCALE;
  try {
    process.env.CNIKIT_TEST_TIME_SCALE = '3';
    assert.equal(scaled(1000), 3000);
    delete process.env.CNIKIT_TEST_TIME_SCALE;
    assert.equal(scaled(1000), 1000);
  } finally {
    if (saved === undefined) delete process.env.CNIKIT_TEST_TIME_SCALE;
    else process.env.CNIKIT_TEST_TIME_SCALE = saved;
  }
});
