import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isUsableMac, planPortVlans } from './add.ts';
import { loadNetConf, wantsVlanFiltering } from './config.ts';

const ops = (vlan: number, vlans: number[], preserveDefaultVlan = false) =>
  planPortVlans({ vlan, vlans, preserveDefaultVlan }).map((o) =>
    o.op === 'del' ? 'del-all' : `${o.vid}${o.pvid ? ' pvid untagged' : ''}`,
  );

describe('port VLAN plan (reference setupVeth VLAN logic)', () => {
  test('no VLAN: nothing touched (default VID 1 stays)', () => {
    assert.deepEqual(ops(0, []), []);
  });
  test('access VLAN 100: default removed, 100 PVID untagged', () => {
    assert.deepEqual(ops(100, []), ['del-all', '100 pvid untagged']);
  });
  test('access VLAN with preserveDefaultVlan keeps VID 1', () => {
    assert.deepEqual(ops(100, [], true), ['100 pvid untagged']);
  });
  test('trunk only: tagged VIDs plus native VLAN 1', () => {
    assert.deepEqual(ops(0, [101, 200, 201]), ['del-all', '101', '200', '201', '1 pvid untagged']);
  });
  test('vlan + trunk (HEAD ≥ v1.8.0): vlan is the native VLAN of the trunk', () => {
    assert.deepEqual(ops(100, [101, 102]), ['del-all', '100 pvid untagged', '101', '102']);
  });
  test('trunk from config table flows into the plan', () => {
    const c = loadNetConf(
      { cniVersion: '1.0.0', name: 'n', vlan: 100, vlanTrunk: [{ id: 101 }, { minID: 200, maxID: 202 }] },
      '',
    );
    assert.equal(wantsVlanFiltering(c), true);
    assert.deepEqual(ops(c.vlan, c.vlans, c.preserveDefaultVlan), [
      'del-all',
      '100 pvid untagged',
      '101',
      '200',
      '201',
      '202',
    ]);
  });
  test('the gateway port of <bridge>.<vlan> is an access port of the VLAN', () => {
    // ensureVlanInterface configures its bridge-side veth with vlan only, no trunk
    assert.deepEqual(ops(42, []), ['del-all', '42 pvid untagged']);
  });
});

test('isUsableMac: zero and multicast MACs cannot be device addresses', () => {
  assert.equal(isUsableMac('0a:58:0a:00:00:01'), true);
  assert.equal(isUsableMac('00:00:00:00:00:00'), false);
  assert.equal(isUsableMac('01:00:5e:00:00:01'), false);
  assert.equal(isUsableMac(''), false);
});
