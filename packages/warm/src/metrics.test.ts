import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { startRecording } from '@cnikit/skel';
import { startBlackhole, startOtlpReceiver } from '@cnikit/testing/otlp';
import { histogramSeries, parseMetrics } from '@cnikit/testing/prometheus';
import { readFallbacks } from './fallbacks.ts';
import { Metrics, parseMetricsAddress, REEXEC_ENV, STATE_ENV, serveMetrics } from './metrics.ts';
import { TraceBatcher } from './traces.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-metrics-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const parse = parseMetrics;

describe('Metrics', () => {
  test('the exposition parses and counts what was observed; label values are escaped', () => {
    const m = new Metrics('1.2.3', {});
    m.observe('bridge', 'ADD', 0, 0.004);
    m.observe('bridge', 'ADD', 0, 0.2);
    m.observe('bridge', 'ADD', 7, 0.0005);
    m.observe('we"ird\\\nname', 'DEL', 0, 3);
    m.countReexec('watchdog');
    m.countFallbacks({ busy: 2, unavailable: 1 }, 10);
    m.countSpans(5, 1);
    m.inFlight = 1;
    const fams = parse(m.render());
    const f = (n: string) => fams.find((x) => x.name === n)!;
    const req = f('cnikit_serve_requests_total');
    assert.equal(req.type, 'COUNTER');
    const get = (l: Record<string, string>) =>
      req.metrics.find((x) => Object.entries(l).every(([k, v]) => x.labels?.[k] === v))?.value;
    assert.equal(get({ plugin: 'bridge', command: 'ADD', result_code: '0' }), '2');
    assert.equal(get({ plugin: 'bridge', command: 'ADD', result_code: '7' }), '1');
    assert.equal(get({ plugin: 'we"ird\\\nname', command: 'DEL' }), '1');
    const h = f('cnikit_serve_request_duration_seconds');
    assert.equal(h.type, 'HISTOGRAM');
    const b = histogramSeries(
      m.render(),
      'cnikit_serve_request_duration_seconds',
      'plugin="bridge",command="ADD"',
    );
    assert.equal(b.count, '3');
    assert.equal(b.buckets?.['0.001'], '1');
    assert.equal(b.buckets?.['0.005'], '2');
    assert.equal(b.buckets?.['0.25'], '3');
    assert.equal(b.buckets?.['+Inf'], '3');
    assert.equal(Number(b.sum).toFixed(4), '0.2045');
    const odd = histogramSeries(
      m.render(),
      'cnikit_serve_request_duration_seconds',
      String.raw`plugin="we\"ird\\\nname",command="DEL"`,
    );
    assert.deepEqual([odd.count, odd.buckets?.['2.5'], odd.buckets?.['5']], ['1', '0', '1']);
    assert.equal(f('cnikit_serve_requests_in_flight').metrics[0]!.value, '1');
    const re = f('cnikit_serve_reexecs_total');
    assert.deepEqual(
      re.metrics.map((x) => [x.labels?.reason, x.value]),
      [
        ['watchdog', '1'],
        ['deadline', '0'],
        ['upgrade', '0'],
      ],
    );
    const fb = f('cnikit_client_fallbacks_total');
    assert.deepEqual(
      fb.metrics.map((x) => [x.labels?.reason, x.value]),
      [
        ['busy', '2'],
        ['unavailable', '1'],
      ],
    );
    assert.equal(f('cnikit_serve_trace_spans_exported_total').metrics[0]!.value, '5');
    assert.equal(f('cnikit_serve_trace_spans_dropped_total').metrics[0]!.value, '1');
    assert.equal(f('cnikit_build_info').metrics[0]!.labels?.version, '1.2.3');
    // no stamp given: the commit is unknown
    assert.equal(f('cnikit_build_info').metrics[0]!.labels?.commit, 'unknown');
    assert.equal(f('cnikit_build_info').metrics[0]!.labels?.dirty, 'false');
  });

  test("cnikit_build_info carries the executable's version stamp: version, commit, dirty flag", () => {
    const commit = 'a'.repeat(40);
    const m = new Metrics('0.9.1', {}, { commit, dirty: true });
    const info = parse(m.render()).find((x) => x.name === 'cnikit_build_info');
    assert.deepEqual(info?.metrics[0]?.labels, { version: '0.9.1', commit, dirty: 'true' });
  });

  test('the counters travel across a re-execution in the environment; the reason is counted once there', () => {
    const m = new Metrics('v', {});
    m.observe('loopback', 'ADD', 0, 0.001);
    m.countFallbacks({ hello: 1 }, 6);
    const env: Record<string, string | undefined> = {};
    for (const kv of m.reexecEnv('deadline')) {
      const i = kv.indexOf('=');
      env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    const next = new Metrics('v', env);
    assert.equal(env[STATE_ENV], undefined, 'consumed');
    assert.equal(env[REEXEC_ENV], undefined, 'consumed');
    assert.equal(next.fallbackOffset, 6);
    const text = next.render();
    assert.match(text, /^cnikit_serve_requests_total\{plugin="loopback",command="ADD",result_code="0"\} 1$/m);
    assert.match(text, /^cnikit_serve_reexecs_total\{reason="deadline"\} 1$/m);
    assert.match(text, /^cnikit_client_fallbacks_total\{reason="hello"\} 1$/m);
    // a damaged state or an unknown reason starts over, without failing
    const fresh = new Metrics('v', { [STATE_ENV]: '%%%', [REEXEC_ENV]: 'bogus' });
    assert.doesNotMatch(fresh.render(), /cnikit_serve_requests_total\{/);
    assert.match(fresh.render(), /^cnikit_serve_reexecs_total\{reason="watchdog"\} 0$/m);
  });

  test('parseMetricsAddress', () => {
    assert.deepEqual(parseMetricsAddress(':9743'), { kind: 'tcp', host: '::', port: 9743 });
    assert.deepEqual(parseMetricsAddress('127.0.0.1:1'), { kind: 'tcp', host: '127.0.0.1', port: 1 });
    assert.deepEqual(parseMetricsAddress('[::1]:80'), { kind: 'tcp', host: '::1', port: 80 });
    assert.deepEqual(parseMetricsAddress('/run/x.sock'), { kind: 'unix', path: '/run/x.sock' });
    assert.equal(parseMetricsAddress('off'), undefined);
    // the expected error as an object: a bare string second argument means "message" to Node but not to every
    // runtime's node:assert (the linux-aarch64 Bun of the release test read it otherwise and failed)
    for (const bad of ['9743', 'h:', ':0', ':65536', 'a:b:c', 'rel/x', ''])
      assert.throws(() => parseMetricsAddress(bad), {
        message: `--metrics must be HOST:PORT, :PORT, an absolute socket path or off, got ${JSON.stringify(bad)}`,
      });
  });

  test('serveMetrics on a Unix socket: GET /metrics, 404 elsewhere, 405 for POST; socket mode 0600', async () => {
    const path = join(dir, 'm.sock');
    const server = await serveMetrics({ kind: 'unix', path }, () => 'x_total 1\n');
    try {
      assert.equal(statSync(path).mode & 0o777, 0o600);
      const get = (p: string, method = 'GET') =>
        new Promise<{ status: number; body: string; type: string }>((resolve, reject) => {
          const req = request({ socketPath: path, path: p, method }, (res) => {
            let body = '';
            res.on('data', (d) => {
              body += d;
            });
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, body, type: String(res.headers['content-type']) }),
            );
          });
          req.on('error', reject);
          req.end();
        });
      const ok = await get('/metrics');
      assert.deepEqual([ok.status, ok.body], [200, 'x_total 1\n']);
      assert.equal(ok.type, 'text/plain; version=0.0.4; charset=utf-8');
      assert.equal((await get('/nope')).status, 404);
      assert.equal((await get('/metrics', 'POST')).status, 405);
    } finally {
      server.close();
    }
  });
});

describe('client fallback record', () => {
  test('counts new complete lines from the offset; unknown reasons are "other"; a missing file counts nothing', () => {
    const f = join(dir, 'client-fallbacks');
    assert.deepEqual(readFallbacks(f, 0), { counts: {}, offset: 0 });
    writeFileSync(f, 'busy\nunavailable\nbusy\nweird\npart');
    const a = readFallbacks(f, 0);
    assert.deepEqual(a.counts, { busy: 2, unavailable: 1, other: 1 });
    assert.equal(a.offset, 'busy\nunavailable\nbusy\nweird\n'.length);
    appendFileSync(f, 'ial\nhello\n');
    const b = readFallbacks(f, a.offset);
    assert.deepEqual(b.counts, { other: 1, hello: 1 });
    // truncated by someone: read from the start again
    writeFileSync(f, 'peer\n');
    assert.deepEqual(readFallbacks(f, b.offset).counts, { peer: 1 });
  });

  test('a file past 1 MiB is emptied after it was counted', () => {
    const f = join(dir, 'big-fallbacks');
    const n = Math.floor((1 << 20) / 5) + 1;
    writeFileSync(f, 'busy\n'.repeat(n));
    const r = readFallbacks(f, 0);
    assert.equal(r.counts.busy, n);
    assert.equal(r.offset, 0);
    assert.equal(statSync(f).size, 0);
  });
});

describe('TraceBatcher (warm mode)', () => {
  test('queues recordings and sends them in one request per endpoint; a dead endpoint counts as dropped', async () => {
    const rx = await startOtlpReceiver();
    const hole = await startBlackhole();
    await hole.close(); // connection refused there
    let exported = 0;
    let dropped = 0;
    const b = new TraceBatcher((e, d) => {
      exported += e;
      dropped += d;
    }, 50);
    try {
      for (let i = 0; i < 3; i++) {
        const s = startRecording(`${rx.url}/v1/traces`, `call ${i}`, { i }, 2);
        s.end();
        b.add(s.recording);
      }
      const dead = startRecording(`${hole.url}/v1/traces`, 'lost', {}, 2);
      dead.end();
      b.add(dead.recording);
      assert.equal(b.queued, 4);
      await rx.waitFor((s) => s.length === 3, 5000);
      assert.equal(rx.requests, 1, 'one batch');
      assert.deepEqual(rx.spans.map((s) => s.name).sort(), ['call 0', 'call 1', 'call 2']);
      assert.equal(rx.spans[0]!.resource['cnikit.mode'], 'warm');
      await b.drain(2000);
      assert.deepEqual([exported, dropped], [3, 1]);
    } finally {
      await rx.close();
    }
  });
});
