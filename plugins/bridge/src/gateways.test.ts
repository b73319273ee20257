import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatCIDR, parseCIDR } from '@cnikit/ip';
import { CniError, type Result } from '@cnikit/skel';
import { calcGateways, planAddr } from './gateways.ts';
import { chooseDns, dnsConfSet, mergeIpamResult } from './result.ts';

const res = (ips: Result['ips'], routes?: Result['routes']): Result => ({ cniVersion: '1.1.0', ips, routes });

describe('calcGateways', () => {
  test('isGateway computes network+1 and sets interface 2', () => {
    const r = res([{ address: '10.1.2.7/24' }]);
    const { v4, v6 } = calcGateways(r, { isGateway: true, isDefaultGateway: false });
    assert.deepEqual(r.ips, [{ address: '10.1.2.7/24', gateway: '10.1.2.1', interface: 2 }]);
    assert.deepEqual(v4.gws.map(formatCIDR), ['10.1.2.1/24']);
    assert.deepEqual(v6.gws, []);
    assert.deepEqual(r.routes, []);
  });
  test('IPAM gateway kept; no gateway without isGateway', () => {
    const r = res([{ address: '10.1.2.7/24', gateway: '10.1.2.254' }, { address: '2001:db8::7/64' }]);
    const { v4, v6 } = calcGateways(r, { isGateway: false, isDefaultGateway: false });
    assert.equal(r.ips?.[0]?.gateway, '10.1.2.254');
    assert.equal(r.ips?.[1]?.gateway, undefined);
    assert.deepEqual(v4.gws, []);
    assert.deepEqual(v6.gws, []);
  });
  test('isDefaultGateway adds one default route per family', () => {
    const r = res([
      { address: '10.1.2.7/24' },
      { address: '10.1.3.7/24' },
      { address: '2001:DB8:0:0::7/64' },
      { address: 'fd00::7/64' },
    ]);
    const { v4, v6 } = calcGateways(r, { isGateway: false, isDefaultGateway: true });
    assert.deepEqual(r.routes, [
      { dst: '0.0.0.0/0', gw: '10.1.2.1' },
      { dst: '::/0', gw: '2001:db8::1' },
    ]);
    assert.equal(r.ips?.[2]?.address, '2001:db8::7/64');
    assert.deepEqual(v4.gws.map(formatCIDR), ['10.1.2.1/24', '10.1.3.1/24']);
    assert.deepEqual(v6.gws.map(formatCIDR), ['2001:db8::1/64', 'fd00::1/64']);
  });
  test('no extra default route when IPAM returned one with a gateway', () => {
    const r = res([{ address: '10.1.2.7/24' }], [{ dst: '0.0.0.0/0', gw: '10.1.2.99' }]);
    calcGateways(r, { isGateway: true, isDefaultGateway: true });
    assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0', gw: '10.1.2.99' }]);
  });
  test('an IPAM default route without gw does not count', () => {
    const r = res([{ address: '10.1.2.7/24' }], [{ dst: '0.0.0.0/0' }]);
    calcGateways(r, { isGateway: true, isDefaultGateway: true });
    assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }, { dst: '0.0.0.0/0', gw: '10.1.2.1' }]);
  });
  test('garbage address → error', () => {
    assert.throws(
      () => calcGateways(res([{ address: 'nope' }]), { isGateway: true, isDefaultGateway: false }),
      /Unknown IP object/,
    );
  });
});

describe('planAddr (ensureAddr decision)', () => {
  const n = (t: string) => {
    const v = parseCIDR(t);
    assert.ok(v);
    return v;
  };
  test('same address → nothing', () => {
    assert.deepEqual(planAddr('br0', [n('10.0.0.1/24')], n('10.0.0.1/24'), false), {
      remove: [],
      add: false,
    });
  });
  test('empty → add', () => {
    assert.deepEqual(planAddr('br0', [], n('10.0.0.1/24'), false), { remove: [], add: true });
  });
  test('IPv4: any other address conflicts unless forceAddress', () => {
    assert.throws(
      () => planAddr('br0', [n('10.1.0.1/16')], n('10.0.0.1/24'), false),
      (e: unknown) =>
        CniError.is(e) && e.msg === '"br0" already has an IP address different from 10.0.0.1/24',
    );
    const p = planAddr('br0', [n('10.1.0.1/16')], n('10.0.0.1/24'), true);
    assert.deepEqual(p.remove.map(formatCIDR), ['10.1.0.1/16']);
    assert.equal(p.add, true);
  });
  test('IPv6: overlapping conflicts, non-overlapping coexist, link-local ignored', () => {
    assert.throws(
      () => planAddr('br0', [n('2001:db8::1/48')], n('2001:db8:0:1::1/64'), false),
      /already has an IP address/,
    );
    assert.deepEqual(planAddr('br0', [n('fe80::1/64'), n('2001:db9::1/64')], n('2001:db8::1/64'), false), {
      remove: [],
      add: true,
    });
    assert.equal(planAddr('br0', [n('2001:db8::2/64')], n('2001:db8::1/64'), true).remove.length, 1);
  });
  test('other family never conflicts', () => {
    assert.deepEqual(planAddr('br0', [n('2001:db8::1/64')], n('10.0.0.1/24'), false), {
      remove: [],
      add: true,
    });
  });
});

describe('DNS choice', () => {
  test('dnsConfSet like the reference', () => {
    assert.equal(dnsConfSet(undefined), false);
    assert.equal(dnsConfSet({}), false);
    assert.equal(dnsConfSet({ nameservers: [] }), true);
    assert.equal(dnsConfSet({ domain: '' }), false);
    assert.equal(dnsConfSet({ domain: 'x' }), true);
    assert.equal(dnsConfSet({ options: ['ndots:2'] }), true);
  });
  test('netconf dns beats IPAM dns; else IPAM passes through', () => {
    assert.deepEqual(chooseDns({ search: ['a'] }, { nameservers: ['1.1.1.1'] }), { search: ['a'] });
    assert.deepEqual(chooseDns({}, { nameservers: ['1.1.1.1'] }), { nameservers: ['1.1.1.1'] });
    assert.equal(chooseDns(undefined, undefined), undefined);
  });
  test('mergeIpamResult copies', () => {
    const ipam: Result = {
      cniVersion: '1.1.0',
      ips: [{ address: '10.0.0.2/24' }],
      routes: [{ dst: '1.0.0.0/8' }],
      dns: { domain: 'd' },
    };
    const r: Result = { cniVersion: '1.1.0' };
    mergeIpamResult(r, ipam);
    r.ips![0]!.interface = 2;
    assert.equal(ipam.ips?.[0]?.interface, undefined);
    assert.deepEqual(r.dns, { domain: 'd' });
  });
});
