import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { configurePort, isUsableMac, type PortOps, planPortVlans } from './add.ts';
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

describe('configurePort with recorded port operations (VLAN filtering is missing from the test kernel)', () => {
  function recorder(existing: number[], failOn?: number) {
    const calls: string[] = [];
    const ops: PortOps = {
      setMaster: (l, m) => void calls.push(`master ${l} ${m}`),
      setPortFlags: (l, f) => void calls.push(`flags ${l} ${JSON.stringify(f)}`),
      vlanList: (n) => {
        calls.push(`list ${n}`);
        return existing;
      },
      vlanDel: (n, vid) => void calls.push(`del ${n} ${vid}`),
      vlanAdd: (n, vid, o) => {
        if (vid === failOn) throw Object.assign(new Error('x'), { reason: 'operation not supported' });
        calls.push(`add ${n} ${vid}${o.pvid ? ' pvid' : ''}${o.untagged ? ' untagged' : ''}`);
      },
    };
    return { calls, ops };
  }
  const base = { hairpin: true, isolated: false, vlan: 0, vlans: [] as number[], preserveDefaultVlan: false };

  test('access VLAN with default VLAN removal, by ifindex refs', () => {
    const { calls, ops } = recorder([1]);
    configurePort('vethA', 'br0', { ...base, vlan: 100 }, { host: 7, bridge: 3 }, ops);
    assert.deepEqual(calls, [
      'master 7 3',
      'flags 7 {"hairpin":true}',
      'flags 7 {"isolated":false}',
      'list vethA',
      'del vethA 1',
      'add vethA 100 pvid untagged',
    ]);
  });
  test('trunk without vlan: tagged VIDs then native VLAN 1', () => {
    const { calls, ops } = recorder([1]);
    configurePort('vethA', 'br0', { ...base, vlans: [10, 11] }, undefined, ops);
    assert.deepEqual(calls.slice(3), [
      'list vethA',
      'del vethA 1',
      'add vethA 10',
      'add vethA 11',
      'add vethA 1 pvid untagged',
    ]);
  });
  test('errors name the step like the reference', () => {
    const { ops } = recorder([1], 11);
    assert.throws(
      () => configurePort('vethA', 'br0', { ...base, vlans: [10, 11] }, undefined, ops),
      (e: unknown) =>
        CniError.is(e) && e.msg === 'failed to setup vlan tag on interface "vethA": operation not supported',
    );
    const r2 = recorder([1], 1);
    assert.throws(
      () => configurePort('vethA', 'br0', { ...base, vlans: [10] }, undefined, r2.ops),
      (e: unknown) =>
        CniError.is(e) &&
        e.msg === 'failed to setup default native vlan tag on interface "vethA": operation not supported',
    );
    const r3 = recorder([1]);
    r3.ops.vlanDel = () => {
      throw new Error('nope');
    };
    assert.throws(
      () => configurePort('vethA', 'br0', { ...base, vlan: 5 }, undefined, r3.ops),
      (e: unknown) => CniError.is(e) && e.msg === 'failed to remove default vlan on interface "vethA": nope',
    );
    const r4 = recorder([]);
    r4.ops.setMaster = () => {
      throw Object.assign(new Error('x'), { reason: 'no such device' });
    };
    assert.throws(
      () => configurePort('vethA', 'br0', base, undefined, r4.ops),
      (e: unknown) => CniError.is(e) && e.msg === 'failed to connect "vethA" to bridge br0: no such device',
    );
  });
});
