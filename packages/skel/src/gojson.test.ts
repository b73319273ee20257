import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configVersion, goJsonSyntaxError, goStringField } from './gojson.ts';
import { parseResult } from './result.ts';

const enc = (s: string) => new TextEncoder().encode(s);

describe('Go encoding/json syntax errors', () => {
  const cases: Array<[string | Uint8Array, string | undefined]> = [
    ['{"name":"a"}', undefined],
    [' [1, -2.5e+3, true, false, null, "x\\u00e9\\n", {}, []] ', undefined],
    ['', 'unexpected end of JSON input'],
    ['   ', 'unexpected end of JSON input'],
    ['{', 'unexpected end of JSON input'],
    ['{"name":', 'unexpected end of JSON input'],
    ['{"na', 'unexpected end of JSON input'],
    ['[1,', 'unexpected end of JSON input'],
    ['x', "invalid character 'x' looking for beginning of value"],
    ['{"name":"a"} x', "invalid character 'x' after top-level value"],
    ['{"name":"a"}{"name":"b"}', "invalid character '{' after top-level value"],
    [new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), "invalid character 'ï' looking for beginning of value"],
    ['{"name":"a\u0000"}', "invalid character '\\x00' in string literal"],
    ['{"a" 1}', "invalid character '1' after object key"],
    ['{"a":1 "b":2}', "invalid character '\"' after object key:value pair"],
    ['{a:1}', "invalid character 'a' looking for beginning of object key string"],
    ['{"a":1,}', "invalid character '}' looking for beginning of object key string"],
    ['[1 2]', "invalid character '2' after array element"],
    ['[1,]', "invalid character ']' looking for beginning of value"],
    ['tru', "invalid character ' ' in literal true (expecting 'e')"],
    ['trUe', "invalid character 'U' in literal true (expecting 'u')"],
    ['nul', "invalid character ' ' in literal null (expecting 'l')"],
    ['fals3', "invalid character '3' in literal false (expecting 'e')"],
    ['-', "invalid character ' ' in numeric literal"],
    ['-a', "invalid character 'a' in numeric literal"],
    ['01', "invalid character '1' after top-level value"],
    ['1.', "invalid character ' ' after decimal point in numeric literal"],
    ['1.x', "invalid character 'x' after decimal point in numeric literal"],
    ['1e', "invalid character ' ' in exponent of numeric literal"],
    ['1e+', "invalid character ' ' in exponent of numeric literal"],
    ['"\\', "invalid character ' ' in string escape code"],
    ['"\\u12', "invalid character ' ' in \\u hexadecimal character escape"],
    ['{"a"', 'unexpected end of JSON input'],
    ['[1', 'unexpected end of JSON input'],
    ['1e+x', "invalid character 'x' in exponent of numeric literal"],
    ['"\\x"', "invalid character 'x' in string escape code"],
    ['"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"],
    ["'a'", "invalid character '\\'' looking for beginning of value"],
    ['['.repeat(10001), "invalid character '[' exceeded max depth"],
    [`${'['.repeat(10000)}${']'.repeat(10000)}`, undefined],
  ];
  for (const [input, want] of cases) {
    test(`${typeof input === 'string' ? JSON.stringify(input.slice(0, 30)) : 'bytes'} → ${want ?? 'valid'}`, () => {
      assert.equal(goJsonSyntaxError(typeof input === 'string' ? enc(input) : input), want);
    });
  }
});

describe('Go-like string field lookup (cniVersion)', () => {
  const boom = (kind: string): never => {
    throw new Error(`cannot unmarshal ${kind}`);
  };
  test('exact or Go-folded key, null ignored, last match wins, missing/empty → 0.1.0', () => {
    assert.equal(configVersion({}, boom), '0.1.0');
    assert.equal(configVersion({ cniVersion: '' }, boom), '0.1.0');
    assert.equal(configVersion({ cniVersion: null }, boom), '0.1.0');
    assert.equal(configVersion({ CNIVERSION: '1.0.0' }, boom), '1.0.0');
    assert.equal(configVersion({ cniVer\u017fion: '0.4.0' }, boom), '0.4.0');
    assert.equal(
      configVersion({ cniVersion: '0.3.1', CniVersion: '1.1.0', cniversion: null }, boom),
      '1.1.0',
    );
    assert.equal(goStringField({ Name: 'n' }, 'name', boom), 'n');
  });
  test('a non-string value goes through onType (thrown, or replaced by its return value)', () => {
    assert.throws(() => configVersion({ cniVersion: 1 }, boom), /cannot unmarshal number/);
    assert.throws(() => configVersion({ cniVersion: ['x'] }, boom), /cannot unmarshal array/);
    assert.equal(
      configVersion({ cniVersion: true }, () => ''),
      '0.1.0',
    );
  });
  test("parseResult reads a result's version key with Go folding (U+017F), like the config decoders", () => {
    const r = parseResult({ cniVer\u017fion: '0.2.0', ip4: { ip: '10.0.0.2/24' } });
    assert.equal(r.cniVersion, '0.2.0');
  });
});
