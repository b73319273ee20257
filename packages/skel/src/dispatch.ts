/**
 * The dispatcher: env + stdin → validation → version negotiation → handler → stdout (spec §2–§8),
 * following the reference skel at HEAD, except that the same-namespace guard runs before the handler.
 *
 * `dispatch(plugin, io)` is the in-process seam (env/stdin/stdout/stderr injected); `invokeInProcess(plugin, env,
 * stdin)` captures the output for tests; `runPlugin(plugin)` (process.ts) wires it to the process's file descriptors.
 */
import { statSync } from 'node:fs';
import { AttachmentSchema } from './conventions.ts';
import { CniError, ErrorCode, errorReason } from './errors.ts';
import type { Writable } from './fdio.ts';
import { configVersion, goEscapeJSON, goKind, goStringField, parseJsonGo } from './gojson.ts';
import type { InProcessRunner, Invoker } from './invoke.ts';
import { createLogger } from './log.ts';
import { formatConverted, parseResult, toCurrent } from './result.ts';
import { decode, foldKey, s } from './schema.ts';
import {
  currentSpan,
  nowNs,
  parseTraceparent,
  type Span,
  SpanKind,
  type SpanRecord,
  startRecording,
  startSpan,
  type TraceExporter,
  traceEndpoint,
  withSpan,
} from './trace.ts';
import {
  ALL_VERSIONS,
  type Attachment,
  type Command,
  type NetConf,
  type Plugin,
  type Request,
  type RequestBase,
  type Result,
} from './types.ts';
import { validateContainerID, validateInterfaceName, validateNetworkName } from './validate.ts';
import { goQuote, goQuoteList, versionGte } from './version.ts';
import { findKey, requestedVersion, toBytes, versionText } from './version-call.ts';

export type { Writable } from './fdio.ts';

export interface PluginIO {
  env: Record<string, string | undefined>;
  /**
   * The config bytes, or a reader called only when stdin must be read (VERSION reads it for the requested
   * `cniVersion`, unless `stdinIsTerminal` says a human's terminal is on it).
   */
  stdin: Uint8Array | string | (() => Uint8Array);
  /** Whether stdin is a terminal (process entry: fd 0); VERSION then answers without reading it. */
  stdinIsTerminal?: () => boolean;
  stdout: Writable;
  stderr: Writable;
  /** Runs the plugin's delegations (`req.invoker`): the caller's in-process plugins. Default: the default Invoker. */
  invoker?: Invoker;
  /**
   * Where a traced call's spans go (the warm service batches them); default: the cold export, posted before
   * `dispatch` resolves with a bounded wait (./otlp.ts).
   */
  traceExporter?: TraceExporter;
  /** The OTLP traces URL to use when neither the call's environment nor its config names one (warm service). */
  traceEndpoint?: string;
  /** `cold` (default) or `warm`: the `cnikit.mode` attribute of the call's span. */
  mode?: 'cold' | 'warm';
}

type Verb = Exclude<Command, 'VERSION'>;

// ---------------------------------------------------------------------------------------------
// Environment (spec §3)

const ENV_TABLE: ReadonlyArray<{
  name: string;
  required: readonly string[];
  validate?: (v: string, command: string) => void;
}> = [
  { name: 'CNI_COMMAND', required: ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS'] },
  { name: 'CNI_CONTAINERID', required: ['ADD', 'CHECK', 'DEL'], validate: validateContainerID },
  { name: 'CNI_NETNS', required: ['ADD', 'CHECK'] },
  { name: 'CNI_IFNAME', required: ['ADD', 'CHECK', 'DEL'], validate: validateInterfaceName },
  { name: 'CNI_ARGS', required: [] },
  { name: 'CNI_PATH', required: ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS'] },
  { name: 'CNI_NETNS_OVERRIDE', required: [] },
];

/** Scan the environment like HEAD skel: a validation failure returns at once, missing names at the end. */
function scanEnv(env: PluginIO['env']): Record<string, string> {
  const get = (k: string) => env[k] ?? '';
  const cmd = get('CNI_COMMAND');
  const missing: string[] = [];
  const values: Record<string, string> = {};
  for (const v of ENV_TABLE) {
    const val = get(v.name);
    values[v.name] = val;
    const required = v.required.includes(cmd);
    if (val === '') {
      if (required || v.name === 'CNI_COMMAND') missing.push(v.name);
    } else if (required && v.validate) {
      v.validate(val, cmd);
    }
  }
  if (missing.length > 0) {
    throw new CniError(
      ErrorCode.InvalidEnvironmentVariables,
      `required env variables [${missing.join(',')}] missing`,
    );
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// stdin (spec §4)

const NAME_STRUCT = 'struct { Name string "json:\\"name\\"" }';

function parseConfigText(bytes: Uint8Array): unknown {
  const r = parseJsonGo(bytes);
  if (!r.ok) throw new CniError(ErrorCode.DecodingFailure, `error unmarshall network config: ${r.error}`);
  return r.value;
}

/** Validate the config like skel's validateConfig: a JSON object (or null) with a valid `name`. */
function validateConfig(bytes: Uint8Array): Record<string, unknown> {
  const json = parseConfigText(bytes);
  if (json !== null && (typeof json !== 'object' || Array.isArray(json))) {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `error unmarshall network config: json: cannot unmarshal ${goKind(json)} into Go value of type ${NAME_STRUCT}`,
    );
  }
  const obj = (json ?? {}) as Record<string, unknown>;
  const name = goStringField(obj, 'name', (kind) => {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `error unmarshall network config: json: cannot unmarshal ${kind} into Go struct field .name of type string`,
    );
  });
  if (name === '') throw new CniError(ErrorCode.InvalidNetworkConfig, 'missing network name');
  validateNetworkName(name);
  return obj;
}

/** The config's cniVersion ('0.1.0' when missing/empty/null); code 6 when not a string. */
function decodeVersion(conf: Record<string, unknown>): string {
  return configVersion(conf, (kind) => {
    throw new CniError(
      ErrorCode.DecodingFailure,
      `decoding version from network config: json: cannot unmarshal ${kind} into Go struct field .cniVersion of type string`,
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Versions (spec §5)

function reconcile(configVersion: string, supported: readonly string[]): void {
  if (!supported.includes(configVersion)) {
    throw new CniError(
      ErrorCode.IncompatibleCNIVersion,
      'incompatible CNI versions',
      `config is ${goQuote(configVersion)}, plugin supports ${goQuoteList(supported)}`,
    );
  }
}

function gte(a: string, b: string): boolean {
  try {
    return versionGte(a, b);
  } catch (e) {
    throw new CniError(ErrorCode.DecodingFailure, e instanceof Error ? e.message : String(e));
  }
}

/** CHECK (0.4.0), GC and STATUS (1.1.0) gates, then the exact-match check. */
function gate(verb: Verb, configVersion: string, supported: readonly string[]): void {
  const min = verb === 'CHECK' ? '0.4.0' : verb === 'GC' || verb === 'STATUS' ? '1.1.0' : undefined;
  if (min !== undefined) {
    if (!gte(configVersion, min)) {
      throw new CniError(ErrorCode.IncompatibleCNIVersion, `config version does not allow ${verb}`);
    }
    if (!supported.some((pv) => gte(pv, configVersion))) {
      throw new CniError(ErrorCode.IncompatibleCNIVersion, `plugin version does not allow ${verb}`);
    }
  }
  reconcile(configVersion, supported);
}

// ---------------------------------------------------------------------------------------------
// Same-namespace guard (spec §7, run before the handler)

function netnsOverride(v: string): boolean {
  return v === '1' || v.toUpperCase() === 'TRUE';
}

/** Test seam (module-internal: not exported from the package index): the path of the plugin's own network namespace. */
export const netnsGuard = { selfPath: '/proc/thread-self/ns/net', fallbackPath: '/proc/self/ns/net' };

function checkNetns(path: string): void {
  if (path === '') return;
  let target: { dev: bigint; ino: bigint };
  try {
    target = statSync(path, { bigint: true });
  } catch {
    return; // unopenable: not this check's business (DEL of a gone namespace)
  }
  let self: { dev: bigint; ino: bigint };
  try {
    self = statSync(netnsGuard.selfPath, { bigint: true });
  } catch {
    try {
      self = statSync(netnsGuard.fallbackPath, { bigint: true });
    } catch {
      throw new CniError(ErrorCode.InvalidNetNS, "get plugin's netns failed");
    }
  }
  if (self.dev === target.dev && self.ino === target.ino) {
    throw new CniError(
      ErrorCode.InvalidNetNS,
      "plugin's netns and netns from CNI_NETNS should not be the same",
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Request building

const attachmentsSchema = s.array(AttachmentSchema);

/**
 * Parse a config's `prevResult` like Go `version.ParsePrevResult`: a missing/empty `cniVersion` takes the
 * config's; the result type is the config version's family (another family is an error, not a
 * conversion); the parsed result is returned in the current (1.1.0) shape. Throws plain Errors
 * (`could not parse prevResult: …`), which surface as code 999.
 */
export function parsePrevResult(conf: Record<string, unknown>, configVersion: string): Result | undefined {
  const raw = findKey(conf, 'prevResult');
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error(`could not parse prevResult: json: cannot unmarshal ${goKind(raw)} into a result object`);
  }
  const rec = { ...(raw as Record<string, unknown>) };
  const own = findKey(rec, 'cniVersion');
  if (typeof own !== 'string' || own === '') {
    for (const k of Object.keys(rec)) if (foldKey(k) === 'cniversion') delete rec[k];
    rec.cniVersion = configVersion;
  }
  try {
    return toCurrent(parseResult(rec, configVersion));
  } catch (e) {
    throw new Error(`could not parse prevResult: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function validAttachments(conf: Record<string, unknown>): Attachment[] | undefined {
  const key =
    findKey(conf, 'cni.dev/valid-attachments') !== undefined
      ? 'cni.dev/valid-attachments'
      : 'cni.dev/attachments';
  const raw = findKey(conf, key);
  if (raw === undefined) return undefined;
  return decode(attachmentsSchema, raw, key);
}

/**
 * The handler's request as the SDK builds it: `base` plus `conf`, the plugin's decoder's value for `base.config` (the
 * raw config when the plugin declares no decoder). For tests that call a handler directly.
 */
export function decodeRequest<C>(plugin: Plugin<C>, base: RequestBase): Request<C> {
  const conf = plugin.conf ? plugin.conf(base.config, base) : (base.config as C);
  return { ...base, conf };
}

// ---------------------------------------------------------------------------------------------
// Output

function errorText(err: CniError): string {
  const code = Number.isInteger(err.code) && err.code >= 0 ? err.code : ErrorCode.Internal;
  const obj: Record<string, unknown> = { code, msg: err.msg };
  if (err.details) obj.details = err.details;
  return goEscapeJSON(JSON.stringify(obj, null, 4));
}

// ---------------------------------------------------------------------------------------------
// Dispatch

/** The tracing state of one dispatch: its start, and its span once the config said the call is traced. */
interface CallTrace {
  startNs?: bigint;
  span?: Span;
  /** Whether this dispatch owns the recording (exports it) or is nested in a traced call of this process. */
  root?: boolean;
}

/** The `cnikit.mode` of the nearest call span at or above `span` in its recording (the delegating plugin's). */
function callerMode(span: Span): 'cold' | 'warm' | undefined {
  const byId = new Map(span.recording.spans.map((r) => [r.spanId, r]));
  for (
    let r: SpanRecord | undefined = span.record;
    r;
    r = r.parentSpanId ? byId.get(r.parentSpanId) : undefined
  ) {
    const m = r.attributes['cnikit.mode'];
    if (m === 'warm' || m === 'cold') return m;
  }
  return undefined;
}

/** Starts the call's span when the call is traced (see ./trace.ts); undefined otherwise. */
function beginCallSpan(
  plugin: { name: string },
  io: PluginIO,
  t: CallTrace,
  verb: Verb,
  env: Record<string, string>,
  conf: Record<string, unknown>,
  cniVersion: string,
): Span | undefined {
  if (t.startNs === undefined) return undefined;
  const parent = currentSpan();
  const attrs = {
    'cni.plugin': plugin.name,
    'cni.command': verb,
    'cni.container_id': env.CNI_CONTAINERID ?? '',
    'cni.network': typeof conf.name === 'string' ? conf.name : '',
    'cni.ifname': env.CNI_IFNAME ?? '',
    'cni.netns': env.CNI_NETNS ?? '',
    'cni.version': cniVersion,
    // an in-process delegate (IPAM in the same process) runs in its caller's mode: warm inside the warm service
    'cnikit.mode': io.mode ?? (parent ? callerMode(parent) : undefined) ?? 'cold',
    'process.pid': process.pid,
  };
  const name = `${plugin.name} ${verb}`;
  if (parent) {
    const span = startSpan(name, { ...attrs, 'cnikit.in_process': true }, SpanKind.Server);
    if (span) span.record.startNs = t.startNs;
    t.root = false;
    return span;
  }
  const endpoint = traceEndpoint(io.env, conf, io.traceEndpoint);
  if (!endpoint) return undefined;
  t.root = true;
  return startRecording(endpoint, name, attrs, SpanKind.Server, io.env.TRACEPARENT, t.startNs);
}

/** Ends the call's span with its result code and, when this dispatch owns the recording, exports it. */
async function endCallSpan(
  t: CallTrace,
  io: PluginIO,
  code: number,
  err: CniError | undefined,
): Promise<void> {
  const span = t.span;
  if (!span) return;
  try {
    span.setAttributes({ 'cni.result_code': code });
    span.end(err ? `${err.code}: ${err.msg}` : undefined);
    if (!t.root) return;
    if (io.traceExporter) await io.traceExporter(span.recording);
    else await (await import('./otlp.ts')).exportRecording(span.recording, io.env);
  } catch {
    // tracing never changes a call's answer
  }
}

async function run<C>(
  plugin: Plugin<C>,
  io: PluginIO,
  supported: readonly string[],
  t: CallTrace = {},
): Promise<void> {
  let envValues: Record<string, string>;
  try {
    envValues = scanEnv(io.env);
  } catch (e) {
    if (
      CniError.is(e) &&
      e.code === ErrorCode.InvalidEnvironmentVariables &&
      !io.env.CNI_COMMAND &&
      plugin.about
    ) {
      io.stderr.write(`${plugin.about}\n`);
      io.stderr.write(`CNI protocol versions supported: ${supported.join(', ')}\n`);
      return;
    }
    throw e;
  }
  const cmd = envValues.CNI_COMMAND!;
  if (cmd === 'VERSION') {
    try {
      io.stdout.write(versionText(supported, requestedVersion(io.stdin, io.stdinIsTerminal)));
    } catch (e) {
      throw new CniError(ErrorCode.IOFailure, e instanceof Error ? e.message : String(e));
    }
    return;
  }

  let bytes: Uint8Array;
  try {
    bytes = toBytes(io.stdin);
  } catch (e) {
    if (CniError.is(e)) throw e;
    throw new CniError(
      ErrorCode.IOFailure,
      `error reading from stdin: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  const conf = validateConfig(bytes);

  if (cmd !== 'ADD' && cmd !== 'DEL' && cmd !== 'CHECK' && cmd !== 'GC' && cmd !== 'STATUS') {
    throw new CniError(ErrorCode.InvalidEnvironmentVariables, `unknown CNI_COMMAND: ${cmd}`);
  }
  const verb: Verb = cmd;
  const configVersion = decodeVersion(conf);
  gate(verb, configVersion, supported);
  t.span = beginCallSpan(plugin, io, t, verb, envValues, conf, configVersion);
  if (t.span) {
    const span = t.span;
    return withSpan(span, () => handle(plugin, io, verb, envValues, conf, configVersion, bytes));
  }
  return handle(plugin, io, verb, envValues, conf, configVersion, bytes);
}

/** The verb's part of a dispatch: the request built, the guard, the handler, the output. */
async function handle<C>(
  plugin: Plugin<C>,
  io: PluginIO,
  verb: Verb,
  envValues: Record<string, string>,
  conf: Record<string, unknown>,
  configVersion: string,
  bytes: Uint8Array,
): Promise<void> {
  const handler = {
    ADD: plugin.add,
    DEL: plugin.del,
    CHECK: plugin.check,
    GC: plugin.gc,
    STATUS: plugin.status,
  }[verb];
  const guard = (verb === 'ADD' || verb === 'DEL') && !netnsOverride(envValues.CNI_NETNS_OVERRIDE!);
  if (!handler) {
    // The reference treats a missing callback as success (GC/STATUS of older plugins).
    if (guard) checkNetns(envValues.CNI_NETNS!);
    return;
  }

  const base: RequestBase = {
    command: verb,
    containerId: envValues.CNI_CONTAINERID!,
    netns: envValues.CNI_NETNS!,
    ifName: envValues.CNI_IFNAME!,
    args: envValues.CNI_ARGS!,
    path: envValues.CNI_PATH === '' ? [] : envValues.CNI_PATH!.split(':'),
    stdin: bytes,
    config: conf as NetConf,
    cniVersion: configVersion,
    env: io.env,
    log: createLogger(plugin.name, conf, { stderr: io.stderr, env: io.env }),
    stderr: io.stderr,
    ...(io.invoker ? { invoker: io.invoker } : {}),
  };
  if ((verb === 'ADD' || verb === 'DEL' || verb === 'CHECK') && plugin.parsePrevResult !== false) {
    let prev: Result | undefined;
    try {
      prev = parsePrevResult(conf, configVersion);
    } catch (e) {
      if (!plugin.prevResultErrorPrefix) throw e;
      throw new Error(`${plugin.prevResultErrorPrefix}${e instanceof Error ? e.message : String(e)}`);
    }
    if (prev) base.prevResult = prev;
  }
  if (verb === 'GC') {
    const va = validAttachments(conf);
    if (va) base.validAttachments = va;
  }
  if (guard) checkNetns(base.netns);
  const req = decodeRequest(plugin, base);
  // a validation run (`validateInProcess`) stops here: everything the call would reject up to its handler was checked
  if (validating.has(io)) return;

  if (verb === 'ADD') {
    const result = await (handler as NonNullable<Plugin<C>['add']>)(req);
    if (result === undefined || result === null || typeof result !== 'object') {
      throw new CniError(ErrorCode.Internal, `plugin ${plugin.name} returned no result for ADD`);
    }
    // A result that cannot be delivered — not expressible in the config's version (e.g. a 0.1.0/0.2.0 result without
    // an address), or a write to stdout that fails (EPIPE: no reader; EBADF, ENOSPC, EIO …) — means the ADD has failed
    // for the runtime, so it is undone the way a failed ADD is undone: DEL with the same request; then the error
    // leaves as for any failure. Where stdout leads (a pipe, a file, /dev/null) is the caller's choice, never a
    // failure. Only ADD rolls back: the other verbs print nothing on success, VERSION has nothing to undo.
    const rollback = async () => {
      if (!plugin.del) return;
      try {
        await plugin.del(decodeRequest(plugin, { ...base, command: 'DEL' }));
      } catch (u) {
        req.log.warn('rollback of an ADD whose result could not be delivered failed: %s', errorReason(u));
      }
    };
    let text: string;
    try {
      text = formatConverted(result, configVersion);
    } catch (e) {
      await rollback();
      throw e;
    }
    try {
      io.stdout.write(text);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      await rollback();
      throw new CniError(
        ErrorCode.IOFailure,
        `failed to write the result to stdout: ${why}`,
        'the ADD was rolled back',
      );
    }
    return;
  }
  await handler(req);
}

/**
 * Run one invocation of `plugin` against injected env/stdin/stdout/stderr. Returns the exit code
 * (0 success, 1 error). Never throws; errors leave as one CNI error JSON on stdout.
 */
export async function dispatch<C>(plugin: Plugin<C>, io: PluginIO): Promise<number> {
  const supported = plugin.versions ?? ALL_VERSIONS;
  // a call is traced only with a trace context (TRACEPARENT, or a traced call of this process delegating to it);
  // a validation run is not a call of its own and has no span
  const t: CallTrace =
    !validating.has(io) && (parseTraceparent(io.env.TRACEPARENT) || currentSpan())
      ? { startNs: nowNs() }
      : {};
  try {
    await run(plugin, io, supported, t);
    await endCallSpan(t, io, 0, undefined);
    return 0;
  } catch (e) {
    let err: CniError;
    try {
      err = CniError.from(e);
      if (typeof err.msg !== 'string' || typeof err.details !== 'string')
        throw new TypeError('malformed error');
    } catch {
      err = new CniError(ErrorCode.Internal, 'unknown error (unprintable exception)');
    }
    if (!CniError.is(e)) {
      try {
        const stack = e instanceof Error && e.stack ? e.stack : String(e);
        createLogger(plugin.name, undefined, { stderr: io.stderr, env: io.env }).debug(
          'internal error: %s',
          stack,
        );
      } catch {
        // never let logging change the answer
      }
    }
    const text = errorText(err);
    try {
      io.stdout.write(text);
    } catch (w) {
      // stdout cannot take it either: the exit code tells, and the error goes to stderr so it is not lost
      try {
        io.stderr.write(`${plugin.name}: could not write the error to stdout (${errorReason(w)}): ${text}\n`);
      } catch {
        // nowhere left to report
      }
    }
    await endCallSpan(t, io, err.code, err);
    return 1;
  }
}

/** The `PluginIO`s of validation runs: dispatched up to the handler, which is not called. */
const validating = new WeakSet<PluginIO>();

/**
 * Everything a dispatch of `plugin` with this env and stdin checks before its handler — environment, config, version
 * gates, prevResult, the namespace guard and the plugin's config decoder (`conf`) — without running the handler:
 * exit code 0 when the call would reach it, else 1 with the same error object on stdout as the call would print.
 * A delegating plugin runs it on an in-process delegate before its first change (`Invoker.validateDelegate`).
 */
export function validateInProcess<C>(
  plugin: Plugin<C>,
  env: Record<string, string | undefined>,
  stdin: Uint8Array | string = '',
  opts: { invoker?: Invoker } = {},
): Promise<InProcessResult> {
  return captured(plugin, env, stdin, opts, true);
}

export interface InProcessResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run `plugin` in-process with the given env and stdin and capture its output (tests, in-process delegation). */
export function invokeInProcess<C>(
  plugin: Plugin<C>,
  env: Record<string, string | undefined>,
  stdin: Uint8Array | string = '',
  opts: { invoker?: Invoker } = {},
): Promise<InProcessResult> {
  return captured(plugin, env, stdin, opts, false);
}

/** One dispatch with stdout and stderr captured; `validate` stops it before the handler (`validateInProcess`). */
async function captured<C>(
  plugin: Plugin<C>,
  env: Record<string, string | undefined>,
  stdin: Uint8Array | string,
  opts: { invoker?: Invoker },
  validate: boolean,
): Promise<InProcessResult> {
  let stdout = '';
  let stderr = '';
  const io: PluginIO = {
    env,
    stdin,
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    ...(opts.invoker ? { invoker: opts.invoker } : {}),
  };
  if (validate) validating.add(io);
  const code = await dispatch(plugin, io);
  return { code, stdout, stderr };
}

// the Invokers of this program run their in-process plugins through this dispatcher: invoke.ts finds it under this
// symbol (IN_PROCESS_RUNNER there), and neither module imports the other, so a call that never delegates leaves
// invoke.ts unloaded
(globalThis as { [key: symbol]: unknown })[Symbol.for('cnikit.in-process-runner.v1')] = {
  invoke: invokeInProcess,
  validate: validateInProcess,
} satisfies InProcessRunner;
