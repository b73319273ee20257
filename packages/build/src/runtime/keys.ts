/** The names of the embedded addon in an executable (constants only: the start-up path loads this module). */
/** The SEA asset key of the embedded addon (a Bun executable embeds it as `cnikit_sys-<hash>.node`). */
export const ADDON_KEY = 'cnikit_sys.node';
/** The name prefix of the addon among a Bun executable's embedded files. */
export const BUN_ADDON_PREFIX = 'cnikit_sys';
