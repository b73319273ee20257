/**
 * Where one warm chain call goes: the kubelet-style chain of bench/warm.ts (bridge ipMasq + host-local, tuning,
 * portmap, bandwidth) through the warm clients, with the service run under `strace -f` (timestamps and time in each
 * system call), in a private host and container namespace. Per plugin call and step: the client (spawn to exit), the
 * service's request handling (first to last system call of the handling thread), the tools it starts (fork to
 * wait4, by program), fsync/fdatasync, netlink and other socket I/O, file I/O, and what is left (JavaScript and
 * everything not in a system call). strace slows every system call, so read the shares, not the absolute times;
 * the client's wall time is also measured without strace first.
 *   node --conditions=cnikit-source --import tsx bench/warm-profile.ts [--runs=10] [--json]
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
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
const WARM = join(ROOT, 'dist-bin', 'warm');
const GO = '/usr/lib/cni';

if (!existsSync(join(WARM, 'bridge')) || !existsSync('/usr/bin/strace')) {
  console.error('warm-profile: needs dist-bin/warm (npm run build) and strace');
  process.exit(1);
}
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-wprof-'));
const runDir = join(scratch, 'run');
mkdirSync(runDir, { mode: 0o700 });
const SOCK = join(runDir, 'cnikit.sock');
const TRACE = join(scratch, 'service.strace');

const chain = (impl: string): Conf[] =>
  kubeletChain({ bridge: 'cniwp0', subnet: '10.79.0.0/16', dir: join(scratch, impl), hostPort: 18082 });

function startService(traced: boolean): ChildProcess {
  const fd = openSync(join(scratch, 'service.log'), 'a');
  try {
    const exe = join(ROOT, 'dist-bin', 'cnikit');
    const args = ['serve', '--socket', SOCK];
    return traced
      ? spawn('strace', ['-f', '-ttt', '-T', '-qq', '-s', '64', '-o', TRACE, exe, ...args], {
          stdio: ['ignore', 'ignore', fd],
          env: { PATH },
        })
      : spawn(exe, args, { stdio: ['ignore', 'ignore', fd], env: { PATH } });
  } finally {
    closeSync(fd);
  }
}

/** Waits until the service answers; returns its pid (under strace, the child of the strace process). */
function waitService(): number {
  for (let i = 0; ; i++) {
    const r = spawnSync(join(ROOT, 'dist-bin', 'cnikit'), ['serve', '--check', '--socket', SOCK], {
      env: { PATH },
      encoding: 'utf8',
    });
    if (r.status === 0) return Number(/service pid (\d+)/.exec(`${r.stdout}${r.stderr}`)?.[1]);
    if (i > 200)
      throw new Error(`the service did not start: ${readFileSync(join(scratch, 'service.log'), 'utf8')}`);
    spawnSync('sleep', ['0.05']);
  }
}

interface Sys {
  pid: number;
  t: number;
  name: string;
  args: string;
  dur: number;
}

/** Parse `strace -f -ttt -T` lines (unfinished/resumed pairs joined). */
function parseTrace(text: string): Sys[] {
  const out: Sys[] = [];
  const pending = new Map<string, { t: number; head: string }>();
  for (const line of text.split('\n')) {
    let m = /^(\d+)\s+(\d+\.\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const pid = Number(m[1]);
    const t = Number(m[2]);
    let rest = m[3]!;
    const unf = /^(\w+)\((.*) <unfinished \.\.\.>$/.exec(rest);
    if (unf) {
      pending.set(`${pid}:${unf[1]}`, { t, head: unf[2]! });
      continue;
    }
    const res = /^<\.\.\. (\w+) resumed>(.*)$/.exec(rest);
    let start = t;
    if (res) {
      const p = pending.get(`${pid}:${res[1]}`);
      pending.delete(`${pid}:${res[1]}`);
      rest = `${res[1]}(${p?.head ?? ''}${res[2]}`;
      if (p) start = p.t;
    }
    m = /^(\w+)\((.*)\)\s+=\s+.*<(\d+\.\d+)>$/.exec(rest);
    if (!m) continue;
    out.push({ pid, t: start, name: m[1]!, args: m[2]!, dur: Number(m[3]) });
  }
  return out;
}

const STEPS = [
  'tools',
  'fsync',
  'netlink+sockets',
  'file I/O',
  'other syscalls',
  'rest (JS, not in a syscall)',
] as const;
type Step = (typeof STEPS)[number];

/** Classify the service's system calls between t0 and t1 into steps (ms); tools by program name. */
function breakdown(sys: Sys[], t0: number, t1: number, servicePids: Set<number>) {
  const inWin = sys.filter((s) => s.t >= t0 && s.t <= t1);
  const steps: Record<Step, number> = Object.fromEntries(STEPS.map((s) => [s, 0])) as Record<Step, number>;
  const tools: Record<string, number> = {};
  // tool processes: a child's life from its execve to its exit, attributed by program
  const execs = inWin.filter((s) => s.name === 'execve' && !servicePids.has(s.pid));
  const toolPids = new Set(execs.map((e) => e.pid));
  for (const e of execs) {
    const prog = /^"([^"]+)"/.exec(e.args)?.[1]?.split('/').at(-1) ?? '?';
    const mine = inWin.filter((s) => s.pid === e.pid);
    const end = Math.max(...mine.map((s) => s.t + s.dur));
    tools[prog] = (tools[prog] ?? 0) + (end - e.t) * 1e3;
  }
  // the service thread(s) that handled the call: every non-tool pid active in the window
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const s of inWin) {
    if (toolPids.has(s.pid)) continue;
    first = Math.min(first, s.t);
    last = Math.max(last, s.t + s.dur);
    const ms = s.dur * 1e3;
    if (
      s.name === 'wait4' ||
      s.name === 'waitid' ||
      s.name === 'clone' ||
      s.name === 'clone3' ||
      s.name === 'vfork'
    )
      steps.tools += ms;
    else if (s.name === 'fsync' || s.name === 'fdatasync') steps.fsync += ms;
    else if (
      /^(sendmsg|recvmsg|sendto|recvfrom|socket|bind|connect|getsockname|setsockopt|accept4?)$/.test(s.name)
    )
      steps['netlink+sockets'] += ms;
    else if (
      /^(openat|read|write|pread64|pwrite64|close|newfstatat|fstat|statx|rename|renameat2|unlink|unlinkat|mkdir|mkdirat|getdents64|flock|fcntl|lseek|readlink|readlinkat)$/.test(
        s.name,
      )
    )
      steps['file I/O'] += ms;
    else if (s.name !== 'epoll_wait' && s.name !== 'epoll_pwait' && s.name !== 'futex')
      steps['other syscalls'] += ms;
  }
  const handled = last > first ? (last - first) * 1e3 : 0;
  const inSys = STEPS.slice(0, 5).reduce((a, k) => a + steps[k], 0);
  steps['rest (JS, not in a syscall)'] = Math.max(0, handled - inSys);
  return { handled, steps, tools };
}

let launch: ReturnType<typeof compileLauncher>;
try {
  launch = compileLauncher(scratch);
} catch (e) {
  console.error(`warm-profile: ${(e as Error).message}`);
  process.exit(1);
}
const sb = createSandbox({ prefix: 'wprof' });
const inHost = enterNetns(sb.host.path);
let service: ChildProcess | undefined;
let tracedPid: number | undefined;
try {
  const env = (dir: string, cmd: string): Record<string, string> => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'bench-wprof',
    CNI_NETNS: sb.container.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: dir,
    CNIKIT_SOCKET: SOCK,
    PATH,
  });
  const exec = (dir: string, impl: string, cmd: string, conf: Conf) => {
    const input = JSON.stringify({ cniVersion: '1.0.0', name: 'bench-wprof', ...conf });
    const r = launch(join(dir, conf.type as string), env(dir, cmd), input);
    return { ms: r.ms, out: r.stdout ? JSON.parse(r.stdout) : undefined, impl };
  };
  /** One chain ADD then DEL; per plugin: [start, end] (epoch s) and client ms. */
  const once = (dir: string, impl: string) => {
    const calls: Array<{ op: string; t0: number; t1: number; ms: number }> = [];
    let prev: unknown;
    for (const p of chain(impl)) {
      const t0 = Date.now() / 1e3;
      const r = exec(dir, impl, 'ADD', prev ? { ...p, prevResult: prev } : p);
      calls.push({ op: `${p.type} ADD`, t0, t1: Date.now() / 1e3, ms: r.ms });
      prev = r.out;
    }
    for (const p of [...chain(impl)].reverse()) {
      const t0 = Date.now() / 1e3;
      const r = exec(dir, impl, 'DEL', { ...p, prevResult: prev });
      calls.push({ op: `${p.type} DEL`, t0, t1: Date.now() / 1e3, ms: r.ms });
    }
    return calls;
  };
  const load0 = loadavg().map((x) => x.toFixed(1));
  // 1. without strace: warm and Go alternating (the ratios this profile explains)
  service = startService(false);
  waitService();
  const plain: Record<string, Record<string, number[]>> = { warm: {}, go: {} };
  for (let i = 0; i < RUNS + 1; i++) {
    for (const [impl, dir] of [
      ['warm', WARM],
      ['go', GO],
    ] as const) {
      const calls = once(dir, impl);
      if (i === 0) continue; // warm-up
      for (const c of calls) {
        const xs = plain[impl]![c.op] ?? [];
        xs.push(c.ms);
        plain[impl]![c.op] = xs;
      }
    }
  }
  service.kill('SIGTERM');
  await new Promise((r) => service?.once('exit', r));
  // 2. the service under strace
  service = startService(true);
  tracedPid = waitService();
  const traced: Array<ReturnType<typeof once>> = [];
  for (let i = 0; i < RUNS + 1; i++) {
    const calls = once(WARM, 'warm');
    if (i > 0) traced.push(calls);
  }
  // SIGTERM to strace would detach it and leave the service running: stop the service, strace then exits
  process.kill(tracedPid, 'SIGTERM');
  tracedPid = undefined;
  await new Promise((r) => service?.once('exit', r));
  service = undefined;
  const load1 = loadavg().map((x) => x.toFixed(1));
  const sys = parseTrace(readFileSync(TRACE, 'utf8'));
  const servicePids = new Set<number>();
  // the service's own threads: pids that never called execve
  const execPids = new Set(sys.filter((s) => s.name === 'execve').map((s) => s.pid));
  for (const s of sys) if (!execPids.has(s.pid)) servicePids.add(s.pid);
  const ops = traced[0]!.map((c) => c.op);
  const rows = ops.map((op, k) => {
    const per = traced.map((calls) => breakdown(sys, calls[k]!.t0, calls[k]!.t1, servicePids));
    const steps = Object.fromEntries(STEPS.map((s) => [s, median(per.map((p) => p.steps[s]))]));
    const toolNames = [...new Set(per.flatMap((p) => Object.keys(p.tools)))];
    const tools = Object.fromEntries(toolNames.map((n) => [n, median(per.map((p) => p.tools[n] ?? 0))]));
    return {
      op,
      warmMs: median(plain.warm![op]!),
      goMs: median(plain.go![op]!),
      tracedClientMs: median(traced.map((c) => c[k]!.ms)),
      handledMs: median(per.map((p) => p.handled)),
      steps,
      tools,
    };
  });
  const sum = (f: (r: (typeof rows)[number]) => number, verb: string) =>
    rows.filter((r) => r.op.endsWith(verb)).reduce((a, r) => a + f(r), 0);
  if (JSON_OUT) {
    console.log(JSON.stringify({ runs: RUNS, load: [load0, load1], rows }));
  } else {
    console.log(
      `warm chain profile, ${RUNS} rounds, medians; load average ${load0.join(' / ')} → ${load1.join(' / ')}`,
    );
    for (const verb of ['ADD', 'DEL']) {
      const w = sum((r) => r.warmMs, verb);
      const g = sum((r) => r.goMs, verb);
      console.log(
        `chain ${verb} (no strace): warm ${w.toFixed(1)} ms, Go ${g.toFixed(1)} ms, ${(w / g).toFixed(2)}×`,
      );
    }
    console.log('per call (ms; warm and Go without strace; the rest under strace):');
    for (const r of rows) {
      const st = STEPS.map((s) => `${s} ${r.steps[s]!.toFixed(2)}`).join(', ');
      const tl = Object.entries(r.tools)
        .map(([n, v]) => `${n} ${v.toFixed(2)}`)
        .join(', ');
      console.log(
        `  ${r.op.padEnd(15)} warm ${r.warmMs.toFixed(2)} Go ${r.goMs.toFixed(2)} | traced client ${r.tracedClientMs.toFixed(2)}, service ${r.handledMs.toFixed(2)}: ${st}${tl ? ` [tools: ${tl}]` : ''}`,
      );
    }
  }
} finally {
  if (tracedPid) process.kill(tracedPid, 'SIGKILL');
  if (service) service.kill('SIGKILL');
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
