/**
 * Off-CPU profile of one warm chain call: the kubelet-style chain of bench/warm.ts through the warm clients, with the
 * service's threads followed by the kernel's scheduler tracepoint (ftrace `sched:sched_switch` with a kernel stack
 * at every switch, in a private tracefs instance, pid-filtered; nothing slows the system calls as strace does). Per
 * plugin call: the client's wall time, the service's time on CPU, waiting for a CPU (runnable), and blocked, each
 * block attributed to the kernel function it waited in (synchronize_rcu / synchronize_net / rcu_barrier during a
 * link's unregistration, netdev_wait_allrefs, an fsync's journal commit, a futex between the service's threads, the
 * epoll wait for the client's bytes), and what the client spends outside the service's handling.
 *   node --conditions=cnikit-source --import tsx bench/warm-offcpu.ts [--runs=10] [--json] [--dist=DIR]
 * Needs tracefs (mounted on a private directory if /sys/kernel/tracing is not) and dist-bin/warm.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { type Conf, kubeletChain } from './lib/chains.ts';
import { compileLauncher } from './lib/launcher.ts';
import { median } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '10'));
const JSON_OUT = process.argv.includes('--json');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
/** --dist=DIR: another build's dist-bin (e.g. a copy made before a change), profiled the same way. */
const DIST = arg('dist', join(ROOT, 'dist-bin'));
const WARM = join(DIST, 'warm');

if (!existsSync(join(WARM, 'bridge'))) {
  console.error('warm-offcpu: needs dist-bin/warm (npm run build)');
  process.exit(1);
}
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-offcpu-'));
const runDir = join(scratch, 'run');
mkdirSync(runDir, { mode: 0o700 });
const SOCK = join(runDir, 'cnikit.sock');

// tracefs: the usual mount, else a private one; an instance of our own so no other user's buffer is touched
let tracefs = '/sys/kernel/tracing';
let mounted = false;
if (!existsSync(join(tracefs, 'instances'))) {
  tracefs = join(scratch, 'tracefs');
  mkdirSync(tracefs);
  const m = spawnSync('mount', ['-t', 'tracefs', 'nodev', tracefs], { encoding: 'utf8' });
  if (m.status !== 0) {
    console.error(`warm-offcpu: cannot mount tracefs: ${m.stderr}`);
    process.exit(1);
  }
  mounted = true;
}
const INST = join(tracefs, 'instances', `cnikit-offcpu-${process.pid}`);
const tw = (f: string, v: string) => writeFileSync(join(INST, f), v);

const GO = '/usr/lib/cni';
const GO_COMMS = ['bridge', 'host-local', 'tuning', 'portmap', 'bandwidth'];
const chain = (impl: string): Conf[] =>
  kubeletChain({ bridge: 'cnioc0', subnet: '10.78.0.0/16', dir: join(scratch, impl), hostPort: 18083 });
const fmt = (b: Record<string, number>) =>
  Object.entries(b)
    .map(([w, v]) => `${w} ${v.toFixed(2)}`)
    .join(', ');

/** Kernel functions a blocked thread's stack is attributed to: the first entry any frame of the stack matches. */
const WAITS: Array<[RegExp, string]> = [
  // a link created/deleted while another thread holds the namespace's nf_tables commit mutex
  [/^nf_tables_netdev_event/, 'nf_tables commit mutex (link notifier)'],
  [/^synchronize_rcu_expedited/, 'synchronize_rcu_expedited'],
  [/^synchronize_net/, 'synchronize_net'],
  [/^rcu_barrier/, 'rcu_barrier'],
  [/^synchronize_rcu/, 'synchronize_rcu'],
  [/^netdev_wait_allrefs/, 'netdev_wait_allrefs'],
  [/^(jbd2_|ext4_sync_file|file_write_and_wait|xfs_file_fsync|vfs_fsync)/, 'fsync'],
  [/^(do_epoll_wait|ep_poll)/, 'epoll (client / idle)'],
  [/^(futex_wait|do_futex)/, 'futex (other service thread)'],
  [/^(unix_stream_read|unix_stream_recvmsg|sock_recvmsg|netlink_recvmsg)/, 'socket read'],
  [/^(do_wait|kernel_wait4)/, 'wait4 (tool)'],
  [/^(mutex_lock|__mutex_lock|rtnl_lock|rtnl_mutex)/, 'mutex (rtnl)'],
];
function classify(stack: string[]): string {
  for (const [re, name] of WAITS) if (stack.some((f) => re.test(f))) return name;
  return `other: ${stack.slice(2, 5).join(' < ')}`;
}

interface Sw {
  t: number;
  prevComm: string;
  prev: number;
  prevState: string;
  next: number;
  stack: string[];
}
function parse(text: string): Sw[] {
  const out: Sw[] = [];
  let cur: Sw | undefined;
  for (const line of text.split('\n')) {
    const m =
      / (\d+\.\d+): sched_switch: prev_comm=(.*) prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+) /.exec(
        line,
      );
    if (m) {
      cur = {
        t: Number(m[1]),
        prevComm: m[2]!,
        prev: Number(m[3]),
        prevState: m[4]!,
        next: Number(m[5]),
        stack: [],
      };
      out.push(cur);
      continue;
    }
    const f = /^ => (\S+)/.exec(line);
    if (f && cur) cur.stack.push(f[1]!.replace(/\+0x.*$/, ''));
  }
  return out;
}

interface Interval {
  tid: number;
  t0: number;
  t1: number;
  kind: 'cpu' | 'runnable' | 'blocked';
  why: string;
}
/** Per service thread: on-CPU intervals (switch in → out) and off-CPU ones (out → in) with the reason. */
function intervals(sw: Sw[], tids: Set<number>): Interval[] {
  const out: Interval[] = [];
  const lastIn = new Map<number, number>();
  const lastOut = new Map<number, Sw>();
  for (const s of sw) {
    if (tids.has(s.prev)) {
      const i = lastIn.get(s.prev);
      if (i !== undefined) out.push({ tid: s.prev, t0: i, t1: s.t, kind: 'cpu', why: 'cpu' });
      lastIn.delete(s.prev);
      lastOut.set(s.prev, s);
    }
    if (tids.has(s.next)) {
      lastIn.set(s.next, s.t);
      const o = lastOut.get(s.next);
      if (o) {
        const runnable = o.prevState === 'R' || o.prevState === 'R+';
        out.push({
          tid: s.next,
          t0: o.t,
          t1: s.t,
          kind: runnable ? 'runnable' : 'blocked',
          why: runnable ? 'runnable (preempted)' : classify(o.stack),
        });
      }
    }
  }
  return out;
}

let launch: ReturnType<typeof compileLauncher>;
try {
  launch = compileLauncher(scratch);
} catch (e) {
  console.error(`warm-offcpu: ${(e as Error).message}`);
  process.exit(1);
}
const sb = createSandbox({ prefix: 'woffcpu' });
const inHost = enterNetns(sb.host.path);
let service: ChildProcess | undefined;
const mono = () => Number(process.hrtime.bigint()) / 1e9;
try {
  const fd = openSync(join(scratch, 'service.log'), 'a');
  service = spawn(join(DIST, 'cnikit'), ['serve', '--socket', SOCK], {
    stdio: ['ignore', 'ignore', fd],
    // BUN_OPTIONS (e.g. "--cpu-prof --cpu-prof-dir=DIR") passed through: a JavaScript profile of the service
    env: process.env.BUN_OPTIONS ? { PATH, BUN_OPTIONS: process.env.BUN_OPTIONS } : { PATH },
  });
  closeSync(fd);
  for (let i = 0; ; i++) {
    const r = spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', SOCK], {
      env: { PATH },
    });
    if (r.status === 0) break;
    if (i > 200) throw new Error('the service did not start');
    spawnSync('sleep', ['0.05']);
  }
  const pid = service.pid!;
  const env = (dir: string, cmd: string): Record<string, string> => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'bench-offcpu',
    CNI_NETNS: sb.container.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: dir,
    CNIKIT_SOCKET: SOCK,
    PATH,
  });
  const exec = (dir: string, cmd: string, conf: Conf) => {
    const input = JSON.stringify({ cniVersion: '1.0.0', name: 'bench-offcpu', ...conf });
    const r = launch(join(dir, conf.type as string), env(dir, cmd), input);
    return { ms: r.ms, out: r.stdout ? JSON.parse(r.stdout) : undefined };
  };
  const once = (dir: string, impl: string) => {
    const calls: Array<{ op: string; t0: number; t1: number; ms: number }> = [];
    let prev: unknown;
    for (const p of chain(impl)) {
      const t0 = mono();
      const r = exec(dir, 'ADD', prev ? { ...p, prevResult: prev } : p);
      calls.push({ op: `${p.type} ADD`, t0, t1: mono(), ms: r.ms });
      prev = r.out;
    }
    for (const p of [...chain(impl)].reverse()) {
      const t0 = mono();
      const r = exec(dir, 'DEL', { ...p, prevResult: prev });
      calls.push({ op: `${p.type} DEL`, t0, t1: mono(), ms: r.ms });
    }
    return calls;
  };
  once(WARM, 'warm'); // warm-up: every module loaded, every socket opened
  once(GO, 'go');
  mkdirSync(INST);
  tw('trace_clock', 'mono');
  tw('buffer_size_kb', '16384');
  tw('options/event-fork', '1');
  tw('events/sched/sched_switch/trigger', 'stacktrace');
  const load0 = loadavg().map((x) => x.toFixed(1));
  /** Trace RUNS chains of one implementation; returns the rounds and the scheduler intervals of `tids`. */
  const traceRounds = (dir: string, impl: string, tids: Set<number> | undefined) => {
    tw('trace', '');
    if (tids) tw('set_event_pid', [...tids].join(' '));
    else {
      tw('set_event_pid', '');
      // the Go plugins: one process per call, recognised by their command names
      tw(
        'events/sched/sched_switch/filter',
        GO_COMMS.map((c) => `prev_comm == "${c}" || next_comm == "${c}"`).join(' || '),
      );
    }
    tw('events/sched/sched_switch/enable', '1');
    tw('tracing_on', '1');
    const rounds: Array<ReturnType<typeof once>> = [];
    for (let i = 0; i < RUNS; i++) rounds.push(once(dir, impl));
    tw('tracing_on', '0');
    tw('events/sched/sched_switch/enable', '0');
    tw('events/sched/sched_switch/filter', '0');
    const raw = readFileSync(join(INST, 'trace'), 'utf8');
    if (process.env.OFFCPU_RAW) writeFileSync(`${process.env.OFFCPU_RAW}.${impl}`, raw);
    const sw = parse(raw);
    const all = tids ?? new Set(sw.filter((s) => GO_COMMS.includes(s.prevComm)).map((s) => s.prev));
    return { rounds, ivs: intervals(sw, all) };
  };
  const warm = traceRounds(WARM, 'warm', new Set(readdirSync(`/proc/${pid}/task`).map(Number)));
  const go = traceRounds(GO, 'go', undefined);
  const load1 = loadavg().map((x) => x.toFixed(1));

  /**
   * Per call of one implementation. `main`: the service's main thread (it handles every request; the handling is
   * its first to last time on CPU in the call's window); undefined for the Go plugins (every thread of the plugin's
   * process, the call's whole window, idle Go runtime threads' futex/epoll waits left out).
   */
  const analyse = (rounds: Array<ReturnType<typeof once>>, ivs: Interval[], main: number | undefined) =>
    rounds[0]!.map((_, k) => {
      const per = rounds.map((calls) => {
        const c = calls[k]!;
        const mine = ivs.filter((iv) => iv.t1 > c.t0 && iv.t0 < c.t1);
        const mainCpu = mine.filter((iv) => (main === undefined || iv.tid === main) && iv.kind === 'cpu');
        const h0 = main === undefined ? c.t0 : Math.max(c.t0, Math.min(...mainCpu.map((iv) => iv.t0)));
        const h1 = main === undefined ? c.t1 : Math.min(c.t1, Math.max(...mainCpu.map((iv) => iv.t1)));
        const inH = (iv: Interval) => Math.max(0, Math.min(iv.t1, h1) - Math.max(iv.t0, h0)) * 1e3;
        const blocked: Record<string, number> = {};
        for (const iv of mine) {
          if (iv.kind === 'cpu' || (main !== undefined && iv.tid !== main)) continue;
          if (main === undefined && /^(futex|epoll|other)/.test(iv.why)) continue;
          blocked[iv.why] = (blocked[iv.why] ?? 0) + inH(iv);
        }
        const otherCpu = mine
          .filter((iv) => main !== undefined && iv.tid !== main && iv.kind === 'cpu')
          .reduce((a, iv) => a + inH(iv), 0);
        const handled = (h1 - h0) * 1e3;
        const cpu = mainCpu.reduce((a, iv) => a + inH(iv), 0);
        return { client: c.ms, handled, cpu, otherCpu, outside: c.ms - handled, blocked };
      });
      const whys = [...new Set(per.flatMap((p) => Object.keys(p.blocked)))];
      return {
        op: rounds[0]![k]!.op,
        clientMs: median(per.map((p) => p.client)),
        handledMs: median(per.map((p) => p.handled)),
        cpuMs: median(per.map((p) => p.cpu)),
        otherThreadsCpuMs: median(per.map((p) => p.otherCpu)),
        outsideServiceMs: median(per.map((p) => p.outside)),
        blockedMs: Object.fromEntries(
          whys
            .map((w) => [w, median(per.map((p) => p.blocked[w] ?? 0))] as const)
            .filter(([, v]) => v >= 0.05)
            .sort((a, b) => b[1] - a[1]),
        ),
      };
    });
  const result = { warm: analyse(warm.rounds, warm.ivs, pid), go: analyse(go.rounds, go.ivs, undefined) };
  if (JSON_OUT) console.log(JSON.stringify({ runs: RUNS, load: [load0, load1], ...result }));
  else {
    console.log(
      `warm chain off-CPU profile, ${RUNS} rounds each (warm, then Go), medians (ms); load average ${load0.join(' / ')} → ${load1.join(' / ')}`,
    );
    console.log(
      'warm: call       client  handling  main-CPU  other-thr-CPU  client-side  | main thread blocked, by kernel wait',
    );
    for (const r of result.warm)
      console.log(
        `  ${r.op.padEnd(14)} ${r.clientMs.toFixed(2).padStart(6)}  ${r.handledMs.toFixed(2).padStart(8)}  ${r.cpuMs.toFixed(2).padStart(8)}  ${r.otherThreadsCpuMs.toFixed(2).padStart(13)}  ${r.outsideServiceMs.toFixed(2).padStart(11)}  | ${fmt(r.blockedMs)}`,
      );
    console.log(
      'Go:   call       wall    CPU (all threads)  | blocked, by kernel wait (idle runtime threads left out)',
    );
    for (const r of result.go)
      console.log(
        `  ${r.op.padEnd(14)} ${r.clientMs.toFixed(2).padStart(6)}  ${r.cpuMs.toFixed(2).padStart(8)}  | ${fmt(r.blockedMs)}`,
      );
  }
} finally {
  if (existsSync(INST)) {
    try {
      tw('tracing_on', '0');
      tw('events/sched/sched_switch/enable', '0');
      tw('events/sched/sched_switch/filter', '0');
      tw('events/sched/sched_switch/trigger', '!stacktrace');
    } catch {}
    spawnSync('rmdir', [INST]); // an instance is removed with rmdir, not by removing its files
  }
  if (mounted) spawnSync('umount', [tracefs]);
  if (service) {
    // SIGTERM: the service ends normally (a profile asked for by BUN_OPTIONS is written); SIGKILL after 5 s
    const s = service;
    const exited = new Promise((r) => s.once('exit', r));
    s.kill('SIGTERM');
    const t = setTimeout(() => s.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
  }
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
