/**
 * File-descriptor I/O of a plugin process (synchronous, like Go's os.Stdin/os.Stdout): reading fd 0 to EOF, complete
 * writes to fd 1/2, and telling a closed stdin from a /dev/null one. Module-internal (not exported from the package
 * index); process.ts wires it to `dispatch`.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { CniError, ErrorCode } from './errors.ts';
import { readAll, writeAll } from './fdraw.ts';

export { devMajor, stdinIsTerminal } from './fdraw.ts';

/** Where a plugin's output goes (a file descriptor, a captured string). */
export interface Writable {
  write(s: string): unknown;
}

const STRERROR: Record<string, string> = {
  EISDIR: 'is a directory',
  EBADF: 'bad file descriptor',
  EIO: 'input/output error',
  EINVAL: 'invalid argument',
  ENXIO: 'no such device or address',
  ECONNRESET: 'connection reset by peer',
  ENOTCONN: 'transport endpoint is not connected',
};

/** Read a file descriptor to EOF synchronously (handles non-blocking pipes); a failure is the reference's CNI error. */
export function readFdFully(fd: number): Uint8Array {
  try {
    return readAll(fd);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const text = (code && STRERROR[code]) ?? (e instanceof Error ? e.message : String(e));
    throw new CniError(ErrorCode.IOFailure, `error reading from stdin: read /dev/stdin: ${text}`);
  }
}

/** Join byte chunks (no copy for a single chunk). */
export function concatBytes(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/**
 * A synchronous writer on a file descriptor: complete writes, EAGAIN/EINTR retried; any other failure (EPIPE, EBADF,
 * ENOSPC, EIO …) is thrown, because it means the data was not delivered.
 */
export function fdWriter(fd: number): Writable {
  return {
    write(s: string) {
      writeAll(fd, s);
      return true;
    },
  };
}

/**
 * Whether fd 0 was closed by the caller (`<&-`). Node and Bun reopen a closed fd 0–2 on /dev/null at start-up, and
 * both open it read-write (O_RDWR: `flags:` in /proc/self/fdinfo/0 ends in 2), whereas a caller that gives the plugin
 * /dev/null on purpose opens it read-only (Go os/exec with a nil Stdin, libuv's 'ignore', a shell's `</dev/null`), and
 * an inherited descriptor keeps its mode. A read-write /dev/null on fd 0 is taken as a closed stdin, which the reference
 * plugins report as `read /dev/stdin: bad file descriptor` (code 5). The one caller told apart wrongly, a read-write
 * /dev/null given on purpose (Python's subprocess.DEVNULL, a shell's `<>/dev/null`), gets code 5 instead of the code 6
 * of an empty configuration: both fail, as any /dev/null stdin does.
 */
export function stdinClosed(): boolean {
  try {
    if (readlinkSync('/proc/self/fd/0') !== '/dev/null') return false;
    const m = /^flags:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/fdinfo/0', 'latin1'));
    return m !== null && (Number.parseInt(m[1]!, 8) & 3) === 2;
  } catch {
    return false;
  }
}

/** The process's stdin reader: a closed fd 0 answers like the reference, anything else is read to EOF. */
export function readStdin(): Uint8Array {
  if (stdinClosed()) {
    throw new CniError(ErrorCode.IOFailure, 'error reading from stdin: read /dev/stdin: bad file descriptor');
  }
  return readFdFully(0);
}
