/**
 * The host-local disk store, byte-compatible with the reference (`backend/disk`):
 *
 *   <dataDir>/<network>/            mode 0755
 *     lock                          empty, created 0750, flock(LOCK_EX) around every operation
 *     <ip>                          "<containerID trimmed>\r\n<ifname>" (no newline), mode 0600
 *     last_reserved_ip.<rangeID>    the IP text (no newline), mode 0600
 *
 * Legacy reservation files hold only the container ID. The Go host-local and this store can serve the same
 * directory concurrently: both take the same kernel lock before looking at or changing anything.
 *
 * Unlike the reference, a reservation file is never visible half-written: the content goes to a temp file
 * (`.cnikit-<pid>.tmp`, written, fdatasync'ed), which is then hard-linked to the IP's name — link(2) fails
 * with EEXIST when the address is taken, so the reservation stays exclusive — and the temp name is removed.
 * A process killed at any point leaves either no reservation or a complete one (plus, at worst, a stale
 * temp file, which the next locked scan removes: while we hold the lock nobody else is writing one).
 *
 * Path safety (unlike the reference, which follows symlinks everywhere): `<dataDir>` may be a symlink (the
 * operator's configured location), but `<dataDir>/<network>` is opened once with O_NOFOLLOW and every file in
 * it — lock, reservations, last_reserved_ip.N, temp files — is reached relative to that directory descriptor
 * with O_NOFOLLOW (@cnikit/sys StateDir). A symlinked network directory or lock file is refused with code 5
 * by every verb (nothing is created, read or locked through it); a symlinked last_reserved_ip.N is not read
 * (the walk starts at rangeStart, as for any unreadable file) and is replaced by a real file when the ADD
 * succeeds; a symlink named like an IP keeps that address taken but is never read, never counted as a
 * reservation and never removed. Files are read completely (a reservation written by the reference with a
 * very long container ID is still found and released).
 */
import {
  constants as C,
  closeSync,
  type Dirent,
  fdatasyncSync,
  fstatSync,
  mkdirSync,
  readSync,
  writeSync,
} from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { formatIP, type IP, parseIP } from '@cnikit/ip';
import { CniError, ErrorCode } from '@cnikit/skel';
import { errnoMessage, flock, isSysError, StateDir } from '@cnikit/sys';

/** Where the store lives when the config has no (or an empty) `dataDir`, as in the reference. */
export const DEFAULT_DATA_DIR = '/var/lib/cni/networks';
export const LAST_IP_PREFIX = 'last_reserved_ip.';
export const LOCK_FILE = 'lock';
export const LINE_BREAK = '\r\n';
const TMP_PREFIX = '.cnikit-';
/** Initial size of the shared read buffer (grown when a file is larger: files are always read completely). */
const READ_BUF = 4096;

/** A filesystem error worded like Go's `*PathError` (`open /x: permission denied`), as CNI code 5. */
export function goFsError(op: string, path: string, err: unknown): CniError {
  const e = err as NodeJS.ErrnoException;
  // Node's fs errnos are negative; errnoMessage ignores the sign and gives Go's (lower-case strerror) text
  const why = typeof e?.errno === 'number' ? errnoMessage(e.errno) : (e?.message ?? String(err));
  return new CniError(ErrorCode.IOFailure, `${op} ${path}: ${why}`, '', { cause: err });
}

/** A StateDir error (already worded like Go's *PathError, with the path) as CNI code 5. */
function storeError(err: unknown): CniError {
  if (CniError.is(err)) return err;
  if (isSysError(err)) return new CniError(ErrorCode.IOFailure, err.message, '', { cause: err });
  return goFsError('open', '?', err);
}

/** Reject names that would leave `<dataDir>/` (the network name becomes a directory name). */
export function checkNetworkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid network name ${JSON.stringify(name)}: it names the host-local store directory and must not be empty, "." or "..", or contain "/"`,
    );
  }
}

/** dataDir must be an absolute path without `..` components (it is joined with the network name). */
export function checkDataDir(dataDir: string): void {
  if (!isAbsolute(dataDir) || dataDir.includes('\0') || dataDir.split('/').includes('..')) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid dataDir ${JSON.stringify(dataDir)}: must be an absolute path without ".." components`,
    );
  }
}

/** One file of the store directory that may be a reservation. */
export interface Entry {
  /** File name (for reservations: the IP in Go's canonical text). */
  name: string;
  /** Whitespace-trimmed content (Go compares `strings.TrimSpace(content)`). */
  key: string;
}

/** The IP a store file name denotes (parsed on demand: most entries never need it). */
export function entryIP(e: Entry): IP | undefined {
  return parseIP(e.name);
}

/** filepath.Walk visits names in lexical (byte) order; used where the order shows in a message. */
export function byName(a: Entry, b: Entry): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function reservationKey(containerID: string, ifName: string): string {
  return containerID.trim() + LINE_BREAK + ifName;
}

export class Store {
  /** The network directory's path (for messages; every access goes through its descriptor). */
  readonly dir: string;
  readonly #d: StateDir;
  #lockFd = -1;
  #locked = false;
  #tmpSeq = 0;
  #buf = Buffer.allocUnsafe(READ_BUF);

  private constructor(d: StateDir) {
    this.#d = d;
    this.dir = d.path;
  }

  /** The directory a network's reservations live in (validated; not created). */
  static dirFor(dataDir: string, network: string): string {
    const root = dataDir === '' ? DEFAULT_DATA_DIR : dataDir;
    checkDataDir(root);
    checkNetworkName(network);
    return join(root, network);
  }

  /**
   * Open `<dataDir>/<network>` without following a symlink in its place, creating it (0755) when `create`.
   * Undefined when it (or the dataDir) does not exist and `create` is false.
   */
  static #openDir(dataDir: string, network: string, create: boolean): StateDir | undefined {
    const dir = Store.dirFor(dataDir, network);
    const root = dataDir === '' ? DEFAULT_DATA_DIR : dataDir;
    if (create) {
      try {
        mkdirSync(root, { recursive: true, mode: 0o755 });
      } catch (err) {
        // an existing non-directory: Go's MkdirAll says `mkdir <root>: not a directory`
        const e = (err as NodeJS.ErrnoException).code === 'EEXIST' ? { errno: 20 } : err;
        throw goFsError('mkdir', root, e);
      }
    }
    let top: StateDir | undefined;
    try {
      top = create ? StateDir.open(root, { follow: true }) : StateDir.openIfExists(root, { follow: true });
      if (!top) return undefined;
      return create ? top.openDir(network, { create: true, mode: 0o755 }) : top.openDirIfExists(network);
    } catch (err) {
      if (isSysError(err) && (err.code === 'ELOOP' || err.code === 'ENOTDIR')) {
        throw new CniError(
          ErrorCode.IOFailure,
          `host-local store ${dir} is not a directory: ${err.code === 'ELOOP' ? 'it is a symlink, which is never followed out of the dataDir' : 'it is a file'}; replace it with a real directory`,
          '',
          { cause: err },
        );
      }
      throw storeError(err);
    } finally {
      top?.close();
    }
  }

  static #withLockFile(d: StateDir): Store {
    const store = new Store(d);
    try {
      store.#lockFd = d.openFile(LOCK_FILE, C.O_CREAT | C.O_RDONLY, 0o750);
    } catch (err) {
      d.close();
      if (isSysError(err) && err.code === 'ELOOP') {
        throw new CniError(
          ErrorCode.IOFailure,
          `host-local store lock ${d.display(LOCK_FILE)} is a symlink, which is never followed (nothing was changed); replace it with a regular file`,
          '',
          { cause: err },
        );
      }
      throw storeError(err);
    }
    return store;
  }

  /** Create the directory (0755) if needed and open the lock file (created 0750), like `disk.New`. */
  static open(dataDir: string, network: string): Store {
    return Store.#withLockFile(Store.#openDir(dataDir, network, true)!);
  }

  /** Like open, but never creates the directory: undefined when it does not exist. */
  static openExisting(dataDir: string, network: string): Store | undefined {
    const d = Store.#openDir(dataDir, network, false);
    return d ? Store.#withLockFile(d) : undefined;
  }

  lock(): void {
    if (this.#locked) return;
    try {
      flock(this.#lockFd, 'ex');
    } catch (err) {
      throw goFsError('flock', join(this.dir, LOCK_FILE), err);
    }
    this.#locked = true;
  }

  unlock(): void {
    if (!this.#locked) return;
    this.#locked = false;
    flock(this.#lockFd, 'un');
  }

  /** Unlock and close (closing the descriptor also releases the kernel lock). */
  close(): void {
    if (this.#lockFd < 0) return;
    try {
      this.unlock();
    } finally {
      closeSync(this.#lockFd);
      this.#lockFd = -1;
      this.#d.close();
    }
  }

  /** Run `fn` under the exclusive lock; everything inside is synchronous. */
  withLock<T>(fn: () => T): T {
    this.lock();
    try {
      return fn();
    } finally {
      this.unlock();
    }
  }

  /**
   * The trimmed content of the reservation file `name` (an address in Go's canonical text), read by name without
   * listing the directory; undefined when there is no such regular file or it cannot be read.
   */
  readReservation(name: string): string | undefined {
    if (!this.#locked) throw new Error('host-local store: read without the lock');
    if (name === LOCK_FILE || name.startsWith(LAST_IP_PREFIX) || name.startsWith(TMP_PREFIX))
      return undefined;
    return this.#read(name, true)?.trim();
  }

  /** A regular file's complete content (O_NOFOLLOW, non-blocking); undefined when it cannot be read. */
  #read(name: string, checkType = false): string | undefined {
    let fd: number;
    try {
      fd = this.#d.openFile(name, C.O_RDONLY | C.O_NONBLOCK);
    } catch {
      return undefined; // unreadable files are skipped, like the reference
    }
    try {
      // the scan reads only what readdir says is a regular file; a file named by the caller is checked here
      if (checkType && !fstatSync(fd).isFile()) return undefined;
      let n = 0;
      for (;;) {
        if (n === this.#buf.length) {
          const bigger = Buffer.allocUnsafe(this.#buf.length * 2);
          this.#buf.copy(bigger, 0, 0, n);
          this.#buf = bigger;
        }
        const want = this.#buf.length - n;
        const got = readSync(fd, this.#buf, n, want, null);
        n += got;
        // a short read of a regular file is its end: no second read(2) for the usual ~80-byte reservation
        if (got < want) break;
      }
      return this.#buf.toString('utf8', 0, n);
    } catch {
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  /**
   * One readdir plus one read per candidate file: every regular file except `lock`, `last_reserved_ip.*` and
   * temp files. Stale temp files (left by a killed process) are removed, which is safe because the caller holds
   * the lock. Also returns every name present (taken addresses, symlinks included) and the symlinks.
   */
  scan(): { entries: Entry[]; names: Set<string>; symlinks: string[] } {
    if (!this.#locked) throw new Error('host-local store: scan without the lock');
    let dirents: Dirent[];
    try {
      dirents = this.#d.entries();
    } catch (err) {
      throw storeError(err);
    }
    const entries: Entry[] = [];
    const names = new Set<string>();
    const symlinks: string[] = [];
    for (const d of dirents) {
      const name = d.name;
      if (name.startsWith(TMP_PREFIX)) {
        try {
          this.#d.remove(name);
        } catch {
          // best effort
        }
        continue;
      }
      names.add(name);
      if (d.isSymbolicLink()) symlinks.push(name);
      if (!d.isFile() || name === LOCK_FILE || name.startsWith(LAST_IP_PREFIX)) continue;
      const content = this.#read(name);
      if (content === undefined) continue;
      entries.push({ name, key: content.trim() });
    }
    return { entries, names, symlinks };
  }

  /**
   * Prepare the content of a reservation in a temp file (written and synced) to be linked to one or more
   * candidate names with `tryLink`. The caller must `dropTemp` it. Returns the temp file's name.
   */
  writeTemp(content: string): string {
    if (!this.#locked) throw new Error('host-local store: write without the lock');
    const tmp = `${TMP_PREFIX}${process.pid}-${++this.#tmpSeq}.tmp`;
    let fd = -1;
    for (let attempt = 0; ; attempt++) {
      try {
        fd = this.#d.openFile(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 0o600);
        break;
      } catch (err) {
        // a stale temp file of a dead process with our pid: we hold the lock, so it is garbage
        if (isSysError(err) && err.code === 'EEXIST' && attempt === 0) {
          try {
            this.#d.remove(tmp);
          } catch {
            // retried below
          }
          continue;
        }
        throw storeError(err);
      }
    }
    try {
      const data = Buffer.from(content, 'utf8');
      let off = 0;
      while (off < data.length) off += writeSync(fd, data, off, data.length - off);
      fdatasyncSync(fd);
    } catch (err) {
      closeSync(fd);
      this.dropTemp(tmp);
      throw goFsError('write', this.#d.display(tmp), err);
    }
    closeSync(fd);
    return tmp;
  }

  /** Make `tmp` the reservation of `ip`; false when the address is taken (the name exists, even as a symlink). */
  tryLink(tmp: string, ip: IP): boolean {
    try {
      this.#d.link(tmp, formatIP(ip));
      return true;
    } catch (err) {
      if (isSysError(err) && err.code === 'EEXIST') return false;
      throw storeError(err);
    }
  }

  dropTemp(tmp: string): void {
    try {
      this.#d.remove(tmp);
    } catch {
      // a leftover temp file is removed by the next scan
    }
  }

  /**
   * `last_reserved_ip.<rangeID>`; undefined when missing or unparsable. Other read errors (a symlink: ELOOP)
   * are returned.
   */
  lastReservedIP(rangeID: number): { ip?: IP; error?: unknown } {
    let data: Buffer | undefined;
    try {
      data = this.#d.read(LAST_IP_PREFIX + rangeID);
    } catch (err) {
      return { error: err };
    }
    if (data === undefined) return {};
    // Go: net.ParseIP(string(data)) — no trimming
    const ip = parseIP(data.toString('latin1'));
    return ip ? { ip } : {};
  }

  /** Remove `last_reserved_ip.<rangeID>` (a rolled-back ADD that created it); no error when it is missing. */
  removeLastReservedIP(rangeID: number): void {
    try {
      this.#d.remove(LAST_IP_PREFIX + rangeID);
    } catch (err) {
      throw isSysError(err) ? storeError(err) : err;
    }
  }

  /**
   * Record the last reserved address of a range set (StateDir.writeAtomic: temp, fsync, rename, fsync of the
   * directory; mode 0600). The rename replaces a symlink in its place (never its target).
   */
  setLastReservedIP(rangeID: number, ip: IP): void {
    try {
      // the temp name is ours (.cnikit-…), so the next locked scan removes it if this process is killed meanwhile
      const tmp = `${TMP_PREFIX}${process.pid}-last-${++this.#tmpSeq}.tmp`;
      this.#d.writeAtomic(LAST_IP_PREFIX + rangeID, formatIP(ip), 0o600, tmp);
    } catch (err) {
      throw isSysError(err) ? storeError(err) : err;
    }
  }

  /** Remove one file by name (a symlink itself, never its target); a missing file is fine. */
  remove(name: string): void {
    try {
      this.#d.remove(name);
    } catch (err) {
      throw storeError(err);
    }
  }
}
