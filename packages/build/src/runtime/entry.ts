/**
 * The entry of every executable @cnikit/build makes (after ./first.ts, which answers the common VERSION call). The build generates only a few lines of data that import this
 * module and call `start`: the plugin list (each module behind a lazy `require`, so only the plugin that runs —
 * and, on delegation, its delegate — is evaluated at start-up), the optional entry points (cnitool, serve,
 * conformance, install-cni, each a lazy `import`), the embedded addon's digest and the version stamp. Everything
 * else — the addon source of the back-end, the plugin selection, the error of last resort, the start-up snapshot
 * variant — is here, type-checked with the rest of the package.
 */
import type { AnyPlugin } from '@cnikit/skel';
import type { PluginMeta } from './multicall.ts';
import type { EntryConfig } from './options.ts';

export { ADDON_KEY, BUN_ADDON_PREFIX } from './keys.ts';

/** A plugin module as bundled: it exports `plugin`, or has it as its default export. */
export interface PluginModule {
  plugin?: AnyPlugin;
  default?: AnyPlugin;
}

/** The plugin of a module: its `plugin` export, else its default export. */
export function pick(m: PluginModule): AnyPlugin {
  return (m.plugin ?? m.default) as AnyPlugin;
}

export type { EntryConfig };

/** Run the executable: `main` with the plugins; an error that escapes it is printed to stderr, exit code 1. */
export function start(c: EntryConfig): void {
  const fail = (err: { stack?: string } | undefined) => {
    process.stderr.write(`cnikit: ${err?.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  };
  // a VERSION is answered synchronously, before any promise; the addon source and the rest of main's options are
  // made on the multicall path only
  // the start-up path (./startup.ts) only for a VERSION (the common one runtime/first.ts answered already): every
  // other command goes to the multicall entry without loading it
  const full = () => import('./options.ts').then((m) => m.mainOptions(c));
  const run = () => {
    if (process.env.CNI_COMMAND !== 'VERSION') {
      Promise.all([import('./multicall.ts'), full()])
        .then(([m, o]) => m.main(c.plugins, o))
        .catch(fail);
      return;
    }
    import('./startup.ts')
      .then((s) => {
        if (!s.answerVersion(c.plugins, c.name ? { name: c.name } : {}))
          return s.runMulticall(c.plugins, full);
      })
      .catch(fail);
  };
  if (c.snapshot) {
    for (const p of c.plugins) p.load();
    const v8 = process.getBuiltinModule('node:v8') as typeof import('node:v8');
    v8.startupSnapshot.setDeserializeMainFunction(run);
  } else {
    run();
  }
}

export type { PluginMeta };
