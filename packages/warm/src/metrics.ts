/**
 * The warm service's metrics, served in the Prometheus text exposition format (0.0.4) on
 * `cnikit serve --metrics ADDR` (docs/observability.md lists every metric):
 *
 *   cnikit_serve_requests_total{plugin,command,result_code}       counter
 *   cnikit_serve_request_duration_seconds{plugin,command}         histogram
 *   cnikit_serve_requests_in_flight                               gauge
 *   cnikit_serve_reexecs_total{reason}                            counter (watchdog, deadline, upgrade)
 *   cnikit_client_fallbacks_total{reason}                         counter (what the clients recorded, ./fallbacks.ts)
 *   cnikit_serve_trace_spans_exported_total / _dropped_total      counters (the batched OTLP export, ./traces.ts)
 *   cnikit_serve_start_time_seconds, cnikit_build_info{version,commit,dirty}   gauges
 *   cnikit_node_agent_*                                           the node agent's (./node-agent/agent.ts)
 *
 * The counters survive the service's own re-executions (deadline, watchdog, upgrade): their state travels in the
 * new image's environment (STATE_ENV), so a scrape never sees them drop while the pid stays the same.
 */
import { once } from 'node:events';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';

/** Histogram buckets of the request latency, in seconds (a warm call takes ~1 ms; a slow one up to the deadline). */
export const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120,
];

/** The environment variable carrying the counters across a re-exec. */
export const STATE_ENV = 'CNIKIT_SERVE_METRICS_STATE';
/** The environment variable naming why the previous image re-executed (counted once by the new image). */
export const REEXEC_ENV = 'CNIKIT_SERVE_REEXEC';

export const REEXEC_REASONS = ['watchdog', 'deadline', 'upgrade'] as const;
export type ReexecReason = (typeof REEXEC_REASONS)[number];

interface Histogram {
  buckets: number[];
  sum: number;
  count: number;
}

interface State {
  requests: Record<string, number>;
  durations: Record<string, Histogram>;
  reexecs: Record<string, number>;
  fallbacks: Record<string, number>;
  fallbackOffset: number;
  spansExported: number;
  spansDropped: number;
  startTime: number;
}

const KEY_SEP = '\u0000';

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
export function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labels(names: readonly string[], values: readonly string[]): string {
  return names.map((n, i) => `${n}="${escapeLabel(values[i] ?? '')}"`).join(',');
}

function num(v: number): string {
  if (v === Number.POSITIVE_INFINITY) return '+Inf';
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(12)));
}

export class Metrics {
  readonly #s: State;
  inFlight = 0;
  readonly version: string;
  /** The build's commit and whether its work tree had changes (the executable's version stamp). */
  readonly build: { commit: string; dirty: boolean };

  constructor(
    version: string,
    env: Record<string, string | undefined> = process.env,
    build: { commit?: string; dirty?: boolean } = {},
  ) {
    this.version = version;
    this.build = { commit: build.commit ?? 'unknown', dirty: build.dirty ?? false };
    this.#s = {
      requests: {},
      durations: {},
      reexecs: {},
      fallbacks: {},
      fallbackOffset: 0,
      spansExported: 0,
      spansDropped: 0,
      startTime: Date.now() / 1000,
    };
    const saved = env[STATE_ENV];
    if (saved) {
      try {
        const s = JSON.parse(Buffer.from(saved, 'base64').toString('utf8')) as Partial<State>;
        Object.assign(this.#s, {
          requests: s.requests ?? {},
          durations: s.durations ?? {},
          reexecs: s.reexecs ?? {},
          fallbacks: s.fallbacks ?? {},
          fallbackOffset: s.fallbackOffset ?? 0,
          spansExported: s.spansExported ?? 0,
          spansDropped: s.spansDropped ?? 0,
          startTime: s.startTime ?? this.#s.startTime,
        });
      } catch {
        // a damaged state starts the counters over (a counter reset Prometheus handles)
      }
    }
    const reason = env[REEXEC_ENV];
    if (reason && (REEXEC_REASONS as readonly string[]).includes(reason))
      this.countReexec(reason as ReexecReason);
    delete env[STATE_ENV];
    delete env[REEXEC_ENV];
  }

  /** One answered request: its plugin, command, CNI result code (0 on success) and duration. */
  observe(plugin: string, command: string, resultCode: number, seconds: number): void {
    const k = [plugin, command, String(resultCode)].join(KEY_SEP);
    this.#s.requests[k] = (this.#s.requests[k] ?? 0) + 1;
    const hk = [plugin, command].join(KEY_SEP);
    const h = this.#s.durations[hk] ?? { buckets: DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
    this.#s.durations[hk] = h;
    for (let i = 0; i < DURATION_BUCKETS.length; i++) if (seconds <= DURATION_BUCKETS[i]!) h.buckets[i]!++;
    h.sum += seconds;
    h.count++;
  }

  countReexec(reason: ReexecReason): void {
    this.#s.reexecs[reason] = (this.#s.reexecs[reason] ?? 0) + 1;
  }

  countFallbacks(counts: Record<string, number>, offset: number): void {
    for (const [r, n] of Object.entries(counts)) this.#s.fallbacks[r] = (this.#s.fallbacks[r] ?? 0) + n;
    this.#s.fallbackOffset = offset;
  }

  get fallbackOffset(): number {
    return this.#s.fallbackOffset;
  }

  countSpans(exported: number, dropped: number): void {
    this.#s.spansExported += exported;
    this.#s.spansDropped += dropped;
  }

  /** The environment entries that carry the counters into a re-executed image (`reason` counted there). */
  reexecEnv(reason: ReexecReason): string[] {
    const state = Buffer.from(JSON.stringify(this.#s), 'utf8').toString('base64');
    return [`${STATE_ENV}=${state}`, `${REEXEC_ENV}=${reason}`];
  }

  /** The exposition (text format 0.0.4). */
  render(): string {
    const s = this.#s;
    const out: string[] = [];
    const head = (name: string, type: string, help: string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    head(
      'cnikit_build_info',
      'gauge',
      'The cnikit build serving the requests: version stamp of the executable (always 1).',
    );
    out.push(
      `cnikit_build_info{version="${escapeLabel(this.version)}",commit="${escapeLabel(this.build.commit)}",dirty="${this.build.dirty}"} 1`,
    );
    head(
      'cnikit_serve_start_time_seconds',
      'gauge',
      'When the service started (Unix time), kept across re-executions.',
    );
    out.push(`cnikit_serve_start_time_seconds ${num(s.startTime)}`);
    head(
      'cnikit_serve_requests_total',
      'counter',
      'Plugin calls answered by the service, by plugin, command and CNI result code (0: success).',
    );
    for (const k of Object.keys(s.requests).sort()) {
      out.push(
        `cnikit_serve_requests_total{${labels(['plugin', 'command', 'result_code'], k.split(KEY_SEP))}} ${s.requests[k]}`,
      );
    }
    head(
      'cnikit_serve_request_duration_seconds',
      'histogram',
      'Time from the request read to the answer ready, by plugin and command.',
    );
    for (const k of Object.keys(s.durations).sort()) {
      const h = s.durations[k]!;
      const l = labels(['plugin', 'command'], k.split(KEY_SEP));
      DURATION_BUCKETS.forEach((b, i) => {
        out.push(`cnikit_serve_request_duration_seconds_bucket{${l},le="${num(b)}"} ${h.buckets[i]}`);
      });
      out.push(`cnikit_serve_request_duration_seconds_bucket{${l},le="+Inf"} ${h.count}`);
      out.push(`cnikit_serve_request_duration_seconds_sum{${l}} ${num(h.sum)}`);
      out.push(`cnikit_serve_request_duration_seconds_count{${l}} ${h.count}`);
    }
    head(
      'cnikit_serve_requests_in_flight',
      'gauge',
      'Requests being run now (the service runs one at a time).',
    );
    out.push(`cnikit_serve_requests_in_flight ${this.inFlight}`);
    head(
      'cnikit_serve_reexecs_total',
      'counter',
      'Re-executions of the service image, by reason (watchdog: stuck in synchronous code; deadline: a request overran its deadline; upgrade: the executable was replaced).',
    );
    for (const r of REEXEC_REASONS)
      out.push(`cnikit_serve_reexecs_total{reason="${r}"} ${s.reexecs[r] ?? 0}`);
    head(
      'cnikit_client_fallbacks_total',
      'counter',
      'Calls the warm clients ran with the cold executable instead, by the reason they recorded.',
    );
    for (const r of Object.keys(s.fallbacks).sort())
      out.push(`cnikit_client_fallbacks_total{reason="${escapeLabel(r)}"} ${s.fallbacks[r]}`);
    head(
      'cnikit_serve_trace_spans_exported_total',
      'counter',
      'Spans the service exported to the OTLP endpoint.',
    );
    out.push(`cnikit_serve_trace_spans_exported_total ${s.spansExported}`);
    head(
      'cnikit_serve_trace_spans_dropped_total',
      'counter',
      'Spans lost: the endpoint did not accept them in time, or the export queue was full.',
    );
    out.push(`cnikit_serve_trace_spans_dropped_total ${s.spansDropped}`);
    let text = `${out.join('\n')}\n`;
    for (const src of SOURCES) {
      try {
        text += src();
      } catch {
        // a resident part's metrics are not worth failing the scrape for
      }
    }
    return text;
  }
}

const SOURCES = new Set<() => string>();

/**
 * Adds the metrics of a resident part of the service (the node agent: cnikit_node_agent_*) to every exposition;
 * the returned function removes them again.
 */
export function registerMetricsSource(render: () => string): () => void {
  const fn = () => render();
  SOURCES.add(fn);
  return () => {
    SOURCES.delete(fn);
  };
}

/**
 * Where the metrics are served: `HOST:PORT` / `[V6]:PORT` / `:PORT` (all addresses) over HTTP, an absolute path for
 * a Unix socket (0600), `off` for none. Throws on anything else.
 */
export type MetricsAddress = { kind: 'tcp'; host: string; port: number } | { kind: 'unix'; path: string };

export function parseMetricsAddress(v: string): MetricsAddress | undefined {
  if (v === 'off') return undefined;
  if (v.startsWith('/')) return { kind: 'unix', path: v };
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(v);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port < 1 || port > 65535) {
    throw new Error(
      `--metrics must be HOST:PORT, :PORT, an absolute socket path or off, got ${JSON.stringify(v)}`,
    );
  }
  return { kind: 'tcp', host: m[1] ?? (m[2] || '::'), port };
}

/** Serves `GET /metrics` (and `/`) with `render()`; resolves once listening. */
export async function serveMetrics(addr: MetricsAddress, render: () => string): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path !== '/metrics' && path !== '/') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the metrics are at /metrics\n');
      return;
    }
    const body = render();
    res.writeHead(200, {
      'content-type': 'text/plain; version=0.0.4; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  if (addr.kind === 'unix') {
    try {
      if (lstatSync(addr.path).isSocket()) unlinkSync(addr.path);
    } catch {
      // not there
    }
    server.listen(addr.path);
  } else {
    server.listen(addr.port, addr.host);
  }
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([e]) => {
      throw e;
    }),
  ]);
  if (addr.kind === 'unix') chmodSync(addr.path, 0o600);
  return server;
}
