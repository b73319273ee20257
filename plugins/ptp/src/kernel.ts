/**
 * ptp's kernel work over @cnikit/netlink: the veth pair (created in the container namespace, host end placed
 * directly in the host namespace), the container's addresses and routes, the host end's gateway addresses and
 * host routes. Synchronous; everything named "container" runs inside withNetnsFd.
 */
import { configureIface, hostVethUp } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { errorReason, type Interface, internalError, type Result } from '@cnikit/skel';
import { containerPlan, hostPlan } from './plan.ts';

function sysctlTry(name: string, value: string): void {
  try {
    nl.sysctlSet(name, value);
  } catch {
    // the reference ignores these errors
  }
}

/**
 * `setupContainerVeth`, part 1: the pair, created in the container namespace with the host end placed directly
 * in the calling thread's (host) namespace; then the host end is set up (it must carry before the container's
 * IPv6 addresses can leave DAD). `created` runs as soon as the pair exists (to register its rollback).
 */
export function createPair(
  netnsFd: number,
  netnsPath: string,
  ifName: string,
  mtu: number,
  created: () => void,
): { host: Interface; container: Interface } {
  const { peer, mac } = nl.withNetnsFd(netnsFd, (hostNs) => {
    const { peer, link } = nl.createVethWithRandomPeer(ifName, mtu, '', hostNs.fd);
    return { peer, mac: link.mac };
  });
  created();
  const h = hostVethUp(peer, nl.getLink);
  // we own the routes of this interface
  sysctlTry(`net/ipv6/conf/${peer}/accept_ra`, '0');
  return { host: { name: h.name, mac: h.mac }, container: { name: ifName, mac, sandbox: netnsPath } };
}

/**
 * `setupContainerVeth`, part 2 (in the container): the IPAM addresses and routes on `ifName`, then each
 * automatic prefix route replaced by a /32 (/128) route to the gateway and the prefix via the gateway.
 */
export function configureContainer(netnsFd: number, ifName: string, result: Result): void {
  nl.withNetnsFd(netnsFd, () => {
    configureIface(ifName, result);
    const plan = containerPlan(ifName, result.ips ?? []);
    for (const r of plan.remove) {
      try {
        nl.delRoute(r);
      } catch (err) {
        throw internalError(`failed to delete route ${r.dst} dev ${ifName}: ${errorReason(err)}`, err);
      }
    }
    for (const r of plan.add) {
      try {
        nl.addRoute(r);
      } catch (err) {
        throw internalError(
          `failed to add route ${r.dst}${r.gw ? ` via ${r.gw}` : ''} dev ${ifName} src ${r.src}: ${errorReason(err)}`,
          err,
        );
      }
    }
  });
}

/** `setupHostVeth`: the gateway address(es) on the host end and a host route to each container address. */
export function setupHost(hostName: string, result: Result): void {
  const veth = nl.getLink(hostName);
  if (!veth) throw internalError(`failed to lookup ${JSON.stringify(hostName)}: Link not found`);
  const plan = hostPlan(hostName, result.ips ?? []);
  for (const a of plan.addrs) {
    try {
      nl.addAddr(veth.index, a);
    } catch (err) {
      // two IPs of one family behind the same gateway: the address is there already
      if (!nl.isExistsError(err))
        throw internalError(`failed to add IP addr ${a} to veth: ${errorReason(err)}`, err);
    }
  }
  for (const r of plan.routes) {
    try {
      nl.addRoute({ ...r, dev: veth.index });
    } catch (err) {
      if (!nl.isExistsError(err))
        throw internalError(`failed to add route on host: ${errorReason(err)}`, err);
    }
  }
}

/** Deletes the container end (the host end and its addresses and routes go with it) in the current namespace. */
export function deleteContainerVeth(ifName: string): void {
  try {
    nl.deleteLink(ifName);
  } catch (err) {
    if (!nl.isNotFoundError(err)) throw err;
  }
}
