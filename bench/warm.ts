/**
 * Benchmark: warm mode (dist-bin/warm/<plugin>, the static client talking to `cnikit serve`) vs cold mode
 * (dist-bin/<plugin>) vs the Go reference plugins (/usr/lib/cni), side by side in one run, alternating, exec'd like a
 * runtime from a private "host" namespace against a private container namespace (the machine's own namespace is never
 * touched). The service runs on a socket in a temporary directory for the duration of the run.
 *
 *   node --conditions=cnikit-source --import tsx bench/warm.ts [--runs=30] [--chain-runs=15] [--json]
 *        [--restore-exec] [--chain-only] [--baseline=DIR]
 *
 * --restore-exec adds a column `warmx`: the same warm clients against a second service started with
 * CNIKIT_IPTABLES_RESTORE=exec (every iptables write by iptables-restore instead of the in-process iptables-nft
 * writer), alternating with the others: the before/after of that writer from one run. --chain-only times only the
 * kubelet chain. The load average is printed before and after. --baseline=DIR adds a column `base`: another build's
 * warm clients (DIR/warm/<plugin>) against its own service (DIR/cnikit serve, a second socket), alternating with the
 * others: old build vs new build vs Go from one run (e.g. a copy of dist-bin made before a change).
 *
 * Per call: VERSION, loopback ADD and DEL, bridge + host-local ADD and DEL; the kubelet-style chain (bridge +
 * host-local, tuning, portmap, bandwidth) ADD and DEL. Medians (p90) and ratios to Go. Each plugin is started by a
 * tiny C launcher (posix_spawn + waitpid, the way a Go runtime's os/exec starts a plugin) that reports the wall time
 * from spawn to exit, so Node's own (large) spawn cost is not part of any figure. Peak RSS of the process the
 * runtime starts (the client in warm mode) from GNU time (`/usr/bin/time -f %M`). Targets: every per-call
 * wall time ≤ 0.7× Go, client peak RSS ≤ Go's, chain ADD ≤ 0.5× and DEL ≤ 0.3× Go.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { type Conf, kubeletChain } from './lib/chains.ts';
import { compileLauncher } from './lib/launcher.ts';
import { quantile } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '30'));
const CHAIN_RUNS = Number(arg('chain-runs', '15'));
const JSON_OUT = process.argv.includes('--json');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';

type Impl = 'warm' | 'cold' | 'go' | 'warmx' | 'base';
const BASELINE = arg('baseline', '');
const DIRS: Record<Impl, string> = {
  warm: join(ROOT, 'dist-bin', 'warm'),
  cold: join(ROOT, 'dist-bin'),
  go: '/usr/lib/cni',
  warmx: join(ROOT, 'dist-bin', 'warm'),
  base: join(BASELINE, 'warm'),
};
const RESTORE_EXEC = process.argv.includes('--restore-exec');
const CHAIN_ONLY = process.argv.includes('--chain-only');
const IMPLS: Impl[] = [
  'warm',
  ...(RESTORE_EXEC ? (['warmx'] as const) : []),
  ...(BASELINE ? (['base'] as const) : []),
  'cold',
  'go',
];

for (const impl of IMPLS) {
  for (const p of ['loopback', 'bridge', 'host-local', 'tuning', 'portmap', 'bandwidth']) {
    if (!existsSync(join(DIRS[impl], p))) {
      console.error(
        `bench-warm: ${join(DIRS[impl], p)} missing (npm run build / apt-get install containernetworking-plugins)`,
      );
      process.exit(1);
    }
  }
}
if (!existsSync('/usr/bin/time')) {
  console.error('bench-warm: /usr/bin/time (GNU time) missing: apt-get install time');
  process.exit(1);
}

const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-warm-'));
const runDir = join(scratch, 'run');
mkdirSync(runDir, { mode: 0o700 });
const SOCK = join(runDir, 'cnikit.sock');
const SOCKX = join(runDir, 'cnikit-restore-exec.sock');
const SOCKB = join(runDir, 'cnikit-baseline.sock');

const chain = (impl: string): Conf[] =>
  kubeletChain({ bridge: 'cnibw0', subnet: '10.78.0.0/16', dir: join(scratch, impl), hostPort: 18081 });
const bridge = (impl: string): Conf => chain(impl)[0] as Conf;

function startService(
  sock = SOCK,
  extra: Record<string, string> = {},
  exe = join(ROOT, 'dist-bin', 'cnikit'),
): ChildProcess {
  const fd = openSync(join(scratch, 'service.log'), 'a');
  try {
    return spawn(exe, ['serve', '--socket', sock], {
      stdio: ['ignore', 'ignore', fd],
      env: { PATH, ...extra },
    });
  } finally {
    closeSync(fd);
  }
}

// bench/lib/launcher.ts: posix_spawn + wait4, the wall time from spawn to exit on descriptor 3
let launch: ReturnType<typeof compileLauncher>;
try {
  launch = compileLauncher(scratch);
} catch (e) {
  console.error(`bench-warm: ${(e as Error).message}`);
  process.exit(1);
}

const service = startService();
const serviceX = RESTORE_EXEC ? startService(SOCKX, { CNIKIT_IPTABLES_RESTORE: 'exec' }) : undefined;
const serviceB = BASELINE ? startService(SOCKB, {}, join(BASELINE, 'cnikit')) : undefined;
const load0 = loadavg();
const sb = createSandbox();
const inHost = enterNetns(sb.host.path);
try {
  const check = () =>
    [SOCK, ...(serviceX ? [SOCKX] : []), ...(serviceB ? [SOCKB] : [])].every(
      (sock) =>
        spawnSync(join(ROOT, 'dist-bin', 'cnikit'), ['serve', '--check', '--socket', sock], {
          encoding: 'utf8',
          env: { PATH },
        }).status === 0,
    );
  for (let i = 0; !check(); i++) {
    if (i > 100)
      throw new Error(`the service did not start: ${readFileSync(join(scratch, 'service.log'), 'utf8')}`);
    spawnSync('sleep', ['0.05']);
  }
  const env = (impl: Impl, cmd: string): Record<string, string> => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'bench-warm',
    CNI_NETNS: sb.container.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: DIRS[impl],
    CNIKIT_SOCKET: impl === 'warmx' ? SOCKX : impl === 'base' ? SOCKB : SOCK,
    PATH,
  });
  /** One exec; returns wall ms and the parsed stdout. */
  const exec = (impl: Impl, cmd: string, conf: Conf): { ms: number; out: unknown } => {
    const input = JSON.stringify({ cniVersion: '1.0.0', name: 'bench-warm', ...conf });
    const r = launch(join(DIRS[impl], conf.type as string), env(impl, cmd), input);
    return { ms: r.ms, out: r.stdout ? JSON.parse(r.stdout) : undefined };
  };
  /** Peak RSS in KiB of the exec'd process (GNU time), median of a few runs. */
  const peak = (impl: Impl, cmd: string, conf: Conf): number => {
    const xs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = spawnSync('/usr/bin/time', ['-f', '%M', join(DIRS[impl], conf.type as string)], {
        env: env(impl, cmd),
        input: JSON.stringify({ cniVersion: '1.0.0', name: 'bench-warm', ...conf }),
        encoding: 'utf8',
      });
      xs.push(Number(r.stderr.trim().split('\n').at(-1)));
    }
    return quantile(xs, 0.5);
  };

  interface Row {
    op: string;
    ms: Partial<Record<Impl, number>> & Record<'warm' | 'cold' | 'go', number>;
    p90: Partial<Record<Impl, number>> & Record<'warm' | 'cold' | 'go', number>;
    target?: number;
  }
  const rows: Row[] = [];
  const measure = (
    op: string,
    runs: number,
    target: number | undefined,
    once: (impl: Impl) => number | number[],
  ) => {
    const samples: Record<Impl, number[][]> = { warm: [], cold: [], go: [], warmx: [], base: [] };
    for (let n = 0; n < 2; n++) for (const impl of IMPLS) once(impl); // warm-up
    for (let n = 0; n < runs; n++) {
      const order = n % 2 ? [...IMPLS].reverse() : IMPLS;
      for (const impl of order) {
        const v = once(impl);
        samples[impl].push(Array.isArray(v) ? v : [v]);
      }
    }
    const parts = samples.warm[0]?.length ?? 1;
    const names = parts === 1 ? [op] : op.split('|');
    for (let k = 0; k < parts; k++) {
      const col = (impl: Impl) => samples[impl].map((s) => s[k] as number);
      rows.push({
        op: names[k] as string,
        ms: {
          warm: quantile(col('warm'), 0.5),
          cold: quantile(col('cold'), 0.5),
          go: quantile(col('go'), 0.5),
          ...(RESTORE_EXEC ? { warmx: quantile(col('warmx'), 0.5) } : {}),
          ...(BASELINE ? { base: quantile(col('base'), 0.5) } : {}),
        },
        p90: {
          warm: quantile(col('warm'), 0.9),
          cold: quantile(col('cold'), 0.9),
          go: quantile(col('go'), 0.9),
          ...(RESTORE_EXEC ? { warmx: quantile(col('warmx'), 0.9) } : {}),
          ...(BASELINE ? { base: quantile(col('base'), 0.9) } : {}),
        },
        target,
      });
    }
  };

  const lo: Conf = { type: 'loopback' };
  if (!CHAIN_ONLY) measure('VERSION (loopback)', RUNS, 0.7, (impl) => exec(impl, 'VERSION', lo).ms);
  if (!CHAIN_ONLY)
    measure('loopback ADD|loopback DEL', RUNS, 0.7, (impl) => [
      exec(impl, 'ADD', lo).ms,
      exec(impl, 'DEL', lo).ms,
    ]);
  if (!CHAIN_ONLY)
    measure('bridge+host-local ADD|bridge+host-local DEL', RUNS, 0.7, (impl) => {
      const add = exec(impl, 'ADD', bridge(impl));
      const del = exec(impl, 'DEL', { ...bridge(impl), prevResult: add.out });
      return [add.ms, del.ms];
    });
  const chainTargets = [0.5, 0.3];
  measure('kubelet chain ADD|kubelet chain DEL', CHAIN_RUNS, undefined, (impl) => {
    // a chain's time: the sum of its plugins' exec times (what the runtime waits for)
    let prev: unknown;
    let add = 0;
    for (const p of chain(impl)) {
      const r = exec(impl, 'ADD', { ...p, ...(prev ? { prevResult: prev } : {}) });
      prev = r.out;
      add += r.ms;
    }
    let del = 0;
    for (const p of [...chain(impl)].reverse()) del += exec(impl, 'DEL', { ...p, prevResult: prev }).ms;
    return [add, del];
  });
  for (const r of rows)
    if (r.op.startsWith('kubelet chain')) r.target = r.op.endsWith('ADD') ? chainTargets[0] : chainTargets[1];

  const rss: Record<string, Record<'warm' | 'cold' | 'go', number>> = {};
  for (const [op, cmd, conf] of CHAIN_ONLY
    ? []
    : ([
        ['VERSION', 'VERSION', lo],
        ['loopback ADD', 'ADD', lo],
      ] as const)) {
    rss[op] = { warm: peak('warm', cmd, conf), cold: peak('cold', cmd, conf), go: peak('go', cmd, conf) };
    if (cmd === 'ADD') for (const impl of IMPLS) exec(impl, 'DEL', lo);
  }
  const load1 = loadavg();

  if (JSON_OUT) {
    console.log(JSON.stringify({ rows, peakRssKiB: rss, loadavg: { before: load0, after: load1 } }));
  } else {
    console.log(
      `warm mode vs cold mode vs Go, exec'd like a runtime; medians (p90); ${RUNS} runs per call, ${CHAIN_RUNS} per chain:`,
    );
    const w = Math.max(...rows.map((r) => r.op.length)) + 2;
    for (const r of rows) {
      const ratio = r.ms.warm / r.ms.go;
      const ok =
        r.target === undefined ? '' : ratio <= r.target ? `  ≤ ${r.target}× ok` : `  > ${r.target}× MISSED`;
      const x =
        r.ms.warmx === undefined
          ? ''
          : `   warmx (iptables-restore) ${r.ms.warmx.toFixed(2)} ms (${r.p90.warmx?.toFixed(2)}) warmx/go ${(r.ms.warmx / r.ms.go).toFixed(2)}×`;
      const b =
        r.ms.base === undefined
          ? ''
          : `   base (${BASELINE}) ${r.ms.base.toFixed(2)} ms (${r.p90.base?.toFixed(2)}) base/go ${(r.ms.base / r.ms.go).toFixed(2)}× warm/base ${(r.ms.warm / r.ms.base).toFixed(2)}×`;
      console.log(
        `  ${r.op.padEnd(w)} warm ${r.ms.warm.toFixed(2)} ms (${r.p90.warm.toFixed(2)})${x}${b}   cold ${r.ms.cold.toFixed(1)} ms (${r.p90.cold.toFixed(1)})   go ${r.ms.go.toFixed(1)} ms (${r.p90.go.toFixed(1)})   warm/go ${ratio.toFixed(2)}×   cold/go ${(r.ms.cold / r.ms.go).toFixed(2)}×${ok}`,
      );
    }
    console.log('peak RSS of the process the runtime starts (GNU time %M, median of 5):');
    for (const [op, v] of Object.entries(rss)) {
      console.log(
        `  ${op.padEnd(w)} warm client ${(v.warm / 1024).toFixed(1)} MiB   cold ${(v.cold / 1024).toFixed(1)} MiB   go ${(v.go / 1024).toFixed(1)} MiB${v.warm <= v.go ? '   ≤ go ok' : '   > go MISSED'}`,
      );
    }
    console.log(
      `load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${load1.map((l) => l.toFixed(2)).join(' ')}`,
    );
    const st = readFileSync(`/proc/${service.pid}/status`, 'utf8');
    console.log(
      `service (one process for every call): VmRSS ${/VmRSS:\s+(\d+)/.exec(st)?.[1]} KiB, VmHWM ${/VmHWM:\s+(\d+)/.exec(st)?.[1]} KiB`,
    );
  }
} finally {
  inHost.restore();
  service.kill('SIGTERM');
  serviceX?.kill('SIGTERM');
  serviceB?.kill('SIGTERM');
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
