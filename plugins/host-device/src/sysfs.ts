/**
 * Which host link a host-device config names, and whether its PCI function is bound to a userspace (DPDK) driver:
 * the reference's lookups over sysfs (`/sys/bus/pci/devices`, `/sys/bus/auxiliary/devices`, `/sys/devices/…/net`)
 * and the link list. The sysfs root is a field of `sysfs` so that tests can point it at a fake tree (PCI and
 * auxiliary devices cannot be created in a test namespace); the link list is a parameter.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, normalize } from 'node:path';
import { formatMac, invalidMacMessage, parseMac } from '@cnikit/netlink';
import { CniError, ErrorCode } from '@cnikit/skel';

/** The sysfs mount the lookups read (a test seam: `/sys` in production). */
export const sysfs = { root: '/sys' };

const pciDevices = () => join(sysfs.root, 'bus', 'pci', 'devices');
const auxDevices = () => join(sysfs.root, 'bus', 'auxiliary', 'devices');
/** A configured `/sys/...` path inside the current sysfs root. */
const inRoot = (p: string) => join(sysfs.root, p.slice('/sys'.length));
/** Back to the `/sys/...` spelling for messages. */
const display = (p: string) => (sysfs.root === '/sys' ? p : `/sys${p.slice(sysfs.root.length)}`);

const USERSPACE_DRIVERS = ['vfio-pci', 'uio_pci_generic', 'igb_uio'];

function exists(p: string): boolean {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
}

export interface DeviceChoice {
  pciBusID: string;
  auxDevice: string;
}

/** `handleDeviceID`: runtimeConfig.deviceID is a PCI address or an auxiliary device, else an error. */
export function resolveDeviceID(deviceID: string, pciBusID: string): DeviceChoice {
  if (deviceID === '') return { pciBusID, auxDevice: '' };
  if (exists(join(pciDevices(), deviceID))) return { pciBusID: deviceID, auxDevice: '' };
  if (exists(join(auxDevices(), deviceID))) return { pciBusID: '', auxDevice: deviceID };
  throw new CniError(
    ErrorCode.InvalidNetworkConfig,
    `runtime config DeviceID ${deviceID} not found or unsupported`,
  );
}

/** Go's filepath.EvalSymlinks error for a path that does not resolve: `lstat <first missing prefix>: …`. */
function evalSymlinksError(path: string, err: NodeJS.ErrnoException): string {
  const parts = path.split('/').filter(Boolean);
  let cur = '';
  for (const part of parts) {
    cur += `/${part}`;
    try {
      lstatSync(cur);
    } catch {
      return `lstat ${display(cur)}: no such file or directory`;
    }
  }
  return `${err.syscall ?? 'lstat'} ${display(path)}: ${err.code === 'ENOENT' ? 'no such file or directory' : err.message}`;
}

/** `hasDpdkDriver`: the PCI function's driver is a userspace one (the device then never becomes a netdev). */
export function hasDpdkDriver(pciAddr: string): boolean {
  const link = join(pciDevices(), pciAddr, 'driver');
  let target: string;
  try {
    target = realpathSync(link);
  } catch (err) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `error with host device: ${evalSymlinksError(link, err as NodeJS.ErrnoException)}`,
    );
  }
  return USERSPACE_DRIVERS.includes(basename(target));
}

/** The link name of the first entry of a `…/net` directory (`linkFromPath`). */
function nameFromNetDir(dir: string): string {
  let entries: string[];
  try {
    entries = readdirSync(dir).sort();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'ENOENT'
        ? 'no such file or directory'
        : e.code === 'ENOTDIR'
          ? 'not a directory'
          : e.message;
    throw new Error(`failed to read directory ${display(dir)}: "open ${display(dir)}: ${why}"`);
  }
  if (entries.length === 0) throw new Error(`failed to find network device in path ${display(dir)}`);
  return entries[0]!;
}

export interface LinkLike {
  name: string;
  mac: string;
}

/**
 * `getLink`: the host link named by device, hwaddr, kernelpath, pciBusID or the auxiliary device (in that order of
 * precedence). Returns its name; `links` is the host's link list (for hwaddr). Errors are the reference's texts
 * (the caller prefixes "failed to find host device: ").
 */
export function findHostLink(
  sel: { device: string; hwaddr: string; kernelpath: string; pciBusID: string; auxDevice: string },
  links: () => readonly LinkLike[],
  linkExists: (name: string) => boolean,
): string {
  const byName = (name: string) => {
    if (!linkExists(name)) throw new Error('Link not found');
    return name;
  };
  if (sel.device) return byName(sel.device);
  if (sel.hwaddr) {
    const mac = parseMac(sel.hwaddr);
    if (!mac)
      throw new Error(
        `failed to parse MAC address ${JSON.stringify(sel.hwaddr)}: ${invalidMacMessage(sel.hwaddr)}`,
      );
    const want = formatMac(mac);
    const l = links().find((x) => x.mac === want);
    if (l) return l.name;
  } else if (sel.kernelpath) {
    const kp = sel.kernelpath;
    if (!isAbsolute(kp) || !kp.startsWith('/sys/devices/'))
      throw new Error(
        `kernel device path ${JSON.stringify(kp)} must be absolute and begin with /sys/devices/`,
      );
    return byName(nameFromNetDir(join(inRoot(normalize(kp)), 'net')));
  } else if (sel.pciBusID) {
    let netDir = join(pciDevices(), sel.pciBusID, 'net');
    try {
      lstatSync(netDir);
    } catch {
      const base = join(pciDevices(), sel.pciBusID);
      let virtio: string | undefined;
      try {
        virtio = readdirSync(base)
          .filter((e) => e.startsWith('virtio'))
          .sort()
          .map((e) => join(base, e, 'net'))
          .find((d) => exists(d));
      } catch {
        virtio = undefined;
      }
      if (!virtio) throw new Error(`no net directory under pci device ${sel.pciBusID}`);
      netDir = virtio;
    }
    return byName(nameFromNetDir(netDir));
  } else if (sel.auxDevice) {
    return byName(nameFromNetDir(join(auxDevices(), sel.auxDevice, 'net')));
  }
  throw new Error('failed to find physical interface');
}

/**
 * The bus device behind a link from sysfs (`class/net/<name>/device` and its `subsystem`): for kernels without
 * IFLA_PARENT_DEV_NAME (< 5.16). Only when that entry's `ifindex` and `address` are the link's: a sysfs mounted for
 * another network namespace shows other links under the same names. Empty for virtual devices.
 */
export function parentFromSysfs(l: { name: string; index: number; mac: string }): {
  parentBus?: string;
  parentDev?: string;
} {
  const dir = join(sysfs.root, 'class', 'net', l.name);
  try {
    const attr = (f: string) => readFileSync(join(dir, f), 'utf8').trim();
    if (Number(attr('ifindex')) !== l.index || attr('address').toLowerCase() !== l.mac.toLowerCase())
      return {};
    const dev = realpathSync(join(dir, 'device'));
    let bus = '';
    try {
      bus = basename(realpathSync(join(dev, 'subsystem')));
    } catch {
      bus = '';
    }
    return { parentBus: bus, parentDev: basename(dev) };
  } catch {
    return {};
  }
}
