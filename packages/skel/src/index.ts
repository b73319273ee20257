/**
 * @cnikit/skel — the plugin side of the CNI protocol (spec 0.1.0–1.1.0).
 *
 * Entry points: `runPlugin(plugin)` (process), `dispatch(plugin, io)` / `invokeInProcess(plugin, env, stdin)`
 * (in-process seam for tests), `s`/`decode` (typed config), `loadArgs` (CNI_ARGS), result helpers,
 * delegation (`delegateAdd` & co., `withDelegateCleanup`, `registerInProcess`) and `createLogger`.
 */
export { type ArgField, type ArgsOf, loadArgs, parseArgBool } from './args.ts';
export {
  ArgsCniSchema,
  AttachmentSchema,
  BandwidthSchema,
  DNSSchema,
  IPRangeSchema,
  PortMappingSchema,
  RuntimeConfigSchema,
} from './conventions.ts';
export {
  dispatch,
  fdWriter,
  type InProcessResult,
  invokeInProcess,
  type PluginIO,
  parsePrevResult,
  readFdFully,
  runPlugin,
  type Writable,
} from './dispatch.ts';
export * from './errors.ts';
export {
  type DelegateOptions,
  delegate,
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  delegateVersion,
  execPlugin,
  findInPath,
  getVersionInfo,
  parseDelegateResult,
  registerInProcess,
  splitPathList,
  type VersionInfo,
  withDelegateCleanup,
} from './invoke.ts';
export { createLogger, type FullLogger, type LoggerOptions, type LogLevel } from './log.ts';
export {
  convertResult,
  formatResult,
  normDNS as normalizeDNS,
  normRoute as normalizeRoute,
  parseResult,
  resultFamily,
  toCurrent,
} from './result.ts';
export {
  decode,
  foldKey,
  type Infer,
  type IntOptions,
  jsonTypeOf,
  ObjectSchema,
  Schema,
  s,
} from './schema.ts';
export * from './types.ts';
export {
  interfaceNameProblem,
  MAX_CONTAINER_ID_LENGTH,
  validateContainerID,
  validateInterfaceName,
  validateNetworkName,
} from './validate.ts';
export { compareVersions, goQuote, goQuoteList, parseVersion, versionGte } from './version.ts';
