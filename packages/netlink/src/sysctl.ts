// sysctl get/set under /proc/sys, with Go's pkg/utils/sysctl name rules. Synchronous on purpose: /proc/sys/net
// shows the network namespace of the thread that opens the file, so inside withNetns these act on that
// namespace.
import { readFileSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { errnoMessage, SysError } from '@cnikit/sys';

const PROC_SYS = '/proc/sys/';

/**
 * Go's toNormalName: when the first separator in `name` is a dot, dots and slashes are swapped
 * (`net.ipv4.conf.eth0/100.forwarding` → `net/ipv4/conf/eth0.100/forwarding`); when it is a slash (or there is
 * none) the name is used as it is.
 */
export function sysctlNormalName(name: string): string {
  const dot = name.indexOf('.');
  const slash = name.indexOf('/');
  if (dot < 0 || (slash >= 0 && slash < dot)) return name;
  let out = '';
  for (const c of name) out += c === '.' ? '/' : c === '/' ? '.' : c;
  return out;
}

/** The /proc/sys file for a sysctl name. Rejects names that would leave /proc/sys ('..' or empty components). */
export function sysctlPath(name: string): string {
  if (typeof name !== 'string' || name === '') throw new SysError(22, 'sysctl', 'sysctl: empty name');
  const rel = sysctlNormalName(name);
  const parts = rel.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..') || rel.includes('\0')) {
    throw new SysError(22, 'sysctl', `invalid sysctl name ${JSON.stringify(name)}`);
  }
  return PROC_SYS + rel;
}

function fsError(err: unknown, op: string, path: string): SysError {
  const e = err as NodeJS.ErrnoException;
  const byCode = e.code ? (constants.errno as Record<string, number>)[e.code] : undefined;
  const errno = typeof e.errno === 'number' ? Math.abs(e.errno) : (byCode ?? 5);
  // Go's *PathError text: "open /proc/sys/...: no such file or directory"
  return new SysError(errno, e.syscall ?? op, `${e.syscall ?? op} ${path}: ${errnoMessage(errno)}`, {
    cause: err,
  });
}

/** Reads a sysctl; strips one trailing newline (Go strips one trailing byte). Throws SysError (ENOENT...). */
export function sysctlGet(name: string): string {
  return readProcSys(sysctlPath(name));
}

/** Writes a sysctl, then reads it back and returns what the kernel now reports. */
export function sysctlSet(name: string, value: string | number): string {
  const path = sysctlPath(name);
  writeProcSys(path, value);
  return readProcSys(path);
}

function checkProcSysPath(path: string): void {
  if (
    !path.startsWith(PROC_SYS) ||
    path.split('/').some((p) => p === '.' || p === '..') ||
    path.includes('\0')
  )
    throw new SysError(22, 'sysctl', `invalid sysctl path ${JSON.stringify(path)}`);
}

/**
 * Reads a file under /proc/sys given by its path (for plugins with their own name rules, e.g. tuning's
 * `IFNAME` substitution); one trailing newline stripped; errors in Go's *PathError wording.
 */
export function readProcSys(path: string): string {
  checkProcSysPath(path);
  let data: string;
  try {
    data = readFileSync(path, 'utf8');
  } catch (err) {
    throw fsError(err, 'open', path);
  }
  return data.endsWith('\n') ? data.slice(0, -1) : data;
}

/** Writes a file under /proc/sys verbatim (no newline added); errors in Go's *PathError wording. */
export function writeProcSys(path: string, value: string | number): void {
  checkProcSysPath(path);
  try {
    writeFileSync(path, String(value));
  } catch (err) {
    throw fsError(err, 'write', path);
  }
}
