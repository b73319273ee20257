// Netlink / rtnetlink wire format: constants, a message builder and attribute parsing.
// Pure TypeScript, no imports: this module is loaded by every plugin invocation, so it stays small.
//
// Layout reminders (all host byte order = little endian on the platforms we target):
//   nlmsghdr  { u32 len; u16 type; u16 flags; u32 seq; u32 pid }                       16 bytes
//   ifinfomsg { u8 family; u8 pad; u16 type; i32 index; u32 flags; u32 change }          16 bytes
//   ifaddrmsg { u8 family; u8 prefixlen; u8 flags; u8 scope; u32 index }                  8 bytes
//   rtmsg     { u8 family, dst_len, src_len, tos, table, protocol, scope, type; u32 flags } 12 bytes
//   nlattr    { u16 len; u16 type } + payload, padded to 4 bytes

// --- message types ---------------------------------------------------------------------------------------------
export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;
export const NLMSG_OVERRUN = 4;

export const RTM_NEWLINK = 16;
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_SETLINK = 19;
export const RTM_NEWADDR = 20;
export const RTM_DELADDR = 21;
export const RTM_GETADDR = 22;
export const RTM_NEWROUTE = 24;
export const RTM_DELROUTE = 25;
export const RTM_GETROUTE = 26;

// --- header flags ----------------------------------------------------------------------------------------------
export const NLM_F_REQUEST = 0x1;
export const NLM_F_MULTI = 0x2;
export const NLM_F_ACK = 0x4;
export const NLM_F_ECHO = 0x8;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_ROOT = 0x100;
export const NLM_F_MATCH = 0x200;
export const NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH;
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
export const NLM_F_APPEND = 0x800;
/** In an NLMSG_ERROR reply: the kernel capped the echoed request / appended extended-ack attributes. */
export const NLM_F_CAPPED = 0x100;
export const NLM_F_ACK_TLVS = 0x200;
export const NLMSGERR_ATTR_MSG = 1;

export const NLA_F_NESTED = 0x8000;
export const NLA_F_NET_BYTEORDER = 0x4000;
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;

// --- address families ------------------------------------------------------------------------------------------
export const AF_UNSPEC = 0;
export const AF_INET = 2;
export const AF_BRIDGE = 7;
export const AF_INET6 = 10;

// --- links -----------------------------------------------------------------------------------------------------
export const IFLA_ADDRESS = 1;
export const IFLA_BROADCAST = 2;
export const IFLA_IFNAME = 3;
export const IFLA_MTU = 4;
export const IFLA_LINK = 5;
export const IFLA_MASTER = 10;
export const IFLA_PROTINFO = 12;
export const IFLA_TXQLEN = 13;
export const IFLA_OPERSTATE = 16;
export const IFLA_LINKINFO = 18;
export const IFLA_NET_NS_PID = 19;
export const IFLA_IFALIAS = 20;
export const IFLA_AF_SPEC = 26;
export const IFLA_GROUP = 27;
export const IFLA_NET_NS_FD = 28;
export const IFLA_EXT_MASK = 29;
export const IFLA_PROMISCUITY = 30;
export const IFLA_LINK_NETNSID = 37;

export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;
export const IFLA_INFO_SLAVE_KIND = 4;
export const IFLA_INFO_SLAVE_DATA = 5;

export const VETH_INFO_PEER = 1;

export const IFLA_BR_VLAN_FILTERING = 7;

export const IFLA_BRPORT_STATE = 1;
export const IFLA_BRPORT_MODE = 4; // hairpin
export const IFLA_BRPORT_LEARNING = 8;
export const IFLA_BRPORT_UNICAST_FLOOD = 9;
export const IFLA_BRPORT_ISOLATED = 33;

export const IFLA_BRIDGE_FLAGS = 0;
export const IFLA_BRIDGE_VLAN_INFO = 2;
export const BRIDGE_FLAGS_MASTER = 1;
export const BRIDGE_FLAGS_SELF = 2;
export const BRIDGE_VLAN_INFO_MASTER = 0x1;
export const BRIDGE_VLAN_INFO_PVID = 0x2;
export const BRIDGE_VLAN_INFO_UNTAGGED = 0x4;
export const BRIDGE_VLAN_INFO_RANGE_BEGIN = 0x8;
export const BRIDGE_VLAN_INFO_RANGE_END = 0x10;
export const RTEXT_FILTER_VF = 1;
export const RTEXT_FILTER_BRVLAN = 2;

export const IFF_UP = 0x1;
export const IFF_BROADCAST = 0x2;
export const IFF_LOOPBACK = 0x8;
export const IFF_POINTOPOINT = 0x10;
export const IFF_RUNNING = 0x40;
export const IFF_NOARP = 0x80;
export const IFF_PROMISC = 0x100;
export const IFF_ALLMULTI = 0x200;
export const IFF_MULTICAST = 0x1000;
export const IFF_LOWER_UP = 0x10000;

// --- addresses -------------------------------------------------------------------------------------------------
export const IFA_ADDRESS = 1;
export const IFA_LOCAL = 2;
export const IFA_LABEL = 3;
export const IFA_BROADCAST = 4;
export const IFA_CACHEINFO = 6;
export const IFA_FLAGS = 8;

export const IFA_F_SECONDARY = 0x01;
export const IFA_F_NODAD = 0x02;
export const IFA_F_OPTIMISTIC = 0x04;
export const IFA_F_DADFAILED = 0x08;
export const IFA_F_HOMEADDRESS = 0x10;
export const IFA_F_DEPRECATED = 0x20;
export const IFA_F_TENTATIVE = 0x40;
export const IFA_F_PERMANENT = 0x80;
export const IFA_F_MANAGETEMPADDR = 0x100;
export const IFA_F_NOPREFIXROUTE = 0x200;

// --- routes ----------------------------------------------------------------------------------------------------
export const RTA_DST = 1;
export const RTA_SRC = 2;
export const RTA_IIF = 3;
export const RTA_OIF = 4;
export const RTA_GATEWAY = 5;
export const RTA_PRIORITY = 6;
export const RTA_PREFSRC = 7;
export const RTA_METRICS = 8;
export const RTA_MULTIPATH = 9;
export const RTA_TABLE = 15;
export const RTA_PREF = 20;

export const RTAX_MTU = 2;
export const RTAX_ADVMSS = 8;

export const RT_TABLE_UNSPEC = 0;
export const RT_TABLE_DEFAULT = 253;
export const RT_TABLE_MAIN = 254;
export const RT_TABLE_LOCAL = 255;

export const RTPROT_UNSPEC = 0;
export const RTPROT_KERNEL = 2;
export const RTPROT_BOOT = 3;
export const RTPROT_STATIC = 4;

export const RT_SCOPE_UNIVERSE = 0;
export const RT_SCOPE_SITE = 200;
export const RT_SCOPE_LINK = 253;
export const RT_SCOPE_HOST = 254;
export const RT_SCOPE_NOWHERE = 255;

export const RTN_UNSPEC = 0;
export const RTN_UNICAST = 1;
export const RTN_LOCAL = 2;

export const RTM_F_CLONED = 0x200;

// --- builder ---------------------------------------------------------------------------------------------------

/** Appends little-endian fields and netlink attributes to a growable buffer; `finish` patches the length. */
export class NlBuilder {
  private buf: Buffer;
  private len = 0;
  private readonly nests: number[] = [];

  constructor(type: number, flags: number, initial = 256) {
    this.buf = Buffer.alloc(initial);
    this.u32(0); // length, patched in finish()
    this.u16(type);
    this.u16(flags);
    this.u32(0); // seq, set in finish()
    this.u32(0); // pid: 0 lets the kernel fill in our port id
  }

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  u8(v: number): this {
    this.room(1);
    this.buf.writeUInt8(v & 0xff, this.len);
    this.len += 1;
    return this;
  }

  u16(v: number): this {
    this.room(2);
    this.buf.writeUInt16LE(v & 0xffff, this.len);
    this.len += 2;
    return this;
  }

  u32(v: number): this {
    this.room(4);
    this.buf.writeUInt32LE(v >>> 0, this.len);
    this.len += 4;
    return this;
  }

  i32(v: number): this {
    this.room(4);
    this.buf.writeInt32LE(v | 0, this.len);
    this.len += 4;
    return this;
  }

  bytes(data: Uint8Array): this {
    this.room(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
    return this;
  }

  private pad(): void {
    const aligned = (this.len + 3) & ~3;
    this.room(aligned - this.len);
    this.buf.fill(0, this.len, aligned);
    this.len = aligned;
  }

  /** struct ifinfomsg */
  ifinfo(family: number, index: number, flags = 0, change = 0, type = 0): this {
    return this.u8(family).u8(0).u16(type).i32(index).u32(flags).u32(change);
  }

  /** struct ifaddrmsg */
  ifaddr(family: number, prefixlen: number, flags: number, scope: number, index: number): this {
    return this.u8(family).u8(prefixlen).u8(flags).u8(scope).u32(index);
  }

  /** struct rtmsg */
  rtmsg(m: {
    family: number;
    dstLen: number;
    srcLen?: number;
    tos?: number;
    table: number;
    protocol: number;
    scope: number;
    type: number;
    flags?: number;
  }): this {
    return this.u8(m.family)
      .u8(m.dstLen)
      .u8(m.srcLen ?? 0)
      .u8(m.tos ?? 0)
      .u8(m.table)
      .u8(m.protocol)
      .u8(m.scope)
      .u8(m.type)
      .u32(m.flags ?? 0);
  }

  attr(type: number, data: Uint8Array): this {
    this.u16(4 + data.length).u16(type);
    this.bytes(data);
    this.pad();
    return this;
  }

  attrU8(type: number, v: number): this {
    this.u16(5).u16(type).u8(v);
    this.pad();
    return this;
  }

  attrU16(type: number, v: number): this {
    this.u16(6).u16(type).u16(v);
    this.pad();
    return this;
  }

  attrU32(type: number, v: number): this {
    return this.u16(8).u16(type).u32(v);
  }

  attrI32(type: number, v: number): this {
    return this.u16(8).u16(type).i32(v);
  }

  /** String attribute, NUL-terminated unless `nul` is false (iproute2 sends IFLA_INFO_KIND without it). */
  attrStr(type: number, s: string, nul = true): this {
    const b = Buffer.from(s, 'utf8');
    this.u16(4 + b.length + (nul ? 1 : 0)).u16(type);
    this.bytes(b);
    if (nul) this.u8(0);
    this.pad();
    return this;
  }

  /** Opens a nested attribute; close it with end(). `nestedFlag` sets NLA_F_NESTED in the type. */
  begin(type: number, nestedFlag = false): this {
    this.pad();
    this.nests.push(this.len);
    this.u16(0).u16(nestedFlag ? type | NLA_F_NESTED : type);
    return this;
  }

  end(): this {
    const start = this.nests.pop();
    if (start === undefined) throw new Error('NlBuilder.end() without begin()');
    this.pad();
    this.buf.writeUInt16LE(this.len - start, start);
    return this;
  }

  /** The finished message with sequence number `seq` (a fresh copy). */
  finish(seq: number): Buffer {
    if (this.nests.length) throw new Error('NlBuilder.finish() with an open nested attribute');
    this.buf.writeUInt32LE(this.len, 0);
    this.buf.writeUInt32LE(seq >>> 0, 8);
    return Buffer.from(this.buf.subarray(0, this.len));
  }

  get type(): number {
    return this.buf.readUInt16LE(4);
  }

  get flags(): number {
    return this.buf.readUInt16LE(6);
  }
}

/** A dump request for routes or rules: an rtmsg with only the address family set (4, 6, or both when omitted). */
export function rtmsgDump(type: number, family?: 4 | 6): NlBuilder {
  return new NlBuilder(type, NLM_F_REQUEST | NLM_F_DUMP).rtmsg({
    family: family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_UNSPEC,
    dstLen: 0,
    table: 0,
    protocol: 0,
    scope: 0,
    type: 0,
  });
}

// --- parsing ---------------------------------------------------------------------------------------------------

export interface NlMessage {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  /** The bytes after the 16-byte header (a view into the received buffer). */
  payload: Buffer;
}

/** Splits one received datagram into its netlink messages. Malformed trailing bytes are an error. */
export function parseMessages(buf: Buffer): NlMessage[] {
  const out: NlMessage[] = [];
  let off = 0;
  while (off + 16 <= buf.length) {
    const len = buf.readUInt32LE(off);
    if (len < 16 || off + len > buf.length) throw new Error(`malformed netlink message (length ${len})`);
    out.push({
      type: buf.readUInt16LE(off + 4),
      flags: buf.readUInt16LE(off + 6),
      seq: buf.readUInt32LE(off + 8),
      pid: buf.readUInt32LE(off + 12),
      payload: buf.subarray(off + 16, off + len),
    });
    off += (len + 3) & ~3;
  }
  return out;
}

/** Attributes of one level, keyed by type (flags stripped). A repeated type keeps the last value. */
export type Attrs = Map<number, Buffer>;

export function parseAttrs(buf: Buffer, start = 0): Attrs {
  const out: Attrs = new Map();
  forEachAttr(buf, start, (type, data) => {
    out.set(type, data);
  });
  return out;
}

/** Calls fn(type, data) for each attribute in order (for repeated attributes such as bridge VLAN entries). */
export function forEachAttr(buf: Buffer, start: number, fn: (type: number, data: Buffer) => void): void {
  let off = start;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt16LE(off);
    if (len < 4 || off + len > buf.length) break;
    fn(buf.readUInt16LE(off + 2) & NLA_TYPE_MASK, buf.subarray(off + 4, off + len));
    off += (len + 3) & ~3;
  }
}

export function attrU8(a: Attrs, type: number): number | undefined {
  const b = a.get(type);
  return b && b.length >= 1 ? b.readUInt8(0) : undefined;
}

export function attrU16(a: Attrs, type: number): number | undefined {
  const b = a.get(type);
  return b && b.length >= 2 ? b.readUInt16LE(0) : undefined;
}

export function attrU32(a: Attrs, type: number): number | undefined {
  const b = a.get(type);
  return b && b.length >= 4 ? b.readUInt32LE(0) : undefined;
}

export function attrStr(a: Attrs, type: number): string | undefined {
  const b = a.get(type);
  if (!b) return undefined;
  const nul = b.indexOf(0);
  return b.toString('utf8', 0, nul < 0 ? b.length : nul);
}

export function attrNested(a: Attrs, type: number): Attrs | undefined {
  const b = a.get(type);
  return b ? parseAttrs(b) : undefined;
}

/** Hardware address bytes → 'aa:bb:cc:dd:ee:ff' (lowercase, Go net.HardwareAddr.String()). */
export function formatMac(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += (i ? ':' : '') + (b[i]! < 16 ? '0' : '') + b[i]!.toString(16);
  return s;
}

/**
 * Go `net.ParseMAC` restricted to 48-bit (Ethernet) addresses, the only length a veth, bridge or spoof
 * check takes: `aa:bb:cc:dd:ee:ff`, `aa-bb-cc-dd-ee-ff` (one separator throughout) or `aabb.ccdd.eeff`,
 * hex digits in either case → 6 bytes; undefined otherwise (report it with `invalidMacMessage`).
 */
export function parseMac(s: string): Buffer | undefined {
  let hex: string | undefined;
  if (s.length === 17 && (s[2] === ':' || s[2] === '-')) {
    const parts = s.split(s[2]);
    if (parts.length === 6 && parts.every((p) => /^[0-9a-fA-F]{2}$/.test(p))) hex = parts.join('');
  } else if (s.length === 14 && /^[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}$/.test(s)) {
    hex = s.replaceAll('.', '');
  }
  return hex === undefined ? undefined : Buffer.from(hex, 'hex');
}

/** Go's ParseMAC error text (`net.AddrError`: `address <s>: invalid MAC address`, no prefix for ''). */
export function invalidMacMessage(s: string): string {
  return s === '' ? 'invalid MAC address' : `address ${s}: invalid MAC address`;
}
