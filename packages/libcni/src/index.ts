/**
 * @cnikit/libcni — the runtime side of CNI: configuration loading and validation, chain execution (ADD, CHECK, DEL,
 * GC, STATUS, VERSION) with the result cache in Go libcni's format, in-process execution of cnikit plugins, and the
 * `cnitool` command. Any export here is public API.
 */
export { CniConfig, type CniConfigOptions, type GcArgs, parseAddResult } from './api.ts';
export {
  CACHE_KIND,
  DEFAULT_CACHE_DIR,
  encodeCacheEntry,
  type NetworkAttachment,
  type RuntimeConf,
} from './cache.ts';
export { containerIdFor, DEFAULT_NET_DIR, parseCniArgs, runCnitool, type ToolIO } from './cnitool.ts';
export {
  confFiles,
  confFromFile,
  confListFromBytes,
  confListFromConf,
  confListFromFile,
  confListFromObject,
  injectConf,
  loadConf,
  loadNetworkConf,
  type NetworkConfigList,
  type PluginConf,
  type PluginConfig,
  pluginConfFromBytes,
  pluginConfsFromFiles,
} from './conf.ts';
export { CriError, type CriSandbox, criVersion, listPodSandboxes } from './cri.ts';
export {
  type CriGcOptions,
  type CriGcReport,
  criGc,
  DEFAULT_GC_GRACE_MS,
  formatCriGcReport,
  type StaleItem,
} from './cri-gc.ts';
export {
  AbortedError,
  CacheError,
  ConfigError,
  LibcniError,
  MultiError,
  NoConfigsFoundError,
  NotFoundError,
  PluginError,
} from './errors.ts';
export type { CallOptions, TraceContext } from './exec.ts';
