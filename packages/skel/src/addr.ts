/**
 * Minimal IP / CIDR parsing and canonical formatting with Go `net` semantics, used to normalise results
 * (lower-case, RFC 5952 compression, IPv4-mapped IPv6 printed as IPv4, CIDR host bits kept).
 */

function parseV4(s: string): number[] | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^[0-9]{1,3}$/.test(p) || (p.length > 1 && p[0] === '0')) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function parseV6(s: string): number[] | undefined {
  if (s.includes('%')) return undefined;
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === '') return [];
    const out: number[] = [];
    const parts = h.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      if (p.includes('.')) {
        if (i !== parts.length - 1) return undefined;
        const v4 = parseV4(p);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
        out.push(Number.parseInt(p, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  if (!head) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const tail = groups(halves[1]!);
  // an embedded IPv4 is only allowed in the last part
  if (!tail || (halves[0]!.includes('.') && halves[0] !== '')) return undefined;
  const fill = 8 - head.length - tail.length;
  if (fill < 1) return undefined;
  return [...head, ...new Array<number>(fill).fill(0), ...tail];
}

/** A parsed address: 16 bytes as 8 groups, plus whether it was written/should print as IPv4. */
export interface Addr {
  groups: number[];
  /** True when the address is IPv4 or IPv4-mapped IPv6 (Go `To4() != nil`). */
  v4: boolean;
  /** Bit length of the textual family (32 for dotted IPv4, 128 otherwise). */
  bits: 32 | 128;
}

export function parseAddr(s: string): Addr | undefined {
  if (s.includes(':')) {
    const g = parseV6(s);
    if (!g) return undefined;
    const mapped = g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff;
    return { groups: g, v4: mapped, bits: 128 };
  }
  const v4 = parseV4(s);
  if (!v4) return undefined;
  return {
    groups: [0, 0, 0, 0, 0, 0xffff, (v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!],
    v4: true,
    bits: 32,
  };
}

export function formatAddr(a: Addr): string {
  const g = a.groups;
  if (a.v4) return `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  // RFC 5952: compress the longest run (>= 2) of zero groups, the first one on a tie.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (x: number) => x.toString(16);
  if (bestLen < 2) return g.map(hex).join(':');
  return `${g.slice(0, bestStart).map(hex).join(':')}::${g
    .slice(bestStart + bestLen)
    .map(hex)
    .join(':')}`;
}

/** Canonical text of an IP address, or undefined if it does not parse (Go net.ParseIP). */
export function canonicalIP(s: string): string | undefined {
  const a = parseAddr(s);
  return a ? formatAddr(a) : undefined;
}

/** Canonical text of a CIDR (host bits kept), or undefined (Go net.ParseCIDR + IPNet.String). */
export function canonicalCIDR(s: string): string | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const a = parseAddr(s.slice(0, slash));
  const m = s.slice(slash + 1);
  if (!a || !/^[0-9]+$/.test(m)) return undefined;
  const n = Number(m);
  if (!Number.isSafeInteger(n) || n > a.bits) return undefined;
  // IPv4(-mapped) prints with a 32-bit prefix (Go takes the last 4 bytes of a 16-byte mask).
  const prefix = a.v4 && a.bits === 128 ? Math.max(0, n - 96) : n;
  return `${formatAddr(a)}/${prefix}`;
}

/** True if a (canonical or not) IP or CIDR text is IPv4 / IPv4-mapped (Go `To4() != nil`). */
export function isV4(ipOrCidr: string): boolean {
  const slash = ipOrCidr.indexOf('/');
  const a = parseAddr(slash < 0 ? ipOrCidr : ipOrCidr.slice(0, slash));
  return a?.v4 ?? false;
}
