/**
 * What moving a device into a namespace loses (its addresses, its up state), kept from ADD to DEL in a small JSON
 * file per attachment: `<dataDir>/<network>/<containerID>-<ifName>`, written atomically in a symlink-proof
 * directory (StateDir). The reference keeps only the original name (in the alias) and leaves the device down
 * without addresses after DEL.
 */
import * as nl from '@cnikit/netlink';
import { StateDir } from '@cnikit/sys';

export interface SavedAddr {
  cidr: string;
  scope: number;
  /** IPv4 broadcast as it was (undefined: none). */
  broadcast?: string;
  label?: string;
}

export interface SavedDevice {
  /** The host name of the device (also in its alias while it is in the container). */
  device: string;
  mac: string;
  up: boolean;
  addrs: SavedAddr[];
}

export const stateName = (containerID: string, ifName: string) => `${containerID}-${ifName}`;

/** The link's addresses that a namespace move drops and that a re-add restores (not the kernel's fe80::/64). */
export function captureDevice(name: string): SavedDevice {
  const l = nl.getLinkOrThrow(name);
  const addrs = nl
    .listAddrs({ link: l.index })
    .filter((a) => !(a.family === 6 && a.scope === 253))
    .map((a) => {
      const s: SavedAddr = { cidr: a.cidr, scope: a.scope };
      if (a.broadcast) s.broadcast = a.broadcast;
      if (a.label && a.label !== l.name) s.label = a.label;
      return s;
    });
  return { device: l.name, mac: l.mac, up: l.up, addrs };
}

/** Puts the saved addresses back and brings the link up when it was. Returns the failures (keeps going). */
export function restoreDevice(saved: SavedDevice): string[] {
  const errors: string[] = [];
  for (const a of saved.addrs) {
    try {
      nl.addAddr(saved.device, a.cidr, {
        scope: a.scope,
        broadcast: a.broadcast ?? false,
        label: a.label,
        noDad: a.cidr.includes(':'),
      });
    } catch (err) {
      if (!nl.isExistsError(err))
        errors.push(
          `failed to restore address ${a.cidr} on ${JSON.stringify(saved.device)}: ${(err as Error).message}`,
        );
    }
  }
  if (saved.up) {
    try {
      nl.setLinkUp(saved.device);
    } catch (err) {
      errors.push(`failed to set ${JSON.stringify(saved.device)} up: ${(err as Error).message}`);
    }
  }
  return errors;
}

function netDir(dataDir: string, network: string, create: boolean): StateDir | undefined {
  const root = create
    ? StateDir.open(dataDir, { create: true, follow: true })
    : StateDir.openIfExists(dataDir, { follow: true });
  if (!root) return undefined;
  try {
    return create ? root.openDir(network, { create: true }) : root.openDirIfExists(network);
  } finally {
    root.close();
  }
}

export function saveState(dataDir: string, network: string, name: string, saved: SavedDevice): void {
  const dir = netDir(dataDir, network, true)!;
  try {
    dir.writeAtomic(name, `${JSON.stringify(saved)}\n`);
  } finally {
    dir.close();
  }
}

export function readState(dataDir: string, network: string, name: string): SavedDevice | undefined {
  const dir = netDir(dataDir, network, false);
  if (!dir) return undefined;
  try {
    const data = dir.read(name);
    if (!data) return undefined;
    try {
      return JSON.parse(data.toString('utf8')) as SavedDevice;
    } catch {
      return undefined;
    }
  } finally {
    dir.close();
  }
}

/** Removes the attachment's state, and the temp files of state writes killed before their rename (issue 20). */
export function removeState(dataDir: string, network: string, name: string): void {
  const dir = netDir(dataDir, network, false);
  if (!dir) return;
  try {
    dir.remove(name);
    dir.removeStaleTemps();
  } finally {
    dir.close();
  }
}

/** GC: every state file of the network whose attachment is not in `valid` (names as `stateName`). */
export function gcStates(dataDir: string, network: string, valid: ReadonlySet<string>): string[] {
  const dir = netDir(dataDir, network, false);
  if (!dir) return [];
  try {
    const stale = dir.list().filter((n) => !n.startsWith('.') && !valid.has(n));
    for (const n of stale) dir.remove(n);
    dir.removeStaleTemps();
    return stale;
  } finally {
    dir.close();
  }
}
