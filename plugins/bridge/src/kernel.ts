/**
 * The bridge plugin's view of links, ports, VLANs and addresses over @cnikit/netlink (also the PortOps the VLAN
 * code takes, so tests can record the calls), and the kernel views CHECK validates against (`checkEnv`).
 * Everything is synchronous and acts in the calling thread's network namespace unless stated.
 */
import { type CIDR, type Family, parseCIDR } from '@cnikit/ip';
import { addrViews, routeViews } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import type { CheckEnv, LinkView } from './check-logic.ts';

export interface LinkInfo extends LinkView {
  operstate: string;
  mtu: number;
  up: boolean;
}

// ---------------------------------------------------------------------------------------------
// sysctls

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

export function listAddrs(name: string, family: Family): CIDR[] {
  return nl
    .listAddrs({ link: name, family })
    .map((a) => parseCIDR(a.cidr))
    .filter((a): a is CIDR => a !== undefined);
}

// ---------------------------------------------------------------------------------------------
// CHECK's view of the kernel

/** The real views CHECK validates against: host links here, the container's links, addresses and routes inside its namespace. */
export function checkEnv(netns: string): CheckEnv {
  return {
    hostLink: (name) => linkByName(name),
    containerLink: (name) => nl.withNetns(netns, () => linkByName(name)),
    containerAddrs: (name) => nl.withNetns(netns, () => addrViews(name)),
    containerRoutes: (family) => nl.withNetns(netns, () => routeViews(family)),
  };
}
