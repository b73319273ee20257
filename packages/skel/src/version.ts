/** Spec version strings: Go `version.ParseVersion` / `GreaterThanOrEqualTo` semantics. */

function atoi(part: string, which: string, version: string): number {
  // Go strconv.Atoi: optional sign, decimal digits, 64-bit range.
  if (!/^[+-]?[0-9]+$/.test(part)) {
    throw new Error(
      `failed to convert ${which} version part "${goQuoteInner(part)}": strconv.Atoi: parsing "${goQuoteInner(part)}": invalid syntax`,
    );
  }
  const n = BigInt(part);
  if (n > 9223372036854775807n || n < -9223372036854775808n) {
    throw new Error(
      `failed to convert ${which} version part "${goQuoteInner(part)}": strconv.Atoi: parsing "${goQuoteInner(part)}": value out of range`,
    );
  }
  void version;
  return Number(n);
}

const NON_PRINT = /^[\p{C}\p{Z}]$/u;

/**
 * Go `strconv.Quote` (`%q`) of a string, without the surrounding quotes. The one implementation for every text that
 * must match the reference byte for byte: the iptables rule comment `name: %q id: %q` (Go `utils.FormatComment`,
 * read back by DEL and by the other implementation) and the spec library's error texts (versions, CNI_ARGS).
 * `"` and `\` get a backslash; \a \b \f \n \r \t \v their short escapes; other C0 controls and DEL `\xNN`;
 * what Go's `unicode.IsPrint` accepts (letters, marks, numbers, punctuation, symbols, ASCII space) stays as it is;
 * any other code point `\uNNNN` / `\UNNNNNNNN`. A lone UTF-16 surrogate (a JSON `"\ud800"` escape, kept by
 * JSON.parse) is U+FFFD, printed as it is: Go's JSON decoder turns it into U+FFFD before anything quotes it.
 */
export function goQuoteInner(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c === 0x07) out += '\\a';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x0b) out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c >= 0xd800 && c <= 0xdfff) out += '\ufffd';
    else if (ch !== ' ' && NON_PRINT.test(ch)) {
      out += c > 0xffff ? `\\U${c.toString(16).padStart(8, '0')}` : `\\u${c.toString(16).padStart(4, '0')}`;
    } else out += ch;
  }
  return out;
}

/** Go `%q` of a string. */
export function goQuote(s: string): string {
  return `"${goQuoteInner(s)}"`;
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  '"': '"',
  "'": "'",
};

/** Inverse of `goQuote` (Go `strconv.Unquote` of a `"…"` literal: also `\'` and octal `\NNN`). Throws SyntaxError. */
export function goUnquote(q: string): string {
  if (q.length < 2 || q[0] !== '"' || q[q.length - 1] !== '"')
    throw new SyntaxError(`not a quoted string: ${q}`);
  let out = '';
  const body = q.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[++i];
    if (e !== undefined && Object.hasOwn(SIMPLE_ESCAPES, e)) out += SIMPLE_ESCAPES[e];
    else if (e === 'x' || e === 'u' || e === 'U') {
      const n = e === 'x' ? 2 : e === 'u' ? 4 : 8;
      const hex = body.slice(i + 1, i + 1 + n);
      if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== n) throw new SyntaxError(`bad escape in ${q}`);
      out += String.fromCodePoint(Number.parseInt(hex, 16));
      i += n;
    } else if (e !== undefined && /[0-7]/.test(e)) {
      const oct = body.slice(i, i + 3);
      if (!/^[0-7]{3}$/.test(oct)) throw new SyntaxError(`bad escape in ${q}`);
      out += String.fromCharCode(Number.parseInt(oct, 8));
      i += 2;
    } else throw new SyntaxError(`bad escape in ${q}`);
  }
  return out;
}

/** Go `%q` of a []string: `["a" "b"]`. */
export function goQuoteList(list: readonly string[]): string {
  return `[${list.map(goQuote).join(' ')}]`;
}

/** Parse `major[.minor[.micro]]`; '' means 0.1.0. Throws Go's error text. */
export function parseVersion(version: string): [number, number, number] {
  if (version === '') return [0, 1, 0];
  const parts = version.split('.');
  if (parts.length >= 4) throw new Error(`invalid version ${goQuote(version)}: too many parts`);
  const major = atoi(parts[0]!, 'major', version);
  const minor = parts.length >= 2 ? atoi(parts[1]!, 'minor', version) : 0;
  const micro = parts.length >= 3 ? atoi(parts[2]!, 'micro', version) : 0;
  return [major, minor, micro];
}

/** Compare two version strings numerically (-1, 0, 1). Throws on unparsable input. */
export function compareVersions(a: string, b: string): number {
  const x = parseVersion(a);
  const y = parseVersion(b);
  for (let i = 0; i < 3; i++) {
    if (x[i]! !== y[i]!) return x[i]! < y[i]! ? -1 : 1;
  }
  return 0;
}

/** `a >= b` (Go `version.GreaterThanOrEqualTo`). */
export function versionGte(a: string, b: string): boolean {
  return compareVersions(a, b) >= 0;
}
