/**
 * Atomic file writes, the one implementation (`@cnikit/sys/atomic`, plain node:fs: importing it loads no native
 * code): a new temporary file in the destination's directory (O_EXCL|O_NOFOLLOW, the final mode), written
 * completely, fsync, rename over the destination, fsync of the directory. A reader sees the old or the new file,
 * never an empty or partial one, and the rename survives a crash. Used by `StateDir.writeAtomic` (state
 * directories: host-local, tuning, firewall, dhcp, host-device), libcni's result cache, the executables' addon
 * extraction, `scripts/install` and warm mode's install (through these path-based helpers).
 */
import {
  constants as C,
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Write `data` to the new file `tmp` (created O_EXCL|O_NOFOLLOW with `mode`), fsync it, rename it to `dst` and
 * fsync `dirFd`, the directory both are in. On failure the temp file (if this call created it) is removed and the
 * error rethrown as it is.
 */
export function replaceVia(
  tmp: string,
  dst: string,
  dirFd: number,
  data: string | Uint8Array,
  mode: number,
): void {
  let fd: number | undefined;
  let created = false;
  try {
    fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, mode);
    created = true;
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, dst);
    fsyncSync(dirFd);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    try {
      if (created) unlinkSync(tmp); // never someone else's file of that name (O_EXCL refused it)
    } catch {
      // already renamed
    }
    throw err;
  }
}

/** A fresh temporary name in `dir` (`.cnikit-tmp-<tag>-<pid>-<random>`). */
export function tmpName(dir: string, tag: string): string {
  // node:crypto only when a file is actually placed: this module is part of every executable's start-up
  const { randomBytes } = process.getBuiltinModule('node:crypto') as typeof import('node:crypto');
  return join(dir, `.cnikit-tmp-${tag}-${process.pid}-${randomBytes(4).toString('hex')}`);
}

function withDir<T>(dir: string, fn: (fd: number) => T): T {
  const fd = openSync(dir, C.O_RDONLY | C.O_DIRECTORY);
  try {
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

/** fsync a directory (makes renames in it durable). */
export function fsyncDir(dir: string): void {
  withDir(dir, (fd) => fsyncSync(fd));
}

/** Write `data` to `dst` atomically with `mode` (temp file in its directory, fsync, rename, fsync of the directory). */
export function writeFileAtomic(dst: string, data: string | Uint8Array, mode: number): void {
  const dir = dirname(dst);
  withDir(dir, (fd) => replaceVia(tmpName(dir, 'file'), dst, fd, data, mode));
}

/** Make `dst` a hard link of `src` atomically (link to a temporary name, rename over `dst`, fsync of the directory). */
export function linkAtomic(src: string, dst: string): void {
  const dir = dirname(dst);
  const tmp = tmpName(dir, 'link');
  linkSync(src, tmp);
  try {
    renameSync(tmp, dst);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {}
    throw err;
  }
  fsyncDir(dir);
}
