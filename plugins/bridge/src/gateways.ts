/**
 * Gateway computation and bridge-address planning (the reference's `calcGateways` and the decision
 * part of `ensureAddr`). Pure functions over the 1.x result model.
 */
import { CniError, ErrorCode, type Result, type Route } from '@cnikit/skel';
import {
  contains,
  type Family,
  formatCIDR,
  formatIP,
  type IPNet,
  networkOf,
  nextIP,
  parseCIDR,
  parseIP,
  sameBytes,
} from './addr.ts';

export interface GatewayInfo {
  family: Family;
  /** gateway address with the prefix length of the container address, e.g. 10.1.2.1/24 */
  gws: IPNet[];
  defaultRouteFound: boolean;
}

/** First address of the subnet (network + 1). */
export function calcGatewayIP(addr: IPNet): Uint8Array {
  return nextIP(networkOf(addr).bytes);
}

function isDefaultDst(dst: string, family: Family): boolean {
  const n = parseCIDR(dst);
  return n !== undefined && n.family === family && n.prefix === 0 && n.bytes.every((b) => b === 0);
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
    const info = addr.family === 4 ? v4 : v6;
    ipc.address = formatCIDR(addr);
    ipc.interface = 2;

    let gw: Uint8Array | undefined;
    if (ipc.gateway !== undefined && ipc.gateway !== '') {
      const parsed = parseIP(ipc.gateway);
      if (!parsed) throw new CniError(ErrorCode.Internal, `invalid IP address: ${ipc.gateway}`);
      gw = parsed.bytes;
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
      info.gws.push({ family: gw.length === 4 ? 4 : 6, bytes: gw, prefix: addr.prefix });
    }
  }
  return { v4, v6 };
}

/** What to do to get `want` onto a device that has `existing` addresses (of the same family). */
export interface AddrPlan {
  /** addresses to delete first (only ever non-empty with forceAddress) */
  remove: IPNet[];
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
  existing: readonly IPNet[],
  want: IPNet,
  forceAddress: boolean,
): AddrPlan {
  const remove: IPNet[] = [];
  const wantText = formatCIDR(want);
  for (const a of existing) {
    if (a.family !== want.family) continue;
    if (sameBytes(a.bytes, want.bytes) && a.prefix === want.prefix) return { remove, add: false };
    if (want.family === 4 || contains(a, want.bytes) || contains(want, a.bytes)) {
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
