// Bridge ports: port flags (IFLA_PROTINFO over AF_BRIDGE RTM_SETLINK) and VLAN entries (IFLA_AF_SPEC /
// IFLA_BRIDGE_VLAN_INFO), encoded exactly as iproute2's `bridge link set` / `bridge vlan add|del|show` do.
import { describeLink, type LinkRef, linkIndex } from './link.ts';
import {
  AF_BRIDGE,
  BRIDGE_FLAGS_MASTER,
  BRIDGE_FLAGS_SELF,
  BRIDGE_VLAN_INFO_PVID,
  BRIDGE_VLAN_INFO_RANGE_BEGIN,
  BRIDGE_VLAN_INFO_RANGE_END,
  BRIDGE_VLAN_INFO_UNTAGGED,
  forEachAttr,
  IFLA_AF_SPEC,
  IFLA_BRIDGE_FLAGS,
  IFLA_BRIDGE_VLAN_INFO,
  IFLA_BRPORT_ISOLATED,
  IFLA_BRPORT_LEARNING,
  IFLA_BRPORT_MODE,
  IFLA_EXT_MASK,
  IFLA_PROTINFO,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NlBuilder,
  parseAttrs,
  RTEXT_FILTER_BRVLAN,
  RTM_DELLINK,
  RTM_GETLINK,
  RTM_NEWLINK,
  RTM_SETLINK,
} from './nl.ts';
import { invalidArgument, rtDump, rtRequest, withSocket } from './rtnl.ts';

export interface BridgePortFlags {
  hairpin?: boolean;
  isolated?: boolean;
  learning?: boolean;
}

/** The AF_BRIDGE RTM_SETLINK message for port flags (only the flags given are sent). */
export function buildBridgePortFlags(index: number, f: BridgePortFlags): NlBuilder {
  const b = new NlBuilder(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK).ifinfo(AF_BRIDGE, index);
  b.begin(IFLA_PROTINFO, true);
  if (f.hairpin !== undefined) b.attrU8(IFLA_BRPORT_MODE, f.hairpin ? 1 : 0);
  if (f.learning !== undefined) b.attrU8(IFLA_BRPORT_LEARNING, f.learning ? 1 : 0);
  if (f.isolated !== undefined) b.attrU8(IFLA_BRPORT_ISOLATED, f.isolated ? 1 : 0);
  return b.end();
}

/** Sets bridge-port flags on an enslaved link (read them back with getLink(x).bridgePort). */
export function setBridgePortFlags(ref: LinkRef, f: BridgePortFlags): void {
  const parts = Object.entries(f)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k} ${v ? 'on' : 'off'}`);
  const op = `failed to set bridge port flags (${parts.join(', ')}) on ${describeLink(ref)}`;
  if (parts.length === 0) return;
  withSocket(() => rtRequest(buildBridgePortFlags(linkIndex(ref), f), op), op);
}

// --- VLANs -----------------------------------------------------------------------------------------------------

export interface BridgeVlanSpec {
  /** VLAN id 1..4094. */
  vid: number;
  /** Last id of an inclusive range vid..vidEnd (RANGE_BEGIN/RANGE_END entries). */
  vidEnd?: number;
  /** Port VLAN id for untagged ingress (not allowed with a range). */
  pvid?: boolean;
  /** Egress untagged. */
  untagged?: boolean;
  /** Apply to the device itself (BRIDGE_FLAGS_SELF), e.g. the bridge's own VLANs. */
  self?: boolean;
  /** Apply to the port on its master bridge (BRIDGE_FLAGS_MASTER); the default when self is not set. */
  master?: boolean;
}

export interface BridgeVlanEntry {
  /** ifindex of the port (or of the bridge, for its own VLANs). */
  index: number;
  vid: number;
  pvid: boolean;
  untagged: boolean;
}

function vlanMessage(type: number, index: number, v: BridgeVlanSpec, op: string): NlBuilder {
  const ok = (x: number) => Number.isInteger(x) && x >= 1 && x <= 4094;
  if (!ok(v.vid)) throw invalidArgument(op, `invalid VLAN ID ${v.vid} (must be between 1 and 4094)`);
  if (v.vidEnd !== undefined && (!ok(v.vidEnd) || v.vidEnd < v.vid))
    throw invalidArgument(op, `invalid VLAN range ${v.vid}-${v.vidEnd}`);
  const range = v.vidEnd !== undefined && v.vidEnd !== v.vid;
  if (range && v.pvid) throw invalidArgument(op, 'a VLAN range cannot be the PVID');
  let flags = 0;
  if (v.pvid) flags |= BRIDGE_VLAN_INFO_PVID;
  if (v.untagged) flags |= BRIDGE_VLAN_INFO_UNTAGGED;
  let brFlags = 0;
  if (v.self) brFlags |= BRIDGE_FLAGS_SELF;
  if (v.master || !v.self) brFlags |= BRIDGE_FLAGS_MASTER;
  const b = new NlBuilder(type, NLM_F_REQUEST | NLM_F_ACK).ifinfo(AF_BRIDGE, index);
  b.begin(IFLA_AF_SPEC).attrU16(IFLA_BRIDGE_FLAGS, brFlags);
  const info = (f: number, vid: number) => {
    const d = Buffer.alloc(4);
    d.writeUInt16LE(f, 0);
    d.writeUInt16LE(vid, 2);
    b.attr(IFLA_BRIDGE_VLAN_INFO, d);
  };
  if (range) {
    info(flags | BRIDGE_VLAN_INFO_RANGE_BEGIN, v.vid);
    info(flags | BRIDGE_VLAN_INFO_RANGE_END, v.vidEnd!);
  } else info(flags, v.vid);
  return b.end();
}

export function buildBridgeVlanAdd(index: number, v: BridgeVlanSpec): NlBuilder {
  return vlanMessage(RTM_SETLINK, index, v, 'bridge vlan add');
}

export function buildBridgeVlanDel(index: number, v: BridgeVlanSpec): NlBuilder {
  return vlanMessage(RTM_DELLINK, index, v, 'bridge vlan del');
}

function vlanText(v: BridgeVlanSpec): string {
  return v.vidEnd !== undefined && v.vidEnd !== v.vid ? `${v.vid}-${v.vidEnd}` : `${v.vid}`;
}

/** Adds a VLAN (or range) to a bridge port. Needs a bridge with vlan_filtering; EOPNOTSUPP on kernels without it. */
export function bridgeVlanAdd(ref: LinkRef, v: BridgeVlanSpec): void {
  const op = `failed to add VLAN ${vlanText(v)} to ${describeLink(ref)}`;
  withSocket(() => rtRequest(vlanMessage(RTM_SETLINK, linkIndex(ref), v, op), op), op);
}

/** Removes a VLAN (or range) from a bridge port. */
export function bridgeVlanDel(ref: LinkRef, v: BridgeVlanSpec): void {
  const op = `failed to delete VLAN ${vlanText(v)} from ${describeLink(ref)}`;
  withSocket(() => rtRequest(vlanMessage(RTM_DELLINK, linkIndex(ref), v, op), op), op);
}

export function buildBridgeVlanDump(): NlBuilder {
  return new NlBuilder(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP)
    .ifinfo(AF_BRIDGE, 0)
    .attrU32(IFLA_EXT_MASK, RTEXT_FILTER_BRVLAN);
}

/** Decodes the IFLA_AF_SPEC VLAN entries of an AF_BRIDGE link message payload (ranges expanded). */
export function decodeBridgeVlans(payload: Buffer): BridgeVlanEntry[] {
  const index = payload.readInt32LE(4);
  const spec = parseAttrs(payload, 16).get(IFLA_AF_SPEC);
  const out: BridgeVlanEntry[] = [];
  if (!spec) return out;
  let rangeStart: { flags: number; vid: number } | undefined;
  forEachAttr(spec, 0, (type, d) => {
    if (type !== IFLA_BRIDGE_VLAN_INFO || d.length < 4) return;
    const flags = d.readUInt16LE(0);
    const vid = d.readUInt16LE(2);
    const entry = (x: number) => ({
      index,
      vid: x,
      pvid: (flags & BRIDGE_VLAN_INFO_PVID) !== 0,
      untagged: (flags & BRIDGE_VLAN_INFO_UNTAGGED) !== 0,
    });
    if (flags & BRIDGE_VLAN_INFO_RANGE_BEGIN) {
      rangeStart = { flags, vid };
      return;
    }
    if (flags & BRIDGE_VLAN_INFO_RANGE_END && rangeStart) {
      for (let x = rangeStart.vid; x <= vid; x++) out.push(entry(x));
      rangeStart = undefined;
      return;
    }
    out.push(entry(vid));
  });
  return out;
}

/** VLAN entries of every bridge port (and bridge) in the namespace, or of one link. */
export function bridgeVlanList(ref?: LinkRef): BridgeVlanEntry[] {
  const op =
    ref === undefined ? 'failed to list bridge VLANs' : `failed to list VLANs of ${describeLink(ref)}`;
  return withSocket(() => {
    const want = ref === undefined ? undefined : linkIndex(ref);
    const out: BridgeVlanEntry[] = [];
    for (const m of rtDump(buildBridgeVlanDump(), op)) {
      if (m.type !== RTM_NEWLINK || m.payload.length < 16) continue;
      if (want !== undefined && m.payload.readInt32LE(4) !== want) continue;
      out.push(...decodeBridgeVlans(m.payload));
    }
    return out;
  }, op);
}
