/**
 * The OTLP/HTTP JSON exporter: encodes recorded spans as an `ExportTraceServiceRequest` in the protocol's
 * JSON mapping (hex trace/span ids, integer enums, 64-bit times as decimal strings — what the OpenTelemetry
 * Collector's otlphttp receiver accepts on /v1/traces) and POSTs it. Imported lazily by the dispatcher and the warm
 * service only when there is something to export: a call that is not traced never loads this file.
 *
 * An export never throws and never outlives its bound: the request is abandoned (socket destroyed) when no answer
 * came within `timeoutMs`; the spans are then lost, the call is unaffected.
 */

import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { CNIKIT_VERSION } from './release.ts';
import {
  type AttrValue,
  exportBoundMs,
  noteAbandonedConnect,
  type Recording,
  type SpanRecord,
} from './trace.ts';

type OtlpValue =
  | { stringValue: string }
  | { intValue: string }
  | { doubleValue: number }
  | { boolValue: boolean };

function value(v: AttrValue): OtlpValue {
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { stringValue: v };
}

function attributes(attrs: Record<string, AttrValue>): Array<{ key: string; value: OtlpValue }> {
  return Object.entries(attrs).map(([key, v]) => ({ key, value: value(v) }));
}

/**
 * The host's name (uname's nodename): read from /proc, which costs nothing, where node:os would be loaded for it
 * (~1.5 ms in a compiled executable, measured); os.hostname() where /proc is not mounted.
 */
function hostName(): string {
  try {
    const name = readFileSync('/proc/sys/kernel/hostname', 'utf8').trim();
    if (name) return name;
  } catch {
    // no /proc
  }
  return hostname();
}

/** The OTLP JSON body for `spans` (one resource: this cnikit process). Unfinished spans end now. */
export function encodeSpans(spans: readonly SpanRecord[], resource: Record<string, AttrValue> = {}): string {
  const end = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
  return JSON.stringify({
    resourceSpans: [
      {
        resource: {
          attributes: attributes({
            'service.name': 'cnikit',
            'service.version': CNIKIT_VERSION,
            'host.name': hostName(),
            'process.pid': process.pid,
            ...resource,
          }),
        },
        scopeSpans: [
          {
            scope: { name: 'cnikit', version: CNIKIT_VERSION },
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              name: s.name,
              kind: s.kind,
              startTimeUnixNano: String(s.startNs),
              endTimeUnixNano: String(s.endNs ?? end),
              attributes: attributes(s.attributes),
              status: s.status.message
                ? { code: s.status.code, message: s.status.message }
                : { code: s.status.code },
            })),
          },
        ],
      },
    ],
  });
}

export interface PostOutcome {
  ok: boolean;
  /** HTTP status when an answer came. */
  status?: number;
  /** Why it failed (connection error, timeout). */
  error?: string;
  /**
   * The whole request was handed to the kernel (it leaves even when nobody waits for the answer): a bound reached
   * after that loses only the answer, not the spans.
   */
  sent?: boolean;
}

/** The part of Bun's TCP client (`Bun.connect`) the exporter uses. */
interface BunSocket {
  write(data: Uint8Array): number;
  end(): void;
  terminate(): void;
  unref?(): void;
}
interface BunTcp {
  connect(options: {
    hostname: string;
    port: number;
    socket: {
      open(s: BunSocket): void;
      data(s: BunSocket, d: Uint8Array): void;
      drain(s: BunSocket): void;
      close(s: BunSocket): void;
      error(s: BunSocket, e: Error): void;
      connectError(s: BunSocket, e: Error): void;
    };
  }): Promise<BunSocket>;
}

/** How one POST ends: the status line of the answer, else undefined while it is incomplete. */
function statusOf(answer: string): PostOutcome | undefined {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(answer);
  if (m) return { ok: m[1]!.startsWith('2'), status: Number(m[1]), sent: true };
  return answer.includes('\r\n') ? { ok: false, error: 'not an HTTP answer', sent: true } : undefined;
}

/**
 * POST `body` (JSON) to `url` within `timeoutMs`. Resolves when the status line arrived, on error, or at the bound
 * (`sent` tells whether the request had left by then). Plain http goes over a raw TCP socket: Bun's own TCP client
 * under Bun (its node:net costs ~12 ms to load and to connect the first time in a compiled executable, measured),
 * node:net under Node; https loads node:https.
 */
export function postJson(
  url: string,
  body: string,
  timeoutMs: number,
  opts: {
    /**
     * Use node:net even under Bun: a long-running process (the warm service) wants every connection attempt
     * cancelled at its bound and has loaded node:net once anyway; only a short-lived process gains from Bun's client.
     */
    cancellable?: boolean;
  } = {},
): Promise<PostOutcome> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return Promise.resolve({ ok: false, error: `invalid URL ${JSON.stringify(url)}` });
  }
  if (u.protocol === 'https:') return postHttps(u, body, timeoutMs);
  if (u.protocol !== 'http:')
    return Promise.resolve({ ok: false, error: `unsupported scheme ${u.protocol}` });
  const payload = Buffer.from(body, 'utf8');
  const head =
    `POST ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${payload.length}\r\nConnection: close\r\nUser-Agent: cnikit/${CNIKIT_VERSION}\r\n\r\n`;
  // one write: the request leaves in one segment (no wait for the peer's ACK between head and body)
  const request = Buffer.concat([Buffer.from(head, 'latin1'), payload]);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(u.port || 80);
  const bun = (globalThis as { Bun?: Partial<BunTcp> }).Bun;
  return typeof bun?.connect === 'function' && !opts.cancellable
    ? postBun(bun as BunTcp, host, port, request, timeoutMs)
    : postNode(host, port, request, timeoutMs);
}

function postBun(
  bun: BunTcp,
  host: string,
  port: number,
  request: Uint8Array,
  timeoutMs: number,
): Promise<PostOutcome> {
  return new Promise((resolve) => {
    let done = false;
    let sock: BunSocket | undefined;
    let left = request;
    let answer = '';
    // the connection attempt has not ended yet (no open, no error): nothing can cancel it
    let connecting = true;
    const connected = () => {
      if (!connecting) return;
      connecting = false;
      if (done) noteAbandonedConnect(-1);
    };
    const finish = (o: PostOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (connecting) noteAbandonedConnect(1);
      try {
        // written bytes are the kernel's to deliver: a graceful close keeps them, an abort would reset them
        if (left.length === 0) sock?.end();
        else sock?.terminate();
      } catch {
        // closed already
      }
      resolve(o);
    };
    const timer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${timeoutMs} ms`, sent: left.length === 0 }),
      timeoutMs,
    );
    const send = (s: BunSocket) => {
      if (left.length === 0) return;
      const n = s.write(left);
      if (n > 0) left = left.subarray(n);
    };
    try {
      bun
        .connect({
          hostname: host,
          port,
          socket: {
            open(s) {
              sock = s;
              connected();
              if (done) {
                s.terminate();
                return;
              }
              s.unref?.();
              send(s);
            },
            drain: send,
            data(_s, d) {
              answer += Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('latin1');
              const o = statusOf(answer);
              if (o) finish(o);
            },
            close() {
              finish({ ok: false, error: 'connection closed without an answer', sent: left.length === 0 });
            },
            error(_s, e) {
              finish({ ok: false, error: e.message, sent: left.length === 0 });
            },
            connectError(_s, e) {
              connected();
              finish({ ok: false, error: e.message });
            },
          },
        })
        .catch((e: unknown) => {
          connected();
          finish({ ok: false, error: e instanceof Error ? e.message : String(e) });
        });
    } catch (e) {
      connecting = false;
      finish({ ok: false, error: e instanceof Error ? e.message : String(e) });
    }
  });
}

function postNode(host: string, port: number, request: Buffer, timeoutMs: number): Promise<PostOutcome> {
  return new Promise((resolve) => {
    let done = false;
    let sent = false;
    let sock: Socket | undefined;
    const finish = (o: PostOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // destroy closes the descriptor: what the kernel has taken still leaves (a close, not a reset)
      sock?.destroy();
      resolve(o);
    };
    const timer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${timeoutMs} ms`, sent }),
      timeoutMs,
    );
    let answer = '';
    try {
      sock = connect({ host, port });
    } catch (e) {
      finish({ ok: false, error: e instanceof Error ? e.message : String(e) });
      return;
    }
    sock.unref();
    sock.setNoDelay(true);
    sock.on('connect', () =>
      sock?.write(request, () => {
        sent = true;
      }),
    );
    sock.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      const o = statusOf(answer);
      if (o) finish(o);
    });
    sock.on('error', (e) => finish({ ok: false, error: e.message, sent }));
    sock.on('close', () => finish({ ok: false, error: 'connection closed without an answer', sent }));
  });
}

async function postHttps(u: URL, body: string, timeoutMs: number): Promise<PostOutcome> {
  const t0 = performance.now();
  const { request } = await import('node:https');
  const left = Math.max(1, timeoutMs - (performance.now() - t0));
  return new Promise((resolve) => {
    let done = false;
    const finish = (o: PostOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(o);
    };
    const req = request(u, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const timer = setTimeout(() => finish({ ok: false, error: `no answer within ${timeoutMs} ms` }), left);
    req.on('socket', (s) => s.unref());
    req.on('response', (res) => finish({ ok: (res.statusCode ?? 0) < 300, status: res.statusCode ?? 0 }));
    req.on('error', (e) => finish({ ok: false, error: e.message }));
    req.end(body);
  });
}

/** Cold mode: export one call's recording, waiting at most CNIKIT_OTLP_TIMEOUT_MS (default 10 ms). */
export async function exportRecording(
  recording: Recording,
  env: Readonly<Record<string, string | undefined>>,
  resource: Record<string, AttrValue> = {},
): Promise<PostOutcome> {
  if (recording.spans.length === 0) return { ok: true };
  return postJson(recording.endpoint, encodeSpans(recording.spans, resource), exportBoundMs(env));
}
