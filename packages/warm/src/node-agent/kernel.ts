/**
 * The node agent's kernel side, all through @cnikit/netlink (no `ip` processes): its routes carry a route protocol
 * number of its own (RTPROT_CNIKIT) and are the only routes it ever replaces or deletes; its VXLAN device
 * (`cnikit.<vni>`) and that device's neighbour and forwarding-database entries are its own too. Reconciling compares
 * the kernel's state with the plan and changes only what differs: nothing is flushed, a route that is right is left
 * alone (no packet of an established flow is lost when the agent restarts).
 */
import { createHash } from 'node:crypto';
import { canonicalIP, type Family, familyOf } from '@cnikit/ip';
import {
  addAddr,
  createVxlan,
  delAddr,
  deleteLink,
  delFdb,
  delNeighbour,
  delRoute,
  getVxlan,
  listAddrs,
  listLinks,
  listNeighbours,
  listRoutes,
  NUD_PERMANENT,
  replaceFdb,
  replaceNeighbour,
  replaceRoute,
  routeSpec,
  setLinkUp,
  setMtu,
} from '@cnikit/netlink';
import { withSocket } from '@cnikit/netlink/wire';
import { gatewayOf, type Plan, type Underlay } from './plan.ts';

/** The route protocol of the agent's routes (`ip route show proto 157`); not one iproute2's rt_protos names. */
export const RTPROT_CNIKIT = 157;
const RT_TABLE_MAIN = 254;
const RTNH_F_ONLINK = 4;
/** VXLAN encapsulation overhead: outer IPv4 (20) or IPv6 (40) + UDP 8 + VXLAN 8 + inner Ethernet 14. */
export const vxlanOverhead = (f: Family) => (f === 4 ? 50 : 70);

export function vxlanName(vni: number): string {
  return `cnikit.${vni}`;
}

/** A stable, locally administered unicast MAC for the node's VTEP (the same after the device is recreated). */
export function vtepMacFor(nodeName: string): string {
  const h = createHash('sha256').update(`cnikit-vtep:${nodeName}`).digest();
  h[0] = ((h[0] as number) & 0xfe) | 0x02;
  return [...h.subarray(0, 6)].map((b) => b.toString(16).padStart(2, '0')).join(':');
}

export interface LocalUnderlay extends Underlay {
  linkIndex: number;
  linkName: string;
  mtu: number;
  /** The node's InternalIP on that link (the VTEP's local address). */
  local: string;
}

/** The link that carries one of the node's InternalIPs, with its prefixes. */
export function findUnderlay(internalIps: readonly string[]): LocalUnderlay | undefined {
  const addrs = listAddrs();
  for (const ip of internalIps) {
    const a = addrs.find((x) => x.ip === ip);
    if (!a) continue;
    const link = listLinks().find((l) => l.index === a.linkIndex);
    if (!link) continue;
    return {
      linkIndex: a.linkIndex,
      linkName: link.name,
      mtu: link.mtu,
      local: ip,
      vtepFamily: familyOf(ip),
      prefixes: addrs.filter((x) => x.linkIndex === a.linkIndex && x.scope === 0).map((x) => x.cidr),
    };
  }
  return undefined;
}

export interface VxlanWant {
  vni: number;
  port: number;
  mtu: number | undefined;
  nodeName: string;
  ownPodCidrs: string[];
}

/** Creates (or fixes) the agent's VXLAN device; returns its index and MAC. Addresses: the node's pod gateways. */
export function ensureVxlan(
  w: VxlanWant,
  u: LocalUnderlay,
  log: (m: string) => void,
): { index: number; mac: string } {
  const name = vxlanName(w.vni);
  const mtu = w.mtu ?? u.mtu - vxlanOverhead(u.vtepFamily ?? 4);
  let cur = getVxlan(name);
  if (
    cur &&
    (cur.vni !== w.vni || cur.port !== w.port || cur.local !== u.local || cur.linkIndex !== u.linkIndex)
  ) {
    log(
      `${name}: vni ${cur.vni} port ${cur.port} local ${cur.local} do not match vni ${w.vni} port ${w.port} local ${u.local}: recreating it`,
    );
    deleteLink(cur.index);
    cur = undefined;
  }
  if (!cur) {
    createVxlan({
      name,
      vni: w.vni,
      port: w.port,
      local: u.local,
      dev: u.linkIndex,
      mtu,
      mac: vtepMacFor(w.nodeName),
    });
    cur = getVxlan(name);
    if (!cur) throw new Error(`${name}: created but not found`);
    log(`${name}: created (vni ${w.vni}, port ${w.port}, local ${u.local}, mtu ${mtu})`);
  }
  if (cur.mtu !== mtu) setMtu(cur.index, mtu);
  setLinkUp(cur.index);
  const want = new Set(
    w.ownPodCidrs
      .map((c) => {
        const g = gatewayOf(c);
        return g ? `${g}/${familyOf(g) === 4 ? 32 : 128}` : undefined;
      })
      .filter((x) => x !== undefined),
  );
  const have = listAddrs({ link: cur.index }).filter((a) => a.scope === 0);
  for (const a of have) if (!want.has(a.cidr)) delAddr(cur.index, a.cidr);
  for (const c of want)
    if (!have.some((a) => a.cidr === c)) addAddr(cur.index, c, { noDad: true, broadcast: false });
  return { index: cur.index, mac: cur.mac };
}

/** Removes the agent's VXLAN device (mode host-gw). */
export function removeVxlan(vni: number): boolean {
  const cur = getVxlan(vxlanName(vni));
  if (!cur) return false;
  deleteLink(cur.index);
  return true;
}

export interface ApplyResult {
  /** Routes of the agent in the kernel after the apply. */
  routes: number;
  /** Kernel changes made (routes, neighbours, FDB entries). */
  changes: number;
  /** Destinations held by a route that is not the agent's: left alone. */
  conflicts: string[];
}

/** Brings the agent's routes, neighbours and FDB entries to the plan; touches nothing that is not its own. */
export function applyPlan(p: Plan, underlayIndex: number, vxlanIndex: number | undefined): ApplyResult {
  // one netlink socket for the whole pass (nested operations share it)
  return withSocket(() => applyPlanOn(p, underlayIndex, vxlanIndex), 'node agent sync');
}

function applyPlanOn(p: Plan, underlayIndex: number, vxlanIndex: number | undefined): ApplyResult {
  const res: ApplyResult = { routes: 0, changes: 0, conflicts: [] };
  const all = listRoutes({ table: RT_TABLE_MAIN });
  const ours = all.filter((r) => r.protocol === RTPROT_CNIKIT);
  const wanted = new Map<string, { gw: string; oif: number; onlink: boolean }>();
  for (const r of p.routes) {
    const oif = r.via === 'vxlan' ? vxlanIndex : underlayIndex;
    if (oif === undefined) continue;
    wanted.set(r.dst, { gw: r.gw, oif, onlink: r.via === 'vxlan' });
  }
  // stale routes first (a node deleted, or moved between host-gw and vxlan)
  for (const r of ours) {
    const w = wanted.get(r.dst);
    const right =
      w !== undefined &&
      r.gw === parseIpText(w.gw) &&
      r.linkIndex === w.oif &&
      (r.priority ?? 0) === defaultMetric(r.family) &&
      ((r.flags & RTNH_F_ONLINK) !== 0) === w.onlink;
    if (right) continue;
    try {
      delRoute(routeSpec(r));
      res.changes++;
    } catch {
      // gone already
    }
  }
  const after = new Set(
    listRoutes({ table: RT_TABLE_MAIN })
      .filter((r) => r.protocol === RTPROT_CNIKIT)
      .map((r) => r.dst),
  );
  for (const [dst, w] of wanted) {
    if (after.has(dst)) {
      res.routes++;
      continue;
    }
    const foreign = all.find(
      (r) => r.dst === dst && r.protocol !== RTPROT_CNIKIT && (r.priority ?? 0) === defaultMetric(r.family),
    );
    if (foreign) {
      res.conflicts.push(`${dst}: a route of protocol ${foreign.protocol} is there (left alone)`);
      continue;
    }
    replaceRoute({ dst, gw: w.gw, dev: w.oif, protocol: RTPROT_CNIKIT, onlink: w.onlink });
    res.changes++;
    res.routes++;
  }
  if (vxlanIndex !== undefined) {
    for (const fam of [4, 6] as const) {
      const want = new Map(
        p.neigh.filter((n) => familyOf(n.ip) === fam).map((n) => [parseIpText(n.ip), n.mac]),
      );
      const have = listNeighbours(fam, vxlanIndex);
      for (const n of have) {
        if (n.dst === undefined) continue;
        if (want.get(n.dst) === n.mac && n.state & NUD_PERMANENT) {
          want.delete(n.dst);
          continue;
        }
        if (!want.has(n.dst)) {
          try {
            delNeighbour({ dev: vxlanIndex, dst: n.dst });
            res.changes++;
          } catch {
            // gone already
          }
        }
      }
      for (const [ip, mac] of want) {
        replaceNeighbour({ dev: vxlanIndex, dst: ip, mac });
        res.changes++;
      }
    }
    const wantFdb = new Map(p.fdb.map((f) => [f.mac, parseIpText(f.dst)]));
    for (const e of listNeighbours('bridge', vxlanIndex)) {
      if (e.mac === undefined || e.dst === undefined) continue;
      if (wantFdb.get(e.mac) === e.dst) {
        wantFdb.delete(e.mac);
        continue;
      }
      try {
        delFdb({ dev: vxlanIndex, mac: e.mac, dst: e.dst });
        res.changes++;
      } catch {
        // gone already
      }
    }
    for (const [mac, dst] of wantFdb) {
      replaceFdb({ dev: vxlanIndex, mac, dst });
      res.changes++;
    }
  }
  return res;
}

/** The metric the kernel gives a route added without one (IPv6: 1024, IP6_RT_PRIO_USER). */
function defaultMetric(family: 4 | 6): number {
  return family === 6 ? 1024 : 0;
}

/** The kernel's text for an address (IPv6 compressed the way formatIp prints it). */
function parseIpText(ip: string): string {
  return canonicalIP(ip) ?? ip;
}
