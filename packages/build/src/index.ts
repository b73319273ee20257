/**
 * @cnikit/build — CNI plugin modules → one single-file executable (Bun `--compile` with bytecode, or a Node single
 * executable application), the native addon of @cnikit/sys embedded and extracted safely at run time. The CLI is
 * `cnikit-build`; `buildExecutable` is the same as an API, and the lower-level steps are exported for custom builds.
 *
 * Every export here is public API. What runs inside the executable is in `@cnikit/build/runtime`.
 */

export { fsyncDir, linkAtomic, writeFileAtomic } from '@cnikit/sys/atomic';
export {
  ADDON_KEY,
  BACKENDS,
  type Backend,
  BUN_JIT_POLICY,
  type BuildOptions,
  type BuildResult,
  type BundleOptions,
  buildExecutable,
  bundle,
  CNIKIT_VERSION,
  type CompileBunModuleOptions,
  type CompileBunOptions,
  type CompileSeaOptions,
  compileBun,
  compileBunModule,
  compileSea,
  DEFAULT_BACKEND,
  ENTRY_MODULE,
  type EntryExtras,
  type EntryOptions,
  entrySource,
  FIRST_MODULE,
  findAddon,
  findBun,
  findPostject,
  LAZY_BUILTINS,
  type Log,
  listPlugins,
  loadPlugins,
  type PluginEntry,
  RUNTIME_MODULE,
  SEA_FUSE,
  sha256,
  stageAddon,
} from './build.ts';
export { type CliIO, cli, USAGE } from './cli.ts';
