/**
 * `cnikit serve [--socket PATH] [--deadline-ms N] [--verbose] [--check]`: the multicall executable as a resident
 * service for warm mode (cnikit-client forwards each plugin call to it). Protocol: ./protocol.ts, README.md.
 *
 * Concurrency model: one request at a time, on the JavaScript main thread. For each connection the service sends
 * the hello, reads the request (argv0 name, forwarded environment, the caller's network namespace as a descriptor),
 * moves the main thread into the caller's network namespace (setns), runs the request through the same skel
 * dispatcher as an exec'd plugin (`dispatch`), and always moves the thread back to its own namespace before it
 * answers — whatever the request did. The next connection waits in the socket's backlog (a client that sees no
 * hello within its short deadline runs the cold executable instead). The request's promise races a per-request
 * deadline: when it does not settle in time the caller gets code 11 ("try again later") and the service, which may
 * still hold the abandoned request's continuations, replaces itself with a fresh process image (execve of its own
 * executable, same pid, the listening socket handed over as descriptor 3 like systemd's LISTEN_FDS): nothing of a
 * hung request can run in a later request's namespace. A request stuck in synchronous code never yields to that
 * timer: a native watchdog thread (armed per request) does the same re-exec WATCHDOG_GRACE_MS after the deadline,
 * and the client reports the lost connection as code 11. A request that throws is answered like cold mode (the
 * dispatcher turns every error into a CNI error object). The same re-exec happens between requests when the
 * executable file was replaced (an upgrade), so the new version serves the next call.
 *
 * Except: a call of a plugin of BESIDE (cluster-ipam: async store I/O only, no namespace switch) whose caller is in
 * the service's own network namespace runs beside other such calls (no setns: the thread stays at home). The loop
 * keeps accepting while they wait on their I/O; any other request waits until those in flight are answered and
 * then runs alone, as above (a plugin that switches namespaces never shares the thread with another request).
 */
import {
  chmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import {
  type AnyPlugin,
  CNIKIT_VERSION,
  CniError,
  dispatch,
  ErrorCode,
  errorReason,
  findInPath,
  Invoker,
  type PluginIO,
  type ResidentHandle,
  splitPathList,
  traceEndpoint,
} from '@cnikit/skel';
import {
  acceptUnix,
  CLONE_NEWNET,
  closeFd,
  connectUnix,
  errnoMessage,
  execReplace,
  isSysError,
  listenUnix,
  nsType,
  peerCred,
  setCloexec,
  setns,
  watchdogArm,
  watchdogDisarm,
  watchdogOnStopSignal,
  watchdogSet,
} from '@cnikit/sys';
import { CLIENT_FILE } from '@cnikit/sys/layout';
import { Conn, TimeoutError } from './conn.ts';
import { type GcLoop, gcLoopFromEnv } from './cri-gc-loop.ts';
import { fallbacksPath, readFallbacks } from './fallbacks.ts';
import {
  Metrics,
  type MetricsAddress,
  parseMetricsAddress,
  type ReexecReason,
  serveMetrics,
} from './metrics.ts';
import { startNodeAgent } from './node-agent/agent.ts';
import { nodeAgentEnabled } from './node-agent/config.ts';
import {
  cniErrorText,
  DEFAULT_DEADLINE_MS,
  DEFAULT_SOCKET,
  decodeHello,
  decodeReply,
  decodeRequest,
  decodeStdin,
  encodeFrame,
  encodeHello,
  encodeReply,
  encodeRequest,
  encodeStdin,
  FLAG_STDOUT_CLOSED,
  PROTOCOL_VERSION,
  ProtocolError,
  type Reply,
  T_NEED_STDIN,
  T_REPLY,
  T_REQUEST,
  T_STDIN,
} from './protocol.ts';
import { markResident } from './resident.ts';
import { TraceBatcher } from './traces.ts';

/** The file name of the client executable; the per-plugin names are hard links of it. */
export const CLIENT_NAME = CLIENT_FILE;
export { DEFAULT_DEADLINE_MS };

/** How long a connected client may take to send its request after the hello. */
const REQUEST_READ_MS = 5_000;
/** How often the accept loop wakes up to check signals and the executable file when idle. */
const IDLE_POLL_MS = 250;
/** The same while the metrics server or the trace export may need the event loop. */
const BUSY_POLL_MS = 25;
/**
 * How long the service must have been idle (no connection since the last answer) before it collects the garbage of
 * the requests served: longer than the gap between the plugin calls of one chain (the runtime starts the next
 * plugin when the previous one exits), so a full collection does not land in the middle of a pod's chain.
 */
const GC_IDLE_MS = 500;
/** How long after the deadline the watchdog replaces a process whose main thread is stuck in synchronous code. */
const WATCHDOG_GRACE_MS = 2_000;
/** Set across a re-exec when the socket file is the service's own (not systemd's). */
const OWNED_ENV = 'CNIKIT_SERVE_SOCKET_OWNED';
/** Exit code when the process cannot return to its own namespace, or cannot re-exec itself. */
const EX_SOFTWARE = 70;
/** Set across a re-exec (or a watchdog re-exec) that happens while the service stops: the new image stops too. */
const STOPPING_ENV = 'CNIKIT_SERVE_STOPPING';
/** After a stop signal: how long past the deadline the service waits for its calls and residents, then exits. */
const STOP_GRACE_MS = 2_000;
/** How long one resident part may take to stop before it is abandoned. */
const RESIDENT_STOP_MS = 2_000;
/** After the accept loop ended: how long a leftover handle (a socket, a timer) may keep the process alive. */
const EXIT_LINGER_MS = 1_000;
/** Plugins whose calls run beside each other (see the module comment): async I/O only, no namespace switch. */
export const BESIDE = new Set(['cluster-ipam']);
/** How often the accept loop looks for a new connection while calls run beside each other (the event loop runs). */
const BESIDE_POLL_MS = 2;

export interface ServeContext {
  /** Every plugin of the executable (loaded: a warm service evaluates them once, at start). */
  plugins: readonly AnyPlugin[];
  /** Answers an invocation under a name that is no plugin, exactly as the cold executable does (exit code). */
  unknown(name: string, io: PluginIO): number;
  /** argv[0] to re-execute the service with (the name that selected the multicall executable). */
  argv0: string;
  /** The executable's build stamp (cnikit_build_info); without it, the package version and commit `unknown`. */
  stamp?: { version: string; commit: string; dirty?: boolean };
}

export interface ServeOptions {
  socket: string;
  check: boolean;
  deadlineMs: number;
  verbose: boolean;
  /** Where the Prometheus metrics are served (`--metrics`); undefined: not served. Default: a socket beside `socket`. */
  metrics?: MetricsAddress;
  /** `--metrics` as given (re-executions pass it on); undefined: the default. */
  metricsArg?: string;
  /**
   * Host the dhcp plugin's daemon in this process with these `dhcp daemon` flags (`--dhcp-daemon`,
   * `--dhcp-daemon-flags`, or $CNIKIT_DHCP_DAEMON / $CNIKIT_DHCP_DAEMON_FLAGS); undefined: not hosted.
   */
  dhcpDaemon?: string[];
  /** Whether the dhcp daemon options came from the command line (re-executions pass them on). */
  dhcpDaemonFromArgs?: boolean;
  /** Host the node agent (`--node-agent` or $CNIKIT_NODE_AGENT on; ./node-agent/agent.ts). */
  nodeAgent?: boolean;
}

/** Values of $CNIKIT_DHCP_DAEMON that enable the hosted dhcp daemon (empty, `0`, `false`, `off`, `no` do not). */
function envEnabled(v: string | undefined): boolean | undefined {
  if (v === undefined || v === '') return undefined;
  if (['1', 'true', 'on', 'yes'].includes(v.toLowerCase())) return true;
  if (['0', 'false', 'off', 'no'].includes(v.toLowerCase())) return false;
  return undefined;
}

/** `dhcp daemon` flags given as one string: split at white space (a value cannot contain any). */
function splitFlags(v: string): string[] {
  return v.split(/\s+/).filter((a) => a !== '');
}

export const SERVE_USAGE =
  'usage: cnikit serve [--socket PATH] [--deadline-ms N] [--metrics HOST:PORT|:PORT|PATH|off] [--verbose]\n' +
  "                    [--dhcp-daemon] [--dhcp-daemon-flags 'FLAGS'] [--node-agent]\n" +
  '       (default socket: $CNIKIT_SOCKET or /run/cnikit/cnikit.sock; metrics: $CNIKIT_METRICS_ADDRESS or metrics.sock beside it;\n' +
  "        --dhcp-daemon: also the dhcp plugin's daemon, `dhcp daemon FLAGS` in this process, default socket /run/cni/dhcp.sock;\n" +
  '        or $CNIKIT_DHCP_DAEMON=1 and $CNIKIT_DHCP_DAEMON_FLAGS)\n' +
  '       periodic CNI GC from the CRI sandboxes: $CNIKIT_GC_INTERVAL (10m, 90s, off), $CNIKIT_CRI_SOCKET, $CNIKIT_GC_GRACE\n' +
  '       cnikit serve --check [--socket PATH]                          (exit 0 when the service answers)\n';

export function parseServeArgs(
  args: readonly string[],
  env: Record<string, string | undefined> = process.env,
): ServeOptions | { error: string } | 'help' {
  const opts: ServeOptions = {
    socket: env.CNIKIT_SOCKET || DEFAULT_SOCKET,
    check: false,
    deadlineMs: DEFAULT_DEADLINE_MS,
    verbose: false,
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const value = (): string | undefined => {
      const eq = a.indexOf('=');
      if (eq >= 0) return a.slice(eq + 1);
      const v = args[++i];
      return v === undefined || v === '' ? undefined : v;
    };
    if (a === '--check') opts.check = true;
    else if (a === '--verbose' || a === '-v') opts.verbose = true;
    else if (a === '--help' || a === '-h') return 'help';
    else if (a === '--socket' || a.startsWith('--socket=')) {
      const v = value();
      if (!v) return { error: '--socket needs a path' };
      if (!v.startsWith('/')) return { error: `--socket must be an absolute path, got ${JSON.stringify(v)}` };
      opts.socket = v;
    } else if (a === '--deadline-ms' || a.startsWith('--deadline-ms=')) {
      const v = value();
      const n = Number(v);
      if (!v || !Number.isInteger(n) || n < 100 || n > 3_600_000) {
        return {
          error: `--deadline-ms must be an integer between 100 and 3600000, got ${JSON.stringify(v)}`,
        };
      }
      opts.deadlineMs = n;
    } else if (a === '--metrics' || a.startsWith('--metrics=')) {
      const v = value();
      if (!v) return { error: '--metrics needs an address' };
      opts.metricsArg = v;
    } else if (a === '--node-agent') {
      opts.nodeAgent = true;
    } else if (a === '--dhcp-daemon') {
      opts.dhcpDaemon ??= [];
      opts.dhcpDaemonFromArgs = true;
    } else if (a === '--dhcp-daemon-flags' || a.startsWith('--dhcp-daemon-flags=')) {
      const eq = a.indexOf('=');
      const v = eq >= 0 ? a.slice(eq + 1) : args[++i];
      if (v === undefined)
        return { error: '--dhcp-daemon-flags needs the `dhcp daemon` flags (one argument)' };
      opts.dhcpDaemon = splitFlags(v);
      opts.dhcpDaemonFromArgs = true;
    } else return { error: `unknown argument ${JSON.stringify(a)}` };
  }
  if (!opts.dhcpDaemonFromArgs) {
    const on = envEnabled(env.CNIKIT_DHCP_DAEMON);
    if (env.CNIKIT_DHCP_DAEMON && on === undefined)
      return {
        error: `CNIKIT_DHCP_DAEMON must be 1/true/on/yes or 0/false/off/no, got ${JSON.stringify(env.CNIKIT_DHCP_DAEMON)}`,
      };
    if (on === true || (on === undefined && env.CNIKIT_DHCP_DAEMON_FLAGS))
      opts.dhcpDaemon = splitFlags(env.CNIKIT_DHCP_DAEMON_FLAGS ?? '');
  }
  if (nodeAgentEnabled(env)) opts.nodeAgent = true;
  const m = opts.metricsArg ?? env.CNIKIT_METRICS_ADDRESS;
  try {
    const addr = m
      ? parseMetricsAddress(m)
      : { kind: 'unix' as const, path: join(dirname(opts.socket), 'metrics.sock') };
    if (addr) opts.metrics = addr;
  } catch (e) {
    return { error: errorReason(e) };
  }
  return opts;
}

function log(msg: string): void {
  try {
    writeSync(2, `cnikit serve[${process.pid}]: ${msg}\n`);
  } catch {
    // no log: keep serving
  }
}

/** The reading errors the cold executable names (Go's wording); others use the errno text. */
const STDIN_ERRNO: Record<number, string> = {
  5: 'input/output error',
  6: 'no such device or address',
  9: 'bad file descriptor',
  21: 'is a directory',
  22: 'invalid argument',
  104: 'connection reset by peer',
  107: 'transport endpoint is not connected',
};

const closedStdout = {
  write(): never {
    throw Object.assign(new Error('stdout is closed'), { code: 'EBADF' });
  },
};

interface FileId {
  dev: bigint;
  ino: bigint;
}

function fileId(path: string): FileId | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

function fileStamp(path: string): string {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}:${st.mtimeNs}`;
  } catch {
    return '-';
  }
}

/** Whether `path` is a warm client: the same file as `cnikit-client` in its directory. */
export function isWarmClient(path: string): boolean {
  const a = fileId(path);
  const b = fileId(join(dirname(path), CLIENT_NAME));
  return a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino;
}

export class Service {
  readonly opts: ServeOptions;
  readonly ctx: ServeContext;
  readonly #byName: Map<string, AnyPlugin>;
  #listenFd = -1;
  #homeFd = -1;
  /** The home namespace's identity (dev:ino): a caller in it needs no setns. */
  #homeId = '';
  /**
   * Connections handled while others are in flight (calls beside each other, or any connection accepted while one
   * is), until answered. The order among them: the BESIDE calls share the lock (#take), every other request takes it
   * alone.
   */
  readonly #beside = new Set<Promise<void>>();
  /** The readers-writer lock of the requests in flight: shared (BESIDE, no setns) or alone (everything else). */
  #sharing = 0;
  #alone = false;
  #aloneWaiting = 0;
  #wakeUps: Array<() => void> = [];
  /** Set by handle() (before its first await) when its request runs beside others. */
  #lastBeside = false;
  /** Requests between their start and their answer (the watchdog is disarmed when none is left). */
  #running = 0;
  #activated = false;
  #stopping = false;
  #tainted = false;
  #exe: FileId | undefined;
  #served = 0;
  #sinceGc = 0;
  /** When the last request was answered (performance.now()). */
  #lastAnswer = 0;
  #watchdog = false;
  #routes = new Map<string, { stamp: string; names: Set<string> }>();
  /** Counters and histograms of the requests, served on opts.metrics. */
  #metrics: Metrics | undefined;
  #metricsServer: import('node:http').Server | undefined;
  /** The periodic CNI GC from the CRI sandboxes (CNIKIT_GC_INTERVAL), run between connections. */
  #gc: GcLoop | undefined;
  /** The batched OTLP export of traced requests. */
  #batcher: TraceBatcher | undefined;
  /** The service's own OTLP traces endpoint (its environment), for calls whose environment and config name none. */
  #traceEndpoint: string | undefined;
  /** Runs the served plugins' delegations: in-process where CNI_PATH resolves them to this executable or a client. */
  readonly #invoker = new Invoker();
  /** Resident parts of plugins run in this process (the dhcp daemon with --dhcp-daemon). */
  #residents: Array<{ name: string; handle: ResidentHandle }> = [];

  constructor(opts: ServeOptions, ctx: ServeContext) {
    this.opts = opts;
    this.ctx = ctx;
    this.#byName = new Map(ctx.plugins.map((p) => [p.name, p]));
  }

  /** Opens the listening socket (or takes the one handed over in LISTEN_FDS) and the home namespace. */
  start(): void {
    // before the socket exists: a SIGTERM sent as soon as it appears must stop the service, not kill it by the
    // default action (which leaves the socket file behind)
    // a stop is bounded: the calls in flight get their deadline (then STOP_GRACE_MS), then whatever is left is
    // abandoned (their clients' connections close with the process); a second signal abandons it at once
    const stop = (sig: string) => {
      if (this.#stopping) {
        this.abandon(`${sig} again`);
        return;
      }
      log(`${sig}: stopping after the current request (at most ${this.opts.deadlineMs + STOP_GRACE_MS} ms)`);
      this.#stopping = true;
      // a watchdog re-execution from now on starts an image that stops at once
      if (this.#watchdog) this.setWatchdog();
      setTimeout(
        () => this.abandon(`still not stopped ${this.opts.deadlineMs + STOP_GRACE_MS} ms after ${sig}`),
        this.opts.deadlineMs + STOP_GRACE_MS,
      ).unref();
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    // then: it takes the counters a previous image of this service handed over in the environment
    const stamp = this.ctx.stamp;
    const metrics = new Metrics(stamp?.version ?? CNIKIT_VERSION, process.env, stamp);
    this.#metrics = metrics;
    this.#batcher = new TraceBatcher((exported, dropped) => metrics.countSpans(exported, dropped));
    this.#traceEndpoint = traceEndpoint(process.env);
    this.#gc = gcLoopFromEnv(process.env, log);
    this.#homeFd = openSync('/proc/thread-self/ns/net', 'r');
    setCloexec(this.#homeFd, true);
    this.#homeId = nsId(this.#homeFd);
    this.#exe = fileId('/proc/self/exe');
    const env = process.env;
    if (env[STOPPING_ENV] === '1') {
      // re-executed while stopping: stop (the loop does not start), the socket file removed as usual
      delete env[STOPPING_ENV];
      this.#stopping = true;
      log('re-executed while stopping: stopping');
    }
    if (env.LISTEN_FDS === '1' && env.LISTEN_PID === String(process.pid)) {
      // systemd socket activation, or our own re-exec: the socket is descriptor 3
      this.#listenFd = 3;
      // our own re-exec marks a socket file that this service created (and removes when it stops)
      this.#activated = env[OWNED_ENV] !== '1';
      setCloexec(3, true);
      delete env.LISTEN_FDS;
      delete env.LISTEN_PID;
      delete env.LISTEN_FDNAMES;
      delete env[OWNED_ENV];
      log(`serving on the inherited socket (descriptor 3), deadline ${this.opts.deadlineMs} ms`);
    } else {
      this.#listenFd = openSocket(this.opts.socket);
      log(`serving on ${this.opts.socket}, deadline ${this.opts.deadlineMs} ms`);
    }
    if (process.geteuid?.() !== 0)
      log('warning: not running as root; clients only talk to a service of uid 0');
    for (const p of this.ctx.plugins) this.#invoker.register(p);
    markResident();
    if (process.env.CNIKIT_BUNDLED === '1') {
      // a request stuck in synchronous code (a tool exec that never returns) cannot reach the JavaScript deadline:
      // the watchdog thread replaces the process image WATCHDOG_GRACE_MS after the deadline
      this.setWatchdog();
      this.#watchdog = true;
      // a stop signal while the main thread is stuck is not lost: the watchdog's new image stops
      watchdogOnStopSignal(`${STOPPING_ENV}=1`);
    }
  }

  /**
   * Starts the resident parts asked for (`--dhcp-daemon`: the dhcp plugin's daemon, its own listener and leases on
   * this process's event loop). Throws when one cannot start.
   */
  async startResidents(): Promise<void> {
    if (this.opts.nodeAgent) {
      const tracing = this.#traceEndpoint && this.#batcher;
      const handle = await startNodeAgent(
        process.env,
        log,
        tracing ? { endpoint: this.#traceEndpoint as string, exporter: tracing.add } : undefined,
      );
      this.#residents.push({ name: 'node agent', handle });
      log(handle.description);
    }
    // the cluster-ipam reclaimer (ConfigMap key cluster-ipam-reclaimer: "on"; its flags from the environment)
    const reclaimer = this.ctx.plugins.find((p) => p.name === 'cluster-ipam')?.resident;
    if (reclaimer && envEnabled(process.env.CNIKIT_CLUSTER_IPAM_RECLAIMER)) {
      const handle = await reclaimer.start([], log);
      this.#residents.push({ name: 'cluster-ipam reclaimer', handle });
      log(handle.description);
    }
    if (this.opts.dhcpDaemon === undefined) return;
    const dhcp = this.ctx.plugins.find((p) => p.name === 'dhcp');
    if (!dhcp?.resident) throw new Error('--dhcp-daemon: this executable has no dhcp plugin daemon');
    const name = `dhcp ${dhcp.resident.command}`;
    let handle: ResidentHandle;
    try {
      handle = await dhcp.resident.start(this.opts.dhcpDaemon, (line) => log(`${name}: ${line}`));
    } catch (e) {
      throw new Error(`--dhcp-daemon: ${errorReason(e)}`);
    }
    this.#residents.push({ name, handle });
    log(`${name}: ${handle.description}`);
  }

  /** Stops the resident parts (their state stays for the next start: leases are resumed). */
  async stopResidents(): Promise<void> {
    const all = this.#residents;
    this.#residents = [];
    for (const r of all) {
      let timer: NodeJS.Timeout | undefined;
      try {
        const stopped = await Promise.race([
          Promise.resolve(r.handle.stop()).then(() => true),
          new Promise<false>((resolve) => {
            timer = setTimeout(() => resolve(false), RESIDENT_STOP_MS);
          }),
        ]);
        if (!stopped) log(`${r.name}: did not stop within ${RESIDENT_STOP_MS} ms; abandoned`);
      } catch (e) {
        log(`${r.name}: cannot stop cleanly: ${errorReason(e)}`);
      } finally {
        clearTimeout(timer);
      }
    }
  }

  /** The socket file removed, when it is this service's own (not systemd's). */
  removeSocket(): void {
    if (this.#activated) return;
    try {
      if (lstatSync(this.opts.socket).isSocket()) unlinkSync(this.opts.socket);
    } catch {
      // already gone
    }
  }

  /** A stop that cannot wait any longer: the work in flight abandoned, the socket file removed, exit 0. */
  abandon(why: string): never {
    log(`${why}: abandoning ${this.#running} request(s) in flight; stopped after ${this.#served} request(s)`);
    this.removeSocket();
    process.exit(0);
  }

  /** The accept loop; resolves when the service was asked to stop. */
  async run(): Promise<void> {
    if (this.opts.metrics) {
      const addr = this.opts.metrics;
      try {
        this.#metricsServer = await serveMetrics(addr, () => this.renderMetrics());
        log(
          `metrics on ${addr.kind === 'unix' ? addr.path : `http://${addr.host.includes(':') ? `[${addr.host}]` : addr.host}:${addr.port}/metrics`}`,
        );
      } catch (e) {
        log(`warning: cannot serve the metrics: ${errorReason(e)}`);
      }
    }
    while (!this.#stopping) {
      // the metrics server, the trace export and a hosted daemon need the event loop: wake up more often then
      const busy =
        this.#metricsServer !== undefined || (this.#batcher?.queued ?? 0) > 0 || this.#residents.length > 0;
      const beside = this.#beside.size > 0;
      const c = acceptUnix(this.#listenFd, beside ? 0 : busy ? BUSY_POLL_MS : IDLE_POLL_MS);
      if (!c && beside) {
        // calls in flight beside each other: let their I/O run, look again soon (or when one is answered)
        await Promise.race([new Promise((r) => setTimeout(r, BESIDE_POLL_MS)), ...this.#beside]);
        continue;
      }
      if (!c && this.#sinceGc > 0 && performance.now() - this.#lastAnswer >= GC_IDLE_MS) {
        // idle: collect the garbage of the requests served since the last collection, so the resident size
        // returns to its steady state between bursts (Bun.gc under Bun; global gc() only when Node exposes it)
        this.#sinceGc = 0;
        const g = globalThis as { Bun?: { gc?: (sync: boolean) => void }; gc?: () => void };
        const t0 = performance.now();
        if (g.Bun?.gc) g.Bun.gc(true);
        else g.gc?.();
        if (this.opts.verbose) log(`idle: garbage collected in ${(performance.now() - t0).toFixed(1)} ms`);
      }
      if (c) {
        if (c.uid !== 0) {
          log(`refused a client of uid ${c.uid} (pid ${c.pid}): only root may use the service`);
          closeFd(c.fd);
        } else {
          this.#lastBeside = false;
          // with nothing in flight: as ever (the request read with the thread blocked; a request that is not BESIDE
          // runs before the next accept); else the request is awaited and the lock orders it among the others
          const h = this.handle(c.fd, c.pid, beside);
          if (beside || this.#lastBeside) {
            this.#beside.add(h);
            void h.finally(() => this.#beside.delete(h));
          } else await h;
        }
      }
      // let signal handlers and timers run between connections
      await new Promise((r) => setImmediate(r));
      this.#gc?.tick();
      if ((this.#tainted || this.exeReplaced() || this.#stopping) && this.#beside.size > 0) {
        // the calls in flight are answered first (each within its deadline)
        await Promise.allSettled([...this.#beside]);
      }
      if (this.#stopping) {
        // a stop signal wins over a re-execution (the new image would serve on, the signal forgotten)
      } else if (this.#tainted) {
        await this.stopResidents();
        this.reexec('a request exceeded its deadline', 'deadline');
      } else if (this.exeReplaced()) {
        await this.stopResidents();
        this.reexec(`${process.execPath} was replaced`, 'upgrade');
      }
    }
    closeFd(this.#listenFd);
    this.#gc?.stop();
    await this.stopResidents();
    await this.#batcher?.drain(1000);
    this.#metricsServer?.close();
    this.#metricsServer?.closeAllConnections();
    this.removeSocket();
    log(`stopped after ${this.#served} request(s)`);
  }

  exeReplaced(): boolean {
    if (!this.#exe || process.env.CNIKIT_BUNDLED !== '1') return false;
    const now = fileId(process.execPath);
    return now !== undefined && (now.dev !== this.#exe.dev || now.ino !== this.#exe.ino);
  }

  /** The command line and environment that replace this process with a fresh image serving the same socket. */
  /** The metrics exposition; the clients' fallback records are counted first. */
  renderMetrics(): string {
    const m = this.#metrics as Metrics;
    try {
      const f = readFallbacks(fallbacksPath(this.opts.socket), m.fallbackOffset);
      m.countFallbacks(f.counts, f.offset);
    } catch (e) {
      log(`cannot read the client fallback record: ${errorReason(e)}`);
    }
    return m.render() + (this.#gc?.render() ?? '');
  }

  /**
   * Tells the watchdog thread what to exec: this image with the counters as they are now (reason: watchdog). Done
   * before every request: the service's own environment is taken once (the watchdog's copy of it), only the
   * counters are new each time.
   */
  setWatchdog(): void {
    this.#watchdogEnv ??= this.ownEnv();
    const { argv, envp } = this.reexecCommand('watchdog', this.#watchdogEnv);
    watchdogSet(process.execPath, argv, envp, this.#listenFd);
  }

  #watchdogEnv: string[] | undefined;

  /** The service's environment as a new image gets it, without the entries each exec sets itself. */
  ownEnv(): string[] {
    const envp: string[] = [];
    for (const [k, v] of Object.entries(process.env)) {
      if (
        v !== undefined &&
        !['LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES', OWNED_ENV, STOPPING_ENV].includes(k)
      ) {
        envp.push(`${k}=${v}`);
      }
    }
    return envp;
  }

  reexecCommand(reason?: ReexecReason, own?: readonly string[]): { argv: string[]; envp: string[] } {
    const envp: string[] = [...(own ?? this.ownEnv())];
    envp.push('LISTEN_FDS=1', `LISTEN_PID=${process.pid}`);
    if (!this.#activated) envp.push(`${OWNED_ENV}=1`);
    if (this.#stopping) envp.push(`${STOPPING_ENV}=1`);
    if (reason && this.#metrics) envp.push(...this.#metrics.reexecEnv(reason));
    const args = [
      'serve',
      '--deadline-ms',
      String(this.opts.deadlineMs),
      ...(this.opts.verbose ? ['--verbose'] : []),
      ...(this.opts.metricsArg ? ['--metrics', this.opts.metricsArg] : []),
      ...(this.opts.nodeAgent ? ['--node-agent'] : []),
      ...(this.opts.dhcpDaemonFromArgs && this.opts.dhcpDaemon
        ? ['--dhcp-daemon', '--dhcp-daemon-flags', this.opts.dhcpDaemon.join(' ')]
        : []),
    ];
    if (!this.#activated) args.push('--socket', this.opts.socket);
    return { argv: [this.ctx.argv0, ...args], envp };
  }

  reexec(reason: string, why: ReexecReason): never {
    log(`re-executing ${process.execPath}: ${reason}`);
    if (process.env.CNIKIT_BUNDLED !== '1') {
      log('not a compiled executable (running from source): exiting for the service manager to restart it');
      process.exit(75);
    }
    const { argv, envp } = this.reexecCommand(why);
    try {
      execReplace(process.execPath, argv, envp, this.#listenFd);
    } catch (e) {
      log(`cannot re-execute: ${errorReason(e)}; exiting`);
    }
    process.exit(EX_SOFTWARE);
  }

  /** Waits for the lock: `alone` for a request that may switch namespaces, else shared with other BESIDE calls. */
  async #take(alone: boolean): Promise<void> {
    const wait = () => new Promise<void>((r) => this.#wakeUps.push(r));
    if (alone) {
      this.#aloneWaiting++;
      try {
        while (this.#alone || this.#sharing > 0) await wait();
      } finally {
        this.#aloneWaiting--;
      }
      this.#alone = true;
      return;
    }
    // a request waiting to run alone goes first: the calls beside each other do not starve it
    while (this.#alone || this.#aloneWaiting > 0) await wait();
    this.#sharing++;
  }

  #give(alone: boolean): void {
    if (alone) this.#alone = false;
    else this.#sharing--;
    for (const f of this.#wakeUps.splice(0)) f();
  }

  /** The request's stdin asked for and awaited before the call runs (a BESIDE call: no blocking read in it). */
  async prefetchStdin(conn: Conn, deadline: number): Promise<() => Uint8Array> {
    let got: { errno: number; data: Buffer };
    try {
      conn.send(encodeFrame(T_NEED_STDIN), Math.max(1, deadline - performance.now()));
      const f = await conn.readFrameAsync(deadline);
      if (f.type !== T_STDIN) throw new ProtocolError(`expected stdin, got frame type ${f.type}`);
      got = decodeStdin(f.body);
    } catch (e) {
      const err = new CniError(ErrorCode.IOFailure, `error reading from stdin: ${errorReason(e)}`);
      return () => {
        throw err;
      };
    }
    if (got.errno !== 0) {
      const text = STDIN_ERRNO[got.errno] ?? errnoMessage(got.errno);
      const err = new CniError(ErrorCode.IOFailure, `error reading from stdin: read /dev/stdin: ${text}`);
      return () => {
        throw err;
      };
    }
    const data = got.data;
    return () => data;
  }

  /**
   * One connection: hello, request, run, reply. Never throws. `busy`: other requests are in flight (the request
   * is read without blocking the thread, and waits for the lock).
   */
  async handle(fd: number, pid: number, busy = false): Promise<void> {
    const conn = new Conn(fd);
    let netns = -1;
    const tAccept = performance.now();
    try {
      conn.send(
        encodeHello({ version: PROTOCOL_VERSION, pid: process.pid, deadlineMs: this.opts.deadlineMs }),
        1000,
      );
      // while calls run beside each other the request is awaited, not read with the thread blocked
      const f = busy
        ? await conn.readFrameAsync(performance.now() + REQUEST_READ_MS)
        : conn.readFrame(performance.now() + REQUEST_READ_MS);
      if (f.type !== T_REQUEST) throw new ProtocolError(`expected a request frame, got type ${f.type}`);
      const fds = conn.takeFds();
      netns = fds.shift() ?? -1;
      for (const extra of fds) closeFd(extra);
      const req = decodeRequest(f.body);
      // beside the others (BESIDE, a caller at home), or alone: after the calls in flight are answered
      const beside = BESIDE.has(req.name) && netns >= 0 && nsIdOf(netns) === this.#homeId;
      this.#lastBeside = beside;
      const stdin = beside
        ? await this.prefetchStdin(conn, performance.now() + this.opts.deadlineMs)
        : undefined;
      await this.#take(!beside);
      const tRequest = performance.now();
      let reply: Reply;
      const metrics = this.#metrics as Metrics;
      try {
        if (this.#tainted) {
          // a call abandoned at its deadline may still run: nothing more before the service is replaced
          reply = errorReply(
            ErrorCode.TryAgainLater,
            `cnikit service: restarting (a request exceeded the deadline of ${this.opts.deadlineMs} ms); try again`,
          );
        } else {
          if (this.#watchdog) {
            this.setWatchdog(); // the counters a watchdog re-execution hands over are today's
            watchdogArm(this.opts.deadlineMs + WATCHDOG_GRACE_MS);
          }
          metrics.inFlight++;
          this.#running++;
          try {
            reply = await this.run1(conn, req, netns, beside, stdin);
          } finally {
            metrics.inFlight--;
            if (--this.#running === 0 && this.#watchdog) watchdogDisarm();
          }
        }
      } finally {
        this.#give(!beside);
      }
      const tRun = performance.now();
      metrics.observe(req.name, req.env.CNI_COMMAND ?? '', resultCode(reply), (tRun - tRequest) / 1000);
      this.#served++;
      this.#sinceGc++;
      this.#lastAnswer = performance.now();
      conn.send(encodeReply(reply), 5000);
      if (this.opts.verbose) {
        log(
          `pid ${pid}: ${req.name} ${req.env.CNI_COMMAND ?? ''} → exit ${reply.code} (${(tRun - tRequest).toFixed(1)} ms; hello+request ${(tRequest - tAccept).toFixed(2)} ms)`,
        );
      }
    } catch (e) {
      if (e instanceof ProtocolError || e instanceof TimeoutError)
        log(`client pid ${pid}: ${errorReason(e)}`);
      else if (isSysError(e) && (e.code === 'EPIPE' || e.code === 'ECONNRESET'))
        log(`client pid ${pid} went away`);
      else
        log(
          `client pid ${pid}: unexpected error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`,
        );
    } finally {
      if (netns >= 0) closeFd(netns);
      conn.close();
    }
  }

  /** Delegates that resolve in CNI_PATH to a warm client run in-process (they would reach this service anyway). */
  routeDelegates(cniPath: string | undefined): void {
    const dirs = splitPathList(cniPath);
    // the answer only changes when an entry of a CNI_PATH directory is added, removed or renamed over (an install),
    // which changes the directory's mtime: cached per CNI_PATH, checked with one stat per directory
    const stamp = dirs.map((d) => fileStamp(d)).join(' ');
    const key = cniPath ?? '';
    let clients = this.#routes.get(key);
    if (!clients || clients.stamp !== stamp) {
      const names = new Set<string>();
      for (const p of this.ctx.plugins) {
        try {
          if (dirs.length > 0 && isWarmClient(findInPath(p.name, dirs))) names.add(p.name);
        } catch {
          // not in CNI_PATH: a delegation fails there as in cold mode
        }
      }
      clients = { stamp, names };
      if (this.#routes.size >= 64) this.#routes.clear();
      this.#routes.set(key, clients);
    }
    for (const p of this.ctx.plugins) this.#invoker.register(p, { anyPath: clients.names.has(p.name) });
  }

  fetchStdin(conn: Conn, deadline: number): Uint8Array {
    let got: { errno: number; data: Buffer };
    try {
      conn.send(encodeFrame(T_NEED_STDIN), Math.max(1, deadline - performance.now()));
      const f = conn.readFrame(deadline);
      if (f.type !== T_STDIN) throw new ProtocolError(`expected stdin, got frame type ${f.type}`);
      got = decodeStdin(f.body);
    } catch (e) {
      throw new CniError(ErrorCode.IOFailure, `error reading from stdin: ${errorReason(e)}`);
    }
    if (got.errno !== 0) {
      const text = STDIN_ERRNO[got.errno] ?? errnoMessage(got.errno);
      throw new CniError(ErrorCode.IOFailure, `error reading from stdin: read /dev/stdin: ${text}`);
    }
    return got.data;
  }

  async run1(
    conn: Conn,
    req: { flags: number; name: string; env: Record<string, string> },
    netns: number,
    /** The caller is in the service's own namespace and runs beside others: no setns. */
    beside = false,
    /** The request's stdin, fetched already (prefetchStdin). */
    prefetched?: () => Uint8Array,
  ): Promise<Reply> {
    const enc = new TextEncoder();
    if (netns < 0 || nsTypeOf(netns) !== CLONE_NEWNET) {
      return errorReply(999, 'cnikit service: the request carried no network namespace descriptor');
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      ...req.env,
    };
    const deadline = performance.now() + this.opts.deadlineMs;
    let stdout = '';
    let stderr = '';
    const io: PluginIO = {
      env,
      stdin: prefetched ?? (() => this.fetchStdin(conn, deadline)),
      stdout:
        req.flags & FLAG_STDOUT_CLOSED
          ? closedStdout
          : {
              write: (s: string) => {
                stdout += s;
                return true;
              },
            },
      stderr: {
        write: (s: string) => {
          stderr += s;
          return true;
        },
      },
      invoker: this.#invoker,
      mode: 'warm',
      ...(this.#batcher ? { traceExporter: this.#batcher.add } : {}),
      ...(this.#traceEndpoint ? { traceEndpoint: this.#traceEndpoint } : {}),
    };
    const plugin = this.#byName.get(req.name);
    if (plugin) this.routeDelegates(env.CNI_PATH);
    try {
      if (!beside) setns(netns);
    } catch (e) {
      return errorReply(
        ErrorCode.TryAgainLater,
        `cnikit service: cannot enter the caller's network namespace: ${errorReason(e)}`,
      );
    }
    let timer: NodeJS.Timeout | undefined;
    let outcome: number | 'timeout';
    try {
      const work = plugin
        ? dispatch(plugin, io)
        : Promise.resolve().then(() => this.ctx.unknown(req.name, io));
      outcome = await Promise.race([
        work,
        new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - performance.now()));
        }),
      ]);
    } catch (e) {
      outcome = 1;
      stdout = cniErrorText(ErrorCode.Internal, errorReason(e));
    } finally {
      clearTimeout(timer);
      if (!beside) this.goHome();
    }
    if (outcome === 'timeout') {
      this.#tainted = true;
      log(`${req.name} ${env.CNI_COMMAND ?? ''} exceeded the deadline of ${this.opts.deadlineMs} ms`);
      return errorReply(
        ErrorCode.TryAgainLater,
        `cnikit service: the ${req.name} ${env.CNI_COMMAND ?? ''} request did not finish within ${this.opts.deadlineMs} ms`,
        'the service abandoned the request and restarts; it may have been partly applied; try again later',
      );
    }
    return { code: outcome, stdout: enc.encode(stdout), stderr: enc.encode(stderr) };
  }

  /** Back to the service's own namespace; a thread that cannot return must not serve anything else. */
  goHome(): void {
    try {
      setns(this.#homeFd);
    } catch (e) {
      log(`fatal: cannot return to the service's network namespace: ${errorReason(e)}`);
      process.exit(EX_SOFTWARE);
    }
  }
}

/** The CNI result code of a reply: 0 on success, else the error object's code (999 when it has none). */
export function resultCode(reply: Reply): number {
  if (reply.code === 0) return 0;
  try {
    const code = (JSON.parse(Buffer.from(reply.stdout).toString('utf8')) as { code?: unknown }).code;
    return typeof code === 'number' && Number.isInteger(code) && code >= 0 ? code : ErrorCode.Internal;
  } catch {
    return ErrorCode.Internal;
  }
}

/** The identity of the namespace a descriptor refers to (dev:ino), '' when it cannot be read. */
function nsId(fd: number): string {
  try {
    const st = fstatSync(fd, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch {
    return '';
  }
}

function nsIdOf(fd: number): string {
  const id = nsId(fd);
  return id === '' ? '-' : id;
}

function nsTypeOf(fd: number): number {
  try {
    return nsType(fd);
  } catch {
    return -1;
  }
}

function errorReply(code: number, msg: string, details?: string): Reply {
  return {
    code: 1,
    stdout: new TextEncoder().encode(cniErrorText(code, msg, details)),
    stderr: new Uint8Array(0),
  };
}

/**
 * Prepares the socket's directory (created 0700; an existing one must be a real directory of ours without
 * group/other access), removes a stale socket (one nobody listens on), binds and sets the socket to 0600.
 */
export function openSocket(path: string): number {
  const dir = dirname(path);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new Error(`cannot create ${dir}: ${errorReason(e)}`);
  }
  const st = lstatSync(dir);
  const uid = process.geteuid?.() ?? 0;
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory; refusing to use it`);
  if (st.uid !== uid) throw new Error(`${dir} is owned by uid ${st.uid}, not ${uid}; refusing to use it`);
  if ((st.mode & 0o077) !== 0) {
    throw new Error(`${dir} has mode ${(st.mode & 0o777).toString(8)}; expected 0700; refusing to use it`);
  }
  let existing: ReturnType<typeof lstatSync> | undefined;
  try {
    existing = lstatSync(path);
  } catch {
    existing = undefined;
  }
  if (existing) {
    if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
    let live = false;
    try {
      closeFd(connectUnix(path));
      live = true;
    } catch {
      live = false;
    }
    if (live) throw new Error(`another service is already listening on ${path}`);
    unlinkSync(path);
  }
  const fd = listenUnix(path, 128);
  chmodSync(path, 0o600);
  return fd;
}

/** `cnikit serve --check`: a VERSION call through the service. Returns the exit code. */
export function check(opts: ServeOptions, ctx: ServeContext, out: (s: string) => void): number {
  const t0 = performance.now();
  let fd: number;
  try {
    fd = connectUnix(opts.socket);
  } catch (e) {
    out(`unhealthy: cannot connect to ${opts.socket}: ${errorReason(e)}\n`);
    return 1;
  }
  const conn = new Conn(fd);
  let ns = -1;
  try {
    const cred = peerCred(fd);
    if (cred.uid !== 0) {
      out(
        `unhealthy: the service on ${opts.socket} runs as uid ${cred.uid}; clients only use a service of uid 0\n`,
      );
      return 1;
    }
    const hello = decodeHello(conn.readHello(performance.now() + 2000));
    if (hello.version !== PROTOCOL_VERSION) {
      out(`unhealthy: the service speaks protocol ${hello.version}, this executable ${PROTOCOL_VERSION}\n`);
      return 1;
    }
    const probe = ctx.plugins.find((p) => p.name === 'loopback') ?? ctx.plugins[0];
    if (!probe) {
      out('unhealthy: this executable has no plugins\n');
      return 1;
    }
    ns = openSync('/proc/thread-self/ns/net', 'r');
    conn.send(encodeRequest({ flags: 0, name: probe.name, env: { CNI_COMMAND: 'VERSION' } }), 2000, [ns]);
    const deadline = performance.now() + 10_000;
    for (;;) {
      const f = conn.readFrame(deadline);
      if (f.type === T_NEED_STDIN) {
        conn.send(encodeStdin(0, Buffer.from('{"cniVersion":"1.1.0"}')), 2000);
        continue;
      }
      if (f.type !== T_REPLY) throw new ProtocolError(`unexpected frame type ${f.type}`);
      const reply = decodeReply(f.body);
      const text = Buffer.from(reply.stdout).toString('utf8');
      if (reply.code !== 0 || !/"cniVersion"/.test(text)) {
        out(`unhealthy: ${probe.name} VERSION answered exit ${reply.code}: ${text}\n`);
        return 1;
      }
      out(
        `ok: cnikit service pid ${hello.pid} on ${opts.socket}, protocol ${hello.version}, ${probe.name} VERSION in ${(performance.now() - t0).toFixed(1)} ms\n`,
      );
      return 0;
    }
  } catch (e) {
    out(`unhealthy: ${errorReason(e)}\n`);
    return 1;
  } finally {
    if (ns >= 0) closeFd(ns);
    conn.close();
  }
}

/** Entry of `cnikit serve …` (args after `serve`). Resolves to the exit code. */
export async function serveMain(args: readonly string[], ctx: ServeContext): Promise<number> {
  const opts = parseServeArgs(args);
  if (opts === 'help') {
    process.stdout.write(SERVE_USAGE);
    return 0;
  }
  if ('error' in opts) {
    process.stderr.write(`cnikit serve: ${opts.error}\n${SERVE_USAGE}`);
    return 2;
  }
  if (opts.check) return check(opts, ctx, (s) => process.stdout.write(s));
  // plugin code must not print on the service's stdout
  const toStderr = console.error.bind(console);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  const service = new Service(opts, ctx);
  try {
    // the hosted daemon first: when it cannot start, no socket of the service was created (none at all in an
    // image re-executed while stopping: it stops at once)
    if (process.env[STOPPING_ENV] !== '1') await service.startResidents();
  } catch (e) {
    log(`cannot start: ${errorReason(e)}`);
    return 1;
  }
  try {
    service.start();
  } catch (e) {
    log(`cannot start: ${errorReason(e)}`);
    await service.stopResidents();
    return 1;
  }
  await service.run();
  // stopped: a handle left open (a plugin's keep-alive socket, a timer of an abandoned call) does not keep the
  // process alive
  setTimeout(() => process.exit(0), EXIT_LINGER_MS).unref();
  return 0;
}
