// Loader for the compiled addon (packages/sys/src/sys.c → cnikit_sys.node).
//
// Where the addon is looked for, first hit wins (nothing is loaded at import time; the first call that needs
// the addon loads it, and the result is cached for the process):
//   1. An explicit path, set BEFORE the first use of any @cnikit/sys function:
//        globalThis.__CNIKIT_NATIVE_PATH__ = '/abs/path/cnikit_sys.node'   (preferred inside an executable), or
//        the environment variable CNIKIT_NATIVE_PATH.
//      A single-file executable (node SEA or `bun build --compile`) embeds the .node bytes, writes them once to a
//      root-owned, content-addressed path (e.g. /var/lib/cnikit/native/<sha256>.node, written to a temp name
//      then renamed; reused when the hash matches: hashed once, later trusted by the fstat identity stamped next
//      to it, see packages/build/src/runtime/native.ts), sets globalThis.__CNIKIT_NATIVE_PATH__ to it, then runs
//      the plugin. When an override is set, no other location is tried: a wrong override is an error, not a fallback.
//   2. The prebuilt addon shipped in the npm package: <package>/prebuilds/<platform>-<arch>/cnikit_sys.node
//      (linux-x64), found relative to this file (src/ or dist/: import.meta.url, or __dirname in a CommonJS
//      bundle). One that exists but does not load (another libc, a foreign ABI) is skipped for the next one.
//   3. <package>/build/Release/cnikit_sys.node: built from source by node-gyp (the package's install script when
//      no prebuilt matches, `npm rebuild @cnikit/sys`, or `npm run build:native` in the cnikit repository).
//   4. cnikit_sys.node next to the running executable (process.execPath).
// The addon is loaded with process.dlopen(module, path), which works in Node (including SEA) and in Bun.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The raw addon interface (see the comment at the top of src/sys.c). */
export interface NativeAddon {
  setns(fd: number, nstype: number): void;
  nsType(fd: number): number;
  fsMagic(fd: number): number;
  flock(fd: number, op: 0 | 1 | 2, nonBlocking: boolean): boolean;
  gettid(): number;
  closeFd(fd: number): void;
  /** Absent from an addon built before it. */
  closeFdLater?(fd: number, afterGrace?: boolean): void;
  nlOpen(protocol: number, rcvbuf: number): [number, number];
  nlSetOpt(fd: number, option: number, value: number): void;
  nlSend(fd: number, msg: Uint8Array, portId?: number): void;
  nlRecv(fd: number, timeoutMs: number): Buffer | null;
  errnoName(errno: number): string;
  errnoMessage(errno: number): string;
  listenUnix(path: string, backlog: number): number;
  acceptUnix(fd: number, timeoutMs: number): (PeerCred & { fd: number }) | null;
  connectUnix(path: string): number;
  peerCred(fd: number): PeerCred;
  recvMsg(fd: number, maxLen: number, timeoutMs: number): { data: Buffer; fds: number[] } | null;
  sendAll(fd: number, data: Uint8Array, timeoutMs: number, fds?: number[]): void;
  setCloexec(fd: number, on: boolean): void;
  watchdogSet(path: string, argv: string[], envp: string[], keepFd: number): void;
  watchdogArm(timeoutMs: number): void;
  watchdogDisarm(): void;
  watchdogOnStopSignal(entry: string): void;
  execReplace(path: string, argv: string[], envp: string[], keepFd: number): never;
  udpOpenDevice(ifname: string, port: number, chaddr?: Uint8Array): number;
  netnsNew(): number;
  tunCreate(name: string, flags: number, owner: number, group: number): string;
}

/** The credentials of the process at the other end of a Unix socket (SO_PEERCRED). */
export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

declare global {
  var __CNIKIT_NATIVE_PATH__: string | undefined;
}

export const ADDON_FILE = 'cnikit_sys.node';

let cached: NativeAddon | undefined;

function moduleDir(): string | undefined {
  try {
    const url = import.meta.url;
    if (typeof url === 'string' && url.startsWith('file:')) return dirname(fileURLToPath(url));
  } catch {
    // not an ES module context
  }
  return typeof __dirname === 'string' ? __dirname : undefined;
}

/** The override path (globalThis.__CNIKIT_NATIVE_PATH__, then CNIKIT_NATIVE_PATH), read once per call. */
function nativeOverride(): string | undefined {
  const g = globalThis.__CNIKIT_NATIVE_PATH__; // may be a lazy getter that extracts the embedded addon
  if (typeof g === 'string' && g !== '') return g;
  const e = process.env.CNIKIT_NATIVE_PATH;
  return e ? e : undefined;
}

/** The paths loadNative() would try, in order (just the override when one is set). */
export function nativeCandidates(): string[] {
  return candidates(nativeOverride());
}

/** The prebuilt directory name for this platform (prebuildify's `<platform>-<arch>`). */
export const PREBUILT_TARGET = `${process.platform}-${process.arch}`;

function candidates(override: string | undefined): string[] {
  if (override) return [override];
  const out: string[] = [];
  const dir = moduleDir();
  if (dir) {
    out.push(join(dir, '..', 'prebuilds', PREBUILT_TARGET, ADDON_FILE));
    out.push(join(dir, '..', 'build', 'Release', ADDON_FILE));
  }
  out.push(join(dirname(process.execPath), ADDON_FILE));
  return out;
}

function isPrebuilt(path: string): boolean {
  return path.includes('/prebuilds/');
}

/** Loads (once) and returns the native addon; throws an actionable error when it cannot be found or loaded. */
export function loadNative(): NativeAddon {
  if (cached) return cached;
  const override = nativeOverride();
  const paths = candidates(override);
  const skipped: string[] = [];
  for (const path of paths) {
    if (!override && !existsSync(path)) continue;
    const mod = { exports: {} as NativeAddon };
    try {
      process.dlopen(mod, path);
    } catch (err) {
      if (!override && isPrebuilt(path)) {
        // e.g. a glibc build on musl: a build from source (build/Release) may still follow
        skipped.push(`${path}: ${(err as Error).message}`);
        continue;
      }
      throw new Error(`cnikit: cannot load the native addon ${path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    cached = mod.exports;
    return cached;
  }
  throw new Error(
    `cnikit: native addon ${ADDON_FILE} not found (tried ${paths.join(', ')})` +
      (skipped.length ? `; prebuilt addon did not load: ${skipped.join('; ')}` : '') +
      `; no prebuilt addon for ${PREBUILT_TARGET}: build it from source with \`npm rebuild @cnikit/sys\` ` +
      '(needs a C compiler, make and python3; `npm run build:native` in the cnikit repository), ' +
      'or set CNIKIT_NATIVE_PATH / globalThis.__CNIKIT_NATIVE_PATH__',
  );
}

/** Like loadNative() but returns undefined instead of throwing (used for optional helpers such as errno texts). */
export function tryLoadNative(): NativeAddon | undefined {
  if (cached) return cached;
  try {
    return loadNative();
  } catch {
    return undefined;
  }
}
