/**
 * Running one plugin for libcni: lookup with skel's `findInPath` (Go `invoke.FindInPath`), execution with skel's
 * `execPlugin` (Go `RawExec.ExecPlugin`: env + stdin, "text file busy" retried 1 s apart up to 6 attempts, error
 * objects parsed like Go), in the calling process when the plugin is a registered cnikit plugin (the file found is
 * this executable, or the caller handed libcni the plugin object), and a timeout / AbortSignal per call.
 *
 * The environment is the caller's (`env`, default process.env) with the CNI_* variables set (all six, empty when
 * unused, like Go's `Args.AsEnv`) and, when a trace context is given, TRACEPARENT / TRACESTATE / BAGGAGE (what Go's
 * invoke injects from the context's span, per OTEP 258).
 */
import {
  CniError,
  type ExecPluginOptions,
  findInPath,
  type Invoker,
  type VersionInfo,
} from '@cnikit/skel/invoke';
import { AbortedError, LibcniError, PluginError, type Verb } from './errors.ts';

/** W3C trace context handed to plugins in their environment. */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>` */
  traceparent: string;
  tracestate?: string;
  baggage?: string;
}

/** Per-call options of every operation. */
export interface CallOptions {
  /** Abort the operation: a running plugin process is killed (SIGKILL), the call rejects with AbortedError. */
  signal?: AbortSignal;
  /** Milliseconds for the whole operation (all plugins of the list); the same as a signal that fires then. */
  timeoutMs?: number;
  /** Trace context for the plugins (TRACEPARENT / TRACESTATE / BAGGAGE). */
  trace?: TraceContext;
}

export interface Writable {
  write(s: string): unknown;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The environment additions for a trace context (validated: a malformed traceparent is the caller's error). */
export function traceEnv(trace: TraceContext | undefined): Record<string, string> {
  if (!trace) return {};
  if (
    !TRACEPARENT.test(trace.traceparent) ||
    /^[0-9a-f]{2}-0{32}-/.test(trace.traceparent) ||
    /-0{16}-/.test(trace.traceparent)
  ) {
    throw new LibcniError(
      `invalid trace context: traceparent ${JSON.stringify(trace.traceparent)} is not "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" with non-zero ids`,
    );
  }
  const env: Record<string, string> = { TRACEPARENT: trace.traceparent };
  if (trace.tracestate) env.TRACESTATE = trace.tracestate;
  if (trace.baggage) env.BAGGAGE = trace.baggage;
  return env;
}

/** One signal for the caller's signal and timeout (undefined when neither is given). */
export function callSignal(opts: CallOptions): { signal?: AbortSignal; dispose(): void } {
  if (opts.timeoutMs === undefined) return { signal: opts.signal, dispose: () => undefined };
  const ctl = new AbortController();
  const timer = setTimeout(
    () => ctl.abort(new AbortedError(`timed out after ${opts.timeoutMs} ms`)),
    opts.timeoutMs,
  );
  const onAbort = () => ctl.abort(opts.signal?.reason);
  if (opts.signal?.aborted) ctl.abort(opts.signal.reason);
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: ctl.signal,
    dispose() {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    },
  };
}

function reasonText(signal: AbortSignal): string {
  const r = signal.reason as unknown;
  if (r instanceof Error) return r.message;
  return r === undefined ? 'aborted' : String(r);
}

export interface RunOptions {
  /** CNI_PATH directories. */
  path: readonly string[];
  /** The environment plugins start from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Where a successful plugin's stderr is copied (Go: os.Stderr). */
  stderr: Writable;
  /** false: always exec, never in-process. */
  inProcess: boolean;
  /** Runs the plugins (its in-process plugins, exec otherwise). */
  invoker: Invoker;
  signal?: AbortSignal;
  /** Prefix of error messages (the reference's `plugin type="x" failed (add): `). */
  prefix: string;
}

/** How a plugin will run: `exec` (a process) or `in-process` (skel's dispatcher in this process). */
export function runMode(path: string, inProcess: boolean, invoker: Invoker): 'exec' | 'in-process' {
  return inProcess && invoker.inProcessPlugin(path) ? 'in-process' : 'exec';
}

/** Run one plugin with `cniEnv` and `stdin`; resolves to its stdout. Errors: PluginError, AbortedError, LibcniError. */
export async function runPlugin(
  type: string,
  command: Verb,
  stdin: Uint8Array | string,
  cniEnv: Record<string, string>,
  o: RunOptions,
): Promise<Uint8Array> {
  const path = find(type, o.path, o.prefix);
  if (o.signal?.aborted)
    throw new AbortedError(`${o.prefix}${reasonText(o.signal)}`, { cause: o.signal.reason });
  let stderr = '';
  const opts: ExecPluginOptions = {
    inProcess: o.inProcess,
    onStderr: (t) => {
      stderr = t;
    },
    ...(o.signal ? { signal: o.signal } : {}),
  };
  const run = o.invoker.execPlugin(path, stdin, { ...o.env, ...cniEnv }, o.stderr, opts);
  try {
    return await raceAbort(run, o.signal);
  } catch (e) {
    if (o.signal?.aborted) {
      throw new AbortedError(
        `${o.prefix}${reasonText(o.signal)} (plugin ${JSON.stringify(type)} ${command})`,
        {
          cause: o.signal.reason,
        },
      );
    }
    throw pluginError(e, type, command, path, stderr, o.prefix);
  }
}

/** In-process runs cannot be interrupted: the call rejects at once, the plugin's work finishes in the background. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function find(type: string, path: readonly string[], prefix: string): string {
  try {
    return findInPath(type, path);
  } catch (e) {
    throw new LibcniError(`${prefix}${(e as Error).message}`, { cause: e });
  }
}

export function pluginError(
  e: unknown,
  type: string,
  command: Verb,
  path: string | undefined,
  stderr: string,
  prefix: string,
): Error {
  if (CniError.is(e)) {
    return new PluginError(
      { plugin: type, command, cni: e.toJSON(), stderr, ...(path ? { path } : {}), prefix },
      { cause: e },
    );
  }
  if (LibcniError.is(e)) return e;
  return new LibcniError(`${prefix}${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

/** VERSION of the plugin `type` (Go GetVersionInfo), through skel's probe. */
export async function versionInfo(type: string, o: RunOptions): Promise<VersionInfo> {
  const path = find(type, o.path, o.prefix);
  let stderr = '';
  try {
    return await raceAbort(
      o.invoker.getVersionInfo(path, o.env, o.stderr, {
        inProcess: o.inProcess,
        onStderr: (t) => {
          stderr = t;
        },
        ...(o.signal ? { signal: o.signal } : {}),
      }),
      o.signal,
    );
  } catch (e) {
    if (o.signal?.aborted)
      throw new AbortedError(`${o.prefix}${reasonText(o.signal)}`, { cause: o.signal.reason });
    throw pluginError(e, type, 'VERSION', path, stderr, o.prefix);
  }
}
