/**
 * host-local IPAM: drop-in replacement for the reference plugin (same config, results, messages and
 * on-disk store), plus GC and STATUS (spec 1.1.0), which the reference lacks.
 *
 * Locking: one exclusive flock on `<dir>/lock` is held for the whole ADD (all range sets), not per range
 * set as in the reference. The whole ADD is synchronous (no await while locked): it holds the lock for a
 * few milliseconds plus one directory scan. In exchange the directory is scanned once per ADD, not once per range
 * set, and a rollback cannot race with another process's ADD/DEL/GC of the same attachment. Both
 * implementations take the same kernel lock, so they can share a directory.
 */
import { formatIP, type IP, parseIP } from '@cnikit/ip';
import {
  CniError,
  CURRENT_VERSION,
  ErrorCode,
  ErrorList,
  errorReason,
  type IPConfig,
  internalError,
  onDelegateRollback,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import { AddSession, AllocError, type CursorChange, restoreCursors } from './allocator.ts';
import { type IPAMConfig, parseConf } from './config.ts';
import { parseResolvConf } from './dns.ts';
import {
  type RangeSet,
  rangeContains,
  rangeFor,
  rangeSetFree,
  rangeSetSize,
  rangeSetString,
} from './range.ts';
import { type Entry, entryIP, reservationKey, Store } from './store.ts';

function add(req: Request<IPAMConfig>): Result {
  const conf = req.conf;
  // the reference's result always carries a (possibly empty) dns object, printed last
  const dns = conf.resolvConf !== '' ? parseResolvConf(conf.resolvConf) : {};
  const ips: IPConfig[] = [];

  const store = Store.open(conf.dataDir, conf.name);
  try {
    store.lock();
    const session = new AddSession(store, req.containerId, req.ifName, (m) => req.log.error(m));
    try {
      const pending = [...conf.requestedIPs];
      for (let idx = 0; idx < conf.ranges.length; idx++) {
        const set = conf.ranges[idx]!;
        // one requested IP inside this range set (the reference picks one in Go map order)
        let requested: IP | undefined;
        const k = pending.findIndex((ip) => set.some((r) => rangeContains(r, ip)));
        if (k >= 0) requested = pending.splice(k, 1)[0];
        try {
          const a = session.get(set, idx, requested);
          ips.push({
            address: `${formatIP(a.ip)}/${a.range.subnet.prefix}`,
            gateway: formatIP(a.range.gateway),
          });
        } catch (err) {
          session.rollback();
          if (err instanceof AllocError)
            throw new CniError(
              ErrorCode.Internal,
              `failed to allocate for range ${idx}: ${err.message}`,
              err.details,
              {
                cause: err,
              },
            );
          if (CniError.is(err)) {
            throw new CniError(err.code, `failed to allocate for range ${idx}: ${err.msg}`, err.details);
          }
          throw err;
        }
      }
      if (pending.length > 0) {
        session.rollback();
        throw internalError(`failed to allocate all requested IPs: ${pending.map(formatIP).join(' ')}`);
      }
      let cursors: CursorChange[];
      try {
        cursors = session.commit();
      } catch (err) {
        session.rollback();
        throw err;
      }
      // run in-process by a plugin whose ADD then fails: its rollback DELs us, then puts the cursors back, so a
      // failed ADD changes nothing (an exec'd host-local cannot be reached: the reference's behaviour)
      if (cursors.length > 0) {
        const { dataDir, name } = conf;
        onDelegateRollback(() => {
          const s = Store.open(dataDir, name);
          try {
            s.withLock(() => restoreCursors(s, cursors));
          } finally {
            s.close();
          }
        });
      }
    } finally {
      session.finish();
    }
  } finally {
    store.close();
  }
  const result: Result = { cniVersion: CURRENT_VERSION, ips };
  if (conf.routes.length > 0) result.routes = conf.routes;
  result.dns = dns;
  return result;
}

/**
 * The reference's release, run once per range set over one directory listing: remove every file whose
 * trimmed content is `<id>\r\n<ifname>`; when a pass removed none, remove the legacy `<id>` files.
 */
function releaseAll(
  store: Store,
  entries: Entry[],
  containerID: string,
  ifName: string,
  passes: number,
  errors: ErrorList,
): void {
  const key = reservationKey(containerID, ifName);
  const legacy = containerID.trim();
  let live = entries;
  const removeMatching = (match: string): boolean => {
    let found = false;
    const keep: Entry[] = [];
    for (const e of live) {
      if (e.key !== match) {
        keep.push(e);
        continue;
      }
      try {
        store.remove(e.name);
        found = true;
      } catch (err) {
        errors.add(err);
        keep.push(e);
      }
    }
    live = keep;
    return found;
  };
  for (let i = 0; i < passes; i++) {
    if (!removeMatching(key)) removeMatching(legacy);
  }
}

/**
 * DEL without listing the directory, when the prevResult names this attachment's addresses: for every range set,
 * the file of a prevResult address in that set (its name is the address) must hold this container+interface's
 * current-format reservation; those files are removed and nothing else is read. A container's reservations are all
 * written by one ADD of one range set each (the duplicate check forbids a second), so this removes what the scan
 * would. False when that cannot be told (no prevResult, an address missing or held by someone else, a range set
 * without one): nothing was changed and the caller scans, like the reference.
 */
function releaseNamed(store: Store, req: Request<IPAMConfig>, sets: readonly RangeSet[]): boolean {
  const prev = req.prevResult?.ips;
  if (!prev || prev.length === 0 || sets.length === 0) return false;
  const key = reservationKey(req.containerId, req.ifName);
  const names: string[] = [];
  for (const set of sets) {
    let found: string | undefined;
    for (const c of prev) {
      const ip = parseIP(c.address.split('/')[0] ?? '');
      if (!ip || !rangeFor(set, ip)) continue;
      const name = formatIP(ip);
      if (store.readReservation(name) === key) {
        found = name;
        break;
      }
    }
    if (!found) return false;
    if (!names.includes(found)) names.push(found);
  }
  for (const name of names) store.remove(name);
  return true;
}

/** DEL releases, it never creates: no store directory (nothing was ever reserved there) is success. */
function del(req: Request<IPAMConfig>): void {
  const conf = req.conf;
  const store = Store.openExisting(conf.dataDir, conf.name);
  if (!store) return;
  const errors = new ErrorList();
  try {
    store.withLock(() => {
      store.useIndex(); // keeps the listing index valid through the release (reads only the index)
      if (releaseNamed(store, req, conf.ranges)) return;
      releaseAll(store, store.scan().entries, req.containerId, req.ifName, conf.ranges.length, errors);
    });
  } finally {
    store.close();
  }
  // the reference joins the release errors with ";"
  errors.throwIfAny({ code: ErrorCode.IOFailure, separator: ';' });
}

function check(req: Request<IPAMConfig>): void {
  const conf = req.conf;
  // CHECK only reads: a missing store directory is a missing reservation, and is not created
  const store = Store.openExisting(conf.dataDir, conf.name);
  let found = false;
  if (store) {
    try {
      found = store.withLock(() => {
        const { entries } = store.scan();
        const key = reservationKey(req.containerId, req.ifName);
        const legacy = req.containerId.trim();
        return entries.some((e) => e.key === key) || entries.some((e) => e.key === legacy);
      });
    } finally {
      store.close();
    }
  }
  if (!found) throw internalError(`host-local: Failed to find address added by container ${req.containerId}`);
}

/**
 * GC: remove every reservation of this network whose container+interface is not a valid attachment.
 * Only files named by an IP address in `<dataDir>/<name>/` are considered; a legacy ID-only file is kept
 * when any valid attachment has its container ID. Keeps going past errors and reports them all.
 */
function gc(req: Request<IPAMConfig>): void {
  const conf = req.conf;
  Store.dirFor(conf.dataDir, conf.name); // validates the name and dataDir first
  // skel sets validAttachments only when the runtime sent a non-null list (either key, any case).
  const valid = req.validAttachments;
  if (!valid) {
    req.log.warn('GC without cni.dev/valid-attachments: nothing removed');
    return;
  }
  const keys = new Set(valid.map((a) => reservationKey(a.containerID, a.ifname)));
  const ids = new Set(valid.map((a) => a.containerID.trim()));
  const store = Store.openExisting(conf.dataDir, conf.name);
  if (!store) return;
  const errors = new ErrorList();
  try {
    store.withLock(() => {
      const { entries, symlinks } = store.scan();
      // a symlink named like an address keeps it taken; it is nobody's reservation and is left to the operator
      for (const name of symlinks) {
        if (entryIP({ name, key: '' }))
          req.log.warn(`GC: ${store.dir}/${name} is a symlink, not a reservation: kept`);
      }
      for (const e of entries) {
        const ip = entryIP(e);
        if (!ip || formatIP(ip) !== e.name) continue;
        const keep = e.key.includes('\r\n') ? keys.has(e.key) : e.key !== '' && ids.has(e.key);
        if (keep) continue;
        errors.run('', () => store.remove(e.name));
      }
    });
  } finally {
    store.close();
  }
  errors.throwIfAny({ code: ErrorCode.IOFailure, separator: '; ', prefix: 'GC: ' });
}

/**
 * STATUS: the configuration must load, and the store must be usable: `<dataDir>/<name>` exists or can be
 * created, is a directory, its `lock` file can be opened, and a file can be created, written and removed
 * in it. Any failure of the store → code 50 (plugin not available) with the reason. A range set with no free
 * address left (an ADD needs one of each) → code 50 naming the set and its size.
 */
function status(req: Request<IPAMConfig>): void {
  const conf = req.conf;
  let store: Store | undefined;
  let full: RangeSet | undefined;
  try {
    store = Store.open(conf.dataDir, conf.name);
    const s = store;
    s.withLock(() => {
      const { names } = s.scan(); // first: the listing index stays usable through the write test below
      s.dropTemp(s.writeTemp('status'));
      full = conf.ranges.find((set) => rangeSetFree(set, names) <= 0n);
    });
  } catch (err) {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `host-local store is not usable: ${errorReason(err)}`,
      '',
      {
        cause: err,
      },
    );
  } finally {
    store?.close();
  }
  if (full)
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `host-local: no IP addresses available in range set ${rangeSetString(full)} (${rangeSetSize(full)} addresses, all allocated)`,
    );
}

export const plugin: Plugin<IPAMConfig> = {
  name: 'host-local',
  ipam: true,
  about: `CNI host-local plugin cnikit ${VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
