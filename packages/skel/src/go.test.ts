import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { goQuote, goQuoteList, goUnquote } from './go.ts';

// Expected texts are Go's `strconv.Quote` (fmt `%q`) outputs: the iptables comment `name: %q id: %q` and the
// spec library's error texts must match them byte for byte.
describe('goQuote (Go %q)', () => {
  const cases: Array<[string, string, string]> = [
    ['quotes and backslashes', 'a"b\\c', '"a\\"b\\\\c"'],
    ['single quote stays', "it's", `"it's"`],
    ['short escapes', '\x07\b\f\n\r\t\v', '"\\a\\b\\f\\n\\r\\t\\v"'],
    ['other C0 controls and DEL as \\x', '\x00\x01\x1b\x1f\x7f', '"\\x00\\x01\\x1b\\x1f\\x7f"'],
    ['printable non-ASCII as it is', 'é€😀日本ü\u0301', '"é€😀日本ü\u0301"'],
    ['ASCII space stays, other spaces escaped', ' \u00a0\u3000\u2028', '" \\u00a0\\u3000\\u2028"'],
    ['C1 controls and format characters', '\u0085\u00ad\u200b\ufeff', '"\\u0085\\u00ad\\u200b\\ufeff"'],
    ['private use and unassigned', '\ue000\u0378', '"\\ue000\\u0378"'],
    ['beyond the BMP as \\U', '\u{e0001}\u{10ffff}', '"\\U000e0001\\U0010ffff"'],
    ['a lone surrogate is U+FFFD (as Go decodes it), printed as it is', 'a\ud800b\udfff', '"a\ufffdb\ufffd"'],
    ['empty', '', '""'],
  ];
  for (const [name, input, want] of cases) {
    test(name, () => assert.equal(goQuote(input), want));
  }
  test('goQuoteList is %q of a []string', () => {
    assert.equal(goQuoteList(['0.1.0', 'a"b']), '["0.1.0" "a\\"b"]');
    assert.equal(goQuoteList([]), '[]');
  });
});

describe('goUnquote', () => {
  test('inverts goQuote', () => {
    for (const s of [
      'plain',
      'a"b\\c',
      '\x07\b\f\n\r\t\v\x00\x1b\x7f',
      'é😀\u00a0\u0085\u{e0001}\u{10ffff}',
      '',
    ]) {
      assert.equal(goUnquote(goQuote(s)), s);
    }
  });
  test("reads Go's other escapes: \\' and octal", () => {
    assert.equal(goUnquote(`"\\'\\101\\000"`), "'A\x00");
  });
  test('malformed input is a SyntaxError', () => {
    for (const bad of ['noquotes', '"', '"bad\\q"', '"\\x4"', '"\\u12"', '"\\12"', '"trailing\\"']) {
      assert.throws(() => goUnquote(bad), SyntaxError, bad);
    }
  });
});
