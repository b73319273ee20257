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
 */
import {
  constants as C,
  closeSync,
  fdatasyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { formatIP, type IP, parseIP } from '@cnikit/ip';
import { CniError, ErrorCode } from '@cnikit/skel';
import { errnoMessage, flock } from '@cnikit/sys';

/** Where the store lives when the config has no (or an empty) `dataDir`, as in the reference. */
export const DEFAULT_DATA_DIR = '/var/lib/cni/networks';
export const LAST_IP_PREFIX = 'last_reserved_ip.';
export const LOCK_FILE = 'lock';
export const LINE_BREAK = '\r\n';
const TMP_PREFIX = '.cnikit-';
/** Reservation files larger than this are not reservations (IDs are short); never read more. */
const MAX_ENTRY = 4096;

/** A filesystem error worded like Go's `*PathError` (`open /x: permission denied`), as CNI code 5. */
export function goFsError(op: string, path: string, err: unknown): CniError {
  const e = err as NodeJS.ErrnoException;
  // Node's fs errnos are negative; errnoMessage ignores the sign and gives Go's (lower-case strerror) text
  const why = typeof e?.errno === 'number' ? errnoMessage(e.errno) : (e?.message ?? String(err));
  return new CniError(ErrorCode.IOFailure, `${op} ${path}: ${why}`, '', { cause: err });
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException)?.code;
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
  readonly dir: string;
  #lockFd = -1;
  #locked = false;
  #tmpSeq = 0;
  readonly #buf = Buffer.allocUnsafe(MAX_ENTRY + 1);

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** The directory a network's reservations live in (validated; not created). */
  static dirFor(dataDir: string, network: string): string {
    const root = dataDir === '' ? DEFAULT_DATA_DIR : dataDir;
    checkDataDir(root);
    checkNetworkName(network);
    return join(root, network);
  }

  /** Create the directory (0755) if needed and open the lock file (created 0750), like `disk.New`. */
  static open(dataDir: string, network: string): Store {
    const dir = Store.dirFor(dataDir, network);
    try {
      mkdirSync(dir, { recursive: true, mode: 0o755 });
    } catch (err) {
      throw goFsError('mkdir', dir, err);
    }
    const store = new Store(dir);
    const lockPath = join(dir, LOCK_FILE);
    try {
      store.#lockFd = openSync(lockPath, C.O_CREAT | C.O_RDONLY, 0o750);
    } catch (err) {
      throw goFsError('open', lockPath, err);
    }
    return store;
  }

  /** Like open, but never creates anything: undefined when the directory does not exist. */
  static openExisting(dataDir: string, network: string): Store | undefined {
    const dir = Store.dirFor(dataDir, network);
    try {
      if (!statSync(dir).isDirectory()) return undefined;
    } catch (err) {
      if (errCode(err) === 'ENOENT') return undefined;
      throw goFsError('stat', dir, err);
    }
    return Store.open(dataDir, network);
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

  #read(path: string): string | undefined {
    let fd: number;
    try {
      fd = openSync(path, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    } catch {
      return undefined; // unreadable files are skipped, like the reference
    }
    try {
      const n = readSync(fd, this.#buf, 0, MAX_ENTRY + 1, 0);
      if (n > MAX_ENTRY) return undefined;
      return this.#buf.toString('utf8', 0, n);
    } catch {
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  /**
   * One readdir plus one small read per candidate file: every regular file except `lock`,
   * `last_reserved_ip.*` and temp files. Stale temp files (left by a killed process) are removed, which
   * is safe because the caller holds the lock. Also returns every name present (taken addresses).
   */
  scan(): { entries: Entry[]; names: Set<string> } {
    if (!this.#locked) throw new Error('host-local store: scan without the lock');
    let dirents: import('node:fs').Dirent[];
    try {
      dirents = readdirSync(this.dir, { withFileTypes: true });
    } catch (err) {
      throw goFsError('open', this.dir, err);
    }
    const entries: Entry[] = [];
    const names = new Set<string>();
    for (const d of dirents) {
      const name = d.name;
      if (name.startsWith(TMP_PREFIX)) {
        try {
          unlinkSync(join(this.dir, name));
        } catch {
          // best effort
        }
        continue;
      }
      names.add(name);
      if (!d.isFile() || name === LOCK_FILE || name.startsWith(LAST_IP_PREFIX)) continue;
      const content = this.#read(join(this.dir, name));
      if (content === undefined) continue;
      entries.push({ name, key: content.trim() });
    }
    return { entries, names };
  }

  /**
   * Prepare the content of a reservation in a temp file (written and synced) to be linked to one or more
   * candidate names with `tryLink`. The caller must `dropTemp` it.
   */
  writeTemp(content: string): string {
    if (!this.#locked) throw new Error('host-local store: write without the lock');
    const tmp = join(this.dir, `${TMP_PREFIX}${process.pid}-${++this.#tmpSeq}.tmp`);
    let fd = -1;
    for (let attempt = 0; ; attempt++) {
      try {
        fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
        break;
      } catch (err) {
        // a stale temp file of a dead process with our pid: we hold the lock, so it is garbage
        if (errCode(err) === 'EEXIST' && attempt === 0) {
          try {
            unlinkSync(tmp);
          } catch {
            // retried below
          }
          continue;
        }
        throw goFsError('open', tmp, err);
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
      throw goFsError('write', tmp, err);
    }
    closeSync(fd);
    return tmp;
  }

  /** Make `tmp` the reservation of `ip`; false when the address is taken (the name exists). */
  tryLink(tmp: string, ip: IP): boolean {
    const path = join(this.dir, formatIP(ip));
    try {
      linkSync(tmp, path);
      return true;
    } catch (err) {
      if (errCode(err) === 'EEXIST') return false;
      throw goFsError('link', path, err);
    }
  }

  dropTemp(tmp: string): void {
    try {
      unlinkSync(tmp);
    } catch {
      // a leftover temp file is removed by the next scan
    }
  }

  /** `last_reserved_ip.<rangeID>`; undefined when missing or unparsable. Other read errors are returned. */
  lastReservedIP(rangeID: number): { ip?: IP; error?: unknown } {
    const path = join(this.dir, LAST_IP_PREFIX + rangeID);
    let text: string;
    try {
      text = readFileSync(path, 'latin1');
    } catch (err) {
      if (errCode(err) === 'ENOENT') return {};
      return { error: err };
    }
    // Go: net.ParseIP(string(data)) — no trimming
    const ip = parseIP(text);
    return ip ? { ip } : {};
  }

  /** Record the last reserved address of a range set (temp, fdatasync, rename; mode 0600). */
  setLastReservedIP(rangeID: number, ip: IP): void {
    const path = join(this.dir, LAST_IP_PREFIX + rangeID);
    const tmp = join(this.dir, `${TMP_PREFIX}${process.pid}-last.tmp`);
    try {
      let fd: number;
      try {
        fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, 0o600);
      } catch (err) {
        if (errCode(err) !== 'ELOOP') throw err;
        unlinkSync(tmp);
        fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, 0o600);
      }
      try {
        writeSync(fd, formatIP(ip));
        fdatasyncSync(fd); // DESIGN: temp, fsync, rename — never an empty file after a crash
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, path);
    } catch (err) {
      this.dropTemp(tmp);
      throw goFsError('write', path, err);
    }
  }

  /** Remove one file by name; a missing file is fine. */
  remove(name: string): void {
    const path = join(this.dir, name);
    try {
      unlinkSync(path);
    } catch (err) {
      if (errCode(err) === 'ENOENT') return;
      throw goFsError('remove', path, err);
    }
  }
}
