import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  convertResult,
  formatConverted,
  formatResult,
  parseResult,
  resultFamily,
  toCurrent,
} from './result.ts';
import type { AnyResult } from './types.ts';
import { ALL_VERSIONS } from './types.ts';

const DNS = {
  nameservers: ['10.0.0.53', '2001:db8::53'],
  domain: 'example.com',
  search: ['a.example.com'],
  options: ['ndots:2'],
};

/** A rich 1.x result: two interfaces, v4 + v6 + a second v4, routes with 1.1.0 fields, dns. */
const R100 = {
  interfaces: [
    {
      name: 'eth0',
      mac: 'aa:bb:cc:dd:ee:ff',
      mtu: 1500,
      sandbox: '/var/run/netns/c',
      socketPath: '/run/s.sock',
      pciID: '0000:00:01.0',
    },
    { name: 'net1', sandbox: '/var/run/netns/c' },
  ],
  ips: [
    { interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' },
    { interface: 1, address: '2001:db8::2/64', gateway: '2001:db8::1' },
    { address: '10.1.0.2/16' },
  ],
  routes: [
    { dst: '0.0.0.0/0', gw: '10.0.0.1', mtu: 1400, advmss: 1360, priority: 10, table: 100, scope: 0 },
    { dst: '::/0', gw: '2001:db8::1' },
    { dst: '192.168.0.0/16' },
  ],
  dns: DNS,
};
/** R100 as the 040 family sees it (100 → 040). */
const E040 = {
  interfaces: [
    { name: 'eth0', mac: 'aa:bb:cc:dd:ee:ff', sandbox: '/var/run/netns/c' },
    { name: 'net1', sandbox: '/var/run/netns/c' },
  ],
  ips: [
    { version: '4', interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' },
    { version: '6', interface: 1, address: '2001:db8::2/64', gateway: '2001:db8::1' },
    { version: '4', address: '10.1.0.2/16' },
  ],
  routes: R100.routes,
  dns: DNS,
};
/** R100/E040 down to 020: first v4 and first v6; routes split by family with only dst/gw. */
const E020 = {
  ip4: {
    ip: '10.0.0.2/24',
    gateway: '10.0.0.1',
    routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }, { dst: '192.168.0.0/16' }],
  },
  ip6: { ip: '2001:db8::2/64', gateway: '2001:db8::1', routes: [{ dst: '::/0', gw: '2001:db8::1' }] },
  dns: DNS,
};
/** E040 up to 100 (mtu/socketPath/pciID were lost on the way down). */
const E100from040 = {
  interfaces: E040.interfaces,
  ips: [
    { interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' },
    { interface: 1, address: '2001:db8::2/64', gateway: '2001:db8::1' },
    { address: '10.1.0.2/16' },
  ],
  routes: R100.routes,
  dns: DNS,
};
/** E020 up to 040: no interfaces, no interface index; routes = ip4.routes then ip6.routes. */
const E040from020 = {
  ips: [
    { version: '4', address: '10.0.0.2/24', gateway: '10.0.0.1' },
    { version: '6', address: '2001:db8::2/64', gateway: '2001:db8::1' },
  ],
  routes: [
    { dst: '0.0.0.0/0', gw: '10.0.0.1' },
    { dst: '192.168.0.0/16' },
    { dst: '::/0', gw: '2001:db8::1' },
  ],
  dns: DNS,
};
const E100from020 = {
  ips: [
    { address: '10.0.0.2/24', gateway: '10.0.0.1' },
    { address: '2001:db8::2/64', gateway: '2001:db8::1' },
  ],
  routes: E040from020.routes,
  dns: DNS,
};

const fam = (v: string) => resultFamily(v)!;
const source: Record<string, object> = { '100': R100, '040': E040, '020': E020 };
const expected: Record<string, object> = {
  '100>040': E040,
  '100>020': E020,
  '040>020': E020,
  '040>100': E100from040,
  '020>040': E040from020,
  '020>100': E100from020,
};

describe('conversion: every version pair', () => {
  for (const from of ALL_VERSIONS) {
    for (const to of ALL_VERSIONS) {
      test(`${from} → ${to}`, () => {
        const src = { cniVersion: from, ...source[fam(from)] } as AnyResult;
        const got = convertResult(src, to);
        const key = `${fam(from)}>${fam(to)}`;
        const want = fam(from) === fam(to) ? source[fam(from)]! : expected[key]!;
        assert.deepEqual(got, { cniVersion: to, ...want });
        // and it prints as Go does: 0.x always has dns, every family omits empty lists
        const printed = JSON.parse(formatResult(got));
        assert.deepEqual(printed, { cniVersion: to, ...want });
        // the dispatcher's single-parse path prints the same bytes, also for a loosely typed handler result
        assert.equal(formatConverted(src, to), formatResult(got));
        const loose = JSON.parse(JSON.stringify({ ...src, extra: 1, dns: { extra: 2 } })) as AnyResult;
        assert.equal(formatConverted(loose, to), formatResult(convertResult(loose, to)));
      });
    }
  }
  test('round trips within a family keep everything (1.1.0 fields kept in 1.0.0)', () => {
    const r = convertResult(convertResult({ cniVersion: '1.1.0', ...R100 }, '1.0.0'), '1.1.0');
    assert.deepEqual(r, { cniVersion: '1.1.0', ...R100 });
  });
  test('"" as target means 0.1.0', () => {
    assert.equal(convertResult({ cniVersion: '1.0.0', ...R100 }, '').cniVersion, '0.1.0');
  });
  test('unknown target / source versions', () => {
    assert.throws(() => convertResult({ cniVersion: '1.1.0', ...R100 }, '2.0.0'), {
      message: 'no converter for CNI result version 1.1.0 to 2.0.0',
    });
    assert.throws(() => parseResult({ cniVersion: '9.9.9' }), {
      message: 'unsupported CNI result version "9.9.9"',
    });
    assert.throws(() => parseResult({ cniVersion: '1.0.0' }, '1.0'), {
      message: 'unsupported CNI result version "1.0"',
    });
  });
  test('toCurrent converts any family to 1.1.0', () => {
    assert.deepEqual(toCurrent({ cniVersion: '0.2.0', ...E020 } as AnyResult), {
      cniVersion: '1.1.0',
      ...E100from020,
    });
  });
});

describe('conversion details', () => {
  test('interface index 0 is preserved, an absent index stays absent, in every direction', () => {
    const r = {
      cniVersion: '1.0.0',
      ips: [{ interface: 0, address: '10.0.0.1/8' }, { address: '10.0.0.2/8' }],
    };
    for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.1.0']) {
      const out = convertResult(r, v);
      const ips = (out as unknown as { ips: Array<Record<string, unknown>> }).ips;
      assert.equal(ips[0]!.interface, 0);
      assert.ok(!('interface' in ips[1]!));
      assert.match(formatResult(out), /"interface": 0/);
    }
  });
  test('to 0.2.0 takes the first v4 and first v6 in list order, whatever the interface index', () => {
    const r = {
      cniVersion: '1.1.0',
      ips: [
        { interface: 2, address: 'fd00::9/64' },
        { interface: 1, address: '192.0.2.9/24' },
        { interface: 0, address: '192.0.2.1/24' },
        { interface: 0, address: 'fd00::1/64' },
      ],
    };
    assert.deepEqual(convertResult(r, '0.2.0'), {
      cniVersion: '0.2.0',
      ip4: { ip: '192.0.2.9/24' },
      ip6: { ip: 'fd00::9/64' },
      dns: {},
    });
  });
  test('v6-only to 0.2.0: only ip6, IPv4 routes dropped', () => {
    const r = {
      cniVersion: '0.4.0',
      ips: [{ version: '6', address: 'fd00::2/64' }],
      routes: [{ dst: '0.0.0.0/0' }, { dst: 'fd01::/64', gw: 'fd00::1' }],
      dns: {},
    };
    assert.deepEqual(convertResult(r as AnyResult, '0.1.0'), {
      cniVersion: '0.1.0',
      ip6: { ip: 'fd00::2/64', routes: [{ dst: 'fd01::/64', gw: 'fd00::1' }] },
      dns: {},
    });
  });
  test('0.2.0 without ip4/ip6: up-conversion succeeds with no ips, down again fails', () => {
    const up = convertResult({ cniVersion: '0.2.0', dns: { domain: 'x' } }, '1.0.0');
    assert.deepEqual(up, { cniVersion: '1.0.0', dns: { domain: 'x' } });
    assert.throws(() => convertResult(up, '0.2.0'), { message: 'cannot convert: no valid IP addresses' });
    assert.throws(() => convertResult({ cniVersion: '1.1.0', interfaces: [{ name: 'a' }] }, '0.1.0'), {
      message: 'cannot convert: no valid IP addresses',
    });
  });
  test('0.4.0 → 0.2.0 chooses by the version field; an entry without version cannot go down', () => {
    const r = { cniVersion: '0.4.0', ips: [{ version: '6', address: '10.0.0.1/8' }], dns: {} } as AnyResult;
    assert.deepEqual(convertResult(r, '0.2.0'), { cniVersion: '0.2.0', ip6: { ip: '10.0.0.1/8' }, dns: {} });
    const nov = { cniVersion: '0.4.0', ips: [{ address: '10.0.0.1/8' }], dns: {} } as unknown as AnyResult;
    assert.throws(() => convertResult(nov, '0.2.0'), { message: 'cannot convert: no valid IP addresses' });
    assert.match(formatResult(parseResult(nov)), /"version": ""/);
  });
  test('1.x → 0.4.0 derives version from the address family (v4-mapped is "4")', () => {
    const r = convertResult(
      { cniVersion: '1.1.0', ips: [{ address: '::ffff:10.0.0.1/120' }, { address: 'fd00::1/8' }] },
      '0.4.0',
    );
    assert.deepEqual((r as { ips: unknown }).ips, [
      { version: '4', address: '10.0.0.1/24' },
      { version: '6', address: 'fd00::1/8' },
    ]);
  });
  test('table and scope kept when 0; mtu, advmss, priority dropped when 0', () => {
    const r = parseResult({
      cniVersion: '1.1.0',
      routes: [{ dst: '10.0.0.0/8', mtu: 0, advmss: 0, priority: 0, table: 0, scope: 0 }],
    });
    assert.deepEqual((r as { routes: unknown }).routes, [{ dst: '10.0.0.0/8', table: 0, scope: 0 }]);
    const down = convertResult(r, '0.3.1') as { routes: unknown };
    assert.deepEqual(down.routes, [{ dst: '10.0.0.0/8', table: 0, scope: 0 }]);
  });
  test('0.2.0 → 0.4.0 keeps every route field; 0.4.0 → 0.2.0 keeps only dst/gw', () => {
    const r020 = {
      cniVersion: '0.2.0',
      ip4: { ip: '10.0.0.2/8', routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1', mtu: 9000, table: 5 }] },
      dns: {},
    };
    const up = convertResult(r020 as AnyResult, '0.4.0') as { routes: unknown };
    assert.deepEqual(up.routes, [{ dst: '0.0.0.0/0', gw: '10.0.0.1', mtu: 9000, table: 5 }]);
    const down = convertResult(up as AnyResult, '0.1.0') as { ip4: { routes: unknown } };
    assert.deepEqual(down.ip4.routes, [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }]);
    // 0.1.0 <-> 0.2.0 keeps them (same type)
    const same = convertResult(r020 as AnyResult, '0.1.0') as { ip4: { routes: unknown } };
    assert.deepEqual(same.ip4.routes, [{ dst: '0.0.0.0/0', gw: '10.0.0.1', mtu: 9000, table: 5 }]);
  });
});

describe('printing (Go serialisation)', () => {
  test('0.x always prints "dns": {}, 1.x omits an empty dns', () => {
    const ips = [{ address: '10.0.0.2/24' }];
    assert.equal(
      formatResult({ cniVersion: '1.1.0', ips }),
      '{\n    "cniVersion": "1.1.0",\n    "ips": [\n        {\n            "address": "10.0.0.2/24"\n        }\n    ]\n}',
    );
    for (const v of ['0.3.0', '0.3.1', '0.4.0', '0.1.0', '0.2.0']) {
      const out = formatResult(convertResult({ cniVersion: '1.1.0', ips }, v));
      assert.match(out, /\n {4}"dns": \{\}\n\}$/);
    }
  });
  test('empty lists omitted, gateway/gw omitted when unset, interface name always printed', () => {
    const r = parseResult({
      cniVersion: '0.4.0',
      interfaces: [{ name: '' }],
      ips: [],
      routes: [],
      dns: { nameservers: [] },
    });
    assert.equal(
      formatResult(r),
      '{\n    "cniVersion": "0.4.0",\n    "interfaces": [\n        {\n            "name": ""\n        }\n    ],\n    "dns": {}\n}',
    );
    const g = parseResult({
      cniVersion: '1.0.0',
      ips: [{ address: '10.0.0.1/8', gateway: '' }],
      routes: [{ dst: '0.0.0.0/0', gw: '' }],
    });
    assert.deepEqual(g, {
      cniVersion: '1.0.0',
      ips: [{ address: '10.0.0.1/8' }],
      routes: [{ dst: '0.0.0.0/0' }],
    });
  });
  test('key order: 0.x in struct order, 1.x sorted (Go re-marshals through a map)', () => {
    const r = { cniVersion: '1.1.0', ...R100 };
    const one = formatResult(r);
    assert.ok(one.indexOf('"dns"') < one.indexOf('"interfaces"'));
    assert.ok(one.indexOf('"mac"') < one.indexOf('"name"'));
    const four = formatResult(convertResult(r, '0.4.0'));
    assert.ok(four.indexOf('"interfaces"') < four.indexOf('"dns"'));
    assert.ok(
      four.indexOf('"version"') < four.indexOf('"interface"') &&
        four.indexOf('"interface"') < four.indexOf('"address"'),
    );
  });
  test('Go HTML escaping in strings', () => {
    assert.match(
      formatResult({ cniVersion: '1.1.0', interfaces: [{ name: 'a<b>&' }] }),
      /"a\\u003cb\\u003e\\u0026"/,
    );
  });
});

describe('normalisation', () => {
  test('addresses re-emitted canonically, host bits kept, unknown keys dropped', () => {
    const r = parseResult({
      cniVersion: '1.0.0',
      extra: 1,
      interfaces: [{ name: 'e', bogus: true }],
      ips: [
        { address: '2001:DB8:0:0:0:0:0:1/64', gateway: '2001:0db8::0001', foo: 'bar' },
        { address: '10.1.2.3/24' },
        { address: '::ffff:192.0.2.1/128' },
      ],
      routes: [{ dst: 'FD00:0:0:0:1:0:0:0/80', gw: '::ffff:10.0.0.1' }],
    });
    assert.deepEqual(r, {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'e' }],
      ips: [
        { address: '2001:db8::1/64', gateway: '2001:db8::1' },
        { address: '10.1.2.3/24' },
        { address: '192.0.2.1/32' },
      ],
      routes: [{ dst: 'fd00::1:0:0:0/80', gw: '10.0.0.1' }],
    });
  });
  test('keys match case-insensitively; null means unset', () => {
    const r = parseResult({
      CNIVersion: '1.0.0',
      IPS: [{ Address: '10.0.0.1/8', GATEWAY: null }],
      dns: null,
    });
    assert.deepEqual(r, { cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/8' }] });
  });
  for (const [bad, msg] of [
    ['10.0.0.1', 'invalid CIDR address: 10.0.0.1'],
    ['10.0.0.256/8', 'invalid CIDR address: 10.0.0.256/8'],
    ['10.0.0.1/33', 'invalid CIDR address: 10.0.0.1/33'],
    ['010.0.0.1/8', 'invalid CIDR address: 010.0.0.1/8'],
    ['fe80::1%eth0/64', 'invalid CIDR address: fe80::1%eth0/64'],
    ['', 'invalid CIDR address: '],
  ] as const) {
    test(`bad address ${JSON.stringify(bad)} is an error`, () => {
      assert.throws(() => parseResult({ cniVersion: '1.0.0', ips: [{ address: bad }] }), { message: msg });
    });
  }
  test('bad gateway / gw', () => {
    assert.throws(
      () => parseResult({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/8', gateway: 'x' }] }),
      {
        message: 'invalid IP address: x',
      },
    );
    assert.throws(
      () =>
        parseResult({
          cniVersion: '0.2.0',
          ip4: { ip: '10.0.0.1/8', routes: [{ dst: '1.1.1.1/32', gw: '1.1.1' }] },
        }),
      {
        message: 'invalid IP address: 1.1.1',
      },
    );
  });
  test('type mismatches name the key', () => {
    assert.throws(
      () => parseResult({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/8', interface: 'x' }] }),
      /ips\[0\]\.interface: expected integer, got string/,
    );
    assert.throws(
      () => parseResult({ cniVersion: '1.0.0', routes: {} }),
      /routes: expected array, got object/,
    );
  });
  test('family mismatch errors (Go text)', () => {
    assert.throws(() => parseResult({ cniVersion: '1.0.0' }, '0.4.0'), {
      message: 'result type supports [0.3.0 0.3.1 0.4.0] but unmarshalled CNIVersion is "1.0.0"',
    });
    assert.throws(() => parseResult({ cniVersion: '0.4.0' }, '1.1.0'), {
      message: 'result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0"',
    });
    assert.throws(() => parseResult({ cniVersion: '0.3.1' }, '0.2.0'), {
      message: 'result type supports [ 0.1.0 0.2.0] but unmarshalled CNIVersion is "0.3.1"',
    });
    assert.deepEqual(parseResult({}, '0.2.0'), { cniVersion: '0.1.0', dns: {} });
    assert.deepEqual(parseResult({}), { cniVersion: '0.1.0', dns: {} });
  });
});
