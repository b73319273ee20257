/**
 * IP address arithmetic with Go `net` semantics, on BigInt (no dependencies).
 *
 * Canonical model (Go's `canonicalizeIP`/`To4`): an address whose 16-byte form is IPv4-mapped
 * (`::ffff:a.b.c.d`) IS an IPv4 address. Text forms follow Go's `net.IP.String()`: dotted quad for
 * IPv4 (and mapped IPv6), RFC 5952 for IPv6 (lower-case, longest run of ≥ 2 zero groups as `::`).
 */

export type Family = 4 | 6;

/** An IP address: family plus the address as an unsigned integer (32 or 128 bits). */
export interface IP {
  readonly family: Family;
  readonly value: bigint;
}

/**
 * A CIDR as Go's `net.ParseCIDR` + CNI `types.IPNet` keep it: the address with its host bits,
 * the prefix length, and the mask width of the text form (`::ffff:10.0.0.0/104` is an IPv4
 * address with a 128-bit mask, which is how Go detects "IP and Mask version mismatch").
 */
export interface CIDR {
  readonly ip: IP;
  readonly prefix: number;
  readonly maskBits: 32 | 128;
}

const V4_MAX = 0xffffffffn;
const V6_MAX = (1n << 128n) - 1n;

export function bitsOf(family: Family): 32 | 128 {
  return family === 4 ? 32 : 128;
}

export function maxValue(family: Family): bigint {
  return family === 4 ? V4_MAX : V6_MAX;
}

/** A 128-bit value in canonical form: IPv4-mapped addresses become IPv4. */
function canonical6(v: bigint): IP {
  if (v >> 32n === 0xffffn) return { family: 4, value: v & V4_MAX };
  return { family: 6, value: v };
}

// -------------------------------------------------------------------------------------------
// Parsing (Go 1.17+ rules: no leading zeros in IPv4 fields, no zones, at most one `::`)

function parse4(s: string): number | undefined {
  let value = 0;
  let fields = 0;
  let i = 0;
  const n = s.length;
  while (fields < 4) {
    if (i >= n) return undefined;
    let field = 0;
    const start = i;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      field = field * 10 + (c - 48);
      if (field > 255) return undefined;
      i++;
    }
    const len = i - start;
    if (len === 0) return undefined;
    if (len > 1 && s.charCodeAt(start) === 48) return undefined; // leading zero
    value = value * 256 + field;
    fields++;
    if (fields < 4) {
      if (s.charCodeAt(i) !== 46) return undefined; // '.'
      i++;
    }
  }
  return i === n ? value : undefined;
}

function hexVal(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

function parse6(s: string): bigint | undefined {
  const groups: number[] = [];
  let ellipsis = -1;
  let i = 0;
  const n = s.length;
  if (n >= 2 && s[0] === ':' && s[1] === ':') {
    ellipsis = 0;
    i = 2;
    if (i === n) return 0n;
  }
  while (i < n) {
    // one group: hex digits, or an embedded IPv4 address at the end
    let v = 0;
    let j = i;
    while (j < n) {
      const h = hexVal(s.charCodeAt(j));
      if (h < 0) break;
      v = v * 16 + h;
      j++;
      if (j - i > 4) return undefined;
    }
    if (j === i) return undefined;
    if (j < n && s[j] === '.') {
      if (ellipsis < 0 && groups.length !== 6) return undefined;
      if (groups.length + 2 > 8) return undefined;
      const v4 = parse4(s.slice(i));
      if (v4 === undefined) return undefined;
      groups.push(v4 >>> 16, v4 & 0xffff);
      i = n;
      break;
    }
    groups.push(v);
    i = j;
    if (i === n) break;
    if (s[i] !== ':') return undefined;
    i++;
    if (i === n) return undefined; // trailing single ':'
    if (s[i] === ':') {
      if (ellipsis >= 0) return undefined;
      ellipsis = groups.length;
      i++;
      if (i === n) break;
    }
    if (groups.length >= 8) return undefined;
  }
  if (groups.length > 8) return undefined;
  if (ellipsis >= 0) {
    if (groups.length === 8) return undefined; // '::' must stand for at least one group
    const fill = 8 - groups.length;
    groups.splice(ellipsis, 0, ...new Array<number>(fill).fill(0));
  } else if (groups.length !== 8) {
    return undefined;
  }
  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(g);
  return value;
}

/** Go `net.ParseIP` followed by `To4`-canonicalisation; undefined when invalid. */
export function parseIP(text: string): IP | undefined {
  if (typeof text !== 'string' || text.length === 0 || text.length > 64) return undefined;
  const v4 = parse4(text);
  if (v4 !== undefined) return { family: 4, value: BigInt(v4) };
  if (!text.includes(':')) return undefined;
  const v6 = parse6(text);
  return v6 === undefined ? undefined : canonical6(v6);
}

/** Go `net.ParseCIDR` (keeping the host bits of the address, like CNI `types.IPNet`). */
export function parseCIDR(text: string): CIDR | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = text.slice(0, slash);
  const mask = text.slice(slash + 1);
  let ip: IP | undefined;
  let maskBits: 32 | 128;
  const v4 = parse4(addr);
  if (v4 !== undefined) {
    ip = { family: 4, value: BigInt(v4) };
    maskBits = 32;
  } else {
    const v6 = addr.includes(':') ? parse6(addr) : undefined;
    if (v6 === undefined) return undefined;
    ip = canonical6(v6);
    maskBits = 128;
  }
  const prefix = dtoi(mask);
  if (prefix === undefined || prefix > maskBits) return undefined;
  return { ip, prefix, maskBits };
}

/** Go's `dtoi` for the mask: decimal digits only (leading zeros allowed), below 0xFFFFFF. */
function dtoi(s: string): number | undefined {
  if (s.length === 0) return undefined;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
    n = n * 10 + (c - 48);
    if (n >= 0xffffff) return undefined;
  }
  return n;
}

/** A CIDR for `ip/prefix` with the prefix in the address's own family (32 or 128 bits). */
export function cidrOf(ip: IP, prefix: number): CIDR {
  return { ip, prefix, maskBits: bitsOf(ip.family) };
}

/** Canonical text of an IP address (Go `net.ParseIP(s).String()`), or undefined if invalid. */
export function canonicalIP(text: string): string | undefined {
  const ip = parseIP(text);
  return ip ? formatIP(ip) : undefined;
}

/** Canonical text of a CIDR, host bits kept (Go `types.ParseCIDR` + `String()`), or undefined. */
export function canonicalCIDR(text: string): string | undefined {
  const c = parseCIDR(text);
  return c ? formatCIDR(c) : undefined;
}

/** Family of an `ip` or `ip/prefix` text (only the address is looked at), undefined if invalid. */
export function familyOf(text: string): Family | undefined {
  const slash = text.indexOf('/');
  return parseIP(slash < 0 ? text : text.slice(0, slash))?.family;
}

// -------------------------------------------------------------------------------------------
// Bytes (netlink attributes, iptables): network byte order, 4 bytes for IPv4, 16 for IPv6

/** The address as 4 (IPv4) or 16 (IPv6) bytes. */
export function toBytes(ip: IP): Uint8Array {
  const n = ip.family === 4 ? 4 : 16;
  const out = new Uint8Array(n);
  let v = ip.value;
  for (let i = n - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** An address from 4 or 16 bytes (IPv4-mapped IPv6 becomes IPv4, like Go `To4`); undefined otherwise. */
export function fromBytes(bytes: Uint8Array): IP | undefined {
  if (bytes.length !== 4 && bytes.length !== 16) return undefined;
  let v = 0n;
  for (let i = 0; i < bytes.length; i++) v = (v << 8n) | BigInt(bytes[i]!);
  return bytes.length === 4 ? { family: 4, value: v } : canonical6(v);
}

/** Parse `ip` or `ip/prefix` (Go `pkg/ip.ParseIP`); the prefix, when given, must be valid. */
export function parseIPOrCIDR(text: string): { ip: IP; cidr?: CIDR } | undefined {
  if (text.includes('/')) {
    const cidr = parseCIDR(text);
    return cidr ? { ip: cidr.ip, cidr } : undefined;
  }
  const ip = parseIP(text);
  return ip ? { ip } : undefined;
}

// -------------------------------------------------------------------------------------------
// Formatting

export function formatIP(ip: IP): string {
  const v = ip.value;
  if (ip.family === 4) {
    const n = Number(v);
    return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
  }
  const groups: number[] = new Array<number>(8);
  for (let k = 0; k < 8; k++) groups[k] = Number((v >> BigInt(112 - 16 * k)) & 0xffffn);
  // longest run of zero groups, at least 2 long, first one wins ties
  let bestStart = -1;
  let bestLen = 1;
  for (let k = 0; k < 8; ) {
    if (groups[k] !== 0) {
      k++;
      continue;
    }
    let e = k;
    while (e < 8 && groups[e] === 0) e++;
    if (e - k > bestLen) {
      bestStart = k;
      bestLen = e - k;
    }
    k = e;
  }
  if (bestStart < 0) return groups.map((g) => g.toString(16)).join(':');
  const head = groups
    .slice(0, bestStart)
    .map((g) => g.toString(16))
    .join(':');
  const tail = groups
    .slice(bestStart + bestLen)
    .map((g) => g.toString(16))
    .join(':');
  return `${head}::${tail}`;
}

/** The prefix length in this family's terms, as Go prints it (a mapped-IPv4 CIDR's 128-bit prefix minus 96). */
export function familyPrefix(c: CIDR): number {
  if (c.ip.family === 4 && c.maskBits === 128) return Math.max(0, c.prefix - 96);
  return c.prefix;
}

/** Go `(*net.IPNet).String()`: the address as stored (host bits NOT cleared) and the prefix. */
export function formatCIDR(c: CIDR): string {
  return `${formatIP(c.ip)}/${familyPrefix(c)}`;
}

// -------------------------------------------------------------------------------------------
// Arithmetic

export function equal(a: IP | undefined, b: IP | undefined): boolean {
  return a !== undefined && b !== undefined && a.family === b.family && a.value === b.value;
}

/** Go `ip.Cmp`: -1/0/1, or -2 when the families differ. */
export function compare(a: IP, b: IP): -2 | -1 | 0 | 1 {
  if (a.family !== b.family) return -2;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

/** The next address, or undefined past the last address of the family. */
export function next(ip: IP): IP | undefined {
  return add(ip, 1n);
}

/** The previous address, or undefined before the first address of the family. */
export function prev(ip: IP): IP | undefined {
  return add(ip, -1n);
}

/** `ip + offset`, or undefined when the result leaves the family's address space. */
export function add(ip: IP, offset: bigint | number): IP | undefined {
  const v = ip.value + BigInt(offset);
  if (v < 0n || v > maxValue(ip.family)) return undefined;
  return { family: ip.family, value: v };
}

/** Mask of a prefix length for a family, as an integer. */
export function maskOf(family: Family, prefix: number): bigint {
  const bits = BigInt(bitsOf(family));
  const p = BigInt(prefix);
  if (p <= 0n) return 0n;
  if (p >= bits) return maxValue(family);
  return (maxValue(family) >> (bits - p)) << (bits - p);
}

/** The network address (host bits cleared). */
export function network(c: CIDR): IP {
  return { family: c.ip.family, value: c.ip.value & maskOf(c.ip.family, familyPrefix(c)) };
}

/** The network as Go's `net.ParseCIDR` returns it: host bits cleared, prefix in the family's terms. */
export function networkCIDR(c: CIDR): CIDR {
  return cidrOf(network(c), familyPrefix(c));
}

/** The last address of the network (IPv4: the broadcast address). */
export function broadcast(c: CIDR): IP {
  const fam = c.ip.family;
  return { family: fam, value: network(c).value | (maxValue(fam) ^ maskOf(fam, familyPrefix(c))) };
}

/** Whether `ip` lies inside the network `c` (Go `(*net.IPNet).Contains`, same family only). */
export function contains(c: CIDR, ip: IP): boolean {
  if (ip.family !== c.ip.family) return false;
  const m = maskOf(c.ip.family, familyPrefix(c));
  return (ip.value & m) === (c.ip.value & m);
}

/** Number of addresses in the network. */
export function size(c: CIDR): bigint {
  return 1n << BigInt(bitsOf(c.ip.family) - familyPrefix(c));
}

/** Whether two networks share at least one address. */
export function overlaps(a: CIDR, b: CIDR): boolean {
  if (a.ip.family !== b.ip.family) return false;
  return contains(a, network(b)) || contains(b, network(a));
}

/** Go `net.IP.IsLoopback`: 127.0.0.0/8 (also written IPv4-mapped) and ::1. */
export function isLoopback(ip: IP): boolean {
  return ip.family === 4 ? ip.value >> 24n === 127n : ip.value === 1n;
}

/**
 * Go `net.IP.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local unicast or the IPv4
 * limited broadcast address.
 */
export function isGlobalUnicast(ip: IP): boolean {
  const v = ip.value;
  if (ip.family === 4) {
    if (v === 0n || v === V4_MAX) return false;
    const first = Number(v >> 24n);
    if (first === 127 || (first >= 224 && first <= 239)) return false; // loopback, multicast
    return v >> 16n !== 0xa9fen; // 169.254/16
  }
  if (v === 0n || v === 1n) return false;
  const top = Number(v >> 112n);
  if (top >> 8 === 0xff) return false; // ff00::/8
  return (top & 0xffc0) !== 0xfe80; // fe80::/10
}

/**
 * Iterate the addresses from `start` to `end` inclusive, lazily (never materialises the range).
 * Going past the end of the address space stops the iteration.
 */
export function* range(start: IP, end: IP): Generator<IP> {
  if (start.family !== end.family) return;
  for (let v = start.value; v <= end.value; v++) yield { family: start.family, value: v };
}
