/**
 * Run by Bun (`bun bun-bundle.ts CONFIG.json`, spawned by build.ts's compileBunModule): one `Bun.build` that bundles
 * an entry module with code splitting and compiles it into a standalone executable with ESM bytecode. Every module
 * reached through `require()` or `import()` becomes its own chunk embedded in the executable and loaded at the call
 * (bun's split require), so a start-up loads the entry's chunks only: a plugin's code is loaded when that plugin runs.
 *
 * Bun resolves Node built-ins before any plugin sees them, so the rarely used ones (LAZY_BUILTINS of build.ts) are
 * made lazy by rewriting their static import specifiers to `cnikit-lazy-builtin:<name>`, a module whose properties
 * load the built-in on first access (`process.getBuiltinModule`); named imports become property reads at the call
 * site, so the semantics are unchanged.
 */

/** What build.ts hands over (JSON file named by argv[2]). */
export interface BunBundleConfig {
  entry: string;
  /** Files embedded as they are (the native addon). */
  embed: string[];
  outfile: string;
  conditions: string[];
  define: Record<string, string>;
  lazyBuiltins: string[];
  bytecode: boolean;
  jitPolicy: number;
  bytecodeOrder?: string[];
  target?: string;
  executablePath?: string;
  minify: boolean;
  /** Modules compiled from another file (an absolute import specifier → the file to use in its place). */
  replace?: Record<string, string>;
}

interface BunPluginBuild {
  onLoad(
    o: { filter: RegExp; namespace?: string },
    cb: (a: { path: string }) => Promise<{ contents: string; loader: string }>,
  ): void;
  onResolve(o: { filter: RegExp }, cb: (a: { path: string }) => { path: string; namespace: string }): void;
}
interface BunGlobal {
  build(o: Record<string, unknown>): Promise<{ success: boolean; logs: unknown[] }>;
  file(path: string): { text(): Promise<string> };
}

const PREFIX = 'cnikit-lazy-builtin:';

/** Static `import … from 'node:x'` / `export … from 'x'` / `import 'x'` of the lazy built-ins, redirected. */
export function rewriteLazyImports(src: string, lazy: readonly string[]): string {
  const re = new RegExp(`(\\bfrom\\s*|\\bimport\\s*)(['"])(?:node:)?(${lazy.join('|')})\\2`, 'g');
  return src.replace(re, (_m, kw: string, q: string, name: string) => `${kw}${q}${PREFIX}${name}${q}`);
}

/** The module standing in for a lazy built-in: one getter per export of the real one. */
export function lazyBuiltinSource(name: string, keys: readonly string[]): string {
  const props = keys
    .filter((k) => k !== 'default')
    .map((k) => `${JSON.stringify(k)}: { get: () => l()[${JSON.stringify(k)}], enumerable: true }`);
  return `let m; const l = () => (m ??= process.getBuiltinModule(${JSON.stringify(`node:${name}`)}));\nmodule.exports = Object.defineProperties({}, {${props.join(',\n')}});\n`;
}

async function main(configPath: string): Promise<void> {
  const Bun = (globalThis as unknown as { Bun: BunGlobal }).Bun;
  const c = JSON.parse(await Bun.file(configPath).text()) as BunBundleConfig;
  const lazy = {
    name: 'cnikit-lazy-builtins',
    setup(b: BunPluginBuild) {
      b.onLoad({ filter: /\.[cm]?[jt]sx?$/ }, async (a) => ({
        contents: rewriteLazyImports(await Bun.file(a.path).text(), c.lazyBuiltins),
        loader: /\.[cm]?tsx?$/.test(a.path) ? (a.path.endsWith('x') ? 'tsx' : 'ts') : 'js',
      }));
      for (const [from, to] of Object.entries(c.replace ?? {}))
        b.onResolve({ filter: new RegExp(`^${from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }, () => ({
          path: to,
          namespace: 'file',
        }));
      b.onResolve({ filter: new RegExp(`^${PREFIX}`) }, (a) => ({
        path: a.path.slice(PREFIX.length),
        namespace: 'cnikit-lazy-builtin',
      }));
      b.onLoad({ filter: /.*/, namespace: 'cnikit-lazy-builtin' }, async (a) => ({
        contents: lazyBuiltinSource(a.path, Object.keys(await import(`node:${a.path}`))),
        loader: 'js',
      }));
    },
  };
  const r = await Bun.build({
    entrypoints: [c.entry, ...c.embed],
    compile: {
      outfile: c.outfile,
      jitPolicy: c.jitPolicy,
      autoloadDotenv: false,
      autoloadBunfig: false,
      ...(c.bytecodeOrder?.length ? { bytecodeOrder: c.bytecodeOrder } : {}),
      ...(c.target ? { target: c.target } : {}),
      ...(c.executablePath ? { executablePath: c.executablePath } : {}),
    },
    bytecode: c.bytecode,
    splitting: true,
    format: 'esm',
    target: 'bun',
    minify: c.minify,
    conditions: c.conditions,
    define: c.define,
    plugins: [lazy],
    throw: false,
  });
  if (!r.success) {
    for (const l of r.logs) process.stderr.write(`${String(l)}\n`);
    process.exit(1);
  }
}

if (process.argv[2] && (globalThis as { Bun?: unknown }).Bun) {
  main(process.argv[2]).catch((err: Error) => {
    process.stderr.write(`bun-bundle: ${err.stack ?? err}\n`);
    process.exit(1);
  });
}
