import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatIP, type IP, parseCIDR, parseIP } from '@cnikit/ip';
import {
  canonicalizeRange,
  canonicalizeRangeSet,
  mayOverlap,
  type Range,
  type RawRange,
  rangeContains,
  rangeSetString,
  rangeSetsOverlap,
  rangesOverlap,
} from './range.ts';

const ip = (t: string): IP => parseIP(t)!;
function raw(subnet: string, opts: { start?: string; end?: string; gw?: string } = {}): RawRange {
  const r: RawRange = { subnet: parseCIDR(subnet)! };
  if (opts.start) r.rangeStart = ip(opts.start);
  if (opts.end) r.rangeEnd = ip(opts.end);
  if (opts.gw) r.gateway = ip(opts.gw);
  return r;
}
const text = (r: Range) => [r.rangeStart, r.rangeEnd, r.gateway].map(formatIP);

describe('Range.Canonicalize (reference range_test.go)', () => {
  test('sane defaults for IPv4 /24: .1-.254, gw .1', () => {
    assert.deepEqual(text(canonicalizeRange(raw('192.0.2.0/24'))), ['192.0.2.1', '192.0.2.254', '192.0.2.1']);
  });
  test('smaller IPv4 subnet', () => {
    assert.deepEqual(text(canonicalizeRange(raw('192.0.2.0/25'))), ['192.0.2.1', '192.0.2.126', '192.0.2.1']);
  });
  test('IPv6 defaults include the all-ones address', () => {
    assert.deepEqual(text(canonicalizeRange(raw('2001:DB8:1::/64'))), [
      '2001:db8:1::1',
      '2001:db8:1:0:ffff:ffff:ffff:ffff', // Go text of 2001:DB8:1::ffff:ffff:ffff:ffff
      '2001:db8:1::1',
    ]);
  });
  test('/30 is the smallest IPv4 network', () => {
    assert.deepEqual(text(canonicalizeRange(raw('10.0.0.0/30'))), ['10.0.0.1', '10.0.0.2', '10.0.0.1']);
  });
  test('/0 networks work without iterating', () => {
    assert.deepEqual(text(canonicalizeRange(raw('0.0.0.0/0'))), ['0.0.0.1', '255.255.255.254', '0.0.0.1']);
    assert.deepEqual(text(canonicalizeRange(raw('::/0'))), [
      '::1',
      'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      '::1',
    ]);
  });
  const errors: Array<[RawRange, string]> = [
    [
      raw('192.0.2.12/24'),
      'Network has host bits set. For a subnet mask of length 24 the network address is 192.0.2.0',
    ],
    [
      raw('2001:DB8:1::24:19ff:fee1:c44a/64'),
      'Network has host bits set. For a subnet mask of length 64 the network address is 2001:db8:1::',
    ],
    [
      raw('2001:DB8:24:19ff::/63'),
      'Network has host bits set. For a subnet mask of length 63 the network address is 2001:db8:24:19fe::',
    ],
    [
      raw('192.168.127.0/23'),
      'Network has host bits set. For a subnet mask of length 23 the network address is 192.168.126.0',
    ],
    [raw('192.0.2.0/31'), 'Network 192.0.2.0/31 too small to allocate from'],
    [raw('192.0.2.0/32'), 'Network 192.0.2.0/32 too small to allocate from'],
    [raw('2001:db8::/127'), 'Network 2001:db8::/127 too small to allocate from'],
    [raw('2001:db8::/128'), 'Network 2001:db8::/128 too small to allocate from'],
    [raw('::ffff:10.0.0.0/104'), 'IPNet IP and Mask version mismatch'],
    [raw('192.0.2.0/24', { start: '192.0.3.0' }), 'RangeStart 192.0.3.0 not in network 192.0.2.0/24'],
    [raw('192.0.2.0/24', { end: '192.0.4.0' }), 'RangeEnd 192.0.4.0 not in network 192.0.2.0/24'],
    [
      raw('192.0.2.0/24', { start: '192.0.2.50', end: '192.0.2.40' }),
      'RangeStart 192.0.2.50 not in network 192.0.2.0/24',
    ],
    [raw('192.0.2.0/24', { start: '2001:db8::1' }), 'RangeStart 2001:db8::1 not in network 192.0.2.0/24'],
    [{}, 'IP <nil> not v4 nor v6'],
  ];
  for (const [r, msg] of errors) {
    test(`rejects: ${msg}`, () => assert.throws(() => canonicalizeRange(r), { message: msg }));
  }
  test('all fields parsed', () => {
    const r = canonicalizeRange(
      raw('192.0.2.0/24', { start: '192.0.2.40', end: '192.0.2.50', gw: '192.0.2.254' }),
    );
    assert.deepEqual(text(r), ['192.0.2.40', '192.0.2.50', '192.0.2.254']);
  });
  test('the gateway may lie outside the subnet (not validated, like the reference)', () => {
    assert.equal(formatIP(canonicalizeRange(raw('192.0.2.0/24', { gw: '10.0.0.1' })).gateway), '10.0.0.1');
  });
});

describe('Range.Contains', () => {
  test('v4', () => {
    const r = canonicalizeRange(raw('192.0.2.0/24', { start: '192.0.2.40', end: '192.0.2.50' }));
    assert.equal(rangeContains(r, ip('192.0.3.0')), false);
    assert.equal(rangeContains(r, ip('192.0.2.39')), false);
    assert.equal(rangeContains(r, ip('192.0.2.40')), true);
    assert.equal(rangeContains(r, ip('192.0.2.50')), true);
    assert.equal(rangeContains(r, ip('192.0.2.51')), false);
    assert.equal(rangeContains(r, ip('::ffff:192.0.2.45')), true);
  });
  test('v6', () => {
    const r = canonicalizeRange(raw('2001:DB8:1::/64', { start: '2001:db8:1::40', end: '2001:db8:1::50' }));
    assert.equal(rangeContains(r, ip('2001:db8:2::')), false);
    assert.equal(rangeContains(r, ip('2001:db8:1::39')), false);
    assert.equal(rangeContains(r, ip('2001:db8:1::40')), true);
    assert.equal(rangeContains(r, ip('2001:db8:1::50')), true);
    assert.equal(rangeContains(r, ip('2001:db8:1::51')), false);
    assert.equal(rangeContains(r, ip('192.0.2.45')), false);
  });
});

describe('Range.Overlaps table', () => {
  const c = (r: RawRange) => canonicalizeRange(r);
  const cases: Array<[string, RawRange, RawRange, boolean]> = [
    ['non-overlapping', raw('10.0.0.0/24'), raw('10.0.1.0/24'), false],
    ['different families', raw('0.0.0.0/24'), raw('::/24'), false],
    ['identical', raw('10.0.0.0/24'), raw('10.0.0.0/24'), true],
    ['containing', raw('10.0.0.0/20'), raw('10.0.1.0/24'), true],
    [
      'same subnet, non-overlapping start + end',
      raw('10.0.0.0/24', { end: '10.0.0.127' }),
      raw('10.0.0.0/24', { start: '10.0.0.128' }),
      false,
    ],
    [
      'same subnet, overlapping start + end',
      raw('10.0.0.0/24', { end: '10.0.0.127' }),
      raw('10.0.0.0/24', { start: '10.0.0.127' }),
      true,
    ],
  ];
  for (const [name, a, b, want] of cases) {
    test(name, () => {
      assert.equal(rangesOverlap(c(a), c(b)), want);
      assert.equal(rangesOverlap(c(b), c(a)), want);
    });
  }
});

describe('RangeSet', () => {
  test('empty', () => assert.throws(() => canonicalizeRangeSet([]), { message: 'empty range set' }));
  test('mixed families', () =>
    assert.throws(() => canonicalizeRangeSet([raw('10.0.0.0/24'), raw('2001:db8::/64')]), {
      message: 'mixed address families',
    }));
  test('overlap inside a set names both ranges', () =>
    assert.throws(() => canonicalizeRangeSet([raw('10.1.2.0/24'), raw('10.1.4.0/24'), raw('10.1.2.0/24')]), {
      message: 'subnets 10.1.2.1-10.1.2.254 and 10.1.2.1-10.1.2.254 overlap',
    }));
  test('string and overlaps across sets', () => {
    const a = canonicalizeRangeSet([raw('10.0.0.0/24'), raw('10.0.1.0/24', { start: '10.0.1.10' })]);
    const b = canonicalizeRangeSet([raw('10.0.1.0/24', { start: '10.0.1.200' })]);
    assert.equal(rangeSetString(a), '10.0.0.1-10.0.0.254,10.0.1.10-10.0.1.254');
    assert.equal(rangeSetsOverlap(a, b), true);
    const v6 = canonicalizeRangeSet([raw('2001:db8::/64')]);
    assert.equal(rangeSetsOverlap(a, v6), false);
  });
});

describe('overlap detection at scale', () => {
  test('an inverted range (explicit rangeStart = broadcast) is judged like the reference', () => {
    const inverted = canonicalizeRange(raw('10.0.0.0/24', { start: '10.0.0.255' }));
    assert.equal(formatIP(inverted.rangeEnd), '10.0.0.254');
    const b = canonicalizeRange(raw('10.0.0.0/24', { start: '10.0.0.250', end: '10.0.0.254' }));
    const c = canonicalizeRange(raw('10.0.0.0/24', { start: '10.0.0.1', end: '10.0.0.10' }));
    assert.equal(rangesOverlap(inverted, b), true); // b contains the inverted range's end
    assert.equal(rangesOverlap(inverted, c), false);
    assert.equal(mayOverlap([inverted, c]), true); // inverted → callers use the exact pairwise loop
  });
  test('mayOverlap agrees with the pairwise check on random ranges', () => {
    for (let round = 0; round < 300; round++) {
      const rs: Range[] = [];
      for (let k = 0; k < 6; k++) {
        const third = Math.floor(Math.random() * 4);
        const a = 1 + Math.floor(Math.random() * 200);
        const b = a + Math.floor(Math.random() * 50);
        rs.push(
          canonicalizeRange(
            raw(`10.0.${third}.0/24`, {
              start: `10.0.${third}.${a}`,
              end: `10.0.${third}.${Math.min(b, 254)}`,
            }),
          ),
        );
      }
      let pairwise = false;
      for (let i = 0; i < rs.length; i++)
        for (let j = i + 1; j < rs.length; j++) pairwise ||= rangesOverlap(rs[i]!, rs[j]!);
      assert.equal(mayOverlap(rs), pairwise);
    }
  });
  test('10000 disjoint range sets validate quickly (no quadratic BigInt loop)', () => {
    // ~0.1–0.5 s as written (sort + sweep); a pairwise loop over 50 M pairs takes tens of seconds
    const sets = Array.from({ length: 10_000 }, (_, i) =>
      canonicalizeRangeSet([raw(`10.${i >> 8}.${i & 255}.0/24`)]),
    );
    const t0 = performance.now();
    assert.equal(mayOverlap(sets.flat()), false);
    assert.ok(performance.now() - t0 < 5000);
  });
});
