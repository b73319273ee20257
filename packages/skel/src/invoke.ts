/**
 * The caller side of the protocol (`@cnikit/skel/invoke`), mirroring Go's `pkg/invoke` with the executor passed in:
 * an `Invoker` runs plugins found in CNI_PATH (spec §14b) — lookup (first regular file), env = the invocation's full
 * env with CNI_COMMAND replaced, stdin = the same config bytes, the result parsed in its own version and converted to
 * the current shape, a failing delegate's error object passed through unchanged (code 0 when it printed no parseable
 * error), "text file busy" retried 1 s apart up to 6 attempts, stderr copied only on success.
 *
 * An Invoker holds the plugins that may run in-process (`plugins` / `register`): when the file found in CNI_PATH is
 * this very executable (same dev+inode as `process.execPath`, or `isSelf`) — or for any file with `anyPath` — a
 * registered plugin of that name runs in this process through `dispatch` with identical semantics (same env, stdin,
 * exit code and stdout handling) instead of starting a new process. Whoever holds the plugins makes the Invoker and
 * passes it on: the multicall executable and warm mode to `runPlugin` / `dispatch` (`PluginIO.invoker`), which hand
 * it to the plugin in `req.invoker`; libcni in `CniConfigOptions.invoker` (or its `plugins`). The delegation
 * functions (`delegateAdd(type, req)` & co.) use `req.invoker`, so a delegate run in-process delegates through the
 * same Invoker. Without one, they use `defaultInvoker` (what `registerInProcess` fills: the API before Invokers).
 *
 * An in-process delegate ADD can also register what its DEL does not undo (`onDelegateRollback`, e.g. host-local's
 * allocation cursor): when the delegating plugin's rollback DELs it (`delegateDel` with the same request, or
 * `withDelegateCleanup`), those steps run right after, so a failed ADD changes nothing.
 *
 * This module does not import the plugin dispatcher: a runtime importing it (libcni) does not load the plugin side.
 * In-process plugins run through the `InProcessRunner` the dispatcher leaves under IN_PROCESS_RUNNER when it loads (a
 * program holding plugin objects has loaded it), or the one of `setInProcessRunner` or `InvokerOptions.runner`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { basename } from 'node:path';
import { CniError, ErrorCode } from './errors.ts';
import {
  decoder,
  decodeVersionInfo,
  findInPath,
  isRunningExecutable,
  parseDelegateResult,
  pluginErr,
  type RawOutcome,
  spawnPlugin,
  splitPathList,
  type VersionInfo,
} from './exec.ts';
import { SpanKind, startSpan, withSpan } from './trace.ts';
import { type AnyPlugin, CURRENT_VERSION as CURRENT, type RequestBase, type Result } from './types.ts';

export {
  decodeVersionInfo,
  findInPath,
  isRunningExecutable,
  parseDelegateResult,
  splitPathList,
  type VersionInfo,
} from './exec.ts';

/** Runs a plugin in this process with captured output: the plugin dispatcher's `invokeInProcess` / `validateInProcess`. */
export interface InProcessRunner {
  invoke(
    plugin: AnyPlugin,
    env: Record<string, string | undefined>,
    stdin: Uint8Array | string,
    opts: { invoker: Invoker },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  validate(
    plugin: AnyPlugin,
    env: Record<string, string | undefined>,
    stdin: Uint8Array | string,
    opts: { invoker: Invoker },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
}

// `req.invoker` is an Invoker: the spec types declare the handle without importing this module, this says what it is
declare module './types.ts' {
  interface InvokerHandle extends Invoker {}
}

let registeredRunner: InProcessRunner | undefined;

/**
 * Where the dispatcher (dispatch.ts) leaves its runner when it loads (a global symbol: neither module imports the
 * other, so a plugin that never delegates does not load this one, and the caller side does not load the dispatcher).
 */
export const IN_PROCESS_RUNNER: unique symbol = Symbol.for('cnikit.in-process-runner.v1');

/**
 * Sets the in-process runner of this program's Invokers (the dispatcher's, found under IN_PROCESS_RUNNER, is the
 * default): a program that has plugin objects has loaded the dispatcher.
 */
export function setInProcessRunner(runner: InProcessRunner): void {
  registeredRunner = runner;
}

function runnerOf(options: InvokerOptions): InProcessRunner {
  const runner =
    options.runner ??
    registeredRunner ??
    (globalThis as { [IN_PROCESS_RUNNER]?: InProcessRunner })[IN_PROCESS_RUNNER];
  if (!runner) {
    throw new CniError(
      ErrorCode.Internal,
      'no in-process runner: the plugin dispatcher (@cnikit/skel) is not loaded',
      'import @cnikit/skel, or pass InvokerOptions.runner',
    );
  }
  return runner;
}

export interface InvokerOptions {
  /** Runs in-process plugins (default: the dispatcher of @cnikit/skel, registered when it loads). */
  runner?: InProcessRunner;
  /** Plugins that may run in-process (the multicall executable's table, a program's own plugin objects). */
  plugins?: Iterable<AnyPlugin>;
  /**
   * `plugins` run in-process whatever file CNI_PATH resolves their name to (a program that hands its plugin objects
   * to libcni gets its IPAM delegations in-process too); default: only when that file is this executable.
   */
  anyPath?: boolean;
  /** Decides whether a resolved plugin path is this executable (default: same dev+inode as process.execPath). */
  isSelf?: (path: string) => boolean;
  /** Delay between "text file busy" retries (default 1000 ms). */
  retryDelayMs?: number;
  /** Asked for an in-process plugin this Invoker does not hold (libcni's Invoker falls back to `defaultInvoker`). */
  fallback?: Invoker;
}

export interface DelegateOptions {
  /** Config bytes to send instead of `req.stdin`. */
  stdin?: Uint8Array | string;
  /** Environment to start from instead of `req.env` (CNI_COMMAND is always replaced). */
  env?: Readonly<Record<string, string | undefined>>;
}

export interface ExecPluginOptions {
  /** Kill the plugin (SIGKILL, like Go's exec.CommandContext) when this fires; an in-process run is not interrupted. */
  signal?: AbortSignal;
  /** false: always start a process, even for a registered plugin that resolves to this executable. */
  inProcess?: boolean;
  /** Receives the plugin's whole stderr, on success and on failure (before the error is thrown). */
  onStderr?: (text: string) => void;
}

type Verb = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';
type Stderr = { write(s: string): unknown };

/** The undo steps registered by the in-process delegate ADD running in this async context. */
let rollbackStore: AsyncLocalStorage<Array<() => unknown>> | undefined;
/** Created by the first in-process delegate ADD (a call that delegates nothing never loads node:async_hooks). */
const rollbackSteps = {
  getStore: () => rollbackStore?.getStore(),
  run: <T>(steps: Array<() => unknown>, fn: () => T): T => {
    rollbackStore ??= new AsyncLocalStorage<Array<() => unknown>>();
    return rollbackStore.run(steps, fn);
  },
};
/** Steps of successful in-process delegate ADDs, by request and delegate type, until that delegate's DEL. */
const pendingRollback = new WeakMap<RequestBase, Map<string, Array<() => unknown>>>();
/** The delegate types whose ADD was started (exec'd or dispatched in-process) on behalf of a request. */
const startedAdds = new WeakMap<RequestBase, Set<string>>();

export interface ValidateDelegateOptions extends DelegateOptions {
  /** The delegate is named as IPAM (`ipam.type`): an in-process plugin declaring `ipam: false` is refused. */
  ipam?: boolean;
}

/** Runs plugins for a caller: CNI_PATH lookup, exec or in-process, delegation on behalf of a request. */
export class Invoker {
  readonly #plugins = new Map<string, AnyPlugin>();
  /** Names registered with `anyPath`. */
  readonly #anyPath = new Set<string>();
  /** Read at each use (the default Invoker's are the test seams `invokeHooks`). */
  readonly #options: InvokerOptions;

  constructor(options: InvokerOptions = {}) {
    this.#options = options;
    for (const p of options.plugins ?? []) this.register(p, { anyPath: options.anyPath === true });
  }

  /** Add (or replace) a plugin that may run in-process; `anyPath`: whatever file CNI_PATH resolves its name to. */
  register(plugin: AnyPlugin, opts: { anyPath?: boolean } = {}): void {
    this.#plugins.set(plugin.name, plugin);
    if (opts.anyPath) this.#anyPath.add(plugin.name);
    else this.#anyPath.delete(plugin.name);
  }

  /** The registered plugin of that name (here or in the fallback), if any. */
  get(name: string): AnyPlugin | undefined {
    return this.#plugins.get(name) ?? this.#options.fallback?.get(name);
  }

  /** The plugin that `path` would run in-process: registered under its file name and this executable (or `anyPath`). */
  inProcessPlugin(path: string): AnyPlugin | undefined {
    const name = basename(path);
    const self = this.#plugins.get(name);
    const isSelf = this.#options.isSelf ?? isRunningExecutable;
    if (self && (this.#anyPath.has(name) || isSelf(path))) return self;
    return this.#options.fallback?.inProcessPlugin(path);
  }

  /**
   * Execute the plugin at `path` with `stdin` and `env` (Go `RawExec.ExecPlugin`), in-process when it is
   * this executable and registered. Resolves to its stdout; rejects with the delegate's CniError.
   * Its stderr is copied to `stderr` on success only.
   */
  async execPlugin(
    path: string,
    stdin: Uint8Array | string,
    env: Readonly<Record<string, string | undefined>>,
    stderr: Stderr = process.stderr,
    options: ExecPluginOptions = {},
  ): Promise<Uint8Array> {
    const bytes = typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin;
    const cleanEnv: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (v !== undefined) cleanEnv[k] = v;
    const self = options.inProcess === false ? undefined : this.inProcessPlugin(path);
    let outcome: RawOutcome & { busy?: boolean };
    if (self) {
      outcome = await this.#runInProcess(self, bytes, cleanEnv);
    } else {
      for (let attempt = 0; ; attempt++) {
        outcome = await spawnPlugin(path, bytes, cleanEnv, options.signal);
        if (!outcome.busy || attempt >= 5) break;
        await new Promise((r) => setTimeout(r, this.#options.retryDelayMs ?? 1000));
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

  /** Dispatch `plugin` in this process, handing it this Invoker for its own delegations. */
  async #runInProcess(
    plugin: AnyPlugin,
    stdin: Uint8Array,
    env: Record<string, string>,
  ): Promise<RawOutcome> {
    const { code, stdout, stderr } = await runnerOf(this.#options).invoke(plugin, env, stdin, {
      invoker: this,
    });
    const enc = new TextEncoder();
    return {
      stdout: enc.encode(stdout),
      stderr: enc.encode(stderr),
      ...(code === 0 ? {} : { failure: `exit status ${code}` }),
    };
  }

  /**
   * Ask the plugin at `path` which spec versions it supports (Go `invoke.GetVersionInfo`): VERSION with
   * stdin `{"cniVersion":"1.1.0"}` and dummy NETNS/IFNAME/PATH for old skels. A plugin answering
   * `unknown CNI_COMMAND: VERSION` supports only 0.1.0; an answer without `supportedVersions` is accepted
   * only for cniVersion 0.2.0 (→ 0.1.0, 0.2.0).
   */
  async getVersionInfo(
    path: string,
    env: Readonly<Record<string, string | undefined>> = process.env,
    stderr: Stderr = process.stderr,
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
      out = await this.execPlugin(path, `{"cniVersion":"${CURRENT}"}`, probeEnv, stderr, options);
    } catch (e) {
      if (CniError.is(e) && e.msg === 'unknown CNI_COMMAND: VERSION') {
        return { cniVersion: CURRENT, supportedVersions: ['0.1.0'] };
      }
      throw e;
    }
    return decodeVersionInfo(out);
  }

  /**
   * Run delegate `type` for `verb` on behalf of `req`: CNI_PATH lookup, env = req.env with CNI_COMMAND
   * replaced, stdin = req.stdin unchanged. Resolves to the delegate's raw stdout.
   */
  async delegate(
    verb: Verb,
    type: string,
    req: RequestBase,
    opts: DelegateOptions = {},
  ): Promise<Uint8Array> {
    const baseEnv = opts.env ?? req.env;
    const chain = delegationChain(baseEnv, typeof req.config?.type === 'string' ? req.config.type : '', type);
    const path = findInPath(type, splitPathList(baseEnv.CNI_PATH));
    const stdin = opts.stdin ?? req.stdin;
    const env = { ...baseEnv, CNI_COMMAND: verb, [DELEGATION_ENV]: chain };
    if (verb === 'ADD') {
      const started = startedAdds.get(req) ?? new Set<string>();
      startedAdds.set(req, started);
      started.add(type);
    }
    const span = startSpan(
      `delegate ${type} ${verb}`,
      {
        'cni.delegate.type': type,
        'cni.command': verb,
        'cni.delegate.path': path,
        'cni.delegate.mode': this.inProcessPlugin(path) ? 'in-process' : 'exec',
      },
      SpanKind.Client,
    );
    if (!span) return this.execPlugin(path, stdin, env, req.stderr ?? process.stderr);
    // a traced call: the delegate, exec'd or in-process, continues the trace as a child of this span
    try {
      const out = await withSpan(span, () =>
        this.execPlugin(path, stdin, { ...env, TRACEPARENT: span.traceparent }, req.stderr ?? process.stderr),
      );
      span.setAttributes({ 'cni.result_code': 0 });
      span.end();
      return out;
    } catch (e) {
      span.setAttributes({ 'cni.result_code': CniError.is(e) ? e.code : ErrorCode.Internal });
      span.end(e);
      throw e;
    }
  }

  /**
   * Check, before the delegating plugin's first change, what `delegateAdd(type, req, opts)` would be refused for:
   * the delegation chain (a cycle such as `"ipam": {"type": "bridge"}` in a bridge config, or too deep: code 7), the
   * lookup in CNI_PATH, and — when the delegate runs in-process — with `ipam`, that it is not a plugin declaring
   * `ipam: false` (code 7), then everything its dispatch checks before its handler (its config decoder included:
   * host-local's range sets, static's addresses), with the same error object the ADD would answer. Nothing runs and
   * nothing changes. A delegate that is another executable cannot be checked before it runs: its errors come from
   * the ADD itself.
   */
  async validateDelegate(type: string, req: RequestBase, opts: ValidateDelegateOptions = {}): Promise<void> {
    const baseEnv = opts.env ?? req.env;
    const chain = delegationChain(baseEnv, typeof req.config?.type === 'string' ? req.config.type : '', type);
    const path = findInPath(type, splitPathList(baseEnv.CNI_PATH));
    const plugin = this.inProcessPlugin(path);
    if (!plugin) return;
    if (opts.ipam && plugin.ipam === false) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `"ipam": {"type": ${JSON.stringify(type)}}: plugin ${JSON.stringify(type)} is not an IPAM plugin`,
        'name an IPAM plugin (host-local, static, dhcp, …) in "ipam.type"',
      );
    }
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...baseEnv, CNI_COMMAND: 'ADD', [DELEGATION_ENV]: chain })) {
      if (v !== undefined) env[k] = v;
    }
    const stdin = stdinBytes(opts.stdin ?? req.stdin);
    const { code, stdout, stderr } = await runnerOf(this.#options).validate(plugin, env, stdin, {
      invoker: this,
    });
    if (code !== 0) {
      const enc = new TextEncoder();
      throw pluginErr(`exit status ${code}`, enc.encode(stdout), enc.encode(stderr));
    }
  }

  /**
   * The rollback of `delegateAdd(type, req, opts)`: its DEL (see `delegateDel`) when that ADD was started — the
   * delegate ran, whatever its outcome: it may have allocated before failing — and nothing when it never ran (the
   * delegation was refused before: a cycle, a plugin not found), so a plugin that was never asked to ADD is never
   * asked to DEL either.
   */
  async undoDelegateAdd(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
    if (!startedAdds.get(req)?.has(type)) return;
    await this.delegateDel(type, req, opts);
  }

  /** Delegate ADD; resolves to the delegate's result in the current (1.1.0) shape. */
  async delegateAdd(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<Result> {
    const out = await this.#delegateAddRaw(type, req, opts);
    return parseDelegateResult(out, stdinBytes(opts.stdin ?? req.stdin));
  }

  /**
   * Delegate DEL. After an in-process `delegateAdd` of the same request and type (a rollback), the steps that ADD
   * registered with `onDelegateRollback` run once the DEL succeeded.
   */
  async delegateDel(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
    try {
      await this.delegate('DEL', type, req, opts);
    } catch (err) {
      pendingRollback.get(req)?.delete(type);
      throw err;
    }
    await runPendingRollback(type, req);
  }

  async delegateCheck(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
    await this.delegate('CHECK', type, req, opts);
  }

  async delegateStatus(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
    await this.delegate('STATUS', type, req, opts);
  }

  async delegateGc(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
    await this.delegate('GC', type, req, opts);
  }

  /** VERSION of delegate `type` found in the request's CNI_PATH. */
  async delegateVersion(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<VersionInfo> {
    const env = opts.env ?? req.env;
    const path = findInPath(type, splitPathList(env.CNI_PATH));
    return this.getVersionInfo(path, env, req.stderr ?? process.stderr);
  }

  /**
   * ADD the delegate and run `fn` with its (1.1.0) result; if `fn` throws — or the delegate exited 0 but
   * its answer cannot be parsed — DEL the delegate (best effort, a DEL failure is logged) and rethrow the
   * original error. A delegate ADD that itself fails is not followed by DEL (like the reference plugins).
   */
  async withDelegateCleanup<T>(
    type: string,
    req: RequestBase,
    fn: (result: Result) => T | Promise<T>,
    opts: DelegateOptions = {},
  ): Promise<T> {
    // A delegate whose ADD failed is not cleaned up (the reference plugins do not either); one that
    // exited 0 may hold resources, so anything failing from here on (even parsing its answer) runs DEL.
    const out = await this.#delegateAddRaw(type, req, opts);
    try {
      const r = parseDelegateResult(out, stdinBytes(opts.stdin ?? req.stdin));
      return await fn(r);
    } catch (e) {
      try {
        await this.delegateDel(type, req, opts);
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

  /** `delegate('ADD')` collecting the delegate's rollback steps for a later `delegateDel` of the same request. */
  async #delegateAddRaw(type: string, req: RequestBase, opts: DelegateOptions): Promise<Uint8Array> {
    const steps: Array<() => unknown> = [];
    const out = await rollbackSteps.run(steps, () => this.delegate('ADD', type, req, opts));
    if (steps.length > 0) {
      const byType = pendingRollback.get(req) ?? new Map<string, Array<() => unknown>>();
      pendingRollback.set(req, byType);
      byType.set(type, steps);
    }
    return out;
  }
}

function stdinBytes(stdin: Uint8Array | string): Uint8Array {
  return typeof stdin === 'string' ? new TextEncoder().encode(stdin) : stdin;
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

// ---------------------------------------------------------------------------------------------------------------
// The default Invoker and the functions of the API before Invokers (thin wrappers over it, or over `req.invoker`)

/** Test seams of `defaultInvoker` (module-internal: not exported from the package index); read at each use. */
export const invokeHooks: { isSelf: (path: string) => boolean; retryDelayMs: number } = {
  isSelf: isRunningExecutable,
  retryDelayMs: 1000,
};

/** The Invoker of code that passes none: what `registerInProcess` fills and the wrappers below use. */
export const defaultInvoker: Invoker = new Invoker(invokeHooks);

/**
 * A stand-in for an Invoker that is made only when a delegation needs it (the multicall executable hands one to every
 * plugin call, and most plugins never delegate): `invokerOf` calls `[LAZY_INVOKER](Invoker)` once for the real one.
 */
export const LAZY_INVOKER: unique symbol = Symbol.for('cnikit.lazy-invoker.v1');

/** The Invoker a request was dispatched with (`PluginIO.invoker`, made now if it is a LAZY_INVOKER), else the default one. */
export function invokerOf(req: RequestBase): Invoker {
  const h = req.invoker;
  if (!h) return defaultInvoker;
  if (h instanceof Invoker) return h;
  const make = (h as { [LAZY_INVOKER]?: (ctor: typeof Invoker) => Invoker })[LAZY_INVOKER];
  return typeof make === 'function' ? make(Invoker) : h;
}

/** `defaultInvoker.register`. */
export function registerInProcess(plugin: AnyPlugin, opts: { anyPath?: boolean } = {}): void {
  defaultInvoker.register(plugin, opts);
}

/** `defaultInvoker.get`. */
export function getInProcess(name: string): AnyPlugin | undefined {
  return defaultInvoker.get(name);
}

/** `defaultInvoker.inProcessPlugin`. */
export function inProcessPlugin(path: string): AnyPlugin | undefined {
  return defaultInvoker.inProcessPlugin(path);
}

/** `defaultInvoker.execPlugin`. */
export function execPlugin(
  path: string,
  stdin: Uint8Array | string,
  env: Readonly<Record<string, string | undefined>>,
  stderr: Stderr = process.stderr,
  options: ExecPluginOptions = {},
): Promise<Uint8Array> {
  return defaultInvoker.execPlugin(path, stdin, env, stderr, options);
}

/** `defaultInvoker.getVersionInfo`. */
export function getVersionInfo(
  path: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  stderr: Stderr = process.stderr,
  options: ExecPluginOptions = {},
): Promise<VersionInfo> {
  return defaultInvoker.getVersionInfo(path, env, stderr, options);
}

/** `Invoker.delegate` with the request's Invoker. */
export function delegate(
  verb: Verb,
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<Uint8Array> {
  return invokerOf(req).delegate(verb, type, req, opts);
}

/** Delegate ADD with the request's Invoker; resolves to the delegate's result in the current (1.1.0) shape. */
export function delegateAdd(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<Result> {
  return invokerOf(req).delegateAdd(type, req, opts);
}

/** Delegate DEL with the request's Invoker (runs the rollback steps of an in-process `delegateAdd`, see there). */
export function delegateDel(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  return invokerOf(req).delegateDel(type, req, opts);
}

export function delegateCheck(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  return invokerOf(req).delegateCheck(type, req, opts);
}

export function delegateStatus(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  return invokerOf(req).delegateStatus(type, req, opts);
}

export function delegateGc(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  return invokerOf(req).delegateGc(type, req, opts);
}

/** VERSION of delegate `type` found in the request's CNI_PATH, with the request's Invoker. */
export function delegateVersion(
  type: string,
  req: RequestBase,
  opts: DelegateOptions = {},
): Promise<VersionInfo> {
  return invokerOf(req).delegateVersion(type, req, opts);
}

/** `Invoker.validateDelegate` with the request's Invoker: before the first change of an ADD that delegates. */
export function validateDelegate(
  type: string,
  req: RequestBase,
  opts: ValidateDelegateOptions = {},
): Promise<void> {
  return invokerOf(req).validateDelegate(type, req, opts);
}

/** `Invoker.undoDelegateAdd` with the request's Invoker: the rollback step of a `delegateAdd`. */
export function undoDelegateAdd(type: string, req: RequestBase, opts: DelegateOptions = {}): Promise<void> {
  return invokerOf(req).undoDelegateAdd(type, req, opts);
}

/** `Invoker.withDelegateCleanup` with the request's Invoker. */
export function withDelegateCleanup<T>(
  type: string,
  req: RequestBase,
  fn: (result: Result) => T | Promise<T>,
  opts: DelegateOptions = {},
): Promise<T> {
  return invokerOf(req).withDelegateCleanup(type, req, fn, opts);
}

// ---------------------------------------------------------------------------------------------------------------
// What a runtime needs besides running plugins (results, versions, names, errors): libcni imports only this module.

export { CniError, type CniErrorJSON, ErrorCode } from './errors.ts';
export { convertResult, formatResult, parseResult, toCurrent } from './result.ts';
export {
  type AnyPlugin,
  type AnyResult,
  type Attachment,
  CURRENT_VERSION,
  type Result,
} from './types.ts';
export { validateContainerID, validateInterfaceName, validateNetworkName } from './validate.ts';
export { compareVersions, versionGte } from './version.ts';
