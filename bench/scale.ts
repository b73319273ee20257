/**
 * Benchmark: does a plugin's cost grow with the number of pods on the node? N pods are kept alive on one bridge in a
 * private "host" namespace (each pod: its own container namespace and the whole kubelet-style chain, bridge (ipMasq)
 * + host-local, tuning, portmap (one hostPort per pod), bandwidth, added by the Go reference plugins, whose state
 * cnikit shares), and at N = 0, 50, 100, 250 (--levels=…) one probe pod is added and deleted again, --runs times,
 * alternating cnikit cold (dist-bin/), cnikit warm (dist-bin/warm/ against a private `cnikit serve`) and Go
 * (/usr/lib/cni), each exec timed by a C launcher (posix_spawn + waitpid). The probe shares the fillers' host-local and
 * tuning data directories, so directory scans see every pod.
 *
 *   node --conditions=cnikit-source --import tsx bench/scale.ts [--runs=20] [--levels=0,50,100,250] [--trace=5]
 *     [--base=DIR] [--json]
 *
 * --base=DIR: a second cnikit build (a copy of dist-bin/ from another tree) timed in the same alternation, as `cold0`
 * and `warm0` (its own `cnikit serve`): before/after figures from one run.
 *
 * Reported per implementation, plugin and command: the median wall time at each level and the growth (median at the
 * last level / median at the first), the same for the CPU time (user + system of the plugin and the tools it ran;
 * rows `ADD cpu` / `DEL cpu`, much steadier than wall time on a loaded machine; warm: the client's plus what the
 * service's threads used during the call), the chain totals, and the load
 * average before and after the run. Target: growth
 * ≤ 1.2× for every plugin's ADD and DEL (machine noise included: read the ratios, not the absolute figures).
 *
 * Per step (--trace=N, default 5; 0: off): after the timed rounds of a level, N more probe chains of cnikit cold and
 * warm are traced (a W3C trace context per call, `otlpEndpoint` pointing at a collector of the benchmark's own, see
 * docs/observability.md) and each plugin call's spans are summed by step (`delegate host-local ADD`, `netns`,
 * `exec iptables-restore`, …; `(rest)`: the call's span minus its direct children), medians per level. Traced calls
 * are not in the timed figures.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns, type NamedNetns } from '@cnikit/testing';
import { type Conf, kubeletChain } from './lib/chains.ts';
import { type Collector, type SpanRow, startCollector } from './lib/collector.ts';
import { compileLauncher } from './lib/launcher.ts';
import { quantile } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
/** Medians over at least 20 rounds (`--runs` below that only with --strace, which times nothing). */
const RUNS = process.argv.some((a) => a.startsWith('--strace='))
  ? Number(arg('runs', '20'))
  : Math.max(20, Number(arg('runs', '20')));
const LEVELS = arg('levels', '0,50,100,250').split(',').map(Number);
const JSON_OUT = process.argv.includes('--json');
/** --strace=DIR: after each level, one cold probe chain under strace (execs, netlink and directory reads), in DIR. */
const STRACE = arg('strace', '');
/** --trace=N: N traced probe chains per level and cnikit mode, their spans summed per step (0: none). */
const TRACE = Number(arg('trace', '5'));
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';

/** --base=DIR: another cnikit build (a dist-bin copy of an earlier tree) timed beside, as cold0 and warm0. */
const BASE = arg('base', '');
type Impl = 'cold' | 'warm' | 'go' | 'cold0' | 'warm0';
const IMPLS: Impl[] = (
  arg('impls', BASE ? 'cold0,cold,warm0,warm,go' : 'cold,warm,go').split(',') as Impl[]
).filter((i) => ['cold', 'warm', 'go', ...(BASE ? ['cold0', 'warm0'] : [])].includes(i));
const DIRS: Record<Impl, string> = {
  cold: join(ROOT, 'dist-bin'),
  warm: join(ROOT, 'dist-bin', 'warm'),
  go: '/usr/lib/cni',
  cold0: BASE,
  warm0: join(BASE, 'warm'),
};
const isWarm = (i: Impl) => i === 'warm' || i === 'warm0';
/** The multicall executable a warm implementation's service runs. */
const SERVE: Partial<Record<Impl, string>> = {
  warm: join(ROOT, 'dist-bin', 'cnikit'),
  warm0: join(BASE, 'cnikit'),
};
const PLUGINS = ['bridge', 'tuning', 'portmap', 'bandwidth'] as const;
for (const impl of [...IMPLS, 'go' as const])
  for (const p of [...PLUGINS, 'host-local'])
    if (!existsSync(join(DIRS[impl], p))) {
      console.error(
        `bench-scale: ${join(DIRS[impl], p)} missing (npm run build / apt-get install containernetworking-plugins)`,
      );
      process.exit(1);
    }

const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-scale-'));
const runDir = join(scratch, 'run');
mkdirSync(runDir, { mode: 0o700 });
const sockOf = (i: Impl) => join(runDir, `cnikit-${i}.sock`);
/**
 * The Go probe's host-local and tuning state lives in a copy of the fillers' (refreshed at each level), so that the
 * cnikit probes see a directory only cnikit changed between their calls, as on a node that runs one implementation
 * (host-local's listing index is not trusted after another writer's change: docs/plugins/host-local.md).
 */
const goProbeDir = join(scratch, 'go-probe');
const baseProbeDir = join(scratch, 'base-probe');
const probeDir = (i: Impl) =>
  i === 'go' ? goProbeDir : i === 'cold0' || i === 'warm0' ? baseProbeDir : scratch;
const chain = (hostPort: number, dir = scratch): Conf[] =>
  kubeletChain({ bridge: 'cniscale0', subnet: '10.79.0.0/16', dir, hostPort });

const launch = compileLauncher(scratch);
const services: Partial<Record<Impl, ChildProcess>> = {};
for (const impl of IMPLS.filter(isWarm)) {
  const fd = openSync(join(scratch, `service-${impl}.log`), 'a');
  try {
    services[impl] = spawn(SERVE[impl]!, ['serve', '--socket', sockOf(impl)], {
      stdio: ['ignore', 'ignore', fd],
      env: { PATH },
    });
  } finally {
    closeSync(fd);
  }
}
// the warm service exports its spans from the host's namespace, cold plugins from the private one: one collector each
const collectors: Partial<Record<Impl, Collector>> = {};
if (TRACE > 0 && IMPLS.includes('warm')) collectors.warm = startCollector(join(scratch, 'spans-warm'));
const sb = createSandbox({ prefix: 'cnikit-scale' });
const inHost = enterNetns(sb.host.path);
if (TRACE > 0 && IMPLS.includes('cold')) {
  spawnSync('ip', ['link', 'set', 'lo', 'up']); // the private host namespace's loopback, for the cold collector
  collectors.cold = startCollector(join(scratch, 'spans-cold'));
}
const load0 = loadavg();
try {
  for (const impl of IMPLS.filter(isWarm)) {
    for (let i = 0; ; i++) {
      const c = spawnSync(SERVE[impl]!, ['serve', '--check', '--socket', sockOf(impl)], {
        env: { PATH },
      });
      if (c.status === 0) break;
      if (i > 200)
        throw new Error(
          `the service did not start: ${readFileSync(join(scratch, `service-${impl}.log`), 'utf8')}`,
        );
      spawnSync('sleep', ['0.05']);
    }
  }
  /** CPU ns the warm service's threads have used (schedstat), so a warm call's CPU is the service's share. */
  const serviceCpu = (impl: Impl): number => {
    const pid = services[impl]?.pid;
    if (!pid) return 0;
    let ns = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // a thread that ended meanwhile (ESRCH): its time is no longer counted anywhere
      }
    }
    return ns;
  };
  /** While tracing: the calls traced, by trace id (the call's TRACEPARENT names a parent span `PARENT`). */
  let tracing: Map<string, { cmd: string; plugin: string }> | undefined;
  const PARENT = '00f067aa0ba902b7';
  const hex = (n: number) =>
    Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
  const exec = (impl: Impl, cmd: 'ADD' | 'DEL', id: string, ns: NamedNetns, conf: Conf) => {
    const c0 = isWarm(impl) ? serviceCpu(impl) : 0;
    const r = run(impl, cmd, id, ns, conf);
    if (isWarm(impl)) r.cpuMs += (serviceCpu(impl) - c0) / 1e6;
    return r;
  };
  const run = (impl: Impl, cmd: 'ADD' | 'DEL', id: string, ns: NamedNetns, conf: Conf) => {
    const traced: Record<string, string> = {};
    const collector = tracing ? collectors[impl] : undefined;
    if (tracing && collector) {
      const traceId = hex(32);
      tracing.set(traceId, { cmd, plugin: conf.type as string });
      traced.TRACEPARENT = `00-${traceId}-${PARENT}-01`;
      traced.CNIKIT_OTLP_TIMEOUT_MS = '2000';
    }
    return launch(
      join(DIRS[impl], conf.type as string),
      {
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: id,
        CNI_NETNS: ns.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH: DIRS[impl],
        CNIKIT_SOCKET: sockOf(impl),
        PATH,
        ...traced,
      },
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'bench-scale',
        ...conf,
        ...(collector && tracing ? { otlpEndpoint: collector.url } : {}),
      }),
    );
  };
  /**
   * Each traced call's spans summed by step: the path of span names below the call's own span (`netns`,
   * `delegate host-local ADD > host-local ADD`, …) and `(rest)`, the call's span minus its direct children.
   */
  const stepsOf = (spans: SpanRow[], calls: Map<string, { cmd: string; plugin: string }>) => {
    const out: Array<{ cmd: string; plugin: string; steps: Map<string, number> }> = [];
    const byParent = new Map<string, SpanRow[]>();
    for (const s of spans) {
      const k = `${s.traceId}/${s.parentSpanId}`;
      byParent.set(k, [...(byParent.get(k) ?? []), s]);
    }
    for (const [traceId, call] of calls) {
      const root = byParent.get(`${traceId}/${PARENT}`)?.[0];
      if (!root) continue;
      const steps = new Map<string, number>([[root.name, root.ms]]);
      const walk = (s: SpanRow, path: string) => {
        for (const c of byParent.get(`${traceId}/${s.spanId}`) ?? []) {
          const p = path ? `${path} > ${c.name}` : c.name;
          steps.set(p, (steps.get(p) ?? 0) + c.ms);
          walk(c, p);
        }
      };
      walk(root, '');
      const direct = (byParent.get(`${traceId}/${root.spanId}`) ?? []).reduce((a, c) => a + c.ms, 0);
      steps.set('(rest)', root.ms - direct);
      out.push({ ...call, steps });
    }
    return out;
  };
  /** The whole chain's ADD then DEL for one pod; per-plugin times in PLUGINS order. */
  const pod = (impl: Impl, id: string, ns: NamedNetns, hostPort: number, del: boolean) => {
    const add: number[] = [];
    const dels: number[] = [];
    const addCpu: number[] = [];
    const delCpu: number[] = [];
    let prev: unknown;
    const confs = chain(hostPort, id === 'probe' ? probeDir(impl) : scratch);
    for (const p of confs) {
      const r = exec(impl, 'ADD', id, ns, { ...p, ...(prev ? { prevResult: prev } : {}) });
      prev = JSON.parse(r.stdout);
      add.push(r.ms);
      addCpu.push(r.cpuMs);
    }
    if (del)
      for (const p of [...confs].reverse()) {
        const r = exec(impl, 'DEL', id, ns, { ...p, prevResult: prev });
        dels.unshift(r.ms);
        delCpu.unshift(r.cpuMs);
      }
    return { add, del: dels, addCpu, delCpu };
  };

  const probeNs = sb.container;
  const straced = (level: number) => {
    mkdirSync(STRACE, { recursive: true });
    let prev: unknown;
    const confs = chain(18080);
    const one = (cmd: 'ADD' | 'DEL', conf: Conf) => {
      const r = spawnSync(
        'strace',
        [
          '-f',
          '-tt',
          '-T',
          '-s',
          '200',
          '-e',
          'trace=execve,sendto,sendmsg,recvmsg,recvfrom,getdents64,openat,write',
          '-o',
          join(STRACE, `${level}-${conf.type}-${cmd}`),
          join(DIRS.cold, conf.type as string),
        ],
        {
          env: {
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'probe',
            CNI_NETNS: probeNs.path,
            CNI_IFNAME: 'eth0',
            CNI_PATH: DIRS.cold,
            PATH,
          },
          input: JSON.stringify({ cniVersion: '1.0.0', name: 'bench-scale', ...conf }),
          encoding: 'utf8',
        },
      );
      if (r.status !== 0) throw new Error(`strace ${conf.type} ${cmd}: ${r.stdout}${r.stderr}`);
      return r.stdout;
    };
    for (const p of confs) prev = JSON.parse(one('ADD', { ...p, ...(prev ? { prevResult: prev } : {}) }));
    for (const p of [...confs].reverse()) one('DEL', { ...p, prevResult: prev });
  };
  let alive = 0;
  // samples[impl][level][cmd][plugin] = ms[]
  const samples: Record<string, Record<number, Record<string, number[][]>>> = {};
  // stepSamples[impl][`${plugin} ${cmd}`][step][level] = ms[]
  const stepSamples: Record<string, Map<string, Map<string, Map<number, number[]>>>> = {};
  for (const impl of IMPLS) samples[impl] = {};
  const fillT0 = performance.now();
  for (const level of LEVELS) {
    while (alive < level) {
      const ns = sb.newContainer();
      pod('go', `filler-${alive}`, ns, 20000 + alive, false);
      alive++;
    }
    for (const d of [goProbeDir, baseProbeDir]) {
      rmSync(d, { recursive: true, force: true });
      if (existsSync(join(scratch, 'ipam')))
        cpSync(join(scratch, 'ipam'), join(d, 'ipam'), { recursive: true });
    }
    for (const impl of IMPLS) pod(impl, 'probe', probeNs, 18080, true); // warm-up
    for (const impl of IMPLS)
      samples[impl]![level] = {
        ADD: PLUGINS.map(() => []),
        DEL: PLUGINS.map(() => []),
        'ADD cpu': PLUGINS.map(() => []),
        'DEL cpu': PLUGINS.map(() => []),
      };
    for (let n = 0; n < RUNS; n++) {
      for (const impl of n % 2 ? [...IMPLS].reverse() : IMPLS) {
        const r = pod(impl, 'probe', probeNs, 18080, true);
        const s = samples[impl]![level]!;
        for (const [k, ms] of r.add.entries()) s.ADD![k]!.push(ms);
        for (const [k, ms] of r.del.entries()) s.DEL![k]!.push(ms);
        for (const [k, ms] of r.addCpu.entries()) s['ADD cpu']![k]!.push(ms);
        for (const [k, ms] of r.delCpu.entries()) s['DEL cpu']![k]!.push(ms);
      }
    }
    if (STRACE && IMPLS.includes('cold')) straced(level);
    for (const impl of IMPLS) {
      const collector = collectors[impl];
      if (!collector || TRACE <= 0) continue;
      tracing = new Map();
      for (let n = 0; n < TRACE; n++) pod(impl, 'probe', probeNs, 18080, true);
      const calls = tracing;
      tracing = undefined;
      // the warm service sends its spans in batches (a second after the first one)
      let spans: SpanRow[] = [];
      for (let waited = 0; waited < 30; waited++) {
        spans = spans.concat(collector.take());
        if (new Set(spans.map((s) => s.traceId)).size >= calls.size) break;
        spawnSync('sleep', ['0.25']);
      }
      stepSamples[impl] ??= new Map();
      for (const c of stepsOf(spans, calls)) {
        const key = `${c.plugin} ${c.cmd}`;
        const bySteps = stepSamples[impl]!.get(key) ?? new Map<string, Map<number, number[]>>();
        stepSamples[impl]!.set(key, bySteps);
        for (const [step, ms] of c.steps) {
          const byLevel = bySteps.get(step) ?? new Map<number, number[]>();
          bySteps.set(step, byLevel);
          byLevel.set(level, [...(byLevel.get(level) ?? []), ms]);
        }
      }
    }
    if (!JSON_OUT)
      console.error(`  level ${level} done (${((performance.now() - fillT0) / 1000).toFixed(0)} s)`);
  }
  const load1 = loadavg();
  const med = (xs: number[]) => quantile(xs, 0.5);
  const table: Record<string, unknown>[] = [];
  for (const impl of IMPLS)
    for (const cmd of ['ADD', 'DEL', 'ADD cpu', 'DEL cpu'])
      for (const [k, plugin] of [...PLUGINS.entries(), [PLUGINS.length, 'chain'] as const]) {
        const at = LEVELS.map((l) => {
          const s = samples[impl]![l]![cmd]!;
          if (plugin === 'chain') {
            const n = s[0]!.length;
            return med(Array.from({ length: n }, (_, i) => s.reduce((a, xs) => a + xs[i]!, 0)));
          }
          return med(s[k as number]!);
        });
        table.push({ impl, cmd, plugin, ms: at, growth: at.at(-1)! / at[0]! });
      }
  const steps: Record<string, unknown>[] = [];
  for (const [impl, byCall] of Object.entries(stepSamples))
    for (const [call, bySteps] of byCall)
      for (const [step, byLevel] of bySteps) {
        const at = LEVELS.map((l) => (byLevel.has(l) ? med(byLevel.get(l)!) : Number.NaN));
        steps.push({ impl, call, step, ms: at, growth: at.at(-1)! / at[0]! });
      }
  if (JSON_OUT) {
    console.log(JSON.stringify({ levels: LEVELS, runs: RUNS, load: [load0, load1], table, steps }));
  } else {
    console.log(
      `plugin cost vs pods alive on one bridge, ${RUNS} runs per level, medians in ms; load average ${load0.map((x) => x.toFixed(2)).join(' ')} → ${load1.map((x) => x.toFixed(2)).join(' ')}`,
    );
    console.log(
      `  ${'impl'.padEnd(5)} ${'plugin'.padEnd(10)} cmd  ${LEVELS.map((l) => `${l} pods`.padStart(9)).join('')}   growth`,
    );
    for (const r of table)
      console.log(
        `  ${String(r.impl).padEnd(5)} ${String(r.plugin).padEnd(10)} ${String(r.cmd).padEnd(7)}  ${(r.ms as number[]).map((x) => x.toFixed(1).padStart(9)).join('')}   ${(r.growth as number).toFixed(2)}×`,
      );
    if (steps.length) {
      console.log(`per step (spans of ${TRACE} traced chains per level and mode, medians in ms)`);
      for (const r of steps)
        console.log(
          `  ${String(r.impl).padEnd(5)} ${String(r.call).padEnd(14)} ${String(r.step).slice(0, 44).padEnd(44)} ${(r.ms as number[]).map((x) => x.toFixed(2).padStart(8)).join('')}   ${(r.growth as number).toFixed(2)}×`,
        );
    }
    const goChain = (cmd: string) =>
      table.find((r) => r.impl === 'go' && r.cmd === cmd && r.plugin === 'chain');
    for (const impl of IMPLS.filter((i) => i !== 'go'))
      for (const cmd of ['ADD', 'DEL', 'ADD cpu', 'DEL cpu']) {
        const ours = table.find((r) => r.impl === impl && r.cmd === cmd && r.plugin === 'chain')!
          .ms as number[];
        const go = goChain(cmd)?.ms as number[] | undefined;
        if (go)
          console.log(
            `  ${impl}/go chain ${cmd}: ${ours.map((x, i) => (x / go[i]!).toFixed(2)).join(' ')} (per level)`,
          );
      }
  }
} finally {
  inHost.restore();
  for (const s of Object.values(services)) s.kill('SIGTERM');
  for (const c of Object.values(collectors)) void c.stop();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
