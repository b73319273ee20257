import { createRequire } from 'node:module';

/** Set by the executables' build (@cnikit/build defines it from its own package version). */
declare const __CNIKIT_VERSION__: string | undefined;

/**
 * The cnikit release, for plugins' `about` texts: a build-time define in executables built by @cnikit/build; from
 * sources or the npm package, the version of @cnikit/skel (every cnikit package has the same version).
 */
export const CNIKIT_VERSION: string =
  typeof __CNIKIT_VERSION__ === 'string' ? __CNIKIT_VERSION__ : packageVersion();

function packageVersion(): string {
  try {
    return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
  } catch {
    return 'unknown'; // bundled by hand without the define
  }
}
