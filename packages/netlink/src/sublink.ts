// Links stacked on a parent device: macvlan, ipvlan and 802.1Q/802.1ad vlan. Creation in ONE RTM_NEWLINK (optionally
// placed straight into another namespace with IFLA_NET_NS_FD while the parent stays here), the kind-specific
// IFLA_INFO_DATA attributes, their decoding, and the interface of the default route (the reference's default master).
import { closeSync } from 'node:fs';
import { fail } from './helper-errors.ts';
import { buildGetLink, checkLookupKey, decodeLink, type Link, type LinkRef, linkIndex } from './link.ts';
import { openNetnsFd } from './netns.ts';
import {
  AF_UNSPEC,
  type Attrs,
  attrNested,
  attrStr,
  attrU16,
  attrU32,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINK,
  IFLA_LINKINFO,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  invalidMacMessage,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  parseMac,
  RTM_NEWLINK,
} from './nl.ts';
import { listRoutes } from './route.ts';
import { invalidArgument, isNotFoundError, rtGet, rtRequest, withSocket } from './rtnl.ts';

// --- IFLA_INFO_DATA attribute types (include/uapi/linux/if_link.h) ---------------------------------------------
export const IFLA_MACVLAN_MODE = 1;
export const IFLA_MACVLAN_FLAGS = 2;
export const IFLA_MACVLAN_MACADDR_COUNT = 6;
export const IFLA_MACVLAN_BC_QUEUE_LEN = 7;
export const IFLA_MACVLAN_BC_QUEUE_LEN_USED = 8;
export const IFLA_IPVLAN_MODE = 1;
export const IFLA_IPVLAN_FLAGS = 2;
export const IFLA_VLAN_ID = 1;
export const IFLA_VLAN_FLAGS = 2;
export const IFLA_VLAN_PROTOCOL = 5;

/** enum macvlan_mode: one bit per mode. */
export const MACVLAN_MODES = { private: 1, vepa: 2, bridge: 4, passthru: 8, source: 16 } as const;
export type MacvlanMode = keyof typeof MACVLAN_MODES;
/** MACVLAN_FLAG_NOPROMISC / MACVLAN_FLAG_NODST. */
export const MACVLAN_FLAG_NOPROMISC = 1;
export const MACVLAN_FLAG_NODST = 2;

/** enum ipvlan_mode. */
export const IPVLAN_MODES = { l2: 0, l3: 1, l3s: 2 } as const;
export type IpvlanMode = keyof typeof IPVLAN_MODES;
/** IPVLAN_F_PRIVATE / IPVLAN_F_VEPA (0 = bridge). */
export const IPVLAN_FLAGS = { bridge: 0, private: 1, vepa: 2 } as const;
export type IpvlanFlag = keyof typeof IPVLAN_FLAGS;

/** ETH_P_8021Q / ETH_P_8021AD, sent in network byte order. */
export const VLAN_PROTOCOLS = { '802.1Q': 0x8100, '802.1ad': 0x88a8 } as const;
export type VlanProtocol = keyof typeof VLAN_PROTOCOLS;

const IFNAMSIZ = 16;

export interface StackedLinkOptions {
  /** Name of the new link (in the namespace it is created in). */
  name: string;
  /** The parent device: a name or index in the CURRENT namespace. */
  parent: LinkRef;
  /** Create the link directly in the namespace open on this fd (the parent stays in the current namespace). */
  netnsFd?: number;
  /** Alternatively a namespace path, opened and closed here. */
  netnsPath?: string;
  /** IFLA_MTU; 0/undefined = inherit the parent's. */
  mtu?: number;
  /** IFLA_ADDRESS (macvlan, vlan); undefined = kernel's choice. */
  mac?: string;
}

export interface MacvlanOptions extends StackedLinkOptions {
  /** Undefined leaves the kernel default (vepa). */
  mode?: MacvlanMode;
  /** MACVLAN_FLAG_* bits (u16). */
  flags?: number;
  /** IFLA_MACVLAN_BC_QUEUE_LEN (kernel ≥ 5.11); 0/undefined = kernel default, not sent. */
  bcQueueLen?: number;
}

export interface IpvlanOptions extends StackedLinkOptions {
  mode: IpvlanMode;
  /** Default bridge (0): sent always, like iproute2 and the Go netlink library. */
  flag?: IpvlanFlag;
}

export interface VlanOptions extends StackedLinkOptions {
  /** 0..4094 */
  id: number;
  /** Undefined: not sent (the kernel's default, 802.1Q). */
  protocol?: VlanProtocol;
}

function validName(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'interface name is empty';
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length >= IFNAMSIZ) return `interface name "${name}" is longer than ${IFNAMSIZ - 1} bytes`;
  if (name === '.' || name === '..' || /[/:\s\u00a0]/.test(name))
    return `interface name "${name}" is not allowed`;
  return undefined;
}

function checkU(v: number | undefined, max: number, what: string, op: string): void {
  if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > max))
    throw invalidArgument(op, `invalid ${what} ${v}`);
}

/** The common head of the RTM_NEWLINK: iproute2's attribute order (MTU, ADDRESS, LINK, [NET_NS_FD], IFNAME). */
function head(o: StackedLinkOptions, kind: string, parentIndex: number, nsFd: number | undefined): NlBuilder {
  const op = `failed to create ${kind} ${o.name}`;
  const bad = validName(o.name);
  if (bad) throw invalidArgument(op, bad);
  checkU(o.mtu, 0xffffffff, 'MTU', op);
  if (!Number.isInteger(parentIndex) || parentIndex <= 0)
    throw invalidArgument(op, `invalid parent index ${parentIndex}`);
  return newLinkMessage(op, o, kind, { index: parentIndex, nsFd });
}

/**
 * The start of a link-creating RTM_NEWLINK (CREATE|EXCL) in iproute2's attribute order: MTU, ADDRESS, with a
 * `parent` LINK and [NET_NS_FD], IFNAME, then IFLA_LINKINFO open with its kind: the caller adds IFLA_INFO_DATA and
 * closes it. A bad MAC is an invalid-argument error of `op`.
 */
export function newLinkMessage(
  op: string,
  o: { name: string; mtu?: number; mac?: string },
  kind: string,
  parent?: { index: number; nsFd: number | undefined },
): NlBuilder {
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifinfo(
    AF_UNSPEC,
    0,
  );
  if (o.mtu) b.attrU32(IFLA_MTU, o.mtu);
  if (o.mac) {
    const mac = parseMac(o.mac);
    if (!mac) throw invalidArgument(op, invalidMacMessage(o.mac));
    b.attr(IFLA_ADDRESS, mac);
  }
  if (parent) {
    b.attrU32(IFLA_LINK, parent.index);
    if (parent.nsFd !== undefined) b.attrU32(IFLA_NET_NS_FD, parent.nsFd);
  }
  b.attrStr(IFLA_IFNAME, o.name);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, kind, false);
  return b;
}

/** The RTM_NEWLINK of a macvlan (exported for byte-level tests). */
export function buildMacvlan(o: MacvlanOptions, parentIndex: number, nsFd?: number): NlBuilder {
  const op = `failed to create macvlan ${o.name}`;
  if (o.mode !== undefined && !Object.hasOwn(MACVLAN_MODES, o.mode))
    throw invalidArgument(op, `unknown macvlan mode ${JSON.stringify(o.mode)}`);
  checkU(o.flags, 0xffff, 'macvlan flags', op);
  checkU(o.bcQueueLen, 0xffffffff, 'bcqueuelen', op);
  const b = head(o, 'macvlan', parentIndex, nsFd);
  const data = o.mode !== undefined || o.flags !== undefined || !!o.bcQueueLen;
  if (data) {
    b.begin(IFLA_INFO_DATA);
    // iproute2 sends the broadcast queue length first, then the mode, then the flags
    if (o.bcQueueLen) b.attrU32(IFLA_MACVLAN_BC_QUEUE_LEN, o.bcQueueLen);
    if (o.mode !== undefined) b.attrU32(IFLA_MACVLAN_MODE, MACVLAN_MODES[o.mode]);
    if (o.flags !== undefined) b.attrU16(IFLA_MACVLAN_FLAGS, o.flags);
    b.end();
  }
  return b.end();
}

/** The RTM_NEWLINK of an ipvlan (exported for byte-level tests). */
export function buildIpvlan(o: IpvlanOptions, parentIndex: number, nsFd?: number): NlBuilder {
  const op = `failed to create ipvlan ${o.name}`;
  if (!Object.hasOwn(IPVLAN_MODES, o.mode))
    throw invalidArgument(op, `unknown ipvlan mode ${JSON.stringify(o.mode)}`);
  const flag = o.flag ?? 'bridge';
  if (!Object.hasOwn(IPVLAN_FLAGS, flag))
    throw invalidArgument(op, `unknown ipvlan flag ${JSON.stringify(flag)}`);
  const b = head(o, 'ipvlan', parentIndex, nsFd);
  b.begin(IFLA_INFO_DATA)
    .attrU16(IFLA_IPVLAN_MODE, IPVLAN_MODES[o.mode])
    .attrU16(IFLA_IPVLAN_FLAGS, IPVLAN_FLAGS[flag])
    .end();
  return b.end();
}

/** The RTM_NEWLINK of a vlan (exported for byte-level tests). */
export function buildVlan(o: VlanOptions, parentIndex: number, nsFd?: number): NlBuilder {
  const op = `failed to create vlan ${o.name}`;
  if (!Number.isInteger(o.id) || o.id < 0 || o.id > 4094)
    throw invalidArgument(op, `invalid VLAN ID ${o.id}`);
  if (o.protocol !== undefined && !Object.hasOwn(VLAN_PROTOCOLS, o.protocol))
    throw invalidArgument(op, `unknown VLAN protocol ${JSON.stringify(o.protocol)}`);
  const b = head(o, 'vlan', parentIndex, nsFd);
  b.begin(IFLA_INFO_DATA).attrU16(IFLA_VLAN_ID, o.id);
  if (o.protocol !== undefined) {
    const be = Buffer.alloc(2);
    be.writeUInt16BE(VLAN_PROTOCOLS[o.protocol]);
    b.attr(IFLA_VLAN_PROTOCOL, be);
  }
  b.end();
  return b.end();
}

function create<O extends StackedLinkOptions>(
  o: O,
  kind: string,
  build: (o: O, parentIndex: number, nsFd?: number) => NlBuilder,
): void {
  const op = `failed to create ${kind} ${o.name}`;
  let fd: number | undefined;
  // a missing path throws NetnsNotFoundError (isNetnsGone), another kind of file NotNetnsError
  if (o.netnsPath !== undefined && o.netnsFd === undefined) fd = openNetnsFd(o.netnsPath);
  try {
    withSocket(() => rtRequest(build(o, linkIndex(o.parent), fd ?? o.netnsFd), op), op);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Creates a macvlan on `parent` (EEXIST when the name is taken in the target namespace; EOPNOTSUPP/"Unknown device
 * type" when the kernel has no macvlan). The link is created down, in the target namespace when one is given.
 */
export function createMacvlan(o: MacvlanOptions): void {
  create(o, 'macvlan', buildMacvlan);
}

/** Creates an ipvlan on `parent` (see createMacvlan). */
export function createIpvlan(o: IpvlanOptions): void {
  create(o, 'ipvlan', buildIpvlan);
}

/** Creates an 802.1Q (or 802.1ad) vlan on `parent` (see createMacvlan). */
export function createVlan(o: VlanOptions): void {
  create(o, 'vlan', buildVlan);
}

// --- decoding --------------------------------------------------------------------------------------------------

export interface MacvlanInfo {
  /** The mode name, or `mode-<n>` for a value this module does not know. */
  mode: MacvlanMode | `mode-${number}`;
  flags: number;
  /** IFLA_MACVLAN_BC_QUEUE_LEN as requested (undefined on kernels before 5.11). */
  bcQueueLen: number | undefined;
  /** The queue length in use (the largest requested by the macvlans of the parent). */
  bcQueueLenUsed: number | undefined;
}

export interface IpvlanInfo {
  mode: IpvlanMode | `mode-${number}`;
  flag: IpvlanFlag | `flag-${number}`;
}

export interface VlanInfo {
  id: number;
  protocol: VlanProtocol | `0x${string}`;
}

/** A link with the kind-specific data of macvlan/macvtap, ipvlan/ipvtap and vlan links. */
export interface LinkDetails extends Link {
  macvlan?: MacvlanInfo;
  ipvlan?: IpvlanInfo;
  vlan?: VlanInfo;
}

function nameOf<T extends Record<string, number>>(
  table: T,
  v: number,
  prefix: string,
): keyof T | `${string}` {
  for (const [k, n] of Object.entries(table)) if (n === v) return k;
  return `${prefix}-${v}`;
}

/** Decodes one RTM_NEWLINK message with the macvlan/ipvlan/vlan data of IFLA_INFO_DATA. */
export function decodeLinkDetails(m: NlMessage): LinkDetails {
  const link: LinkDetails = decodeLink(m);
  const a = parseAttrs(m.payload, 16);
  const info = attrNested(a, IFLA_LINKINFO);
  const data: Attrs | undefined = info ? attrNested(info, IFLA_INFO_DATA) : undefined;
  const kind = info ? attrStr(info, IFLA_INFO_KIND) : undefined;
  if (!data) return link;
  if (kind === 'macvlan' || kind === 'macvtap') {
    link.macvlan = {
      mode: nameOf(MACVLAN_MODES, attrU32(data, IFLA_MACVLAN_MODE) ?? 0, 'mode') as MacvlanInfo['mode'],
      flags: attrU16(data, IFLA_MACVLAN_FLAGS) ?? 0,
      bcQueueLen: attrU32(data, IFLA_MACVLAN_BC_QUEUE_LEN),
      bcQueueLenUsed: attrU32(data, IFLA_MACVLAN_BC_QUEUE_LEN_USED),
    };
  } else if (kind === 'ipvlan' || kind === 'ipvtap') {
    link.ipvlan = {
      mode: nameOf(IPVLAN_MODES, attrU16(data, IFLA_IPVLAN_MODE) ?? 0, 'mode') as IpvlanInfo['mode'],
      flag: nameOf(IPVLAN_FLAGS, attrU16(data, IFLA_IPVLAN_FLAGS) ?? 0, 'flag') as IpvlanInfo['flag'],
    };
  } else if (kind === 'vlan') {
    const p = data.get(IFLA_VLAN_PROTOCOL);
    const proto = p && p.length >= 2 ? p.readUInt16BE(0) : VLAN_PROTOCOLS['802.1Q'];
    const protoName = Object.entries(VLAN_PROTOCOLS).find(([, v]) => v === proto)?.[0];
    link.vlan = {
      id: attrU16(data, IFLA_VLAN_ID) ?? 0,
      protocol: (protoName ?? `0x${proto.toString(16).padStart(4, '0')}`) as VlanInfo['protocol'],
    };
  }
  return link;
}

/**
 * The link (name, alternative name of 16+ bytes like getLink, or index) with its macvlan/ipvlan/vlan data, or
 * undefined when there is none here.
 */
export function getLinkDetails(ref: string | number): LinkDetails | undefined {
  const op = `failed to look up link ${typeof ref === 'number' ? `#${ref}` : ref}`;
  checkLookupKey(ref, op);
  try {
    return decodeLinkDetails(rtGet(buildGetLink(ref), op));
  } catch (err) {
    if (isNotFoundError(err)) return undefined;
    throw err;
  }
}

// --- default route ---------------------------------------------------------------------------------------------

/**
 * The name of the interface of the first default route of the main table (IPv4 routes first, then IPv6), in the
 * calling thread's namespace: the reference's `getDefaultRouteInterfaceName` (macvlan/ipvlan's default master).
 * A multipath default route counts with its first next hop. Throws "no default route interface found" when there
 * is none.
 */
export function defaultRouteInterface(): string {
  const op = 'failed to find the default route interface';
  return withSocket(() => {
    for (const r of listRoutes()) {
      if (r.dst !== '0.0.0.0/0' && r.dst !== '::/0') continue;
      const idx = r.linkIndex ?? r.multipath?.[0]?.linkIndex;
      if (!idx) continue;
      const l = getLinkDetails(idx);
      if (!l) throw fail('Link not found');
      return l.name;
    }
    throw fail('no default route interface found');
  }, op);
}
