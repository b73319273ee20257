import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  add,
  broadcast,
  canonicalCIDR,
  canonicalIP,
  cidrOf,
  compare,
  contains,
  equal,
  familyOf,
  formatCIDR,
  formatIP,
  fromBytes,
  type IP,
  isGlobalUnicast,
  isLoopback,
  network,
  networkCIDR,
  next,
  overlaps,
  parseCIDR,
  parseIP,
  parseIPOrCIDR,
  prev,
  range,
  size,
  toBytes,
} from './index.ts';

function ip(s: string): IP {
  const r = parseIP(s);
  assert.ok(r, `parse ${s}`);
  return r;
}

function cidr(s: string) {
  const r = parseCIDR(s);
  assert.ok(r, `parse ${s}`);
  return r;
}

describe('parseIP / formatIP (Go net.ParseIP + String)', () => {
  const roundTrip: Array<[string, string]> = [
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['10.1.2.3', '10.1.2.3'],
    ['0.1.2.3', '0.1.2.3'],
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['2001:DB8:1::2', '2001:db8:1::2'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'], // longest run wins
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // first of equal runs wins
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::ffff:10.1.2.3', '10.1.2.3'], // IPv4-mapped prints as IPv4
    ['::FFFF:a01:203', '10.1.2.3'],
    ['::1.2.3.4', '::102:304'], // IPv4-compatible stays IPv6
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [input, out] of roundTrip) {
    test(`${input} -> ${out}`, () => assert.equal(formatIP(ip(input)), out));
  }

  const invalid = [
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '01.2.3.4', // leading zeros rejected since Go 1.17
    '1.2.3.04',
    '1.2.3.4 ',
    ' 1.2.3.4',
    '1..2.3',
    '-1.2.3.4',
    'a.b.c.d',
    ':',
    ':::',
    '1:::2',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '12345::',
    '1:',
    ':1',
    'fe80::1%eth0',
    '1:2:3:4:5:1.2.3.4', // embedded v4 not at the right place
    '::ffff:1.2.3',
    'g::',
  ];
  for (const input of invalid) {
    test(`rejects ${JSON.stringify(input)}`, () => assert.equal(parseIP(input), undefined));
  }

  test('families', () => {
    assert.equal(ip('10.0.0.1').family, 4);
    assert.equal(ip('::ffff:10.0.0.1').family, 4);
    assert.equal(ip('::10.0.0.1').family, 6);
    assert.equal(ip('::').family, 6);
  });
});

describe('parseCIDR / formatCIDR (Go ParseCIDR, host bits kept)', () => {
  test('keeps host bits', () => {
    const c = cidr('10.1.2.3/24');
    assert.equal(formatCIDR(c), '10.1.2.3/24');
    assert.equal(formatIP(network(c)), '10.1.2.0');
    assert.equal(formatIP(broadcast(c)), '10.1.2.255');
  });
  test('edges', () => {
    assert.equal(formatIP(broadcast(cidr('0.0.0.0/0'))), '255.255.255.255');
    assert.equal(formatIP(network(cidr('255.255.255.255/32'))), '255.255.255.255');
    assert.equal(formatIP(broadcast(cidr('::/0'))), 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff');
    assert.equal(formatIP(broadcast(cidr('2001:db8::/64'))), '2001:db8::ffff:ffff:ffff:ffff');
    assert.equal(size(cidr('10.0.0.0/8')), 1n << 24n);
    assert.equal(size(cidr('::/64')), 1n << 64n);
    assert.equal(formatCIDR(cidr('2001:DB8::1/064')), '2001:db8::1/64');
  });
  test('IPv4-mapped text has a 128-bit mask and prints as IPv4 like Go', () => {
    const c = cidr('::ffff:10.0.0.0/104');
    assert.equal(c.ip.family, 4);
    assert.equal(c.maskBits, 128);
    assert.equal(formatCIDR(c), '10.0.0.0/8');
    assert.equal(formatIP(network(c)), '10.0.0.0');
    assert.ok(contains(c, ip('10.255.0.1')));
  });
  for (const bad of [
    '10.0.0.0',
    '10.0.0.0/33',
    '10.0.0.0/-1',
    '10.0.0.0/+8',
    '10.0.0.0/',
    '/8',
    '::/129',
    '10.0.0.0/8/8',
    '10.0.0.0/ 8',
    '10.0.0.0/99999999',
    '10.0.0.0/16777215', // Go dtoi: too big
    'fe80::1%eth0/64',
    '1::2::3/64',
    'x/1',
  ]) {
    test(`rejects ${bad}`, () => assert.equal(parseCIDR(bad), undefined));
  }
  test('parseIPOrCIDR', () => {
    assert.equal(formatIP(parseIPOrCIDR('10.1.2.3/24')!.ip), '10.1.2.3');
    assert.equal(parseIPOrCIDR('10.1.2.3')!.cidr, undefined);
    assert.equal(parseIPOrCIDR('10.1.2.3/40'), undefined);
  });
});

describe('arithmetic', () => {
  test('next/prev with edges', () => {
    assert.equal(formatIP(next(ip('10.0.0.255'))!), '10.0.1.0');
    assert.equal(formatIP(prev(ip('10.0.1.0'))!), '10.0.0.255');
    assert.equal(next(ip('255.255.255.255')), undefined);
    assert.equal(prev(ip('0.0.0.0')), undefined);
    assert.equal(formatIP(next(ip('0.0.0.0'))!), '0.0.0.1');
    assert.equal(next(ip('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff')), undefined);
    assert.equal(prev(ip('::')), undefined);
    assert.equal(formatIP(next(ip('::'))!), '::1');
    assert.equal(formatIP(next(ip('2001:db8::ffff'))!), '2001:db8::1:0');
    // the IPv6 value right before the mapped block stays IPv6 (no silent family change)
    assert.equal(next(ip('::fffe:ffff:ffff'))!.family, 6);
  });
  test('add', () => {
    assert.equal(formatIP(add(ip('10.0.0.0'), 1n << 24n)!), '11.0.0.0');
    assert.equal(add(ip('255.255.255.0'), 256), undefined);
    assert.equal(formatIP(add(ip('2001:db8::'), 1n << 64n)!), '2001:db8:0:1::');
  });
  test('compare', () => {
    assert.equal(compare(ip('10.0.0.1'), ip('10.0.0.2')), -1);
    assert.equal(compare(ip('10.0.0.2'), ip('10.0.0.2')), 0);
    assert.equal(compare(ip('10.0.0.3'), ip('10.0.0.2')), 1);
    assert.equal(compare(ip('10.0.0.3'), ip('::1')), -2);
    assert.ok(equal(ip('::ffff:1.2.3.4'), ip('1.2.3.4')));
    assert.ok(!equal(ip('::1.2.3.4'), ip('1.2.3.4')));
  });
  test('contains', () => {
    assert.ok(contains(cidr('10.0.0.0/8'), ip('10.255.255.255')));
    assert.ok(!contains(cidr('10.0.0.0/8'), ip('11.0.0.0')));
    assert.ok(contains(cidr('0.0.0.0/0'), ip('255.255.255.255')));
    assert.ok(!contains(cidr('0.0.0.0/0'), ip('::1')));
    assert.ok(contains(cidr('::/0'), ip('::1')));
    assert.ok(!contains(cidr('::/0'), ip('1.2.3.4'))); // IPv4 is its own family
    assert.ok(contains(cidr('10.1.2.3/24'), ip('10.1.2.200'))); // host bits of the CIDR ignored
  });
  test('overlaps', () => {
    assert.ok(overlaps(cidr('10.0.0.0/8'), cidr('10.1.0.0/16')));
    assert.ok(overlaps(cidr('10.1.0.0/16'), cidr('10.0.0.0/8')));
    assert.ok(!overlaps(cidr('10.0.0.0/16'), cidr('10.1.0.0/16')));
    assert.ok(!overlaps(cidr('10.0.0.0/8'), cidr('::/0')));
    assert.ok(overlaps(cidr('::/0'), cidr('2001:db8::/32')));
  });
  test('range is lazy', () => {
    const it = range(ip('10.0.0.0'), ip('10.255.255.255'));
    const first = [it.next().value, it.next().value].map((x) => formatIP(x as IP));
    assert.deepEqual(first, ['10.0.0.0', '10.0.0.1']);
    assert.deepEqual([...range(ip('10.0.0.254'), ip('10.0.1.1'))].map(formatIP), [
      '10.0.0.254',
      '10.0.0.255',
      '10.0.1.0',
      '10.0.1.1',
    ]);
    assert.deepEqual([...range(ip('10.0.0.2'), ip('10.0.0.1'))], []);
    assert.deepEqual([...range(ip('255.255.255.255'), ip('255.255.255.255'))].map(formatIP), [
      '255.255.255.255',
    ]);
  });
  test('random round-trips v6 text', () => {
    for (let k = 0; k < 2000; k++) {
      let v = 0n;
      for (let g = 0; g < 8; g++) {
        const r = Math.random();
        v = (v << 16n) | BigInt(r < 0.4 ? 0 : Math.floor(Math.random() * 65536));
      }
      const a = { family: 6 as const, value: v };
      if (v >> 32n === 0xffffn) continue;
      const text = formatIP(a);
      const back = parseIP(text);
      assert.ok(back && back.value === v, text);
      // RFC 5952: never a single zero group compressed, never two '::'
      assert.ok(!/::.*::/.test(text));
      assert.ok(!/(^|:)0+[0-9a-f]/.test(text.replace(/::/g, '|')), text);
    }
  });
});

describe('canonical text helpers (result normalisation)', () => {
  test('canonicalIP / canonicalCIDR', () => {
    assert.equal(canonicalIP('2001:DB8::1'), '2001:db8::1');
    assert.equal(canonicalIP('::ffff:1.2.3.4'), '1.2.3.4');
    assert.equal(canonicalIP('01.2.3.4'), undefined);
    assert.equal(canonicalCIDR('10.1.2.3/24'), '10.1.2.3/24');
    assert.equal(canonicalCIDR('10.1.2.3/024'), '10.1.2.3/24');
    assert.equal(canonicalCIDR('10.1.2.3/0000000024'), '10.1.2.3/24'); // Go dtoi: leading zeros
    assert.equal(canonicalCIDR('::ffff:10.1.2.3/120'), '10.1.2.3/24');
    assert.equal(canonicalCIDR('::ffff:10.1.2.3/90'), '10.1.2.3/0');
    assert.equal(canonicalCIDR('2001:DB8:0:0:0:0:0:1/64'), '2001:db8::1/64');
    assert.equal(canonicalCIDR('::1.2.3.4/128'), '::102:304/128');
    assert.equal(canonicalCIDR('10.0.0.0/'), undefined);
    assert.equal(canonicalCIDR('::/129'), undefined);
    assert.equal(canonicalCIDR('10.1.2.3'), undefined);
  });
  test('familyOf', () => {
    assert.equal(familyOf('10.0.0.0/8'), 4);
    assert.equal(familyOf('10.0.0.1'), 4);
    assert.equal(familyOf('::ffff:10.0.0.0/104'), 4);
    assert.equal(familyOf('fd00::/8'), 6);
    assert.equal(familyOf('nope'), undefined);
  });
  test('networkCIDR', () => {
    assert.equal(formatCIDR(networkCIDR(cidr('10.1.2.77/23'))), '10.1.2.0/23');
    assert.equal(formatCIDR(networkCIDR(cidr('::ffff:10.1.2.77/120'))), '10.1.2.0/24');
    assert.equal(formatCIDR(networkCIDR(cidr('2001:db8::5/64'))), '2001:db8::/64');
  });
  test('cidrOf uses the family width', () => {
    assert.equal(formatCIDR(cidrOf(ip('::ffff:10.0.0.1'), 24)), '10.0.0.1/24');
    assert.equal(cidrOf(ip('fd00::1'), 64).maskBits, 128);
  });
});

describe('bytes (netlink, iptables)', () => {
  test('toBytes / fromBytes round trip', () => {
    assert.deepEqual([...toBytes(ip('10.1.2.3'))], [10, 1, 2, 3]);
    assert.deepEqual([...toBytes(ip('::ffff:10.1.2.3'))], [10, 1, 2, 3]);
    const v6 = toBytes(ip('2001:db8::ff01'));
    assert.equal(v6.length, 16);
    assert.deepEqual([...v6.slice(0, 4)], [0x20, 0x01, 0x0d, 0xb8]);
    assert.deepEqual([...v6.slice(14)], [0xff, 0x01]);
    for (const t of [
      '0.0.0.0',
      '255.255.255.255',
      '::',
      '64:ff9b::10.1.2.3',
      'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    ]) {
      assert.equal(formatIP(fromBytes(toBytes(ip(t)))!), canonicalIP(t), t);
    }
  });
  test('fromBytes: IPv4-mapped 16 bytes is IPv4; other lengths rejected', () => {
    const mapped = new Uint8Array(16);
    mapped.set([0xff, 0xff, 10, 1, 2, 3], 10);
    assert.equal(fromBytes(mapped)?.family, 4);
    assert.equal(formatIP(fromBytes(mapped)!), '10.1.2.3');
    assert.equal(fromBytes(new Uint8Array(5)), undefined);
    assert.equal(fromBytes(new Uint8Array(0)), undefined);
  });
  test('network / broadcast as bytes', () => {
    const c = cidr('10.1.2.77/23');
    assert.deepEqual([...toBytes(network(c))], [10, 1, 2, 0]);
    assert.deepEqual([...toBytes(broadcast(c))], [10, 1, 3, 255]);
  });
});

describe('isLoopback (Go net.IP.IsLoopback)', () => {
  test('127/8, mapped 127/8 and ::1 only', () => {
    for (const t of ['127.0.0.1', '127.255.0.9', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.2']) {
      assert.equal(isLoopback(ip(t)), true, t);
    }
    for (const t of [
      '10.0.0.1',
      '128.0.0.1',
      '::2',
      'fe80::1',
      '::',
      '::ffff:10.0.0.1',
      '1::1',
      '::127.0.0.1',
    ]) {
      assert.equal(isLoopback(ip(t)), false, t);
    }
  });
});

describe('isGlobalUnicast (Go net.IP.IsGlobalUnicast)', () => {
  const cases: Array<[string, boolean]> = [
    ['10.0.0.1', true],
    ['240.0.0.1', true], // class E is not multicast in Go
    ['0.0.0.0', false],
    ['255.255.255.255', false],
    ['127.0.0.1', false],
    ['224.0.0.1', false],
    ['239.255.255.255', false],
    ['169.254.1.1', false],
    ['2001:db8::1', true],
    ['fd00::1', true],
    ['::', false],
    ['::1', false],
    ['fe80::1', false],
    ['febf::1', false],
    ['fec0::1', true],
    ['ff02::1', false],
    ['::ffff:169.254.0.1', false],
  ];
  for (const [t, want] of cases) test(`${t} -> ${want}`, () => assert.equal(isGlobalUnicast(ip(t)), want));
});
