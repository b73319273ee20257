/**
 * Delegation to other plugins found in CNI_PATH (spec §14b), mirroring Go's `pkg/invoke`:
 * lookup (first regular file), env = the invocation's full env with CNI_COMMAND replaced, stdin = the
 * same config bytes, the result parsed in its own version and converted to the current shape, a
 * failing delegate's error object passed through unchanged (code 0 when it printed no parseable
 * error), "text file busy" retried 1 s apart up to 6 attempts, stderr copied only on success.
 *
 * When the file found in CNI_PATH is this very executable (same dev+inode as `process.execPath`) and a
 * plugin of that name was `registerInProcess`ed, it runs in-process through `dispatch` with identical
 * semantics (same env, stdin, exit code and stdout handling) instead of starting a new process.
 *
 * An in-process delegate ADD can also register what its DEL does not undo (`onDelegateRollback`, e.g. host-local's
 * allocation cursor): when the delegating plugin's rollback DELs it (`delegateDel` with the same request, or
 * `withDelegateCleanup`), those steps run right after, so a failed ADD changes nothing (issue 20 item 7).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { invokeInProcess } from './dispatch.ts';
import { CniError, ErrorCode } from './errors.ts';
import { concatBytes } from './fdio.ts';
import { configVersion, goKind, parseJsonGo } from './gojson.ts';
import { parseResult, toCurrent } from './result.ts';
import { foldKey } from './schema.ts';
import { type AnyPlugin, CURRENT_VERSION as CURRENT, type RequestBase, type Result } from './types.ts';
import { goQuote } from './version.ts';

const registry = new Map<string, AnyPlugin>();
/** Names registered with `anyPath`: run in-process whatever file CNI_PATH resolves them to. */
const anyPath = new Set<string>();

/**
 * Register a plugin that may be run in-process when a delegate resolves to this executable. With `anyPath`, it runs
 * in-process whenever a delegation (or libcni) resolves its name in CNI_PATH, whatever the file is: a program that
 * hands its plugin objects to libcni (a CI sandbox) gets its IPAM delegations in-process too.
 */
export function registerInProcess(plugin: AnyPlugin, opts: { anyPath?: boolean } = {}): void {
  registry.set(plugin.name, plugin);
  if (opts.anyPath) anyPath.add(plugin.name);
  else anyPath.delete(plugin.name);
}

/** The registered in-process plugin of that name, if any. */
export function getInProcess(name: string): AnyPlugin | undefined {
  return registry.get(name);
}

let execStat: { dev: bigint; ino: bigint } | null | undefined;

/** Default same-executable check: same dev+inode as process.execPath. */
export function isRunningExecutable(path: string): boolean {
  if (execStat === undefined) {
    try {
      execStat = statSync(process.execPath, { bigint: true });
    } catch {
      execStat = null;
    }
  }
  if (!execStat) return false;
  try {
    const st = statSync(path, { bigint: true });
    return st.dev === execStat.dev && st.ino === execStat.ino;
  } catch {
    return false;
  }
}

/** Test seams (process-wide; module-internal: not exported from the package index). */
export const invokeHooks = {
  /** Decides whether a resolved delegate path is this executable. */
  isSelf: isRunningExecutable as (path: string) => boolean,
  /** Delay between "text file busy" retries. */
  retryDelayMs: 1000,
};

export interface DelegateOptions {
  /** Config bytes to send instead of `req.stdin`. */
  stdin?: Uint8Array | string;
  /** Environment to start from instead of `req.env` (CNI_COMMAND is always replaced). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Go `invoke.FindInPath`: the first `<dir>/<plugin>` that is a regular file. Throws plain Errors. */
export function findInPath(plugin: string, paths: readonly string[]): string {
  if (plugin === '') throw new Error('no plugin name provided');
  if (plugin.includes('/')) throw new Error(`invalid plugin name: ${plugin}`);
  if (paths.length === 0) throw new Error('no paths provided');
  for (const dir of paths) {
    const full = join(dir, plugin);
    try {
      if (statSync(full).isFile()) return full;
    } catch {
      // not here
    }
  }
  throw new Error(`failed to find plugin ${goQuote(plugin)} in path [${paths.join(' ')}]`);
}

/** Go `filepath.SplitList`: '' → []. */
export function splitPathList(value: string | undefined): string[] {
  return value ? value.split(':') : [];
}

const SIGNALS: Record<string, string> = {
  SIGKILL: 'killed',
  SIGTERM: 'terminated',
  SIGSEGV: 'segmentation fault',
  SIGABRT: 'aborted',
  SIGINT: 'interrupt',
  SIGHUP: 'hangup',
  SIGPIPE: 'broken pipe',
  SIGBUS: 'bus error',
  SIGILL: 'illegal instruction',
  SIGQUIT: 'quit',
};

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  ENOEXEC: 'exec format error',
  ETXTBSY: 'text file busy',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
};

const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

/** Build the error a failed delegate surfaces as (Go `RawExec.pluginErr`). */
function pluginErr(errText: string, stdout: Uint8Array, stderr: Uint8Array): CniError {
  if (stdout.length === 0) {
    if (stderr.length === 0)
      return new CniError(ErrorCode.Unknown, `netplugin failed with no error message: ${errText}`);
    return new CniError(
      ErrorCode.Unknown,
      `netplugin failed: ${goQuote(decoder.decode(stderr))}: ${errText}`,
    );
  }
  const text = decoder.decode(stdout);
  const bad = (why: string) =>
    new CniError(
      ErrorCode.Unknown,
      `netplugin failed but error parsing its diagnostic message ${goQuote(text)}: ${why}`,
    );
  const parsed = parseJsonGo(stdout, text);
  if (!parsed.ok) return bad(parsed.error);
  const json = parsed.value;
  if (json === null) return new CniError(ErrorCode.Unknown, '');
  if (typeof json !== 'object' || Array.isArray(json)) {
    return bad(`json: cannot unmarshal ${goKind(json)} into Go value of type types.Error`);
  }
  let code = 0;
  let msg = '';
  let details = '';
  for (const [k, v] of Object.entries(json as Record<string, unknown>)) {
    if (v === null) continue;
    const f = foldKey(k);
    if (f === 'code') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
        return bad(
          `json: cannot unmarshal ${typeof v === 'number' ? `number ${v}` : goKind(v)} into Go struct field Error.code of type uint`,
        );
      }
      code = v;
    } else if (f === 'msg' || f === 'details') {
      if (typeof v !== 'string')
        return bad(`json: cannot unmarshal ${goKind(v)} into Go struct field Error.${f} of type string`);
      if (f === 'msg') msg = v;
      else details = v;
    }
  }
  return new CniError(code, msg, details);
}

interface RawOutcome {
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** Go's error text when the plugin failed (`exit status 1`), else undefined. */
  failure?: string;
}

async function spawnOnce(
  path: string,
  stdin: Uint8Array,
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<RawOutcome & { busy?: boolean }> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    let settled = false;
    const fail = (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      const text = (e.code && ERRNO_TEXT[e.code]) ?? e.message;
      resolve({
        stdout: concatBytes(out),
        stderr: concatBytes(err),
        failure: `fork/exec ${path}: ${text}`,
        busy: e.code === 'ETXTBSY',
      });
    };
    let child: ReturnType<typeof spawn>;
    try {
      // some exec failures (ETXTBSY, EACCES) are thrown synchronously by Node
      // like Go's exec.CommandContext: an abort kills the plugin (SIGKILL)
      child = spawn(path, [], {
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
        ...(signal ? { signal, killSignal: 'SIGKILL' } : {}),
      });
    } catch (e) {
      fail(e as NodeJS.ErrnoException);
      return;
    }
    child.stdout!.on('data', (d: Uint8Array) => out.push(d));
    child.stderr!.on('data', (d: Uint8Array) => err.push(d));
    child.stdin!.on('error', () => undefined); // the delegate may not read stdin (EPIPE)
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.name === 'AbortError') return; // reported by 'close' as "signal: killed", like Go
      fail(e);
    });
    child.on('close', (code, signal) => {
      if (settled) return;
      settled = true;
      const failure =
        code === 0 ? undefined : signal ? `signal: ${SIGNALS[signal] ?? signal}` : `exit status ${code ?? 1}`;
      resolve({ stdout: concatBytes(out), stderr: concatBytes(err), ...(failure ? { failure } : {}) });
    });
    child.stdin!.end(stdin);
  });
}

async function runInProcess(
  plugin: AnyPlugin,
  stdin: Uint8Array,
  env: Record<string, string>,
): Promise<RawOutcome> {
  const { code, stdout, stderr } = await invokeInProcess(plugin, env, stdin);
  const enc = new TextEncoder();
  return {
    stdout: enc.encode(stdout),
    stderr: enc.encode(stderr),
    ...(code === 0 ? {} : { failure: `exit status ${code}` }),
  };
}

export interface ExecPluginOptions {
  /** Kill the plugin (SIGKILL, like Go's exec.CommandContext) when this fires; an in-process run is not interrupted. */
  signal?: AbortSignal;
  /** false: always start a process, even for a registered plugin that resolves to this executable. */
  inProcess?: boolean;
  /** Receives the plugin's whole stderr, on success and on failure (before the error is thrown). */
  onStderr?: (text: string) => void;
}

/** Whether `path` would run in-process (a registered plugin of that name that is this executable, or `anyPath`). */
export function inProcessPlugin(path: string): AnyPlugin | undefined {
  const name = basename(path);
  const self = registry.get(name);
  return self && (anyPath.has(name) || invokeHooks.isSelf(path)) ? self : undefined;
}

/**
 * Execute the plugin at `path` with `stdin` and `env` (Go `RawExec.ExecPlugin`), in-process when it is
 * this executable and registered. Resolves to its stdout; rejects with the delegate's CniError.
 * Its stderr is copied to `stderr` on success only.
 */
export async function execPlugin(
  path: string,
  stdin: Uint8Array | string,
  env: Readonly<Record<string, string | undefined>>,
  stderr: { write(s: string): unknown } = process.stderr,
  options: ExecPluginOptions = {},
): Promise<Uint8Array> {
  const bytes = typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin;
  const cleanEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) cleanEnv[k] = v;
  const self = options.inProcess === false ? undefined : inProcessPlugin(path);
  let outcome: RawOutcome & { busy?: boolean };
  if (self) {
    outcome = await runInProcess(self, bytes, cleanEnv);
  } else {
    for (let attempt = 0; ; attempt++) {
      outcome = await spawnOnce(path, bytes, cleanEnv, options.signal);
      if (!outcome.busy || attempt >= 5) break;
      await new Promise((r) => setTimeout(r, invokeHooks.retryDelayMs));
    }
  }
  options.onStderr?.(decoder.decode(outcome.stderr));
  if (outcome.failure !== undefined) throw pluginErr(outcome.failure, outcome.stdout, outcome.stderr);
  if (outcome.stderr.length > 0) {
    try {
      stderr.write(decoder.decode(outcome.stderr));
    } catch {
      // informational only
    }
  }
  return outcome.stdout;
}

function configVersionOf(stdin: Uint8Array): string {
  const parsed = parseJsonGo(stdin);
  if (!parsed.ok) throw new Error(`decoding version from network config: ${parsed.error}`);
  const json = parsed.value;
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return '0.1.0';
  return configVersion(json as Record<string, unknown>, (kind) => {
    throw new Error(
      `decoding version from network config: json: cannot unmarshal ${kind} into Go struct field .cniVersion of type string`,
    );
  });
}

/** Parse a delegate's ADD output like Go `ExecPluginWithResult` and convert it to the current shape. */
export function parseDelegateResult(stdout: Uint8Array, netconf: Uint8Array): Result {
  const confVersion = configVersionOf(netconf);
  const parsed = parseJsonGo(stdout);
  if (!parsed.ok) throw new Error(`failed to unmarshal raw result: ${parsed.error}`);
  let raw = parsed.value;
  if (raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error(
      `failed to unmarshal raw result: json: cannot unmarshal ${goKind(raw)} into Go value of type map[string]interface {}`,
    );
  }
  const rec = { ...(raw as Record<string, unknown>) };
  let version = confVersion;
  if (typeof rec.cniVersion === 'string' && rec.cniVersion !== '') version = rec.cniVersion;
  else rec.cniVersion = confVersion;
  return toCurrent(parseResult(rec, version));
}

type Verb = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';

/**
 * Run delegate `type` for `verb` on behalf of `req`: CNI_PATH lookup, env = req.env with CNI_COMMAND
 * replaced, stdin = req.stdin unchanged. Resolves to the delegate's raw stdout.
 */
export async function delegate(
  verb: Verb,
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<Uint8Array> {
  const baseEnv = opts.env ?? req.env;
  const chain = delegationChain(baseEnv, typeof req.config?.type === 'string' ? req.config.type : '', type);
  const path = findInPath(type, splitPathList(baseEnv.CNI_PATH));
  const stdin = opts.stdin ?? req.stdin;
  return execPlugin(
    path,
    stdin,
    { ...baseEnv, CNI_COMMAND: verb, [DELEGATION_ENV]: chain },
    req.stderr ?? process.stderr,
  );
}

/**
 * The delegation chain so far, carried in the environment to every delegate (in-process or exec'd, and through Go
 * plugins, which pass their environment on): the plugin types from the runtime's plugin on, comma-separated.
 */
export const DELEGATION_ENV = 'CNIKIT_DELEGATION_CHAIN';
/** Delegations deeper than this fail (real configurations nest one or two: bridge → host-local). */
export const MAX_DELEGATION_DEPTH = 8;

/**
 * The chain after delegating to `type`; a type already in the chain (a plugin reached again through its own
 * delegation, e.g. `"ipam": {"type": "bridge"}` in a bridge config) or a chain deeper than MAX_DELEGATION_DEPTH is
 * a configuration error (code 7) — without this check such a config recurses until memory runs out.
 */
function delegationChain(
  env: Readonly<Record<string, string | undefined>>,
  self: string,
  type: string,
): string {
  const chain = (env[DELEGATION_ENV] ?? self).split(',').filter((t) => t !== '');
  if (chain.includes(type) || chain.length >= MAX_DELEGATION_DEPTH) {
    const shown = [...chain, type].join(' → ');
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      chain.includes(type)
        ? `delegation cycle: plugin ${JSON.stringify(type)} is reached again through its own delegation (${shown})`
        : `delegation depth limit of ${MAX_DELEGATION_DEPTH} exceeded (${shown})`,
      'check the "type" of the delegated plugin configuration (e.g. "ipam": {"type": …})',
    );
  }
  return [...chain, type].join(',');
}

/** The undo steps registered by the in-process delegate ADD running in this async context. */
const rollbackSteps = new AsyncLocalStorage<Array<() => unknown>>();
/** Steps of successful in-process delegate ADDs, by request and delegate type, until that delegate's DEL. */
const pendingRollback = new WeakMap<RequestBase, Map<string, Array<() => unknown>>>();

/**
 * For a plugin running in-process as the delegate of an ADD: register `undo`, a change its own DEL does not revert
 * (host-local's last_reserved_ip), to run when the delegating plugin's rollback DELs this delegate. Returns false
 * and registers nothing when the plugin is not an in-process delegate ADD (top level, or exec'd: nobody could run
 * it). Steps run after the DEL succeeded, newest first; a failing step is logged as a warning.
 */
export function onDelegateRollback(undo: () => unknown): boolean {
  const steps = rollbackSteps.getStore();
  if (!steps) return false;
  steps.push(undo);
  return true;
}

/** `delegate('ADD')` collecting the delegate's rollback steps for a later `delegateDel` of the same request. */
async function delegateAddRaw(type: string, req: RequestBase, opts: DelegateOptions): Promise<Uint8Array> {
  const steps: Array<() => unknown> = [];
  const out = await rollbackSteps.run(steps, () => delegate('ADD', type, req, opts));
  if (steps.length > 0) {
    const byType = pendingRollback.get(req) ?? new Map<string, Array<() => unknown>>();
    pendingRollback.set(req, byType);
    byType.set(type, steps);
  }
  return out;
}

/** Run (once) the rollback steps the in-process ADD of delegate `type` registered for `req`. */
async function runPendingRollback(type: string, req: RequestBase): Promise<void> {
  const steps = pendingRollback.get(req)?.get(type);
  if (!steps) return;
  pendingRollback.get(req)?.delete(type);
  for (const step of steps.reverse()) {
    try {
      await step();
    } catch (err) {
      req.log.warn(
        'rollback of delegate %s failed: %s',
        type,
        err instanceof Error ? err.message : String(err),
      );
    }
  }
}

/** Delegate ADD; resolves to the delegate's result in the current (1.1.0) shape. */
export async function delegateAdd(
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<Result> {
  const out = await delegateAddRaw(type, req, opts);
  const stdin = opts.stdin ?? req.stdin;
  return parseDelegateResult(out, typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin);
}

/**
 * Delegate DEL. After an in-process `delegateAdd` of the same request and type (a rollback), the steps that ADD
 * registered with `onDelegateRollback` run once the DEL succeeded.
 */
export async function delegateDel(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  try {
    await delegate('DEL', type, req, opts);
  } catch (err) {
    pendingRollback.get(req)?.delete(type);
    throw err;
  }
  await runPendingRollback(type, req);
}

export async function delegateCheck(
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<void> {
  await delegate('CHECK', type, req, opts);
}

export async function delegateStatus(
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<void> {
  await delegate('STATUS', type, req, opts);
}

export async function delegateGc(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  await delegate('GC', type, req, opts);
}

/**
 * ADD the delegate and run `fn` with its (1.1.0) result; if `fn` throws — or the delegate exited 0 but
 * its answer cannot be parsed — DEL the delegate (best effort, a DEL failure is logged) and rethrow the
 * original error. A delegate ADD that itself fails is not followed by DEL (like the reference plugins).
 */
export async function withDelegateCleanup<T>(
  type: string,
  req: RequestBase,
  fn: (result: Result) => T | Promise<T>,
  opts: DelegateOptions = {},
): Promise<T> {
  // A delegate whose ADD failed is not cleaned up (the reference plugins do not either); one that
  // exited 0 may hold resources, so anything failing from here on (even parsing its answer) runs DEL.
  const out = await delegateAddRaw(type, req, opts);
  try {
    const stdin = opts.stdin ?? req.stdin;
    const r = parseDelegateResult(out, typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin);
    return await fn(r);
  } catch (e) {
    try {
      await delegateDel(type, req, opts);
    } catch (delErr) {
      req.log.warn(
        'cleanup: delegate %s DEL failed: %s',
        type,
        delErr instanceof Error ? delErr.message : String(delErr),
      );
    }
    throw e;
  }
}

export interface VersionInfo {
  cniVersion: string;
  supportedVersions: string[];
}

/**
 * Ask the plugin at `path` which spec versions it supports (Go `invoke.GetVersionInfo`): VERSION with
 * stdin `{"cniVersion":"1.1.0"}` and dummy NETNS/IFNAME/PATH for old skels. A plugin answering
 * `unknown CNI_COMMAND: VERSION` supports only 0.1.0; an answer without `supportedVersions` is accepted
 * only for cniVersion 0.2.0 (→ 0.1.0, 0.2.0).
 */
export async function getVersionInfo(
  path: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  stderr: { write(s: string): unknown } = process.stderr,
  options: ExecPluginOptions = {},
): Promise<VersionInfo> {
  const probeEnv = {
    ...env,
    CNI_COMMAND: 'VERSION',
    CNI_CONTAINERID: '',
    CNI_NETNS: 'dummy',
    CNI_ARGS: '',
    CNI_IFNAME: 'dummy',
    CNI_PATH: 'dummy',
  };
  let out: Uint8Array;
  try {
    out = await execPlugin(path, `{"cniVersion":"${CURRENT}"}`, probeEnv, stderr, options);
  } catch (e) {
    if (CniError.is(e) && e.msg === 'unknown CNI_COMMAND: VERSION') {
      return { cniVersion: CURRENT, supportedVersions: ['0.1.0'] };
    }
    throw e;
  }
  const parsed = parseJsonGo(out);
  if (!parsed.ok) throw new Error(`decoding version info: ${parsed.error}`);
  const raw = parsed.value;
  let cniVersion = '';
  let supported: string[] = [];
  if (raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new Error(
      `decoding version info: json: cannot unmarshal ${goKind(raw)} into Go value of type version.pluginInfo`,
    );
  }
  for (const [k, v] of Object.entries((raw ?? {}) as Record<string, unknown>)) {
    if (v === null) continue;
    const f = foldKey(k);
    if (f === 'cniversion') {
      if (typeof v !== 'string') {
        throw new Error(
          `decoding version info: json: cannot unmarshal ${goKind(v)} into Go struct field pluginInfo.cniVersion of type string`,
        );
      }
      cniVersion = v;
    } else if (f === 'supportedversions') {
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' && x !== null)) {
        throw new Error(
          `decoding version info: json: cannot unmarshal ${goKind(v)} into Go struct field pluginInfo.supportedVersions of type []string`,
        );
      }
      supported = v.map((x) => (x === null ? '' : (x as string)));
    }
  }
  if (cniVersion === '') throw new Error('decoding version info: missing field cniVersion');
  if (supported.length === 0) {
    if (cniVersion === '0.2.0') return { cniVersion: CURRENT, supportedVersions: ['0.1.0', '0.2.0'] };
    throw new Error('decoding version info: missing field supportedVersions');
  }
  return { cniVersion, supportedVersions: supported };
}

/** VERSION of delegate `type` found in the request's CNI_PATH. */
export async function delegateVersion(
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<VersionInfo> {
  const env = opts.env ?? req.env;
  const path = findInPath(type, splitPathList(env.CNI_PATH));
  return getVersionInfo(path, env, req.stderr ?? process.stderr);
}
