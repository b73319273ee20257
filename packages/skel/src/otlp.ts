/**
 * The OTLP/HTTP JSON exporter (issue 28): encodes recorded spans as an `ExportTraceServiceRequest` in the protocol's
 * JSON mapping (hex trace/span ids, integer enums, 64-bit times as decimal strings — what the OpenTelemetry
 * Collector's otlphttp receiver accepts on /v1/traces) and POSTs it. Imported lazily by the dispatcher and the warm
 * service only when there is something to export: a call that is not traced never loads this file.
 *
 * An export never throws and never outlives its bound: the request is abandoned (socket destroyed) when no answer
 * came within `timeoutMs`; the spans are then lost, the call is unaffected.
 */
import { connect, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { CNIKIT_VERSION } from './release.ts';
import { type AttrValue, exportBoundMs, type Recording, type SpanRecord } from './trace.ts';

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
            'host.name': hostname(),
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
}

/**
 * POST `body` (JSON) to `url` within `timeoutMs`. Plain http goes over a raw socket (no node:http to load for a
 * cold call); https loads node:https. Resolves when the status line arrived, on error, or at the bound.
 */
export function postJson(url: string, body: string, timeoutMs: number): Promise<PostOutcome> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return Promise.resolve({ ok: false, error: `invalid URL ${JSON.stringify(url)}` });
  }
  if (u.protocol === 'https:') return postHttps(u, body, timeoutMs);
  if (u.protocol !== 'http:')
    return Promise.resolve({ ok: false, error: `unsupported scheme ${u.protocol}` });
  return new Promise((resolve) => {
    const payload = Buffer.from(body, 'utf8');
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const head =
      `POST ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${payload.length}\r\nConnection: close\r\nUser-Agent: cnikit/${CNIKIT_VERSION}\r\n\r\n`;
    let done = false;
    let sock: Socket | undefined;
    const finish = (o: PostOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock?.destroy();
      resolve(o);
    };
    const timer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${timeoutMs} ms` }),
      timeoutMs,
    );
    let answer = '';
    try {
      sock = connect({ host, port: Number(u.port || 80) });
    } catch (e) {
      finish({ ok: false, error: e instanceof Error ? e.message : String(e) });
      return;
    }
    sock.unref();
    sock.setNoDelay(true);
    // one write: the request leaves in one segment (no wait for the peer's ACK between head and body)
    sock.on('connect', () => sock?.write(Buffer.concat([Buffer.from(head, 'latin1'), payload])));
    sock.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(answer);
      if (m) finish({ ok: m[1]!.startsWith('2'), status: Number(m[1]) });
      else if (answer.includes('\r\n')) finish({ ok: false, error: 'not an HTTP answer' });
    });
    sock.on('error', (e) => finish({ ok: false, error: e.message }));
    sock.on('close', () => finish({ ok: false, error: 'connection closed without an answer' }));
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
