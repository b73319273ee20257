/**
 * DHCPv4 messages (RFC 2131) and the options the client uses (RFC 2132, 3442, 3397): encoding and decoding only,
 * no I/O. Addresses are dotted-quad strings; option values stay raw bytes until a typed reader decodes them.
 */

export const BOOTREQUEST = 1;
export const BOOTREPLY = 2;
export const MAGIC_COOKIE = 0x63825363;
/** The broadcast bit of `flags`: the server must broadcast its replies (the client cannot receive unicast yet). */
export const FLAG_BROADCAST = 0x8000;
/** A BOOTP message is at least 300 bytes; some servers drop shorter ones. */
const MIN_MESSAGE = 300;
const HEADER = 236;

export const MessageType = {
  DISCOVER: 1,
  OFFER: 2,
  REQUEST: 3,
  DECLINE: 4,
  ACK: 5,
  NAK: 6,
  RELEASE: 7,
  INFORM: 8,
} as const;

export const MESSAGE_TYPE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(MessageType).map(([k, v]) => [v, `DHCP${k}`]),
);

/** Option codes the client reads or writes. */
export const Opt = {
  PAD: 0,
  SUBNET_MASK: 1,
  ROUTER: 3,
  DNS: 6,
  HOST_NAME: 12,
  DOMAIN_NAME: 15,
  STATIC_ROUTES: 33,
  REQUESTED_IP: 50,
  LEASE_TIME: 51,
  OVERLOAD: 52,
  MESSAGE_TYPE: 53,
  SERVER_ID: 54,
  PARAMETER_REQUEST_LIST: 55,
  MESSAGE: 56,
  MAX_MESSAGE_SIZE: 57,
  RENEWAL_TIME: 58,
  REBINDING_TIME: 59,
  CLASS_ID: 60,
  CLIENT_ID: 61,
  USER_CLASS: 77,
  DOMAIN_SEARCH: 119,
  CLASSLESS_ROUTES: 121,
  END: 255,
} as const;

export interface DhcpMessage {
  op: number;
  htype: number;
  hlen: number;
  hops: number;
  xid: number;
  secs: number;
  flags: number;
  ciaddr: string;
  yiaddr: string;
  siaddr: string;
  giaddr: string;
  /** Client hardware address (hlen bytes). */
  chaddr: Uint8Array;
  /** Options in the order given; a code present several times was concatenated (RFC 3396). */
  options: Map<number, Uint8Array>;
}

export class PacketError extends Error {}

export function ipToBytes(ip: string): Uint8Array {
  const parts = ip.split('.');
  const out = new Uint8Array(4);
  if (parts.length !== 4) throw new PacketError(`invalid IPv4 address ${JSON.stringify(ip)}`);
  parts.forEach((p, i) => {
    const n = Number(p);
    if (!/^\d{1,3}$/.test(p) || n > 255) throw new PacketError(`invalid IPv4 address ${JSON.stringify(ip)}`);
    out[i] = n;
  });
  return out;
}

export function bytesToIp(b: Uint8Array, off = 0): string {
  return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
}

/** Encodes a message; options are written in insertion order, long values split into 255-byte instances. */
export function encodeMessage(m: DhcpMessage): Buffer {
  const opts: number[] = [];
  for (const [code, value] of m.options) {
    if (code === Opt.PAD || code === Opt.END) continue;
    let off = 0;
    do {
      const chunk = value.subarray(off, off + 255);
      opts.push(code, chunk.length, ...chunk);
      off += 255;
    } while (off < value.length);
  }
  opts.push(Opt.END);
  const buf = Buffer.alloc(Math.max(MIN_MESSAGE, HEADER + 4 + opts.length));
  buf[0] = m.op;
  buf[1] = m.htype;
  buf[2] = m.hlen;
  buf[3] = m.hops;
  buf.writeUInt32BE(m.xid >>> 0, 4);
  buf.writeUInt16BE(m.secs, 8);
  buf.writeUInt16BE(m.flags, 10);
  buf.set(ipToBytes(m.ciaddr), 12);
  buf.set(ipToBytes(m.yiaddr), 16);
  buf.set(ipToBytes(m.siaddr), 20);
  buf.set(ipToBytes(m.giaddr), 24);
  if (m.chaddr.length > 16) throw new PacketError('chaddr longer than 16 bytes');
  buf.set(m.chaddr, 28);
  buf.writeUInt32BE(MAGIC_COOKIE, HEADER);
  Buffer.from(opts).copy(buf, HEADER + 4);
  return buf;
}

function parseOptions(buf: Uint8Array, into: Map<number, Uint8Array>, where: string): void {
  let i = 0;
  while (i < buf.length) {
    const code = buf[i++] as number;
    if (code === Opt.PAD) continue;
    if (code === Opt.END) return;
    if (i >= buf.length) throw new PacketError(`truncated option ${code} in ${where}`);
    const len = buf[i++] as number;
    if (i + len > buf.length) throw new PacketError(`option ${code} runs past the end of ${where}`);
    const value = buf.subarray(i, i + len);
    const prev = into.get(code);
    into.set(code, prev ? Buffer.concat([prev, value]) : Buffer.from(value));
    i += len;
  }
}

/** Decodes a message; throws PacketError when it is not a well-formed DHCP message. */
export function decodeMessage(buf: Uint8Array): DhcpMessage {
  if (buf.length < HEADER + 4) throw new PacketError(`message too short (${buf.length} bytes)`);
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  if (b.readUInt32BE(HEADER) !== MAGIC_COOKIE) throw new PacketError('no DHCP magic cookie');
  const hlen = b[2] as number;
  if (hlen > 16) throw new PacketError(`hardware address length ${hlen} exceeds 16`);
  const options = new Map<number, Uint8Array>();
  parseOptions(b.subarray(HEADER + 4), options, 'options');
  // option overload (52): options continue in file (1), sname (2) or both (3)
  const overload = options.get(Opt.OVERLOAD)?.[0] ?? 0;
  if (overload & 1) parseOptions(b.subarray(108, 236), options, 'file');
  if (overload & 2) parseOptions(b.subarray(44, 108), options, 'sname');
  return {
    op: b[0] as number,
    htype: b[1] as number,
    hlen,
    hops: b[3] as number,
    xid: b.readUInt32BE(4),
    secs: b.readUInt16BE(8),
    flags: b.readUInt16BE(10),
    ciaddr: bytesToIp(b, 12),
    yiaddr: bytesToIp(b, 16),
    siaddr: bytesToIp(b, 20),
    giaddr: bytesToIp(b, 24),
    chaddr: Buffer.from(b.subarray(28, 28 + hlen)),
    options,
  };
}

// ---- typed option readers ----

export function optU32(m: DhcpMessage, code: number): number | undefined {
  const v = m.options.get(code);
  if (v?.length !== 4) return undefined;
  return Buffer.from(v).readUInt32BE(0);
}

export function optIps(m: DhcpMessage, code: number): string[] {
  const v = m.options.get(code);
  if (!v) return [];
  const out: string[] = [];
  for (let i = 0; i + 4 <= v.length; i += 4) out.push(bytesToIp(v, i));
  return out;
}

export function optIp(m: DhcpMessage, code: number): string | undefined {
  return optIps(m, code)[0];
}

export function optString(m: DhcpMessage, code: number): string | undefined {
  const v = m.options.get(code);
  if (!v) return undefined;
  // trailing NULs are common (some servers count the terminator)
  let end = v.length;
  while (end > 0 && v[end - 1] === 0) end--;
  return Buffer.from(v.subarray(0, end)).toString('utf8');
}

export function messageType(m: DhcpMessage): number | undefined {
  const v = m.options.get(Opt.MESSAGE_TYPE);
  return v && v.length === 1 ? v[0] : undefined;
}

/** Prefix length of a contiguous netmask, or undefined when the mask is not contiguous. */
export function maskToPrefix(mask: string): number | undefined {
  const b = ipToBytes(mask);
  const n = ((b[0] as number) << 24) | ((b[1] as number) << 16) | ((b[2] as number) << 8) | (b[3] as number);
  const inv = ~n >>> 0;
  if ((inv & (inv + 1)) !== 0) return undefined;
  let prefix = 0;
  for (let x = n >>> 0; x & 0x80000000; x = (x << 1) >>> 0) prefix++;
  return prefix;
}

export interface DhcpRoute {
  /** Destination in CIDR notation. */
  dst: string;
  /** Router ('0.0.0.0' for an on-link route in option 121). */
  gw: string;
}

/** Option 121 (RFC 3442): width byte, significant destination octets, router. Throws on a malformed option. */
export function decodeClasslessRoutes(v: Uint8Array): DhcpRoute[] {
  const out: DhcpRoute[] = [];
  let i = 0;
  while (i < v.length) {
    const width = v[i++] as number;
    if (width > 32) throw new PacketError(`option 121: prefix length ${width} exceeds 32`);
    const sig = Math.ceil(width / 8);
    if (i + sig + 4 > v.length) throw new PacketError('option 121: truncated route');
    const dst = new Uint8Array(4);
    dst.set(v.subarray(i, i + sig));
    i += sig;
    const gw = bytesToIp(v, i);
    i += 4;
    out.push({ dst: `${bytesToIp(dst)}/${width}`, gw });
  }
  return out;
}

export function encodeClasslessRoutes(routes: DhcpRoute[]): Uint8Array {
  const out: number[] = [];
  for (const r of routes) {
    const [ip, w] = r.dst.split('/');
    const width = Number(w);
    const b = ipToBytes(ip as string);
    out.push(width, ...b.subarray(0, Math.ceil(width / 8)), ...ipToBytes(r.gw));
  }
  return Uint8Array.from(out);
}

/** The classful prefix of an address (option 33 destinations carry no mask): A /8, B /16, C /24, else /32 (Go's DefaultMask). */
function classfulPrefix(first: number): number {
  if (first < 0x80) return 8;
  if (first < 0xc0) return 16;
  if (first < 0xe0) return 24;
  return 32;
}

/** Option 33: pairs of (classful destination, router). A trailing partial pair is ignored, like the reference. */
export function decodeStaticRoutes(v: Uint8Array): DhcpRoute[] {
  const out: DhcpRoute[] = [];
  for (let i = 0; i + 8 <= v.length; i += 8) {
    const prefix = classfulPrefix(v[i] as number);
    const dst = new Uint8Array(4);
    dst.set(v.subarray(i, i + prefix / 8));
    out.push({ dst: `${bytesToIp(dst)}/${prefix}`, gw: bytesToIp(v, i + 4) });
  }
  return out;
}

/** Option 119 (RFC 3397): a list of DNS names in RFC 1035 wire format, compression pointers allowed. */
export function decodeDomainSearch(v: Uint8Array): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < v.length) {
    const labels: string[] = [];
    let p = i;
    let jumped = false;
    let hops = 0;
    for (;;) {
      if (p >= v.length) throw new PacketError('option 119: name runs past the end');
      const len = v[p] as number;
      if (len === 0) {
        if (!jumped) i = p + 1;
        break;
      }
      if ((len & 0xc0) === 0xc0) {
        if (p + 1 >= v.length) throw new PacketError('option 119: truncated pointer');
        const target = ((len & 0x3f) << 8) | (v[p + 1] as number);
        if (!jumped) i = p + 2;
        jumped = true;
        if (++hops > 64 || target >= v.length) throw new PacketError('option 119: bad compression pointer');
        p = target;
        continue;
      }
      if (len > 63) throw new PacketError('option 119: label longer than 63');
      if (p + 1 + len > v.length) throw new PacketError('option 119: label runs past the end');
      labels.push(Buffer.from(v.subarray(p + 1, p + 1 + len)).toString('ascii'));
      p += 1 + len;
    }
    out.push(labels.join('.'));
  }
  return out;
}

export function encodeDomainSearch(names: string[]): Uint8Array {
  const out: number[] = [];
  for (const n of names) {
    for (const label of n.split('.').filter(Boolean)) out.push(label.length, ...Buffer.from(label, 'ascii'));
    out.push(0);
  }
  return Uint8Array.from(out);
}
