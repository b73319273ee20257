// Minimal IP text <-> bytes conversion for netlink attributes (no dependencies, cheap to import).
// Full IP math lives in @cnikit/ip; this only needs exact parsing and Go-compatible printing.

export interface IpBytes {
  family: 4 | 6;
  bytes: Buffer;
}

export interface CidrBytes extends IpBytes {
  prefix: number;
}

function parseV4(s: string): Buffer | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out = Buffer.alloc(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseV6(s: string): Buffer | undefined {
  if (s.length < 2 || s.length > 45) return undefined;
  let text = s;
  let tail: Buffer | undefined;
  const lastColon = text.lastIndexOf(':');
  if (text.indexOf('.', lastColon) >= 0) {
    tail = parseV4(text.slice(lastColon + 1));
    if (!tail) return undefined;
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const dbl = text.indexOf('::');
  if (dbl >= 0 && text.indexOf('::', dbl + 1) >= 0) return undefined;
  const groupsOf = (t: string): number[] | undefined => {
    if (t === '') return [];
    const gs = t.split(':');
    const out: number[] = [];
    for (const g of gs) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(Number.parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  if (dbl >= 0) {
    const head = groupsOf(text.slice(0, dbl));
    const rest = groupsOf(text.slice(dbl + 2));
    if (!head || !rest || head.length + rest.length > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  } else {
    const all = groupsOf(text);
    if (all?.length !== 8) return undefined;
    groups = all;
  }
  const out = Buffer.alloc(16);
  for (let i = 0; i < 8; i++) out.writeUInt16BE(groups[i]!, i * 2);
  if (tail) tail.copy(out, 12);
  return out;
}

/** Parses an IPv4 or IPv6 address (no prefix). Returns undefined when malformed. */
export function parseIp(s: string): IpBytes | undefined {
  if (s.includes(':')) {
    const b = parseV6(s);
    return b ? { family: 6, bytes: b } : undefined;
  }
  const b = parseV4(s);
  return b ? { family: 4, bytes: b } : undefined;
}

/** Parses 'ip/prefix' (the address is kept as given, host bits included). */
export function parseCidr(s: string): CidrBytes | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIp(s.slice(0, slash));
  const p = s.slice(slash + 1);
  if (!ip || !/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
  const prefix = Number(p);
  if (prefix > (ip.family === 4 ? 32 : 128)) return undefined;
  return { ...ip, prefix };
}

/** Go net.IP.String(): dotted quad, or RFC 5952 IPv6 (IPv4-mapped IPv6 prints as IPv4). */
export function formatIp(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length !== 16) return '';
  let mapped = b[10] === 0xff && b[11] === 0xff;
  for (let i = 0; i < 10 && mapped; i++) if (b[i] !== 0) mapped = false;
  if (mapped) return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((b[i]! << 8) | b[i + 1]!);
  // longest run of >= 2 zero groups, first one on ties
  let bestStart = -1;
  let bestLen = 1;
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
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  if (bestStart < 0) return hex(g);
  return `${hex(g.slice(0, bestStart))}::${hex(g.slice(bestStart + bestLen))}`;
}

/** The network address of `ip` under `prefix` (host bits cleared). */
export function maskBytes(ip: Uint8Array, prefix: number): Buffer {
  const out = Buffer.from(ip);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i]! &= (0xff00 >> bits) & 0xff;
  }
  return out;
}

/** The IPv4 broadcast (all host bits set). */
export function broadcastBytes(ip: Uint8Array, prefix: number): Buffer {
  const out = Buffer.from(ip);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i]! |= ~(0xff00 >> bits) & 0xff;
  }
  return out;
}
