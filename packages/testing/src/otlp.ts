/**
 * A real OTLP/HTTP traces receiver for tests: an HTTP server on 127.0.0.1 that takes
 * `POST /v1/traces` with `Content-Type: application/json` and decodes the body the way the OpenTelemetry
 * Collector's otlp receiver does for the protocol's JSON encoding (ExportTraceServiceRequest: hex trace and span
 * ids of 32/16 characters, integer enums, 64-bit times as decimal strings or numbers, typed attribute values). A body
 * the collector would refuse is answered 400 and recorded in `rejected`; accepted spans are flattened into
 * `spans` with their attributes as plain values.
 *
 * `startBlackhole()` is the other end a tracer can meet: a TCP port that accepts connections and never answers.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { scaled } from './timescale.ts';

export type ReceivedValue = string | number | boolean | null | ReceivedValue[];

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, ReceivedValue>;
  status: { code: number; message: string };
  resource: Record<string, ReceivedValue>;
  scope: string;
}

export interface OtlpReceiver {
  /** Base URL (`http://127.0.0.1:<port>`): what OTEL_EXPORTER_OTLP_ENDPOINT takes. */
  url: string;
  spans: ReceivedSpan[];
  /** Requests refused (with the reason), as the collector would. */
  rejected: string[];
  /** Requests accepted. */
  requests: number;
  /** Resolves with the spans once `pred(spans)` holds; rejects after `scaled(timeoutMs)` (default 15 s). */
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const HEX32 = /^[0-9a-f]{32}$/i;
const HEX16 = /^[0-9a-f]{16}$/i;

class Invalid extends Error {}

function u64(v: unknown, what: string): bigint {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'string' && /^\d+$/.test(v)) return BigInt(v);
  throw new Invalid(`${what}: not a uint64 (${JSON.stringify(v)})`);
}

function anyValue(v: unknown, what: string): ReceivedValue {
  if (typeof v !== 'object' || v === null) throw new Invalid(`${what}: AnyValue must be an object`);
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 0) return null;
  if (keys.length !== 1) throw new Invalid(`${what}: AnyValue with ${keys.length} fields`);
  if ('stringValue' in o) {
    if (typeof o.stringValue !== 'string') throw new Invalid(`${what}: stringValue not a string`);
    return o.stringValue;
  }
  if ('boolValue' in o) {
    if (typeof o.boolValue !== 'boolean') throw new Invalid(`${what}: boolValue not a boolean`);
    return o.boolValue;
  }
  if ('intValue' in o) return Number(u64s(o.intValue, `${what}.intValue`));
  if ('doubleValue' in o) {
    if (typeof o.doubleValue !== 'number') throw new Invalid(`${what}: doubleValue not a number`);
    return o.doubleValue;
  }
  if ('arrayValue' in o) {
    const vals = (o.arrayValue as { values?: unknown[] } | null)?.values ?? [];
    return vals.map((x, i) => anyValue(x, `${what}[${i}]`));
  }
  throw new Invalid(`${what}: unknown AnyValue field ${keys[0]}`);
}

function u64s(v: unknown, what: string): bigint {
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  throw new Invalid(`${what}: not an int64 (${JSON.stringify(v)})`);
}

function attrs(list: unknown, what: string): Record<string, ReceivedValue> {
  if (list === undefined) return {};
  if (!Array.isArray(list)) throw new Invalid(`${what}: attributes must be an array`);
  const out: Record<string, ReceivedValue> = {};
  for (const [i, kv] of list.entries()) {
    const k = (kv as { key?: unknown })?.key;
    if (typeof k !== 'string' || k === '') throw new Invalid(`${what}[${i}]: key must be a non-empty string`);
    out[k] = anyValue((kv as { value?: unknown }).value ?? {}, `${what}.${k}`);
  }
  return out;
}

function arr(v: unknown, what: string): unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new Invalid(`${what} must be an array`);
  return v;
}

/** Decodes an ExportTraceServiceRequest in the OTLP JSON encoding; throws Invalid like the collector would refuse. */
export function decodeTraces(body: unknown): ReceivedSpan[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new Invalid('body is not a JSON object');
  const out: ReceivedSpan[] = [];
  for (const [ri, rs] of arr(
    (body as { resourceSpans?: unknown }).resourceSpans,
    'resourceSpans',
  ).entries()) {
    const r = rs as { resource?: { attributes?: unknown }; scopeSpans?: unknown };
    const resource = attrs(r.resource?.attributes, `resourceSpans[${ri}].resource`);
    for (const [si, ss] of arr(r.scopeSpans, `resourceSpans[${ri}].scopeSpans`).entries()) {
      const sc = ss as { scope?: { name?: unknown }; spans?: unknown };
      const scope = typeof sc.scope?.name === 'string' ? sc.scope.name : '';
      for (const [pi, sp] of arr(sc.spans, `scopeSpans[${si}].spans`).entries()) {
        const w = `span[${ri}.${si}.${pi}]`;
        const s = sp as Record<string, unknown>;
        if (typeof s.traceId !== 'string' || !HEX32.test(s.traceId))
          throw new Invalid(`${w}: invalid traceId`);
        if (typeof s.spanId !== 'string' || !HEX16.test(s.spanId)) throw new Invalid(`${w}: invalid spanId`);
        const parent = s.parentSpanId ?? '';
        if (typeof parent !== 'string' || (parent !== '' && !HEX16.test(parent)))
          throw new Invalid(`${w}: invalid parentSpanId`);
        if (typeof s.name !== 'string') throw new Invalid(`${w}: name must be a string`);
        const kind = s.kind ?? 0;
        if (typeof kind !== 'number' || !Number.isInteger(kind) || kind < 0 || kind > 5)
          throw new Invalid(`${w}: invalid kind ${JSON.stringify(kind)}`);
        const status = (s.status ?? {}) as { code?: unknown; message?: unknown };
        const code = status.code ?? 0;
        if (typeof code !== 'number' || ![0, 1, 2].includes(code))
          throw new Invalid(`${w}: invalid status code`);
        out.push({
          traceId: s.traceId.toLowerCase(),
          spanId: s.spanId.toLowerCase(),
          parentSpanId: parent.toLowerCase(),
          name: s.name,
          kind,
          startNs: u64(s.startTimeUnixNano, `${w}.startTimeUnixNano`),
          endNs: u64(s.endTimeUnixNano, `${w}.endTimeUnixNano`),
          attributes: attrs(s.attributes, `${w}.attributes`),
          status: { code, message: typeof status.message === 'string' ? status.message : '' },
          resource,
          scope,
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rejected: string[] = [];
  const waiters = new Set<() => void>();
  let requests = 0;
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const refuse = (status: number, why: string) => {
        rejected.push(why);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 3, message: why }));
      };
      if (req.method !== 'POST' || req.url !== '/v1/traces') return refuse(404, `${req.method} ${req.url}`);
      const ct = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      if (ct !== 'application/json') return refuse(415, `content-type ${ct}`);
      let got: ReceivedSpan[];
      try {
        got = decodeTraces(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        return refuse(400, e instanceof Error ? e.message : String(e));
      }
      requests++;
      spans.push(...got);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
      for (const w of waiters) w();
    });
  };
  const server: Server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const rx: OtlpReceiver = {
    url: `http://127.0.0.1:${port}`,
    spans,
    rejected,
    get requests() {
      return requests;
    },
    waitFor(pred, ms = 15_000) {
      const timeoutMs = scaled(ms);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pred(spans)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(spans);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`OTLP receiver: condition not met within ${timeoutMs} ms (${spans.length} spans)`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
  return rx;
}

/**
 * A TCP port on 127.0.0.1 that accepts connections and never answers (a blackholed collector, or one slower than a
 * call's bound). It still reads what arrives: `bodies()` are the JSON bodies of the complete HTTP requests received
 * (a request counts once its Content-Length bytes are in), so a test can tell the spans left even though nobody
 * waited for an answer.
 */
export async function startBlackhole(): Promise<{
  url: string;
  accepted: () => number;
  bodies: () => unknown[];
  close(): Promise<void>;
}> {
  const socks = new Set<Socket>();
  const received: Buffer[] = [];
  let accepted = 0;
  const server = createTcpServer((s) => {
    accepted++;
    socks.add(s);
    const i = received.push(Buffer.alloc(0)) - 1;
    s.on('data', (d: Buffer) => {
      received[i] = Buffer.concat([received[i]!, d]);
    });
    s.on('error', () => undefined);
    s.on('close', () => socks.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    bodies: () => received.flatMap((b) => completeBodies(b)),
    close() {
      for (const s of socks) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** The JSON bodies of the complete HTTP/1.1 requests in `data` (one connection's bytes), in order. */
function completeBodies(data: Buffer): unknown[] {
  const out: unknown[] = [];
  let at = 0;
  for (;;) {
    const end = data.indexOf('\r\n\r\n', at, 'latin1');
    if (end < 0) return out;
    const head = data.subarray(at, end).toString('latin1');
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    if (end + 4 + len > data.length) return out;
    out.push(JSON.parse(data.subarray(end + 4, end + 4 + len).toString('utf8')));
    at = end + 4 + len;
  }
}
