/**
 * @cnikit/build/runtime — what runs inside an executable built by @cnikit/build: the entry (`main`: plugin
 * selection by invoked name, VERSION from build-time metadata, cnitool when built with it) and the safe extraction
 * of the embedded native addon (`seaSource` / `bunSource` / `extractNative`). The generated entry imports it; a
 * plugin author does not.
 *
 * Every export here is public API.
 */

export { fsyncDir, linkAtomic, tmpName, writeFileAtomic } from '@cnikit/sys/atomic';
export {
  ADDON_KEY,
  BUN_ADDON_PREFIX,
  type EntryConfig,
  type PluginModule,
  pick,
  start,
} from './entry.ts';
export {
  basenameOf,
  CONFORMANCE_WORD,
  type ConformanceMain,
  handleNoPlugin,
  INSTALL_CNI_WORD,
  type InstallCniMain,
  type LazyPlugin,
  lazyFacade,
  loadPlugin,
  type MainOptions,
  MULTICALL_NAME,
  main,
  type PluginMeta,
  type PluginSource,
  pluginMeta,
  SERVE_WORD,
  type Selection,
  type ServeMain,
  selectPlugin,
  TOOL_NAME,
  TOOL_WORD,
  type ToolMain,
  toolArgs,
  usage,
} from './multicall.ts';
export {
  bunSource,
  candidateDirs,
  ensurePrivateDir,
  extractNative,
  installNativeOverride,
  type NativeSource,
  seaSource,
  verifyFile,
} from './native.ts';
export { mainOptions } from './options.ts';
export { main as startupMain, versionOnly } from './startup.ts';
export { type BuildStamp, type RuntimeFacts, releaseArch, runtimeFacts, versionText } from './version.ts';
