/**
 * The warm service's periodic, node-scoped CNI GC: every CNIKIT_GC_INTERVAL the service runs
 * `cnikit tool gc --from-cri $CNIKIT_CRI_SOCKET --json` (libcni's cri-gc.ts: the valid attachments are the runtime's
 * pod sandboxes; nothing is released when the runtime cannot be asked), so what a node reboot or a runtime crash
 * leaked in host-local's store is released without an operator.
 *
 * The GC runs as a child process of the service's own executable, started only between two connections (tick() is
 * called from the accept loop): the service's main thread is then in its own network namespace, which the child
 * inherits, and a slow GC never delays a plugin call. Its outcome is counted in the service's metrics:
 *
 *   cnikit_serve_gc_runs_total{result}                    counter (ok, error)
 *   cnikit_serve_gc_released_total{kind}                  counter (host-local: addresses; cache: cached attachments)
 *   cnikit_serve_gc_sandboxes                             gauge   (pod sandboxes the runtime listed at the last run)
 *   cnikit_serve_gc_last_run_timestamp_seconds            gauge   (when the last run ended, Unix time)
 *   cnikit_serve_gc_last_success_timestamp_seconds        gauge
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname } from 'node:path';

export const DEFAULT_CRI_SOCKET = '/run/containerd/containerd.sock';
/** A GC run that takes longer than this is killed (and counted as an error). */
export const GC_RUN_TIMEOUT_MS = 300_000;

export interface GcLoopOptions {
  intervalMs: number;
  socket: string;
  /** --grace of cnitool (seconds); undefined: its default. */
  graceSeconds?: number;
}

/**
 * CNIKIT_GC_INTERVAL (`90s`, `10m`, `1h`, or seconds; `0`/`off`: no periodic GC, the default), CNIKIT_CRI_SOCKET
 * (default containerd's), CNIKIT_GC_GRACE (seconds). undefined: off.
 */
export function parseGcEnv(env: Readonly<Record<string, string | undefined>>): GcLoopOptions | undefined {
  const raw = (env.CNIKIT_GC_INTERVAL ?? '').trim();
  if (raw === '' || raw === '0' || /^(off|false|no)$/i.test(raw)) return undefined;
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(raw);
  if (!m)
    throw new Error(
      `CNIKIT_GC_INTERVAL must be a duration such as 10m, 90s or 1h, or off; got ${JSON.stringify(raw)}`,
    );
  const intervalMs = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 's' | 'm' | 'h'];
  if (intervalMs < 1000)
    throw new Error(`CNIKIT_GC_INTERVAL must be at least 1s; got ${JSON.stringify(raw)}`);
  const opts: GcLoopOptions = { intervalMs, socket: env.CNIKIT_CRI_SOCKET || DEFAULT_CRI_SOCKET };
  const grace = env.CNIKIT_GC_GRACE;
  if (grace !== undefined && grace !== '') {
    const g = Number(grace);
    if (!Number.isFinite(g) || g < 0)
      throw new Error(`CNIKIT_GC_GRACE must be seconds >= 0; got ${JSON.stringify(grace)}`);
    opts.graceSeconds = g;
  }
  return opts;
}

interface Report {
  sandboxes: unknown[];
  networks: { released: { kind: string }[]; errors: string[] }[];
}

export class GcLoop {
  readonly opts: GcLoopOptions;
  readonly #exe: string;
  readonly #log: (line: string) => void;
  #next: number;
  #child: ChildProcess | undefined;
  #runs = { ok: 0, error: 0 };
  #released: Record<string, number> = { 'host-local': 0, cache: 0 };
  #sandboxes = 0;
  #lastRun = 0;
  #lastSuccess = 0;

  /** The first run comes one interval after the start (`firstDelayMs` to change that). */
  constructor(
    opts: GcLoopOptions,
    exe: string,
    log: (line: string) => void,
    firstDelayMs = opts.intervalMs,
    now = Date.now(),
  ) {
    this.opts = opts;
    this.#exe = exe;
    this.#log = log;
    this.#next = now + firstDelayMs;
  }

  /** A run is under way. */
  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Called between connections: starts a run when one is due and none is running. */
  tick(now = Date.now()): void {
    if (this.#child || now < this.#next) return;
    this.#next = now + this.opts.intervalMs;
    const args = ['tool', 'gc', '--from-cri', this.opts.socket, '--json'];
    if (this.opts.graceSeconds !== undefined) args.push('--grace', String(this.opts.graceSeconds));
    const env = { ...process.env, CNI_PATH: process.env.CNI_PATH || dirname(this.#exe) };
    let child: ChildProcess;
    try {
      child = spawn(this.#exe, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    } catch (e) {
      this.#done(false, `cannot start ${this.#exe}: ${(e as Error).message}`);
      return;
    }
    this.#child = child;
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d));
    child.stderr?.on('data', (d: Buffer) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), GC_RUN_TIMEOUT_MS);
    child.on('error', (e) => {
      clearTimeout(timer);
      this.#child = undefined;
      this.#done(false, `cannot run ${this.#exe}: ${e.message}`);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (this.#child !== child) return;
      this.#child = undefined;
      let report: Report | undefined;
      try {
        report = out.trim() ? (JSON.parse(out) as Report) : undefined;
      } catch {
        // not a report: counted as an error below
      }
      if (report) {
        this.#sandboxes = report.sandboxes.length;
        for (const n of report.networks)
          for (const r of n.released) this.#released[r.kind] = (this.#released[r.kind] ?? 0) + 1;
        const released = report.networks.reduce((a, n) => a + n.released.length, 0);
        if (released > 0) this.#log(`gc: released ${released} stale attachment(s) of vanished sandboxes`);
      }
      const ok = code === 0 && report !== undefined;
      const why = signal ? `killed by ${signal}` : `exit ${code}`;
      this.#done(
        ok,
        ok ? '' : `gc --from-cri ${this.opts.socket} failed (${why}): ${err.trim() || out.trim()}`,
      );
    });
  }

  #done(ok: boolean, message: string): void {
    this.#lastRun = Date.now() / 1000;
    if (ok) {
      this.#runs.ok++;
      this.#lastSuccess = this.#lastRun;
    } else {
      this.#runs.error++;
      this.#log(`warning: ${message}`);
    }
  }

  /** Stops a run under way (the service stops or re-executes). */
  stop(): void {
    this.#child?.kill('SIGTERM');
  }

  /** The GC's metrics, in the service's exposition format. */
  render(): string {
    const out = [
      '# HELP cnikit_serve_gc_runs_total Periodic CNI GC runs from the CRI sandboxes, by result (error: the runtime could not be asked, or a release failed).',
      '# TYPE cnikit_serve_gc_runs_total counter',
      `cnikit_serve_gc_runs_total{result="ok"} ${this.#runs.ok}`,
      `cnikit_serve_gc_runs_total{result="error"} ${this.#runs.error}`,
      '# HELP cnikit_serve_gc_released_total What the periodic GC released, by kind (host-local: addresses; cache: cached attachments).',
      '# TYPE cnikit_serve_gc_released_total counter',
      ...Object.keys(this.#released)
        .sort()
        .map((k) => `cnikit_serve_gc_released_total{kind="${k}"} ${this.#released[k]}`),
      '# HELP cnikit_serve_gc_sandboxes Pod sandboxes the runtime listed at the last successful GC run.',
      '# TYPE cnikit_serve_gc_sandboxes gauge',
      `cnikit_serve_gc_sandboxes ${this.#sandboxes}`,
      '# HELP cnikit_serve_gc_last_run_timestamp_seconds When the last GC run ended (Unix time; 0: none yet).',
      '# TYPE cnikit_serve_gc_last_run_timestamp_seconds gauge',
      `cnikit_serve_gc_last_run_timestamp_seconds ${this.#lastRun}`,
      '# HELP cnikit_serve_gc_last_success_timestamp_seconds When the last successful GC run ended (Unix time; 0: none yet).',
      '# TYPE cnikit_serve_gc_last_success_timestamp_seconds gauge',
      `cnikit_serve_gc_last_success_timestamp_seconds ${this.#lastSuccess}`,
    ];
    return `${out.join('\n')}\n`;
  }
}

/**
 * The loop the service's environment asks for (parseGcEnv), or undefined. It needs the compiled executable (the
 * child runs `cnikit tool gc`): under a plain JavaScript runtime it stays off, with a warning. Throws on a bad value.
 */
export function gcLoopFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  log: (line: string) => void,
  // a define of the build (process.env.CNIKIT_BUNDLED is replaced by "1" in the compiled executable)
  bundled = process.env.CNIKIT_BUNDLED === '1',
): GcLoop | undefined {
  const opts = parseGcEnv(env);
  if (!opts) return undefined;
  if (!bundled) {
    log('warning: CNIKIT_GC_INTERVAL needs the compiled cnikit executable: periodic GC off');
    return undefined;
  }
  log(`periodic GC every ${opts.intervalMs / 1000} s from the CRI sandboxes on ${opts.socket}`);
  return new GcLoop(opts, process.execPath, log, Math.min(opts.intervalMs, 60_000));
}
