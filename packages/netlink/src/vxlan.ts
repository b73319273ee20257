// VXLAN devices and neighbour entries: the pieces a flannel-style overlay needs (a vxlan link without learning,
// static forwarding-database entries MAC → remote VTEP, and permanent neighbour entries inner IP → MAC), all as
// rtnetlink messages (no `ip` / `bridge` processes).
import { formatIp, parseIp } from './ipaddr.ts';
import { buildGetLink, describeLink, type LinkRef, linkIndex } from './link.ts';
import {
  AF_BRIDGE,
  AF_INET,
  AF_INET6,
  attrNested,
  attrStr,
  attrU8,
  attrU32,
  formatMac,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINKINFO,
  IFLA_MTU,
  invalidMacMessage,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_REPLACE,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  parseMac,
} from './nl.ts';
import { invalidArgument, isNotFoundError, rtDump, rtGet, rtRequest, withSocket } from './rtnl.ts';
import { newLinkMessage } from './sublink.ts';

export const RTM_NEWNEIGH = 28;
export const RTM_DELNEIGH = 29;
export const RTM_GETNEIGH = 30;
export const NDA_DST = 1;
export const NDA_LLADDR = 2;
export const NUD_PERMANENT = 0x80;
export const NUD_NOARP = 0x40;
export const NTF_SELF = 0x02;

const IFLA_VXLAN_ID = 1;
const IFLA_VXLAN_LINK = 3;
const IFLA_VXLAN_LOCAL = 4;
const IFLA_VXLAN_LEARNING = 7;
const IFLA_VXLAN_PORT = 15;
const IFLA_VXLAN_LOCAL6 = 17;

export interface VxlanOptions {
  name: string;
  /** VNI, 0..16777215. */
  vni: number;
  /** UDP destination port (IANA 4789; flannel's Linux default 8472). */
  port: number;
  /** The local VTEP address (IPv4 or IPv6): the source of the encapsulated packets. */
  local: string;
  /** The underlay device (IFLA_VXLAN_LINK). */
  dev?: LinkRef;
  mtu?: number;
  mac?: string;
  /** Source-address learning (default off: the FDB is programmed). */
  learning?: boolean;
}

export interface VxlanInfo {
  index: number;
  name: string;
  mac: string;
  mtu: number;
  vni: number | undefined;
  port: number | undefined;
  local: string | undefined;
  linkIndex: number | undefined;
  learning: boolean | undefined;
}

/** The RTM_NEWLINK of a vxlan (exported for byte-level tests). */
export function buildVxlan(o: VxlanOptions, devIndex: number | undefined): NlBuilder {
  const op = `failed to create vxlan ${o.name}`;
  if (!Number.isInteger(o.vni) || o.vni < 0 || o.vni > 0xffffff)
    throw invalidArgument(op, `invalid VNI ${o.vni}`);
  if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535)
    throw invalidArgument(op, `invalid UDP port ${o.port}`);
  const local = parseIp(o.local);
  if (!local) throw invalidArgument(op, `invalid local address ${o.local}`);
  const b = newLinkMessage(op, o, 'vxlan');
  b.begin(IFLA_INFO_DATA).attrU32(IFLA_VXLAN_ID, o.vni);
  if (devIndex !== undefined) b.attrU32(IFLA_VXLAN_LINK, devIndex);
  b.attr(local.family === 4 ? IFLA_VXLAN_LOCAL : IFLA_VXLAN_LOCAL6, local.bytes);
  b.attrU8(IFLA_VXLAN_LEARNING, o.learning ? 1 : 0);
  const port = Buffer.alloc(2);
  port.writeUInt16BE(o.port);
  b.attr(IFLA_VXLAN_PORT, port);
  b.end();
  return b.end();
}

/** Creates a vxlan device (down). EEXIST when the name is taken. */
export function createVxlan(o: VxlanOptions): void {
  const op = `failed to create vxlan ${o.name}`;
  withSocket(() => rtRequest(buildVxlan(o, o.dev === undefined ? undefined : linkIndex(o.dev)), op), op);
}

/** The vxlan device `name` with its parameters; undefined when there is no such link. Throws for another kind. */
export function getVxlan(name: string): VxlanInfo | undefined {
  const op = `failed to get vxlan ${name}`;
  let m: NlMessage;
  try {
    m = rtGet(buildGetLink(name), op);
  } catch (e) {
    if (isNotFoundError(e)) return undefined;
    throw e;
  }
  const a = parseAttrs(m.payload, 16);
  const info = attrNested(a, IFLA_LINKINFO);
  const kind = info ? attrStr(info, IFLA_INFO_KIND) : undefined;
  const d = info ? attrNested(info, IFLA_INFO_DATA) : undefined;
  const local = d?.get(IFLA_VXLAN_LOCAL) ?? d?.get(IFLA_VXLAN_LOCAL6);
  const port = d?.get(IFLA_VXLAN_PORT);
  const mac = a.get(IFLA_ADDRESS);
  const learning = d ? attrU8(d, IFLA_VXLAN_LEARNING) : undefined;
  const out: VxlanInfo = {
    index: m.payload.readInt32LE(4),
    name: attrStr(a, IFLA_IFNAME) ?? name,
    mac: mac ? formatMac(mac) : '',
    mtu: attrU32(a, IFLA_MTU) ?? 0,
    vni: d ? attrU32(d, IFLA_VXLAN_ID) : undefined,
    port: port && port.length >= 2 ? port.readUInt16BE(0) : undefined,
    local: local ? formatIp(local) : undefined,
    linkIndex: d ? attrU32(d, IFLA_VXLAN_LINK) : undefined,
    learning: learning === undefined ? undefined : learning !== 0,
  };
  if (kind !== 'vxlan') throw invalidArgument(op, `${name} is a ${kind ?? 'plain'} device, not a vxlan`);
  return out;
}

// --- neighbours and forwarding-database entries ------------------------------------------------------------------

export interface Neighbour {
  /** 4 / 6 for ARP/NDP entries, 'bridge' for forwarding-database entries. */
  family: 4 | 6 | 'bridge';
  linkIndex: number;
  /** NDA_DST: the neighbour's address (for an FDB entry of a vxlan: the remote VTEP). */
  dst: string | undefined;
  /** NDA_LLADDR */
  mac: string | undefined;
  state: number;
  flags: number;
}

export interface NeighbourSpec {
  dev: LinkRef;
  /** IPv4/IPv6 neighbour address; for an FDB entry the remote VTEP (optional). */
  dst?: string;
  mac?: string;
}

function ndmsg(b: NlBuilder, family: number, ifindex: number, state: number, flags: number): NlBuilder {
  return b.u8(family).u8(0).u16(0).i32(ifindex).u16(state).u8(flags).u8(0);
}

function buildNeigh(
  type: number,
  flags: number,
  fdb: boolean,
  s: NeighbourSpec,
  ifindex: number,
  op: string,
): NlBuilder {
  const dst = s.dst === undefined ? undefined : parseIp(s.dst);
  if (s.dst !== undefined && !dst) throw invalidArgument(op, `invalid address ${s.dst}`);
  if (!fdb && !dst) throw invalidArgument(op, 'a neighbour entry needs an address');
  const mac = s.mac === undefined ? undefined : parseMac(s.mac);
  if (s.mac !== undefined && !mac) throw invalidArgument(op, invalidMacMessage(s.mac));
  if (fdb && !mac) throw invalidArgument(op, 'a forwarding-database entry needs a MAC address');
  const family = fdb ? AF_BRIDGE : dst?.family === 4 ? AF_INET : AF_INET6;
  const b = ndmsg(
    new NlBuilder(type, flags),
    family,
    ifindex,
    type === RTM_DELNEIGH ? 0 : NUD_PERMANENT,
    fdb ? NTF_SELF : 0,
  );
  if (dst) b.attr(NDA_DST, dst.bytes);
  if (mac) b.attr(NDA_LLADDR, mac);
  return b;
}

function describeNeigh(s: NeighbourSpec): string {
  return `${s.dst ?? ''}${s.mac ? ` lladdr ${s.mac}` : ''} dev ${describeLink(s.dev)}`.trim();
}

function neighOp(type: number, flags: number, fdb: boolean, s: NeighbourSpec, verb: string): void {
  const op = `failed to ${verb} ${fdb ? 'fdb entry' : 'neighbour'} ${describeNeigh(s)}`;
  withSocket(() => rtRequest(buildNeigh(type, flags, fdb, s, linkIndex(s.dev), op), op), op);
}

const REPLACE = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;

/** `ip neigh replace DST lladdr MAC dev DEV nud permanent`. */
export function replaceNeighbour(s: NeighbourSpec): void {
  neighOp(RTM_NEWNEIGH, REPLACE, false, s, 'replace');
}

/** Deletes the neighbour entry DST on DEV (ENOENT when there is none). */
export function delNeighbour(s: NeighbourSpec): void {
  neighOp(RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK, false, s, 'delete');
}

/** `bridge fdb replace MAC dev DEV dst DST self permanent` (a vxlan's static entry). */
export function replaceFdb(s: NeighbourSpec): void {
  neighOp(RTM_NEWNEIGH, REPLACE, true, s, 'replace');
}

/** Deletes the FDB entry MAC [dst DST] on DEV (ENOENT when there is none). */
export function delFdb(s: NeighbourSpec): void {
  neighOp(RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK, true, s, 'delete');
}

export function decodeNeighbour(m: NlMessage): Neighbour | undefined {
  const p = m.payload;
  if (p.length < 12) return undefined;
  const fam = p.readUInt8(0);
  const family = fam === AF_INET ? 4 : fam === AF_INET6 ? 6 : fam === AF_BRIDGE ? 'bridge' : undefined;
  if (family === undefined) return undefined;
  const a = parseAttrs(p, 12);
  const dst = a.get(NDA_DST);
  const mac = a.get(NDA_LLADDR);
  return {
    family,
    linkIndex: p.readInt32LE(4),
    dst: dst ? formatIp(dst) : undefined,
    mac: mac && mac.length === 6 ? formatMac(mac) : undefined,
    state: p.readUInt16LE(8),
    flags: p.readUInt8(10),
  };
}

/** Neighbour entries (family 4/6) or forwarding-database entries ('bridge'), optionally of one device only. */
export function listNeighbours(family: 4 | 6 | 'bridge', dev?: LinkRef): Neighbour[] {
  const op = 'failed to list neighbours';
  return withSocket(() => {
    const idx = dev === undefined ? undefined : linkIndex(dev);
    const fam = family === 4 ? AF_INET : family === 6 ? AF_INET6 : AF_BRIDGE;
    const b = ndmsg(new NlBuilder(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP), fam, 0, 0, 0);
    const out: Neighbour[] = [];
    for (const m of rtDump(b, op)) {
      if (m.type !== RTM_NEWNEIGH) continue;
      const n = decodeNeighbour(m);
      if (!n || n.family !== family) continue;
      if (idx !== undefined && n.linkIndex !== idx) continue;
      out.push(n);
    }
    return out;
  }, op);
}
