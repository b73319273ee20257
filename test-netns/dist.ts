/**
 * Where the compiled binaries are, and making sure they exist before a black-box test runs.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CniConfig } from '@cnikit/libcni';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = join(ROOT, 'dist-bin');
export const GO_CNI = '/usr/lib/cni';

export type Backend = 'bun' | 'sea';

export interface BuildInfo {
  default: Backend;
  plugins: string[];
}

/**
 * Build dist-bin/ if it is missing (`npm run build` does the same). Test files run concurrently, so the build runs
 * under an exclusive lock and the check is repeated once the lock is held.
 */
export function ensureBuilt(): BuildInfo {
  const info = join(DIST, 'BUILD-INFO.json');
  const ready = () =>
    existsSync(info) &&
    existsSync(join(DIST, 'cnikit')) &&
    existsSync(join(DIST, 'bun', 'cnikit')) &&
    existsSync(join(DIST, 'sea', 'cnikit'));
  if (!ready()) {
    // flock(1) serialises concurrent test files (the native addon, and with it @cnikit/sys's flock, may not exist
    // yet); each step is incremental, so the ones that wait find the work done.
    const lock = join(ROOT, 'node_modules', '.cnikit-build.lock');
    process.stderr.write(
      'test-netns: dist-bin/ is missing or has no SEA build; building it (npm run build -- --with-sea)\n',
    );
    for (const args of [
      [join(ROOT, 'scripts', 'build-native.mjs')],
      ['--conditions=cnikit-source', '--import', 'tsx', join(ROOT, 'scripts', 'build.ts'), '--with-sea'],
    ]) {
      const r = spawnSync('flock', [lock, process.execPath, ...args], {
        cwd: ROOT,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      if (r.error || r.status !== 0) {
        throw new Error(
          `build failed (${args.join(' ')}): run \`npm run build -- --with-sea\` and read its output`,
        );
      }
    }
    if (!ready())
      throw new Error('dist-bin/ is still incomplete after the build: run `npm run build -- --with-sea`');
  }
  return JSON.parse(readFileSync(info, 'utf8')) as BuildInfo;
}

/** Directory whose files are named after the plugins, for one back-end (the default one is dist-bin itself). */
export function binDir(backend: Backend, info: BuildInfo): string {
  return backend === info.default ? DIST : join(DIST, backend, 'links');
}

/**
 * The non-default back-end has only dist-bin/<backend>/cnikit; give it a links dir (hard links per plugin) so it can
 * be driven through CNI_PATH exactly like the default one.
 */
export function ensureLinks(backend: Backend, info: BuildInfo): string {
  const dir = binDir(backend, info);
  if (dir === DIST) return dir;
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
  const ino = statSync(join(DIST, 'cnikit')).ino;
  return readdirSync(DIST)
    .filter(
      (n) =>
        n !== 'cnikit' &&
        n !== 'cnitool' &&
        statSync(join(DIST, n)).isFile() &&
        statSync(join(DIST, n)).ino === ino,
    )
    .sort();
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
