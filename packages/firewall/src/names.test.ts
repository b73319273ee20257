import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as go from '@cnikit/skel/go';
import {
  chainName,
  formatChainName,
  formatChainNameWithPrefix,
  formatComment,
  formatHashWithPrefix,
  goQuote,
  goUnquote,
  nftInstanceComment,
  nftInstanceHash,
  nftNetworkHash,
  parseComment,
} from './names.ts';

describe('reference name vectors (plugins.md §0.6)', () => {
  test('ipmasq chain', () => {
    assert.equal(formatChainName('test', '1234'), 'CNI-2bbe0c48b91a7d1b8a6753a8');
    assert.equal(formatChainName('mynet', 'abc'), 'CNI-e88f49d94512ff752ebe6070');
    assert.equal(formatChainName('test', '1234').length, 28);
  });
  test('prefixed chain', () => {
    assert.equal(formatChainNameWithPrefix('test', '1234', 'PREFIX-'), 'CNI-PREFIX-2bbe0c48b91a7d1b8');
    assert.equal(formatChainNameWithPrefix('mynet', 'abc', 'DN-'), 'CNI-DN-e88f49d94512ff752ebe6');
    assert.equal(chainName('mynet', 'abc', 'DN-'), 'CNI-DN-e88f49d94512ff752ebe6');
    assert.equal(chainName('mynet', 'abc'), 'CNI-e88f49d94512ff752ebe6070');
  });
  test('nftables ipmasq hashes and comment', () => {
    assert.equal(nftNetworkHash('unit-test'), '6fd94d501e58f0aa');
    assert.equal(nftInstanceHash('unit-test', 'eth0', 'one'), '6fd94d501e58f0aa-287fc69eff0574a2');
    assert.equal(
      nftInstanceComment('alternate', 'net1', 'three'),
      '82783ef24bdc7036-acb19d111858e348, net: alternate, if: net1, id: three',
    );
    assert.equal(
      nftInstanceComment('unit-test', 'eth0', 'four'),
      '6fd94d501e58f0aa-e766de567ef6c543, net: unit-test, if: eth0, id: four',
    );
  });
  test('nftables comment strips double quotes and is cut to 128 bytes', () => {
    const c = nftInstanceComment('a"b', 'eth0', 'x'.repeat(200));
    assert.equal(c.length, 128);
    assert.ok(c.includes('net: ab,'));
    const u = nftInstanceComment('é'.repeat(100), 'eth0', 'id');
    assert.ok(Buffer.byteLength(u) <= 128);
    assert.ok(!u.includes('\uFFFD'));
  });
  test('deterministic and sensitive to one character', () => {
    assert.equal(formatChainName('n', 'id1'), formatChainName('n', 'id1'));
    assert.notEqual(formatChainName('n', 'id1'), formatChainName('n', 'id2'));
    const long = 'x'.repeat(500);
    assert.equal(formatChainName(long, long).length, 28);
  });
  test('invalid lengths are rejected (Go panics)', () => {
    assert.throws(() => formatHashWithPrefix(4, 'CNI-', 'x'), RangeError);
    assert.throws(() => formatHashWithPrefix(129, '', 'x'), RangeError);
    assert.throws(() => formatChainNameWithPrefix('a', 'b', 'A-VERY-LONG-PREFIX-THAT-EXCEEDS-'), RangeError);
    assert.equal(formatHashWithPrefix(128, '', 'x').length, 128);
  });
});

describe('comment quoting (Go %q)', () => {
  test('formatComment', () => {
    assert.equal(formatComment('mynet', 'abc'), 'name: "mynet" id: "abc"');
    assert.equal(formatComment('my"net', 'a\\b'), 'name: "my\\"net" id: "a\\\\b"');
  });
  test('formatComment escapes the edge cases like Go utils.FormatComment (%q)', () => {
    assert.equal(formatComment('nét"\\', 'id\n\x00'), 'name: "nét\\"\\\\" id: "id\\n\\x00"');
    assert.equal(formatComment('\u00a0\ud800', '😀'), 'name: "\\u00a0\ufffd" id: "😀"');
    for (const [net, id] of [
      ['a"b\\c', 'x\ty'],
      ['é\u0085', '\u{e0001}'],
    ] as const) {
      assert.deepEqual(parseComment(formatComment(net, id)), { network: net, containerID: id });
    }
  });
  test('goQuote/goUnquote are the one implementation, @cnikit/skel/go', () => {
    assert.equal(goQuote, go.goQuote);
    assert.equal(goUnquote, go.goUnquote);
  });
  test('goQuote escapes like strconv.Quote', () => {
    assert.equal(goQuote('a\nb\t\x01\x7f'), '"a\\nb\\t\\x01\\x7f"');
    assert.equal(goQuote('é€😀'), '"é€😀"');
    assert.equal(goQuote('\u00a0\u200b'), '"\\u00a0\\u200b"');
    assert.equal(goQuote('\u{e0001}'), '"\\U000e0001"');
  });
  test('goUnquote inverts goQuote', () => {
    for (const s of ['plain', 'q"uote', 'back\\slash', 'nl\n\t\x01', 'é\u00a0😀', '']) {
      assert.equal(goUnquote(goQuote(s)), s);
    }
    assert.throws(() => goUnquote('"bad\\q"'), SyntaxError);
    assert.throws(() => goUnquote('noquotes'), SyntaxError);
  });
  test('parseComment', () => {
    assert.deepEqual(parseComment(formatComment('my"net', 'id-1')), {
      network: 'my"net',
      containerID: 'id-1',
    });
    assert.equal(parseComment('CNI portfwd masquerade mark'), undefined);
    assert.equal(parseComment('name: "x" id: "bad\\q"'), undefined);
  });
});
