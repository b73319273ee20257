import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freeTable, parseConf } from './config.ts';

test('parseConf: vrfname required, table an unsigned 32-bit integer, the reference prefixes', () => {
  assert.deepEqual(parseConf({ vrfname: 'blue' }), { vrfname: 'blue', table: 0 });
  assert.deepEqual(parseConf({ vrfname: 'blue', table: 4294967295 }), { vrfname: 'blue', table: 4294967295 });
  assert.throws(() => parseConf({}), { message: 'configuration is expected to have a valid vrf name' });
  assert.throws(
    () => parseConf({ vrfname: 'blue', table: -1 }),
    /^CniError: failed to load netconf: table: /,
  );
  assert.throws(() => parseConf({ vrfname: 'blue', table: 2 ** 32 }), /^CniError: failed to load netconf: /);
  assert.throws(
    () => parseConf({ vrfname: 7 }),
    /^CniError: failed to load netconf: vrfname: expected string/,
  );
});

test('parseConf: a vrfname the kernel would refuse is a configuration error (code 7) before any work', () => {
  for (const [name, why] of [
    ['sixteen-bytes-xx', 'is longer than 15 bytes'],
    ['a/b', 'contains / or : or whitespace characters'],
    ['..', 'is . or ..'],
  ]) {
    assert.throws(() => parseConf({ vrfname: name }), {
      code: 7,
      message: `invalid vrfname "${name}": the name ${why}`,
    });
  }
  assert.equal(parseConf({ vrfname: 'fifteen-bytes-x' }).vrfname, 'fifteen-bytes-x');
});

test('freeTable: the first id from 1 no VRF uses', () => {
  assert.equal(freeTable(new Set()), 1);
  assert.equal(freeTable(new Set([1, 2, 4])), 3);
});
