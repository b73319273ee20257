/**
 * A state directory that cannot be redirected by symlinks: the directory itself is opened once with
 * O_DIRECTORY|O_NOFOLLOW (a symlink in its place is refused), and every file in it is reached through
 * `/proc/self/fd/<dirfd>/<name>` — the same semantics as openat(2) on the directory fd — with O_NOFOLLOW, so
 * a symlinked (or dangling) file name is refused too. Writes are atomic: a new temp file (O_EXCL), fsync,
 * rename, fsync of the directory; a reader never sees an empty or partial file.
 *
 * The temp file of a write is named `.<name>.<pidns>-<pid>.<hex>.tmp` (the writer's pid namespace and pid), so a
 * writer killed between creating it and the rename leaves a file that `removeStaleTemps` (run by the owner's
 * DEL/GC) recognises as garbage: its writer is gone (or, from another pid namespace, it is older than any write
 * takes). An O_TMPFILE + linkat write would leave nothing, but linkat of a /proc/self/fd name needs
 * AT_SYMLINK_FOLLOW, which Node does not expose, and replacing an existing name still needs a named step.
 *
 * Sub-directories are opened relative to the parent's descriptor (`openDir`), so a store laid out as
 * `<root>/<name>/<files>` is symlink-proof below the root; link, rename, remove and listing never follow the
 * last component either (link(2), rename(2) and unlink(2) act on a symlink itself, never on its target).
 */

import { createHash, randomBytes } from 'node:crypto';
import {
  constants as C,
  closeSync,
  type Dirent,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { replaceVia } from './atomic.ts';
import { errnoMessage, SysError } from './errors.ts';

function errnoOf(err: unknown): number {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.errno === 'number') return Math.abs(e.errno);
  const n = e?.code ? (C as unknown as Record<string, number>)[e.code] : undefined;
  return typeof n === 'number' ? n : 5;
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException)?.code;
}

/**
 * A file-system error in Go's *PathError wording (`open /run/x/y: permission denied`); a refused symlink says
 * so (`open /run/x/y: too many levels of symbolic links (/run/x/y is a symlink, which is never followed)`).
 */
function pathError(err: unknown, op: string, path: string): SysError {
  const errno = errnoOf(err);
  const why = errno === ELOOP ? ` (${path} is a symlink, which is never followed)` : '';
  return new SysError(errno, op, `${op} ${path}: ${errnoMessage(errno)}${why}`, { cause: err });
}

/** Open a directory with O_NOFOLLOW (unless `follow`); a symlink or a non-directory gets a clear message. */
function openDirFd(path: string, display: string, follow: boolean): number {
  try {
    return openSync(path, C.O_RDONLY | C.O_DIRECTORY | (follow ? 0 : C.O_NOFOLLOW));
  } catch (err) {
    if (codeOf(err) === 'ELOOP' || codeOf(err) === 'ENOTDIR') {
      // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR: tell a symlink (always ELOOP here) from a file
      let link = codeOf(err) === 'ELOOP';
      try {
        link ||= lstatSync(path).isSymbolicLink();
      } catch {
        // gone meanwhile: keep the open error
      }
      if (link) {
        throw new SysError(
          ELOOP,
          'open',
          `${display} is not a directory (a symlink is not accepted): it is a symlink`,
          {
            cause: err,
          },
        );
      }
      throw new SysError(errnoOf(err), 'open', `${display} is not a directory (a symlink is not accepted)`, {
        cause: err,
      });
    }
    throw pathError(err, 'open', display);
  }
}

/** ELOOP on Linux (fs.constants has no errno values). */
const ELOOP = 40;

/** `.<name>.<pidns>-<pid>.<hex>.tmp`, and the `.<name>.<hex>.tmp` of earlier versions (no writer recorded). */
const TEMP = /^\..+?\.(?:(\d+)-(\d+)\.)?[0-9a-f]{12}\.tmp$/;
/** No atomic write takes this long: an older temp file is garbage whoever wrote it. */
export const STALE_TEMP_AGE_MS = 10 * 60_000;

let pidNamespace: string | undefined;
/** The inode of this process's pid namespace ('0' when /proc does not tell). */
function ownPidNamespace(): string {
  if (pidNamespace === undefined) {
    try {
      pidNamespace = String(statSync('/proc/self/ns/pid').ino);
    } catch {
      pidNamespace = '0';
    }
  }
  return pidNamespace;
}

/** Whether `pid` is a running process (a zombie, waiting to be reaped, is not: it writes nothing any more). */
function processAlive(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return codeOf(e) === 'EPERM';
    }
  }
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** The temp name of a write of `name` (a hash stands for a name too long to fit in 255 bytes with the rest). */
function tempName(name: string): string {
  const base =
    Buffer.byteLength(name) <= 200 ? name : createHash('sha256').update(name).digest('hex').slice(0, 32);
  return `.${base}.${ownPidNamespace()}-${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

export interface StateDirOptions {
  /** Create the directory (and missing parents) with this mode when it does not exist. */
  create?: boolean;
  /** Mode for created directories (default 0o700). */
  mode?: number;
  /**
   * `StateDir.open` only: the path itself may be a symlink (an operator's configured location, such as a dataDir
   * that points elsewhere). Sub-directories and files in it are still never followed.
   */
  follow?: boolean;
}

export class StateDir {
  private constructor(
    readonly path: string,
    readonly fd: number,
  ) {}

  /** Open (optionally create) `path`; its last component must be a real directory, not a symlink. */
  static open(path: string, opts: StateDirOptions = {}): StateDir {
    if (opts.create) {
      try {
        mkdirSync(path, { recursive: true, mode: opts.mode ?? 0o700 });
      } catch (err) {
        throw pathError(err, 'mkdir', path);
      }
    }
    return new StateDir(path, openDirFd(path, path, opts.follow === true));
  }

  /** Open `path` if it exists as a directory; undefined when it does not exist. */
  static openIfExists(path: string, opts: Pick<StateDirOptions, 'follow'> = {}): StateDir | undefined {
    try {
      return StateDir.open(path, opts);
    } catch (err) {
      if ((err as SysError).errno === 2) return undefined;
      throw err;
    }
  }

  /**
   * Open (optionally create, with `opts.mode`, default 0o700) the sub-directory `name` relative to this
   * directory's descriptor; a symlink in its place — dangling or not — is refused and nothing is created.
   */
  openDir(name: string, opts: Omit<StateDirOptions, 'follow'> = {}): StateDir {
    const p = this.at(name);
    if (opts.create) {
      try {
        mkdirSync(p, opts.mode ?? 0o700); // mkdir(2) never follows a symlink in the last component: EEXIST
      } catch (err) {
        if (codeOf(err) !== 'EEXIST') throw pathError(err, 'mkdir', this.display(name));
      }
    }
    return new StateDir(this.display(name), openDirFd(p, this.display(name), false));
  }

  /** `openDir` without creating: undefined when `name` does not exist. */
  openDirIfExists(name: string): StateDir | undefined {
    try {
      return this.openDir(name);
    } catch (err) {
      if ((err as SysError).errno === 2) return undefined;
      throw err;
    }
  }

  /** The path that reaches `name` through this directory's descriptor (openat semantics); validated name. */
  private at(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
      throw new SysError(22, 'open', `invalid file name ${JSON.stringify(name)} in ${this.path}`);
    }
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  /** The display path of a file (for messages). */
  display(name: string): string {
    return `${this.path.replace(/\/+$/, '')}/${name}`;
  }

  /** A file's bytes, or undefined when it does not exist. A symlink is an error (ELOOP). */
  read(name: string): Buffer | undefined {
    let fd: number;
    try {
      fd = openSync(this.at(name), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return undefined;
      throw pathError(err, 'open', this.display(name));
    }
    try {
      return readFileSync(fd);
    } catch (err) {
      throw pathError(err, 'read', this.display(name));
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Open `name` with `flags` | O_NOFOLLOW (`mode` when created) and return the descriptor, which the caller
   * closes (the runtimes open every descriptor close-on-exec). A symlink — dangling or not — fails with ELOOP and nothing is created or opened through it.
   */
  openFile(name: string, flags: number, mode = 0o600): number {
    try {
      return openSync(this.at(name), flags | C.O_NOFOLLOW, mode);
    } catch (err) {
      throw pathError(err, 'open', this.display(name));
    }
  }

  /**
   * Replace `name` atomically with `data` (temp file, fsync, rename, fsync of the directory: ./atomic.ts). The temp
   * file is `.<name>.<pidns>-<pid>.<hex>.tmp` (see `removeStaleTemps`) unless the owner names it (`temp`, a name it
   * cleans up itself; it must not exist).
   */
  writeAtomic(name: string, data: string | Uint8Array, mode = 0o600, temp?: string): void {
    const dst = this.at(name);
    const tmp = this.at(temp ?? tempName(name));
    try {
      replaceVia(tmp, dst, this.fd, data, mode);
    } catch (err) {
      throw pathError(err, 'write', this.display(name));
    }
  }

  /**
   * Remove the temp files of writes that can never finish: those of a writer that is gone
   * (same pid namespace, pid not alive), and any older than `maxAgeMs` (a writer in another pid namespace, an
   * earlier version's name without a writer, a reused pid). A write in progress is never touched. Returns the
   * names removed. Owners call it from DEL and GC.
   */
  removeStaleTemps(maxAgeMs = STALE_TEMP_AGE_MS): string[] {
    const removed: string[] = [];
    const now = Date.now();
    for (const e of this.entries()) {
      const m = TEMP.exec(e.name);
      if (!m || !(e.isFile() || e.isSymbolicLink())) continue;
      let stale = m[1] === ownPidNamespace() && !processAlive(Number(m[2]));
      if (!stale) {
        try {
          stale = now - lstatSync(this.at(e.name)).mtimeMs > maxAgeMs;
        } catch {
          continue; // gone meanwhile: renamed by its writer
        }
      }
      if (stale && this.remove(e.name)) removed.push(e.name);
    }
    return removed;
  }

  /** Remove `name` (a symlink itself, never its target); false when it did not exist. */
  remove(name: string): boolean {
    try {
      unlinkSync(this.at(name));
      return true;
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return false;
      throw pathError(err, 'remove', this.display(name));
    }
  }

  /** Hard-link the file `existing` to the new name `name` (EEXIST when `name` exists, even as a symlink). */
  link(existing: string, name: string): void {
    try {
      linkSync(this.at(existing), this.at(name));
    } catch (err) {
      throw pathError(err, 'link', this.display(name));
    }
  }

  /** Rename `from` to `to` in this directory; a symlink at `to` is replaced itself, its target is untouched. */
  rename(from: string, to: string): void {
    try {
      renameSync(this.at(from), this.at(to));
    } catch (err) {
      throw pathError(err, 'rename', this.display(to));
    }
  }

  /** The directory's entries with their types (a symlink is reported as a symlink, never as its target). */
  entries(): Dirent[] {
    try {
      return readdirSync(`/proc/self/fd/${this.fd}/`, { withFileTypes: true });
    } catch (err) {
      throw pathError(err, 'open', this.path);
    }
  }

  /** Names in the directory (sorted). */
  list(): string[] {
    try {
      return readdirSync(`/proc/self/fd/${this.fd}/`).sort();
    } catch (err) {
      throw pathError(err, 'open', this.path);
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}
