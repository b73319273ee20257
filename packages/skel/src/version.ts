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

/** Go `%q` of a string (without the surrounding quotes). */
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
    else if (c >= 0xd800 && c <= 0xdfff) out += '\\ufffd';
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
