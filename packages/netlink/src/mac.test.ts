import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatMac, invalidMacMessage, parseMac } from './nl.ts';

describe('parseMac (Go net.ParseMAC, 48-bit)', () => {
  const good: [string, string][] = [
    ['aa:bb:cc:dd:ee:ff', 'aa:bb:cc:dd:ee:ff'],
    ['AA:BB:cc:Dd:0e:F0', 'aa:bb:cc:dd:0e:f0'],
    ['aa-bb-cc-dd-ee-ff', 'aa:bb:cc:dd:ee:ff'],
    ['00-00-5E-00-53-01', '00:00:5e:00:53:01'],
    ['aabb.ccdd.eeff', 'aa:bb:cc:dd:ee:ff'],
    ['0000.5E00.5301', '00:00:5e:00:53:01'],
  ];
  for (const [text, want] of good) {
    test(`accepts ${text}`, () => {
      const b = parseMac(text);
      assert.ok(b);
      assert.equal(b.length, 6);
      assert.equal(formatMac(b), want);
    });
  }
  const bad = [
    '',
    'zz',
    'zz:bb:cc:dd:ee:ff',
    'aa:bb:cc:dd:ee',
    'aa:bb:cc:dd:ee:ff:',
    'aa:bb-cc:dd:ee:ff', // mixed separators
    'aa-bb-cc-dd-ee:ff',
    'a:bb:cc:dd:ee:ff',
    'aaa:bb:cc:dd:ee:f',
    'aa:bb:cc:dd:ee:ff:00:11', // 64-bit EUI: Go parses it, an Ethernet link cannot take it
    'aabb.ccdd.eeff.0011',
    'aabb.ccdd.eefg',
    'aabb:ccdd:eeff',
    'aabbccddeeff',
    ' aa:bb:cc:dd:ee:ff',
    'aa:bb:cc:dd:ee:+f',
  ];
  for (const text of bad) {
    test(`rejects ${JSON.stringify(text)}`, () => assert.equal(parseMac(text), undefined));
  }
});

describe('invalidMacMessage (Go net.AddrError text)', () => {
  test('names the address', () => assert.equal(invalidMacMessage('zz'), 'address zz: invalid MAC address'));
  test('no address prefix for the empty string, as Go', () =>
    assert.equal(invalidMacMessage(''), 'invalid MAC address'));
});
