// Routes: add / replace / delete / list, IPv4 and IPv6, with table, metric, scope, preferred source and
// RTA_METRICS (MTU, ADVMSS).
import { formatIp, parseCidr, parseIp } from './ipaddr.ts';
import { describeLink, type LinkRef, linkIndex } from './link.ts';
import {
  AF_INET,
  AF_INET6,
  attrU32,
  forEachAttr,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_REPLACE,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  RT_SCOPE_HOST,
  RT_SCOPE_LINK,
  RT_SCOPE_NOWHERE,
  RT_SCOPE_SITE,
  RT_SCOPE_UNIVERSE,
  RT_TABLE_MAIN,
  RTA_DST,
  RTA_GATEWAY,
  RTA_METRICS,
  RTA_MULTIPATH,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_TABLE,
  RTAX_ADVMSS,
  RTAX_MTU,
  RTM_DELROUTE,
  RTM_F_CLONED,
  RTM_GETROUTE,
  RTM_NEWROUTE,
  RTN_UNICAST,
  RTPROT_BOOT,
  rtmsgDump,
} from './nl.ts';
import { invalidArgument, rtDump, rtGet, rtRequest, withSocket } from './rtnl.ts';

export type ScopeName = 'universe' | 'global' | 'site' | 'link' | 'host' | 'nowhere';
const SCOPES: Record<ScopeName, number> = {
  universe: RT_SCOPE_UNIVERSE,
  global: RT_SCOPE_UNIVERSE,
  site: RT_SCOPE_SITE,
  link: RT_SCOPE_LINK,
  host: RT_SCOPE_HOST,
  nowhere: RT_SCOPE_NOWHERE,
};

export interface RouteSpec {
  /** Destination CIDR ('10.0.0.0/8', '::/0'); 'default' / 'default6' are accepted for 0.0.0.0/0 / ::/0. */
  dst: string;
  gw?: string;
  dev?: LinkRef;
  /** RT_SCOPE_* number or name; default universe (like the Go netlink library, not `ip route`'s guess). */
  scope?: number | ScopeName;
  /** Routing table id (default main, 254). Ids >= 256 go in RTA_TABLE. */
  table?: number;
  /** Metric (RTA_PRIORITY). */
  priority?: number;
  /** Preferred source address (RTA_PREFSRC). */
  src?: string;
  /** RTAX_MTU */
  mtu?: number;
  /** RTAX_ADVMSS */
  advmss?: number;
  /** RTPROT_* (default boot, 3, like iproute2 and Go). */
  protocol?: number;
  /** RTN_* (default unicast). */
  type?: number;
  /** RTNH_F_ONLINK: the gateway is on the link even without a route to it (`ip route … onlink`). */
  onlink?: boolean;
}

export interface NextHop {
  gw: string | undefined;
  linkIndex: number;
  /** rtnh_hops + 1 */
  weight: number;
}

export interface Route {
  family: 4 | 6;
  /** Destination CIDR, '0.0.0.0/0' / '::/0' for a default route. */
  dst: string;
  gw: string | undefined;
  /** Output interface (RTA_OIF), undefined for multipath routes. */
  linkIndex: number | undefined;
  scope: number;
  table: number;
  /** RTA_PRIORITY (metric); undefined when the kernel sent none (IPv4 metric 0). */
  priority: number | undefined;
  /** RTA_PREFSRC */
  src: string | undefined;
  protocol: number;
  type: number;
  flags: number;
  mtu: number | undefined;
  advmss: number | undefined;
  multipath: NextHop[] | undefined;
}

interface ParsedSpec {
  family: 4 | 6;
  dst: Buffer;
  dstLen: number;
  gw?: Buffer;
  src?: Buffer;
}

function parseSpec(r: RouteSpec, op: string): ParsedSpec {
  const dstText = r.dst === 'default' ? '0.0.0.0/0' : r.dst === 'default6' ? '::/0' : r.dst;
  const d = typeof dstText === 'string' ? parseCidr(dstText) : undefined;
  if (!d) throw invalidArgument(op, `invalid route destination: ${r.dst}`);
  const out: ParsedSpec = { family: d.family, dst: d.network, dstLen: d.prefix };
  if (r.gw !== undefined) {
    const g = parseIp(r.gw);
    if (!g) throw invalidArgument(op, `invalid gateway: ${r.gw}`);
    if (g.family !== d.family) throw invalidArgument(op, `gateway ${r.gw} is not in the family of ${r.dst}`);
    out.gw = g.bytes;
  }
  if (r.src !== undefined) {
    const s = parseIp(r.src);
    if (!s) throw invalidArgument(op, `invalid source address: ${r.src}`);
    if (s.family !== d.family) throw invalidArgument(op, `source ${r.src} is not in the family of ${r.dst}`);
    out.src = s.bytes;
  }
  for (const [k, v] of [
    ['table', r.table],
    ['priority', r.priority],
    ['mtu', r.mtu],
    ['advmss', r.advmss],
  ] as const)
    if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > 0xffffffff))
      throw invalidArgument(op, `invalid route ${k}: ${v}`);
  return out;
}

function scopeNumber(s: number | ScopeName | undefined, dflt: number, op: string): number {
  if (s === undefined) return dflt;
  if (typeof s === 'number') {
    if (!Number.isInteger(s) || s < 0 || s > 255) throw invalidArgument(op, `invalid route scope ${s}`);
    return s;
  }
  const n = SCOPES[s];
  if (n === undefined) throw invalidArgument(op, `invalid route scope ${JSON.stringify(s)}`);
  return n;
}

function describeRoute(r: RouteSpec): string {
  let s = r.dst;
  if (r.gw) s += ` via ${r.gw}`;
  if (r.dev !== undefined) s += ` dev ${describeLink(r.dev)}`;
  if (r.table !== undefined) s += ` table ${r.table}`;
  if (r.priority !== undefined) s += ` metric ${r.priority}`;
  return s;
}

type Mode = 'add' | 'append' | 'replace' | 'del';

/** The RTM_NEWROUTE / RTM_DELROUTE message for a route (exported for byte-level tests). */
export function buildRoute(
  mode: Mode,
  r: RouteSpec,
  oif: number | undefined,
  op = `${mode} route`,
): NlBuilder {
  const p = parseSpec(r, op);
  const table = r.table ?? RT_TABLE_MAIN;
  const del = mode === 'del';
  const flags =
    NLM_F_REQUEST |
    NLM_F_ACK |
    (mode === 'add'
      ? NLM_F_CREATE | NLM_F_EXCL
      : mode === 'append'
        ? NLM_F_CREATE
        : mode === 'replace'
          ? NLM_F_CREATE | NLM_F_REPLACE
          : 0);
  const b = new NlBuilder(del ? RTM_DELROUTE : RTM_NEWROUTE, flags).rtmsg({
    family: p.family === 4 ? AF_INET : AF_INET6,
    dstLen: p.dstLen,
    table: table < 256 ? table : 0,
    protocol: r.protocol ?? (del ? 0 : RTPROT_BOOT),
    scope: scopeNumber(r.scope, del ? RT_SCOPE_NOWHERE : RT_SCOPE_UNIVERSE, op),
    type: r.type ?? (del ? 0 : RTN_UNICAST),
    flags: r.onlink ? RTNH_F_ONLINK : 0,
  });
  if (p.dstLen > 0) b.attr(RTA_DST, p.dst);
  if (p.gw) b.attr(RTA_GATEWAY, p.gw);
  if (r.priority !== undefined) b.attrU32(RTA_PRIORITY, r.priority);
  if (p.src) b.attr(RTA_PREFSRC, p.src);
  if (oif !== undefined) b.attrU32(RTA_OIF, oif);
  if (table >= 256) b.attrU32(RTA_TABLE, table);
  if (r.mtu !== undefined || r.advmss !== undefined) {
    b.begin(RTA_METRICS);
    if (r.mtu !== undefined) b.attrU32(RTAX_MTU, r.mtu);
    if (r.advmss !== undefined) b.attrU32(RTAX_ADVMSS, r.advmss);
    b.end();
  }
  return b;
}

function modify(mode: Mode, r: RouteSpec, verb: string): void {
  const op = `failed to ${verb} route ${describeRoute(r)}`;
  withSocket(
    () => rtRequest(buildRoute(mode, r, r.dev === undefined ? undefined : linkIndex(r.dev), op), op),
    op,
  );
}

export interface AddRouteOptions {
  /**
   * true (default): NLM_F_EXCL, EEXIST when the route exists. false: create without exclusivity (Go's
   * RouteAddEcmp; IPv6 routes to the same destination via different gateways become ECMP next hops).
   */
  exclusive?: boolean;
}

export function addRoute(r: RouteSpec, o: AddRouteOptions = {}): void {
  modify(o.exclusive === false ? 'append' : 'add', r, 'add');
}

/** Adds or replaces the route with the same destination/table/metric (NLM_F_CREATE|NLM_F_REPLACE). */
export function replaceRoute(r: RouteSpec): void {
  modify('replace', r, 'replace');
}

/** Deletes a matching route (unset fields match anything). ESRCH/ENOENT when none matches. */
export function delRoute(r: RouteSpec): void {
  modify('del', r, 'delete');
}

/** rtm_flags / rtnh_flags: the gateway is on-link. */
export const RTNH_F_ONLINK = 4;

function zeroCidr(family: 4 | 6): string {
  return family === 4 ? '0.0.0.0/0' : '::/0';
}

export function decodeRoute(m: NlMessage): Route | undefined {
  const p = m.payload;
  if (p.length < 12) return undefined;
  const fam = p.readUInt8(0);
  if (fam !== AF_INET && fam !== AF_INET6) return undefined;
  const family: 4 | 6 = fam === AF_INET ? 4 : 6;
  const dstLen = p.readUInt8(1);
  const a = parseAttrs(p, 12);
  const dst = a.get(RTA_DST);
  const gw = a.get(RTA_GATEWAY);
  const src = a.get(RTA_PREFSRC);
  const metrics = a.get(RTA_METRICS);
  const mx = metrics ? parseAttrs(metrics) : undefined;
  let multipath: NextHop[] | undefined;
  const mp = a.get(RTA_MULTIPATH);
  if (mp) {
    multipath = [];
    let off = 0;
    while (off + 8 <= mp.length) {
      const len = mp.readUInt16LE(off);
      if (len < 8 || off + len > mp.length) break;
      let hopGw: string | undefined;
      forEachAttr(mp.subarray(off + 8, off + len), 0, (t, d) => {
        if (t === RTA_GATEWAY) hopGw = formatIp(d);
      });
      multipath.push({ gw: hopGw, linkIndex: mp.readInt32LE(off + 4), weight: mp.readUInt8(off + 3) + 1 });
      off += (len + 3) & ~3;
    }
  }
  return {
    family,
    dst: dst ? `${formatIp(dst)}/${dstLen}` : zeroCidr(family),
    gw: gw ? formatIp(gw) : undefined,
    linkIndex: attrU32(a, RTA_OIF),
    scope: p.readUInt8(6),
    table: attrU32(a, RTA_TABLE) ?? p.readUInt8(4),
    priority: attrU32(a, RTA_PRIORITY),
    src: src ? formatIp(src) : undefined,
    protocol: p.readUInt8(5),
    type: p.readUInt8(7),
    flags: p.readUInt32LE(8),
    mtu: mx ? attrU32(mx, RTAX_MTU) : undefined,
    advmss: mx ? attrU32(mx, RTAX_ADVMSS) : undefined,
    multipath,
  };
}

/** A listed route as a spec that adds it again (in `table`, default its own) or deletes exactly it. */
export function routeSpec(r: Route, table = r.table): RouteSpec {
  return {
    dst: r.dst,
    gw: r.gw,
    dev: r.linkIndex,
    scope: r.scope,
    table,
    priority: r.priority,
    src: r.src,
    protocol: r.protocol,
    type: r.type,
    mtu: r.mtu,
    advmss: r.advmss,
  };
}

export interface ListRoutesOptions {
  family?: 4 | 6;
  /** Table id; default main (254); 0 = every table. */
  table?: number;
  /** Only routes whose output interface (or one of whose next hops) is this link. */
  link?: LinkRef;
}

/** Routes in the current namespace (cloned/cache entries are skipped). */
export function listRoutes(o: ListRoutesOptions = {}): Route[] {
  const op = 'failed to list routes';
  return withSocket(() => {
    const idx = o.link === undefined ? undefined : linkIndex(o.link);
    const table = o.table ?? RT_TABLE_MAIN;
    const b = rtmsgDump(RTM_GETROUTE, o.family);
    const out: Route[] = [];
    for (const m of rtDump(b, op)) {
      if (m.type !== RTM_NEWROUTE) continue;
      const r = decodeRoute(m);
      if (!r) continue;
      if (r.flags & RTM_F_CLONED) continue;
      if (o.family !== undefined && r.family !== o.family) continue;
      if (table !== 0 && r.table !== table) continue;
      if (idx !== undefined && r.linkIndex !== idx && !r.multipath?.some((h) => h.linkIndex === idx))
        continue;
      out.push(r);
    }
    return out;
  }, op);
}

/**
 * The route the kernel would use to reach `ip` (RTM_GETROUTE for one destination, like `ip route get` and Go's
 * netlink.RouteGet); undefined when the destination is unreachable.
 */
export function routeGet(ip: string): Route | undefined {
  const op = `failed to get the route to ${ip}`;
  const addr = parseIp(ip);
  if (!addr) throw invalidArgument(op, `invalid IP address ${JSON.stringify(ip)}`);
  const b = new NlBuilder(RTM_GETROUTE, NLM_F_REQUEST)
    .rtmsg({
      family: addr.family === 4 ? AF_INET : AF_INET6,
      dstLen: addr.bytes.length * 8,
      table: 0,
      protocol: 0,
      scope: 0,
      type: 0,
    })
    .attr(RTA_DST, addr.bytes);
  try {
    return decodeRoute(rtGet(b, op));
  } catch (err) {
    const errno = (err as { errno?: number }).errno;
    // ENETUNREACH / EHOSTUNREACH: no route
    if (errno === 101 || errno === 113) return undefined;
    throw err;
  }
}
