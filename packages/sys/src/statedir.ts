/**
 * A state directory that cannot be redirected by symlinks: the directory itself is opened once with
 * O_DIRECTORY|O_NOFOLLOW (a symlink in its place is refused), and every file in it is reached through
 * `/proc/self/fd/<dirfd>/<name>` — the same semantics as openat(2) on the directory fd — with O_NOFOLLOW, so
 * a symlinked (or dangling) file name is refused too. Writes are atomic: a new temp file (O_EXCL), fsync,
 * rename, fsync of the directory; a reader never sees an empty or partial file.
 */

import { randomBytes } from 'node:crypto';
import {
  constants as C,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
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

/** A file-system error in Go's *PathError wording (`open /run/x/y: too many levels of symbolic links`). */
function pathError(err: unknown, op: string, path: string): SysError {
  const errno = errnoOf(err);
  return new SysError(errno, op, `${op} ${path}: ${errnoMessage(errno)}`, { cause: err });
}

export interface StateDirOptions {
  /** Create the directory (and missing parents) with this mode when it does not exist. */
  create?: boolean;
  /** Mode for created directories (default 0o700). */
  mode?: number;
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
    let fd: number;
    try {
      fd = openSync(path, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
    } catch (err) {
      if (codeOf(err) === 'ELOOP' || codeOf(err) === 'ENOTDIR') {
        throw new SysError(errnoOf(err), 'open', `${path} is not a directory (a symlink is not accepted)`, {
          cause: err,
        });
      }
      throw pathError(err, 'open', path);
    }
    return new StateDir(path, fd);
  }

  /** Open `path` if it exists as a directory; undefined when it does not exist. */
  static openIfExists(path: string): StateDir | undefined {
    try {
      return StateDir.open(path);
    } catch (err) {
      if ((err as SysError).errno === 2) return undefined;
      throw err;
    }
  }

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

  /** Replace `name` atomically with `data` (temp file, fsync, rename, fsync of the directory). */
  writeAtomic(name: string, data: string | Uint8Array, mode = 0o600): void {
    this.at(name);
    const tmp = `.${name}.${randomBytes(6).toString('hex')}.tmp`;
    let fd: number | undefined;
    try {
      fd = openSync(this.at(tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
      fsyncSync(fd);
      closeSync(fd);
      fd = undefined;
      renameSync(this.at(tmp), this.at(name));
      fsyncSync(this.fd);
    } catch (err) {
      if (fd !== undefined) closeSync(fd);
      try {
        unlinkSync(this.at(tmp));
      } catch {
        // never created, or already renamed
      }
      throw pathError(err, 'write', this.display(name));
    }
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
