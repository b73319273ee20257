/**
 * Gateway computation and bridge-address planning (the reference's `calcGateways` and the decision
 * part of `ensureAddr`). Pure functions over the 1.x result model.
 */

import {
  type CIDR,
  cidrOf,
  contains,
  equal,
  type Family,
  familyPrefix,
  formatCIDR,
  formatIP,
  type IP,
  network,
  next,
  parseCIDR,
  parseIP,
} from '@cnikit/ip';
import { CniError, ErrorCode, type Result, type Route } from '@cnikit/skel';

export interface GatewayInfo {
  family: Family;
  /** gateway address with the prefix length of the container address, e.g. 10.1.2.1/24 */
  gws: CIDR[];
  defaultRouteFound: boolean;
}

/** First address of the subnet (network + 1; wraps to zero past the last address, as before). */
export function calcGatewayIP(addr: CIDR): IP {
  return next(network(addr)) ?? { family: addr.ip.family, value: 0n };
}

function isDefaultDst(dst: string, family: Family): boolean {
  const n = parseCIDR(dst);
  return n !== undefined && n.ip.family === family && familyPrefix(n) === 0 && n.ip.value === 0n;
}

/**
 * For each IP of an IPAM result: point it at the container interface (index 2), fill in the gateway
 * when `isGateway` and IPAM gave none, add one default route per family when `isDefaultGateway` and
 * IPAM did not return one with a gateway, and collect the gateway addresses to put on the bridge.
 * Mutates `result` (like the reference) and returns the v4 and v6 gateway lists. Addresses and
 * gateways are rewritten in Go's canonical text form.
 */
export function calcGateways(
  result: Result,
  conf: { isGateway: boolean; isDefaultGateway: boolean },
): { v4: GatewayInfo; v6: GatewayInfo } {
  const v4: GatewayInfo = { family: 4, gws: [], defaultRouteFound: false };
  const v6: GatewayInfo = { family: 6, gws: [], defaultRouteFound: false };
  const isGW = conf.isGateway || conf.isDefaultGateway;
  result.routes ??= [];
  for (const ipc of result.ips ?? []) {
    const addr = parseCIDR(ipc.address);
    if (!addr) {
      throw new CniError(ErrorCode.Internal, `Unknown IP object: ${JSON.stringify(ipc)}`);
    }
    const info = addr.ip.family === 4 ? v4 : v6;
    ipc.address = formatCIDR(addr);
    ipc.interface = 2;

    let gw: IP | undefined;
    if (ipc.gateway !== undefined && ipc.gateway !== '') {
      const parsed = parseIP(ipc.gateway);
      if (!parsed) throw new CniError(ErrorCode.Internal, `invalid IP address: ${ipc.gateway}`);
      gw = parsed;
      ipc.gateway = formatIP(gw);
    } else if (isGW) {
      gw = calcGatewayIP(addr);
      ipc.gateway = formatIP(gw);
    }

    if (conf.isDefaultGateway && !info.defaultRouteFound) {
      info.defaultRouteFound = result.routes.some(
        (r) => r.gw !== undefined && r.gw !== '' && isDefaultDst(r.dst, info.family),
      );
      if (!info.defaultRouteFound) {
        const route: Route = { dst: info.family === 4 ? '0.0.0.0/0' : '::/0' };
        if (gw) route.gw = formatIP(gw);
        result.routes.push(route);
        info.defaultRouteFound = true;
      }
    }

    if (isGW && gw) {
      info.gws.push(cidrOf(gw, familyPrefix(addr)));
    }
  }
  return { v4, v6 };
}

/** What to do to get `want` onto a device that has `existing` addresses (of the same family). */
export interface AddrPlan {
  /** addresses to delete first (only ever non-empty with forceAddress) */
  remove: CIDR[];
  /** false when the exact address is already present */
  add: boolean;
}

/**
 * The reference's `ensureAddr` decision: an identical `ip/prefix` means nothing to do; for IPv4 any
 * other address, and for IPv6 an address whose subnet overlaps, is a conflict — removed with
 * `forceAddress`, an error otherwise. Non-overlapping IPv6 addresses coexist.
 */
export function planAddr(
  device: string,
  existing: readonly CIDR[],
  want: CIDR,
  forceAddress: boolean,
): AddrPlan {
  const remove: CIDR[] = [];
  const wantText = formatCIDR(want);
  for (const a of existing) {
    if (a.ip.family !== want.ip.family) continue;
    if (equal(a.ip, want.ip) && familyPrefix(a) === familyPrefix(want)) return { remove, add: false };
    if (want.ip.family === 4 || contains(a, want.ip) || contains(want, a.ip)) {
      if (!forceAddress) {
        throw new CniError(
          ErrorCode.Internal,
          `${JSON.stringify(device)} already has an IP address different from ${wantText}`,
        );
      }
      remove.push(a);
    }
  }
  return { remove, add: true };
}
