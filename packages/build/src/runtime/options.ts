/**
 * The options multicall's `main` gets for the configuration the build generated (runtime/entry.ts): the embedded
 * addon's source for the back-end, and the entry points built in. Loaded only on the multicall path.
 */
import { ADDON_KEY, BUN_ADDON_PREFIX } from './keys.ts';
import type { LazyPlugin, MainOptions } from './multicall.ts';
import { bunSource, seaSource } from './native.ts';

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
