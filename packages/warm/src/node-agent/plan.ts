/**
 * What the node agent wants in the kernel, worked out from the Node objects it knows (pure: no kernel, no API):
 * for every other node and each of its pod CIDRs either a host-gw route (via the peer's InternalIP, when that
 * address is on the underlay link) or a VXLAN route (via the peer's VTEP, flannel's layout: route to the peer's pod
 * CIDR via the CIDR's first address, onlink on the vxlan device; a permanent neighbour entry that address → the
 * peer's VTEP MAC; a forwarding-database entry that MAC → the peer's InternalIP).
 */
import { contains, type Family, familyOf, formatIP, network, overlaps, parseCIDR, parseIP } from '@cnikit/ip';
import type { Mode } from './config.ts';

/** The annotation the agent writes on its own Node: the MAC address of its VXLAN device. */
export const VTEP_MAC_ANNOTATION = 'node-agent.cnikit.io/vtep-mac';

/** What the agent keeps of a Node object (nothing else: bounded memory). */
export interface PeerNode {
  name: string;
  podCidrs: string[];
  internalIps: string[];
  vtepMac: string | undefined;
}

/** The local side: the addresses (with prefix) on the underlay link, by which a peer is found on-link. */
export interface Underlay {
  /** e.g. ['192.168.50.11/24', 'fd00:50::11/64'] */
  prefixes: string[];
  /** The family of the VXLAN underlay (the family of the node's first InternalIP). */
  vtepFamily: Family | undefined;
}

export interface DesiredRoute {
  node: string;
  dst: string;
  gw: string;
  via: 'underlay' | 'vxlan';
}

export interface Plan {
  routes: DesiredRoute[];
  /** Peer VTEPs: MAC → the peer's underlay address. */
  fdb: Array<{ node: string; mac: string; dst: string }>;
  /** Permanent neighbours on the vxlan device: gateway address → peer MAC. */
  neigh: Array<{ node: string; ip: string; mac: string }>;
  /** Peers that cannot be reached (yet), one human-readable line each. */
  problems: string[];
}

/** The agent's own vxlan device's addresses: the first address of each of the node's pod CIDRs. */
export function gatewayOf(cidr: string): string | undefined {
  const c = parseCIDR(cidr);
  return c ? formatIP(network(c)) : undefined;
}

function onLink(prefixes: readonly string[], ip: string): boolean {
  const a = parseIP(ip);
  if (!a) return false;
  return prefixes.some((p) => {
    const c = parseCIDR(p);
    return c !== undefined && c.ip.family === a.family && contains(c, a);
  });
}

/** The desired routes and VXLAN entries for `nodes` seen from node `self`. */
export function plan(
  self: PeerNode | undefined,
  nodes: Iterable<PeerNode>,
  mode: Mode,
  underlay: Underlay,
): Plan {
  const out: Plan = { routes: [], fdb: [], neigh: [], problems: [] };
  const own = (self?.podCidrs ?? []).map((c) => parseCIDR(c)).filter((c) => c !== undefined);
  const seenDst = new Map<string, string>();
  for (const n of nodes) {
    if (n.name === self?.name) continue;
    const vtep =
      underlay.vtepFamily === undefined
        ? undefined
        : n.internalIps.find((ip) => familyOf(ip) === underlay.vtepFamily);
    let vxlanNeeded = false;
    for (const cidr of n.podCidrs) {
      const c = parseCIDR(cidr);
      const gw = gatewayOf(cidr);
      if (!c || !gw) {
        out.problems.push(`node ${n.name}: pod CIDR ${JSON.stringify(cidr)} is not a CIDR`);
        continue;
      }
      if (own.some((o) => overlaps(o, c))) {
        out.problems.push(`node ${n.name}: pod CIDR ${cidr} overlaps this node's own`);
        continue;
      }
      const prev = seenDst.get(cidr);
      if (prev !== undefined) {
        out.problems.push(`node ${n.name}: pod CIDR ${cidr} is also node ${prev}'s`);
        continue;
      }
      seenDst.set(cidr, n.name);
      const direct = n.internalIps.find(
        (ip) => familyOf(ip) === c.ip.family && onLink(underlay.prefixes, ip),
      );
      if (mode !== 'vxlan' && direct !== undefined) {
        out.routes.push({ node: n.name, dst: cidr, gw: direct, via: 'underlay' });
        continue;
      }
      if (mode === 'host-gw') {
        out.problems.push(
          `node ${n.name}: no InternalIP of IPv${c.ip.family} on this node's link (host-gw needs the nodes on one subnet; use mode vxlan or auto)`,
        );
        continue;
      }
      if (vtep === undefined) {
        out.problems.push(
          `node ${n.name}: no InternalIP of IPv${underlay.vtepFamily ?? '?'} for the VXLAN underlay`,
        );
        continue;
      }
      if (n.vtepMac === undefined) {
        out.problems.push(
          `node ${n.name}: no ${VTEP_MAC_ANNOTATION} annotation yet (its agent has not started)`,
        );
        continue;
      }
      out.routes.push({ node: n.name, dst: cidr, gw, via: 'vxlan' });
      out.neigh.push({ node: n.name, ip: gw, mac: n.vtepMac });
      vxlanNeeded = true;
    }
    if (vxlanNeeded && vtep !== undefined && n.vtepMac !== undefined)
      out.fdb.push({ node: n.name, mac: n.vtepMac, dst: vtep });
  }
  return out;
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/** The fields the agent keeps of a Node object; undefined when it is not a Node. */
export function peerFromNode(obj: unknown): PeerNode | undefined {
  const o = obj as {
    metadata?: { name?: unknown; annotations?: Record<string, unknown> };
    spec?: { podCIDR?: unknown; podCIDRs?: unknown };
    status?: { addresses?: Array<{ type?: unknown; address?: unknown }> };
  } | null;
  const name = o?.metadata?.name;
  if (typeof name !== 'string' || name === '') return undefined;
  const list = Array.isArray(o?.spec?.podCIDRs) ? (o?.spec?.podCIDRs as unknown[]) : [o?.spec?.podCIDR];
  const podCidrs = list.filter((c): c is string => typeof c === 'string' && c !== '').slice(0, 2);
  const internalIps = (Array.isArray(o?.status?.addresses) ? o.status.addresses : [])
    .filter(
      (a) => a?.type === 'InternalIP' && typeof a.address === 'string' && parseIP(a.address) !== undefined,
    )
    .map((a) => a.address as string)
    .slice(0, 4);
  const mac = o?.metadata?.annotations?.[VTEP_MAC_ANNOTATION];
  return {
    name,
    podCidrs,
    internalIps,
    vtepMac: typeof mac === 'string' && MAC.test(mac.toLowerCase()) ? mac.toLowerCase() : undefined,
  };
}
