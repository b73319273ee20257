import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually, scaled } from '@cnikit/testing';
import { decodeTraces, type OtlpReceiver, startBlackhole, startOtlpReceiver } from '@cnikit/testing/otlp';
import { dispatch, invokeInProcess } from './dispatch.ts';
import { CniError } from './errors.ts';
import { delegateAdd, registerInProcess } from './invoke.ts';
import { encodeSpans, postJson } from './otlp.ts';
import {
  parseTraceparent,
  type Recording,
  SpanKind,
  startRecording,
  traced,
  traceEndpoint,
  withSpan,
} from './trace.ts';
import type { Plugin } from './types.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE}-${PARENT}-01`;

const dir = mkdtempSync(join(tmpdir(), 'cnikit-trace-'));
// the delegate must exist in CNI_PATH (lookup is unchanged); registered with anyPath it runs in-process
writeFileSync(join(dir, 'trace-child'), '');

const child: Plugin = {
  name: 'trace-child',
  async add() {
    return { cniVersion: '1.1.0', ips: [{ address: '10.1.2.3/24' }] };
  },
};
registerInProcess(child, { anyPath: true });

const parent: Plugin = {
  name: 'trace-parent',
  async add(req) {
    const r = await delegateAdd('trace-child', req);
    traced('kernel work', { step: 1 }, () => undefined);
    return r;
  },
  async del() {
    throw new CniError(7, 'bad config', 'details here');
  },
};

const conf = JSON.stringify({ cniVersion: '1.1.0', name: 'net1', type: 'trace-parent' });
const env = (extra: Record<string, string>) => ({
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'ctr-1',
  CNI_NETNS: '/var/run/netns/x',
  CNI_IFNAME: 'eth0',
  CNI_PATH: dir,
  ...extra,
});

let rx: OtlpReceiver;
before(async () => {
  rx = await startOtlpReceiver();
});
after(async () => {
  await rx.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('tracing of plugin calls', () => {
  test('a traced ADD: plugin span under the caller, delegation and in-process delegate and a section below it', async () => {
    const r = await invokeInProcess(
      parent,
      env({ TRACEPARENT, OTEL_EXPORTER_OTLP_ENDPOINT: rx.url, CNIKIT_OTLP_TIMEOUT_MS: '3000' }),
      conf,
    );
    assert.equal(r.code, 0, r.stdout);
    const spans = await rx.waitFor((s) => s.some((x) => x.name === 'trace-parent ADD'));
    assert.deepEqual(rx.rejected, []);
    const top = spans.find((s) => s.name === 'trace-parent ADD')!;
    assert.equal(top.traceId, TRACE);
    assert.equal(top.parentSpanId, PARENT);
    assert.equal(top.kind, SpanKind.Server);
    assert.deepEqual(
      {
        plugin: top.attributes['cni.plugin'],
        verb: top.attributes['cni.command'],
        ctr: top.attributes['cni.container_id'],
        net: top.attributes['cni.network'],
        ifname: top.attributes['cni.ifname'],
        code: top.attributes['cni.result_code'],
        mode: top.attributes['cnikit.mode'],
      },
      {
        plugin: 'trace-parent',
        verb: 'ADD',
        ctr: 'ctr-1',
        net: 'net1',
        ifname: 'eth0',
        code: 0,
        mode: 'cold',
      },
    );
    assert.equal(top.resource['service.name'], 'cnikit');
    const del = spans.find((s) => s.name === 'delegate trace-child ADD')!;
    assert.ok(del, JSON.stringify(spans.map((s) => s.name)));
    assert.equal(del.parentSpanId, top.spanId);
    assert.equal(del.kind, SpanKind.Client);
    assert.equal(del.attributes['cni.delegate.mode'], 'in-process');
    assert.equal(del.attributes['cni.result_code'], 0);
    const sub = spans.find((s) => s.name === 'trace-child ADD')!;
    assert.equal(sub.parentSpanId, del.spanId);
    assert.equal(sub.attributes['cnikit.in_process'], true);
    assert.equal(sub.attributes['cnikit.mode'], 'cold', 'a cold call: its in-process delegate says cold');
    assert.equal(sub.attributes['cni.network'], 'net1');
    const section = spans.find((s) => s.name === 'kernel work')!;
    assert.ok(section, JSON.stringify(spans.map((s) => s.name)));
    assert.equal(section.parentSpanId, top.spanId);
    assert.equal(section.attributes.step, 1);
    for (const s of [del, sub, section]) {
      assert.equal(s.traceId, TRACE);
      assert.ok(s.startNs >= top.startNs && s.endNs <= top.endNs, `${s.name} inside the call`);
    }
    // one export for the whole call (the in-process delegate does not export on its own)
    assert.equal(rx.requests, 1);
  });

  test('a warm call (the dispatch of the warm service): every call span says warm, the in-process delegate too', async () => {
    const recordings: Recording[] = [];
    let stdout = '';
    const code = await dispatch(parent, {
      env: env({ TRACEPARENT }),
      stdin: conf,
      stdout: { write: (x: string) => (stdout += x) },
      stderr: { write: () => true },
      mode: 'warm',
      traceEndpoint: 'http://127.0.0.1:9/v1/traces',
      traceExporter: (r) => {
        recordings.push(r);
      },
    });
    assert.equal(code, 0, stdout);
    assert.equal(recordings.length, 1, 'one recording for the call and its delegate');
    const spans = recordings[0]!.spans;
    const calls = spans.filter((x) => x.attributes['cni.plugin'] !== undefined);
    assert.deepEqual(
      calls.map((x) => [x.name, x.attributes['cnikit.mode']]),
      [
        ['trace-parent ADD', 'warm'],
        ['trace-child ADD', 'warm'],
      ],
    );
    assert.equal(calls[1]!.attributes['cnikit.in_process'], true);
  });

  test('a failing call: result code and error status', async () => {
    const before = rx.spans.length;
    const r = await invokeInProcess(
      parent,
      env({
        CNI_COMMAND: 'DEL',
        TRACEPARENT,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${rx.url}/v1/traces`,
        CNIKIT_OTLP_TIMEOUT_MS: '3000',
      }),
      conf,
    );
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).code, 7);
    const spans = await rx.waitFor((s) => s.length > before && s.some((x) => x.name === 'trace-parent DEL'));
    const top = spans.find((s) => s.name === 'trace-parent DEL')!;
    assert.equal(top.attributes['cni.result_code'], 7);
    assert.equal(top.status.code, 2);
    assert.match(top.status.message, /7: bad config/);
  });

  test('the config key otlpEndpoint turns tracing on; no TRACEPARENT or no endpoint: nothing is sent', async () => {
    const withKey = JSON.stringify({ cniVersion: '1.1.0', name: 'net2', otlpEndpoint: rx.url });
    const n0 = rx.requests;
    await invokeInProcess(child, env({ TRACEPARENT, CNIKIT_OTLP_TIMEOUT_MS: '3000' }), withKey);
    await rx.waitFor((s) => s.some((x) => x.attributes['cni.network'] === 'net2'));
    assert.equal(rx.requests, n0 + 1);
    // no trace context, or no endpoint, or tracing disabled by OTEL_SDK_DISABLED
    await invokeInProcess(child, env({}), withKey);
    await invokeInProcess(child, env({ TRACEPARENT }), conf);
    await invokeInProcess(child, env({ TRACEPARENT, OTEL_SDK_DISABLED: 'true' }), withKey);
    await invokeInProcess(child, env({ TRACEPARENT: `00-${'0'.repeat(32)}-${PARENT}-01` }), withKey);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(rx.requests, n0 + 1);
  });

  test('an unreachable or blackholed endpoint neither fails nor slows a call beyond the bound', async () => {
    const hole = await startBlackhole();
    const refused = await startBlackhole();
    const refusedUrl = refused.url;
    await refused.close(); // nothing listens there any more: connection refused
    const call = async (url: string, bound?: string) => {
      const t0 = performance.now();
      const r = await invokeInProcess(
        parent,
        env({
          TRACEPARENT,
          OTEL_EXPORTER_OTLP_ENDPOINT: url,
          ...(bound ? { CNIKIT_OTLP_TIMEOUT_MS: bound } : {}),
        }),
        conf,
      );
      const ms = performance.now() - t0;
      assert.equal(r.code, 0, r.stdout);
      assert.equal(JSON.parse(r.stdout).ips[0].address, '10.1.2.3/24');
      return ms;
    };
    try {
      await call(refusedUrl);
      const fast = await call(hole.url); // the default bound: 10 ms
      const slow = await call(hole.url, '600');
      assert.ok(hole.accepted() >= 2, 'the blackhole was reached');
      // the blackholed export waits its bound, never less (the request has left: the spans are not lost) and not
      // much more; the default bound (10 ms) shows as no more than a loaded machine's noise
      assert.ok(slow >= 590, `bound 600: ${slow.toFixed(1)} ms`);
      assert.ok(slow < 600 + scaled(1500), `bound 600: ${slow.toFixed(1)} ms`);
      assert.ok(fast < scaled(500), `default bound: ${fast.toFixed(1)} ms`);
    } finally {
      await hole.close();
    }
  });
});

describe('the OTLP POST', () => {
  test('answered: ok with the status; refused: not sent; no answer within the bound: sent, the spans still arrive', async () => {
    const span = startRecording('http://unused', 'post probe', { n: 1 }, SpanKind.Server, TRACEPARENT);
    span.end();
    const body = encodeSpans(span.recording.spans);
    assert.deepEqual(await postJson(`${rx.url}/v1/traces`, body, scaled(5000)), {
      ok: true,
      status: 200,
      sent: true,
    });
    await rx.waitFor((s) => s.some((x) => x.name === 'post probe'));

    const gone = await startBlackhole();
    await gone.close(); // nothing listens there: refused
    const refused = await postJson(`${gone.url}/v1/traces`, body, scaled(5000));
    assert.equal(refused.ok, false);
    assert.notEqual(refused.sent, true, JSON.stringify(refused));
    assert.ok(refused.error, JSON.stringify(refused));

    // a collector that takes the request and answers later than the bound (here: never)
    const slow = await startBlackhole();
    try {
      const r = await postJson(`${slow.url}/v1/traces`, body, 300);
      assert.deepEqual(r, { ok: false, error: 'no answer within 300 ms', sent: true });
      // the request had left: the collector gets the whole body although nobody waited for its answer
      await eventually(() => slow.bodies().length === 1, 'the body reached the slow collector');
      const got = decodeTraces(slow.bodies()[0]);
      assert.deepEqual(
        got.map((x) => [x.name, x.traceId, x.parentSpanId]),
        [['post probe', TRACE, PARENT]],
      );
      // the same through node:net under Bun too (the warm service's choice: attempts it can cancel)
      const c = await postJson(`${slow.url}/v1/traces`, body, 300, { cancellable: true });
      assert.deepEqual(c, { ok: false, error: 'no answer within 300 ms', sent: true });
      await eventually(() => slow.bodies().length === 2, 'the second body reached the slow collector');
    } finally {
      await slow.close();
    }
    assert.deepEqual(await postJson('ftp://x/v1/traces', body, 100), {
      ok: false,
      error: 'unsupported scheme ftp:',
    });
  });
});

describe('trace helpers', () => {
  test('traceEndpoint: precedence, /v1/traces, only http(s)', () => {
    assert.equal(traceEndpoint({}), undefined);
    assert.equal(traceEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }), 'http://c:4318/v1/traces');
    assert.equal(
      traceEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t/x',
      }),
      'http://t/x',
    );
    assert.equal(traceEndpoint({}, { OTLPEndpoint: 'https://k' }), 'https://k/v1/traces');
    assert.equal(traceEndpoint({}, {}, 'http://warm/v1/traces'), 'http://warm/v1/traces');
    assert.equal(traceEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://c:4317' }), undefined);
    assert.equal(
      traceEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_EXPORTER: 'none' }),
      undefined,
    );
  });

  test('parseTraceparent refuses malformed, zero ids and version ff', () => {
    assert.deepEqual(parseTraceparent(TRACEPARENT), { traceId: TRACE, spanId: PARENT });
    for (const bad of [
      '',
      'x',
      `ff-${TRACE}-${PARENT}-01`,
      `00-${TRACE}-0000000000000000-01`,
      `00-${TRACE.toUpperCase()}-${PARENT}-01`,
    ])
      assert.equal(parseTraceparent(bad), undefined, bad);
  });

  test('encodeSpans: OTLP JSON with hex ids, string times, typed attributes, unfinished spans ended', () => {
    const root = startRecording(
      'http://x/v1/traces',
      'r',
      { s: 'a', i: 3, d: 1.5, b: true },
      SpanKind.Server,
    );
    withSpan(root, () => traced('child', {}, () => undefined));
    const body = JSON.parse(encodeSpans(root.recording.spans));
    const spans = body.resourceSpans[0].scopeSpans[0].spans;
    assert.equal(spans.length, 2);
    assert.match(spans[0].traceId, /^[0-9a-f]{32}$/);
    assert.equal(spans[0].parentSpanId, undefined);
    assert.equal(spans[1].parentSpanId, spans[0].spanId);
    assert.match(spans[0].startTimeUnixNano, /^\d{19}$/);
    assert.match(spans[0].endTimeUnixNano, /^\d{19}$/);
    assert.deepEqual(spans[0].attributes, [
      { key: 's', value: { stringValue: 'a' } },
      { key: 'i', value: { intValue: '3' } },
      { key: 'd', value: { doubleValue: 1.5 } },
      { key: 'b', value: { boolValue: true } },
    ]);
  });
});
