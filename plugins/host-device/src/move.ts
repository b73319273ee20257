/**
 * Moving the host device into the container and back, through a temporary namespace like the reference (a rename
 * in the host or the container could clash with a name there, and rapid renames race with udev/NetworkManager):
 * in: host → temp (rename to the container name, alias = original name) → container (up);
 * out: container → temp (rename back to the alias, alias cleared) → host.
 * Each step undoes the earlier ones when a later one fails, like the reference. Synchronous.
 */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import { errorReason, internalError } from '@cnikit/skel';
import { netnsNew } from '@cnikit/sys';

const q = JSON.stringify;

function quiet(fn: () => void): void {
  try {
    fn();
  } catch {
    // best-effort undo step
  }
}

function tempNetns<T>(fn: (tempFd: number) => T): T {
  let fd: number;
  try {
    fd = netnsNew();
  } catch (err) {
    throw internalError(`failed to create tempNS: ${errorReason(err)}`, err);
  }
  try {
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

/** Moves host link `hostName` into the container as `ifName`, up. Returns the container link. */
export function moveLinkIn(hostName: string, containerFd: number, ifName: string): nl.Link {
  const host = nl.getLink(hostName);
  if (!host) throw internalError('Link not found');
  const wasUp = host.up;
  try {
    return tempNetns((tempFd) => {
      try {
        nl.moveToNetns(host.index, tempFd);
      } catch (err) {
        throw internalError(`failed to move ${q(hostName)} to tempNS: ${errorReason(err)}`, err);
      }
      return nl.withNetnsFd(tempFd, (hostNs) => {
        const back = (idx: number) => quiet(() => nl.moveToNetns(idx, hostNs.fd));
        const t = nl.getLink(hostName);
        if (!t) throw internalError(`failed to find ${q(hostName)} in tempNS: Link not found`);
        try {
          nl.renameLink(t.index, ifName);
        } catch (err) {
          back(t.index);
          throw internalError(
            `failed to rename host device ${q(hostName)} to ${q(ifName)}: ${errorReason(err)}`,
            err,
          );
        }
        const undoTemp = () => {
          quiet(() => nl.setAlias(t.index, ''));
          quiet(() => nl.renameLink(t.index, hostName));
          back(t.index);
        };
        try {
          nl.setAlias(t.index, hostName);
        } catch (err) {
          undoTemp();
          throw internalError(`failed to set alias to ${q(hostName)}: ${errorReason(err)}`, err);
        }
        try {
          nl.moveToNetns(t.index, containerFd);
        } catch (err) {
          undoTemp();
          throw internalError(
            `failed to move ${q(ifName)} (host: ${q(hostName)}) to container NS: ${errorReason(err)}`,
            err,
          );
        }
        try {
          return nl.withNetnsFd(containerFd, () => {
            const c = nl.getLink(ifName);
            if (!c) throw internalError(`failed to find ${q(ifName)} in container NS: Link not found`);
            try {
              nl.setLinkUp(c.index);
            } catch (err) {
              quiet(() => nl.moveToNetns(c.index, tempFd));
              throw internalError(`failed to set ${q(ifName)} up: ${errorReason(err)}`, err);
            }
            return nl.getLinkOrThrow(c.index);
          });
        } catch (err) {
          // back in tempNS under a new index
          const again = nl.getLink(ifName);
          if (again) {
            quiet(() => nl.setAlias(again.index, ''));
            quiet(() => nl.renameLink(again.index, hostName));
            back(again.index);
          }
          throw err;
        }
      });
    });
  } catch (err) {
    // moving between namespaces sets the link down: restore its state in the host
    if (wasUp) quiet(() => nl.setLinkUp(hostName));
    throw err;
  }
}

/**
 * Moves the container's `ifName` back to the host under its original name (the alias). Returns that name, or
 * undefined when the container has no such link (DEL is idempotent). The link is left down, as the reference does;
 * the caller restores the saved state.
 */
export function moveLinkOut(containerFd: number, ifName: string): string | undefined {
  return tempNetns((tempFd) => {
    const moved = nl.withNetnsFd(containerFd, () => {
      const c = nl.getLink(ifName);
      if (!c) return undefined;
      if (!c.alias) throw internalError(`failed to find original ifname for ${q(ifName)} (alias is not set)`);
      try {
        nl.moveToNetns(c.index, tempFd);
      } catch (err) {
        throw internalError(`failed to move ${q(ifName)} to tempNS: ${errorReason(err)}`, err);
      }
      return { up: c.up };
    });
    if (!moved) return undefined;
    const restoreUp = () => {
      if (moved.up) quiet(() => nl.withNetnsFd(containerFd, () => nl.setLinkUp(ifName)));
    };
    try {
      return nl.withNetnsFd(tempFd, (hostNs) => {
        const t = nl.getLink(ifName);
        if (!t) throw internalError(`failed to find ${q(ifName)} in tempNS: Link not found`);
        const original = t.alias ?? '';
        const toContainer = () => quiet(() => nl.moveToNetns(t.index, containerFd));
        try {
          nl.renameLink(t.index, original);
        } catch (err) {
          toContainer();
          throw internalError(
            `failed to rename device ${q(ifName)} to ${q(original)}: ${errorReason(err)}`,
            err,
          );
        }
        try {
          nl.setAlias(t.index, '');
        } catch (err) {
          quiet(() => nl.renameLink(t.index, ifName));
          toContainer();
          throw internalError(`failed to unset alias of ${q(original)}: ${errorReason(err)}`, err);
        }
        try {
          nl.moveToNetns(t.index, hostNs.fd);
        } catch (err) {
          quiet(() => nl.setAlias(t.index, original));
          quiet(() => nl.renameLink(t.index, ifName));
          toContainer();
          throw internalError(`failed to move ${q(original)} to hostNS: ${errorReason(err)}`, err);
        }
        return original;
      });
    } catch (err) {
      restoreUp();
      throw err;
    }
  });
}

/**
 * The device of a namespace that died without DEL: the kernel returns a physical device to the initial namespace
 * under its container-side name (`dev%d` when that name is taken there), alias kept. Found by the MAC and alias
 * that ADD saved, it gets its original name back and its alias cleared. Returns false when no such link is here
 * (a virtual device dies with its namespace; a link of that name already exists). Synchronous, in the host.
 */
export function reclaimReturned(saved: { device: string; mac: string }): boolean {
  if (!saved.mac || !saved.device) return false;
  const mac = saved.mac.toLowerCase();
  const l = nl.listLinks().find((x) => x.mac.toLowerCase() === mac && x.alias === saved.device);
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
