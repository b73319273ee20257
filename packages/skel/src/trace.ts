/**
 * Tracing of plugin calls (docs/observability.md lists every span and attribute).
 *
 * A call is traced when its environment carries a W3C trace context (TRACEPARENT, set by the runtime or by libcni)
 * AND an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, or the config
 * key `otlpEndpoint`). The recording is this small module (spans kept in memory per call, the current span in an
 * AsyncLocalStorage); the encoding and the HTTP export live in ./otlp.ts, imported only when there is something to
 * export. When nothing is traced, every hook below is one property check (the AsyncLocalStorage is created by the
 * first traced call).
 *
 * Packages that do not depend on skel (netlink's withNetns, firewall's tool execs) reach the recorder through a
 * global hook (`Symbol.for('cnikit.trace.v1')`), so kernel sections and tool execs become child spans of the plugin
 * call that runs them.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export type AttrValue = string | number | boolean;
export type Attributes = Record<string, AttrValue>;

/** OTLP span kinds. */
export const SpanKind = { Internal: 1, Server: 2, Client: 3 } as const;

/** One finished (or running) span as recorded; ./otlp.ts encodes it. */
export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs?: bigint;
  attributes: Attributes;
  /** 0 unset, 1 ok, 2 error (OTLP StatusCode). */
  status: { code: 0 | 1 | 2; message?: string };
}

/** The spans of one traced call (and everything it ran in this process), exported together. */
export interface Recording {
  /** Full URL of the OTLP/HTTP traces endpoint (`…/v1/traces`). */
  endpoint: string;
  spans: SpanRecord[];
}

export class Span {
  constructor(
    readonly record: SpanRecord,
    readonly recording: Recording,
  ) {}

  /** The W3C traceparent naming this span as the parent (what a child process receives in TRACEPARENT). */
  get traceparent(): string {
    return `00-${this.record.traceId}-${this.record.spanId}-01`;
  }

  setAttributes(attrs: Attributes): void {
    Object.assign(this.record.attributes, attrs);
  }

  /** Ends the span (once); an error marks it failed. */
  end(error?: unknown): void {
    if (this.record.endNs !== undefined) return;
    this.record.endNs = nowNs();
    if (error !== undefined) {
      const message = error instanceof Error ? error.message : String(error);
      this.record.status = { code: 2, message };
    }
  }
}

interface Store {
  span: Span;
}

/**
 * Created on the first traced call: until a span is entered nothing can be current, and a plugin call that traces
 * nothing (most) never loads node:async_hooks (a start-up cost under Bun).
 */
let storageInstance: AsyncLocalStorage<Store> | undefined;
const storage = {
  getStore: (): Store | undefined => storageInstance?.getStore(),
  run: <T>(store: Store, fn: () => T): T => {
    storageInstance ??= new AsyncLocalStorage<Store>();
    return storageInstance.run(store, fn);
  },
};

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The ids of a valid W3C traceparent (version not ff, ids not all zeros), else undefined. */
export function parseTraceparent(v: string | undefined): { traceId: string; spanId: string } | undefined {
  const m = v ? TRACEPARENT.exec(v.trim()) : null;
  if (!m || m[1] === 'ff' || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, spanId: m[3]! };
}

function hex(bytes: number): string {
  const b = new Uint8Array(bytes);
  for (;;) {
    globalThis.crypto.getRandomValues(b);
    if (b.some((x) => x !== 0)) break;
  }
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

export function newTraceId(): string {
  return hex(16);
}

export function newSpanId(): string {
  return hex(8);
}

/** Wall-clock time in Unix nanoseconds (monotonic within the process). */
export function nowNs(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
}

function truthy(v: string | undefined): boolean {
  return v !== undefined && /^(1|true|yes)$/i.test(v.trim());
}

function tracesUrl(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

function configString(config: unknown, key: string): string | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const lower = key.toLowerCase();
  for (const [k, v] of Object.entries(config as Record<string, unknown>)) {
    if (k.toLowerCase() === lower && typeof v === 'string' && v.trim() !== '') return v.trim();
  }
  return undefined;
}

/**
 * The OTLP/HTTP traces URL configured for a call, or undefined (tracing off): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT (+ `/v1/traces`), else the config key `otlpEndpoint` (+
 * `/v1/traces`), else `fallback` (the warm service's own environment). OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none turn it off; only http: and https: URLs count.
 */
export function traceEndpoint(
  env: Readonly<Record<string, string | undefined>>,
  config?: unknown,
  fallback?: string,
): string | undefined {
  if (truthy(env.OTEL_SDK_DISABLED) || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none')
    return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const key = configString(config, 'otlpEndpoint');
  const url = traces ? traces : base ? tracesUrl(base) : key ? tracesUrl(key) : fallback;
  return url && /^https?:\/\/[^/]/i.test(url) ? url : undefined;
}

/** The span of the code running now (in this async context), if a call is being traced. */
export function currentSpan(): Span | undefined {
  return storage.getStore()?.span;
}

/** Starts a span child of the current one; undefined when nothing is traced here. */
export function startSpan(
  name: string,
  attributes: Attributes = {},
  kind: number = SpanKind.Internal,
): Span | undefined {
  const parent = storage.getStore()?.span;
  if (!parent) return undefined;
  const record: SpanRecord = {
    traceId: parent.record.traceId,
    spanId: newSpanId(),
    parentSpanId: parent.record.spanId,
    name,
    kind,
    startNs: nowNs(),
    attributes: { ...attributes },
    status: { code: 0 },
  };
  parent.recording.spans.push(record);
  return new Span(record, parent.recording);
}

/**
 * Starts the first span of a recording: a child of `traceparent` (the caller's context) or, without one, the root
 * of a new trace. `startNs` backdates it (a dispatcher that decided to trace after reading its config).
 */
export function startRecording(
  endpoint: string,
  name: string,
  attributes: Attributes,
  kind: number,
  traceparent?: string,
  startNs?: bigint,
): Span {
  const parent = parseTraceparent(traceparent);
  const record: SpanRecord = {
    traceId: parent?.traceId ?? newTraceId(),
    spanId: newSpanId(),
    ...(parent ? { parentSpanId: parent.spanId } : {}),
    name,
    kind,
    startNs: startNs ?? nowNs(),
    attributes: { ...attributes },
    status: { code: 0 },
  };
  const recording: Recording = { endpoint, spans: [record] };
  return new Span(record, recording);
}

/** Runs `fn` with `span` as the current span (its children attach to it). */
export function withSpan<T>(span: Span, fn: () => T): T {
  return storage.run({ span }, fn);
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

/**
 * Runs `fn` inside a child span of the current one (sync or async: a returned promise ends the span when it
 * settles); without a traced call it is just `fn()`.
 */
export function traced<T>(name: string, attributes: Attributes, fn: (span?: Span) => T): T {
  const span = startSpan(name, attributes);
  if (!span) return fn();
  let out: T;
  try {
    out = storage.run({ span }, () => fn(span));
  } catch (e) {
    span.end(e);
    throw e;
  }
  if (isThenable(out)) {
    return (out as unknown as Promise<unknown>).then(
      (v) => {
        span.end();
        return v;
      },
      (e: unknown) => {
        span.end(e);
        throw e;
      },
    ) as T;
  }
  span.end();
  return out;
}

/** What the global hook offers to packages that cannot import skel. */
export interface TraceHook {
  traced<T>(name: string, attributes: Attributes, fn: (span?: Span) => T): T;
}

const HOOK = Symbol.for('cnikit.trace.v1');
const g = globalThis as { [HOOK]?: TraceHook };
g[HOOK] ??= { traced };

/** Exports a finished recording; the default (cold mode) posts it with a bounded wait, see ./otlp.ts. */
export type TraceExporter = (recording: Recording) => void | Promise<void>;

/** How long a cold call waits at most for its export (ms): CNIKIT_OTLP_TIMEOUT_MS, default 10, 1..5000. */
export function exportBoundMs(env: Readonly<Record<string, string | undefined>>): number {
  const n = Number(env.CNIKIT_OTLP_TIMEOUT_MS);
  return Number.isInteger(n) && n >= 1 && n <= 5000 ? n : DEFAULT_EXPORT_BOUND_MS;
}

export const DEFAULT_EXPORT_BOUND_MS = 10;

let abandoned = 0;

/**
 * Connection attempts of exports that reached their bound before the collector answered the handshake (a collector
 * behind a firewall that drops SYNs) and are still under way: Bun's TCP client cannot cancel one, and it keeps the
 * process alive until the kernel gives up (~2 min). A process entry that has delivered its answer ends itself when
 * this is not 0 (skel's runPlugin, cnitool in the multicall executable).
 */
export function abandonedExportConnects(): number {
  return abandoned;
}

/** ./otlp.ts: one more (+1) or one fewer (-1) abandoned connection attempt. */
export function noteAbandonedConnect(delta: 1 | -1): void {
  abandoned += delta;
}
