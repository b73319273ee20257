import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ifbDeviceName, ownerAlias } from './names.ts';

describe('bandwidth names', () => {
  test('IFB device name: the reference vector (plugins.md §0.6)', () => {
    assert.equal(ifbDeviceName('cni-plugin-bandwidth-test', 'dummy'), 'bwpa8eda89404b7');
    assert.equal(ifbDeviceName('n', 'c').length, 15);
  });
  test('owner alias: per network, any network name fits', () => {
    assert.equal(ownerAlias('unit-test'), 'cnikit-bandwidth:6fd94d501e58f0aa');
    assert.notEqual(ownerAlias('a'), ownerAlias('b'));
    assert.equal(ownerAlias('x'.repeat(500)).length, 'cnikit-bandwidth:'.length + 16);
  });
});
