/**
 * The small amount of address arithmetic the bridge needs (gateway = network + 1, subnet overlap,
 * Go-compatible text forms). Kept local and dependency-free so the pure parts of the plugin can be
 * unit-tested without the system layer.
 */

// Node's isIPv4/isIPv6 patterns (lib/internal/net.js), so the result is the same under Node and Bun without
// loading node:net (which costs Bun 5–10 ms per start: it pulls in the stream machinery).
const V4_SEG = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
const V4_STR = `(?:${V4_SEG}\\.){3}${V4_SEG}`;
const V6_SEG = '(?:[0-9a-fA-F]{1,4})';
let v4Re: RegExp | undefined;
let v6Re: RegExp | undefined;
function isIPv4(s: string): boolean {
  v4Re ??= new RegExp(`^${V4_STR}$`);
  return v4Re.test(s);
}
function isIPv6(s: string): boolean {
  v6Re ??= new RegExp(
    '^(?:' +
      `(?:${V6_SEG}:){7}(?:${V6_SEG}|:)|` +
      `(?:${V6_SEG}:){6}(?:${V4_STR}|:${V6_SEG}|:)|` +
      `(?:${V6_SEG}:){5}(?::${V4_STR}|(?::${V6_SEG}){1,2}|:)|` +
      `(?:${V6_SEG}:){4}(?:(?::${V6_SEG}){0,1}:${V4_STR}|(?::${V6_SEG}){1,3}|:)|` +
      `(?:${V6_SEG}:){3}(?:(?::${V6_SEG}){0,2}:${V4_STR}|(?::${V6_SEG}){1,4}|:)|` +
      `(?:${V6_SEG}:){2}(?:(?::${V6_SEG}){0,3}:${V4_STR}|(?::${V6_SEG}){1,5}|:)|` +
      `(?:${V6_SEG}:){1}(?:(?::${V6_SEG}){0,4}:${V4_STR}|(?::${V6_SEG}){1,6}|:)|` +
      `(?::(?:(?::${V6_SEG}){0,5}:${V4_STR}|(?::${V6_SEG}){1,7}|:))` +
      ')(?:%[0-9a-zA-Z-.:]{1,})?$',
  );
  return v6Re.test(s);
}

export type Family = 4 | 6;

export interface IPNet {
  family: Family;
  /** 4 or 16 bytes. */
  bytes: Uint8Array;
  prefix: number;
}

function parseV4(text: string): Uint8Array | undefined {
  if (!isIPv4(text)) return undefined;
  return Uint8Array.from(text.split('.').map(Number));
}

function parseV6(text: string): Uint8Array | undefined {
  if (!isIPv6(text) || text.includes('%')) return undefined;
  let t = text;
  const lastColon = t.lastIndexOf(':');
  const tail = t.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseV4(tail);
    if (!v4) return undefined;
    const g1 = ((v4[0]! << 8) | v4[1]!).toString(16);
    const g2 = ((v4[2]! << 8) | v4[3]!).toString(16);
    t = `${t.slice(0, lastColon + 1)}${g1}:${g2}`;
  }
  const parts = t.split('::');
  if (parts.length > 2) return undefined;
  const groupsOf = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const head = groupsOf(parts[0]!);
  const rest = parts.length === 2 ? groupsOf(parts[1]!) : [];
  const groups =
    parts.length === 2 ? [...head, ...new Array(8 - head.length - rest.length).fill(0), ...rest] : head;
  if (groups.length !== 8) return undefined;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** Parse an IP address (v4 or v6). IPv4-mapped IPv6 addresses become IPv4 like Go's `To4()`. */
export function parseIP(text: string): { family: Family; bytes: Uint8Array } | undefined {
  const v4 = parseV4(text);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = parseV6(text);
  if (!v6) return undefined;
  if (v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff) {
    return { family: 4, bytes: v6.slice(12) };
  }
  return { family: 6, bytes: v6 };
}

/** Parse `ip/prefix` keeping the host bits (Go `types.IPNet` semantics). */
export function parseCIDR(text: string): IPNet | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ipText = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  // Go parses an IPv4-mapped address with an IPv6 prefix length; keep it simple: the prefix is
  // interpreted in the address's own family.
  const v4 = parseV4(ipText);
  if (v4) return prefix <= 32 ? { family: 4, bytes: v4, prefix } : undefined;
  const v6 = parseV6(ipText);
  if (!v6 || prefix > 128) return undefined;
  if (v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff && prefix >= 96) {
    return { family: 4, bytes: v6.slice(12), prefix: prefix - 96 };
  }
  return { family: 6, bytes: v6, prefix };
}

export function formatIP(bytes: Uint8Array): string {
  if (bytes.length === 4) return Array.from(bytes).join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // RFC 5952: compress the longest run (≥2) of zero groups, first one on ties.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function formatCIDR(n: IPNet): string {
  return `${formatIP(n.bytes)}/${n.prefix}`;
}

/** The network address (host bits cleared). */
export function networkOf(n: IPNet): IPNet {
  const out = new Uint8Array(n.bytes.length);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, n.prefix - i * 8));
    const mask = bits === 0 ? 0 : (0xff << (8 - bits)) & 0xff;
    out[i] = n.bytes[i]! & mask;
  }
  return { family: n.family, bytes: out, prefix: n.prefix };
}

/** ip + 1 (wrapping like Go's NextIP would overflow into the next byte). */
export function nextIP(bytes: Uint8Array): Uint8Array {
  const out = Uint8Array.from(bytes);
  for (let i = out.length - 1; i >= 0; i--) {
    out[i] = (out[i]! + 1) & 0xff;
    if (out[i] !== 0) break;
  }
  return out;
}

/** Whether `net` contains `ip` (same family only). */
export function contains(net: IPNet, ip: Uint8Array): boolean {
  if (ip.length !== net.bytes.length) return false;
  const a = networkOf(net).bytes;
  const b = networkOf({ family: net.family, bytes: ip, prefix: net.prefix }).bytes;
  return a.every((v, i) => v === b[i]);
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** Go's `IP.IsGlobalUnicast()`: not unspecified, loopback, multicast, link-local, or v4 broadcast. */
export function isGlobalUnicast(bytes: Uint8Array): boolean {
  if (bytes.length === 4) {
    if (bytes.every((b) => b === 0) || bytes.every((b) => b === 255)) return false;
    if (bytes[0] === 127 || bytes[0]! >= 224) return false;
    if (bytes[0] === 169 && bytes[1] === 254) return false;
    return true;
  }
  if (bytes.every((b) => b === 0)) return false;
  if (bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1) return false;
  if (bytes[0] === 0xff) return false;
  if (bytes[0] === 0xfe && (bytes[1]! & 0xc0) === 0x80) return false;
  return true;
}
