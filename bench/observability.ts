/**
 * Benchmark: the cost of tracing, side by side in one run, alternating: each call with tracing off (no
 * TRACEPARENT, no endpoint), with tracing on against a real OTLP/HTTP receiver on 127.0.0.1 (the test's, in a child
 * process so nothing here blocks it), and with tracing on against a blackholed endpoint (accepts, never answers: the
 * bound). Cold (dist-bin/<plugin>) and warm (dist-bin/warm/<plugin> + `cnikit serve`), from a private "host"
 * namespace against a private container namespace. Medians (p90) in milliseconds.
 *
 *   node --conditions=cnikit-source --import tsx bench/observability.ts [--runs=25] [--json] [--dist=DIR]
 *
 * Rows: cold VERSION (start-up, tracing off: the executable's start-up with the tracing code present), cold and warm
 * loopback ADD, cold and warm bridge + host-local ADD and DEL. `paired on-off`: the median of the per-round
 * differences (the runs of a round are back to back), the figure to quote for the cost of tracing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { median, quantile, timedExec } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '25'));
const JSON_OUT = process.argv.includes('--json');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
// --dist=DIR: another build's dist-bin (e.g. a fresh clone of an older commit), to compare builds
const DIST = arg('dist', join(ROOT, 'dist-bin'));
const WARM = join(DIST, 'warm');
if (!existsSync(join(DIST, 'cnikit')) || !existsSync(join(WARM, 'cnikit-client'))) {
  console.error('bench-observability: dist-bin missing (npm run build)');
  process.exit(1);
}

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** One plugin exec, timed (bench/lib: the receiver and the blackhole live in a child process, never blocked). */
const timed = async (bin: string, env: Record<string, string>, input: string): Promise<number> =>
  timedExec(bin, env, input);

/** A child process running @cnikit/testing/otlp's receiver and blackhole; prints their URLs. */
async function startHelpers(): Promise<{ proc: ChildProcess; receiver: string; blackhole: string }> {
  const code = `
    import { startOtlpReceiver, startBlackhole } from '@cnikit/testing/otlp';
    const rx = await startOtlpReceiver();
    const bh = await startBlackhole();
    console.log(JSON.stringify({ receiver: rx.url, blackhole: bh.url }));
    setInterval(() => console.error('spans ' + rx.spans.length + ' rejected ' + rx.rejected.length), 60000);
  `;
  const proc = spawn(
    process.execPath,
    ['--conditions=cnikit-source', '--import', 'tsx', '--input-type=module', '-e', code],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.split('\n')[0]!);
    });
    proc.on('exit', (c) => reject(new Error(`receiver exited ${c}`)));
  });
  return { proc, ...(JSON.parse(line) as { receiver: string; blackhole: string }) };
}

const sb = createSandbox({ prefix: 'cnikit-bobs' });
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-obs-'));
const inHost = enterNetns(sb.host.path);
let svc: ChildProcess | undefined;
let helpers: Awaited<ReturnType<typeof startHelpers>> | undefined;
try {
  sb.exec('ip', ['link', 'set', 'lo', 'up']);
  helpers = await startHelpers();
  const run = join(scratch, 'run');
  mkdirSync(run, { mode: 0o700 });
  const socket = join(run, 'cnikit.sock');
  const log = openSync(join(scratch, 'serve.log'), 'a');
  // the service exports to the receiver when a call carries TRACEPARENT (its own environment names the endpoint)
  svc = spawn(join(DIST, 'cnikit'), ['serve', '--socket', socket, '--metrics', 'off'], {
    stdio: ['ignore', 'ignore', log],
    env: { PATH, OTEL_EXPORTER_OTLP_ENDPOINT: helpers.receiver },
  });
  closeSync(log);
  for (let i = 0; i < 100 && !readFileSync(join(scratch, 'serve.log'), 'utf8').includes('serving on'); i++)
    await new Promise((r) => setTimeout(r, 100));

  const tracing = {
    off: {},
    on: { TRACEPARENT, OTEL_EXPORTER_OTLP_ENDPOINT: helpers.receiver },
    blackhole: { TRACEPARENT, OTEL_EXPORTER_OTLP_ENDPOINT: helpers.blackhole },
  } as const;
  type T = keyof typeof tracing;
  const base = (cmd: string, id: string) => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: id,
    CNI_NETNS: sb.container.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: DIST,
    CNIKIT_SOCKET: socket,
  });
  const lo = JSON.stringify({ cniVersion: '1.1.0', name: 'lo', type: 'loopback' });
  const samples = new Map<string, Record<T, number[]>>();
  const add = (op: string, t: T, ms: number) => {
    const row = samples.get(op) ?? { off: [], on: [], blackhole: [] };
    samples.set(op, row);
    row[t].push(ms);
  };
  for (let i = 0; i < RUNS; i++) {
    for (const t of Object.keys(tracing) as T[]) {
      add(
        'cold VERSION',
        t,
        await timed(join(DIST, 'loopback'), { CNI_COMMAND: 'VERSION', ...tracing[t] }, lo),
      );
      for (const mode of ['cold', 'warm'] as const) {
        const dir = mode === 'cold' ? DIST : WARM;
        add(
          `${mode} loopback ADD`,
          t,
          await timed(join(dir, 'loopback'), { ...base('ADD', 'c'), ...tracing[t] }, lo),
        );
        const br = JSON.stringify({
          cniVersion: '1.1.0',
          name: 'obsbench',
          type: 'bridge',
          bridge: 'obsbr0',
          ipam: { type: 'host-local', subnet: '10.94.0.0/16', dataDir: join(scratch, 'ipam') },
        });
        const id = `${mode}-${t}-${i}`;
        const e = { ...base('ADD', id), CNI_PATH: dir, ...tracing[t] };
        add(`${mode} bridge+host-local ADD`, t, await timed(join(dir, 'bridge'), e, br));
        add(
          `${mode} bridge+host-local DEL`,
          t,
          await timed(join(dir, 'bridge'), { ...e, CNI_COMMAND: 'DEL' }, br),
        );
      }
    }
  }
  // the cost of tracing as the median of per-round differences (the three runs of a round are back to back, so a
  // load spike hits them alike): steadier on a shared machine than the difference of two medians
  const paired = (a: number[], b: number[]) => median(a.map((x, i) => x - b[i]!));
  const rows = [...samples.entries()].map(([op, s]) => ({
    op,
    off: median(s.off),
    offP90: quantile(s.off, 0.9),
    on: median(s.on),
    onP90: quantile(s.on, 0.9),
    blackhole: median(s.blackhole),
    blackholeP90: quantile(s.blackhole, 0.9),
    onMinusOff: paired(s.on, s.off),
    blackholeMinusOff: paired(s.blackhole, s.off),
  }));
  if (JSON_OUT) console.log(JSON.stringify(rows));
  else {
    console.log(
      `tracing off | on (local OTLP receiver) | on (blackholed endpoint): median (p90) ms, ${RUNS} runs`,
    );
    const w = Math.max(...rows.map((r) => r.op.length)) + 2;
    for (const r of rows) {
      const f = (m: number, p: number) => `${m.toFixed(1)} (${p.toFixed(1)})`.padEnd(14);
      console.log(
        `  ${r.op.padEnd(w)} off ${f(r.off, r.offP90)} on ${f(r.on, r.onP90)} blackhole ${f(r.blackhole, r.blackholeP90)} paired on-off ${r.onMinusOff.toFixed(1)} blackhole-off ${r.blackholeMinusOff.toFixed(1)} ms`,
      );
    }
  }
} finally {
  svc?.kill('SIGTERM');
  helpers?.proc.kill('SIGTERM');
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
