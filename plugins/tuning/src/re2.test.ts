import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RegexpError, re2ToRegExp } from './re2.ts';

const m = (re: string, s: string) => re2ToRegExp(re).test(s);

describe('RE2 → RegExp', () => {
  test('unanchored search like Go MatchString; anchors only when written', () => {
    assert.ok(m('net.ipv4', 'net.ipv4.conf.all.forwarding'), "m('net.ipv4', 'net.ipv4.conf.all.forwarding')");
    assert.ok(
      m('forwarding', 'net.ipv4.conf.all.forwarding'),
      "m('forwarding', 'net.ipv4.conf.all.forwarding')",
    );
    assert.ok(
      !m('^forwarding', 'net.ipv4.conf.all.forwarding'),
      "!m('^forwarding', 'net.ipv4.conf.all.forwarding')",
    );
    assert.ok(
      m('^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$', 'net.ipv4.conf.IFNAME.arp_filter'),
      "m('^net\\\\.ipv4\\\\.conf\\\\.IFNAME\\\\.[a-z_]+$', 'net.ipv4.conf.IFNAME.arp_filter')",
    );
    assert.ok(
      !m('^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$', 'net.ipv4.conf.IFNAME.arp_filter.x'),
      "!m('^net\\\\.ipv4\\\\.conf\\\\.IFNAME\\\\.[a-z_]+$', 'net.ipv4.conf.IFNAME.arp_filter.x')",
    );
  });

  test("'.' excludes only \\n (Go), not \\r; (?s) makes it match \\n", () => {
    assert.ok(m('^a.b$', 'a\rb'), "m('^a.b$', 'a\\rb')");
    assert.ok(!m('^a.b$', 'a\nb'), "!m('^a.b$', 'a\\nb')");
    assert.ok(m('(?s)^a.b$', 'a\nb'), "m('(?s)^a.b$', 'a\\nb')");
  });

  test('Perl and POSIX classes are ASCII like Go; \\s has no \\v', () => {
    assert.ok(m('^\\d+$', '123'), "m('^\\\\d+$', '123')");
    assert.ok(!m('^\\s$', '\v'), "!m('^\\\\s$', '\\v')");
    assert.ok(m('^\\s$', '\t'), "m('^\\\\s$', '\\t')");
    assert.ok(m('^[[:alpha:]]+$', 'abcXYZ'), "m('^[[:alpha:]]+$', 'abcXYZ')");
    assert.ok(!m('^[[:alpha:]]+$', 'abc1'), "!m('^[[:alpha:]]+$', 'abc1')");
    assert.ok(m('^\\W$', '-'), "m('^\\\\W$', '-')");
    assert.ok(m('^[\\d.]+$', '1.2'), "m('^[\\\\d.]+$', '1.2')");
  });

  test('\\Q…\\E literal, \\A and \\z, (?i), (?P<name>), octal and hex escapes, literal braces', () => {
    assert.ok(m('\\Qa.b*\\E', 'xa.b*y'), "m('\\\\Qa.b*\\\\E', 'xa.b*y')");
    assert.ok(!m('\\Qa.b\\E', 'axb'), "!m('\\\\Qa.b\\\\E', 'axb')");
    assert.ok(m('\\Anet', 'net.x'), "m('\\\\Anet', 'net.x')");
    assert.ok(!m('\\Anet', 'xnet'), "!m('\\\\Anet', 'xnet')");
    assert.ok(m('all\\z', 'conf.all'), "m('all\\\\z', 'conf.all')");
    assert.ok(!m('all\\z', 'conf.all\n'), "!m('all\\\\z', 'conf.all\\n')");
    assert.ok(m('(?i)^NET\\.', 'net.core'), "m('(?i)^NET\\\\.', 'net.core')");
    assert.ok(m('^(?P<p>net)\\.', 'net.core'), "m('^(?P<p>net)\\\\.', 'net.core')");
    assert.ok(m('^\\x6eet$', 'net'), "m('^\\\\x6eet$', 'net')");
    assert.ok(m('^\\x{6e}et$', 'net'), "m('^\\\\x{6e}et$', 'net')");
    assert.ok(m('^\\156et$', 'net'), "m('^\\\\156et$', 'net')");
    assert.ok(m('^a{2}$', 'aa'), "m('^a{2}$', 'aa')");
    assert.ok(m('^a{$', 'a{'), "m('^a{$', 'a{')");
    assert.ok(m('^[]a]+$', ']a'), "m('^[]a]+$', ']a')");
    assert.ok(m('(?m)^b$', 'a\nb'), "m('(?m)^b$', 'a\\nb')");
    assert.ok(!m('(?m)^b$', 'a\rb'), "!m('(?m)^b$', 'a\\rb')");
  });

  test('what Go rejects is rejected with the Go parser message', () => {
    const bad: Array<[string, RegExp]> = [
      ['(a)\\1', /invalid escape sequence: `\\1`/],
      ['a(?=b)', /invalid or unsupported Perl syntax/],
      ['a(?!b)', /invalid or unsupported Perl syntax/],
      ['a**', /invalid nested repetition operator/],
      ['*a', /missing argument to repetition operator/],
      ['a{1001}', /invalid repeat count/],
      ['a{3,2}', /invalid repeat count/],
      ['(a', /missing closing \)/],
      ['a)', /unexpected \)/],
      ['[a', /missing closing \]/],
      ['\\Z', /invalid escape sequence/],
      ['\\k<x>', /invalid escape sequence/],
      ['\\', /trailing backslash/],
      ['[[:foo:]]', /invalid character class range/],
    ];
    for (const [re, msg] of bad) {
      assert.throws(
        () => re2ToRegExp(re),
        (e: Error) => e instanceof RegexpError && msg.test(e.message),
        re,
      );
      assert.throws(() => re2ToRegExp(re), /^Error: error parsing regexp: |error parsing regexp: /);
    }
  });

  test('valid RE2 without a faithful translation is refused, never accepted differently', () => {
    for (const re of ['a(?i)b', '(?i:a)b', '(?U)a+', '\\pL', '[\\D]']) {
      assert.throws(() => re2ToRegExp(re), /cannot translate regexp/, re);
    }
  });
});
