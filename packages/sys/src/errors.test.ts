import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SysError } from './errors.ts';

test('SysError.reasonOf: the errno text of a system error, else the message', () => {
  assert.equal(SysError.reasonOf(new SysError(17, 'netlink', 'custom message')), 'file exists');
  // an error of another bundled copy (or any error carrying a reason) counts too
  assert.equal(
    SysError.reasonOf(Object.assign(new Error('x'), { reason: 'no such device' })),
    'no such device',
  );
  assert.equal(SysError.reasonOf(Object.assign(new Error('plain'), { reason: '' })), 'plain');
  assert.equal(SysError.reasonOf(new Error('plain')), 'plain');
  assert.equal(SysError.reasonOf('text'), 'text');
  assert.equal(SysError.reasonOf(null), 'null');
  assert.equal(SysError.reasonOf(undefined), 'undefined');
});
