/**
 * File-descriptor I/O with no imports but node:fs: reading to EOF, complete writes and the terminal check. The
 * start-up path of an executable answers a VERSION with these and nothing else of the SDK; ./fdio.ts builds the
 * process's stdin/stdout on them (with the reference's error texts).
 */
import { fstatSync, readSync, writeSync } from 'node:fs';

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Read a file descriptor to EOF synchronously (a non-blocking pipe's EAGAIN and EINTR are retried, Bun's `EOF` code
 * ends the read); any other failure is thrown as readSync threw it.
 */
export function readAll(fd: number): Uint8Array {
  let buf = new Uint8Array(65536);
  let n = 0;
  for (;;) {
    let k: number;
    try {
      k = readSync(fd, buf, n, buf.length - n, null);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK' || code === 'EINTR') {
        sleepMs(1);
        continue;
      }
      if (code === 'EOF') break;
      throw e;
    }
    if (k === 0) break;
    n += k;
    if (n === buf.length) {
      const bigger = new Uint8Array(buf.length * 2);
      bigger.set(buf);
      buf = bigger;
    }
  }
  return buf.subarray(0, n);
}

/**
 * Write all of `s` (UTF-8) to a file descriptor: EAGAIN/EINTR retried; any other failure (EPIPE, EBADF, ENOSPC, EIO …)
 * is thrown, because it means the data was not delivered.
 */
export function writeAll(fd: number, s: string): void {
  const data = new TextEncoder().encode(s);
  let off = 0;
  while (off < data.length) {
    try {
      off += writeSync(fd, data, off, data.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EINTR') {
        sleepMs(1);
        continue;
      }
      throw e; // EPIPE included: the reader is gone, the caller must know the data was not delivered
    }
  }
}

/**
 * Whether fd 0 is a terminal. A terminal is a character device, and never one of Linux's memory devices (major 1:
 * /dev/null, /dev/zero, /dev/urandom …), so a pipe, a file or /dev/null (what a runtime gives) is told apart with one
 * fstat, and node:tty (whose module pulls in the stream classes: milliseconds of a Bun start-up) is loaded only for
 * another character device.
 */
export function stdinIsTerminal(fd = 0): boolean {
  try {
    const st = fstatSync(fd);
    if (!st.isCharacterDevice() || devMajor(st.rdev) === MEM_MAJOR) return false;
  } catch {
    return false; // a closed or unusable descriptor is no terminal (isatty says the same)
  }
  return (process.getBuiltinModule('node:tty') as typeof import('node:tty')).isatty(fd);
}

/** Linux's major number of the memory character devices (drivers/char/mem.c). */
const MEM_MAJOR = 1;

/** The major number of a device number as glibc encodes it (gnu_dev_major). */
export function devMajor(rdev: number): number {
  return ((rdev >>> 8) & 0xfff) | (Math.floor(rdev / 2 ** 32) & ~0xfff);
}
