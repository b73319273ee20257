/**
 * Moving the host device into the container and back. Each crossing is one netlink request that moves and renames
 * together (IFLA_NET_NS_FD + IFLA_IFNAME): the device is renamed in neither the host nor the container on its own
 * (no clash with a name there, no rename race with udev/NetworkManager in the host), and it is never parked in a
 * namespace that only this process holds. A process killed at any point (SIGKILL, OOM) leaves the device either in
 * the host under its own name or in the container under `CNI_IFNAME`, with its original name in the alias: DEL
 * finds it in both places. (The reference passes it through an anonymous temporary namespace, which dies with
 * the process: a virtual device with it, a physical one back to the initial namespace under a temporary name.)
 * in: alias = original name (host); host → container as `CNI_IFNAME`; up.
 * out: container → host under the alias; alias cleared.
 * Each step undoes the earlier ones when a later one fails. Synchronous.
 */
import * as nl from '@cnikit/netlink';
import { errorReason, internalError } from '@cnikit/skel';
import type { SavedDevice } from './state.ts';
import { parentFromSysfs } from './sysfs.ts';

const q = JSON.stringify;

function quiet(fn: () => void): void {
  try {
    fn();
  } catch {
    // best-effort undo step
  }
}

/** Test seam: called after each step that changes the device (a kill-point for the crash tests). */
export const hooks = { step: (_name: string): void => {} };

/** Moves host link `hostName` into the container as `ifName`, up. Returns the container link. */
export function moveLinkIn(hostName: string, containerFd: number, ifName: string): nl.Link {
  const host = nl.getLink(hostName);
  if (!host) throw internalError('Link not found');
  const wasUp = host.up;
  return nl.withNetnsFd(containerFd, (hostNs) => {
    const inHost = (fn: () => void): void => nl.withNetnsFd(hostNs.fd, fn);
    /** Back in the host as it was: its name, its alias, up when it was. */
    const undoHost = () =>
      inHost(() => {
        quiet(() => nl.setAlias(hostName, host.alias ?? ''));
        if (wasUp) quiet(() => nl.setLinkUp(hostName));
      });
    // a taken name is refused before anything changes: the kernel would move the device first (the container's own
    // link may hold its ifindex: it would come back under a new one) and fail the rename after
    if (nl.getLink(ifName))
      throw internalError(`failed to move ${q(ifName)} (host: ${q(hostName)}) to container NS: file exists`);
    try {
      inHost(() => nl.setAlias(host.index, hostName));
    } catch (err) {
      throw internalError(`failed to set alias to ${q(hostName)}: ${errorReason(err)}`, err);
    }
    hooks.step('alias set');
    try {
      inHost(() => nl.moveToNetns(host.index, containerFd, { name: ifName }));
    } catch (err) {
      // `ifName` taken since the check: the kernel moved it here under its host name before the rename failed
      const half = nl.getLink(hostName);
      if (half?.alias === hostName) quiet(() => nl.moveToNetns(half.index, hostNs.fd, { name: hostName }));
      undoHost();
      throw internalError(
        `failed to move ${q(ifName)} (host: ${q(hostName)}) to container NS: ${errorReason(err)}`,
        err,
      );
    }
    hooks.step('moved in');
    const c = nl.getLink(ifName);
    try {
      if (!c) throw internalError(`failed to find ${q(ifName)} in container NS: Link not found`);
      try {
        nl.setLinkUp(c.index);
      } catch (err) {
        throw internalError(`failed to set ${q(ifName)} up: ${errorReason(err)}`, err);
      }
      hooks.step('up');
      return nl.getLinkOrThrow(c.index);
    } catch (err) {
      if (c) quiet(() => nl.moveToNetns(c.index, hostNs.fd, { name: hostName }));
      undoHost();
      throw err;
    }
  });
}

/**
 * Moves the container's `ifName` back to the host under its original name (the alias). Returns that name, or
 * undefined when the container has no such link (DEL is idempotent). The link is left down, as the reference does;
 * the caller restores the saved state.
 */
export function moveLinkOut(containerFd: number, ifName: string): string | undefined {
  return nl.withNetnsFd(containerFd, (hostNs) => {
    const c = nl.getLink(ifName);
    if (!c) return undefined;
    if (!c.alias) throw internalError(`failed to find original ifname for ${q(ifName)} (alias is not set)`);
    const original = c.alias;
    if (nl.withNetnsFd(hostNs.fd, () => nl.getLink(original) !== undefined))
      throw internalError(`failed to move ${q(original)} to hostNS: file exists`);
    try {
      nl.moveToNetns(c.index, hostNs.fd, { name: original });
    } catch (err) {
      // `original` taken since the check: moved, then the rename failed; back into the container as it was
      nl.withNetnsFd(hostNs.fd, () => {
        const half = nl.getLink(ifName);
        if (half?.alias === original) quiet(() => nl.moveToNetns(half.index, containerFd, { name: ifName }));
      });
      if (c.up) quiet(() => nl.setLinkUp(ifName));
      throw internalError(`failed to move ${q(original)} to hostNS: ${errorReason(err)}`, err);
    }
    hooks.step('moved out');
    nl.withNetnsFd(hostNs.fd, () => {
      try {
        nl.setAlias(original, '');
      } catch (err) {
        throw internalError(`failed to unset alias of ${q(original)}: ${errorReason(err)}`, err);
      }
    });
    return original;
  });
}

const same = (a: string | undefined, b: string | undefined) =>
  !!a && !!b && a.toLowerCase() === b.toLowerCase();

/**
 * Which host link is the saved device after its namespace died without DEL (or a process was killed half-way):
 * the same hardware (permanent MAC, or bus and bus address of the parent device, what a physical NIC keeps
 * whatever the container did to it), else the MAC of ADD with the alias ADD set. The link must also show that it
 * went away: the alias, or a name other than its own (the kernel returns it under its container-side name, or
 * `dev%d` when that is taken). A link that never left (no alias, its own name) is not one.
 */
export function findReturned(links: readonly nl.Link[], saved: SavedDevice): nl.Link | undefined {
  if (!saved.device) return undefined;
  const left = (l: nl.Link) => l.alias === saved.device || l.name !== saved.device;
  const hardware = (l: nl.Link) =>
    same(l.permMac, saved.permMac) ||
    (same(l.parentDev, saved.parentDev) && (l.parentBus ?? '') === (saved.parentBus ?? ''));
  return (
    links.find((l) => hardware(l) && left(l)) ??
    links.find((l) => same(l.mac, saved.mac) && l.alias === saved.device)
  );
}

/**
 * The device of a namespace that died without DEL: the kernel returns a physical device to the initial namespace
 * under its container-side name (`dev%d` when that name is taken there), down, alias kept. Found by `findReturned`,
 * it gets its original name back and its alias cleared; the caller restores the rest (`restoreDevice`). Returns
 * false when no such link is here (a virtual device dies with its namespace) or its name is taken by another link.
 * Synchronous, in the host.
 */
export function reclaimReturned(saved: SavedDevice): boolean {
  // kernels < 5.16 give no parent device by netlink: sysfs then, when the record has one to compare
  const links = nl
    .listLinks()
    .map((x) => (saved.parentDev && x.parentDev === undefined ? { ...x, ...parentFromSysfs(x) } : x));
  const l = findReturned(links, saved);
  if (!l) return false;
  if (l.name !== saved.device) {
    if (nl.getLink(saved.device)) return false;
    // a rename needs the link down; the kernel set it down when it moved it out of the dying namespace
    if (l.up) nl.setLinkDown(l.index);
    try {
      nl.renameLink(l.index, saved.device);
    } catch (err) {
      throw internalError(
        `failed to rename returned device ${q(l.name)} to ${q(saved.device)}: ${errorReason(err)}`,
        err,
      );
    }
  }
  try {
    nl.setAlias(l.index, '');
  } catch (err) {
    throw internalError(`failed to unset alias of ${q(saved.device)}: ${errorReason(err)}`, err);
  }
  return true;
}
