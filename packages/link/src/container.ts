/**
 * The container side of an interface plugin, in the reference plugins' words: its namespace opened ("failed to
 * open netns …"), the place a stacked link's master lives, a stacked link created and renamed there, DEL's removal
 * of the interface and the neighbour-notify sysctls before addressing, the host end of a new veth pair set up.
 */
import { closeSync } from 'node:fs';
import {
  deleteLinkIfExists,
  getLinkDetails,
  isNetnsGoneForDel,
  type LinkDetails,
  openNetnsFd,
  randomVethName,
  renameLink,
  setLinkUp,
  withNetns,
  withNetnsFd,
} from '@cnikit/netlink';
import { errorReason, internalError } from '@cnikit/skel';
import { SysError } from '@cnikit/sys';
import { fail } from './fail.ts';

export interface ContainerLinkRequest {
  /** The link kind, as the messages name it. */
  kind: 'macvlan' | 'ipvlan' | 'vlan';
  /** The parent device's name: in the calling thread's namespace, or in the container's with `linkInContainer`. */
  master: string;
  linkInContainer: boolean;
  /** An open fd of the container namespace. */
  netnsFd: number;
  /** The interface name in the container. */
  ifName: string;
  /** Creates the link `name` on `parentIndex`, in the namespace open on `netnsFd` (undefined: right here). */
  create(name: string, parentIndex: number, netnsFd: number | undefined): void;
}

/**
 * The reference's `createMacvlan`/`createIpvlan`/`createVlan`: look the master up (here, or in the container with
 * `linkInContainer`), create the link under a random temporary name directly in the container namespace (a name
 * that exists on the host cannot collide), rename it to `ifName` there and read it back. Nothing is left behind on
 * failure. Errors carry the reference's messages ("failed to lookup master …", "failed to create macvlan: …",
 * "failed to rename macvlan to …", "failed to refetch macvlan …").
 */
export function addStackedLinkToContainer(r: ContainerLinkRequest): {
  index: number;
  mac: string;
  mtu: number;
} {
  // fn is synchronous (our own callers): its value is carried out of the namespace switch
  const inContainer = <T>(fn: () => T): T => {
    let out: { v: T } | undefined;
    withNetnsFd(r.netnsFd, () => {
      out = { v: fn() };
    });
    return (out as { v: T }).v;
  };
  let parent: number | undefined;
  try {
    parent = (r.linkInContainer ? inContainer(() => getLinkDetails(r.master)) : getLinkDetails(r.master))
      ?.index;
  } catch (err) {
    throw fail(`failed to lookup master ${JSON.stringify(r.master)}: ${SysError.reasonOf(err)}`, err);
  }
  if (parent === undefined) throw fail(`failed to lookup master ${JSON.stringify(r.master)}: Link not found`);
  const tmpName = randomVethName();
  try {
    if (r.linkInContainer) inContainer(() => r.create(tmpName, parent, undefined));
    else r.create(tmpName, parent, r.netnsFd);
  } catch (err) {
    throw fail(`failed to create ${r.kind}: ${SysError.reasonOf(err)}`, err);
  }
  return inContainer(() => {
    try {
      renameLink(tmpName, r.ifName);
    } catch (err) {
      deleteLinkIfExists(tmpName);
      throw fail(`failed to rename ${r.kind} to ${JSON.stringify(r.ifName)}: ${SysError.reasonOf(err)}`, err);
    }
    let link: LinkDetails | undefined;
    try {
      link = getLinkDetails(r.ifName);
    } catch (err) {
      deleteLinkIfExists(r.ifName);
      throw fail(`failed to refetch ${r.kind} ${JSON.stringify(r.ifName)}: ${SysError.reasonOf(err)}`, err);
    }
    if (!link) throw fail(`failed to refetch ${r.kind} ${JSON.stringify(r.ifName)}: Link not found`);
    return { index: link.index, mac: link.mac, mtu: link.mtu };
  });
}

/**
 * Opens the container's namespace `netnsPath` (a descriptor the caller closes), failing like the reference plugins:
 * "failed to open netns "<path>": <reason>" (code 999 through the SDK), the error of `openNetnsFd` as cause (so
 * `isNetnsGoneForDel` still sees a missing namespace).
 */
export function openContainerNetns(netnsPath: string): number {
  try {
    return openNetnsFd(netnsPath);
  } catch (err) {
    throw fail(`failed to open netns ${JSON.stringify(netnsPath)}: ${SysError.reasonOf(err)}`, err);
  }
}

/**
 * Runs `fn` where a stacked link's master lives: in the container namespace at `netnsPath` when `linkInContainer`,
 * else in the calling thread's namespace. A namespace that cannot be opened fails with the reference's
 * "failed to open netns "<path>": <reason>".
 */
export function inMasterNetns<T>(netnsPath: string, linkInContainer: boolean, fn: () => T): T {
  if (!linkInContainer) return fn();
  const fd = openContainerNetns(netnsPath);
  try {
    let out: { v: T } | undefined;
    withNetnsFd(fd, () => {
      out = { v: fn() };
    });
    return (out as { v: T }).v;
  } finally {
    closeSync(fd);
  }
}

/**
 * DEL's half for an interface plugin: delete `ifName` in the namespace at `netnsPath` (the reference's
 * `ip.DelLinkByName` inside `ns.WithNetNSPath`). A missing link, and a namespace that is gone (isNetnsGoneForDel),
 * are success: returns whether a link was deleted. Other failures: "failed to delete "<ifName>": <reason>".
 */
export function deleteLinkInNetns(netnsPath: string, ifName: string): boolean {
  let deleted = false;
  removeInNetns(netnsPath, () => {
    try {
      deleted = deleteLinkIfExists(ifName);
    } catch (err) {
      throw fail(`failed to delete ${JSON.stringify(ifName)}: ${SysError.reasonOf(err)}`, err);
    }
  });
  return deleted;
}

/** Runs DEL's `fn` in the namespace at `netnsPath`; a namespace that is gone (isNetnsGoneForDel) is success. */
export function removeInNetns(netnsPath: string, fn: () => void): void {
  try {
    withNetns(netnsPath, fn);
  } catch (err) {
    if (!isNetnsGoneForDel(err, netnsPath)) throw err;
  }
}

/**
 * The host end of a veth pair just created from the container (the reference's `SetupVeth`), in the calling
 * thread's namespace: looked up ("failed to lookup "<name>": Link not found") and set up ("failed to set "<name>"
 * up: …"), both code 999.
 */
export function hostVethUp<L extends { index: number }>(
  name: string,
  lookup: (name: string) => L | undefined,
): L {
  const host = lookup(name);
  if (!host) throw internalError(`failed to lookup ${JSON.stringify(name)}: Link not found`);
  try {
    setLinkUp(host.index);
  } catch (err) {
    throw internalError(`failed to set ${JSON.stringify(name)} up: ${errorReason(err)}`, err);
  }
  return host;
}
