// Network namespace handles: the TypeScript side of Go's pkg/ns.
//
// Namespaces are per thread. withNetns() switches the calling (JavaScript) thread with setns(2), runs `fn`
// synchronously, and always switches back. Inside, use only synchronous work: sync fs (/proc/sys is the target
// namespace's), NetlinkSocket.open (the socket stays bound to the namespace it was opened in), spawnSync (the
// child is forked from this thread). Async fs/dns run on libuv worker threads, which stay where they were.
//
// How a path is verified to be a network namespace (stricter than Go's statfs-magic-only check):
//   1. open(path, O_RDONLY|O_CLOEXEC); ENOENT/ENOTDIR → NetnsNotFoundError
//      (`failed to Statfs "<path>": no such file or directory`, the Go text; DEL treats it as already gone,
//      and also an empty regular file left by an unmounted bind mount: see isNetnsGoneForDel);
//   2. fstatfs(fd).f_type must be NSFS (0x6e736673) or PROCFS (0x9fa0), else NotNetnsError
//      (`unknown FS magic on "<path>": <hex>`, the Go text);
//   3. ioctl(fd, NS_GET_NSTYPE) must be CLONE_NEWNET, else NotNetnsError (`"<path>" is not a network
//      namespace`): this rejects other namespace types (/proc/self/ns/mnt) and ordinary procfs files, which Go
//      accepts and only fails on later at setns.
import { closeSync, constants, fstatSync, openSync, type Stats, statSync } from 'node:fs';
import {
  CLONE_NEWNET,
  errnoMessage,
  fsMagic,
  gettid,
  isSysError,
  NSFS_MAGIC,
  nsType,
  PROC_SUPER_MAGIC,
  SysError,
  setns,
} from '@cnikit/sys';

const O_CLOEXEC = 0o2000000; // Linux; fs.constants does not expose it (libuv adds it anyway)
const NOT_FOUND_BRAND = Symbol.for('cnikit.NetnsNotFoundError');
const NOT_NETNS_BRAND = Symbol.for('cnikit.NotNetnsError');
const RESTORE_BRAND = Symbol.for('cnikit.NetnsRestoreError');

/** The namespace path does not exist (any more). DEL treats this as "already gone". */
export class NetnsNotFoundError extends SysError {
  readonly path: string;
  constructor(path: string, errno = 2) {
    // Go: `failed to Statfs %q: %v`
    super(errno, 'statfs', `failed to Statfs ${JSON.stringify(path)}: ${errnoMessage(errno)}`);
    this.name = 'NetnsNotFoundError';
    this.path = path;
    Object.defineProperty(this, NOT_FOUND_BRAND, { value: true });
  }
}

/** The path exists but is not a network namespace. */
export class NotNetnsError extends Error {
  readonly path: string;
  readonly code = 'ENOTNETNS';
  /** The file system type (statfs f_type) when the file is on neither nsfs nor procfs; undefined otherwise. */
  readonly fsMagic: number | undefined;
  constructor(path: string, message: string, fsMagic?: number) {
    super(message);
    this.name = 'NotNetnsError';
    this.path = path;
    this.fsMagic = fsMagic;
    Object.defineProperty(this, NOT_NETNS_BRAND, { value: true });
  }
}

/**
 * Switching the thread back to its original namespace failed: the thread (the JavaScript main thread) is in
 * the wrong namespace. Every later withNetns call throws this error again; the process should exit.
 */
export class NetnsRestoreError extends Error {
  readonly fatal = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NetnsRestoreError';
    Object.defineProperty(this, RESTORE_BRAND, { value: true });
  }
}

function branded(err: unknown, brand: symbol): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[brand] === true;
}

/** True when `err` says the namespace path is gone (NetnsNotFoundError, also through `cause` chains). */
export function isNetnsGone(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (branded(e, NOT_FOUND_BRAND)) return true;
  }
  return false;
}

export function isNotNetnsError(err: unknown): err is NotNetnsError {
  return branded(err, NOT_NETNS_BRAND);
}

/**
 * The DEL rule (loopback, bridge): true when the namespace at `path` is gone, so DEL has nothing to do inside it.
 * Gone is: the path is missing (isNetnsGone), or `err` is a NotNetnsError for a file on an ordinary file system
 * that is an EMPTY regular file — what stays behind in /run/netns (or a runtime's own directory) after the
 * namespace's bind mount was unmounted but the mount point was not removed. Everything else is a real error: a
 * non-empty file, a directory, a nsfs/procfs file of another namespace type (/proc/self/ns/mnt, /proc/self/status,
 * whose procfs size reads 0 too), or a file that cannot be inspected.
 */
export function isNetnsGoneForDel(err: unknown, path: string): boolean {
  if (isNetnsGone(err)) return true;
  let notNs: NotNetnsError | undefined;
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (isNotNetnsError(e)) {
      notNs = e;
      break;
    }
  }
  if (!notNs || notNs.fsMagic === undefined) return false;
  let st: Stats;
  try {
    st = statSync(path);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT'; // removed since: gone
  }
  return st.isFile() && st.size === 0;
}

let poisoned: NetnsRestoreError | undefined;

/** Whether the namespace descriptor `fd` is a network namespace (ENOTTY/EINVAL from NS_GET_NSTYPE: not one). */
function isNetType(fd: number): boolean {
  try {
    return nsType(fd) === CLONE_NEWNET;
  } catch (err) {
    if (isSysError(err) && (err.code === 'ENOTTY' || err.code === 'EINVAL')) return false;
    throw err;
  }
}

/**
 * Opens `path` and checks it is a network namespace. Returns the descriptor (the caller closes it).
 * Throws NetnsNotFoundError (missing), NotNetnsError (some other file) or SysError (e.g. EACCES).
 */
export function openNetnsFd(path: string): number {
  if (typeof path !== 'string' || path === '') throw new NetnsNotFoundError(String(path));
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | O_CLOEXEC);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw new NetnsNotFoundError(path, code === 'ENOENT' ? 2 : 20);
    const errno = Math.abs((err as NodeJS.ErrnoException).errno ?? 5);
    throw new SysError(errno, 'open', `failed to open ${JSON.stringify(path)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    const magic = fsMagic(fd);
    if (magic !== NSFS_MAGIC && magic !== PROC_SUPER_MAGIC) {
      throw new NotNetnsError(
        path,
        `unknown FS magic on ${JSON.stringify(path)}: ${magic.toString(16)}`,
        magic,
      );
    }
    if (!isNetType(fd)) {
      throw new NotNetnsError(path, `${JSON.stringify(path)} is not a network namespace`);
    }
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** A handle on an open network namespace (like Go's ns.NetNS). */
export class NetNS {
  readonly path: string;
  #fd: number;

  private constructor(path: string, fd: number) {
    this.path = path;
    this.#fd = fd;
  }

  /** Opens and verifies `path` (see openNetnsFd for the errors). */
  static open(path: string): NetNS {
    return new NetNS(path, openNetnsFd(path));
  }

  /**
   * The namespace of the calling thread right now. Its `path` is the thread's own /proc path, which follows the
   * thread into other namespaces: use `fd` to refer to this namespace later.
   */
  static current(): NetNS {
    return NetNS.open(currentNetnsPath());
  }

  get fd(): number {
    if (this.#fd < 0) throw new Error(`${JSON.stringify(this.path)} has already been closed`);
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Runs fn in this namespace (see withNetns). */
  do<T>(fn: (hostNs: NetNS) => Sync<T>): T {
    return runIn(this.fd, this.path, fn);
  }

  /** Closes the handle; closing twice throws, like Go (`"<path>" has already been closed`). */
  close(): void {
    const fd = this.fd;
    this.#fd = -1;
    closeSync(fd);
  }
}

/**
 * The calling thread's own network-namespace path, `/proc/<pid>/task/<tid>/ns/net` (Go's GetCurrentNS path).
 * Valid while this thread lives; open it to pin the namespace.
 */
export function currentNetnsPath(): string {
  return `/proc/${process.pid}/task/${gettid()}/ns/net`;
}

function statOf(ref: string | number): Stats {
  return typeof ref === 'number' ? fstatSync(ref) : statSync(ref);
}

/** True when both refer to the same namespace (same st_dev and st_ino). Paths or open descriptors. */
export function sameNetns(a: string | number, b: string | number): boolean {
  const sa = statOf(a);
  const sb = statOf(b);
  return sa.dev === sb.dev && sa.ino === sb.ino;
}

/** True when `path` is a network namespace (false for missing paths and other files). */
export function isNetns(path: string): boolean {
  let fd: number;
  try {
    fd = openNetnsFd(path);
  } catch {
    return false;
  }
  closeSync(fd);
  return true;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    (typeof v === 'object' || typeof v === 'function') &&
    v !== null &&
    typeof (v as { then?: unknown }).then === 'function'
  );
}

/** One kernel section in another namespace: a `netns` span of the traced plugin call running it. */
function runIn<T>(targetFd: number, targetPath: string, fn: (hostNs: NetNS) => T): T {
  return traceSection('netns', { 'cnikit.netns': targetPath }, () => runInNs(targetFd, targetPath, fn));
}

function runInNs<T>(targetFd: number, targetPath: string, fn: (hostNs: NetNS) => T): T {
  if (poisoned) throw poisoned;
  const host = NetNS.current();
  try {
    const same = sameNetns(host.fd, targetFd);
    if (!same) {
      try {
        setns(targetFd);
      } catch (err) {
        const e = err as SysError;
        throw new SysError(e.errno ?? 22, 'setns', `error switching to ns ${targetPath}: ${e.message}`, {
          cause: err,
        });
      }
    }
    let result: T;
    try {
      result = fn(host);
    } finally {
      if (!same) {
        try {
          setns(host.fd);
        } catch (err) {
          poisoned = new NetnsRestoreError(
            `failed to switch the thread back to its network namespace ${host.path} from ${targetPath}: ${(err as Error).message}`,
            { cause: err },
          );
          // biome-ignore lint/correctness/noUnsafeFinally: a thread left in the wrong namespace outranks fn's error
          throw poisoned;
        }
      }
    }
    if (isThenable(result)) {
      // Do not leave an unhandled rejection behind; the caller gets this error instead.
      Promise.resolve(result).catch(() => {});
      throw new TypeError(
        `withNetns(${JSON.stringify(targetPath)}): the callback returned a Promise; the work inside a network ` +
          'namespace must be synchronous (async work runs on other threads, in the wrong namespace)',
      );
    }
    return result;
  } finally {
    host.close();
  }
}

/**
 * The return type of a callback that must be synchronous: `T` itself, except for a Promise (an `async` callback),
 * which does not type-check — the same mistake withNetns rejects at run time.
 */
export type Sync<T> = T &
  (T extends PromiseLike<unknown> ? { 'withNetns callback must be synchronous': never } : unknown);

/**
 * Runs `fn` with the calling thread switched into the network namespace at `path`, then switches back (also
 * when fn throws). `fn` receives a handle on the original ("host") namespace, valid during the call (e.g. to
 * create a veth peer there). Throws NetnsNotFoundError / NotNetnsError for a bad path, a TypeError if fn returns a
 * Promise (after switching back), and NetnsRestoreError if switching back fails.
 */
export function withNetns<T>(path: string, fn: (hostNs: NetNS) => Sync<T>): T {
  if (poisoned) throw poisoned;
  const fd = openNetnsFd(path);
  try {
    return runIn(fd, path, fn);
  } finally {
    closeSync(fd);
  }
}

const TRACE_HOOK = Symbol.for('cnikit.trace.v1');

/**
 * Runs `fn` as a child span of the traced plugin call running it (skel installs the hook, see
 * @cnikit/skel trace.ts); without one it is just `fn()`. Kernel sections (each withNetns) and tool execs use it.
 */
export function traceSection<T>(name: string, attributes: TraceAttributes, fn: (span?: TracedSpan) => T): T {
  const hook = (globalThis as { [TRACE_HOOK]?: TraceHook })[TRACE_HOOK];
  return hook ? hook.traced(name, attributes, fn) : fn();
}

type TraceAttributes = Record<string, string | number | boolean>;
/** The part of a span a traced section may use: more attributes (e.g. an exit code). */
export interface TracedSpan {
  setAttributes(attributes: TraceAttributes): void;
}
interface TraceHook {
  traced<R>(name: string, attributes: TraceAttributes, fn: (span?: TracedSpan) => R): R;
}

/**
 * Like withNetns, for a namespace already open on `fd` (e.g. NetNS.fd, the `hostNs` handle of an outer withNetns,
 * or a descriptor from openNetnsFd). Checks the descriptor is a network namespace; does not close it.
 */
export function withNetnsFd<T>(fd: number, fn: (hostNs: NetNS) => Sync<T>, label = `fd ${fd}`): T {
  if (poisoned) throw poisoned;
  if (!isNetType(fd)) throw new NotNetnsError(label, `${label} is not a network namespace`);
  return runIn(fd, label, fn);
}
