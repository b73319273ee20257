/**
 * `npm run build` (after `node scripts/build-native.mjs`): every plugin in plugins/ → one multicall executable,
 * compiled by @cnikit/build (the same kit plugin authors use: `cnikit-build`) with bun, and with Node SEA too when
 * asked for (`--with-sea`: `npm test` builds both and tests both), plus a hard link per plugin name.
 *
 *   dist-bin/bun/cnikit     `bun build --compile` (Bun from node_modules; no download)
 *   dist-bin/sea/cnikit     Node single executable application: SEA blob injected with postject into a copy of node
 *   dist-bin/cnikit         hard link to the default back-end (bun: see DEFAULT_BACKEND), and
 *   dist-bin/<plugin>       hard links to dist-bin/cnikit, one per plugin name
 *   dist-bin/cnitool        hard link to dist-bin/cnikit that runs the cnitool CLI (@cnikit/libcni)
 *   dist-bin/BUILD-INFO.json  what was built from what (with the digest of its sources, scripts/dist-sources.mjs,
 *                             which the tests check: test-netns/dist.ts ensureBuilt)
 *
 * What is specific to this repository (the rest is @cnikit/build's buildExecutable):
 *   1. plugins/*\/src/index.ts are discovered (no hand-kept list: a new plugin directory is picked up by the next
 *      build), evaluated once for their metadata, and bundled from their TypeScript sources (`cnikit-source`);
 *   2. the executable also carries cnitool (@cnikit/libcni) and, when packages/warm exists, the warm-mode service;
 *   3. with `--train` (root), bun's bytecode is laid out by training runs of the fresh executable (trainBytecodeOrder);
 *   4. the links in dist-bin/, BUILD-INFO.json, and the measurement variants for `npm run bench -- --variants`.
 * A back-end whose bundle and addon are unchanged since the last build is not recompiled (`--force` to rebuild).
 *
 * Options (parseBuildArgs → RepoBuildOptions): --force, --backend=bun|sea (default back-end for dist-bin/cnikit; env
 * CNIKIT_BACKEND), --with-sea (also the SEA back-end), --only=bun|sea (compile one back-end), --no-code-cache (SEA
 * without V8 code cache), --train (bytecode-order training), --variants-out=DIR (measurement variants, for bench).
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  type Backend,
  buildExecutable,
  bundle,
  compileBun,
  compileSea,
  DEFAULT_BACKEND,
  type EntryExtras,
  findBun,
  type PluginEntry as KitPluginEntry,
  entrySource as kitEntrySource,
  linkAtomic,
  listPlugins,
  loadPlugins,
  sha256,
  stageAddon,
} from '@cnikit/build';
import type { BuildStamp, PluginMeta } from '@cnikit/build/runtime';
import { TOOL_NAME } from '@cnikit/build/runtime';
import { distSourcesDigest } from './dist-sources.mjs';

export {
  ADDON_KEY,
  type Backend,
  BUN_JIT_POLICY,
  DEFAULT_BACKEND,
  LAZY_BUILTINS,
  listPlugins,
  SEA_FUSE,
} from '@cnikit/build';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const WORK = join(ROOT, 'build', 'multicall');
const DIST = join(ROOT, 'dist-bin');
const ADDON = join(ROOT, 'packages', 'sys', 'build', 'Release', 'cnikit_sys.node');
/** Workspace packages are bundled from their TypeScript sources (see each package.json's exports). */
const CONDITIONS = ['cnikit-source'];

export interface PluginEntry {
  dir: string;
  index: string;
}

/** Every plugin directory with a src/index.ts, sorted by name. */
export function discoverPlugins(root = ROOT): PluginEntry[] {
  const base = join(root, 'plugins');
  return readdirSync(base)
    .filter((d) => existsSync(join(base, d, 'src', 'index.ts')))
    .sort()
    .map((d) => ({ dir: d, index: join(base, d, 'src', 'index.ts') }));
}

/** cnitool in every executable of this repository; the warm-mode service when packages/warm is there. */
export function extras(root = ROOT): EntryExtras {
  return {
    tool: '@cnikit/libcni',
    ...(existsSync(join(root, 'packages', 'warm', 'src', 'serve.ts')) ? { serve: '@cnikit/warm/serve' } : {}),
    ...(existsSync(join(root, 'packages', 'conformance', 'src', 'cli.ts'))
      ? { conformance: '@cnikit/conformance' }
      : {}),
    ...(existsSync(join(root, 'packages', 'warm', 'src', 'install-cni.ts'))
      ? { installCni: '@cnikit/warm/install-cni' }
      : {}),
  };
}

function kitPlugins(plugins: PluginEntry[]): KitPluginEntry[] {
  return plugins.map((p) => ({ name: p.dir, entry: p.index }));
}

/** Source of the generated entry module for one back-end (@cnikit/build's entrySource for this repository). */
export function entrySource(
  plugins: PluginEntry[],
  backend: Backend,
  addonSha: string,
  root = ROOT,
  opts: { snapshot?: boolean; eager?: boolean; meta?: Record<string, PluginMeta> } = {},
): string {
  return kitEntrySource(kitPlugins(plugins), { backend, addonSha, extras: extras(root), ...opts });
}

/**
 * The version stamp of a build of this tree (`cnikit --version`, the warm service's cnikit_build_info): the release
 * version of package.json, the commit of HEAD, whether tracked files differ from it, and the commit's date (not the
 * clock's: two builds of one tree are the same bytes, and an unchanged tree is not rebuilt). Without git (a source
 * tarball): commit and date `unknown`, or the date of SOURCE_DATE_EPOCH.
 */
export function buildStamp(root = ROOT, env: NodeJS.ProcessEnv = process.env): BuildStamp {
  const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string })
    .version;
  const git = (...args: string[]) => {
    const r = spawnSync('git', ['-C', root, ...args], { encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : undefined;
  };
  const commit = git('rev-parse', 'HEAD');
  const epoch = env.SOURCE_DATE_EPOCH ?? (commit ? git('log', '-1', '--format=%ct', 'HEAD') : undefined);
  const date =
    epoch && /^\d+$/.test(epoch)
      ? new Date(Number(epoch) * 1000).toISOString().replace(/\.000Z$/, 'Z')
      : 'unknown';
  if (!commit) return { version, commit: 'unknown', date };
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  return { version, commit, ...(dirty ? { dirty: true } : {}), date };
}

function log(msg: string): void {
  process.stderr.write(`[build] ${msg}\n`);
}

/**
 * Bytecode layout by first use (`bun build --bytecode-order`): run the freshly compiled executable the way a
 * runtime does, with BUN_BYTECODE_ORDER_OUT, so the next compile places the bytecode those runs touch together
 * and a start-up faults in fewer pages. Only the layout changes, never behaviour. Runs: VERSION of every plugin,
 * and — as root, with iproute2 — loopback and bridge + host-local ADD/DEL inside two private network namespaces
 * created and removed here (the machine's own namespace is never touched). Measured on the compiled binary
 * (150–200 runs, load 3–4): VERSION 13.4 → 12.0 ms wall (system time 7.8 → 6.0 ms); bridge+host-local ADD CPU
 * 35.5 → 31.6 ms, DEL CPU 28.4 → 23.9 ms. Returns the order files, most important first.
 */
function trainBytecodeOrder(exe: string, dir: string, plugins: PluginEntry[]): string[] {
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  for (const p of plugins) linkSync(exe, join(bin, p.dir));
  const files: string[] = [];
  const failed: string[] = [];
  let n = 0;
  const exec = (cmd: string, args: string[], env: Record<string, string>, input = ''): boolean => {
    const out = join(dir, `order-${n++}.txt`);
    const r = spawnSync(cmd, args, {
      input,
      encoding: 'utf8',
      timeout: 20_000,
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...env, BUN_BYTECODE_ORDER_OUT: out },
    });
    if (existsSync(out)) files.push(out);
    if (r.status !== 0) failed.push(`${basename(args.at(-1) ?? cmd)} ${env.CNI_COMMAND}: exit ${r.status}`);
    return r.status === 0;
  };
  const names = plugins.map((p) => p.dir);
  const ns = `cnikit-build-${process.pid}`;
  const canNetns =
    typeof process.geteuid === 'function' &&
    process.geteuid() === 0 &&
    names.includes('bridge') &&
    names.includes('host-local') &&
    spawnSync('ip', ['netns', 'add', `${ns}-h`]).status === 0;
  if (canNetns) {
    try {
      spawnSync('ip', ['netns', 'add', `${ns}-c`]);
      spawnSync('ip', ['-n', `${ns}-h`, 'link', 'set', 'lo', 'up']);
      const conf = JSON.stringify({
        cniVersion: '1.0.0',
        name: 'cnikit-build-train',
        type: 'bridge',
        bridge: 'cnitrain0',
        isDefaultGateway: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: '10.254.254.0/24' }]], dataDir: join(dir, 'ipam') },
      });
      const env = (cmd: string) => ({
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: 'cnikit-build-train',
        CNI_NETNS: `/run/netns/${ns}-c`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: bin,
      });
      for (const cmd of ['ADD', 'DEL']) {
        exec('ip', ['netns', 'exec', `${ns}-h`, join(bin, 'bridge')], env(cmd), conf);
      }
      if (names.includes('loopback')) {
        const lo = JSON.stringify({ cniVersion: '1.0.0', name: 'cnikit-build-train', type: 'loopback' });
        for (const cmd of ['ADD', 'DEL']) exec(join(bin, 'loopback'), [], env(cmd), lo);
      }
    } finally {
      spawnSync('ip', ['netns', 'del', `${ns}-c`]);
      spawnSync('ip', ['netns', 'del', `${ns}-h`]);
    }
  }
  for (const name of names) exec(join(bin, name), [], { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}');
  if (failed.length) log(`bun: bytecode-order training runs that failed (layout only): ${failed.join('; ')}`);
  return files;
}

/** Evaluate each plugin module once and record about/versions; the module's plugin name must be its directory. */
async function collectMeta(plugins: PluginEntry[]): Promise<Record<string, PluginMeta>> {
  const loaded = await loadPlugins(
    plugins.map((p) => p.index),
    { workDir: WORK, conditions: CONDITIONS },
  );
  const out: Record<string, PluginMeta> = {};
  for (const [i, p] of plugins.entries()) {
    if (loaded[i]?.name !== p.dir) {
      throw new Error(`plugins/${p.dir}/src/index.ts must export \`plugin\` named ${JSON.stringify(p.dir)}`);
    }
    out[p.dir] = loaded[i].meta;
  }
  return out;
}

/**
 * Start-up variants for `npm run bench -- --variants` (measurement only): SEA without code cache, SEA with a
 * start-up snapshot, bun without bytecode, bun with every plugin and built-in evaluated eagerly. Each goes to
 * <outDir>/<variant>/ with hard links per plugin.
 */
async function buildVariants(
  outDir: string,
  plugins: PluginEntry[],
  addonSha: string,
  addonCopy: string,
): Promise<void> {
  const names = listPlugins(join(DIST, 'cnikit'));
  const common = {
    plugins: kitPlugins(plugins),
    addonSha,
    extras: extras(),
    resolveDir: ROOT,
    conditions: CONDITIONS,
  };
  const out = (v: string) => join(outDir, v, 'cnikit');
  const cjs = (v: string) => join(WORK, `${v}.cjs`);
  const variants: Array<[string, () => Promise<void>]> = [
    [
      'sea-nocache',
      async () =>
        compileSea({
          bundle: await bundle({ ...common, backend: 'sea', outFile: cjs('sea-nocache') }),
          addon: addonCopy,
          outFile: out('sea-nocache'),
          workDir: WORK,
          codeCache: false,
          name: 'sea-nocache',
        }),
    ],
    [
      'sea-snapshot',
      async () =>
        compileSea({
          bundle: await bundle({ ...common, backend: 'sea', snapshot: true, outFile: cjs('sea-snapshot') }),
          addon: addonCopy,
          outFile: out('sea-snapshot'),
          workDir: WORK,
          snapshot: true,
          name: 'sea-snapshot',
        }),
    ],
    [
      'bun-eager',
      async () =>
        compileBun({
          bundle: await bundle({ ...common, backend: 'bun', eager: true, outFile: cjs('bun-eager') }),
          addon: addonCopy,
          outFile: out('bun-eager'),
        }),
    ],
    [
      'bun-nobytecode',
      async () =>
        compileBun({
          bundle: await bundle({ ...common, backend: 'bun', outFile: cjs('bun-nobytecode') }),
          addon: addonCopy,
          outFile: out('bun-nobytecode'),
          bytecode: false,
        }),
    ],
  ];
  for (const [v, make] of variants) {
    mkdirSync(join(outDir, v), { recursive: true });
    await make();
    for (const n of names) linkAtomic(join(outDir, v, 'cnikit'), join(outDir, v, n));
    log(`variant ${v}: ${relative(ROOT, join(outDir, v, 'cnikit'))}`);
  }
}

/**
 * Build under an exclusive lock (build/multicall/.lock): concurrent builds (a test run building a missing
 * dist-bin/ while `npm run build` runs) share the work directory, so they take turns; the second one then finds
 * everything up to date.
 */
/** What `npm run build` builds (scripts/build.ts flags; see the header). */
export interface RepoBuildOptions {
  /** Rebuild even when nothing changed (`--force`). */
  force?: boolean;
  /** The back-end dist-bin/cnikit links to (`--backend=`, env CNIKIT_BACKEND; default bun). */
  backend?: Backend;
  /** Also build the Node SEA back-end (`--with-sea`; `npm test` and CI do, to test both). */
  withSea?: boolean;
  /** Build only this back-end (`--only=`). */
  only?: Backend;
  /** SEA without V8 code cache (`--no-code-cache`). */
  codeCache?: boolean;
  /** Lay out bun's bytecode by training runs of the fresh executable (`--train`; needs root: it runs plugins). */
  train?: boolean;
  /** Also build the measurement variants into this directory (`--variants-out=DIR`, used by `npm run bench`). */
  variantsOut?: string;
}

export function parseBuildArgs(argv: readonly string[]): RepoBuildOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      force: { type: 'boolean' },
      backend: { type: 'string' },
      'with-sea': { type: 'boolean' },
      only: { type: 'string' },
      'no-code-cache': { type: 'boolean' },
      train: { type: 'boolean' },
      'variants-out': { type: 'string' },
    },
  });
  const backend = (values.backend ?? process.env.CNIKIT_BACKEND ?? DEFAULT_BACKEND) as Backend;
  for (const b of [backend, values.only ?? 'bun'])
    if (b !== 'bun' && b !== 'sea') throw new Error(`unknown back-end ${JSON.stringify(b)} (bun | sea)`);
  return {
    force: values.force ?? false,
    backend,
    withSea: values['with-sea'] ?? false,
    only: values.only as Backend | undefined,
    codeCache: !values['no-code-cache'],
    train: values.train ?? false,
    variantsOut: values['variants-out'],
  };
}

/**
 * Build under an exclusive lock (build/multicall/.lock): concurrent builds (a test run building a missing
 * dist-bin/ while `npm run build` runs) share the work directory, so they take turns; the second one then finds
 * everything up to date.
 */
export async function build(opts: RepoBuildOptions = {}): Promise<void> {
  if (!existsSync(ADDON)) return buildUnlocked(opts); // reports the missing addon
  const { flock } = await import('@cnikit/sys');
  mkdirSync(WORK, { recursive: true });
  const fd = openSync(join(WORK, '.lock'), 'a');
  try {
    flock(fd, 'ex');
    await buildUnlocked(opts);
  } finally {
    closeSync(fd);
  }
}

async function buildUnlocked(opts: RepoBuildOptions): Promise<void> {
  const t0 = performance.now();
  const force = opts.force ?? false;
  const codeCache = opts.codeCache ?? true;
  const def = opts.backend ?? DEFAULT_BACKEND;
  // bun always (the default back-end); SEA when asked for or when it is the default
  const backends: Backend[] = opts.only
    ? [opts.only]
    : [...new Set<Backend>(['bun', ...(opts.withSea || def === 'sea' ? (['sea'] as const) : [])])];
  // what the executables are built from, read before they are: an edit during the build leaves dist-bin/ stale
  const sources = distSourcesDigest(ROOT);
  const stamp = buildStamp(ROOT);

  if (!existsSync(ADDON)) {
    throw new Error(
      `native addon missing: ${relative(ROOT, ADDON)}; run \`npm run build:native\` (npm run build does it first)`,
    );
  }
  const plugins = discoverPlugins();
  if (plugins.length === 0) throw new Error('no plugins found (plugins/*/src/index.ts)');
  log(`plugins: ${plugins.map((p) => p.dir).join(', ')}`);
  const meta = await collectMeta(plugins);

  mkdirSync(WORK, { recursive: true });
  mkdirSync(DIST, { recursive: true });
  const addonBytes = readFileSync(ADDON);
  const addonSha = sha256(addonBytes);
  const addonCopy = stageAddon(WORK, addonBytes);
  const bunVersion = spawnSync(findBun(), ['--version'], { encoding: 'utf8' }).stdout.trim();

  const results = await Promise.allSettled(
    backends.map((backend) =>
      buildExecutable({
        plugins: kitPlugins(plugins),
        meta,
        out: join(DIST, backend, 'cnikit'),
        backend,
        links: false,
        extras: extras(),
        workDir: WORK,
        resolveDir: ROOT,
        conditions: CONDITIONS,
        addon: ADDON,
        stamp,
        force,
        codeCache,
        train: backend === 'bun' && opts.train ? (exe) => trainIn(exe, plugins) : undefined,
        log,
      }),
    ),
  );
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed.length) throw failed[0]?.reason;
  // the black-box tests' links dirs (test-netns/dist.ts ensureLinks) point at the executables just replaced, and a
  // test killed mid-way leaves `.<name>.tmp-<pid>` links there (100 MB each): the tests make them again
  for (const backend of backends) rmSync(join(DIST, backend, 'links'), { recursive: true, force: true });

  // buildExecutable smoke-tested every back-end (`--list --verify`); the default one gives the names for the links.
  const defExe = join(DIST, def, 'cnikit');
  if (!existsSync(defExe))
    throw new Error(`default back-end ${def} was not built (${relative(ROOT, defExe)})`);
  const built = results.find(
    (r): r is PromiseFulfilledResult<Awaited<ReturnType<typeof buildExecutable>>> =>
      r.status === 'fulfilled' && r.value.backend === def,
  );
  const pluginNames = built?.value.plugins ?? listPlugins(defExe);

  // dist-bin/cnikit + one hard link per plugin; remove links of plugins that no longer exist.
  const main = join(DIST, 'cnikit');
  linkAtomic(defExe, main);
  const mainIno = statSync(main).ino;
  for (const name of [...pluginNames, TOOL_NAME]) linkAtomic(main, join(DIST, name));
  for (const entry of readdirSync(DIST)) {
    const p = join(DIST, entry);
    const st = statSync(p);
    if (
      !st.isFile() ||
      entry === 'cnikit' ||
      entry === TOOL_NAME ||
      pluginNames.includes(entry) ||
      entry === 'BUILD-INFO.json'
    )
      continue;
    if (st.nlink > 1 || entry.includes('.tmp-')) unlinkSync(p); // a stale link of an earlier build
  }
  writeFileSync(
    join(DIST, 'BUILD-INFO.json'),
    `${JSON.stringify(
      {
        default: def,
        plugins: pluginNames,
        tools: [TOOL_NAME],
        addonSha256: addonSha,
        node: process.version,
        bun: bunVersion,
        stamp,
        seaCodeCache: codeCache,
        inode: mainIno,
        // scripts/dist-sources.mjs: the tests compare it with the working tree's (test-netns/dist.ts ensureBuilt)
        sources,
        backends,
      },
      null,
      2,
    )}\n`,
  );
  // warm mode: dist-bin/warm/ = the static client under each plugin name + a link to the cold executable
  const { layoutWarmDir } = await import('@cnikit/warm/build-client');
  const warm = layoutWarmDir(DIST, pluginNames);
  log(
    `warm: ${relative(ROOT, warm.client.path)} (${warm.client.size} bytes${warm.client.built ? '' : ', unchanged'})`,
  );
  if (opts.variantsOut) await buildVariants(opts.variantsOut, plugins, addonSha, addonCopy);
  log(
    `dist-bin/cnikit → ${def}; links: ${[...pluginNames, TOOL_NAME].join(', ')} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
}

/** bun's training hook: runs in a private directory of the work dir, removed afterwards. */
function trainIn(exe: string, plugins: PluginEntry[]): string[] {
  const dir = join(WORK, `train-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  try {
    const files = trainBytecodeOrder(exe, dir, plugins);
    // the order files are read by the second compile: keep copies outside the directory removed below
    return files.map((f, i) => {
      const keep = join(WORK, `bun-order-${i}.txt`);
      writeFileSync(keep, readFileSync(f));
      return keep;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  Promise.resolve()
    .then(() => build(parseBuildArgs(process.argv.slice(2))))
    .catch((err: Error) => {
      process.stderr.write(`[build] error: ${err.message}\n`);
      process.exitCode = 1;
    });
}
