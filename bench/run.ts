/**
 * `npm run bench`: cnikit's compiled executables vs the Go reference plugins (/usr/lib/cni), side by side in one run.
 *
 *   node --conditions=cnikit-source --import tsx bench/run.ts [--runs=30] [--only=core] [--variants] [--json]
 *
 * Core (this file):
 *   - VERSION wall time (median, p10, p90 over --runs execs) and peak RSS (maxrss of the child, via GNU time),
 *   - loopback ADD+DEL wall time (ADD then DEL of the same container, one private container namespace; the
 *     executables are spawned from a private "host" namespace — this process's main thread moves there with
 *     withNetns, so no `ip netns exec` is in the measured path) and peak RSS of ADD,
 *   - on-disk size of the plugin set: ours = one file + hard links (counted once); Go = sum of the files,
 *   for the Go reference, cnikit/bun and cnikit/sea; ratios ours/Go and the targets (VERSION ≤ 4× Go, RSS ≤ 2.5× Go).
 * --variants additionally builds and measures start-up variants: SEA without V8 code cache, SEA with a start-up
 * snapshot, bun without bytecode, bun without lazy plugin/built-in loading (bun-eager).
 * Then every other bench/*.ts (bridge, chain, firewall, ipam, libcni, meta, netlink, portmap, tuning, warm, …) runs in
 * turn, unless --only=core.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { createSandbox, type Sandbox } from '@cnikit/testing';
import { median, quantile } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');

const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Math.max(20, Number(arg('runs', '30')) || 30);
const RSS_RUNS = 5;
const ONLY_CORE = arg('only', '') === 'core';
const VARIANTS = process.argv.includes('--variants');
const JSON_OUT = process.argv.includes('--json');
const GO = '/usr/lib/cni';
const DIST = join(ROOT, 'dist-bin');
const GNU_TIME = '/usr/bin/time';

interface Impl {
  label: string;
  /** Directory with a `loopback` executable. */
  dir: string;
  /** Executable to measure VERSION with. */
  loopback: string;
}

interface Stats {
  median: number;
  p10: number;
  p90: number;
}

interface Row {
  impl: string;
  version: Stats;
  /** Mean user+system CPU ms of one VERSION exec (hyperfine), less sensitive to machine load than wall time. */
  versionCpu: number | undefined;
  versionRssKb: number | undefined;
  addDel: Stats | undefined;
  addRssKb: number | undefined;
  sizeBytes: number;
  files: number;
}

function stats(xs: number[]): Stats {
  return { median: median(xs), p10: quantile(xs, 0.1), p90: quantile(xs, 0.9) };
}

const BASE_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };

function execTimed(bin: string, env: Record<string, string>, input = ''): number {
  const t0 = performance.now();
  const r = spawnSync(bin, [], { env: { ...BASE_ENV, ...env }, input, encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.error) throw r.error;
  if (r.status !== 0)
    throw new Error(`${bin} ${env.CNI_COMMAND} failed (exit ${r.status}): ${r.stdout}${r.stderr}`);
  return ms;
}

/** Peak RSS (KB) of one execution, median over RSS_RUNS, measured by GNU time (`%M` = ru_maxrss of the child). */
function peakRss(
  bin: string,
  env: Record<string, string>,
  input = '',
  before?: () => void,
): number | undefined {
  if (!existsSync(GNU_TIME)) return undefined;
  const xs: number[] = [];
  for (let i = 0; i < RSS_RUNS; i++) {
    before?.();
    const r = spawnSync(GNU_TIME, ['-f', '%M', bin], {
      env: { ...BASE_ENV, ...env },
      input,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`${bin} under time failed: ${r.stdout}${r.stderr}`);
    const kb = Number(r.stderr.trim().split('\n').pop());
    if (Number.isFinite(kb)) xs.push(kb);
  }
  return xs.length ? stats(xs).median : undefined;
}

/** VERSION timings through hyperfine (no shell, -N): per-run wall ms and mean user+sys CPU ms. */
function hyperfine(bin: string, env: Record<string, string>): { times: number[]; cpu: number } | undefined {
  const out = join(ROOT, '.bench', `hf-${process.pid}.json`);
  mkdirSync(join(ROOT, '.bench'), { recursive: true });
  const r = spawnSync(
    'hyperfine',
    ['-N', '-w', '3', '-r', String(RUNS), '--export-json', out, '--style', 'none', bin],
    {
      env: { ...BASE_ENV, ...env },
      encoding: 'utf8',
    },
  );
  if (r.error || r.status !== 0) return undefined;
  try {
    const res = (
      JSON.parse(readFileSync(out, 'utf8')) as {
        results: Array<{ times: number[]; user: number; system: number }>;
      }
    ).results[0];
    if (!res) return undefined;
    return { times: res.times.map((t) => t * 1000), cpu: (res.user + res.system) * 1000 };
  } finally {
    rmSync(out, { force: true });
  }
}

/** Size of a plugin set: unique inodes of the regular files in `dir` (hard links count once). */
function setSize(dir: string, names?: string[]): { bytes: number; files: number } {
  const seen = new Set<number>();
  let bytes = 0;
  let files = 0;
  for (const n of names ?? readdirSync(dir)) {
    const p = join(dir, n);
    if (!existsSync(p)) continue;
    const st = statSync(p);
    if (!st.isFile()) continue;
    files++;
    if (seen.has(st.ino)) continue;
    seen.add(st.ino);
    bytes += st.size;
  }
  return { bytes, files };
}

function measure(impl: Impl, sb: Sandbox, pluginNames: string[]): Row {
  const versionEnv = { CNI_COMMAND: 'VERSION' };
  // warm the page cache
  for (let i = 0; i < 3; i++) execTimed(impl.loopback, versionEnv);
  let v: number[] = [];
  let versionCpu: number | undefined;
  const hf = hyperfine(impl.loopback, versionEnv);
  if (hf) {
    v = hf.times;
    versionCpu = hf.cpu;
  } else for (let i = 0; i < RUNS; i++) v.push(execTimed(impl.loopback, versionEnv));
  const versionRssKb = peakRss(impl.loopback, versionEnv);

  const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'bench-lo', type: 'loopback' });
  const env = (cmd: string) => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'bench-lo',
    CNI_NETNS: sb.container.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: impl.dir,
  });
  let addDel: Stats | undefined;
  let addRssKb: number | undefined;
  sb.runInHost(() => {
    for (let i = 0; i < 3; i++) {
      execTimed(impl.loopback, env('ADD'), conf);
      execTimed(impl.loopback, env('DEL'), conf);
    }
    const xs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const a = execTimed(impl.loopback, env('ADD'), conf);
      const d = execTimed(impl.loopback, env('DEL'), conf);
      xs.push(a + d);
    }
    addDel = stats(xs);
    addRssKb = peakRss(impl.loopback, env('ADD'), conf);
    execTimed(impl.loopback, env('DEL'), conf);
  });
  const size = impl.dir === GO ? setSize(GO) : setSize(impl.dir, ['cnikit', ...pluginNames]);
  return {
    impl: impl.label,
    version: stats(v),
    versionCpu,
    versionRssKb,
    addDel,
    addRssKb,
    sizeBytes: size.bytes,
    files: size.files,
  };
}

const f1 = (x: number | undefined) =>
  x === undefined || Number.isNaN(x) ? '   n/a' : x.toFixed(1).padStart(6);
const mb = (kb: number | undefined) => (kb === undefined ? '  n/a' : (kb / 1024).toFixed(1).padStart(5));
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || !b ? '   -' : `${(a / b).toFixed(2)}×`.padStart(6);

function printTable(rows: Row[]): void {
  const go = rows.find((r) => r.impl === 'go');
  const out: string[] = [];
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  out.push(
    `cnikit vs Go reference — ${RUNS} runs each (load average ${load}: wall times inflate under load, CPU less)`,
  );
  out.push(
    `wall ms: median [p10–p90]; CPU = mean user+sys ms (hyperfine); peak RSS MB (median of ${RSS_RUNS})`,
  );
  out.push(
    `${'impl'.padEnd(22)} ${'VERSION ms'.padEnd(26)} ${'ratio'.padStart(6)} ${'CPU ms'.padStart(6)} ${'ratio'.padStart(6)}  ${'ADD+DEL ms'.padEnd(26)} ${'ratio'.padStart(6)}  ${'RSS VER'.padStart(7)} ${'ratio'.padStart(6)} ${'RSS ADD'.padStart(7)} ${'ratio'.padStart(6)}  size`,
  );
  for (const r of rows) {
    const ad = r.addDel;
    out.push(
      [
        r.impl.padEnd(22),
        `${f1(r.version.median)} [${f1(r.version.p10)}–${f1(r.version.p90)}]`.padEnd(26),
        r === go ? '     -' : ratio(r.version.median, go?.version.median),
        f1(r.versionCpu),
        r === go ? '     -' : ratio(r.versionCpu, go?.versionCpu),
        ' ',
        (ad ? `${f1(ad.median)} [${f1(ad.p10)}–${f1(ad.p90)}]` : 'n/a').padEnd(26),
        r === go ? '     -' : ratio(ad?.median, go?.addDel?.median),
        ' ',
        mb(r.versionRssKb).padStart(7),
        r === go ? '     -' : ratio(r.versionRssKb, go?.versionRssKb),
        mb(r.addRssKb).padStart(7),
        r === go ? '     -' : ratio(r.addRssKb, go?.addRssKb),
        ' ',
        `${(r.sizeBytes / 1e6).toFixed(1)} MB (${r.files} names${r.impl === 'go' ? ', every plugin' : ', 1 file + hard links'})`,
      ].join(' '),
    );
  }
  if (go) {
    const names = readdirSync(DIST).filter((n) => existsSync(join(GO, n)) && n !== 'cnikit');
    const same = setSize(GO, names);
    out.push(
      `size of the Go reference for the same ${same.files} plugin names (${names.join(', ')}): ${(same.bytes / 1e6).toFixed(1)} MB`,
    );
    out.push('');
    out.push('targets: VERSION ≤ 4× Go wall, peak RSS ≤ 2.5× Go');
    for (const r of rows) {
      if (r === go) continue;
      const vr = r.version.median / go.version.median;
      const rr = r.versionRssKb && go.versionRssKb ? r.versionRssKb / go.versionRssKb : undefined;
      out.push(
        `  ${r.impl.padEnd(22)} VERSION wall ${vr.toFixed(2)}× ${vr <= 4 ? 'PASS' : 'FAIL'}${r.versionCpu && go.versionCpu ? ` (CPU ${(r.versionCpu / go.versionCpu).toFixed(2)}×)` : ''};  RSS ${rr?.toFixed(2) ?? 'n/a'}× ${rr !== undefined && rr <= 2.5 ? 'PASS' : 'FAIL'}`,
      );
    }
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

function buildVariants(): Impl[] {
  // SEA without code cache, bun without bytecode: built into build/bench-variants with the same pipeline.
  const out: Impl[] = [];
  const dir = join(ROOT, 'build', 'bench-variants');
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    process.execPath,
    [
      '--conditions=cnikit-source',
      '--import',
      'tsx',
      join(ROOT, 'scripts', 'build.ts'),
      '--with-sea',
      `--variants-out=${dir}`,
    ],
    {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  if (r.status !== 0) throw new Error('building the variants failed');
  for (const v of readdirSync(dir)) {
    const exe = join(dir, v, 'loopback');
    if (existsSync(exe)) out.push({ label: `cnikit ${v}`, dir: join(dir, v), loopback: exe });
  }
  return out;
}

function main(): void {
  if (
    !existsSync(join(DIST, 'cnikit')) ||
    !existsSync(join(DIST, 'sea', 'cnikit')) ||
    !existsSync(join(DIST, 'bun', 'cnikit'))
  ) {
    const r = spawnSync('npm', ['run', 'build', '--', '--with-sea'], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (r.status !== 0) throw new Error('npm run build failed');
  }
  const pluginNames = readdirSync(DIST).filter(
    (n) =>
      n !== 'cnikit' &&
      statSync(join(DIST, n)).isFile() &&
      statSync(join(DIST, n)).ino === statSync(join(DIST, 'cnikit')).ino,
  );
  // Per-back-end directories with hard links, so CNI_PATH and argv0 look like an install.
  const impls: Impl[] = [];
  if (existsSync(join(GO, 'loopback'))) impls.push({ label: 'go', dir: GO, loopback: join(GO, 'loopback') });
  else
    process.stdout.write(
      `(Go reference plugins not installed in ${GO}: apt-get install containernetworking-plugins)\n`,
    );
  for (const backend of ['bun', 'sea']) {
    const dir = join(ROOT, 'build', 'bench', backend);
    mkdirSync(dir, { recursive: true });
    for (const n of ['cnikit', ...pluginNames]) {
      const p = join(dir, n);
      rmSync(p, { force: true });
      linkSync(join(DIST, backend, 'cnikit'), p);
    }
    impls.push({ label: `cnikit ${backend}`, dir, loopback: join(dir, 'loopback') });
  }
  if (VARIANTS) impls.push(...buildVariants());

  const sb = createSandbox();
  const rows: Row[] = [];
  try {
    for (const impl of impls) {
      process.stderr.write(`[bench] ${impl.label} …\n`);
      rows.push(measure(impl, sb, pluginNames));
    }
  } finally {
    sb.destroy();
  }
  printTable(rows);
  mkdirSync(join(ROOT, '.bench'), { recursive: true });
  writeFileSync(join(ROOT, '.bench', 'core.json'), `${JSON.stringify({ runs: RUNS, rows }, null, 2)}\n`);
  if (JSON_OUT) process.stdout.write(`${JSON.stringify(rows)}\n`);

  if (ONLY_CORE) return;
  for (const f of readdirSync(join(ROOT, 'bench'))
    .filter((n) => n.endsWith('.ts') && n !== 'run.ts')
    .sort()) {
    process.stdout.write(`\n=== ${f} ===\n`);
    const r = spawnSync(
      process.execPath,
      ['--conditions=cnikit-source', '--import', 'tsx', join(ROOT, 'bench', f)],
      {
        cwd: ROOT,
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    if (r.status !== 0) process.stdout.write(`(${f} exited ${r.status})\n`);
  }
}

main();
