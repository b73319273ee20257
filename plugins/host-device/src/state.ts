/**
 * What moving a device into a namespace loses (its addresses, its up state), what the container may change (MAC,
 * MTU, alias) and what identifies the hardware when the kernel hands it back after its namespace died without DEL
 * (permanent MAC, parent bus device), kept from ADD to DEL in a small JSON
 * file per attachment: `<dataDir>/<network>/<containerID>-<ifName>`, written atomically in a symlink-proof
 * directory (StateDir). The reference keeps only the original name (in the alias) and leaves the device down
 * without addresses after DEL.
 */
import * as nl from '@cnikit/netlink';
import { StateDir } from '@cnikit/sys';
import { parentFromSysfs } from './sysfs.ts';

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
  /** The MAC at ADD (restored by DEL: a container may change it). */
  mac: string;
  up: boolean;
  addrs: SavedAddr[];
  /** The MTU at ADD (0 or missing in older files: not restored). */
  mtu?: number;
  /** The alias the device had before ADD replaced it with its name ('' or missing: none). */
  alias?: string;
  /** IFLA_PERM_ADDRESS: the burnt-in MAC ('' for virtual devices). */
  permMac?: string;
  /** The device behind the link: bus ('pci', 'auxiliary') and address ('0000:03:00.0'); missing for virtual ones. */
  parentBus?: string;
  parentDev?: string;
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
  const saved: SavedDevice = { device: l.name, mac: l.mac, up: l.up, addrs, mtu: l.mtu };
  if (l.alias) saved.alias = l.alias;
  if (l.permMac) saved.permMac = l.permMac;
  const parent = l.parentDev !== undefined ? l : parentFromSysfs(l);
  if (parent.parentDev) {
    saved.parentDev = parent.parentDev;
    saved.parentBus = parent.parentBus ?? '';
  }
  return saved;
}

/**
 * Puts the saved MAC, MTU, alias and addresses back and brings the link up when it was (MAC and MTU first: some
 * drivers change them only while the link is down, as it is after a move). Returns the failures (keeps going).
 */
export function restoreDevice(saved: SavedDevice): string[] {
  const errors: string[] = [];
  const dev = JSON.stringify(saved.device);
  let now: nl.Link;
  try {
    now = nl.getLinkOrThrow(saved.device);
  } catch (err) {
    return [`failed to find ${dev} to restore it: ${(err as Error).message}`];
  }
  const step = (what: string, fn: () => void) => {
    try {
      fn();
    } catch (err) {
      errors.push(`failed to restore ${what} of ${dev}: ${(err as Error).message}`);
    }
  };
  if (saved.mac && now.mac.toLowerCase() !== saved.mac.toLowerCase())
    step(`MAC ${saved.mac}`, () => nl.setMac(now.index, saved.mac));
  if (saved.mtu && now.mtu !== saved.mtu) step(`MTU ${saved.mtu}`, () => nl.setMtu(now.index, saved.mtu!));
  if (saved.alias) step('alias', () => nl.setAlias(now.index, saved.alias!));
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
    return parseSaved(dir.read(name));
  } finally {
    dir.close();
  }
}

function parseSaved(data: Buffer | undefined | null): SavedDevice | undefined {
  if (!data) return undefined;
  try {
    return JSON.parse(data.toString('utf8')) as SavedDevice;
  } catch {
    return undefined;
  }
}

/** Removes the attachment's state, and the temp files of state writes killed before their rename. */
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

/**
 * GC: every state file of the network whose attachment is not in `valid` (names as `stateName`). `before` runs
 * first with each stale file's contents; when it throws, the file stays (a later GC or DEL retries) and the error
 * is collected in `errors`.
 */
export function gcStates(
  dataDir: string,
  network: string,
  valid: ReadonlySet<string>,
  before?: (saved: SavedDevice) => void,
  errors: string[] = [],
): string[] {
  const dir = netDir(dataDir, network, false);
  if (!dir) return [];
  try {
    const stale = dir.list().filter((n) => !n.startsWith('.') && !valid.has(n));
    const removed: string[] = [];
    for (const n of stale) {
      if (before) {
        const saved = parseSaved(dir.read(n));
        try {
          if (saved) before(saved);
        } catch (err) {
          errors.push(`${n}: ${(err as Error).message}`);
          continue;
        }
      }
      dir.remove(n);
      removed.push(n);
    }
    dir.removeStaleTemps();
    return removed;
  } finally {
    dir.close();
  }
}
