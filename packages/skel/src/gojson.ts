/**
 * Go `encoding/json` syntax-error texts, so malformed input is reported with the same words as the
 * reference (`invalid character 'x' looking for beginning of value`, `unexpected end of JSON input`).
 * Only consulted after `JSON.parse` failed, so the fast path stays native.
 * Also: Go-like lookup of a string field in a decoded object (`goStringField`, `configVersion`), and Go's printing of
 * values: `goList` (`%v` of a []string), `sortKeysDeep` + `goEscapeJSON` (what encoding/json does to maps and
 * strings), `goMarshal` (json.Marshal of a decoded value). The one home of these helpers: skel, libcni and the
 * plugins import them from here (`@cnikit/skel/go`).
 */
import { foldKey, goEscapeJSON } from './fold.ts';

/** Go's json encoder escapes <, >, & and U+2028/U+2029 inside strings (./fold.ts: the start-up path uses it). */
export { goEscapeJSON };

enum Ctx {
  ObjectKey,
  ObjectValue,
  Array,
}

/** Go's quoteChar for one byte (bytes ≥ 0x80 print as the Latin-1 rune, like Go's string(byte)). */
function quoteChar(c: number): string {
  if (c === 0x27) return "'\\''";
  if (c === 0x22) return "'\"'";
  const named: Record<number, string> = {
    7: '\\a',
    8: '\\b',
    9: '\\t',
    10: '\\n',
    11: '\\v',
    12: '\\f',
    13: '\\r',
    92: '\\\\',
  };
  if (named[c]) return `'${named[c]}'`;
  if (c < 0x20 || c === 0x7f) return `'\\x${c.toString(16).padStart(2, '0')}'`;
  if (c >= 0x80 && c < 0xa0) return `'\\u${c.toString(16).padStart(4, '0')}'`;
  if (c === 0xad) return "'\\u00ad'";
  return `'${String.fromCharCode(c)}'`;
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);

/** Byte offset of the last error `scanMessage` reported (the token it stopped at). */
let lastOffset = 0;

/** Go's error for `data` and the byte offset where the scan stopped, or undefined when it is valid JSON. */
function scanJson(data: Uint8Array): { msg: string; offset: number } | undefined {
  const msg = scanMessage(data);
  if (msg === undefined) return undefined;
  return { msg, offset: msg === 'unexpected end of JSON input' ? data.length : lastOffset };
}

/** The error Go's decoder reports for `data`, or undefined when it is syntactically valid JSON. */
export function goJsonSyntaxError(data: Uint8Array): string | undefined {
  return scanMessage(data);
}

/**
 * Where a JSON text is malformed, for a person: Go's message plus the 1-based line and column (in characters) of
 * the offending byte; undefined when the text is valid JSON.
 */
export function goJsonSyntaxErrorPosition(
  data: Uint8Array,
): { msg: string; line: number; column: number } | undefined {
  const e = scanJson(data);
  if (!e) return undefined;
  const before = new TextDecoder().decode(data.subarray(0, e.offset));
  const nl = before.lastIndexOf('\n');
  return { msg: e.msg, line: before.split('\n').length, column: [...before.slice(nl + 1)].length + 1 };
}

function scanMessage(data: Uint8Array): string | undefined {
  const stack: Ctx[] = [];
  let i = 0;
  const n = data.length;
  const err = (c: number, context: string) => {
    lastOffset = i;
    return `invalid character ${quoteChar(c)} ${context}`;
  };
  const END = 'unexpected end of JSON input';

  // Each step returns an error string, or undefined to continue; `i` is advanced in place.
  const literal = (word: string): string | undefined => {
    for (let k = 1; k < word.length; k++) {
      // at EOF Go's scanner steps once more with a space, so a cut token reports ' '
      const c = i + k < n ? data[i + k]! : 0x20;
      if (c !== word.charCodeAt(k)) return err(c, `in literal ${word} (expecting '${word[k]}')`);
    }
    i += word.length;
    return undefined;
  };
  const number = (): string | undefined => {
    if (data[i] === 0x2d) {
      i++;
      if (i >= n || !isDigit(data[i]!)) return err(i < n ? data[i]! : 0x20, 'in numeric literal');
    }
    if (data[i] === 0x30) i++;
    else while (i < n && isDigit(data[i]!)) i++;
    if (i < n && data[i] === 0x2e) {
      i++;
      if (i >= n || !isDigit(data[i]!))
        return err(i < n ? data[i]! : 0x20, 'after decimal point in numeric literal');
      while (i < n && isDigit(data[i]!)) i++;
    }
    if (i < n && (data[i] === 0x65 || data[i] === 0x45)) {
      i++;
      if (i < n && (data[i] === 0x2b || data[i] === 0x2d)) i++;
      if (i >= n || !isDigit(data[i]!)) return err(i < n ? data[i]! : 0x20, 'in exponent of numeric literal');
      while (i < n && isDigit(data[i]!)) i++;
    }
    return undefined;
  };
  const string = (): string | undefined => {
    i++; // opening quote
    while (i < n) {
      const c = data[i]!;
      if (c === 0x22) {
        i++;
        return undefined;
      }
      if (c === 0x5c) {
        i++;
        const e = i < n ? data[i]! : 0x20;
        if (e === 0x75) {
          for (let k = 1; k <= 4; k++) {
            const h = i + k < n ? data[i + k]! : 0x20;
            if (!isHex(h)) return err(h, 'in \\u hexadecimal character escape');
          }
          i += 5;
          continue;
        }
        if (!'bfnrt\\/"'.includes(String.fromCharCode(e))) return err(e, 'in string escape code');
        i++;
        continue;
      }
      if (c < 0x20) return err(c, 'in string literal');
      i++;
    }
    return END;
  };

  // value → then "end of value" handling driven by the context stack
  for (;;) {
    // begin value
    while (i < n && isSpace(data[i]!)) i++;
    if (i >= n) return END;
    let c = data[i]!;
    let e: string | undefined;
    if (c === 0x7b || c === 0x5b) {
      if (stack.length >= 10000) return err(c, 'exceeded max depth');
      i++;
      while (i < n && isSpace(data[i]!)) i++;
      if (i >= n) return END;
      if (c === 0x7b) {
        if (data[i] === 0x7d) {
          i++;
        } else {
          if (data[i] !== 0x22) return err(data[i]!, 'looking for beginning of object key string');
          stack.push(Ctx.ObjectKey);
          e = string();
          if (e) return e;
        }
      } else if (data[i] === 0x5d) {
        i++;
      } else {
        stack.push(Ctx.Array);
        continue; // begin the first element
      }
    } else if (c === 0x22) e = string();
    else if (c === 0x2d || isDigit(c)) e = number();
    else if (c === 0x74) e = literal('true');
    else if (c === 0x66) e = literal('false');
    else if (c === 0x6e) e = literal('null');
    else return err(c, 'looking for beginning of value');
    if (e) return e;

    // end of value: walk up the context stack
    for (;;) {
      while (i < n && isSpace(data[i]!)) i++;
      const top = stack[stack.length - 1];
      if (top === undefined) {
        if (i < n) return err(data[i]!, 'after top-level value');
        return undefined;
      }
      if (i >= n) return END;
      c = data[i]!;
      if (top === Ctx.ObjectKey) {
        if (c !== 0x3a) return err(c, 'after object key');
        i++;
        stack[stack.length - 1] = Ctx.ObjectValue;
        break; // begin the member value
      }
      if (top === Ctx.ObjectValue) {
        if (c === 0x2c) {
          i++;
          while (i < n && isSpace(data[i]!)) i++;
          if (i >= n) return END;
          if (data[i] !== 0x22) return err(data[i]!, 'looking for beginning of object key string');
          stack[stack.length - 1] = Ctx.ObjectKey;
          e = string();
          if (e) return e;
          continue;
        }
        if (c === 0x7d) {
          i++;
          stack.pop();
          continue;
        }
        return err(c, 'after object key:value pair');
      }
      // array
      if (c === 0x2c) {
        i++;
        break;
      }
      if (c === 0x5d) {
        i++;
        stack.pop();
        continue;
      }
      return err(c, 'after array element');
    }
  }
}

/** Parse like Go's `json.Unmarshal` into `interface{}`: JSON.parse, with Go's texts on syntax errors. */
export function parseJsonGo(
  data: Uint8Array,
  text?: string,
): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    const t = text ?? new TextDecoder('utf-8', { ignoreBOM: true }).decode(data);
    return { ok: true, value: JSON.parse(t) };
  } catch (e) {
    return { ok: false, error: goJsonSyntaxError(data) ?? (e instanceof Error ? e.message : String(e)) };
  }
}

/**
 * Go `json.Unmarshal` of one string field of an object: the key matches exactly or with Go's case folding,
 * null is a no-op, the last match wins, '' when absent. A non-string value calls `onType(goKind(value))`:
 * throw there (each caller words Go's "cannot unmarshal" error its own way) or return the value to use.
 */
export function goStringField(
  obj: Record<string, unknown>,
  field: string,
  onType: (kind: string) => string,
): string {
  let out = '';
  const f = foldKey(field);
  for (const [k, v] of Object.entries(obj)) {
    if (v === null || foldKey(k) !== f) continue;
    out = typeof v === 'string' ? v : onType(goKind(v));
  }
  return out;
}

/** A config's `cniVersion` as Go's `version.ConfigDecoder` reads it: missing, null or '' → '0.1.0'. */
export function configVersion(obj: Record<string, unknown>, onType: (kind: string) => string): string {
  return goStringField(obj, 'cniVersion', onType) || '0.1.0';
}

/** Go's name of a JSON value's kind in unmarshal type errors (`number`, `string`, `bool`, `array`, `object`). */
export function goKind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  return typeof v;
}

/** Go's `%v` of a []string: `[a b c]`. */
export function goList(list: readonly string[]): string {
  return `[${list.join(' ')}]`;
}

/** A copy with every object's keys sorted (Go marshals maps in key order). */
export function sortKeysDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeysDeep);
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeysDeep((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

/** Go `json.Marshal` of a value decoded into interface{}: sorted keys, compact, HTML characters escaped. */
export function goMarshal(v: unknown): string {
  return goEscapeJSON(JSON.stringify(sortKeysDeep(v)));
}
