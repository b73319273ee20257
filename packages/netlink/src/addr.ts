// Addresses: list, add (optionally without DAD), delete, and waiting for IPv6 duplicate address detection.
import { formatIp, parseCidr } from './ipaddr.ts';
import { describeLink, getLink, type LinkRef, linkIndex } from './link.ts';
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  attrStr,
  attrU32,
  IFA_ADDRESS,
  IFA_BROADCAST,
  IFA_CACHEINFO,
  IFA_F_DADFAILED,
  IFA_F_DEPRECATED,
  IFA_F_NODAD,
  IFA_F_PERMANENT,
  IFA_F_TENTATIVE,
  IFA_FLAGS,
  IFA_LABEL,
  IFA_LOCAL,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  RTM_DELADDR,
  RTM_GETADDR,
  RTM_NEWADDR,
} from './nl.ts';
import { invalidArgument, NetlinkError, rtDump, rtRequest, withSocket } from './rtnl.ts';

export interface Addr {
  /** ifindex of the link. */
  linkIndex: number;
  family: 4 | 6;
  /** The address ('10.1.2.3', '2001:db8::1'). */
  ip: string;
  prefix: number;
  /** `${ip}/${prefix}` */
  cidr: string;
  /** IFA_ADDRESS when it differs from the local address (point-to-point peer). */
  peer: string | undefined;
  broadcast: string | undefined;
  label: string | undefined;
  /** RT_SCOPE_* (0 universe/global, 253 link, 254 host). */
  scope: number;
  /** IFA_F_* (from IFA_FLAGS when present, which carries the bits above 0xff). */
  flags: number;
  tentative: boolean;
  dadFailed: boolean;
  permanent: boolean;
  deprecated: boolean;
  /** Seconds; 0xffffffff = forever. */
  validLifetime: number | undefined;
  preferredLifetime: number | undefined;
}

export type FamilyFilter = 4 | 6 | undefined;

function familyNumber(f: FamilyFilter): number {
  return f === 4 ? AF_INET : f === 6 ? AF_INET6 : AF_UNSPEC;
}

export function decodeAddr(m: NlMessage): Addr | undefined {
  const p = m.payload;
  if (p.length < 8) return undefined;
  const fam = p.readUInt8(0);
  if (fam !== AF_INET && fam !== AF_INET6) return undefined;
  const prefix = p.readUInt8(1);
  const a = parseAttrs(p, 8);
  const flags = attrU32(a, IFA_FLAGS) ?? p.readUInt8(2);
  const local = a.get(IFA_LOCAL);
  const address = a.get(IFA_ADDRESS);
  const ipb = local ?? address;
  if (!ipb) return undefined;
  const ip = formatIp(ipb);
  const peer = local && address && !local.equals(address) ? formatIp(address) : undefined;
  const brd = a.get(IFA_BROADCAST);
  const ci = a.get(IFA_CACHEINFO);
  return {
    linkIndex: p.readUInt32LE(4),
    family: fam === AF_INET ? 4 : 6,
    ip,
    prefix,
    cidr: `${ip}/${prefix}`,
    peer,
    broadcast: brd ? formatIp(brd) : undefined,
    label: attrStr(a, IFA_LABEL),
    scope: p.readUInt8(3),
    flags,
    tentative: (flags & IFA_F_TENTATIVE) !== 0,
    dadFailed: (flags & IFA_F_DADFAILED) !== 0,
    permanent: (flags & IFA_F_PERMANENT) !== 0,
    deprecated: (flags & IFA_F_DEPRECATED) !== 0,
    preferredLifetime: ci && ci.length >= 8 ? ci.readUInt32LE(0) : undefined,
    validLifetime: ci && ci.length >= 8 ? ci.readUInt32LE(4) : undefined,
  };
}

export interface ListAddrsOptions {
  link?: LinkRef;
  family?: 4 | 6;
}

/** Addresses in the current namespace, optionally of one link and/or one family. */
export function listAddrs(o: ListAddrsOptions = {}): Addr[] {
  const op =
    o.link === undefined ? 'failed to list addresses' : `failed to list addresses of ${describeLink(o.link)}`;
  return withSocket(() => {
    const idx = o.link === undefined ? undefined : linkIndex(o.link);
    const b = new NlBuilder(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP).ifaddr(
      familyNumber(o.family),
      0,
      0,
      0,
      0,
    );
    const out: Addr[] = [];
    for (const m of rtDump(b, op)) {
      if (m.type !== RTM_NEWADDR) continue;
      const a = decodeAddr(m);
      if (!a) continue;
      if (idx !== undefined && a.linkIndex !== idx) continue;
      if (o.family !== undefined && a.family !== o.family) continue;
      out.push(a);
    }
    return out;
  }, op);
}

export interface AddAddrOptions {
  /** IFA_F_NODAD: skip IPv6 duplicate address detection (no tentative phase). */
  noDad?: boolean;
  /**
   * IPv4 broadcast: by default it is computed (all host bits set) for prefixes shorter than /31, like the
   * Go netlink library; false sends none; a string sends that address.
   */
  broadcast?: string | false;
  label?: string;
  /** RT_SCOPE_* number (default 0, universe). */
  scope?: number;
  /** Extra IFA_F_* flags. */
  flags?: number;
}

function parseAddrCidr(cidr: string, op: string) {
  const c = typeof cidr === 'string' ? parseCidr(cidr) : undefined;
  if (!c) throw invalidArgument(op, `invalid CIDR address: ${cidr}`);
  return c;
}

/** The RTM_NEWADDR message addAddr sends (exported for byte-level tests). */
export function buildAddAddr(
  index: number,
  cidr: string,
  o: AddAddrOptions = {},
  op = 'add address',
): NlBuilder {
  const c = parseAddrCidr(cidr, op);
  let flags = o.flags ?? 0;
  if (o.noDad) flags |= IFA_F_NODAD;
  const b = new NlBuilder(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL).ifaddr(
    c.family === 4 ? AF_INET : AF_INET6,
    c.prefix,
    flags & 0xff,
    o.scope ?? 0,
    index,
  );
  b.attr(IFA_LOCAL, c.bytes).attr(IFA_ADDRESS, c.bytes);
  if (c.family === 4 && o.broadcast !== false) {
    if (typeof o.broadcast === 'string') {
      const bc = parseCidr(`${o.broadcast}/32`);
      if (!bc) throw invalidArgument(op, `invalid broadcast address: ${o.broadcast}`);
      b.attr(IFA_BROADCAST, bc.bytes);
    } else if (c.prefix < 31) b.attr(IFA_BROADCAST, c.broadcast);
  }
  if (o.label !== undefined) b.attrStr(IFA_LABEL, o.label);
  if (flags > 0xff) b.attrU32(IFA_FLAGS, flags);
  return b;
}

/** Adds `cidr` ('10.1.2.3/24') to a link. EEXIST when that address is already there. */
export function addAddr(ref: LinkRef, cidr: string, o: AddAddrOptions = {}): void {
  const op = `failed to add address ${cidr} to ${describeLink(ref)}`;
  withSocket(() => rtRequest(buildAddAddr(linkIndex(ref), cidr, o, op), op), op);
}

export function buildDelAddr(index: number, cidr: string, op = 'delete address'): NlBuilder {
  const c = parseAddrCidr(cidr, op);
  return new NlBuilder(RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK)
    .ifaddr(c.family === 4 ? AF_INET : AF_INET6, c.prefix, 0, 0, index)
    .attr(IFA_LOCAL, c.bytes)
    .attr(IFA_ADDRESS, c.bytes);
}

/** Removes `cidr` from a link. EADDRNOTAVAIL when it is not there. */
export function delAddr(ref: LinkRef, cidr: string): void {
  const op = `failed to delete address ${cidr} from ${describeLink(ref)}`;
  withSocket(() => rtRequest(buildDelAddr(linkIndex(ref), cidr, op), op), op);
}

/** Blocks the thread for `ms` milliseconds (synchronous; used between DAD polls). */
function sleepSync(ms: number): void {
  if (ms <= 0) return;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Waits until no IPv6 address of the link is tentative (polling every 50 ms), like Go's SettleAddresses:
 * an address in DADFAILED state is an error; when `timeoutMs` passes, it is an error only if the link is
 * operationally up (otherwise DAD cannot finish and that is not our failure).
 */
export function waitDadSettled(ref: LinkRef, timeoutMs: number, pollMs = 50): void {
  const name = describeLink(ref);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const addrs = listAddrs({ link: ref, family: 6 });
    const failed = addrs.find((a) => a.dadFailed);
    if (failed)
      throw new NetlinkError(99, '', {
        reason: `link ${name} has address ${failed.cidr} in DADFAILED state`,
      });
    if (!addrs.some((a) => a.tentative)) return;
    if (Date.now() >= deadline) {
      const l = getLink(ref);
      if (l && l.operstate === 'up')
        throw new NetlinkError(110, '', {
          reason: `link ${name} still has tentative addresses after ${Math.round(timeoutMs / 1000)} seconds`,
        });
      return;
    }
    sleepSync(Math.min(pollMs, Math.max(1, deadline - Date.now())));
  }
}
