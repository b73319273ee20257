import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  contains,
  formatCIDR,
  formatIP,
  isGlobalUnicast,
  networkOf,
  nextIP,
  parseCIDR,
  parseIP,
} from './addr.ts';

test('parse/format round trips in Go canonical form', () => {
  const cases: Array<[string, string]> = [
    ['10.1.2.3/24', '10.1.2.3/24'],
    ['2001:DB8:0:0:0:0:0:1/64', '2001:db8::1/64'],
    ['::/0', '::/0'],
    ['fe80::1:0:0:1/64', 'fe80::1:0:0:1/64'],
    ['2001:db8:0:0:1:0:0:1/64', '2001:db8::1:0:0:1/64'],
    ['::ffff:10.0.0.1/120', '10.0.0.1/24'],
    ['::1.2.3.4/128', '::102:304/128'],
    ['1:2:3:4:5:6:7:8/128', '1:2:3:4:5:6:7:8/128'],
    ['1:0:3:4:5:6:7:8/128', '1:0:3:4:5:6:7:8/128'],
  ];
  for (const [i, o] of cases) {
    const n = parseCIDR(i);
    assert.ok(n, i);
    assert.equal(formatCIDR(n), o);
  }
  for (const bad of ['10.1.2.3', '10.1.2.3/33', '1::2::3/64', 'x/1', '10.1.2.3/-1', 'fe80::1%eth0/64']) {
    assert.equal(parseCIDR(bad), undefined, bad);
  }
  assert.equal(parseIP('::ffff:1.2.3.4')?.family, 4);
});

test('network, next, contains, global unicast', () => {
  const n = parseCIDR('10.1.2.77/23')!;
  assert.equal(formatCIDR(networkOf(n)), '10.1.2.0/23');
  assert.equal(formatIP(nextIP(networkOf(n).bytes)), '10.1.2.1');
  assert.equal(formatIP(nextIP(parseIP('10.0.0.255')!.bytes)), '10.0.1.0');
  assert.equal(formatIP(nextIP(networkOf(parseCIDR('2001:db8::5/64')!).bytes)), '2001:db8::1');
  assert.equal(contains(n, parseIP('10.1.3.1')!.bytes), true);
  assert.equal(contains(n, parseIP('10.1.4.1')!.bytes), false);
  assert.equal(isGlobalUnicast(parseIP('10.0.0.1')!.bytes), true);
  assert.equal(isGlobalUnicast(parseIP('169.254.1.1')!.bytes), false);
  assert.equal(isGlobalUnicast(parseIP('fe80::1')!.bytes), false);
  assert.equal(isGlobalUnicast(parseIP('2001:db8::1')!.bytes), true);
  assert.equal(isGlobalUnicast(parseIP('::1')!.bytes), false);
});
