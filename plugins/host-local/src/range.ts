/**
 * host-local ranges and range sets: canonicalisation, validation and membership with the exact
 * semantics and messages of the reference (`backend/allocator/range.go`, `range_set.go`).
 */
import {
  broadcast,
  type CIDR,
  compare,
  contains,
  formatCIDR,
  formatIP,
  type IP,
  network,
  next,
  parseIP,
  prev,
} from '@cnikit/ip';

/** A range as configured: every field optional until canonicalised. */
export interface RawRange {
  subnet?: CIDR;
  rangeStart?: IP;
  rangeEnd?: IP;
  gateway?: IP;
}

/** A canonical range: every field set, subnet without host bits. */
export interface Range {
  subnet: CIDR;
  rangeStart: IP;
  rangeEnd: IP;
  gateway: IP;
}

export type RangeSet = Range[];

/** A validation failure (the caller wraps and codes it). */
export class InvalidRangeError extends Error {}

/** Go `Range.Contains`, also usable while a range is half-canonicalised. */
export function rangeContains(r: RawRange, addr: IP): boolean {
  const subnet = r.subnet;
  if (!subnet) return false;
  if (addr.family !== subnet.ip.family) return false;
  if (!contains(subnet, addr)) return false;
  // Go compares with ip.Cmp, which answers -2 for another family: "< 0" then excludes the address,
  // "> 0" does not.
  if (r.rangeStart && compare(addr, r.rangeStart) < 0) return false;
  if (r.rangeEnd && compare(addr, r.rangeEnd) > 0) return false;
  return true;
}

/** Go `Range.Canonicalize`: fills defaults and validates; throws InvalidRangeError with the reference's text. */
export function canonicalizeRange(raw: RawRange): Range {
  const subnet = raw.subnet;
  if (!subnet) throw new InvalidRangeError('IP <nil> not v4 nor v6');
  const ones = subnet.prefix;
  const maskLen = subnet.maskBits;
  if (ones > maskLen - 2)
    throw new InvalidRangeError(`Network ${formatCIDR(subnet)} too small to allocate from`);
  if (subnet.ip.family === 4 && maskLen === 128)
    throw new InvalidRangeError('IPNet IP and Mask version mismatch');
  const net = network(subnet);
  if (net.value !== subnet.ip.value) {
    throw new InvalidRangeError(
      `Network has host bits set. For a subnet mask of length ${ones} the network address is ${formatIP(net)}`,
    );
  }
  const r: RawRange = { ...raw };
  const first = next(net)!;
  if (!r.gateway) r.gateway = first;
  if (r.rangeStart) {
    if (!rangeContains(r, r.rangeStart)) {
      throw new InvalidRangeError(
        `RangeStart ${formatIP(r.rangeStart)} not in network ${formatCIDR(subnet)}`,
      );
    }
  } else {
    r.rangeStart = first;
  }
  if (r.rangeEnd) {
    if (!rangeContains(r, r.rangeEnd)) {
      throw new InvalidRangeError(`RangeEnd ${formatIP(r.rangeEnd)} not in network ${formatCIDR(subnet)}`);
    }
  } else {
    const last = broadcast(subnet);
    r.rangeEnd = last.family === 4 ? prev(last)! : last;
  }
  return r as Range;
}

export function rangeString(r: Range): string {
  return `${formatIP(r.rangeStart)}-${formatIP(r.rangeEnd)}`;
}

export function rangesOverlap(a: Range, b: Range): boolean {
  if (a.rangeStart.family !== b.rangeStart.family) return false;
  const as = a.rangeStart.value;
  const ae = a.rangeEnd.value;
  const bs = b.rangeStart.value;
  const be = b.rangeEnd.value;
  // Both ranges lie inside their subnets, so "one contains an end of the other" is interval intersection
  // unless a range is inverted (an explicit rangeStart after the default rangeEnd): then ask like Go does.
  if (as <= ae && bs <= be) return as <= be && bs <= ae;
  return (
    rangeContains(a, b.rangeStart) ||
    rangeContains(a, b.rangeEnd) ||
    rangeContains(b, a.rangeStart) ||
    rangeContains(b, a.rangeEnd)
  );
}

/**
 * Whether any two of these ranges may overlap, in O(n log n): a sweep over the ranges sorted by start.
 * Answers true (so callers run the reference's pairwise loop, which names the first pair) whenever an
 * overlap exists or a range is inverted.
 */
export function mayOverlap(ranges: readonly Range[]): boolean {
  if (ranges.length < 2) return false;
  if (ranges.some((r) => r.rangeStart.value > r.rangeEnd.value)) return true;
  const sorted = [...ranges].sort(
    (a, b) => a.rangeStart.family - b.rangeStart.family || compare(a.rangeStart, b.rangeStart),
  );
  // sweep: overlap iff a range starts at or before the largest end seen so far in its family
  let maxEnd = -1n;
  for (let i = 0; i < sorted.length; i++) {
    const cur = sorted[i]!;
    if (i > 0 && sorted[i - 1]!.rangeStart.family !== cur.rangeStart.family) maxEnd = -1n;
    if (cur.rangeStart.value <= maxEnd) return true;
    if (cur.rangeEnd.value > maxEnd) maxEnd = cur.rangeEnd.value;
  }
  return false;
}

/** Go `RangeSet.Canonicalize`. */
export function canonicalizeRangeSet(raw: RawRange[]): RangeSet {
  if (raw.length === 0) throw new InvalidRangeError('empty range set');
  const out: RangeSet = [];
  for (let i = 0; i < raw.length; i++) {
    const r = canonicalizeRange(raw[i]!);
    if (i > 0 && r.rangeStart.family !== out[0]!.rangeStart.family)
      throw new InvalidRangeError('mixed address families');
    out.push(r);
  }
  if (!mayOverlap(out)) return out;
  for (let i = 0; i < out.length - 1; i++) {
    for (let j = i + 1; j < out.length; j++) {
      if (rangesOverlap(out[i]!, out[j]!)) {
        throw new InvalidRangeError(`subnets ${rangeString(out[i]!)} and ${rangeString(out[j]!)} overlap`);
      }
    }
  }
  return out;
}

export function rangeSetString(set: RangeSet): string {
  return set.map(rangeString).join(',');
}

/** The range of the set containing `addr`, if any. */
export function rangeFor(set: RangeSet, addr: IP): Range | undefined {
  for (const r of set) if (rangeContains(r, addr)) return r;
  return undefined;
}

/** How many addresses an ADD can get from the set: every range's addresses but its gateway (bigint: IPv6). */
export function rangeSetSize(set: RangeSet): bigint {
  let n = 0n;
  for (const r of set) {
    n += r.rangeEnd.value - r.rangeStart.value + 1n;
    if (rangeContains(r, r.gateway)) n -= 1n;
  }
  return n;
}

/** Addresses of the set still free, given the taken names of the store directory (canonical address texts). */
export function rangeSetFree(set: RangeSet, taken: Iterable<string>): bigint {
  let used = 0n;
  for (const name of taken) {
    const ip = parseIP(name);
    if (!ip || formatIP(ip) !== name) continue;
    const r = rangeFor(set, ip);
    if (r && compare(ip, r.gateway) !== 0) used++;
  }
  return rangeSetSize(set) - used;
}

export function rangeSetsOverlap(a: RangeSet, b: RangeSet): boolean {
  for (const r of a) for (const r1 of b) if (rangesOverlap(r, r1)) return true;
  return false;
}
