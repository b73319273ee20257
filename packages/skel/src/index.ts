export { type ArgField, type ArgsOf, loadArgs, parseArgBool } from './args.ts';
export { dispatch, type InProcessResult, invokeInProcess, type PluginIO, runPlugin } from './dispatch.ts';
export * from './errors.ts';
export {
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  registerInProcess,
  withDelegateCleanup,
} from './invoke.ts';
export { createLogger, type FullLogger, type LoggerOptions, type LogLevel } from './log.ts';
export { convertResult, formatResult, parseResult, toCurrent } from './result.ts';
export { decode, type Infer, type IntOptions, jsonTypeOf, ObjectSchema, Schema, s } from './schema.ts';
export * from './types.ts';
export { compareVersions, parseVersion, versionGte } from './version.ts';
