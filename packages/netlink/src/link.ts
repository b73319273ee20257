// Links: list/get, veth pairs (peer created directly in another namespace), bridges, ifb, and link attributes.
import { closeSync } from 'node:fs';
import { openNetnsFd } from './netns.ts';
import {
  AF_UNSPEC,
  type Attrs,
  attrNested,
  attrStr,
  attrU8,
  attrU32,
  formatMac,
  IFF_ALLMULTI,
  IFF_LOWER_UP,
  IFF_PROMISC,
  IFF_RUNNING,
  IFF_UP,
  IFLA_ADDRESS,
  IFLA_BR_VLAN_FILTERING,
  IFLA_BROADCAST,
  IFLA_BRPORT_ISOLATED,
  IFLA_BRPORT_LEARNING,
  IFLA_BRPORT_MODE,
  IFLA_BRPORT_STATE,
  IFLA_BRPORT_UNICAST_FLOOD,
  IFLA_IFALIAS,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_INFO_SLAVE_DATA,
  IFLA_INFO_SLAVE_KIND,
  IFLA_LINK,
  IFLA_LINK_NETNSID,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  IFLA_OPERSTATE,
  IFLA_PROMISCUITY,
  IFLA_TXQLEN,
  invalidMacMessage,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  parseMac,
  RTM_DELLINK,
  RTM_GETLINK,
  RTM_NEWLINK,
  VETH_INFO_PEER,
} from './nl.ts';
import {
  invalidArgument,
  isNotFoundError,
  NetlinkError,
  rtDump,
  rtGet,
  rtRequest,
  withSocket,
} from './rtnl.ts';

/** Go netlink LinkOperState names. */
export type OperState =
  | 'unknown'
  | 'not-present'
  | 'down'
  | 'lower-layer-down'
  | 'testing'
  | 'dormant'
  | 'up';
const OPER_STATES: OperState[] = [
  'unknown',
  'not-present',
  'down',
  'lower-layer-down',
  'testing',
  'dormant',
  'up',
];

/** Bridge port state as reported in IFLA_BRPORT_STATE. */
export type BridgePortState = 'disabled' | 'listening' | 'learning' | 'forwarding' | 'blocking' | 'unknown';
const PORT_STATES: BridgePortState[] = ['disabled', 'listening', 'learning', 'forwarding', 'blocking'];

export interface BridgePortInfo {
  state: BridgePortState;
  hairpin: boolean;
  learning: boolean;
  isolated: boolean;
  unicastFlood: boolean;
}

export interface Link {
  index: number;
  name: string;
  /** IFLA_INFO_KIND: 'veth', 'bridge', 'ifb', … (undefined for plain devices such as lo or physical NICs). */
  kind: string | undefined;
  /** IFLA_INFO_SLAVE_KIND of a port: 'bridge' when enslaved to a bridge. */
  slaveKind: string | undefined;
  mtu: number;
  /** Hardware address 'aa:bb:cc:dd:ee:ff' ('' if the device has none). */
  mac: string;
  broadcast: string;
  /** ifi_flags (IFF_*). */
  flags: number;
  /** IFF_UP: administratively up. */
  up: boolean;
  /** IFF_LOWER_UP: carrier. */
  lowerUp: boolean;
  running: boolean;
  operstate: OperState;
  /** ifindex of the master (bridge) or undefined. */
  masterIndex: number | undefined;
  /** IFLA_LINK: the parent/peer ifindex (in the namespace given by linkNetnsId when that is set). */
  linkIndex: number | undefined;
  /** veth only: the peer's ifindex (IFLA_LINK). */
  peerIndex: number | undefined;
  /** IFLA_LINK_NETNSID: set when the peer/parent lives in another namespace. */
  linkNetnsId: number | undefined;
  txqlen: number;
  /** IFF_PROMISC as set by the user (ip link set … promisc on). */
  promisc: boolean;
  /** IFLA_PROMISCUITY: the kernel's promiscuity counter (bridge ports count too). */
  promiscuity: number;
  allmulti: boolean;
  /** ARPHRD_* (1 = ether, 772 = loopback). */
  hwType: number;
  alias: string | undefined;
  /** IFLA_PERM_ADDRESS: the hardware's burnt-in MAC (physical devices; '' or undefined when the kernel has none). */
  permMac?: string;
  /** IFLA_PARENT_DEV_BUS_NAME / IFLA_PARENT_DEV_NAME: the bus device behind the link ('pci', '0000:03:00.0'). */
  parentBus?: string;
  parentDev?: string;
  /** Bridges only: IFLA_BR_VLAN_FILTERING. */
  vlanFiltering: boolean | undefined;
  /** Bridge ports only: flags from IFLA_INFO_SLAVE_DATA. */
  bridgePort: BridgePortInfo | undefined;
}

/** A link given by name, by ifindex, or as a Link (its index is used). */
export type LinkRef = string | number | { index: number; name?: string };

const IFNAMSIZ = 16;

/**
 * The kernel's own guard, dev_valid_name(): 1..15 bytes, not '.'/'..', no '/', ':' or isspace() byte
 * (the kernel's ctype: \t \n \v \f \r, space and 0xA0). It only turns the kernel's bare EINVAL into a
 * message; the CNI rule set for names a user supplies is skel's `interfaceNameProblem`.
 */
function invalidLinkNameReason(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'interface name is empty';
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length >= IFNAMSIZ) return `interface name "${name}" is longer than ${IFNAMSIZ - 1} bytes`;
  if (name === '.' || name === '..') return `interface name "${name}" is not allowed`;
  for (const c of bytes) {
    if (c === 0x2f || c === 0x3a || c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0)
      return `interface name "${name}" contains '/', ':' or whitespace`;
  }
  return undefined;
}

function checkName(name: string, op: string): void {
  const reason = invalidLinkNameReason(name);
  if (reason) throw invalidArgument(op, reason);
}

/** Human name of a link reference for messages: the name if known, else 'link #<index>'. */
export function describeLink(ref: LinkRef): string {
  if (typeof ref === 'string') return ref;
  if (typeof ref === 'number') return `link #${ref}`;
  return ref.name ?? `link #${ref.index}`;
}

function bool(v: number | undefined): boolean {
  return v !== undefined && v !== 0;
}

/** IFLA_PERM_ADDRESS (kernel ≥ 5.5), IFLA_PARENT_DEV_NAME / _BUS_NAME (kernel ≥ 5.16). */
const IFLA_PERM_ADDRESS = 54;
const IFLA_PARENT_DEV_NAME = 56;
const IFLA_PARENT_DEV_BUS_NAME = 57;

/** Decodes one RTM_NEWLINK message (AF_UNSPEC) into a Link. */
export function decodeLink(m: NlMessage): Link {
  const p = m.payload;
  if (p.length < 16) throw new Error(`short link message (${p.length} bytes)`);
  const hwType = p.readUInt16LE(2);
  const index = p.readInt32LE(4);
  const flags = p.readUInt32LE(8);
  const a = parseAttrs(p, 16);
  const info = attrNested(a, IFLA_LINKINFO);
  const kind = info ? attrStr(info, IFLA_INFO_KIND) : undefined;
  const slaveKind = info ? attrStr(info, IFLA_INFO_SLAVE_KIND) : undefined;
  let vlanFiltering: boolean | undefined;
  if (kind === 'bridge') {
    const data = info ? attrNested(info, IFLA_INFO_DATA) : undefined;
    vlanFiltering = bool(data ? attrU8(data, IFLA_BR_VLAN_FILTERING) : undefined);
  }
  let bridgePort: BridgePortInfo | undefined;
  if (slaveKind === 'bridge') {
    const d: Attrs = (info && attrNested(info, IFLA_INFO_SLAVE_DATA)) || new Map();
    const st = attrU8(d, IFLA_BRPORT_STATE);
    bridgePort = {
      state: st === undefined ? 'unknown' : (PORT_STATES[st] ?? 'unknown'),
      hairpin: bool(attrU8(d, IFLA_BRPORT_MODE)),
      learning: bool(attrU8(d, IFLA_BRPORT_LEARNING)),
      isolated: bool(attrU8(d, IFLA_BRPORT_ISOLATED)),
      unicastFlood: bool(attrU8(d, IFLA_BRPORT_UNICAST_FLOOD)),
    };
  }
  const linkIndex = attrU32(a, IFLA_LINK);
  const master = attrU32(a, IFLA_MASTER);
  const mac = a.get(IFLA_ADDRESS);
  const brd = a.get(IFLA_BROADCAST);
  const perm = a.get(IFLA_PERM_ADDRESS);
  return {
    index,
    name: attrStr(a, IFLA_IFNAME) ?? '',
    kind,
    slaveKind,
    mtu: attrU32(a, IFLA_MTU) ?? 0,
    mac: mac ? formatMac(mac) : '',
    broadcast: brd ? formatMac(brd) : '',
    flags,
    up: (flags & IFF_UP) !== 0,
    lowerUp: (flags & IFF_LOWER_UP) !== 0,
    running: (flags & IFF_RUNNING) !== 0,
    operstate: OPER_STATES[attrU8(a, IFLA_OPERSTATE) ?? 0] ?? 'unknown',
    masterIndex: master ? master : undefined,
    linkIndex: linkIndex || undefined,
    // the kernel omits IFLA_LINK when it equals the device's own index (possible for a peer in another namespace)
    peerIndex: kind === 'veth' ? linkIndex || index : undefined,
    linkNetnsId: a.has(IFLA_LINK_NETNSID) ? a.get(IFLA_LINK_NETNSID)!.readInt32LE(0) : undefined,
    txqlen: attrU32(a, IFLA_TXQLEN) ?? 0,
    promisc: (flags & IFF_PROMISC) !== 0,
    promiscuity: attrU32(a, IFLA_PROMISCUITY) ?? 0,
    allmulti: (flags & IFF_ALLMULTI) !== 0,
    hwType,
    alias: attrStr(a, IFLA_IFALIAS),
    permMac: perm ? formatMac(perm) : '',
    parentBus: attrStr(a, IFLA_PARENT_DEV_BUS_NAME),
    parentDev: attrStr(a, IFLA_PARENT_DEV_NAME),
    vlanFiltering,
    bridgePort,
  };
}

// --- queries ---------------------------------------------------------------------------------------------------

/** Every link in the current namespace. */
export function listLinks(): Link[] {
  const b = new NlBuilder(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP).ifinfo(AF_UNSPEC, 0);
  return rtDump(b, 'failed to list links')
    .filter((m) => m.type === RTM_NEWLINK)
    .map(decodeLink);
}

/** Builds the GETLINK request for a name or index. */
/** IFLA_ALT_IFNAME: an alternative name (kernel ≥ 5.5), up to 127 bytes. */
const IFLA_ALT_IFNAME = 53;
const ALTIFNAMSIZ = 128;

export function buildGetLink(ref: string | number): NlBuilder {
  const b = new NlBuilder(RTM_GETLINK, NLM_F_REQUEST);
  if (typeof ref === 'number') return b.ifinfo(AF_UNSPEC, ref);
  // a name longer than IFNAMSIZ can only be an alternative name (like Go netlink's LinkByName); shorter altnames
  // are found through IFLA_IFNAME too (the kernel's name lookup includes them)
  const attr = Buffer.byteLength(ref) >= IFNAMSIZ ? IFLA_ALT_IFNAME : IFLA_IFNAME;
  return b.ifinfo(AF_UNSPEC, 0).attrStr(attr, ref);
}

/**
 * Checks a lookup key: an index, an interface name, or — 16 to 127 bytes — an alternative name (what a
 * `buildGetLink` request can find). Throws an EINVAL NetlinkError for anything else.
 */
export function checkLookupKey(key: string | number, op: string): void {
  if (typeof key === 'string') {
    const n = Buffer.byteLength(key);
    if (n >= IFNAMSIZ && n < ALTIFNAMSIZ && !key.includes('/')) {
      // an alternative name
    } else checkName(key, op);
  } else if (!Number.isInteger(key) || key <= 0) throw invalidArgument(op, `invalid interface index ${key}`);
}

/** The link with this name (or alternative name) or index, or undefined when there is none in the current namespace. */
export function getLink(ref: LinkRef): Link | undefined {
  const key = typeof ref === 'object' ? ref.index : ref;
  const op = `failed to look up link ${describeLink(ref)}`;
  checkLookupKey(key, op);
  try {
    return decodeLink(rtGet(buildGetLink(key), op));
  } catch (err) {
    if (isNotFoundError(err)) return undefined;
    throw err;
  }
}

/** Like getLink, but a missing link is an ENODEV NetlinkError `link "<name>" not found`. */
export function getLinkOrThrow(ref: LinkRef): Link {
  const l = getLink(ref);
  if (!l)
    throw new NetlinkError(
      19,
      `link ${typeof ref === 'string' ? JSON.stringify(ref) : describeLink(ref)} not found`,
      {
        reason: 'no such device',
      },
    );
  return l;
}

/** The ifindex of a reference (a name is looked up; ENODEV error when missing). */
export function linkIndex(ref: LinkRef): number {
  if (typeof ref === 'number') return ref;
  if (typeof ref === 'object') return ref.index;
  return getLinkOrThrow(ref).index;
}

// --- creation --------------------------------------------------------------------------------------------------

export interface VethOptions {
  /** Name of the end created in the current namespace. */
  name: string;
  /** Name of the peer, created directly in the peer namespace (or here when none is given). */
  peerName: string;
  /** An open fd of the namespace the peer is created in (IFLA_NET_NS_FD). */
  peerNetnsFd?: number;
  /** Alternatively, a namespace path (e.g. /run/netns/x or /proc/<pid>/ns/net): opened and closed here. */
  peerNetnsPath?: string;
  mtu?: number;
  peerMtu?: number;
  mac?: string;
  peerMac?: string;
  txQueueLen?: number;
  peerTxQueueLen?: number;
}

function checkMtu(mtu: number | undefined, op: string): void {
  if (mtu !== undefined && (!Number.isInteger(mtu) || mtu < 0 || mtu > 0xffffffff))
    throw invalidArgument(op, `invalid MTU ${mtu}`);
}

function macBytes(mac: string, op: string): Buffer {
  const b = parseMac(mac);
  if (!b) throw invalidArgument(op, invalidMacMessage(mac));
  return b;
}

/** The RTM_NEWLINK message createVethPair sends (exported for byte-level tests). */
export function buildVethPair(o: VethOptions, peerNsFd?: number): NlBuilder {
  const op = `failed to create veth pair ${o.name}/${o.peerName}`;
  checkName(o.name, op);
  checkName(o.peerName, op);
  checkMtu(o.mtu, op);
  checkMtu(o.peerMtu, op);
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifinfo(
    AF_UNSPEC,
    0,
  );
  if (o.mtu) b.attrU32(IFLA_MTU, o.mtu);
  if (o.mac) b.attr(IFLA_ADDRESS, macBytes(o.mac, op));
  if (o.txQueueLen !== undefined) b.attrU32(IFLA_TXQLEN, o.txQueueLen);
  b.attrStr(IFLA_IFNAME, o.name);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, 'veth', false);
  b.begin(IFLA_INFO_DATA).begin(VETH_INFO_PEER).ifinfo(AF_UNSPEC, 0);
  const nsFd = peerNsFd ?? o.peerNetnsFd;
  if (nsFd !== undefined) b.attrU32(IFLA_NET_NS_FD, nsFd);
  if (o.peerMtu) b.attrU32(IFLA_MTU, o.peerMtu);
  if (o.peerMac) b.attr(IFLA_ADDRESS, macBytes(o.peerMac, op));
  if (o.peerTxQueueLen !== undefined) b.attrU32(IFLA_TXQLEN, o.peerTxQueueLen);
  b.attrStr(IFLA_IFNAME, o.peerName);
  b.end().end().end();
  return b;
}

/**
 * Creates a veth pair with ONE RTM_NEWLINK: `name` here, `peerName` directly in the peer namespace (when
 * given) — it never appears in this namespace. Returns the local end (its peerIndex is the peer's ifindex in
 * the peer namespace). EEXIST when either name is taken (in its own namespace).
 */
export function createVethPair(o: VethOptions): Link {
  const op = `failed to create veth pair ${o.name}/${o.peerName}`;
  let fd: number | undefined;
  // a missing path throws NetnsNotFoundError (isNetnsGone), another kind of file NotNetnsError
  if (o.peerNetnsPath !== undefined && o.peerNetnsFd === undefined) fd = openNetnsFd(o.peerNetnsPath);
  try {
    return withSocket(() => {
      rtRequest(buildVethPair(o, fd), op);
      return getLinkOrThrow(o.name);
    }, op);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export interface BridgeOptions {
  name: string;
  mtu?: number;
  /** Turn on VLAN filtering at creation (IFLA_BR_VLAN_FILTERING=1). */
  vlanFiltering?: boolean;
  txQueueLen?: number;
}

export function buildBridge(o: BridgeOptions): NlBuilder {
  const op = `failed to create bridge ${o.name}`;
  checkName(o.name, op);
  checkMtu(o.mtu, op);
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifinfo(
    AF_UNSPEC,
    0,
  );
  if (o.mtu) b.attrU32(IFLA_MTU, o.mtu);
  if (o.txQueueLen !== undefined) b.attrU32(IFLA_TXQLEN, o.txQueueLen);
  b.attrStr(IFLA_IFNAME, o.name);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, 'bridge', false);
  if (o.vlanFiltering) b.begin(IFLA_INFO_DATA).attrU8(IFLA_BR_VLAN_FILTERING, 1).end();
  b.end();
  return b;
}

/** Creates a bridge (EEXIST if a link of that name exists). Kernels without VLAN filtering give EOPNOTSUPP for vlanFiltering. */
export function createBridge(o: BridgeOptions): Link {
  const op = `failed to create bridge ${o.name}`;
  return withSocket(() => {
    rtRequest(buildBridge(o), op);
    return getLinkOrThrow(o.name);
  }, op);
}

export interface IfbOptions {
  mtu?: number;
  txQueueLen?: number;
  /** Create it administratively up. */
  up?: boolean;
}

export function buildIfb(name: string, o: IfbOptions = {}): NlBuilder {
  const op = `failed to create ifb ${name}`;
  checkName(name, op);
  checkMtu(o.mtu, op);
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifinfo(
    AF_UNSPEC,
    0,
    o.up ? IFF_UP : 0,
    o.up ? IFF_UP : 0,
  );
  if (o.mtu) b.attrU32(IFLA_MTU, o.mtu);
  if (o.txQueueLen !== undefined) b.attrU32(IFLA_TXQLEN, o.txQueueLen);
  b.attrStr(IFLA_IFNAME, name);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, 'ifb', false).end();
  return b;
}

/** Creates an ifb (intermediate functional block) device. */
export function createIfb(name: string, o: IfbOptions = {}): Link {
  const op = `failed to create ifb ${name}`;
  return withSocket(() => {
    rtRequest(buildIfb(name, o), op);
    return getLinkOrThrow(name);
  }, op);
}

/** The RTM_NEWLINK message createDummy sends (exported for byte-level tests). */
export function buildDummy(name: string, o: { mtu?: number; mac?: string } = {}): NlBuilder {
  const op = `failed to create dummy ${name}`;
  checkName(name, op);
  checkMtu(o.mtu, op);
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifinfo(
    AF_UNSPEC,
    0,
  );
  if (o.mtu) b.attrU32(IFLA_MTU, o.mtu);
  if (o.mac) b.attr(IFLA_ADDRESS, macBytes(o.mac, op));
  b.attrStr(IFLA_IFNAME, name);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, 'dummy', false).end();
  return b;
}

/** Creates a dummy link (EEXIST when the name is taken; EOPNOTSUPP on kernels without the dummy driver). */
export function createDummy(name: string, o: { mtu?: number; mac?: string } = {}): Link {
  const op = `failed to create dummy ${name}`;
  return withSocket(() => {
    rtRequest(buildDummy(name, o), op);
    return getLinkOrThrow(name);
  }, op);
}

// --- changes ---------------------------------------------------------------------------------------------------

/** RTM_NEWLINK (no create) addressing `ref`: by index, or by IFLA_IFNAME when only a name is known. */
function linkChange(ref: LinkRef, flags = 0, change = 0): NlBuilder {
  const b = new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
  if (typeof ref === 'string') {
    checkName(ref, `invalid link ${ref}`);
    return b.ifinfo(AF_UNSPEC, 0, flags, change).attrStr(IFLA_IFNAME, ref);
  }
  return b.ifinfo(AF_UNSPEC, typeof ref === 'number' ? ref : ref.index, flags, change);
}

function setFlag(ref: LinkRef, flag: number, on: boolean, op: string): void {
  rtRequest(linkChange(ref, on ? flag : 0, flag), op);
}

export function setLinkUp(ref: LinkRef): void {
  setFlag(ref, IFF_UP, true, `failed to set ${describeLink(ref)} up`);
}

export function setLinkDown(ref: LinkRef): void {
  setFlag(ref, IFF_UP, false, `failed to set ${describeLink(ref)} down`);
}

export function setPromisc(ref: LinkRef, on: boolean): void {
  setFlag(
    ref,
    IFF_PROMISC,
    on,
    `failed to set promiscuous mode ${on ? 'on' : 'off'} on ${describeLink(ref)}`,
  );
}

export function setAllMulticast(ref: LinkRef, on: boolean): void {
  setFlag(ref, IFF_ALLMULTI, on, `failed to set all-multicast ${on ? 'on' : 'off'} on ${describeLink(ref)}`);
}

/** Enslaves `ref` to `master` (a bridge), or removes it from its master when `master` is null. */
export function setMaster(ref: LinkRef, master: LinkRef | null): void {
  const op =
    master === null
      ? `failed to remove ${describeLink(ref)} from its master`
      : `failed to connect ${describeLink(ref)} to ${describeLink(master)}`;
  withSocket(() => {
    const idx = master === null ? 0 : linkIndex(master);
    rtRequest(linkChange(ref).attrU32(IFLA_MASTER, idx), op);
  }, op);
}

export function setMtu(ref: LinkRef, mtu: number): void {
  const op = `failed to set MTU ${mtu} on ${describeLink(ref)}`;
  checkMtu(mtu, op);
  rtRequest(linkChange(ref).attrU32(IFLA_MTU, mtu), op);
}

export function setMac(ref: LinkRef, mac: string): void {
  const op = `failed to set MAC ${mac} on ${describeLink(ref)}`;
  rtRequest(linkChange(ref).attr(IFLA_ADDRESS, macBytes(mac, op)), op);
}

export function setTxQueueLen(ref: LinkRef, qlen: number): void {
  const op = `failed to set txqueuelen ${qlen} on ${describeLink(ref)}`;
  if (!Number.isInteger(qlen) || qlen < 0 || qlen > 0xffffffff)
    throw invalidArgument(op, `invalid txqueuelen ${qlen}`);
  rtRequest(linkChange(ref).attrU32(IFLA_TXQLEN, qlen), op);
}

/** Sets the interface alias (IFLA_IFALIAS, at most 255 bytes; '' clears it). */
export function setAlias(ref: LinkRef, alias: string): void {
  const op = `failed to set alias on ${describeLink(ref)}`;
  if (Buffer.byteLength(alias) > 255) throw invalidArgument(op, 'alias longer than 255 bytes');
  rtRequest(linkChange(ref).attrStr(IFLA_IFALIAS, alias, false), op);
}

/** Renames a link (the kernel requires it to be down: EBUSY otherwise). */
export function renameLink(ref: LinkRef, newName: string): void {
  const op = `failed to rename ${describeLink(ref)} to ${newName}`;
  checkName(newName, op);
  withSocket(() => {
    rtRequest(linkChange(linkIndex(ref)).attrStr(IFLA_IFNAME, newName), op);
  }, op);
}

/**
 * Moves a link into the namespace open on `ns` (an fd, e.g. NetNS.fd) or at `ns` (a path, checked to be a netns).
 * With `name`, the same request renames it there: one kernel operation, so no moment exists where the link is in
 * the target under its old name (when that name is taken there, the kernel moves it under `name` directly; when
 * `name` is taken there, the move happens and the rename fails with EEXIST: the caller checks where it is).
 */
export function moveToNetns(
  ref: LinkRef,
  ns: number | string | { readonly fd: number },
  opts: { name?: string } = {},
): void {
  const op = `failed to move ${describeLink(ref)} to namespace ${typeof ns === 'object' ? `fd ${ns.fd}` : ns}${opts.name ? ` as ${opts.name}` : ''}`;
  if (opts.name !== undefined) checkName(opts.name, op);
  let fd: number;
  let opened = false;
  if (typeof ns === 'string') {
    fd = openNetnsFd(ns); // NetnsNotFoundError / NotNetnsError for bad paths
    opened = true;
  } else fd = typeof ns === 'number' ? ns : ns.fd;
  try {
    // a rename cannot go with a lookup by name (both are IFLA_IFNAME): by index then
    const b = linkChange(opts.name !== undefined ? linkIndex(ref) : ref).attrU32(IFLA_NET_NS_FD, fd);
    if (opts.name !== undefined) b.attrStr(IFLA_IFNAME, opts.name);
    rtRequest(b, op);
  } finally {
    if (opened) closeSync(fd);
  }
}

/** Deletes a link (ENODEV error when missing; see deleteLinkIfExists). A veth takes its peer with it. */
export function deleteLink(ref: LinkRef): void {
  const op = `failed to delete ${describeLink(ref)}`;
  const b = new NlBuilder(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
  if (typeof ref === 'string') {
    checkName(ref, op);
    b.ifinfo(AF_UNSPEC, 0).attrStr(IFLA_IFNAME, ref);
  } else b.ifinfo(AF_UNSPEC, typeof ref === 'number' ? ref : ref.index);
  rtRequest(b, op);
}

/** Deletes a link; returns false (no error) when it does not exist. */
export function deleteLinkIfExists(ref: LinkRef): boolean {
  try {
    deleteLink(ref);
    return true;
  } catch (err) {
    if (isNotFoundError(err)) return false;
    throw err;
  }
}
