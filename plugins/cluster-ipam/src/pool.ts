/**
 * A pool: one `ipRanges` entry (or the top-level `range`) as allocatable addresses over BigInt — full 128-bit IPv6
 * — and how it is cut into blocks and named in the store.
 *
 * Names (DNS-1123 subdomains, see store.ts):
 *   allocation  `<net>.<fam>-<group>.<low>`  group = address >> 8 in hex (6 or 30 digits), low = last 8 bits (2)
 *               — named by the address alone, so two pools that overlap still meet on one name (no duplicate);
 *               with `enable_overlapping_ranges: false` `<net>` becomes `<net>.<range>`, range = the `range`
 *               CIDR (`<fam>-<network>-<prefix>`), not the pool's start/end: whereabouts keeps one IPPool per
 *               network_name and CIDR, so two configurations of one range (other range_start/range_end/exclude)
 *               still meet on one name, while different ranges may hand out the same address
 *   block       `<net>.<pool>.<base>-<bits>`  base = first address of the block (hex), 2^bits addresses, aligned
 * A block never spans two groups (bits ≤ 8), so the records of one block are one prefix listing of ≤ 256 names.
 */
import { type CIDR, type Family, formatIP, type IP } from '@cnikit/ip';

export interface Span {
  start: bigint;
  end: bigint;
}

export interface Pool {
  /** Index in the configuration's ranges (top-level `range` first, then `ipRanges`). */
  index: number;
  family: Family;
  /** The range's network (canonical text, e.g. `10.0.0.0/24`) and prefix length. */
  cidr: string;
  prefix: number;
  /** First and last address handed out (inclusive). */
  start: bigint;
  end: bigint;
  /** Excluded spans, merged and clipped to [start, end]. */
  excludes: Span[];
  /** The gateway when it lies in [start, end]: never handed out. */
  gateway?: bigint;
  /** How many addresses can be handed out. */
  size: bigint;
  /** log2 of the block size (0 … 8). */
  blockBits: number;
  /** `<fam>-<start>-<end>` in hex: the pool's part of block names. */
  key: string;
  /** `<fam>-<network>-<prefix>` (hex network): the range's part of record names without overlapping ranges. */
  rangeKey: string;
}

export const MAX_BLOCK_BITS = 8;
/** Default block: 32 addresses, smaller so that a pool has at least MIN_BLOCKS blocks. */
export const DEFAULT_BLOCK_BITS = 5;
const MIN_BLOCKS = 16n;

export function hexWidth(family: Family): number {
  return family === 4 ? 8 : 32;
}

export function hexOf(v: bigint, width: number): string {
  return v.toString(16).padStart(width, '0');
}

export function ipOf(family: Family, value: bigint): IP {
  return { family, value };
}

export function ipText(family: Family, value: bigint): string {
  return formatIP({ family, value });
}

/** Merge spans (sorted, overlapping or adjacent ones joined). */
export function mergeSpans(spans: Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: Span[] = [];
  for (const s of sorted) {
    const last = out[out.length - 1];
    if (last && s.start <= last.end + 1n) {
      if (s.end > last.end) last.end = s.end;
    } else out.push({ ...s });
  }
  return out;
}

/** Addresses of [a, b] that a pool hands out. */
export function countFree(p: Pool, a: bigint, b: bigint): bigint {
  const lo = a < p.start ? p.start : a;
  const hi = b > p.end ? p.end : b;
  if (lo > hi) return 0n;
  let n = hi - lo + 1n;
  for (const e of p.excludes) {
    const x = e.start < lo ? lo : e.start;
    const y = e.end > hi ? hi : e.end;
    if (x <= y) n -= y - x + 1n;
  }
  if (p.gateway !== undefined && p.gateway >= lo && p.gateway <= hi && !isExcluded(p, p.gateway)) n -= 1n;
  return n;
}

export function isExcluded(p: Pool, v: bigint): boolean {
  return p.excludes.some((e) => v >= e.start && v <= e.end);
}

/** Whether the pool hands out v. */
export function allocatable(p: Pool, v: bigint): boolean {
  return v >= p.start && v <= p.end && v !== p.gateway && !isExcluded(p, v);
}

/** Block bits for a pool: the configured size (or 32) made smaller until the pool has ≥ 16 blocks, down to 1. */
export function chooseBlockBits(start: bigint, end: bigint, wanted?: number): number {
  const span = end - start + 1n;
  let bits = Math.min(wanted ?? DEFAULT_BLOCK_BITS, MAX_BLOCK_BITS);
  while (bits > 0 && span / (1n << BigInt(bits)) < MIN_BLOCKS) bits--;
  return bits;
}

export interface BlockRef {
  /** First address of the aligned block (may lie before the pool's start). */
  base: bigint;
  /** The part of the block inside the pool. */
  first: bigint;
  last: bigint;
}

export function blockAt(p: Pool, base: bigint): BlockRef {
  const size = 1n << BigInt(p.blockBits);
  const last = base + size - 1n;
  return { base, first: base < p.start ? p.start : base, last: last > p.end ? p.end : last };
}

/** Aligned base of the block holding v. */
export function blockBase(p: Pool, v: bigint): bigint {
  const bits = BigInt(p.blockBits);
  return (v >> bits) << bits;
}

/** Number of aligned blocks that meet the pool, and the first one's base. */
export function blockSpan(p: Pool): { first: bigint; count: bigint } {
  const first = blockBase(p, p.start);
  const count = ((blockBase(p, p.end) - first) >> BigInt(p.blockBits)) + 1n;
  return { first, count };
}

/** A name part from free text (network_name): lower-case alphanumerics and '-', never empty. */
export function nameKey(text: string): string {
  const cleaned = text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (cleaned === text && cleaned !== '' && cleaned.length <= 63) return cleaned;
  // not a label as given: keep a readable part plus a short hash of the exact text, so two names never meet
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return `${cleaned.slice(0, 40) || 'net'}-${h.toString(16).padStart(8, '0')}`;
}

export function recordGroupPrefix(recordPrefix: string, family: Family, v: bigint): string {
  return `${recordPrefix}.${family}-${hexOf(v >> 8n, hexWidth(family) - 2)}.`;
}

/** The name segment of a range CIDR (its network address and length): records of one range without overlapping ranges. */
export function rangeKeyOf(family: Family, v: bigint, prefix: number): string {
  return `${family}-${hexOf(networkOf(family, v, prefix), hexWidth(family))}-${prefix}`;
}

export function recordName(recordPrefix: string, family: Family, v: bigint): string {
  return `${recordGroupPrefix(recordPrefix, family, v)}${hexOf(v & 0xffn, 2)}`;
}

export function blockPrefix(net: string, p: Pool): string {
  return `${net}.${p.key}.`;
}

export function blockName(net: string, p: Pool, base: bigint): string {
  return `${blockPrefix(net, p)}${hexOf(base, hexWidth(p.family))}-${p.blockBits}`;
}

/** `10.0.0.0/24 (range 10.0.0.10-10.0.0.50, 41 addresses)`: how errors name a pool. */
export function describePool(p: Pool): string {
  return `${p.cidr} (${ipText(p.family, p.start)}-${ipText(p.family, p.end)}, ${p.size} addresses)`;
}

function networkOf(family: Family, v: bigint, prefix: number): bigint {
  const host = BigInt((family === 4 ? 32 : 128) - prefix);
  return (v >> host) << host;
}

export function makePool(
  index: number,
  cidr: CIDR,
  cidrText: string,
  start: bigint,
  end: bigint,
  excludes: Span[],
  gateway: bigint | undefined,
  blockBits?: number,
): Pool {
  const family = cidr.ip.family;
  const w = hexWidth(family);
  const merged = mergeSpans(excludes)
    .map((e) => ({ start: e.start < start ? start : e.start, end: e.end > end ? end : e.end }))
    .filter((e) => e.start <= e.end);
  const p: Pool = {
    index,
    family,
    cidr: cidrText,
    prefix: cidr.prefix,
    start,
    end,
    excludes: merged,
    size: 0n,
    blockBits: chooseBlockBits(start, end, blockBits),
    key: `${family}-${hexOf(start, w)}-${hexOf(end, w)}`,
    rangeKey: rangeKeyOf(family, cidr.ip.value, cidr.prefix),
  };
  if (gateway !== undefined && gateway >= start && gateway <= end) p.gateway = gateway;
  p.size = countFree(p, start, end);
  return p;
}
