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
 *
 * The listing index (cnikit's own, beside the network directory, never in it): reading every reservation file
 * to learn its owner (the duplicate check of ADD, CHECK, GC, STATUS) costs one open and read per container. So
 * after a call that listed or changed the directory, the network directory's mtime is set to a new sentinel and
 * its listing (every name, every reservation's content) is written to `<dataDir>/.cnikit-index-<hash of the
 * network name>` naming that sentinel. A sentinel lies in the past (before the current second: whole seconds, one
 * second back, when the clock allows; else 2 ms after the last one) and is later than every sentinel the index
 * file named before; the index names the mtime the filesystem kept (read back). Any later change of the directory
 * by anyone (the Go plugin, an operator's rm, a cnikit without the index) sets its mtime to the current time, which
 * no sentinel is. The next call, under the lock, reads the index instead of the directory only when the
 * directory's mtime, device and inode are still those the index's LAST sentinel names; otherwise it lists and
 * reads the directory as before and writes a new index. Not noticed: a reservation file rewritten in place (its
 * content changed without creating, removing or renaming a name), which neither implementation does. The
 * directory's own content stays exactly the reference's.
 *
 * The index file is a snapshot plus a journal, so that a call that changes one name writes O(1), not the whole
 * listing: line 1 is the snapshot (JSON: version, directory, device, inode, `mtimeNs` the sentinel it was written
 * with, every name and reservation); each later line is a JSON array, `["+",name,content]` (a reservation linked),
 * `["+",name]` (a name that is not a reservation: last_reserved_ip.N), `["-",name]` (a name removed) or
 * `["@",sentinel]`. A call whose listing came from a trusted index appends its changes and one `@` line in ONE
 * write(2) (O_APPEND); a call that listed the directory, or whose journal would outgrow the listing (more lines than
 * max(64, names)), writes a new snapshot (temp file, rename): O(1) per call, amortised. Crash safety without fsync:
 * the index is trusted only when every line parses, the text ends with a complete line and its last line is the
 * directory's current mtime. Sentinels are never reused, so whichever of the two (mtime, index write) a crash kept,
 * an index it left names an earlier sentinel than the directory's mtime (a lost append or rename), ends in a line
 * cut short or zeros (a torn append), or the directory has a real mtime: not trusted, listed again. An earlier
 * cnikit reads a journaled index as not parsing (it lists the directory and writes its own snapshot). A call whose
 * changes cancelled out on a trusted listing (a failed ADD that reserved and rolled back) writes no index: it sets
 * the directory's mtime back to the index's last sentinel, which again describes the directory exactly (a crash
 * before that leaves a real mtime: listed again).
 */
import {
  constants as C,
  closeSync,
  type Dirent,
  fdatasyncSync,
  fstatSync,
  futimesSync,
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
/** The listing index of network `<name>`: `<dataDir>/.cnikit-index-<64-bit FNV-1a of the name, hex>` (see above). */
export const INDEX_PREFIX = '.cnikit-index-';
const INDEX_VERSION = 1;

/** The file name of a network's listing index (in the dataDir, beside the network's directory). */
export function indexName(network: string): string {
  // FNV-1a over the UTF-8 bytes, 64 bits (node:crypto is not loaded for it: its load costs a cold call ms)
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(network, 'utf8')) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return INDEX_PREFIX + h.toString(16).padStart(16, '0');
}

/** What a locked call knows of the directory: every name, the reservation candidates' contents, the symlinks. */
interface Listing {
  files: Map<string, string>;
  names: Set<string>;
  symlinks: string[];
  /** The journal's line count when read from the index (undefined: scanned). */
  journal?: number;
}

/** One change of the directory, as a journal line records it (see above). */
type JournalOp = ['+', string] | ['+', string, string] | ['-', string];
/** Journal lines beyond which the next change writes a new snapshot: max(this, the number of names). */
const JOURNAL_MIN = 64;

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

/** A listing index file as parsed: the snapshot with its journal replayed, and the last sentinel (ns, text). */
export interface ParsedIndex {
  v: unknown;
  dir: unknown;
  dev: unknown;
  ino: unknown;
  /** The last sentinel: the last `@` line's, or the snapshot's when there is no journal. */
  sentinel: string;
  files: Map<string, string>;
  names: Set<string>;
  symlinks: string[];
  /** Lines after the snapshot. */
  journal: number;
}

/**
 * Parse a listing index file (see the header): undefined when any line does not parse, the text does not end
 * with a complete line (an earlier cnikit's snapshot alone, without a newline, is complete) or the last journal
 * line is not a sentinel.
 */
export function parseIndex(text: string): ParsedIndex | undefined {
  try {
    const nl = text.indexOf('\n');
    const ix = JSON.parse(nl < 0 ? text : text.slice(0, nl)) as Record<string, unknown>;
    if (!ix || typeof ix !== 'object' || typeof ix.mtimeNs !== 'string' || !/^\d+$/.test(ix.mtimeNs))
      return undefined;
    if (!Array.isArray(ix.files) || !Array.isArray(ix.names) || !Array.isArray(ix.symlinks)) return undefined;
    // the journal: every line complete (the text ends with a newline), parsed in one JSON.parse
    let journal: unknown[] = [];
    if (nl >= 0) {
      if (!text.endsWith('\n')) return undefined;
      const body = text.slice(nl + 1, -1);
      journal = body === '' ? [] : (JSON.parse(`[${body.replaceAll('\n', ',')}]`) as unknown[]);
    }
    let sentinel = ix.mtimeNs;
    const last = journal.at(-1);
    if (last !== undefined) {
      if (!Array.isArray(last) || last[0] !== '@' || typeof last[1] !== 'string' || !/^\d+$/.test(last[1]))
        return undefined;
      sentinel = last[1];
    }
    const files = new Map<string, string>();
    for (const f of ix.files as unknown[]) {
      if (!Array.isArray(f) || typeof f[0] !== 'string' || typeof f[1] !== 'string') return undefined;
      files.set(f[0], f[1]);
    }
    if (!(ix.names as unknown[]).every((n) => typeof n === 'string')) return undefined;
    if (!(ix.symlinks as unknown[]).every((n) => typeof n === 'string')) return undefined;
    const names = new Set(ix.names as string[]);
    let symlinks = ix.symlinks as string[];
    for (const op of journal) {
      if (!Array.isArray(op) || typeof op[1] !== 'string') return undefined;
      const name = op[1];
      if (op[0] === '+' && op.length === 2) names.add(name);
      else if (op[0] === '+' && op.length === 3 && typeof op[2] === 'string') {
        names.add(name);
        files.set(name, op[2]);
      } else if (op[0] === '-' && op.length === 2) {
        names.delete(name);
        files.delete(name);
        if (symlinks.includes(name)) symlinks = symlinks.filter((x) => x !== name);
      } else if (op[0] !== '@' || op.length !== 2) return undefined;
    }
    return {
      v: ix.v,
      dir: ix.dir,
      dev: ix.dev,
      ino: ix.ino,
      sentinel,
      files,
      names,
      symlinks,
      journal: journal.length,
    };
  } catch {
    return undefined;
  }
}

export class Store {
  /** The network directory's path (for messages; every access goes through its descriptor). */
  readonly dir: string;
  readonly #d: StateDir;
  /** The dataDir (holds the listing index); undefined when it could not be kept open (no index then). */
  readonly #top: StateDir | undefined;
  readonly #index: string | undefined;
  #lockFd = -1;
  #locked = false;
  #tmpSeq = 0;
  #buf = Buffer.allocUnsafe(READ_BUF);
  /** This lock's listing (from the index or a scan), kept up to date with this store's own changes. */
  #listing: Listing | undefined;
  /** The listing must be written to the index at unlock (it was scanned, or the directory was changed). */
  #stale = false;
  /** The directory was changed under this lock while no listing was known: the index cannot be kept. */
  #blind = false;
  /** The changes made under this lock to a listing read from the index (appended to it at unlock). */
  #ops: JournalOp[] = [];
  /** The listing of this lock was scanned (not read from the index): a new snapshot is written at unlock. */
  #scanned = false;
  /** The last sentinel of the index file as last read or written (ns); a new one must be later. */
  #lastStamp: bigint | undefined;
  /** Each name this lock changed, as the listing had it before the first change (present, reservation content). */
  readonly #before = new Map<string, { had: boolean; key: string | undefined }>();
  /** Content of this store's temp files, by name (what tryLink makes a reservation of). */
  readonly #tmpContent = new Map<string, string>();

  private constructor(d: StateDir, top: StateDir | undefined, network: string) {
    this.#d = d;
    this.dir = d.path;
    this.#top = top;
    this.#index = network.startsWith(INDEX_PREFIX) ? undefined : indexName(network);
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
  static #openDir(
    dataDir: string,
    network: string,
    create: boolean,
  ): { d: StateDir; top: StateDir } | undefined {
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
      const d = create ? top.openDir(network, { create: true, mode: 0o755 }) : top.openDirIfExists(network);
      if (!d) return undefined;
      const out = { d, top };
      top = undefined; // kept open by the store (the listing index lives there)
      return out;
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

  static #withLockFile({ d, top }: { d: StateDir; top: StateDir }, network: string): Store {
    const store = new Store(d, top, network);
    try {
      store.#lockFd = d.openFile(LOCK_FILE, C.O_CREAT | C.O_RDONLY, 0o750);
    } catch (err) {
      d.close();
      top.close();
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
    return Store.#withLockFile(Store.#openDir(dataDir, network, true)!, network);
  }

  /** Like open, but never creates the directory: undefined when it does not exist. */
  static openExisting(dataDir: string, network: string): Store | undefined {
    const d = Store.#openDir(dataDir, network, false);
    return d ? Store.#withLockFile(d, network) : undefined;
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
    try {
      if (this.#listing && this.#stale && !this.#blind && !this.#restoreSentinel(this.#listing))
        this.#writeIndex(this.#listing);
    } finally {
      this.#before.clear();
      this.#listing = undefined;
      this.#stale = false;
      this.#blind = false;
      this.#ops = [];
      this.#scanned = false;
      this.#locked = false;
      flock(this.#lockFd, 'un');
    }
  }

  /** This store changed the directory (under the lock): the index must follow, or cannot be kept. */
  #changed(update?: (l: Listing) => void, op?: JournalOp): void {
    if (!this.#listing) {
      this.#blind = true;
      return;
    }
    if (op && !this.#before.has(op[1]))
      this.#before.set(op[1], { had: this.#listing.names.has(op[1]), key: this.#listing.files.get(op[1]) });
    update?.(this.#listing);
    if (op) this.#ops.push(op);
    this.#stale = true;
  }

  /**
   * A call whose changes cancelled out (a failed ADD that reserved, then rolled back) on a listing read from the
   * trusted index: the directory holds again exactly what the index describes, so its mtime is set back to the
   * index's last sentinel and the index is left as it is (a failed ADD changes no file). False when the changes
   * did not cancel out, the listing was scanned, or the filesystem did not keep that mtime (the index is then
   * written as after any change).
   */
  #restoreSentinel(l: Listing): boolean {
    if (this.#scanned || l.journal === undefined || this.#lastStamp === undefined) return false;
    for (const [name, b] of this.#before) {
      if (l.names.has(name) !== b.had || l.files.get(name) !== b.key) return false;
    }
    try {
      const ms = this.#lastStamp / 1_000_000n;
      futimesSync(this.#d.fd, Date.now() / 1000, Number(ms) / 1000);
      if (BigInt(this.#dirStamp().mtimeNs) === this.#lastStamp) return true;
    } catch {
      // written below
    }
    return false;
  }

  /** The directory's identity and mtime (ns), as the index records them. */
  #dirStamp(): { dev: string; ino: string; mtimeNs: string } {
    const st = fstatSync(this.#d.fd, { bigint: true });
    return { dev: String(st.dev), ino: String(st.ino), mtimeNs: String(st.mtimeNs) };
  }

  /**
   * The listing from the index, when the index describes the directory as it is (its last sentinel is still the
   * directory's mtime, same device and inode, every line parses); undefined otherwise (no index, another writer
   * changed the directory, an index that does not parse). Reads nothing else. Records the index's last sentinel
   * (trusted or not) in #lastStamp: the next sentinel must be later.
   */
  #readIndex(): Listing | undefined {
    if (!this.#top || !this.#index) return undefined;
    try {
      const data = this.#top.read(this.#index);
      if (!data) return undefined;
      const ix = parseIndex(data.toString('utf8'));
      if (!ix) return undefined;
      this.#lastStamp = BigInt(ix.sentinel);
      const now = this.#dirStamp();
      if (ix.v !== INDEX_VERSION || ix.dev !== now.dev || ix.ino !== now.ino || ix.sentinel !== now.mtimeNs)
        return undefined;
      return { files: ix.files, names: ix.names, symlinks: ix.symlinks, journal: ix.journal };
    } catch {
      return undefined;
    }
  }

  /**
   * Set the directory's mtime to a new sentinel: in the past (before the current second, so no later change by
   * anyone can have it) and later than the index's last one (#lastStamp), so that no index written before names
   * it. Whole seconds when the clock allows (a second in the past), else 2 ms after the last one. Returns the
   * mtime the filesystem kept (read back: the index names exactly that), or undefined when no such sentinel could
   * be set (the directory then has a real mtime, which no index names).
   */
  #setSentinel(): string | undefined {
    // the index's last sentinel, read now if this lock has not (a call that changed the directory blind)
    if (this.#lastStamp === undefined) this.#readIndex();
    const nowS = Math.floor(Date.now() / 1000) - 1;
    const prev = this.#lastStamp;
    const NS = 1_000_000_000n;
    let target: number; // seconds
    if (prev === undefined || BigInt(nowS) * NS > prev) target = nowS;
    else {
      const ms = prev / 1_000_000n + 2n;
      if (ms / 1000n > BigInt(nowS)) return undefined; // a thousand changes in one second: nothing set
      target = Number(ms) / 1000;
    }
    futimesSync(this.#d.fd, Date.now() / 1000, target);
    const got = BigInt(this.#dirStamp().mtimeNs);
    if ((prev !== undefined && got <= prev) || got >= BigInt(nowS + 1) * NS) {
      // the filesystem could not keep a new sentinel (coarse timestamps): a real mtime, which no index names
      const t = Date.now() / 1000;
      futimesSync(this.#d.fd, t, t);
      return undefined;
    }
    this.#lastStamp = got;
    return String(got);
  }

  /**
   * Set a new sentinel on the directory (#setSentinel), then write the index naming it: this call's changes
   * appended to the index read under this lock (one write), or a new snapshot (temp file, rename) after a scan or
   * when the journal would outgrow the listing. In either order a crash between the two leaves an index whose last
   * sentinel is not the directory's mtime (sentinels are never reused). Best effort: on any failure the next call
   * lists the directory.
   */
  #writeIndex(l: Listing): void {
    if (!this.#top || !this.#index) return;
    try {
      const stamp = this.#setSentinel();
      if (stamp === undefined) return;
      if (
        !this.#scanned &&
        l.journal !== undefined &&
        l.journal + this.#ops.length + 1 <= Math.max(JOURNAL_MIN, l.names.size)
      ) {
        // O(1): this call's changes and the new sentinel appended in one write(2)
        const lines = `${[...this.#ops, ['@', stamp]].map((op) => JSON.stringify(op)).join('\n')}\n`;
        const fd = this.#top.openFile(this.#index, C.O_WRONLY | C.O_APPEND);
        try {
          const data = Buffer.from(lines, 'utf8');
          // a short write leaves a last line that is not this sentinel (or does not parse): not trusted
          writeSync(fd, data, 0, data.length);
        } finally {
          closeSync(fd);
        }
        return;
      }
      const st = this.#dirStamp();
      const body = JSON.stringify({
        v: INDEX_VERSION,
        dir: this.dir,
        dev: st.dev,
        ino: st.ino,
        mtimeNs: stamp,
        files: [...l.files],
        names: [...l.names],
        symlinks: l.symlinks,
      });
      // no fsync: an index lost or torn by a crash does not parse or names an earlier sentinel, and is not trusted
      const tmp = `${TMP_PREFIX}${process.pid}-index-${++this.#tmpSeq}.tmp`;
      const fd = this.#top.openFile(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 0o600);
      try {
        const data = Buffer.from(`${body}\n`, 'utf8');
        let off = 0;
        while (off < data.length) off += writeSync(fd, data, off, data.length - off);
      } finally {
        closeSync(fd);
      }
      try {
        this.#top.rename(tmp, this.#index);
      } catch (err) {
        this.#top.remove(tmp);
        throw err;
      }
    } catch {
      // the index is an optimisation: a directory it does not describe is listed by the next call
    }
  }

  /**
   * Load this lock's listing from the index only (no directory read), so that the changes of a call that lists
   * nothing (DEL by the prevResult's addresses) keep the index valid; false when the index does not describe the
   * directory (the call's changes then leave it stale, and the next listing call scans).
   */
  useIndex(): boolean {
    if (!this.#locked) throw new Error('host-local store: index without the lock');
    if (!this.#listing && !this.#blind) this.#listing = this.#readIndex();
    return this.#listing !== undefined;
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
      this.#top?.close();
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
    if (!this.#listing) {
      // after changes made without a listing (#blind) the index is out of date: the directory is read
      this.#listing = this.#blind ? undefined : this.#readIndex();
      if (!this.#listing) {
        this.#listing = this.#scanDir(); // taken after those changes: it describes the directory as it is
        this.#blind = false;
        this.#stale = true;
        this.#scanned = true;
      }
    }
    const l = this.#listing;
    return {
      entries: [...l.files].map(([name, key]) => ({ name, key })),
      names: new Set(l.names),
      symlinks: [...l.symlinks],
    };
  }

  /** The listing from the directory itself: one readdir plus one read per candidate file. */
  #scanDir(): Listing {
    let dirents: Dirent[];
    try {
      dirents = this.#d.entries();
    } catch (err) {
      throw storeError(err);
    }
    const files = new Map<string, string>();
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
      files.set(name, content.trim());
    }
    return { files, names, symlinks };
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
    this.#tmpContent.set(tmp, content.trim());
    this.#changed();
    return tmp;
  }

  /** Make `tmp` the reservation of `ip`; false when the address is taken (the name exists, even as a symlink). */
  tryLink(tmp: string, ip: IP): boolean {
    const name = formatIP(ip);
    try {
      this.#d.link(tmp, name);
      const key = this.#tmpContent.get(tmp);
      this.#changed(
        (l) => {
          l.names.add(name);
          if (key === undefined) this.#blind = true;
          else l.files.set(name, key);
        },
        key === undefined ? undefined : ['+', name, key],
      );
      return true;
    } catch (err) {
      if (isSysError(err) && err.code === 'EEXIST') return false;
      throw storeError(err);
    }
  }

  dropTemp(tmp: string): void {
    this.#tmpContent.delete(tmp);
    try {
      this.#d.remove(tmp);
      this.#changed();
    } catch {
      // a leftover temp file is removed by the next scan (of the directory: the index is not kept)
      this.#blind = true;
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
      if (this.#d.remove(LAST_IP_PREFIX + rangeID))
        this.#changed((l) => l.names.delete(LAST_IP_PREFIX + rangeID), ['-', LAST_IP_PREFIX + rangeID]);
    } catch (err) {
      this.#blind = true;
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
      this.#changed((l) => l.names.add(LAST_IP_PREFIX + rangeID), ['+', LAST_IP_PREFIX + rangeID]);
    } catch (err) {
      this.#blind = true;
      throw isSysError(err) ? storeError(err) : err;
    }
  }

  /** Remove one file by name (a symlink itself, never its target); a missing file is fine. */
  remove(name: string): void {
    try {
      if (this.#d.remove(name))
        this.#changed(
          (l) => {
            l.names.delete(name);
            l.files.delete(name);
            l.symlinks = l.symlinks.filter((s) => s !== name);
          },
          ['-', name],
        );
    } catch (err) {
      this.#blind = true;
      throw storeError(err);
    }
  }
}
