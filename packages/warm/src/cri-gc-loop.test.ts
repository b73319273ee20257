// The warm service's periodic GC (cri-gc-loop.ts): its environment, when a run starts, and what its metrics count
// from the child's report or failure. The child is a stand-in executable here (a Node script answering like
// `cnikit tool gc --from-cri … --json`); test-netns/k8s/cri-gc.k8s.test.ts runs the real one against containerd.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import parsePrometheus from 'parse-prometheus-text-format';
import { DEFAULT_CRI_SOCKET, GcLoop, gcLoopFromEnv, parseGcEnv } from './cri-gc-loop.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-gc-loop-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in `cnikit`: records its argv and CNI_PATH, then prints `stdout` and exits `code`. */
function fakeExe(name: string, stdout: string, code: number, stderr = ''): string {
  const p = join(dir, name);
  writeFileSync(
    p,
    `#!${process.execPath}\nrequire('node:fs').writeFileSync(${JSON.stringify(`${p}.args`)}, JSON.stringify({ argv: process.argv.slice(2), cniPath: process.env.CNI_PATH }));\n` +
      `process.stdout.write(${JSON.stringify(stdout)}); process.stderr.write(${JSON.stringify(stderr)}); process.exit(${code});\n`,
  );
  chmodSync(p, 0o755);
  return p;
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), 'condition not reached');
}

const metric = (text: string, name: string) =>
  (parsePrometheus(text) as { name: string; metrics: { value: string; labels?: Record<string, string> }[] }[])
    .find((f) => f.name === name)
    ?.metrics.map((m) => [JSON.stringify(m.labels ?? {}), Number(m.value)]);

describe('periodic GC from the CRI', () => {
  test('environment: off by default, durations, socket, grace; bad values are refused', () => {
    assert.equal(parseGcEnv({}), undefined);
    for (const off of ['0', 'off', 'OFF', 'no', 'false', ' '])
      assert.equal(parseGcEnv({ CNIKIT_GC_INTERVAL: off }), undefined);
    assert.deepEqual(parseGcEnv({ CNIKIT_GC_INTERVAL: '10m' }), {
      intervalMs: 600_000,
      socket: DEFAULT_CRI_SOCKET,
    });
    assert.deepEqual(
      parseGcEnv({ CNIKIT_GC_INTERVAL: '90', CNIKIT_CRI_SOCKET: '/x.sock', CNIKIT_GC_GRACE: '5' }),
      {
        intervalMs: 90_000,
        socket: '/x.sock',
        graceSeconds: 5,
      },
    );
    assert.equal(parseGcEnv({ CNIKIT_GC_INTERVAL: '1h' })?.intervalMs, 3_600_000);
    assert.throws(
      () => parseGcEnv({ CNIKIT_GC_INTERVAL: '10 minutes' }),
      /CNIKIT_GC_INTERVAL must be a duration/,
    );
    assert.throws(() => parseGcEnv({ CNIKIT_GC_INTERVAL: '0.5s' }), /at least 1s/);
    assert.throws(() => parseGcEnv({ CNIKIT_GC_INTERVAL: '1m', CNIKIT_GC_GRACE: '-1' }), /CNIKIT_GC_GRACE/);
    const logs: string[] = [];
    assert.equal(
      gcLoopFromEnv({ CNIKIT_GC_INTERVAL: '1m' }, (l) => logs.push(l)),
      undefined,
    );
    assert.match(logs[0] ?? '', /needs the compiled cnikit executable/);
  });

  test('a run starts when due, one at a time; the report is counted (released by kind, sandboxes, times)', async () => {
    const report = {
      sandboxes: [{}, {}, {}],
      networks: [
        { released: [{ kind: 'host-local' }, { kind: 'host-local' }, { kind: 'cache' }], errors: [] },
      ],
    };
    const exe = fakeExe('ok', JSON.stringify(report), 0);
    const logs: string[] = [];
    const loop = new GcLoop(
      { intervalMs: 60_000, socket: '/run/c.sock', graceSeconds: 0 },
      exe,
      (l) => logs.push(l),
      1000,
      0,
    );
    loop.tick(999);
    assert.equal(loop.running, false, 'not due yet');
    assert.equal(metric(loop.render(), 'cnikit_serve_gc_last_run_timestamp_seconds')?.[0]?.[1], 0);
    loop.tick(1000);
    assert.equal(loop.running, true);
    loop.tick(1000);
    await until(() => !loop.running);
    assert.deepEqual(JSON.parse(readFileSync(`${exe}.args`, 'utf8')), {
      argv: ['tool', 'gc', '--from-cri', '/run/c.sock', '--json', '--grace', '0'],
      cniPath: process.env.CNI_PATH || dir,
    });
    const text = loop.render();
    assert.deepEqual(metric(text, 'cnikit_serve_gc_runs_total'), [
      ['{"result":"ok"}', 1],
      ['{"result":"error"}', 0],
    ]);
    assert.deepEqual(metric(text, 'cnikit_serve_gc_released_total'), [
      ['{"kind":"cache"}', 1],
      ['{"kind":"host-local"}', 2],
    ]);
    assert.equal(metric(text, 'cnikit_serve_gc_sandboxes')?.[0]?.[1], 3);
    const last = Number(metric(text, 'cnikit_serve_gc_last_success_timestamp_seconds')?.[0]?.[1]);
    assert.ok(Math.abs(last - Date.now() / 1000) < 30, String(last));
    assert.deepEqual(logs, ['gc: released 3 stale attachment(s) of vanished sandboxes']);
    loop.tick(1000 + 59_999);
    assert.equal(loop.running, false, 'next run one interval later');
  });

  test('the CRI cannot be asked (cnitool exits 1): an error run, the reason logged, nothing counted as released', async () => {
    const exe = fakeExe('fail', '', 1, 'cnitool: cannot reach the CRI runtime at /run/c.sock: ENOENT\n');
    const logs: string[] = [];
    const loop = new GcLoop({ intervalMs: 60_000, socket: '/run/c.sock' }, exe, (l) => logs.push(l), 0, 0);
    loop.tick(0);
    await until(() => !loop.running);
    const text = loop.render();
    assert.deepEqual(metric(text, 'cnikit_serve_gc_runs_total'), [
      ['{"result":"ok"}', 0],
      ['{"result":"error"}', 1],
    ]);
    assert.deepEqual(metric(text, 'cnikit_serve_gc_released_total'), [
      ['{"kind":"cache"}', 0],
      ['{"kind":"host-local"}', 0],
    ]);
    assert.equal(metric(text, 'cnikit_serve_gc_last_success_timestamp_seconds')?.[0]?.[1], 0);
    assert.ok(metric(text, 'cnikit_serve_gc_last_run_timestamp_seconds')?.[0]?.[1]);
    assert.deepEqual(logs, [
      'warning: gc --from-cri /run/c.sock failed (exit 1): cnitool: cannot reach the CRI runtime at /run/c.sock: ENOENT',
    ]);
    // a missing executable is an error run too
    const gone = new GcLoop(
      { intervalMs: 60_000, socket: '/s' },
      join(dir, 'nope'),
      (l) => logs.push(l),
      0,
      0,
    );
    gone.tick(0);
    await until(() => !gone.running);
    assert.deepEqual(metric(gone.render(), 'cnikit_serve_gc_runs_total')?.[1], ['{"result":"error"}', 1]);
  });
});
