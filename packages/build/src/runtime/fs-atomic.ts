/**
 * Atomic file placement, the one implementation for everything that installs files a runtime may execute or read at
 * any moment (the extracted native addon, `scripts/install`, warm mode's install, the build's links): a temporary name
 * in the destination's directory (O_EXCL, O_NOFOLLOW), fsync, rename over the destination — a reader sees the old or
 * the new file, never a partial one.
 */
import {
  closeSync,
  constants,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';

/** A fresh temporary name in `dir` (`.cnikit-tmp-<tag>-<pid>-<random>`). */
export function tmpName(dir: string, tag: string): string {
  // node:crypto only when a file is actually placed: this module is part of every executable's start-up
  const { randomBytes } = process.getBuiltinModule('node:crypto') as typeof import('node:crypto');
  return join(dir, `.cnikit-tmp-${tag}-${process.pid}-${randomBytes(4).toString('hex')}`);
}

/** fsync a directory (makes renames in it durable). */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function renameOrClean(tmp: string, dst: string): void {
  try {
    renameSync(tmp, dst);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {}
    throw err;
  }
}

/** Write `bytes` to `dst` atomically with `mode`. */
export function writeFileAtomic(dst: string, bytes: Uint8Array, mode: number): void {
  const tmp = tmpName(dirname(dst), 'file');
  const fd = openSync(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  renameOrClean(tmp, dst);
}

/** Make `dst` a hard link of `src` atomically (link to a temporary name, rename over `dst`). */
export function linkAtomic(src: string, dst: string): void {
  const tmp = tmpName(dirname(dst), 'link');
  linkSync(src, tmp);
  renameOrClean(tmp, dst);
}
