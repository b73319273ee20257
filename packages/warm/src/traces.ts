/**
 * Warm mode's trace export: the spans of every traced call are queued and sent in batches (one OTLP/HTTP
 * request per endpoint when BATCH_SPANS spans are queued or FLUSH_MS after the first one), so a call never waits for
 * the collector. At most MAX_QUEUED spans wait; beyond that the oldest are dropped (counted). A batch that is not
 * accepted within EXPORT_TIMEOUT_MS is dropped (counted) — nothing is retried, nothing blocks a request.
 */
import type { Recording, SpanRecord } from '@cnikit/skel';

export const BATCH_SPANS = 512;
export const FLUSH_MS = 1000;
export const MAX_QUEUED = 4096;
export const EXPORT_TIMEOUT_MS = 5000;

export class TraceBatcher {
  readonly #queues = new Map<string, SpanRecord[]>();
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #sending = new Set<Promise<void>>();

  constructor(
    private readonly count: (exported: number, dropped: number) => void,
    private readonly flushMs = FLUSH_MS,
  ) {}

  /** The PluginIO.traceExporter of the service's requests. */
  add = (rec: Recording): void => {
    let q = this.#queues.get(rec.endpoint);
    if (!q) {
      q = [];
      this.#queues.set(rec.endpoint, q);
    }
    q.push(...rec.spans);
    this.#queued += rec.spans.length;
    while (this.#queued > MAX_QUEUED) {
      const oldest = [...this.#queues.values()].find((x) => x.length > 0);
      if (!oldest) break;
      const n = Math.min(oldest.length, this.#queued - MAX_QUEUED);
      oldest.splice(0, n);
      this.#queued -= n;
      this.count(0, n);
    }
    if (this.#queued >= BATCH_SPANS) void this.flush();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => void this.flush(), this.flushMs);
      this.#timer.unref();
    }
  };

  get queued(): number {
    return this.#queued;
  }

  /** Sends everything queued (one request per endpoint); resolves when those requests are done. */
  async flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batches = [...this.#queues.entries()].filter(([, q]) => q.length > 0);
    this.#queues.clear();
    this.#queued = 0;
    if (batches.length === 0) return;
    const { encodeSpans, postJson } = await import('@cnikit/skel/otlp');
    const sends = batches.map(async ([endpoint, spans]) => {
      // node:net: a collector dropping SYNs must not leave the service one pending connection attempt per batch
      const r = await postJson(endpoint, encodeSpans(spans, { 'cnikit.mode': 'warm' }), EXPORT_TIMEOUT_MS, {
        cancellable: true,
      });
      if (r.ok) this.count(spans.length, 0);
      else this.count(0, spans.length);
    });
    const all = Promise.all(sends).then(() => undefined);
    this.#sending.add(all);
    try {
      await all;
    } finally {
      this.#sending.delete(all);
    }
  }

  /** Flush and wait for every export in progress, at most `ms` (the service is stopping). */
  async drain(ms: number): Promise<void> {
    const t = new Promise<void>((r) => setTimeout(r, ms).unref());
    await Promise.race([Promise.all([this.flush(), ...this.#sending]).then(() => undefined), t]);
  }
}
