/**
 * Generic IPAM helpers shared by interface plugins (Go's pkg/ipam ConfigureIface and pkg/ip forwarding
 * sysctls). Synchronous; they act in the calling thread's network namespace (wrap in withNetns).
 */
import { type Family, formatCIDR, parseCIDR, parseIP } from '@cnikit/ip';
import { addAddr, addRoute, getLink, setLinkUp, sysctlGet, sysctlSet, waitDadSettled } from '@cnikit/netlink';
import { SysError } from '@cnikit/sys';
import { fail } from './fail.ts';

/** The parts of a CNI result (1.x shape) that ConfigureIface reads. */
export interface IfaceConfig {
  interfaces?: ReadonlyArray<{ name: string }>;
  ips?: ReadonlyArray<{ address: string; gateway?: string; interface?: number }>;
  routes?: ReadonlyArray<{ dst: string; gw?: string; priority?: number; table?: number; scope?: number }>;
}

/** `ip.EnableIP4Forward` / `EnableIP6Forward`: write 1 unless it already reads 1. */
export function enableForward(family: Family): void {
  const name = family === 4 ? 'net/ipv4/ip_forward' : 'net/ipv6/conf/all/forwarding';
  let cur = '';
  try {
    cur = sysctlGet(name).trim();
  } catch {
    // write below
  }
  if (cur !== '1') sysctlSet(name, '1');
}

/**
 * `ipam.ConfigureIface` (plugins.md §9.3): add the result's addresses of `ifName` (enabling IPv6 when
 * needed), bring it up, wait for DAD when there is an IPv6 gateway, add the routes. Run it inside the
 * container namespace.
 */
export function configureIface(ifName: string, res: IfaceConfig): void {
  const interfaces = res.interfaces ?? [];
  if (interfaces.length === 0) throw fail('no interfaces to configure');
  if (!getLink(ifName)) throw fail(`failed to lookup ${JSON.stringify(ifName)}: Link not found`);
  let v4gw: string | undefined;
  let v6gw: string | undefined;
  let v6enabled = false;
  for (const ipc of res.ips ?? []) {
    if (ipc.interface === undefined) continue;
    const idx = ipc.interface;
    if (idx < 0 || idx >= interfaces.length || interfaces[idx]?.name !== ifName) {
      throw fail(
        `failed to add IP addr ${JSON.stringify(ipc)} to ${JSON.stringify(ifName)}: invalid interface index`,
      );
    }
    const addr = parseCIDR(ipc.address);
    if (!addr)
      throw fail(`failed to add IP addr ${ipc.address} to ${JSON.stringify(ifName)}: invalid address`);
    if (!v6enabled && addr.ip.family === 6) {
      for (const iface of ['lo', ifName]) {
        const key = `net/ipv6/conf/${iface}/disable_ipv6`;
        let value: string;
        try {
          value = sysctlGet(key).trim();
        } catch {
          continue;
        }
        if (value === '0') continue;
        try {
          sysctlSet(key, '0');
        } catch (err) {
          throw fail(
            `failed to enable IPv6 for interface ${JSON.stringify(iface)} (${key}=${value}): ${SysError.reasonOf(err)}`,
            err,
          );
        }
      }
      try {
        sysctlSet(`net/ipv6/conf/${ifName}/keep_addr_on_down`, '1');
      } catch (err) {
        throw fail(
          `failed to enable keep_addr_on_down for interface ${JSON.stringify(ifName)}: ${SysError.reasonOf(err)}`,
          err,
        );
      }
      v6enabled = true;
    }
    try {
      addAddr(ifName, formatCIDR(addr));
    } catch (err) {
      throw fail(
        `failed to add IP addr ${ipc.address} to ${JSON.stringify(ifName)}: ${SysError.reasonOf(err)}`,
        err,
      );
    }
    const gw = ipc.gateway ? parseIP(ipc.gateway) : undefined;
    if (gw?.family === 4) v4gw ??= ipc.gateway;
    else if (gw?.family === 6) v6gw ??= ipc.gateway;
  }
  try {
    setLinkUp(ifName);
  } catch (err) {
    throw fail(`failed to set ${JSON.stringify(ifName)} UP: ${SysError.reasonOf(err)}`, err);
  }
  if (v6gw) {
    try {
      waitDadSettled(ifName, 5000);
    } catch (err) {
      throw fail(`failed to settle addresses for ${JSON.stringify(ifName)}: ${SysError.reasonOf(err)}`, err);
    }
  }
  for (const r of res.routes ?? []) {
    const dst = parseCIDR(r.dst);
    if (!dst) throw fail(`failed to add route '${r.dst}': invalid destination`);
    const gw = r.gw || (dst.ip.family === 4 ? v4gw : v6gw);
    try {
      addRoute(
        { dst: formatCIDR(dst), gw, dev: ifName, priority: r.priority, table: r.table, scope: r.scope },
        { exclusive: false },
      );
    } catch (err) {
      throw fail(
        `failed to add route '${r.dst} via ${gw ?? '<nil>'} dev ${ifName} metric ${r.priority ?? 0} (Scope: ${r.scope ?? 0}, Table: ${r.table ?? 0})': ${SysError.reasonOf(err)}`,
        err,
      );
    }
  }
}
