/**
 * Benchmark: host-local ADD and DEL latency, cnikit vs the Go reference (/usr/lib/cni/host-local), side by side.
 *
 *   node --conditions=cnikit-source --import tsx bench/ipam.ts [--runs=30] [--preload=1000] [--json]
 *
 * cnikit runs as dist-bin/host-local when built (npm run build), else as an esbuild bundle of
 * plugins/host-local/src/run.ts under node (the kind is printed). Each implementation gets its own store
 * (temp dataDir). Scenario "empty": a fresh store. Scenario "preloaded": `--preload` reservations already on
 * disk (files written directly, identical for both). Each run is one ADD then one DEL of a new container
 * (wall time of the exec, measured around spawnSync); the implementations alternate run by run.
 * Also reported: the in-process cost of ADD+DEL through the skel seam (what a delegating plugin pays when
 * host-local resolves to the same multicall executable).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { invokeInProcess } from '@cnikit/skel';
import { plugin } from '../plugins/host-local/src/index.ts';
import { goHostLocal, type Impl, ipamEnv, ourHostLocal } from '../plugins/host-local/src/testenv.ts';
import { median, quantile } from './lib/side-by-side.ts';

const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Math.max(20, Number(arg('runs', '30')));
const PRELOAD = Number(arg('preload', '1000'));
const JSON_OUT = process.argv.includes('--json');

const SUBNET = '10.70.0.0/20'; // 4094 usable addresses

function confFor(dataDir: string): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'benchnet',
    type: 'bridge',
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: SUBNET }]] },
  });
}

function preload(dataDir: string, n: number): void {
  const dir = join(dataDir, 'benchnet');
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < n; i++) {
    const v = 2 + i;
    writeFileSync(join(dir, `10.70.${v >> 8}.${v & 255}`), `preload-${i}\r\neth0`, { mode: 0o600 });
  }
  if (n > 0) {
    const v = 1 + n;
    writeFileSync(join(dir, 'last_reserved_ip.0'), `10.70.${v >> 8}.${v & 255}`, { mode: 0o600 });
  }
}

function timeExec(cmd: Impl, env: Record<string, string>, stdin: string): number {
  if (!('binary' in cmd.target)) throw new Error('dist-bin/host-local is missing: run `npm run build` first');
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd.target.binary, [], {
    env: { PATH: process.env.PATH ?? '', ...env },
    input: stdin,
    encoding: 'utf8',
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0)
    throw new Error(`${cmd.kind} ${env.CNI_COMMAND} failed (${r.status}): ${r.stdout}${r.stderr}`);
  return ms;
}

const p90 = (xs: number[]) => quantile(xs, 0.9);

interface Series {
  add: number[];
  del: number[];
  both: number[];
}

function runScenario(name: string, impls: Impl[], n: number) {
  const dirs = impls.map(() => mkdtempSync(join(tmpdir(), 'cnikit-bench-ipam-')));
  try {
    for (const d of dirs) preload(d, n);
    const series: Series[] = impls.map(() => ({ add: [], del: [], both: [] }));
    // one warm-up run each (page cache, binary mapping)
    impls.forEach((impl, k) => {
      const c = confFor(dirs[k]!);
      timeExec(impl, ipamEnv('ADD', 'warmup'), c);
      timeExec(impl, ipamEnv('DEL', 'warmup'), c);
    });
    for (let run = 0; run < RUNS; run++) {
      impls.forEach((impl, k) => {
        const c = confFor(dirs[k]!);
        const id = `bench-${run}`;
        const a = timeExec(impl, ipamEnv('ADD', id), c);
        const d = timeExec(impl, ipamEnv('DEL', id), c);
        series[k]!.add.push(a);
        series[k]!.del.push(d);
        series[k]!.both.push(a + d);
      });
    }
    return { name, series };
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

async function inProcess(n: number): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-bench-ipam-'));
  try {
    preload(dir, n);
    const c = confFor(dir);
    const out: number[] = [];
    for (let run = -1; run < RUNS; run++) {
      const t0 = process.hrtime.bigint();
      const a = await invokeInProcess(plugin, ipamEnv('ADD', `ip-${run}`), c);
      const d = await invokeInProcess(plugin, ipamEnv('DEL', `ip-${run}`), c);
      if (a.code !== 0 || d.code !== 0) throw new Error(`in-process failed: ${a.stdout} ${d.stdout}`);
      if (run >= 0) out.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const ours = ourHostLocal();
  const go = goHostLocal();
  const impls: Impl[] = go ? [ours, go] : [ours];
  const names = impls.map((i) => (i.kind === 'go' ? 'go' : `cnikit (${i.kind})`));
  const results = [
    runScenario('empty store', impls, 0),
    runScenario(`${PRELOAD} reservations`, impls, PRELOAD),
  ];
  const inproc = { empty: await inProcess(0), preloaded: await inProcess(PRELOAD) };

  const rows: Array<Record<string, string | number>> = [];
  for (const r of results) {
    for (const [k, s] of r.series.entries()) {
      rows.push({
        scenario: r.name,
        impl: names[k]!,
        'ADD median ms': +median(s.add).toFixed(2),
        'DEL median ms': +median(s.del).toFixed(2),
        'ADD+DEL median ms': +median(s.both).toFixed(2),
        'ADD+DEL p90 ms': +p90(s.both).toFixed(2),
      });
    }
  }
  const ratios = results.map((r) =>
    r.series.length === 2 ? +(median(r.series[0]!.both) / median(r.series[1]!.both)).toFixed(2) : Number.NaN,
  );
  if (JSON_OUT) {
    console.log(JSON.stringify({ runs: RUNS, preload: PRELOAD, rows, ratios, inProcess: inproc }, null, 2));
    return;
  }
  console.log(`host-local ADD+DEL latency, ${RUNS} runs per cell (wall time per exec)`);
  console.table(rows);
  results.forEach((r, i) => {
    if (go) console.log(`ratio cnikit/go (ADD+DEL median), ${r.name}: ${ratios[i]}`);
  });
  console.log(
    `in-process (skel seam, no exec) ADD+DEL median: empty ${median(inproc.empty).toFixed(2)} ms, ` +
      `${PRELOAD} reservations ${median(inproc.preloaded).toFixed(2)} ms`,
  );
}

await main();
