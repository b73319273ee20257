/**
 * The entry of every executable @cnikit/build makes. The build generates only a few lines of data that import this
 * module and call `start`: the plugin list (each module behind a lazy `require`, so only the plugin that runs —
 * and, on delegation, its delegate — is evaluated at start-up), the optional entry points (cnitool, serve,
 * conformance, install-cni, each a lazy `import`), the embedded addon's digest and the version stamp. Everything
 * else — the addon source of the back-end, the plugin selection, the error of last resort, the start-up snapshot
 * variant — is here, type-checked with the rest of the package.
 */
import type { AnyPlugin } from '@cnikit/skel';
import { type LazyPlugin, type MainOptions, main, type PluginMeta } from './multicall.ts';
import { bunSource, seaSource } from './native.ts';

/** The SEA asset key of the embedded addon (a Bun executable embeds it as `cnikit_sys-<hash>.node`). */
export const ADDON_KEY = 'cnikit_sys.node';
/** The name prefix of the addon among a Bun executable's embedded files. */
export const BUN_ADDON_PREFIX = 'cnikit_sys';

/** A plugin module as bundled: it exports `plugin`, or has it as its default export. */
export interface PluginModule {
  plugin?: AnyPlugin;
  default?: AnyPlugin;
}

/** The plugin of a module: its `plugin` export, else its default export. */
export function pick(m: PluginModule): AnyPlugin {
  return (m.plugin ?? m.default) as AnyPlugin;
}

/** What the build generates for one executable: main's options but the addon (chosen here), and the plugins. */
export interface EntryConfig extends Omit<MainOptions, 'native'> {
  backend: 'bun' | 'sea';
  /** SHA-256 (hex) of the embedded addon. */
  addonSha: string;
  /** The plugins, in the build's order; `load` evaluates the module (a lazy require in the bundle). */
  plugins: LazyPlugin[];
  /** Measurement variant (Node SEA start-up snapshot): every plugin evaluated into the snapshot. */
  snapshot?: boolean;
}

/** The options `main` gets for this configuration. */
export function mainOptions(c: EntryConfig): MainOptions {
  return {
    native: c.backend === 'sea' ? seaSource(c.addonSha, ADDON_KEY) : bunSource(c.addonSha, BUN_ADDON_PREFIX),
    ...(c.name && c.name !== 'cnikit' ? { name: c.name } : {}),
    ...(c.tool ? { tool: c.tool } : {}),
    ...(c.serve ? { serve: c.serve } : {}),
    ...(c.conformance ? { conformance: c.conformance } : {}),
    ...(c.installCni ? { installCni: c.installCni } : {}),
    ...(c.stamp ? { stamp: c.stamp } : {}),
  };
}

/** Run the executable: `main` with the plugins; an error that escapes it is printed to stderr, exit code 1. */
export function start(c: EntryConfig): void {
  const opts = mainOptions(c);
  const run = () =>
    main(c.plugins, opts).catch((err) => {
      process.stderr.write(`cnikit: ${err?.stack ? err.stack : err}\n`);
      process.exitCode = 1;
    });
  if (c.snapshot) {
    for (const p of c.plugins) p.load();
    const v8 = process.getBuiltinModule('node:v8') as typeof import('node:v8');
    v8.startupSnapshot.setDeserializeMainFunction(run);
  } else {
    run();
  }
}

export type { PluginMeta };
