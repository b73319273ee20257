import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatCIDR, formatIP } from '@cnikit/ip';
import { CniError, decode, s } from '@cnikit/skel';
import {
  checkAddressesPerFamily,
  checkFamilies,
  cidrField,
  dnsSchema,
  ipamNetSchema,
  ipField,
  requireIpam,
  routeSchema,
  toDNS,
  toRoute,
} from './index.ts';

function code7(fn: () => unknown, msg: string) {
  assert.throws(fn, (e: unknown) => e instanceof CniError && e.code === 7 && e.msg === msg);
}

describe('config fields', () => {
  test('cidrField: Go ParseCIDR, host bits kept; code 7 with the reference message', () => {
    assert.equal(formatCIDR(decode(cidrField, '10.1.2.3/24')), '10.1.2.3/24');
    assert.equal(formatCIDR(decode(cidrField, '::ffff:10.1.2.3/120')), '10.1.2.3/24');
    code7(() => decode(cidrField, '10.1.2.3'), 'invalid CIDR address: 10.1.2.3');
    code7(() => decode(cidrField, '10.1.2.3/33'), 'invalid CIDR address: 10.1.2.3/33');
  });
  test("ipField: '' is unset, bad text is code 7", () => {
    assert.equal(decode(ipField, ''), undefined);
    assert.equal(formatIP(decode(ipField, '2001:DB8::1')!), '2001:db8::1');
    code7(() => decode(ipField, '10.1.2'), 'invalid IP address: 10.1.2');
  });
});

describe('routes', () => {
  test('1.1.0 fields; zero mtu/advmss/priority dropped, table/scope 0 kept', () => {
    const r = decode(s.array(routeSchema), [
      { dst: '0.0.0.0/0', gw: '10.1.2.1' },
      { dst: '2001:DB8::/32', mtu: 0, advmss: 0, priority: 0, table: 0, scope: 0 },
      { dst: '10.9.0.0/16', gw: '', mtu: 1400, advmss: 1360, priority: 5, table: 100, scope: 253 },
    ]).map(toRoute);
    assert.deepEqual(r, [
      { dst: '0.0.0.0/0', gw: '10.1.2.1' },
      { dst: '2001:db8::/32', table: 0, scope: 0 },
      { dst: '10.9.0.0/16', mtu: 1400, advmss: 1360, priority: 5, table: 100, scope: 253 },
    ]);
  });
  test('a bad route is a code 7 config error naming the text', () => {
    code7(() => decode(routeSchema, { dst: 'nope' }), 'invalid CIDR address: nope');
    code7(() => decode(routeSchema, { dst: '0.0.0.0/0', gw: 'x' }), 'invalid IP address: x');
  });
});

describe('dns', () => {
  test('empty parts dropped', () => {
    assert.deepEqual(toDNS(undefined), {});
    assert.deepEqual(toDNS(decode(dnsSchema, { nameservers: [], domain: '', search: ['a'], options: [] })), {
      search: ['a'],
    });
    assert.deepEqual(
      toDNS(decode(dnsSchema, { nameservers: ['10.0.0.10'], domain: 'x', options: ['ndots:2'] })),
      {
        nameservers: ['10.0.0.10'],
        domain: 'x',
        options: ['ndots:2'],
      },
    );
  });
});

describe('addresses per family', () => {
  test('one per family is always fine; more needs 0.3.0+', () => {
    checkAddressesPerFamily('0.2.0', 1, 1);
    checkAddressesPerFamily('0.3.0', 2, 0);
    checkAddressesPerFamily('1.1.0', 0, 3);
    code7(
      () => checkAddressesPerFamily('0.2.0', 2, 0),
      'CNI version 0.2.0 does not support more than 1 address per family',
    );
    code7(
      () => checkAddressesPerFamily('', 0, 2),
      'CNI version  does not support more than 1 address per family',
    );
    code7(
      () => checkAddressesPerFamily('bogus', 2, 2),
      'CNI version bogus does not support more than 1 address per family',
    );
  });
});

describe('IPAM net frame', () => {
  const schema = ipamNetSchema(s.object({ type: s.string().optional() }), cidrField, {
    ipRanges: s.array(s.string()).optional(),
  });
  test('decodes name, cniVersion, ipam, runtimeConfig (extra fields + ips) and args.cni.ips', () => {
    const n = decode(schema, {
      name: 'net1',
      cniVersion: '1.0.0',
      ipam: { type: 'x' },
      runtimeConfig: { ipRanges: ['a'], ips: ['10.1.2.3/24'] },
      args: { cni: { ips: ['fd00::1/64'] } },
      other: 1,
    });
    assert.deepEqual(requireIpam(n), { name: 'net1', cniVersion: '1.0.0', ipam: { type: 'x' } });
    assert.deepEqual(n.runtimeConfig?.ipRanges, ['a']);
    assert.equal(formatCIDR(n.runtimeConfig!.ips![0]!), '10.1.2.3/24');
    assert.equal(formatCIDR(n.args!.cni!.ips![0]!), 'fd00::1/64');
    // the ips items go through the given schema, with the key path in the message
    code7(
      () => decode(schema, { ipam: {}, args: { cni: { ips: ['10.1.2.3'] } } }),
      'invalid CIDR address: 10.1.2.3',
    );
    assert.throws(
      () => decode(schema, { ipam: {}, runtimeConfig: { ips: [1] } }),
      (e: unknown) =>
        e instanceof CniError && e.code === 7 && e.msg.startsWith('runtimeConfig.ips[0]: expected string'),
    );
  });
  test("requireIpam: no (or null) ipam is code 7 \"IPAM config missing 'ipam' key\"; absent name/cniVersion are ''", () => {
    code7(() => requireIpam(decode(schema, { name: 'n' })), "IPAM config missing 'ipam' key");
    code7(() => requireIpam(decode(schema, { ipam: null })), "IPAM config missing 'ipam' key");
    assert.deepEqual(requireIpam(decode(schema, { ipam: {} })), { name: '', cniVersion: '', ipam: {} });
  });
  test('checkFamilies counts per family before the version gate', () => {
    checkFamilies('0.2.0', [4, 6]);
    checkFamilies('0.3.0', [4, 4, 6, 6]);
    checkFamilies('', []);
    code7(
      () => checkFamilies('0.2.0', [4, 6, 6]),
      'CNI version 0.2.0 does not support more than 1 address per family',
    );
    code7(() => checkFamilies('', [4, 4]), 'CNI version  does not support more than 1 address per family');
  });
});
