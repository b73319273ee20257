/**
 * Single-file executables of CNI plugins: esbuild bundle → `bun build --compile` (bytecode) or a Node single
 * executable application (SEA blob injected with postject into a copy of node), with the native addon of
 * @cnikit/sys embedded and extracted safely at run time (./runtime/native.ts). One plugin → one executable; several
 * → one multicall executable selected by the name it is invoked under, plus a hard link per plugin.
 *
 * Steps of `buildExecutable`:
 *   1. record each plugin's name/about/versions (the module is bundled to a temporary ESM file and evaluated:
 *      plugins do nothing at import time), so VERSION runs without evaluating the plugin module;
 *   2. generate the entry module (entrySource: the plugin list and entry points for runtime/entry.ts, which holds
 *      the logic) and bundle it with esbuild: one CommonJS file (Node SEA only runs a
 *      CommonJS main script; `bun --bytecode` needs it too), every plugin behind a lazy require, rarely used Node
 *      built-ins loaded on first use;
 *   3. compile it with the back-end, the addon embedded (SEA asset / Bun embedded file);
 *   4. smoke-test the executable (`--list --verify`: every plugin module evaluates and matches its recorded
 *      metadata) and create the links.
 * An executable whose bundle, addon and toolchain are unchanged since the last build is kept (`force` rebuilds).
 */

import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AnyPlugin } from '@cnikit/skel';
import { linkAtomic } from '@cnikit/sys/atomic';
import * as esbuild from 'esbuild';
import { ADDON_KEY } from './runtime/entry.ts';
import { versionTable } from './runtime/first.ts';
import type { PluginMeta } from './runtime/multicall.ts';
import type { BuildStamp } from './runtime/version.ts';

export type Backend = 'bun' | 'sea';
/**
 * Default back-end, chosen on start-up time, CPU time and peak RSS of the compiled plugins (Node SEA's bootstrap
 * dominates its start-up): `npm run bench` in the cnikit repository has the figures.
 */
export const DEFAULT_BACKEND: Backend = 'bun';
export const BACKENDS: readonly Backend[] = ['bun', 'sea'];
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** The SEA asset key of the embedded addon (defined with the entry that reads it). */
export { ADDON_KEY };

/** A plugin to build in: the module at `entry` exports `plugin` (or a default export) and does nothing at import. */
export interface PluginEntry {
  /** The plugin's name (its `plugin.name`); the build checks that the module agrees. */
  name: string;
  /** Absolute path of the module. */
  entry: string;
}

/** Extra entry points of an executable (specifiers resolved from the bundle's resolveDir). */
export interface EntryExtras {
  /** A module exporting `runCnitool` (@cnikit/libcni): `cnitool` / `cnikit tool` run the cnitool CLI. */
  tool?: string;
  /** A module exporting `serveMain` (@cnikit/warm/serve): `cnikit serve` runs the warm-mode service. */
  serve?: string;
  /** A module exporting `conformanceMain` (@cnikit/conformance): `cnikit conformance` runs the conformance kit. */
  conformance?: string;
  /** A module exporting `installCniMain` (@cnikit/warm/install-cni): `cnikit install-cni` installs on a node. */
  installCni?: string;
}

export interface EntryOptions {
  backend: Backend;
  /** SHA-256 (hex) of the addon that is embedded. */
  addonSha: string;
  /** Build-time metadata per plugin name (VERSION without evaluating the module). */
  meta?: Record<string, PluginMeta>;
  extras?: EntryExtras;
  /** The executable's file name, when it is not `cnikit` (a multicall executable invoked under it selects nothing). */
  name?: string;
  /** Measurement variant (Node SEA start-up snapshot): every plugin evaluated into the snapshot. */
  snapshot?: boolean;
  /** Measurement variant: plain imports, every plugin evaluated at start-up. */
  eager?: boolean;
  /** Version, commit and build date that `cnikit --version` prints. */
  stamp?: BuildStamp;
}

const localRequire = createRequire(import.meta.url);
/** The cnikit release (every cnikit package has the same version): `CNIKIT_VERSION` of @cnikit/skel in executables. */
export const CNIKIT_VERSION: string = (localRequire('../package.json') as { version: string }).version;
const VERSION_DEFINE = { __CNIKIT_VERSION__: JSON.stringify(CNIKIT_VERSION) };

/** This package's own module directory and extension (src/*.ts when run from sources, dist/*.js when installed). */
const HERE = dirname(fileURLToPath(import.meta.url));
const EXT = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
/** @cnikit/build/runtime: what runs inside an executable (main + native extraction). */
export const RUNTIME_MODULE = join(HERE, 'runtime', `index.${EXT}`);
/** The real entry of an executable, which the generated module imports and calls (`start`). */
export const ENTRY_MODULE = join(HERE, 'runtime', `entry.${EXT}`);
/** The first module an executable runs: the table's VERSION answer, else the real entry (./runtime/first.ts). */
export const FIRST_MODULE = join(HERE, 'runtime', `first.${EXT}`);

/**
 * Source of the generated entry module: only the per-build data — the plugin list (lazy requires), the optional entry
 * points (lazy imports), the addon digest and the stamp — handed to `start` of the real entry (./runtime/entry.ts).
 * An executable's entry imports runtime/first.ts only, which answers the common VERSION call from the table of the
 * plugins' recorded versions (one constant string) and else imports the real entry (under Bun a chunk of its own).
 * The measurement variants (eager, snapshot) import the real entry.
 */
export function entrySource(plugins: readonly PluginEntry[], opts: EntryOptions): string {
  const imp = (p: string) => JSON.stringify(p);
  if (opts.eager || opts.snapshot) {
    const lines = [
      '// generated by @cnikit/build: the per-build plugin list and entry points; the logic is runtime/entry.ts',
      `import { pick, start } from ${imp(ENTRY_MODULE)};`,
      ...(opts.eager
        ? plugins.map((p, i) => `import * as p${i} from ${imp(p.entry)};`)
        : ['declare const require: (id: string) => { plugin?: any; default?: any };']),
      ...startLines(plugins, opts),
    ];
    return `${lines.join('\n')}\n`;
  }
  const lines = [
    '// generated by @cnikit/build: the per-build plugin table and list; the logic is runtime/first.ts and entry.ts',
    `import { answerOrStart } from ${imp(FIRST_MODULE)};`,
    `import { pick, start } from ${imp(ENTRY_MODULE)};`,
    // require() inside the bundle: esbuild wraps each plugin module in a lazy initialiser, so only the plugin
    // that is run (and, on delegation, its delegate) is evaluated at start-up.
    'declare const require: (id: string) => any;',
    // a dynamic import, not a require: bun's CommonJS require of an ES module costs a call more (callgrind: ~0.1 M
    // instructions of a loopback DEL)
    `answerOrStart(${JSON.stringify(versionTable(opts.meta ?? {}))}, () => {`,
    ...startLines(plugins, opts),
    '});',
  ];
  return `${lines.join('\n')}\n`;
}

function startLines(plugins: readonly PluginEntry[], opts: EntryOptions): string[] {
  const imp = (p: string) => JSON.stringify(p);
  const extras = opts.extras ?? {};
  const loader = (spec: string | undefined, key: string, fn: string) =>
    spec ? [`  ${key}: () => import(${imp(spec)}).then((m) => m.${fn}),`] : [];
  return [
    'start({',
    `  backend: ${JSON.stringify(opts.backend)},`,
    `  addonSha: ${JSON.stringify(opts.addonSha)},`,
    '  plugins: [',
    ...plugins.map((p, i) =>
      opts.eager
        ? `    { name: ${JSON.stringify(p.name)}, load: () => pick(p${i}) },`
        : `    { name: ${JSON.stringify(p.name)}, load: () => pick(require(${imp(p.entry)}))${
            opts.meta?.[p.name] ? `, meta: ${JSON.stringify(opts.meta[p.name])}` : ''
          } },`,
    ),
    '  ],',
    ...(opts.name && opts.name !== 'cnikit' ? [`  name: ${JSON.stringify(opts.name)},`] : []),
    ...loader(extras.tool, 'tool', 'runCnitool'),
    ...loader(extras.serve, 'serve', 'serveMain'),
    ...loader(extras.conformance, 'conformance', 'conformanceMain'),
    ...loader(extras.installCni, 'installCni', 'installCniMain'),
    ...(opts.stamp ? [`  stamp: ${JSON.stringify(opts.stamp)},`] : []),
    ...(opts.snapshot ? ['  snapshot: true,'] : []),
    '});',
  ];
}

export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export type Log = (msg: string) => void;
const defaultLog: Log = (msg) => process.stderr.write(`[cnikit-build] ${msg}\n`);

function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolvePromise();
      else reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code}):\n${out}`));
    });
  });
}

/**
 * Node built-ins that are loaded on first use instead of at start-up. Under Bun every built-in module costs
 * start-up time and resident memory when it is first required (node:util ≈ 4 ms, node:crypto ≈ 3 ms on the
 * reference machine), and most invocations (VERSION, DEL of a gone namespace, loopback) never call them. Each
 * import of one of these is redirected to a tiny CommonJS module whose properties are getters that require the
 * real module on first access (esbuild compiles named imports into property reads at the call site, so the
 * semantics are unchanged). node:fs stays eager: it is needed on every path.
 */
export const LAZY_BUILTINS = [
  'util',
  'url',
  'os',
  'crypto',
  'child_process',
  'net',
  'path',
  'module',
  'v8',
  'tty',
  'async_hooks',
];

const lazyBuiltins: esbuild.Plugin = {
  name: 'cnikit-lazy-builtins',
  setup(b) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join('|')})$`);
    b.onResolve({ filter }, (args) =>
      args.namespace === 'lazy-builtin'
        ? undefined
        : { path: args.path.replace(/^node:/, ''), namespace: 'lazy-builtin' },
    );
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, async (args) => {
      const keys = Object.keys(await import(`node:${args.path}`)).filter((k) => k !== 'default');
      const props = keys.map(
        (k) => `${JSON.stringify(k)}: { get: () => l()[${JSON.stringify(k)}], enumerable: true }`,
      );
      return {
        contents: `let m; const l = () => (m ??= require('node:${args.path}'));\nmodule.exports = Object.defineProperties({}, {${props.join(',\n')}});\n`,
        loader: 'js',
      };
    });
  },
};

export interface BundleOptions extends EntryOptions {
  plugins: readonly PluginEntry[];
  /** The CommonJS bundle to write. */
  outFile: string;
  /** Where bare specifiers of the entry (extras) resolve from; default: the current directory. */
  resolveDir?: string;
  /** Extra package.json export conditions, first match wins (cnikit itself bundles `cnikit-source`). */
  conditions?: string[];
  /** Extra esbuild defines (`{ 'process.env.X': '"1"' }`). */
  define?: Record<string, string>;
  /** Also write esbuild's metafile (every input file of the bundle) here, e.g. for an SBOM of what is bundled. */
  metafile?: string;
}

/** Bundle the generated entry into one minified CommonJS file. */
export async function bundle(o: BundleOptions): Promise<string> {
  mkdirSync(dirname(o.outFile), { recursive: true });
  try {
    await esbuildEntry(o);
  } catch (err) {
    const msg = (err as Error).message;
    if (!/top-level await/i.test(msg)) throw err;
    throw new Error(
      `${msg}\nA plugin module must not run itself at import time (no top-level \`await runPlugin(plugin)\`): ` +
        'export `plugin`; the executable runs it.',
      { cause: err },
    );
  }
  return o.outFile;
}

async function esbuildEntry(o: BundleOptions): Promise<void> {
  const r = await esbuild.build({
    stdin: {
      contents: entrySource(o.plugins, o),
      resolveDir: o.resolveDir ?? process.cwd(),
      sourcefile: `cnikit-${o.backend}-entry.ts`,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    conditions: o.conditions ?? [],
    outfile: o.outFile,
    minify: true,
    keepNames: false,
    legalComments: 'none',
    logLevel: 'warning',
    // @cnikit/sys probes import.meta.url and falls back to __dirname in CommonJS; the empty import.meta is expected.
    logOverride: { 'empty-import-meta': 'silent' },
    define: { 'process.env.CNIKIT_BUNDLED': '"1"', ...VERSION_DEFINE, ...o.define },
    plugins: o.snapshot || o.eager ? [] : [lazyBuiltins],
    metafile: o.metafile !== undefined,
  });
  if (o.metafile !== undefined) writeFileSync(o.metafile, `${JSON.stringify(r.metafile, null, 2)}\n`);
}

/**
 * `bun build --compile-jit-policy`: JSC's tier-up thresholds are scaled by this factor. A plugin call runs for
 * tens of milliseconds and executes most of its code once, so compiling it with the baseline/optimising JITs
 * costs more than it saves (and starts JIT worker threads). Measured on the compiled multicall binary (30–150
 * runs, load 4–5): VERSION 13.5 → 12.0 ms wall (user+sys 15.0 → 11.0 ms), bridge+host-local ADD CPU
 * 37.8 → 30.6 ms, DEL CPU 26.9 → 23.4 ms; 1000 measured the same as 100, so genuinely hot loops keep the JIT.
 */
export const BUN_JIT_POLICY = 100;

function packageDir(name: string, from?: string): string | undefined {
  try {
    const req = from ? createRequire(join(from, 'package.json')) : localRequire;
    return dirname(req.resolve(`${name}/package.json`));
  } catch {
    return undefined;
  }
}

function isElf(file: string): boolean {
  try {
    const fd = readFileSync(file).subarray(0, 4);
    return fd[0] === 0x7f && fd[1] === 0x45 && fd[2] === 0x4c && fd[3] === 0x46;
  } catch {
    return false;
  }
}

/**
 * The Bun executable: $CNIKIT_BUN, the platform package of the npm `bun` package (@oven/bun-<platform>-<arch>, which
 * works without bun's postinstall, i.e. after `npm install --ignore-scripts`), bun's own bin/bun.exe once its
 * postinstall has run, then `bun` on PATH.
 */
export function findBun(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CNIKIT_BUN) return env.CNIKIT_BUN;
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  const bunDir = packageDir('bun');
  for (const variant of ['', '-baseline', '-musl', '-musl-baseline']) {
    const name = `@oven/bun-${process.platform}-${arch}${variant}`;
    const dir = packageDir(name) ?? (bunDir ? packageDir(name, bunDir) : undefined);
    const exe = dir && join(dir, 'bin', 'bun');
    if (exe && existsSync(exe)) return exe;
  }
  const exe = bunDir && join(bunDir, 'bin', 'bun.exe');
  if (exe && isElf(exe)) return exe;
  const which = spawnSync('bun', ['--version'], { encoding: 'utf8' });
  if (which.status === 0) return 'bun';
  throw new Error(
    'bun not found: `npm install --save-dev bun` (or set CNIKIT_BUN to a bun executable), or build with --backend sea',
  );
}

/** The postject CLI (Node SEA injection): from the `postject` package. */
export function findPostject(): string {
  const dir = packageDir('postject');
  if (!dir)
    throw new Error('postject not found: `npm install --save-dev postject`, or build with --backend bun');
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { bin?: Record<string, string> };
  return join(dir, pkg.bin?.postject ?? 'dist/cli.js');
}

/** The addon of @cnikit/sys to embed: its first existing candidate (prebuilt, build/Release, override). */
export async function findAddon(): Promise<string> {
  const { nativeCandidates } = await import('@cnikit/sys');
  const found = nativeCandidates().find((p) => existsSync(p));
  if (!found) {
    throw new Error(
      `the native addon of @cnikit/sys was not found (tried ${nativeCandidates().join(', ')}); ` +
        '`npm rebuild @cnikit/sys` (in the cnikit repository: `npm run build:native`)',
    );
  }
  return found;
}

export interface CompileBunOptions {
  bundle: string;
  /** The addon, under a file name starting with `cnikit_sys` (Bun names the embedded file after it). */
  addon: string;
  outFile: string;
  bytecode?: boolean;
  bun?: string;
  /**
   * Bytecode layout by first use (`bun build --bytecode-order`): called with the freshly compiled executable, it
   * returns order files written by runs with BUN_BYTECODE_ORDER_OUT; the executable is then compiled again with
   * them. Only the layout changes, never behaviour.
   */
  train?: (exe: string) => string[] | Promise<string[]>;
  /** Cross-compilation: bun's target (`bun-linux-arm64`) and the Bun executable of that target to embed. */
  target?: { bunTarget: string; executable: string };
  log?: Log;
}

export async function compileBun(o: CompileBunOptions): Promise<void> {
  const bytecode = o.bytecode ?? true;
  const bun = o.bun ?? findBun();
  // Bun embeds the output's file name (its /$bunfs/root/<name>): compile under the final name in a private
  // directory next to the output, so the bytes do not depend on a temporary name (reproducible builds)
  const tmpDir = join(dirname(o.outFile), `.cnikit-bun-${process.pid}`);
  const tmp = join(tmpDir, basename(o.outFile));
  mkdirSync(tmpDir, { recursive: true });
  const compile = (order: string[]) =>
    run(bun, [
      'build',
      '--compile',
      ...(bytecode ? ['--bytecode'] : []),
      ...(order.length ? [`--bytecode-order=${order.join(',')}`] : []),
      `--compile-jit-policy=${BUN_JIT_POLICY}`,
      '--no-compile-autoload-dotenv',
      '--no-compile-autoload-bunfig',
      ...(o.target
        ? [`--target=${o.target.bunTarget}`, `--compile-executable-path=${o.target.executable}`]
        : []),
      o.bundle,
      o.addon,
      '--outfile',
      tmp,
    ]);
  try {
    await compileTrained(compile, tmp, bytecode, o);
  } finally {
    rmSync(tmpDir, { recursive: true, force: true });
  }
}

/**
 * Compile to `tmp`, then (bytecode with a `train`) again with the order files of its training runs, and move the
 * result to `o.outFile`.
 */
async function compileTrained(
  compile: (order: string[]) => unknown,
  tmp: string,
  bytecode: boolean,
  o: Pick<CompileBunOptions, 'train' | 'log' | 'outFile'>,
): Promise<void> {
  await compile([]);
  if (bytecode && o.train) {
    const order = await o.train(tmp);
    if (order.length > 0) await compile(order);
    (o.log ?? defaultLog)(`bun: bytecode laid out by ${order.length} training run(s)`);
  }
  renameSync(tmp, o.outFile);
}

export interface CompileBunModuleOptions {
  /** The entry module (TypeScript or JavaScript; its bare specifiers resolve from its directory). */
  entry: string;
  /** The addon, under a file name starting with `cnikit_sys` (Bun names the embedded file after it). */
  addon: string;
  outFile: string;
  /** Where the Bun.build configuration is written. */
  workDir: string;
  conditions?: string[];
  define?: Record<string, string>;
  bytecode?: boolean;
  bun?: string;
  /** As CompileBunOptions.train. */
  train?: CompileBunOptions['train'];
  target?: CompileBunOptions['target'];
  log?: Log;
}

/** The Bun.build script (run by Bun, not by this process). */
const BUN_BUNDLE_SCRIPT = join(HERE, `bun-bundle.${EXT}`);

/**
 * Bundle and compile with Bun's own bundler, code splitting on (./bun-bundle.ts): the entry's static imports are the
 * start-up; each module reached through `require()` / `import()` (every plugin, cnitool, the warm service …) is an
 * embedded chunk loaded at the call, so a start-up does not load, parse or instantiate the other plugins' code.
 * Measured (callgrind, 19 plugins): VERSION 16.4 M instructions with the single bundle, see docs/benchmarks.md.
 */
export async function compileBunModule(o: CompileBunModuleOptions): Promise<void> {
  const bytecode = o.bytecode ?? true;
  const bun = o.bun ?? findBun();
  const tmpDir = join(dirname(o.outFile), `.cnikit-bun-${process.pid}`);
  const tmp = join(tmpDir, basename(o.outFile));
  mkdirSync(tmpDir, { recursive: true });
  mkdirSync(o.workDir, { recursive: true });
  const cfgFile = join(o.workDir, `${basename(o.outFile)}-${sha256(o.outFile).slice(0, 8)}-bun.json`);
  const first = firstCopy(o, cfgFile.replace(/-bun\.json$/, '-first.mjs'));
  const compile = (order: string[]) => {
    writeFileSync(
      cfgFile,
      JSON.stringify({
        entry: resolve(o.entry),
        embed: [resolve(o.addon)],
        outfile: tmp,
        conditions: o.conditions ?? [],
        define: { 'process.env.CNIKIT_BUNDLED': '"1"', ...VERSION_DEFINE, ...o.define },
        lazyBuiltins: LAZY_BUILTINS,
        bytecode,
        jitPolicy: BUN_JIT_POLICY,
        ...(order.length ? { bytecodeOrder: order } : {}),
        ...(o.target ? { target: o.target.bunTarget, executablePath: o.target.executable } : {}),
        minify: true,
        ...(first ? { replace: { [FIRST_MODULE]: first } } : {}),
      }),
    );
    return run(bun, [BUN_BUNDLE_SCRIPT, cfgFile]);
  };
  try {
    await compileTrained(compile, tmp, bytecode, o);
  } finally {
    rmSync(tmpDir, { recursive: true, force: true });
    rmSync(cfgFile, { force: true });
    if (first) rmSync(first, { force: true });
  }
}

/**
 * When the entry imports runtime/first.ts: that module bundled with its imports (the SDK's VERSION code, the selection
 * helpers) into one self-contained file, written to `out`, which Bun compiles in its place. Bun's code splitting would
 * otherwise put the modules the dispatcher shares in chunks of their own, each loaded at start-up; the copy is made
 * from the same sources at every build, so the two answers cannot drift (runtime/startup.test.ts compares them).
 */
function firstCopy(o: CompileBunModuleOptions, out: string): string | undefined {
  if (!readFileSync(o.entry, 'utf8').includes(JSON.stringify(FIRST_MODULE))) return undefined;
  esbuild.buildSync({
    stdin: {
      contents: `export { answerOrStart } from ${JSON.stringify(FIRST_MODULE)};`,
      resolveDir: HERE,
      sourcefile: 'cnikit-first.ts',
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'esnext',
    // from sources this package resolves its siblings' sources too (as its own imports do under tsx)
    conditions: [...(o.conditions ?? []), ...(EXT === 'ts' ? ['cnikit-source'] : [])],
    outfile: out,
    legalComments: 'none',
    logLevel: 'warning',
  });
  return out;
}

export interface CompileSeaOptions {
  bundle: string;
  addon: string;
  outFile: string;
  /** Work directory for the SEA config and blob. */
  workDir: string;
  /** V8 code cache in the blob (default true; exclusive with `snapshot`). */
  codeCache?: boolean;
  snapshot?: boolean;
  name?: string;
  /** The node executable to copy (default: the running one). */
  node?: string;
}

export async function compileSea(o: CompileSeaOptions): Promise<void> {
  const name = o.name ?? 'sea';
  mkdirSync(o.workDir, { recursive: true });
  mkdirSync(dirname(o.outFile), { recursive: true });
  const cfgPath = join(o.workDir, `${name}-config.json`);
  const blob = join(o.workDir, `${name}.blob`);
  const node = o.node ?? process.execPath;
  writeFileSync(
    cfgPath,
    JSON.stringify(
      {
        main: o.bundle,
        output: blob,
        disableExperimentalSEAWarning: true,
        // V8 code cache and start-up snapshot are mutually exclusive in Node's SEA builder.
        useCodeCache: o.snapshot ? false : (o.codeCache ?? true),
        useSnapshot: o.snapshot ?? false,
        assets: { [ADDON_KEY]: o.addon },
      },
      null,
      2,
    ),
  );
  await run(node, ['--experimental-sea-config', cfgPath], { cwd: o.workDir });
  const tmp = `${o.outFile}.tmp-${process.pid}`;
  try {
    copyFileSync(node, tmp);
    chmodSync(tmp, 0o755);
    await run(process.execPath, [findPostject(), tmp, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE]);
    renameSync(tmp, o.outFile);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Run the executable with `--list --verify`: every plugin module is evaluated and must declare the metadata
 * recorded at build time. Returns the plugin names.
 */
export function listPlugins(exe: string, runner: readonly string[] = []): string[] {
  const argv = [...runner, exe];
  const r = spawnSync(argv[0] as string, [...argv.slice(1), '--list', '--verify'], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  if (r.status !== 0) throw new Error(`${exe} --list failed (exit ${r.status}): ${r.stderr}${r.error ?? ''}`);
  const names: string[] = [];
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const { name, meta, recorded } = JSON.parse(line) as {
      name: string;
      meta: PluginMeta;
      recorded: PluginMeta | null;
    };
    if (recorded && JSON.stringify(recorded) !== JSON.stringify(meta)) {
      throw new Error(
        `${name}: about/versions at run time ${JSON.stringify(meta)} differ from the build-time record ${JSON.stringify(recorded)} (they must not depend on the environment)`,
      );
    }
    names.push(name);
  }
  return names.sort();
}

function metaOf(p: AnyPlugin): PluginMeta {
  return { about: p.about, versions: p.versions ? [...p.versions] : undefined };
}

/**
 * Evaluate each plugin module and return its `plugin` (name and metadata). The module is bundled first (ESM,
 * packages external) into `workDir`, so TypeScript sources work under plain node.
 */
export async function loadPlugins(
  entries: readonly string[],
  o: { workDir: string; conditions?: string[] },
): Promise<Array<{ entry: string; name: string; meta: PluginMeta }>> {
  mkdirSync(o.workDir, { recursive: true });
  const out: Array<{ entry: string; name: string; meta: PluginMeta }> = [];
  for (const [i, entry] of entries.entries()) {
    // a name never used before in this process: import() caches modules by URL
    const file = join(o.workDir, `plugin-${process.pid}-${randomBytes(6).toString('hex')}-${i}.mjs`);
    try {
      await esbuild.build({
        entryPoints: [entry],
        bundle: true,
        packages: 'external',
        platform: 'node',
        format: 'esm',
        target: 'node20',
        conditions: o.conditions ?? [],
        outfile: file,
        logLevel: 'error',
        // as in the executable (a tsconfig `paths` mapping can make esbuild bundle @cnikit/skel here)
        define: VERSION_DEFINE,
      });
      const mod = (await import(pathToFileURL(file).href)) as { plugin?: AnyPlugin; default?: AnyPlugin };
      const plugin = mod.plugin ?? mod.default;
      if (!plugin || typeof plugin.name !== 'string' || plugin.name === '') {
        throw new Error(
          `${entry} must export \`plugin\` (or a default export): a @cnikit/skel Plugin with a name`,
        );
      }
      out.push({ entry, name: plugin.name, meta: metaOf(plugin) });
    } finally {
      rmSync(file, { force: true });
    }
  }
  return out;
}

export interface BuildOptions {
  /** Plugin modules (paths): each exports `plugin` and does nothing at import time. */
  plugins: readonly (string | PluginEntry)[];
  /** The executable to write. */
  out: string;
  backend?: Backend;
  /** Hard links named after each plugin next to `out` (default: when there are several plugins). */
  links?: boolean;
  /** Extra names linked to `out` (e.g. the cnitool name when `extras.tool` is set). */
  extraLinks?: string[];
  extras?: EntryExtras;
  /** Where intermediate files go (default: <resolveDir>/node_modules/.cache/cnikit-build). */
  workDir?: string;
  /** Where bare specifiers resolve from (default: the current directory). */
  resolveDir?: string;
  conditions?: string[];
  /** The addon to embed (default: @cnikit/sys's). */
  addon?: string;
  /** Rebuild even when nothing changed. */
  force?: boolean;
  /** Node SEA: V8 code cache (default true). */
  codeCache?: boolean;
  /** Bun: bytecode (default true). */
  bytecode?: boolean;
  /** Bun: bytecode layout training (see CompileBunOptions.train). */
  train?: CompileBunOptions['train'];
  /** Recorded metadata, when the caller already has it (skips evaluating the modules). */
  meta?: Record<string, PluginMeta>;
  /** Version, commit and build date for `--version`. */
  stamp?: BuildStamp;
  log?: Log;
}

export interface BuildResult {
  exe: string;
  backend: Backend;
  /** Plugin names, sorted, as the executable reports them. */
  plugins: string[];
  /** Hard links created next to the executable. */
  links: string[];
  addonSha256: string;
  /** False when the executable was up to date and kept. */
  built: boolean;
  bytes: number;
  ms: number;
}

/** Build one executable from plugin modules (see the top of this file). */
export async function buildExecutable(o: BuildOptions): Promise<BuildResult> {
  const t0 = performance.now();
  const log = o.log ?? defaultLog;
  const backend = o.backend ?? DEFAULT_BACKEND;
  if (!BACKENDS.includes(backend)) throw new Error(`unknown back-end ${JSON.stringify(backend)} (bun | sea)`);
  if (o.plugins.length === 0) throw new Error('no plugin modules given');
  const exe = resolve(o.out);
  const workDir = resolve(
    o.workDir ?? join(o.resolveDir ?? process.cwd(), 'node_modules', '.cache', 'cnikit-build'),
  );
  // a failed build removes the directories it created (the default work dir may be the first thing in an empty
  // project's node_modules); a successful one keeps the work dir: its stamps make the next build incremental
  const created: string[] = [];
  for (let d = workDir; !existsSync(d); d = dirname(d)) created.unshift(d);
  mkdirSync(workDir, { recursive: true });
  try {
    return await buildIn(o, exe, workDir, t0, log, backend);
  } catch (err) {
    for (const d of created.reverse()) rmSync(d, { recursive: true, force: true });
    throw err;
  }
}

async function buildIn(
  o: BuildOptions,
  exe: string,
  workDir: string,
  t0: number,
  log: Log,
  backend: Backend,
): Promise<BuildResult> {
  let plugins: PluginEntry[];
  let meta = o.meta;
  const given = o.plugins.map((p) => (typeof p === 'string' ? { entry: resolve(p) } : p));
  if (meta && given.every((p): p is PluginEntry => 'name' in p)) {
    plugins = given;
  } else {
    const loaded = await loadPlugins(
      given.map((p) => p.entry),
      { workDir, conditions: o.conditions },
    );
    plugins = loaded.map((p) => ({ name: p.name, entry: p.entry }));
    meta = Object.fromEntries(loaded.map((p) => [p.name, p.meta]));
    for (const [i, p] of given.entries()) {
      if ('name' in p && p.name !== plugins[i]?.name) {
        throw new Error(`${p.entry} exports plugin ${JSON.stringify(plugins[i]?.name)}, expected ${p.name}`);
      }
    }
  }
  const dup = plugins.find((p, i) => plugins.findIndex((q) => q.name === p.name) !== i);
  if (dup) throw new Error(`two plugin modules are named ${JSON.stringify(dup.name)}`);

  // work files are per output path (two outputs with the same file name never share a bundle or a stamp)
  const tag = `${basename(exe)}-${backend}-${sha256(exe).slice(0, 8)}`;
  const addonPath = o.addon ?? (await findAddon());
  const addonBytes = readFileSync(addonPath);
  const addonSha = sha256(addonBytes);
  const addonCopy = stageAddon(workDir, addonBytes);

  const entryOpts: EntryOptions = {
    backend,
    addonSha,
    meta,
    extras: o.extras,
    name: basename(exe),
    stamp: o.stamp,
  };
  const bundlePath = await bundle({
    plugins,
    ...entryOpts,
    outFile: join(workDir, `${tag}.cjs`),
    resolveDir: o.resolveDir,
    conditions: o.conditions,
  });
  const bun = backend === 'bun' ? findBun() : undefined;
  const toolchain =
    backend === 'sea'
      ? `node ${process.version} cache=${o.codeCache ?? true}`
      : `bun ${spawnSync(bun as string, ['--version'], { encoding: 'utf8' }).stdout.trim()} bytecode=${o.bytecode ?? true} train=${!!o.train} split`;
  // the esbuild bundle stands for every input of the executable (Bun bundles the same sources again, split)
  const inputs = sha256(
    [
      sha256(readFileSync(bundlePath)),
      addonSha,
      toolchain,
      readFileSync(fileURLToPath(import.meta.url)),
      ...(backend === 'bun' ? [readFileSync(BUN_BUNDLE_SCRIPT)] : []),
    ].join('\n'),
  );
  const stampFile = join(workDir, `${tag}.stamp`);
  let built = false;
  if (o.force || !existsSync(exe) || readStamp(stampFile) !== inputs) {
    rmSync(stampFile, { force: true });
    if (backend === 'bun') {
      // the generated entry inside the work dir: its bare specifiers (extras) resolve from there
      const entry = join(workDir, `${tag}-entry.ts`);
      writeFileSync(entry, entrySource(plugins, entryOpts));
      await compileBunModule({
        entry,
        addon: addonCopy,
        outFile: exe,
        workDir,
        conditions: o.conditions,
        bytecode: o.bytecode,
        bun,
        train: o.train,
        log,
      });
    } else {
      await compileSea({
        bundle: bundlePath,
        addon: addonCopy,
        outFile: exe,
        workDir,
        codeCache: o.codeCache,
        name: tag,
      });
    }
    writeFileSync(stampFile, inputs);
    built = true;
  }
  const names = listPlugins(exe);
  const links: string[] = [];
  if (o.links ?? plugins.length > 1) {
    for (const name of [...names, ...(o.extraLinks ?? [])]) {
      const dst = join(dirname(exe), name);
      if (dst === exe) continue;
      linkAtomic(exe, dst);
      links.push(dst);
    }
  }
  const ms = performance.now() - t0;
  const bytes = statSync(exe).size;
  log(
    `${backend}: ${exe} ${built ? 'built' : 'unchanged'} (${(bytes / 1e6).toFixed(1)} MB, ${(ms / 1000).toFixed(1)} s)` +
      (links.length ? `; links: ${links.map((l) => basename(l)).join(', ')}` : ''),
  );
  return { exe, backend, plugins: names, links, addonSha256: addonSha, built, bytes, ms };
}

/**
 * The addon under a fixed file name inside the work dir (Bun names the embedded file after it), replaced only when
 * its content differs and then atomically, so builds running side by side never see it half-written.
 */
export function stageAddon(workDir: string, bytes: Uint8Array): string {
  const file = join(workDir, ADDON_KEY);
  let same = false;
  try {
    same = sha256(readFileSync(file)) === sha256(bytes);
  } catch {
    same = false;
  }
  if (!same) {
    const tmp = `${file}.tmp-${process.pid}`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  }
  return file;
}

function readStamp(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
