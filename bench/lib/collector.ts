/**
 * A minimal OTLP/HTTP JSON trace collector for the benchmarks, in a worker thread: it keeps answering while the
 * benchmark's own thread is blocked in spawnSync, and it listens in the network namespace of the thread that starts it
 * (a worker's thread inherits its creator's namespace: start one before entering a private namespace for the warm
 * service, which exports from the host's, and one after for cold plugins run in that namespace). Every POSTed body is
 * appended as one line to a file; `spans()` reads them back as flat span records.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

const WORKER = `
const { createServer } = require('node:http');
const { appendFileSync } = require('node:fs');
const { workerData } = require('node:worker_threads');
const port = new Int32Array(workerData.shared);
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    appendFileSync(workerData.file, Buffer.concat(chunks).toString('utf8').replace(/\\n/g, ' ') + '\\n');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
server.listen(0, '127.0.0.1', () => {
  Atomics.store(port, 0, server.address().port);
  Atomics.notify(port, 0);
});
`;

export interface SpanRow {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** Duration in milliseconds. */
  ms: number;
  attributes: Record<string, string | number | boolean>;
}

export interface Collector {
  /** The base URL to configure (`otlpEndpoint`; `/v1/traces` is appended by the plugins). */
  url: string;
  /** Every span received so far (and forgets them). */
  take(): SpanRow[];
  stop(): Promise<number>;
}

/** Start a collector writing to `file`; waits (blocking, at most 10 s) until it listens. */
export function startCollector(file: string): Collector {
  writeFileSync(file, '');
  const shared = new SharedArrayBuffer(4);
  const worker = new Worker(WORKER, { eval: true, workerData: { file, shared } });
  worker.unref();
  const port = new Int32Array(shared);
  if (Atomics.wait(port, 0, 0, 10_000) === 'timed-out' && Atomics.load(port, 0) === 0)
    throw new Error('the trace collector did not start');
  return {
    url: `http://127.0.0.1:${Atomics.load(port, 0)}`,
    take() {
      const text = readFileSync(file, 'utf8');
      writeFileSync(file, '');
      const out: SpanRow[] = [];
      for (const line of text.split('\n')) {
        if (!line.trim()) continue;
        const body = JSON.parse(line) as {
          resourceSpans?: Array<{
            scopeSpans?: Array<{
              spans?: Array<{
                traceId: string;
                spanId: string;
                parentSpanId?: string;
                name: string;
                startTimeUnixNano: string;
                endTimeUnixNano: string;
                attributes?: Array<{ key: string; value: Record<string, unknown> }>;
              }>;
            }>;
          }>;
        };
        for (const rs of body.resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? []) {
              const attributes: SpanRow['attributes'] = {};
              for (const a of s.attributes ?? []) {
                const v = Object.values(a.value)[0];
                attributes[a.key] =
                  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : '';
              }
              out.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                ms: Number(BigInt(s.endTimeUnixNano) - BigInt(s.startTimeUnixNano)) / 1e6,
                attributes,
              });
            }
      }
      return out;
    },
    stop: () => worker.terminate(),
  };
}
