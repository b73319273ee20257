/**
 * A node whose podCIDR changed (its Node object deleted and registered again, the controller-manager then assigns
 * the next free subnet) still has its bridge with the old subnet's gateway address, and the bridge plugin (like the
 * reference's, without `forceAddress`) refuses to add the new one: every pod ADD fails with `"cni0" already has an
 * IP address different from …`. When install-cni has read the pod CIDRs from the Node object, it therefore removes
 * from each bridge of the conflist it wrote the addresses that lie outside every host-local range of their family
 * (the pods of that old subnet are not routed by any peer any more), and says so. An address inside a range, an
 * address of a family the plugin has no range for, a link that is not a bridge, or no link at all: left alone.
 */
import { contains, parseCIDR, parseIP } from '@cnikit/ip';
import { delAddr, listAddrs, listLinks } from '@cnikit/netlink';

interface BridgeConf {
  type?: unknown;
  bridge?: unknown;
  ipam?: { type?: unknown; ranges?: unknown; subnet?: unknown };
}

/** The bridges of a conflist (name → the host-local subnets of its ranges). */
export function bridgeSubnets(conflist: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const plugins = (conflist as { plugins?: unknown } | null)?.plugins;
  for (const p of Array.isArray(plugins) ? (plugins as BridgeConf[]) : []) {
    if (p?.type !== 'bridge' || p.ipam?.type !== 'host-local') continue;
    const name = typeof p.bridge === 'string' && p.bridge !== '' ? p.bridge : 'cni0';
    const subnets: string[] = [];
    if (typeof p.ipam.subnet === 'string') subnets.push(p.ipam.subnet);
    for (const set of Array.isArray(p.ipam.ranges) ? p.ipam.ranges : [])
      for (const r of Array.isArray(set) ? set : [])
        if (typeof (r as { subnet?: unknown })?.subnet === 'string')
          subnets.push((r as { subnet: string }).subnet);
    if (subnets.length) out.set(name, [...(out.get(name) ?? []), ...subnets]);
  }
  return out;
}

/** Removes the bridges' addresses outside the conflist's ranges (this network namespace); returns how many. */
export function dropStaleBridgeAddresses(conflist: unknown, out: (line: string) => void): number {
  const want = bridgeSubnets(conflist);
  if (want.size === 0) return 0;
  let dropped = 0;
  const links = listLinks();
  for (const [name, subnets] of want) {
    const link = links.find((l) => l.name === name);
    if (link?.kind !== 'bridge') continue;
    const ranges = subnets
      .map((text) => ({ text, c: parseCIDR(text) }))
      .filter((r): r is { text: string; c: NonNullable<ReturnType<typeof parseCIDR>> } => r.c !== undefined);
    for (const a of listAddrs({ link: link.index })) {
      if (a.scope !== 0) continue;
      const ip = parseIP(a.ip);
      const same = ranges.filter((r) => r.c.ip.family === a.family);
      if (!ip || same.length === 0 || same.some((r) => contains(r.c, ip))) continue;
      delAddr(link.index, a.cidr);
      dropped++;
      out(
        `${name}: address ${a.cidr} is outside the node's pod CIDRs (${same.map((r) => r.text).join(', ')}): removed (the node's podCIDR changed)`,
      );
    }
  }
  return dropped;
}
