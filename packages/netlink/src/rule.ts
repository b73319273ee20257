// Policy routing rules (RTM_NEWRULE / RTM_DELRULE / RTM_GETRULE, struct fib_rule_hdr), IPv4 and IPv6: the subset
// the source-based-routing and VRF plugins need (source/destination prefix, table, priority, output/input interface).
import { formatIp, parseCidr } from './ipaddr.ts';
import {
  AF_INET,
  AF_INET6,
  attrU32,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  RT_SCOPE_UNIVERSE,
  RTPROT_BOOT,
  rtmsgDump,
} from './nl.ts';
import { invalidArgument, rtDump, rtRequest, withSocket } from './rtnl.ts';

export const RTM_NEWRULE = 32;
export const RTM_DELRULE = 33;
export const RTM_GETRULE = 34;
const FRA_DST = 1;
const FRA_SRC = 2;
const FRA_IIFNAME = 3;
const FRA_PRIORITY = 6;
const FRA_TABLE = 15;
const FRA_OIFNAME = 17;
const FRA_PROTOCOL = 21;
/** FR_ACT_TO_TBL: the rule's action is "lookup <table>". */
const FR_ACT_TO_TBL = 1;

export interface RuleSpec {
  family?: 4 | 6;
  /** Source prefix ('10.0.0.5/32'); sets the family. */
  src?: string;
  /** Destination prefix. */
  dst?: string;
  /** Routing table to look up. */
  table: number;
  /** Rule priority (preference); the kernel picks one below the first existing rule when unset. */
  priority?: number;
  iifName?: string;
  oifName?: string;
}

export interface Rule {
  family: 4 | 6;
  src: string | undefined;
  dst: string | undefined;
  table: number;
  priority: number | undefined;
  iifName: string | undefined;
  oifName: string | undefined;
  action: number;
  protocol: number | undefined;
}

/** The RTM_NEWRULE / RTM_DELRULE message (exported for byte-level tests). */
export function buildRule(del: boolean, r: RuleSpec, op: string): NlBuilder {
  const src = r.src === undefined ? undefined : parseCidr(r.src);
  if (r.src !== undefined && !src) throw invalidArgument(op, `invalid rule source: ${r.src}`);
  const dst = r.dst === undefined ? undefined : parseCidr(r.dst);
  if (r.dst !== undefined && !dst) throw invalidArgument(op, `invalid rule destination: ${r.dst}`);
  const family = r.family ?? src?.family ?? dst?.family ?? 4;
  for (const p of [src, dst])
    if (p && p.family !== family) throw invalidArgument(op, 'rule source and destination families differ');
  if (!Number.isInteger(r.table) || r.table < 0 || r.table > 0xffffffff)
    throw invalidArgument(op, `invalid rule table: ${r.table}`);
  if (
    r.priority !== undefined &&
    (!Number.isInteger(r.priority) || r.priority < 0 || r.priority > 0xffffffff)
  )
    throw invalidArgument(op, `invalid rule priority: ${r.priority}`);
  // struct fib_rule_hdr has the layout of struct rtmsg: family, dst_len, src_len, tos, table, res1, res2, action.
  const b = new NlBuilder(
    del ? RTM_DELRULE : RTM_NEWRULE,
    NLM_F_REQUEST | NLM_F_ACK | (del ? 0 : NLM_F_CREATE | NLM_F_EXCL),
  ).rtmsg({
    family: family === 4 ? AF_INET : AF_INET6,
    dstLen: dst?.prefix ?? 0,
    srcLen: src?.prefix ?? 0,
    table: r.table < 256 ? r.table : 0,
    protocol: del ? 0 : RTPROT_BOOT,
    scope: RT_SCOPE_UNIVERSE,
    type: del ? 0 : FR_ACT_TO_TBL, // the action byte: lookup
  });
  if (dst) b.attr(FRA_DST, dst.network);
  if (src) b.attr(FRA_SRC, src.network);
  if (r.priority !== undefined) b.attrU32(FRA_PRIORITY, r.priority);
  if (r.iifName !== undefined) b.attrStr(FRA_IIFNAME, r.iifName);
  if (r.oifName !== undefined) b.attrStr(FRA_OIFNAME, r.oifName);
  b.attrU32(FRA_TABLE, r.table);
  return b;
}

function describeRule(r: RuleSpec): string {
  let s = '';
  if (r.src) s += `from ${r.src} `;
  if (r.dst) s += `to ${r.dst} `;
  if (r.iifName) s += `iif ${r.iifName} `;
  if (r.oifName) s += `oif ${r.oifName} `;
  return `${s}lookup ${r.table}${r.priority === undefined ? '' : ` pref ${r.priority}`}`;
}

/** Adds a rule (EEXIST when an identical one exists). */
export function addRule(r: RuleSpec): void {
  const op = `failed to add rule ${describeRule(r)}`;
  rtRequest(buildRule(false, r, op), op);
}

/** Deletes the first rule matching the spec (unset fields match anything). ENOENT when none matches. */
export function delRule(r: RuleSpec): void {
  const op = `failed to delete rule ${describeRule(r)}`;
  rtRequest(buildRule(true, r, op), op);
}

export function decodeRule(m: NlMessage): Rule | undefined {
  const p = m.payload;
  if (p.length < 12) return undefined;
  const fam = p.readUInt8(0);
  if (fam !== AF_INET && fam !== AF_INET6) return undefined;
  const a = parseAttrs(p, 12);
  const prefix = (type: number, len: number) => {
    const d = a.get(type);
    return d ? `${formatIp(d)}/${len}` : undefined;
  };
  const str = (type: number) => {
    const d = a.get(type);
    return d ? d.toString('utf8').replace(/\0+$/, '') : undefined;
  };
  const proto = a.get(FRA_PROTOCOL);
  return {
    family: fam === AF_INET ? 4 : 6,
    dst: prefix(FRA_DST, p.readUInt8(1)),
    src: prefix(FRA_SRC, p.readUInt8(2)),
    table: attrU32(a, FRA_TABLE) ?? p.readUInt8(4),
    priority: attrU32(a, FRA_PRIORITY),
    iifName: str(FRA_IIFNAME),
    oifName: str(FRA_OIFNAME),
    action: p.readUInt8(7),
    protocol: proto ? proto.readUInt8(0) : undefined,
  };
}

/** The rules of the current namespace (both families unless one is given), in the kernel's order. */
export function listRules(o: { family?: 4 | 6; table?: number } = {}): Rule[] {
  const op = 'failed to list rules';
  return withSocket(() => {
    const b = rtmsgDump(RTM_GETRULE, o.family);
    const out: Rule[] = [];
    for (const m of rtDump(b, op)) {
      if (m.type !== RTM_NEWRULE) continue;
      const r = decodeRule(m);
      if (!r) continue;
      if (o.table !== undefined && r.table !== o.table) continue;
      out.push(r);
    }
    return out;
  }, op);
}
