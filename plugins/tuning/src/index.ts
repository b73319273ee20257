/**
 * tuning: sysctls and link attributes of CNI_IFNAME inside the container namespace, restored on DEL
 * (reference: plugins/meta/tuning, plugins.md §3).
 *
 * - ADD: duplicate-sysctl check, config (MAC precedence args.cni > runtimeConfig > CNI_ARGS > mac), allow-list,
 *   prevResult required; in the namespace: sysctls, the backup of just the attributes that change, then MAC,
 *   promisc, MTU, allmulti, txqueuelen. Result = prevResult with the new MAC on the CNI_IFNAME interface. A
 *   failed ADD restores what it changed (sysctls included) and leaves no backup (the reference leaves both).
 * - ADD refuses a link change it could not undo (the current MAC is not a unicast Ethernet address, e.g. lo's
 *   all-zero one; an MTU of 0): the reference makes it and its DEL silently leaves it.
 * - DEL: restores MTU, MAC, promisc, allmulti, txqueuelen from the backup and removes it; succeeds after a
 *   successful parse, except when the kernel refuses a restore: then DEL fails naming each attribute it could not
 *   restore and keeps just those in the backup for the retry (the reference exits 0 and keeps the whole backup).
 *   A backup that can never be restored (namespace or interface gone, unreadable) is removed.
 * - CHECK: sysctl values and link attributes against the config, with the reference's messages.
 * - DEL and GC also remove the temp files of backup writes killed before their rename.
 * - GC: removes backups (of this network) whose attachment is not valid. STATUS: code 50 if the data dir is unusable.
 */
import {
  formatMac,
  getLink,
  invalidMacMessage,
  isNetnsGoneForDel,
  type Link,
  parseMac,
  readProcSys,
  setAllMulticast,
  setMac,
  setMtu,
  setPromisc,
  setTxQueueLen,
  withNetns,
  writeProcSys,
} from '@cnikit/netlink';
import {
  CniError,
  ErrorCode,
  ErrorList,
  errorReason,
  internalError,
  type Plugin,
  type Request,
  type Result,
  Rollback,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel/plugin';
import type { StateDir } from '@cnikit/sys';
import { type Backup, backupName, formatBackup, openDataDir, ownerName, parseBackup } from './backup.ts';
import {
  changesLink,
  parseConf,
  readAllowlist,
  sysctlFileName,
  type TuningConf,
  validateSysctls,
} from './config.ts';

function linkOf(ifName: string): Link {
  const link = getLink(ifName);
  if (!link) throw internalError(`failed to get ${JSON.stringify(ifName)}: Link not found`);
  return link;
}

/** One attribute change with the reference's error wrapping (`failed to get "eth0": …` for a lookup failure). */
function change(ifName: string, fn: (link: Link) => void): void {
  fn(linkOf(ifName));
}

function changeMac(ifName: string, mac: string): void {
  const bytes = parseMac(mac);
  if (!bytes) throw internalError(`invalid args ${mac} for MAC addr: ${invalidMacMessage(mac)}`);
  change(ifName, (l) => setMac(l.index, formatMac(bytes)));
}

/** The attributes ADD is about to change, as they are now. */
function currentValues(conf: TuningConf, link: Link): Backup {
  const b: Backup = {};
  if (conf.mac !== '') b.mac = link.mac;
  if (conf.promisc) b.promisc = link.promisc;
  if (conf.mtu !== 0) b.mtu = link.mtu;
  if (conf.allmulti !== undefined) b.allmulti = link.allmulti;
  if (conf.txQLen !== undefined) b.txQLen = link.txqlen;
  return b;
}

/**
 * Why a value read before ADD could not be written back by DEL, or undefined: the kernel accepts only a unicast,
 * non-zero Ethernet address (lo reads 00:00:00:00:00:00, a tunnel has no address) and only a positive MTU, and a
 * backup cannot even record an MTU of 0. ADD refuses such a change instead of making one it cannot undo.
 */
function unrestorable(b: Backup): string | undefined {
  if (b.mac !== undefined) {
    const bytes = parseMac(b.mac);
    if (!bytes || bytes.every((x) => x === 0) || (bytes[0] as number) & 1)
      return `its MAC address ${b.mac || '(none)'} could not be restored (only a unicast Ethernet address can be set)`;
  }
  if (b.mtu !== undefined && b.mtu <= 0) return `its MTU ${b.mtu} could not be restored`;
  return undefined;
}

/**
 * Restore in the reference's order: MTU, MAC, promisc, allmulti, txqueuelen; every failure is reported, and
 * `failed` holds the attributes that were not restored (what a DEL retry still has to do).
 */
function restore(ifName: string, b: Backup): { errors: ErrorList; failed: Backup } {
  const errors = new ErrorList();
  const failed: Backup = {};
  const step = <K extends keyof Backup>(
    key: K,
    what: string,
    fn: (l: Link, v: NonNullable<Backup[K]>) => void,
  ) => {
    const v = b[key];
    if (v === undefined) return;
    const before = errors.length;
    errors.run(`failed to restore ${what}`, () => change(ifName, (l) => fn(l, v as NonNullable<Backup[K]>)));
    if (errors.length > before) failed[key] = v;
  };
  if (b.mtu) step('mtu', 'MTU', (l, v) => setMtu(l.index, v));
  if (b.mac) step('mac', 'MAC address', (_l, v) => changeMac(ifName, v));
  step('promisc', 'promiscuous mode', (l, v) => setPromisc(l.index, v));
  step('allmulti', 'all-multicast mode', (l, v) => setAllMulticast(l.index, v));
  step('txQLen', 'transmit queue length', (l, v) => setTxQueueLen(l.index, v));
  return { errors, failed };
}

/** Run `fn`; a netlink failure prints as Go prints the raw error (`invalid argument`), code 999. */
function linkOp<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw CniError.is(err) ? err : internalError(errorReason(err), err);
  }
}

/** /proc/sys access; failures keep Go's *PathError text (`open /proc/sys/net/…: no such file or directory`). */
function procSys<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw internalError((err as Error).message, err);
  }
}

function add(req: Request<TuningConf>): Result {
  const conf = req.conf;
  validateSysctls(
    conf.sysctl.map(([k]) => k),
    readAllowlist(),
  );
  if (!req.prevResult) throw internalError('Required prevResult missing');
  const prev = req.prevResult;
  withNetns(req.netns, () => {
    const undo = new Rollback();
    let dir: StateDir | undefined;
    try {
      for (const [key, value] of conf.sysctl) {
        const file = sysctlFileName(key, req.ifName);
        let old: string | undefined;
        try {
          old = readProcSys(file);
        } catch {
          // unreadable: the write below fails with the reference's message
        }
        procSys(() => writeProcSys(file, value));
        // a value that could not be read (e.g. an unset stable_secret) cannot be put back: the rollback says so
        undo.push(`restore ${file}`, () => {
          if (old === undefined) throw new Error(`its previous value was unreadable, it stays ${value}`);
          writeProcSys(file, old);
        });
      }
      if (changesLink(conf)) {
        const backup = currentValues(
          conf,
          linkOp(() => linkOf(req.ifName)),
        );
        const why = unrestorable(backup);
        if (why) throw internalError(`refusing to change ${JSON.stringify(req.ifName)}: ${why} on DEL`);
        const d = procSys(() => openDataDir(conf.dataDir, true) as StateDir);
        dir = d;
        const name = backupName(req.containerId, req.ifName);
        undo.push('remove the backup', () => {
          d.remove(name);
          d.remove(ownerName(name));
        });
        procSys(() => {
          d.writeAtomic(name, formatBackup(backup));
          d.writeAtomic(ownerName(name), conf.name);
        });
        undo.push('restore the link', () => restore(req.ifName, backup).errors.throwIfAny());
        linkOp(() => {
          if (conf.mac !== '') changeMac(req.ifName, conf.mac);
          if (conf.promisc) change(req.ifName, (l) => setPromisc(l.index, true));
          if (conf.mtu !== 0) change(req.ifName, (l) => setMtu(l.index, conf.mtu));
          if (conf.allmulti !== undefined)
            change(req.ifName, (l) => setAllMulticast(l.index, conf.allmulti as boolean));
          if (conf.txQLen !== undefined)
            change(req.ifName, (l) => setTxQueueLen(l.index, conf.txQLen as number));
        });
      }
    } catch (err) {
      undo.undoAllSync(req.log);
      throw err;
    } finally {
      dir?.close();
    }
  });
  if (conf.mac !== '') {
    for (const i of prev.interfaces ?? []) if (i.name === req.ifName) i.mac = conf.mac;
  }
  return prev;
}

function del(req: Request<TuningConf>): void {
  const conf = req.conf;
  let dir: StateDir | undefined;
  try {
    dir = openDataDir(conf.dataDir, false);
  } catch (err) {
    // e.g. a symlink in place of the data directory: nothing of ours can be in it; DEL still succeeds
    req.log.warn('DEL: %s', (err as Error).message);
    return;
  }
  if (!dir) return;
  try {
    dir.removeStaleTemps(); // temp files of backup writes killed before their rename
  } catch (err) {
    req.log.warn('DEL: stale temp files not removed: %s', errorReason(err));
  }
  const name = backupName(req.containerId, req.ifName);
  let failure: CniError | undefined;
  const drop = () => {
    dir.remove(name);
    dir.remove(ownerName(name));
  };
  try {
    let raw: Buffer | undefined;
    try {
      raw = dir.read(name);
    } catch (err) {
      req.log.warn('unreadable backup %s removed: %s', dir.display(name), errorReason(err));
      drop();
      return;
    }
    if (raw === undefined) {
      dir.remove(ownerName(name));
      return;
    }
    const backup = parseBackup(raw.toString('utf8'));
    if (!backup) {
      req.log.warn('corrupt backup %s removed', dir.display(name));
      drop();
      return;
    }
    if (!req.netns) {
      // the namespace is already gone for the runtime: nothing can be restored any more
      drop();
      return;
    }
    let restored: boolean;
    try {
      restored = withNetns(req.netns, () => {
        if (!getLink(req.ifName)) return true; // interface gone: nothing to restore
        const { errors, failed } = restore(req.ifName, backup);
        failure = errors.combined();
        if (!failure) return true;
        // a half-restore is reported, never silent: the backup keeps just what is still to be restored
        dir.writeAtomic(name, formatBackup(failed));
        return false;
      });
    } catch (err) {
      if (!isNetnsGoneForDel(err, req.netns)) req.log.warn('DEL: %s', errorReason(err));
      restored = isNetnsGoneForDel(err, req.netns);
    }
    if (restored) drop();
  } catch (err) {
    // DEL succeeds after a successful parse, like the reference, unless an attribute could not be restored
    req.log.warn('DEL: %s', errorReason(err));
  } finally {
    dir.close();
  }
  if (failure) throw failure;
}

function check(req: Request<TuningConf>): void {
  const conf = req.conf;
  if (!req.prevResult) throw internalError('Required prevResult missing');
  withNetns(req.netns, () =>
    linkOp(() => {
      for (const [key, want] of conf.sysctl) {
        const file = sysctlFileName(key, req.ifName);
        const cur = procSys(() => readProcSys(file));
        if (cur !== want)
          throw internalError(
            `Error: Tuning configured value of ${file} is ${want}, current value is ${cur}`,
          );
      }
      const link = getLink(req.ifName);
      if (!link) throw internalError(`Cannot find container link ${req.ifName}`);
      const ifn = req.ifName;
      if (conf.mac !== '') {
        const want = parseMac(conf.mac);
        if (!want || formatMac(want) !== link.mac)
          throw internalError(
            `Error: Tuning configured Ethernet of ${ifn} is ${conf.mac}, current value is ${link.mac}`,
          );
      }
      if (conf.promisc !== link.promisc)
        throw internalError(
          `Error: Tuning link ${ifn} configured promisc is ${conf.promisc}, current value is ${link.promisc ? 1 : 0}`,
        );
      if (conf.mtu !== 0 && conf.mtu !== link.mtu)
        throw internalError(
          `Error: Tuning configured MTU of ${ifn} is ${conf.mtu}, current value is ${link.mtu}`,
        );
      if (conf.allmulti !== undefined && conf.allmulti !== link.allmulti)
        throw internalError(
          `Error: Tuning configured all-multicast mode of ${ifn} is ${conf.allmulti}, current value is ${link.allmulti}`,
        );
      if (conf.txQLen !== undefined && conf.txQLen !== link.txqlen)
        throw internalError(
          `Error: Tuning configured Transmit Queue Length of ${ifn} is ${conf.txQLen}, current value is ${link.txqlen}`,
        );
    }),
  );
}

function gc(req: Request<TuningConf>): void {
  const conf = req.conf;
  const dir = openDataDir(conf.dataDir, false);
  if (!dir) return;
  try {
    const valid = new Set((req.validAttachments ?? []).map((a) => backupName(a.containerID, a.ifname)));
    const errors = new ErrorList();
    errors.run('failed to remove stale temp files', () => dir.removeStaleTemps());
    for (const file of dir.list()) {
      if (!file.endsWith('.json.network')) continue;
      const backup = file.slice(0, -'.network'.length);
      errors.run(`failed to remove ${dir.display(backup)}`, () => {
        if (dir.read(file)?.toString('utf8') !== conf.name || valid.has(backup)) return;
        dir.remove(backup);
        dir.remove(file);
      });
    }
    errors.throwIfAny();
  } finally {
    dir.close();
  }
}

function status(req: Request<TuningConf>): void {
  const conf = req.conf;
  try {
    const dir = openDataDir(conf.dataDir, true) as StateDir;
    try {
      dir.writeAtomic('.status', '');
      dir.remove('.status');
    } finally {
      dir.close();
    }
  } catch (err) {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `tuning data directory is not usable: ${(err as Error).message}`,
    );
  }
}

export const plugin: Plugin<TuningConf> = {
  name: 'tuning',
  ipam: false,
  about: `CNI tuning plugin cnikit ${VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
