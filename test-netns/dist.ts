/**
 * Where the compiled binaries are, and making sure they exist before a black-box test runs.
 */
import { spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CniConfig } from '@cnikit/libcni';
import { EXE_FILE, hardLinksOf, TOOL_FILE } from '@cnikit/sys/layout';
import { buildCommand, distProblem } from '../scripts/dist-sources.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = join(ROOT, 'dist-bin');
export const GO_CNI = '/usr/lib/cni';

export type Backend = 'bun' | 'sea';

export interface BuildInfo {
  default: Backend;
  plugins: string[];
  /** The back-ends this build made (scripts/build.ts). */
  backends: Backend[];
  /** The digest of the sources it was built from (scripts/dist-sources.mjs). */
  sources: string;
  /** The version stamp built in (scripts/build.ts buildStamp): `cnikit --version`, cnikit_build_info. */
  stamp?: { version: string; commit: string; dirty?: boolean; date: string };
}

/**
 * The back-ends the tests drive: both (the default; `npm test` builds both and tests both), or with
 * CNIKIT_TEST_BACKENDS=one (the inner loop, `run-tests --plugin`) only the default one (CNIKIT_BACKEND, else bun),
 * which `npm run build` builds in a fraction of the time.
 */
export function testBackends(): Backend[] {
  return process.env.CNIKIT_TEST_BACKENDS === 'one' ? [defaultBackend()] : ['bun', 'sea'];
}

/** The back-end dist-bin/cnikit links to: CNIKIT_BACKEND (as scripts/build.ts reads it), else bun. */
export function defaultBackend(): Backend {
  return process.env.CNIKIT_BACKEND === 'sea' ? 'sea' : 'bun';
}

/**
 * Make sure dist-bin/ is built, for the back-ends the tests drive (testBackends), from the sources in the working
 * tree (the digest BUILD-INFO.json records: scripts/dist-sources.mjs); when it is missing or stale it is built
 * (`npm run build`, with `--with-sea` for both back-ends). Test files run concurrently, so the build runs under an
 * exclusive lock and the check is repeated once the lock is held. With CNIKIT_DIST_NO_BUILD=1 (the kernel lab's VM:
 * its filesystem is a throw-away overlay) a stale dist-bin/ is an error that names the command to run instead.
 */
function ensureFresh(backends: Backend[]): BuildInfo {
  const info = join(DIST, 'BUILD-INFO.json');
  const problem = distProblem(ROOT, backends);
  if (problem !== undefined) {
    if (process.env.CNIKIT_DIST_NO_BUILD === '1') throw new Error(problem);
    // flock(1) serialises concurrent test files (the native addon, and with it @cnikit/sys's flock, may not exist
    // yet); under the lock the check is made again, so the files that waited find the work done.
    const lock = join(ROOT, 'node_modules', '.cnikit-build.lock');
    const r = spawnSync(
      'flock',
      [lock, process.execPath, join(ROOT, 'scripts', 'dist-sources.mjs'), `--ensure=${backends.join(',')}`],
      { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (r.error || r.status !== 0)
      throw new Error(`${problem}; the build failed: run \`${buildCommand(backends)}\` and read its output`);
    const still = distProblem(ROOT, backends);
    if (still !== undefined) throw new Error(`${still} (the build the tests ran did not fix it)`);
  }
  return JSON.parse(readFileSync(info, 'utf8')) as BuildInfo;
}

export function ensureBuilt(): BuildInfo {
  return ensureFresh(testBackends());
}

/**
 * dist-bin/, checked fresh for the tests (ensureBuilt): what a test that execs the compiled plugins gives as CNI_PATH
 * or joins a plugin name to (the default back-end only: dist-bin/<plugin>). Every test that uses dist-bin goes through
 * this or ensureBuilt.
 */
export function distBin(): string {
  ensureFresh([defaultBackend()]);
  return DIST;
}

/** Directory whose files are named after the plugins, for one back-end (the default one is dist-bin itself). */
export function binDir(backend: Backend, info: BuildInfo): string {
  return backend === info.default ? DIST : join(DIST, backend, 'links');
}

/**
 * The non-default back-end has only dist-bin/<backend>/cnikit; give it a links dir (hard links per plugin) so it can
 * be driven through CNI_PATH exactly like the default one. That back-end is checked fresh first (ensureBuilt may have
 * checked only the default one: CNIKIT_TEST_BACKENDS=one).
 */
export function ensureLinks(backend: Backend, info: BuildInfo): string {
  const dir = binDir(backend, info);
  if (dir === DIST) return dir;
  ensureFresh([info.default, backend]);
  const exe = join(DIST, backend, 'cnikit');
  mkdirSync(dir, { recursive: true });
  for (const n of ['cnikit', ...info.plugins]) {
    const tmp = join(dir, `.${n}.tmp-${process.pid}`);
    rmSync(tmp, { force: true });
    linkSync(exe, tmp);
    renameSync(tmp, join(dir, n));
  }
  return dir;
}

export function goAvailable(name = 'loopback'): boolean {
  try {
    return statSync(join(GO_CNI, name)).isFile();
  } catch {
    return false;
  }
}

/** The plugin links of dist-bin (every hard link of cnikit except the cnitool command). */
export function distPlugins(): string[] {
  return hardLinksOf(DIST, EXE_FILE).filter((n) => n !== TOOL_FILE);
}

/**
 * The runtime side, as a container runtime drives the plugins (@cnikit/libcni `CniConfig`): every plugin exec'd from
 * `path` (default dist-bin), results cached in `cacheDir`. Plugins inherit the network namespace of the calling
 * thread: call it from a test whose thread is in a sandbox's host (`withSandbox(fn, { enterHost: true })`,
 * `sandboxForFile({ enterHost: true })`), like plugins on a node.
 */
export function runtime(
  cacheDir: string,
  path: string = DIST,
  env?: Readonly<Record<string, string | undefined>>,
): CniConfig {
  return new CniConfig({ path: [path], cacheDir, inProcess: false, ...(env ? { env } : {}) });
}
