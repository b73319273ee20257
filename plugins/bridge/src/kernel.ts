/**
 * The bridge plugin's view of the system: a thin adapter over @cnikit/netlink and @cnikit/firewall.
 * Everything is synchronous and acts in the calling thread's network namespace unless stated.
 */
import * as fw from '@cnikit/firewall';
import { type CIDR, type Family, formatCIDR, isGlobalUnicast, parseCIDR, parseIP } from '@cnikit/ip';
import * as nl from '@cnikit/netlink';
import type { Result } from '@cnikit/skel';
import { CniError, ErrorCode } from '@cnikit/skel';
import type { CheckEnv, LinkView, RouteView } from './check.ts';

export interface LinkInfo extends LinkView {
  operstate: string;
  mtu: number;
  up: boolean;
}

// ---------------------------------------------------------------------------------------------
// errors

export function isErrno(err: unknown, code: string): boolean {
  for (let e = err, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === code) return true;
  }
  return false;
}

function internal(msg: string, cause?: unknown): CniError {
  return new CniError(ErrorCode.Internal, msg, '', { cause });
}

// ---------------------------------------------------------------------------------------------
// namespaces

/** Run `fn` inside the namespace open on `fd`; `fn` gets a descriptor of the original namespace. */
export function inNetns<T>(fd: number, fn: (hostNsFd: number) => T): T {
  return nl.withNetns(`/proc/self/fd/${fd}`, (host) => fn(host.fd));
}

export function inNetnsPath<T>(path: string, fn: () => T): T {
  return nl.withNetns(path, () => fn());
}

/** Like sysctlTry, but only writes when the value differs (one read instead of write + read-back). */
export function sysctlEnsure(name: string, value: string): void {
  try {
    if (nl.sysctlGet(name).trim() === value) return;
  } catch {
    // try the write anyway
  }
  sysctlTry(name, value);
}

export function sysctlTry(name: string, value: string): void {
  try {
    nl.sysctlSet(name, value);
  } catch {
    // the reference ignores these errors
  }
}

/** `ip.EnableIP4Forward` / `EnableIP6Forward`: write 1 unless it already reads 1. */
export function enableForward(family: Family): void {
  const name = family === 4 ? 'net/ipv4/ip_forward' : 'net/ipv6/conf/all/forwarding';
  let cur = '';
  try {
    cur = nl.sysctlGet(name).trim();
  } catch {
    // write below
  }
  if (cur !== '1') nl.sysctlSet(name, '1');
}

// ---------------------------------------------------------------------------------------------
// links

function toInfo(l: nl.Link): LinkInfo {
  return {
    name: l.name,
    index: l.index,
    kind: l.kind ?? '',
    mac: l.mac,
    promisc: l.promisc,
    masterIndex: l.masterIndex ?? 0,
    peerIndex: l.peerIndex ?? l.linkIndex,
    operstate: l.operstate,
    mtu: l.mtu,
    up: l.up,
  };
}

/** The Go-style reason of a system error ('file exists'), else its message. */
export function reason(err: unknown): string {
  if (CniError.is(err)) return err.msg;
  const r = (err as { reason?: unknown } | null)?.reason;
  if (typeof r === 'string' && r) return r;
  return err instanceof Error ? err.message : String(err);
}

export function linkByName(name: string): LinkInfo | undefined {
  const l = nl.getLink(name);
  return l ? toInfo(l) : undefined;
}

export function createBridge(name: string, mtu: number, vlanFiltering: boolean): void {
  nl.createBridge({ name, mtu: mtu > 0 ? mtu : undefined, vlanFiltering: vlanFiltering ? true : undefined });
}

export function setMaster(link: string | number, master: string | number): void {
  nl.setMaster(link, master);
}

export function setPortFlags(link: string | number, flags: { hairpin?: boolean; isolated?: boolean }): void {
  nl.setBridgePortFlags(link, flags);
}

export function vlanList(name: string): number[] {
  const idx = nl.getLinkOrThrow(name).index;
  return nl
    .bridgeVlanList(name)
    .filter((v) => v.index === idx)
    .map((v) => v.vid);
}

export function vlanDel(name: string, vid: number): void {
  nl.bridgeVlanDel(name, { vid, master: true });
}

export function vlanAdd(name: string, vid: number, opts: { pvid: boolean; untagged: boolean }): void {
  nl.bridgeVlanAdd(name, { vid, pvid: opts.pvid, untagged: opts.untagged, master: true });
}

export function deleteLinkQuiet(name: string): void {
  try {
    nl.deleteLink(name);
  } catch (err) {
    if (!nl.isNotFoundError(err)) throw err;
  }
}

/**
 * `ip.SetupVeth` (creation part): a veth pair `name` ↔ random `veth…`, the peer placed directly into
 * the namespace open on `peerNsFd` (or here when undefined) in one RTM_NEWLINK. Retries on name
 * collisions. Returns the peer name.
 */
export function createVethWithRandomPeer(
  name: string,
  mtu: number,
  mac: string,
  peerNsFd: number | undefined,
): { peer: string; link: LinkInfo } {
  for (let i = 0; i < 10; i++) {
    const peer = nl.randomVethName();
    try {
      const link = nl.createVethPair({
        name,
        peerName: peer,
        peerNetnsFd: peerNsFd,
        mtu: mtu > 0 ? mtu : undefined,
        peerMtu: mtu > 0 ? mtu : undefined,
        mac: mac || undefined,
      });
      return { peer, link: toInfo(link) };
    } catch (err) {
      if (isErrno(err, 'EEXIST')) {
        // which name clashed? retry with a new peer name only if the peer exists
        let peerExists = false;
        if (peerNsFd === undefined) peerExists = nl.getLink(peer) !== undefined;
        else peerExists = nl.withNetns(`/proc/self/fd/${peerNsFd}`, () => nl.getLink(peer) !== undefined);
        if (peerExists) continue;
        throw internal(
          `container veth name (${JSON.stringify(name)}) peer provided (${JSON.stringify(peer)}) already exists`,
          err,
        );
      }
      throw internal(`failed to make veth pair: ${reason(err)}`, err);
    }
  }
  throw internal('failed to find a unique veth name');
}

/** `ip.DelLinkByNameAddr`: the link's global-unicast addresses, then delete it; [] when absent. */
export function delLinkByNameAddr(name: string): string[] {
  const l = nl.getLink(name);
  if (!l) return [];
  const addrs = nl
    .listAddrs({ link: name })
    .map((a) => parseCIDR(a.cidr))
    .filter((a): a is CIDR => a !== undefined && isGlobalUnicast(a.ip))
    .map(formatCIDR);
  try {
    nl.deleteLink(name);
  } catch (err) {
    if (!nl.isNotFoundError(err))
      throw internal(`failed to delete ${JSON.stringify(name)}: ${reason(err)}`, err);
  }
  return addrs;
}

export function listAddrs(name: string, family: Family): CIDR[] {
  return nl
    .listAddrs({ link: name, family })
    .map((a) => parseCIDR(a.cidr))
    .filter((a): a is CIDR => a !== undefined);
}

// ---------------------------------------------------------------------------------------------
// ipam.ConfigureIface (plugins.md §9.3), run inside the container namespace

export function configureIface(ifName: string, res: Result): void {
  const interfaces = res.interfaces ?? [];
  if (interfaces.length === 0) throw internal('no interfaces to configure');
  if (!nl.getLink(ifName)) throw internal(`failed to lookup ${JSON.stringify(ifName)}: Link not found`);
  let v4gw: string | undefined;
  let v6gw: string | undefined;
  let v6enabled = false;
  for (const ipc of res.ips ?? []) {
    if (ipc.interface === undefined) continue;
    const idx = ipc.interface;
    if (idx < 0 || idx >= interfaces.length || interfaces[idx]?.name !== ifName) {
      throw internal(
        `failed to add IP addr ${JSON.stringify(ipc)} to ${JSON.stringify(ifName)}: invalid interface index`,
      );
    }
    const addr = parseCIDR(ipc.address);
    if (!addr)
      throw internal(`failed to add IP addr ${ipc.address} to ${JSON.stringify(ifName)}: invalid address`);
    if (!v6enabled && addr.ip.family === 6) {
      for (const iface of ['lo', ifName]) {
        const key = `net/ipv6/conf/${iface}/disable_ipv6`;
        let value: string;
        try {
          value = nl.sysctlGet(key).trim();
        } catch {
          continue;
        }
        if (value === '0') continue;
        try {
          nl.sysctlSet(key, '0');
        } catch (err) {
          throw internal(
            `failed to enable IPv6 for interface ${JSON.stringify(iface)} (${key}=${value}): ${reason(err)}`,
            err,
          );
        }
      }
      try {
        nl.sysctlSet(`net/ipv6/conf/${ifName}/keep_addr_on_down`, '1');
      } catch (err) {
        throw internal(
          `failed to enable keep_addr_on_down for interface ${JSON.stringify(ifName)}: ${reason(err)}`,
          err,
        );
      }
      v6enabled = true;
    }
    try {
      nl.addAddr(ifName, formatCIDR(addr));
    } catch (err) {
      throw internal(
        `failed to add IP addr ${ipc.address} to ${JSON.stringify(ifName)}: ${reason(err)}`,
        err,
      );
    }
    const gw = ipc.gateway ? parseIP(ipc.gateway) : undefined;
    if (gw?.family === 4) v4gw ??= ipc.gateway;
    else if (gw?.family === 6) v6gw ??= ipc.gateway;
  }
  try {
    nl.setLinkUp(ifName);
  } catch (err) {
    throw internal(`failed to set ${JSON.stringify(ifName)} UP: ${reason(err)}`, err);
  }
  if (v6gw) {
    try {
      nl.waitDadSettled(ifName, 5000);
    } catch (err) {
      throw internal(`failed to settle addresses for ${JSON.stringify(ifName)}: ${reason(err)}`, err);
    }
  }
  for (const r of res.routes ?? []) {
    const dst = parseCIDR(r.dst);
    if (!dst) throw internal(`failed to add route '${r.dst}': invalid destination`);
    const gw = r.gw || (dst.ip.family === 4 ? v4gw : v6gw);
    try {
      nl.addRoute(
        { dst: formatCIDR(dst), gw, dev: ifName, priority: r.priority, table: r.table, scope: r.scope },
        { exclusive: false },
      );
    } catch (err) {
      throw internal(
        `failed to add route '${r.dst} via ${gw ?? '<nil>'} dev ${ifName} metric ${r.priority ?? 0} (Scope: ${r.scope ?? 0}, Table: ${r.table ?? 0})': ${reason(err)}`,
        err,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CHECK's view

export function checkEnv(netns: string): CheckEnv {
  const routes = (family: Family): RouteView[] =>
    nl.listRoutes({ family, table: 0 }).flatMap((r) => {
      const dst = formatCIDR(parseCIDR(r.dst)!);
      // an ECMP route is one route with several next hops: each hop counts as a route via its gateway
      const gws = r.multipath?.length ? r.multipath.map((h) => h.gw) : [r.gw];
      return gws.map((gw) => ({ family, dst, gw, table: r.table }));
    });
  return {
    hostLink: (name) => linkByName(name),
    containerLink: (name) => nl.withNetns(netns, () => linkByName(name)),
    containerAddrs: (name) =>
      nl.withNetns(netns, () =>
        nl.listAddrs({ link: name }).map((a) => ({ cidr: formatCIDR(parseCIDR(a.cidr)!) })),
      ),
    containerRoutes: (family) => nl.withNetns(netns, () => routes(family)),
  };
}

// ---------------------------------------------------------------------------------------------
// firewall

export function ipMasqSetup(
  backend: string | undefined,
  ips: string[],
  network: string,
  ifName: string,
  containerID: string,
): void {
  fw.setupIPMasq({ backend, ips, network, ifName, containerID });
}

export function ipMasqTeardown(ips: string[], network: string, ifName: string, containerID: string): void {
  fw.teardownIPMasq({ ips, network, ifName, containerID });
}

export function ipMasqGc(
  network: string,
  valid: ReadonlyArray<{ containerID: string; ifname: string }>,
): void {
  fw.gcIPMasq(
    network,
    valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
  );
}

/**
 * GC of spoof-check rules: a PREROUTING jump whose refID (`<containerID>-<ifName>`) is not a valid
 * attachment AND whose host interface no longer exists is stale whatever network it belonged to (the
 * refID carries no network name, so rules whose interface still exists are left alone).
 */
export function spoofCheckGc(validRefIDs: ReadonlySet<string>): void {
  const listing = fw.nftList(['chain', 'bridge', 'nat', 'PREROUTING']);
  const stale = new Set<string>();
  for (const r of listing.rules) {
    if (!r.comment?.startsWith('macspoofchk-')) continue;
    const refID = r.comment.slice('macspoofchk-'.length);
    if (validRefIDs.has(refID)) continue;
    const iface = iifnameOf(r.expr);
    if (iface !== undefined && nl.getLink(iface) !== undefined) continue;
    stale.add(refID);
  }
  const errors: string[] = [];
  for (const refID of stale) {
    try {
      fw.teardownSpoofCheck(refID);
    } catch (err) {
      errors.push(reason(err));
    }
  }
  if (errors.length) throw internal(errors.join('\n'));
}

function iifnameOf(expr: unknown[]): string | undefined {
  for (const e of expr) {
    const m = (e as { match?: { left?: { meta?: { key?: string } }; right?: unknown } }).match;
    if (m?.left?.meta?.key === 'iifname' && typeof m.right === 'string') return m.right;
  }
  return undefined;
}
