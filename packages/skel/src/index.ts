/**
 * @cnikit/skel — the plugin side of the CNI protocol (spec 0.1.0–1.1.0).
 *
 * Entry points: `runPlugin(plugin)` (process), `dispatch(plugin, io)` / `invokeInProcess(plugin, env, stdin)`
 * (in-process seam for tests), `s`/`decode` (typed config), `loadArgs` (CNI_ARGS), result helpers,
 * delegation (`delegateAdd` & co., `withDelegateCleanup`, `Invoker`, `registerInProcess`) and `createLogger`.
 * The caller side alone (a runtime: no plugin dispatcher) is `@cnikit/skel/invoke`; the plugin side alone (no
 * delegation) is `@cnikit/skel/plugin`, which a plugin that never delegates imports (its cold call then does not
 * load the caller side). Keep both lists of exports in step (lazy-sdk.test.ts of @cnikit/build checks it).
 *
 * Every export here is public API.
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
  decodeRequest,
  dispatch,
  type InProcessResult,
  invokeInProcess,
  type PluginIO,
  parsePrevResult,
  validateInProcess,
  type Writable,
} from './dispatch.ts';
export {
  CniError,
  type CniErrorJSON,
  ErrorCode,
  ErrorList,
  errorReason,
  internalError,
  Rollback,
  wrap,
  wrapAsync,
} from './errors.ts';
export {
  type DelegateOptions,
  defaultInvoker,
  delegate,
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  delegateVersion,
  type ExecPluginOptions,
  execPlugin,
  findInPath,
  getVersionInfo,
  type InProcessRunner,
  Invoker,
  type InvokerOptions,
  inProcessPlugin,
  onDelegateRollback,
  parseDelegateResult,
  registerInProcess,
  splitPathList,
  undoDelegateAdd,
  type ValidateDelegateOptions,
  type VersionInfo,
  validateDelegate,
  withDelegateCleanup,
} from './invoke.ts';
export {
  createLogger,
  type FullLogger,
  type LogFormat,
  type LoggerOptions,
  type LogLevel,
  traceIdOf,
} from './log.ts';
export { runPlugin } from './process.ts';
export { CNIKIT_VERSION } from './release.ts';
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
  decodeNetconf,
  type Infer,
  type IntOptions,
  jsonTypeOf,
  ObjectSchema,
  Schema,
  s,
} from './schema.ts';
export {
  type Attributes,
  type AttrValue,
  abandonedExportConnects,
  currentSpan,
  DEFAULT_EXPORT_BOUND_MS,
  exportBoundMs,
  parseTraceparent,
  type Recording,
  Span,
  SpanKind,
  type SpanRecord,
  startRecording,
  startSpan,
  type TraceExporter,
  traced,
  traceEndpoint,
  withSpan,
} from './trace.ts';
export {
  ALL_VERSIONS,
  type AnyPlugin,
  type AnyResult,
  type Attachment,
  type BandwidthEntry,
  type CniArgsConvention,
  type Command,
  type ConfDecoder,
  CURRENT_VERSION,
  type DNS,
  type Interface,
  type InvokerHandle,
  type IPConfig,
  type IPConfig020,
  type IPRange,
  type Logger,
  type MaybePromise,
  type NetConf,
  type Plugin,
  type PortMapping,
  type Request,
  type RequestBase,
  type Resident,
  type ResidentHandle,
  type Result,
  type Result020,
  type Result040,
  type Route,
  type RuntimeConfig,
  type SpecVersion,
} from './types.ts';
export {
  interfaceNameProblem,
  MAX_CONTAINER_ID_LENGTH,
  validateContainerID,
  validateInterfaceName,
  validateNetworkName,
} from './validate.ts';
export { compareVersions, goQuote, goQuoteList, parseVersion, versionGte } from './version.ts';
