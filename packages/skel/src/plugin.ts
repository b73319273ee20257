/**
 * @cnikit/skel/plugin — the plugin side of the protocol without the caller side: every export of `@cnikit/skel`
 * except delegation (`delegateAdd` & co., `Invoker`, `execPlugin`, `findInPath` …, which are `@cnikit/skel/invoke`).
 * A plugin that never delegates imports this, so loading it does not load the Invoker and the exec code: with the
 * bundler's code splitting a module reached through the package index is in the chunk of every plugin that imports
 * the index (docs/benchmarks.md, the cold chain's instructions). The same modules as the index: same objects, same
 * state.
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
