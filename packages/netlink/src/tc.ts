// Traffic control over rtnetlink (no `tc` process): TBF and ingress qdiscs, a u32 match-all filter that
// redirects to another device (mirred), and the qdisc dump that the bandwidth plugin's CHECK reads.
//
//   tcmsg { u8 family; u8 pad1; u16 pad2; i32 ifindex; u32 handle; u32 parent; u32 info }   20 bytes
//   tc_ratespec { u8 cell_log; u8 linklayer; u16 overhead; i16 cell_align; u16 mpu; u32 rate }   12 bytes
//   tc_tbf_qopt { tc_ratespec rate, peakrate; u32 limit; u32 buffer; u32 mtu }                  36 bytes
import { readFileSync } from 'node:fs';
import {
  type Attrs,
  attrStr,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
} from './nl.ts';
import { invalidArgument, rtDump, rtRequest } from './rtnl.ts';

export const RTM_NEWQDISC = 36;
export const RTM_DELQDISC = 37;
export const RTM_GETQDISC = 38;
export const RTM_NEWTFILTER = 44;

export const TCA_KIND = 1;
export const TCA_OPTIONS = 2;

export const TC_H_ROOT = 0xffffffff;
export const TC_H_INGRESS = 0xfffffff1;

export const TCA_TBF_PARMS = 1;
export const TCA_TBF_RATE64 = 4;
export const TCA_TBF_PRATE64 = 5;

export const TCA_U32_CLASSID = 1;
export const TCA_U32_SEL = 5;
export const TCA_U32_ACT = 7;
export const TC_U32_TERMINAL = 1;

export const TCA_ACT_KIND = 1;
export const TCA_ACT_OPTIONS = 2;
export const TCA_MIRRED_PARMS = 2;
export const TCA_EGRESS_REDIR = 1;
export const TC_ACT_OK = 0;
export const TC_ACT_STOLEN = 4;

export const ETH_P_ALL = 0x0003;

/** `major:minor` handle as the kernel stores it (tc's `1:` = makeHandle(1, 0) = 0x00010000). */
export function makeHandle(major: number, minor: number): number {
  return (((major & 0xffff) << 16) | (minor & 0xffff)) >>> 0;
}

/** A handle in tc's notation: `1:`, `ffff:`, `1:1`, `root`, `ingress`. */
export function formatHandle(h: number): string {
  if (h === TC_H_ROOT) return 'root';
  if (h === TC_H_INGRESS) return 'ingress';
  const major = (h >>> 16).toString(16);
  const minor = h & 0xffff;
  return minor ? `${major}:${minor.toString(16)}` : `${major}:`;
}

function tcmsg(b: NlBuilder, ifindex: number, handle: number, parent: number, info = 0): NlBuilder {
  return b.u8(0).u8(0).u16(0).i32(ifindex).u32(handle).u32(parent).u32(info);
}

function checkIndex(ifindex: number, op: string): void {
  if (!Number.isInteger(ifindex) || ifindex <= 0)
    throw invalidArgument(op, `invalid interface index ${ifindex}`);
}

function u32(v: number, what: string, op: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw invalidArgument(op, `invalid ${what} ${v}`);
  return v;
}

export interface TbfParams {
  /** Rate in bytes per second (uint64: TCA_TBF_RATE64 is added at 2^32 and above). */
  rate: number;
  /** Queue limit in bytes. */
  limit: number;
  /** Bucket size as transmission time in psched ticks (what the kernel stores and dumps). */
  buffer: number;
}

/** RTM_NEWQDISC for a root TBF with handle 1: (create, exclusive: an existing root TBF is EEXIST). */
export function buildTbfQdisc(ifindex: number, p: TbfParams, op = 'failed to create tbf qdisc'): NlBuilder {
  checkIndex(ifindex, op);
  if (!Number.isSafeInteger(p.rate) || p.rate <= 0) throw invalidArgument(op, `invalid rate ${p.rate}`);
  u32(p.limit, 'limit', op);
  u32(p.buffer, 'buffer', op);
  const b = tcmsg(
    new NlBuilder(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL),
    ifindex,
    makeHandle(1, 0),
    TC_H_ROOT,
  );
  b.attrStr(TCA_KIND, 'tbf');
  b.begin(TCA_OPTIONS);
  const q = Buffer.alloc(36);
  q.writeUInt32LE(p.rate >= 2 ** 32 ? 0xffffffff : p.rate, 8); // rate.rate (the 64-bit value follows)
  q.writeUInt32LE(p.limit, 24);
  q.writeUInt32LE(p.buffer, 28);
  b.attr(TCA_TBF_PARMS, q);
  if (p.rate >= 2 ** 32) {
    const r = Buffer.alloc(8);
    r.writeBigUInt64LE(BigInt(p.rate));
    b.attr(TCA_TBF_RATE64, r);
  }
  b.end();
  return b;
}

export function addTbfQdisc(ifindex: number, p: TbfParams): void {
  const op = `failed to create tbf qdisc on interface ${ifindex}`;
  rtRequest(buildTbfQdisc(ifindex, p, op), op);
}

/** RTM_NEWQDISC for the ingress qdisc (handle ffff:, parent ingress). */
export function buildIngressQdisc(ifindex: number, op = 'failed to create ingress qdisc'): NlBuilder {
  checkIndex(ifindex, op);
  const b = tcmsg(
    new NlBuilder(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL),
    ifindex,
    makeHandle(0xffff, 0),
    TC_H_INGRESS,
  );
  return b.attrStr(TCA_KIND, 'ingress');
}

export function addIngressQdisc(ifindex: number): void {
  const op = `failed to create ingress qdisc on interface ${ifindex}`;
  rtRequest(buildIngressQdisc(ifindex, op), op);
}

/**
 * RTM_NEWTFILTER: a u32 filter under the ingress qdisc (parent ffff:, prio 1, protocol all) whose match-all
 * selector (one zero key, terminal) sends every packet to `toIfindex`'s egress (mirred egress redirect,
 * stolen; a second, unreachable `pass` copy like Go's encoding), classid 1:1 — `tc filter add dev X parent ffff: protocol all prio 1 u32 match u32 0 0 classid 1:1
 * action mirred egress redirect dev Y`.
 */
export function buildRedirectFilter(
  ifindex: number,
  toIfindex: number,
  op = 'failed to add filter',
): NlBuilder {
  checkIndex(ifindex, op);
  checkIndex(toIfindex, op);
  const protoBE = ((ETH_P_ALL & 0xff) << 8) | (ETH_P_ALL >> 8); // htons
  const b = tcmsg(
    new NlBuilder(RTM_NEWTFILTER, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL),
    ifindex,
    0,
    makeHandle(0xffff, 0),
    makeHandle(1, protoBE),
  );
  b.attrStr(TCA_KIND, 'u32');
  b.begin(TCA_OPTIONS);
  b.attrU32(TCA_U32_CLASSID, makeHandle(1, 1));
  const sel = Buffer.alloc(16 + 16); // tc_u32_sel + one tc_u32_key, all zero but flags/nkeys
  sel.writeUInt8(TC_U32_TERMINAL, 0);
  sel.writeUInt8(1, 2);
  b.attr(TCA_U32_SEL, sel);
  b.begin(TCA_U32_ACT);
  // Two mirred actions, as Go's netlink encodes the reference's filter (RedirIndex, then the explicit action):
  // the first (stolen) does the redirect; the second (pass) is never reached. Same kernel state as the Go plugin.
  [TC_ACT_STOLEN, TC_ACT_OK].forEach((action, i) => {
    b.begin(i + 1);
    b.attrStr(TCA_ACT_KIND, 'mirred');
    b.begin(TCA_ACT_OPTIONS);
    const m = Buffer.alloc(28); // tc_mirred { tc_gen { index, capab, action, refcnt, bindcnt }, eaction, ifindex }
    m.writeInt32LE(action, 8);
    m.writeInt32LE(TCA_EGRESS_REDIR, 20);
    m.writeUInt32LE(toIfindex, 24);
    b.attr(TCA_MIRRED_PARMS, m);
    b.end().end();
  });
  b.end();
  b.end();
  return b;
}

export function addRedirectFilter(ifindex: number, toIfindex: number): void {
  const op = `failed to add redirect filter on interface ${ifindex}`;
  rtRequest(buildRedirectFilter(ifindex, toIfindex, op), op);
}

/** Deletes the qdisc at `parent` (TC_H_ROOT or TC_H_INGRESS) of a device. */
export function deleteQdisc(ifindex: number, parent: number): void {
  const op = `failed to delete ${formatHandle(parent)} qdisc of interface ${ifindex}`;
  checkIndex(ifindex, op);
  const handle = parent === TC_H_INGRESS ? makeHandle(0xffff, 0) : 0;
  rtRequest(tcmsg(new NlBuilder(RTM_DELQDISC, NLM_F_REQUEST | NLM_F_ACK), ifindex, handle, parent), op);
}

export interface Qdisc {
  ifindex: number;
  handle: number;
  parent: number;
  kind: string;
  /** TBF only: rate (bytes/s, RATE64 when present), limit (bytes), buffer (ticks). */
  tbf?: TbfParams;
}

export function decodeQdisc(m: NlMessage): Qdisc {
  const p = m.payload;
  const a: Attrs = parseAttrs(p, 20);
  const q: Qdisc = {
    ifindex: p.readInt32LE(4),
    handle: p.readUInt32LE(8),
    parent: p.readUInt32LE(12),
    kind: attrStr(a, TCA_KIND) ?? '',
  };
  const opts = a.get(TCA_OPTIONS);
  if (q.kind === 'tbf' && opts) {
    const o = parseAttrs(opts);
    const parms = o.get(TCA_TBF_PARMS);
    if (parms && parms.length >= 36) {
      const r64 = o.get(TCA_TBF_RATE64);
      q.tbf = {
        rate: r64 && r64.length >= 8 ? Number(r64.readBigUInt64LE(0)) : parms.readUInt32LE(8),
        limit: parms.readUInt32LE(24),
        buffer: parms.readUInt32LE(28),
      };
    }
  }
  return q;
}

/** The qdiscs of one device, in the kernel's dump order (root first, then ingress). */
export function listQdiscs(ifindex: number): Qdisc[] {
  const op = `failed to list qdiscs of interface ${ifindex}`;
  checkIndex(ifindex, op);
  const b = tcmsg(new NlBuilder(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP), ifindex, 0, 0);
  return rtDump(b, op)
    .filter((m) => m.type === RTM_NEWQDISC)
    .map(decodeQdisc)
    .filter((q) => q.ifindex === ifindex);
}

/**
 * Microseconds → psched ticks factor from /proc/net/psched (`t2us us2t clock_res hz`, hex), the way Go's
 * vishvananda/netlink computes it (so derived TBF buffers match the Go plugins'); 0 when unreadable.
 */
export function tickInUsec(psched?: string): number {
  let text = psched;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/net/psched', 'latin1');
    } catch {
      return 0;
    }
  }
  const parts = text.trim().split(' ');
  if (parts.length < 4) return 0;
  const v = parts.slice(0, 4).map((x) => Number.parseInt(x, 16));
  if (v.some((x) => !Number.isFinite(x))) return 0;
  let [t2us, us2t, clockRes] = v as [number, number, number];
  if (clockRes === 1e9) t2us = us2t;
  return (t2us / us2t) * (clockRes / 1e6);
}
