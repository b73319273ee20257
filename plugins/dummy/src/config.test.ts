import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { parseConf } from './config.ts';

test('dummy config: the generic keys; type errors read "failed to parse network config"', () => {
  assert.deepEqual(parseConf({ cniVersion: '1.0.0', name: 'n', type: 'dummy', ipam: { type: 'static' } }), {
    cniVersion: '1.0.0',
    name: 'n',
    ipamType: 'static',
  });
  assert.equal(parseConf({ name: 'n' }).ipamType, '');
  try {
    parseConf({ ipam: 'x' });
    assert.fail('no error');
  } catch (e) {
    assert.ok(CniError.is(e));
    assert.equal(e.code, 7);
    assert.match(e.msg, /^failed to parse network config: config\.ipam: expected object/);
  }
});
