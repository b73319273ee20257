/**
 * Hash-derived names shared with the Go reference plugins (plugins.md §0.6), so that a node can
 * switch between the two implementations with containers running.
 */
import { createHash } from 'node:crypto';

/** Maximum length of an iptables chain name produced by the helpers below. */
export const MAX_CHAIN_LENGTH = 28;
const CHAIN_PREFIX = 'CNI-';
/** Length of a full SHA-512 hex digest. */
export const MAX_HASH_LENGTH = 128;

interface Hasher {
  update(data: string, enc: 'utf8'): Hasher;
  digest(enc: 'hex'): string;
}

/**
 * SHA-512 hex: Bun's native CryptoHasher when running under Bun (Bun loads node:crypto on first use, which
 * would add to the start of every masquerade ADD/DEL), node:crypto otherwise.
 */
function sha512Hex(s: string): string {
  const BunHasher = (globalThis as { Bun?: { CryptoHasher?: new (alg: string) => Hasher } }).Bun
    ?.CryptoHasher;
  const h: Hasher = BunHasher ? new BunHasher('sha512') : (createHash('sha512') as unknown as Hasher);
  return h.update(s, 'utf8').digest('hex');
}

/**
 * `prefix + hex(sha512(toHash))`, cut to `length` characters (Go `MustFormatHashWithPrefix`).
 * Throws when `prefix.length >= length` or `length > 128` (Go panics).
 */
export function formatHashWithPrefix(length: number, prefix: string, toHash: string): string {
  if (!Number.isInteger(length) || prefix.length >= length || length > MAX_HASH_LENGTH) {
    throw new RangeError(`invalid length ${length} for hash with prefix ${JSON.stringify(prefix)}`);
  }
  return (prefix + sha512Hex(toHash)).slice(0, length);
}

/** `CNI-<24 hex of sha512(network + containerID)>` (28 chars): the bridge ipmasq chain. */
export function formatChainName(network: string, containerID: string): string {
  return formatChainNameWithPrefix(network, containerID, '');
}

/** `CNI-<prefix><hex…>` cut to 28 chars, e.g. prefix `DN-` for portmap's per-container chain. */
export function formatChainNameWithPrefix(network: string, containerID: string, prefix: string): string {
  return formatHashWithPrefix(MAX_CHAIN_LENGTH, CHAIN_PREFIX + prefix, network + containerID);
}

/** Contract alias: `chainName(network, id, prefix?)`. */
export function chainName(network: string, containerID: string, prefix = ''): string {
  return formatChainNameWithPrefix(network, containerID, prefix);
}

/** `name: "<network>" id: "<containerID>"` with Go `%q` quoting (the iptables rule comment). */
export function formatComment(network: string, containerID: string): string {
  return `name: ${goQuote(network)} id: ${goQuote(containerID)}`;
}

/** nftables ipmasq: 16 hex of sha512(network). */
export function nftNetworkHash(network: string): string {
  return formatHashWithPrefix(16, '', network);
}

/** nftables ipmasq: `<networkHash>-<16 hex of sha512(ifName + ":" + containerID)>`. */
export function nftInstanceHash(network: string, ifName: string, containerID: string): string {
  return `${nftNetworkHash(network)}-${formatHashWithPrefix(16, '', `${ifName}:${containerID}`)}`;
}

/** Maximum nftables comment length (knftables `CommentLengthMax`). */
export const NFT_COMMENT_MAX = 128;

/** nftables ipmasq rule comment: `<hash>, net: <network>, if: <ifName>, id: <containerID>` (quotes removed, ≤128 chars). */
export function nftInstanceComment(network: string, ifName: string, containerID: string): string {
  const strip = (s: string) => s.replaceAll('"', '');
  const c = `${nftInstanceHash(network, ifName, containerID)}, net: ${strip(network)}, if: ${strip(ifName)}, id: ${strip(containerID)}`;
  return cutUtf8(c, NFT_COMMENT_MAX);
}

/** Cut a string to at most `max` UTF-8 bytes (Go slices bytes), without splitting a character. */
function cutUtf8(s: string, max: number): string {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= max) return s;
  let end = max;
  while (end > 0 && ((b[end] ?? 0) & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString('utf8');
}

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/** Go `strconv.Quote` / `%q` for a string. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case '\\':
        out += '\\\\';
        continue;
      case '\x07':
        out += '\\a';
        continue;
      case '\b':
        out += '\\b';
        continue;
      case '\f':
        out += '\\f';
        continue;
      case '\n':
        out += '\\n';
        continue;
      case '\r':
        out += '\\r';
        continue;
      case '\t':
        out += '\\t';
        continue;
      case '\v':
        out += '\\v';
        continue;
    }
    if (PRINTABLE.test(ch)) out += ch;
    else if (cp < 0x80) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** Inverse of goQuote for the escapes it produces (and `\'`, octal `\NNN`). Throws on malformed input. */
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
    const simple: Record<string, string> = {
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
    if (e !== undefined && e in simple) out += simple[e];
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

/**
 * Parse an iptables comment made by formatComment: `name: "<net>" id: "<id>"`. Returns undefined
 * when the text does not have that shape.
 */
export function parseComment(comment: string): { network: string; containerID: string } | undefined {
  const m = /^name: ("(?:[^"\\]|\\.)*") id: ("(?:[^"\\]|\\.)*")$/s.exec(comment);
  if (!m) return undefined;
  try {
    return { network: goUnquote(m[1]!), containerID: goUnquote(m[2]!) };
  } catch {
    return undefined;
  }
}
