/**
 * Run-time extraction of the native addon embedded in the single-file executable.
 *
 * The addon bytes travel inside the executable (Node SEA asset / Bun embedded file). A shared object can only
 * be dlopen()ed from a file, so on first use it is written once to a content-addressed path
 *
 *   /run/cnikit/<sha256>.node                       (root; /run is root-owned, so nobody can pre-create the dir)
 *   $XDG_RUNTIME_DIR/cnikit/<sha256>.node            (non-root with a runtime dir)
 *   <tmpdir>/cnikit-<uid>/<sha256>.node              (last resort)
 *
 * Safety rules, so a pre-created file, directory or symlink cannot make us load someone else's code:
 * - the directory is created 0700; an existing one must be a real directory (lstat, not a symlink) owned by our
 *   euid with no group/other permission bits, otherwise it is refused;
 * - the file is written under a unique temporary name with O_CREAT|O_EXCL|O_NOFOLLOW, fsynced, then renamed;
 * - before use the final file is opened with O_NOFOLLOW and checked through the open descriptor: regular file,
 *   owned by our euid, not writable by group/other, size and SHA-256 equal to the embedded bytes.
 * A file that fails the checks is replaced (rename over it) once; if it still fails, we refuse to load it.
 *
 * The SHA-256 is computed once per extracted file, not on every call: after a file passed the full check, its
 * identity as fstat reports it through the open descriptor (device, inode, size, mtime and ctime in nanoseconds) is
 * written next to it as `<sha256>.stamp` (same private directory, same atomic write, 0400). A later call that finds
 * the file still regular, ours and not group/other-writable, and a stamp (a regular file of ours, not
 * group/other-writable, opened with O_NOFOLLOW) equal to the file's identity, uses it without reading it. Any
 * change to the file — a write, chmod, chown, new link, or a rename over it — changes its ctime (which no system
 * call sets back) or its inode, so the stamp no longer matches and the full check runs again (and re-stamps or
 * replaces the file). Only our euid can write in the private directory, so the trust is the same as before.
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
} from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@cnikit/sys/atomic';

export interface NativeSource {
  /** Expected SHA-256 (hex) of the addon, computed at build time. */
  sha256: string;
  /** Returns the addon bytes (read from the SEA asset / Bun embedded file); only called when extraction is needed. */
  read(): Uint8Array;
}

// node:crypto and node:os are loaded on first use only: a VERSION call never needs them, and under Bun each
// built-in module costs start-up time and resident memory.
function crypto(): typeof import('node:crypto') {
  return process.getBuiltinModule('node:crypto') as typeof import('node:crypto');
}
function tmpdir(): string {
  return (process.getBuiltinModule('node:os') as typeof import('node:os')).tmpdir();
}
interface Hasher {
  update(data: Uint8Array): Hasher;
  digest(enc: 'hex'): string;
}
/**
 * SHA-256 hasher: Bun's native CryptoHasher when running under Bun (loading node:crypto costs Bun ~3 ms per
 * start), node:crypto otherwise (already part of Node's bootstrap).
 */
function createHash(alg: 'sha256'): Hasher {
  const BunHasher = (globalThis as { Bun?: { CryptoHasher?: new (alg: string) => Hasher } }).Bun
    ?.CryptoHasher;
  if (BunHasher) return new BunHasher(alg);
  return crypto().createHash(alg) as unknown as Hasher;
}

function euid(): number {
  return typeof process.geteuid === 'function' ? process.geteuid() : 0;
}

/** Candidate directories in order of preference. */
export function candidateDirs(env: Record<string, string | undefined> = process.env): string[] {
  return [...eachCandidateDir(env)];
}

/**
 * The candidate directories one by one: the last resort (under the temporary directory, which needs node:os) is
 * computed only when every earlier one failed, so a start-up that finds its addon in /run/cnikit never loads node:os.
 */
function* eachCandidateDir(env: Record<string, string | undefined>): Generator<string> {
  const uid = euid();
  if (env.CNIKIT_NATIVE_DIR) yield env.CNIKIT_NATIVE_DIR;
  if (uid === 0) yield '/run/cnikit';
  if (env.XDG_RUNTIME_DIR) yield join(env.XDG_RUNTIME_DIR, 'cnikit');
  yield join(tmpdir(), `cnikit-${uid}`);
}

/** Make sure `dir` exists, is a real directory owned by us and private (0700). Throws otherwise. */
export function ensurePrivateDir(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory (symlink or file); refusing to use it`);
  if (st.uid !== euid())
    throw new Error(`${dir} is owned by uid ${st.uid}, not ${euid()}; refusing to use it`);
  if ((st.mode & 0o077) !== 0) {
    throw new Error(`${dir} has mode ${(st.mode & 0o777).toString(8)}; expected 0700; refusing to use it`);
  }
}

/** The identity of an open file that any change to it alters (ctime cannot be set back by a system call). */
function identity(st: import('node:fs').BigIntStats): string {
  return `cnikit-addon-stamp 1 ${st.dev} ${st.ino} ${st.size} ${st.mtimeNs} ${st.ctimeNs}\n`;
}

/** The stamp's path for an extracted addon `<dir>/<sha256>.node`. */
export function stampPath(file: string): string {
  return file.endsWith('.node') ? `${file.slice(0, -'.node'.length)}.stamp` : `${file}.stamp`;
}

/** The content of the stamp at `path`, if it is a regular file we own and not group/other-writable. */
function readStamp(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.uid !== euid() || (st.mode & 0o022) !== 0 || st.size > 256) return undefined;
    const buf = Buffer.allocUnsafe(256);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.toString('latin1', 0, n);
  } finally {
    closeSync(fd);
  }
}

/**
 * True if `file` is a regular file we own, not group/other-writable, whose content hashes to `sha256`. With
 * `stamp` set, a file whose identity equals its stamp (`<sha256>.stamp`, see the top of this file) is trusted
 * without hashing, and a file that passes the full check is stamped.
 */
export function verifyFile(file: string, sha256: string, stamp = false): boolean {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return false;
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!st.isFile() || st.uid !== BigInt(euid()) || (st.mode & 0o022n) !== 0n) return false;
    const id = stamp ? identity(st) : '';
    if (stamp && readStamp(stampPath(file)) === id) return true;
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(Math.min(Math.max(Number(st.size), 1), 1 << 20));
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
    }
    if (hash.digest('hex') !== sha256) return false;
    if (stamp) {
      try {
        writeFileAtomic(stampPath(file), id, 0o400);
      } catch {
        // no stamp: the next call hashes again
      }
    }
    return true;
  } finally {
    closeSync(fd);
  }
}

/** Return a verified path of the extracted addon, extracting it if needed. Throws with every reason on failure. */
export function extractNative(
  src: NativeSource,
  dirs: Iterable<string> = eachCandidateDir(process.env),
): string {
  if (!/^[0-9a-f]{64}$/.test(src.sha256))
    throw new Error(`bad embedded addon hash ${JSON.stringify(src.sha256)}`);
  const problems: string[] = [];
  let bytes: Uint8Array | undefined;
  for (const dir of dirs) {
    try {
      ensurePrivateDir(dir);
      const final = join(dir, `${src.sha256}.node`);
      if (verifyFile(final, src.sha256, true)) return final;
      bytes ??= src.read();
      const got = createHash('sha256').update(bytes).digest('hex');
      if (got !== src.sha256)
        throw new Error(`embedded addon is corrupt (sha256 ${got}, expected ${src.sha256})`);
      writeFileAtomic(final, bytes, 0o500);
      if (verifyFile(final, src.sha256, true)) return final;
      throw new Error(`${final} failed verification after writing it`);
    } catch (err) {
      problems.push(`${dir}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot extract the embedded native addon: ${problems.join('; ')}`);
}

/**
 * Install a lazy loader override: the first read of `globalThis.__CNIKIT_NATIVE_PATH__` (done by @cnikit/sys's
 * loader when it first needs the addon) extracts the addon and returns its path. Commands that never touch the
 * kernel (VERSION, bare invocation) therefore pay nothing.
 */
export function installNativeOverride(src: NativeSource): void {
  let cached: string | undefined;
  Object.defineProperty(globalThis, '__CNIKIT_NATIVE_PATH__', {
    configurable: true,
    enumerable: false,
    get() {
      cached ??= extractNative(src);
      return cached;
    },
    set(v: string) {
      cached = v;
    },
  });
}

/** The addon embedded as a Node SEA asset (`assets` in the SEA config). */
export function seaSource(sha256: string, key: string): NativeSource {
  return {
    sha256,
    read() {
      const sea = process.getBuiltinModule('node:sea') as typeof import('node:sea');
      return new Uint8Array(sea.getAsset(key));
    },
  };
}

/** The addon embedded by `bun build --compile <bundle> <addon>` (listed in Bun.embeddedFiles). */
export function bunSource(sha256: string, prefix: string): NativeSource {
  return {
    sha256,
    read() {
      const bun = (globalThis as { Bun?: { embeddedFiles?: Array<{ name?: string }> } }).Bun;
      const names = (bun?.embeddedFiles ?? []).map((b) => b.name ?? '');
      const name = names.find((n) => n.startsWith(prefix) && n.endsWith('.node'));
      if (!name)
        throw new Error(`embedded addon ${prefix}*.node not found (embedded: ${names.join(', ') || 'none'})`);
      const root = process.argv[1]?.startsWith('/$bunfs/')
        ? process.argv[1].slice(0, process.argv[1].lastIndexOf('/'))
        : '/$bunfs/root';
      return new Uint8Array(readFileSync(join(root, name)));
    },
  };
}
