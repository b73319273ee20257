/**
 * What ptp changes in the kernel for an IPAM result, as data (pure, unit-tested):
 *
 * container: the address keeps its prefix, but the prefix route the kernel adds with it is replaced by a /32
 * (/128) link route to the gateway and a route to the prefix *via* the gateway, so that everything (but the
 * gateway itself) goes through the host end;
 * host: the gateway address as /32 (/128) on the host veth, and a host-scope route to each container address.
 */
import { bitsOf, type CIDR, formatCIDR, formatIP, networkCIDR, parseCIDR, parseIP } from '@cnikit/ip';
import type { RouteSpec } from '@cnikit/netlink';
import { internalError } from '@cnikit/skel';

export interface PtpAddress {
  address: string;
  gateway?: string;
}

export interface ContainerPlan {
  /** The kernel's automatic prefix routes, deleted. */
  remove: RouteSpec[];
  /** The replacement routes, added in this order. */
  add: RouteSpec[];
}

export interface HostPlan {
  /** `gateway/32` (`/128`) addresses of the host veth. */
  addrs: string[];
  /** Host-scope routes to every container address. */
  routes: RouteSpec[];
}

interface Parsed {
  addr: CIDR;
  gw: string;
  ip: string;
  family: 4 | 6;
}

function parsed(ips: readonly PtpAddress[]): Parsed[] {
  return ips.map((ipc) => {
    const addr = parseCIDR(ipc.address);
    if (!addr) throw internalError(`invalid IP address ${JSON.stringify(ipc.address)} in the IPAM result`);
    const gw = ipc.gateway ? parseIP(ipc.gateway) : undefined;
    // the reference would fail half-way (a route with a nil gateway); ptp needs a gateway per address
    if (!gw) throw internalError(`IPAM result for ${ipc.address} has no gateway: ptp routes through it`);
    if (gw.family !== addr.ip.family)
      throw internalError(`gateway ${ipc.gateway} of ${ipc.address} is of another address family`);
    return { addr, gw: formatIP(gw), ip: formatIP(addr.ip), family: addr.ip.family };
  });
}

/** Checks every address has a usable gateway (before anything changes). */
export function checkAddresses(ips: readonly PtpAddress[]): void {
  parsed(ips);
}

export function containerPlan(ifName: string, ips: readonly PtpAddress[]): ContainerPlan {
  const remove: RouteSpec[] = [];
  const add: RouteSpec[] = [];
  for (const p of parsed(ips)) {
    const prefix = formatCIDR(networkCIDR(p.addr));
    const bits = bitsOf(p.family);
    remove.push({ dst: prefix, dev: ifName, scope: 'nowhere' });
    add.push({ dst: `${p.gw}/${bits}`, dev: ifName, scope: 'link', src: p.ip });
    add.push({ dst: prefix, gw: p.gw, dev: ifName, scope: 'universe', src: p.ip });
  }
  return { remove, add };
}

export function hostPlan(hostVeth: string, ips: readonly PtpAddress[]): HostPlan {
  const addrs: string[] = [];
  const routes: RouteSpec[] = [];
  for (const p of parsed(ips)) {
    const bits = bitsOf(p.family);
    addrs.push(`${p.gw}/${bits}`);
    routes.push({ dst: `${p.ip}/${bits}`, dev: hostVeth, scope: 'host' });
  }
  return { addrs, routes };
}

/** The families present (forwarding is enabled once per family, like the reference's EnableForward). */
export function familiesOf(ips: readonly PtpAddress[]): Array<4 | 6> {
  const out: Array<4 | 6> = [];
  for (const ipc of ips) {
    const f = parseCIDR(ipc.address)?.ip.family;
    if (f && !out.includes(f)) out.push(f);
  }
  return out;
}
