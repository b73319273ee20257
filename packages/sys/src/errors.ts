import { constants } from 'node:os';
import { tryLoadNative } from './native.ts';

const BRAND = Symbol.for('cnikit.SysError');

// Built on first use (only without the addon): reading node:os constants at load would add to every start
// under Bun (the single-file bundle loads built-ins on first property access).
let errnoNamesMap: Map<number, string> | undefined;
function errnoNames(): Map<number, string> {
  if (errnoNamesMap) return errnoNamesMap;
  const m = new Map<number, string>();
  for (const [name, no] of Object.entries(constants.errno)) if (!m.has(no)) m.set(no, name);
  // Linux aliases: prefer the names the kernel headers use first.
  m.set(11, 'EAGAIN');
  m.set(95, 'EOPNOTSUPP');
  errnoNamesMap = m;
  return m;
}

/** 'ENOENT' for 2 (the sign is ignored, so a netlink `-errno` works too). */
export function errnoName(errno: number): string {
  const no = Math.abs(errno);
  const native = tryLoadNative();
  if (native) return native.errnoName(no);
  return errnoNames().get(no) ?? `E${no}`;
}

/** Go syscall.Errno texts of common errors, for when the addon is not loaded (unit tests with fake transports). */
const GO_ERRNO_TEXT: Record<number, string> = {
  1: 'operation not permitted',
  2: 'no such file or directory',
  3: 'no such process',
  4: 'interrupted system call',
  5: 'input/output error',
  12: 'cannot allocate memory',
  13: 'permission denied',
  16: 'device or resource busy',
  17: 'file exists',
  19: 'no such device',
  22: 'invalid argument',
  34: 'numerical result out of range',
  95: 'operation not supported',
  97: 'address family not supported by protocol',
  99: 'cannot assign requested address',
  101: 'network is unreachable',
  105: 'no buffer space available',
  110: 'connection timed out',
};

/** The Go `syscall.Errno` text: 'no such file or directory' for 2 (sign ignored). */
export function errnoMessage(errno: number): string {
  const no = Math.abs(errno);
  const native = tryLoadNative();
  if (native) return native.errnoMessage(no);
  return GO_ERRNO_TEXT[no] ?? `errno ${no} (${errnoName(no)})`;
}

/**
 * An operating-system error: `errno` (positive), `code` ('ENOENT'), `syscall` ('setns', 'netlink'...) and
 * `reason`, the Go errno text ('file exists'). The message is `reason` unless one is given, so wrapping it as
 * `failed to X: ${err.message}` gives the same text as the Go reference plugins.
 *
 * Branded: `instanceof SysError` / `isSysError` hold across two bundled copies of this package.
 */
export class SysError extends Error {
  readonly errno: number;
  readonly code: string;
  readonly syscall: string;
  readonly reason: string;

  constructor(errno: number, syscall: string, message?: string, options?: { cause?: unknown }) {
    const no = Math.abs(errno);
    const reason = errnoMessage(no);
    super(message ?? reason, options);
    this.name = 'SysError';
    this.errno = no;
    this.code = errnoName(no);
    this.syscall = syscall;
    this.reason = reason;
    Object.defineProperty(this, BRAND, { value: true });
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about (maybe a subclass)
    if (this === SysError) return isSysError(value);
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about (maybe a subclass)
    return Function.prototype[Symbol.hasInstance].call(this, value);
  }

  /**
   * The Go-style reason of any error, for `failed to X: <reason>` texts: a system error's errno text ('file
   * exists'; any error carrying a non-empty string `reason`, so errors of a second bundled copy count too), else
   * the message (else the value as text).
   *
   * The one definition of "reason of a system error": it lives here, beside the `reason` it reads, because this is
   * the lowest package of the error chain — @cnikit/netlink and @cnikit/firewall (which do not depend on skel) use it
   * directly, and skel's `errorReason` (CniError → msg) applies the same `reason` rule for everything else. A static
   * method so that the package index needs no new export.
   */
  static reasonOf(err: unknown): string {
    const r = (err as { reason?: unknown } | null)?.reason;
    if (typeof r === 'string' && r) return r;
    return err instanceof Error ? err.message : String(err);
  }

  /** Converts an error thrown by the addon (plain Error with errno/code/syscall) into a SysError. */
  static fromNative(err: unknown): unknown {
    if (err instanceof Error && typeof (err as { errno?: unknown }).errno === 'number' && !isSysError(err)) {
      const e = err as Error & { errno: number; syscall?: string };
      return new SysError(e.errno, e.syscall ?? 'unknown');
    }
    return err;
  }
}

export function isSysError(value: unknown): value is SysError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}
