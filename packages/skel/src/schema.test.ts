import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from './errors.ts';
import { decode, decodeNetconf, type Infer, s } from './schema.ts';

const Range = s.object({
  subnet: s.string(),
  rangeStart: s.string().optional(),
  gateway: s.string().optional(),
});
const Conf = s.object({
  cniVersion: s.string(),
  name: s.string(),
  bridge: s.string().default('cni0'),
  isGateway: s.bool().default(false),
  mtu: s.int({ min: 0 }).optional(),
  vlan: s.uint().optional(),
  ratio: s.number().optional(),
  mode: s.enum('bridge', 'l2').default('bridge'),
  ipam: s
    .object({
      type: s.string(),
      ranges: s.array(s.array(Range)).optional(),
    })
    .optional(),
  labels: s.record(s.string()).optional(),
  extra: s.any(),
});
type Conf = Infer<typeof Conf>;

function err7(fn: () => unknown, msg: string) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(CniError.is(e), 'a CniError');
    assert.equal(e.code, 7);
    assert.equal(e.msg, msg);
    return true;
  });
}

describe('schema decoding', () => {
  test('typed result with defaults and optionals', () => {
    const c: Conf = decode(Conf, {
      cniVersion: '1.0.0',
      name: 'n',
      mtu: 1400,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/8' }]] },
    });
    assert.deepEqual(c, {
      cniVersion: '1.0.0',
      name: 'n',
      bridge: 'cni0',
      isGateway: false,
      mtu: 1400,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/8' }]] },
    });
    // compile-time: optional keys are optional, defaults are not
    const b: string = c.bridge;
    const m: number | undefined = c.mtu;
    void b;
    void m;
  });
  test('keys match case-insensitively, an exact match is preferred, later wins', () => {
    assert.equal(decode(Conf, { CNIVERSION: '1', NAME: 'x' }).cniVersion, '1');
    assert.equal(decode(Conf, { cniVersion: '1', name: 'x', Bridge: 'br1' }).bridge, 'br1');
    assert.equal(decode(Conf, { cniVersion: '1', name: 'a', NAME: 'b' }).name, 'b');
    assert.equal(decode(Conf, { cniVersion: '1', NAME: 'b', name: 'a' }).name, 'a');
    const RC = s.object({ runtimeConfig: s.object({ mac: s.string().optional() }).optional() });
    assert.deepEqual(decode(RC, { RuntimeConfig: { MAC: 'aa' } }), { runtimeConfig: { mac: 'aa' } });
    // U+017F (long s) folds to s like in Go
    assert.equal(decode(s.object({ s: s.string() }), { ſ: 'x' }).s, 'x');
  });
  test('unknown keys ignored; passthrough keeps them', () => {
    assert.deepEqual(decode(s.object({ a: s.int() }), { a: 1, b: 2 }), { a: 1 });
    assert.deepEqual(decode(s.object({ a: s.int() }).passthrough(), { a: 1, b: 2 }), { a: 1, b: 2 });
  });
  test('__proto__ keys from JSON stay plain data', () => {
    const input = JSON.parse('{"a":1,"__proto__":{"polluted":true},"m":{"__proto__":{"x":1}}}');
    const out = decode(s.object({ a: s.int(), m: s.record(s.any()) }).passthrough(), input) as Record<
      string,
      unknown
    >;
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.equal((out as { polluted?: unknown }).polluted, undefined);
    assert.deepEqual(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, { polluted: true });
    assert.equal(Object.getPrototypeOf(out.m), Object.prototype);
  });
  test('null = not set (default / undefined), and does not clobber an earlier value', () => {
    const c = decode(Conf, { cniVersion: '1', name: 'n', bridge: null, mtu: null, ipam: null });
    assert.equal(c.bridge, 'cni0');
    assert.ok(!('mtu' in c));
    assert.equal(decode(Conf, { cniVersion: '1', name: 'n', Bridge: 'b1', bridge: null }).bridge, 'b1');
  });
  test('defaults are fresh copies', () => {
    const S = s.object({ list: s.array(s.string()).default([]) });
    const a = decode(S, {});
    a.list.push('x');
    assert.deepEqual(decode(S, {}).list, []);
  });
  test('missing required value', () => {
    err7(() => decode(Conf, { name: 'n' }), 'cniVersion: missing required value');
    err7(
      () => decode(Conf, { cniVersion: '1', name: 'n', ipam: { ranges: [] } }),
      'ipam.type: missing required value',
    );
    err7(() => decode(s.string(), undefined), '(value): missing required value');
    err7(() => decode(s.string(), null, 'ipam'), 'ipam: missing required value');
  });
  const mismatches: Array<[unknown, string]> = [
    [{ cniVersion: 1, name: 'n' }, 'cniVersion: expected string, got number 1'],
    [{ cniVersion: '1', name: 'n', isGateway: 'true' }, 'isGateway: expected boolean, got string'],
    [{ cniVersion: '1', name: 'n', mtu: 1.5 }, 'mtu: expected integer, got number 1.5'],
    [{ cniVersion: '1', name: 'n', mtu: '1500' }, 'mtu: expected integer, got string'],
    [{ cniVersion: '1', name: 'n', mtu: -1 }, 'mtu: -1 is less than the minimum 0'],
    [{ cniVersion: '1', name: 'n', vlan: -5 }, 'vlan: -5 is less than the minimum 0'],
    [{ cniVersion: '1', name: 'n', ratio: true }, 'ratio: expected number, got boolean true'],
    [{ cniVersion: '1', name: 'n', mode: 'x' }, 'mode: invalid value "x", expected one of "bridge", "l2"'],
    [{ cniVersion: '1', name: 'n', ipam: [] }, 'ipam: expected object, got array'],
    [
      { cniVersion: '1', name: 'n', ipam: { type: 'h', ranges: [[{ subnet: 'a' }, { subnet: 1 }]] } },
      'ipam.ranges[0][1].subnet: expected string, got number 1',
    ],
    [
      { cniVersion: '1', name: 'n', ipam: { type: 'h', ranges: [{}] } },
      'ipam.ranges[0]: expected array, got object',
    ],
    [
      { cniVersion: '1', name: 'n', labels: { a: 'x', 'b c': 2 } },
      'labels."b c": expected string, got number 2',
    ],
    [{ cniVersion: '1', name: 'n', labels: [] }, 'labels: expected object, got array'],
    ['x', '(config): expected object, got string'],
  ];
  for (const [input, msg] of mismatches) {
    test(`mismatch → ${msg}`, () => err7(() => decode(Conf, input), msg));
  }
  test('path prefix via `what`', () => {
    err7(
      () => decode(Range, { subnet: 5 }, 'ipam.ranges[0][0]'),
      'ipam.ranges[0][0].subnet: expected string, got number 5',
    );
  });
  test('uint max, int bounds', () => {
    err7(() => decode(s.uint({ max: 4094 }), 4095, 'vlan'), 'vlan: 4095 is greater than the maximum 4094');
    assert.equal(decode(s.int({ min: -10 }), -10), -10);
  });
  test('any keeps anything including null', () => {
    const A = s.object({ x: s.any() });
    assert.deepEqual(decode(A, { x: [1, { y: null }] }), { x: [1, { y: null }] });
    assert.deepEqual(decode(A, {}), {});
  });
  test('refine transforms and reports at the path', () => {
    const Cidr = s.string().refine((v) => {
      if (!v.includes('/')) throw new Error('not a CIDR');
      return v.toLowerCase();
    });
    assert.equal(decode(s.object({ net: Cidr }), { net: 'FD00::/8' }).net, 'fd00::/8');
    err7(() => decode(s.object({ net: Cidr }), { net: 'x' }), 'net: not a CIDR');
    err7(() => decode(s.object({ net: Cidr.optional() }), { net: 'x' }), 'net: not a CIDR');
    assert.deepEqual(decode(s.object({ net: Cidr.optional() }), {}), {});
  });
  test('extend adds fields', () => {
    const Base = s.object({ name: s.string() });
    const Ext = Base.extend({ mtu: s.int().default(1500) });
    assert.deepEqual(decode(Ext, { name: 'n' }), { name: 'n', mtu: 1500 });
  });
});

test('decodeNetconf: the reference loadConf prefix, paths from config, code 7 for schema errors', () => {
  const Conf = s.object({ mtu: s.int().default(0) });
  assert.deepEqual(decodeNetconf(Conf, { mtu: 9000 }), { mtu: 9000 });
  assert.throws(() => decodeNetconf(Conf, { mtu: 'x' }), {
    code: 7,
    message: 'failed to load netconf: config.mtu: expected integer, got string',
  });
  assert.throws(
    () => decodeNetconf(Conf, [], 'failed to parse network configuration'),
    (e: CniError) => {
      return e.code === 7 && e.message.startsWith('failed to parse network configuration: ');
    },
  );
});
