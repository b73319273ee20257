/**
 * `dhcp daemon`: holds the leases of every container that uses the dhcp IPAM plugin (the reference's model — a
 * lease must be renewed long after the plugin process has exited). Listens on a Unix socket (-socketpath, or the
 * socket passed by systemd socket activation), speaks protocol.ts, persists leases to -statedir and resumes them
 * when it starts again.
 */
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, isAbsolute } from 'node:path';
import { CniError, ErrorCode, type Result } from '@cnikit/skel';
import { type ClientSettings, DEFAULT_SETTINGS, linkExists } from './client.ts';
import { Lease, type LeaseRecord, LeaseStore, type Log } from './lease.ts';
import {
  DEFAULT_SOCKET_PATH,
  generateClientId,
  prepareOptions,
  readIpamConfig,
  resultFromAck,
} from './options.ts';
import { GO_RPC_REFUSAL, LineReader, METHODS, type Method, PROTOCOL_VERSION } from './protocol.ts';

export const DEFAULT_STATE_DIR = '/var/lib/cni/dhcp';

/** What the plugin sends for ADD, CHECK and DEL. */
export interface CallArgs {
  containerId: string;
  netns: string;
  ifName: string;
  args: string;
  config: Record<string, unknown>;
  /** CHECK: the addresses of prevResult, compared with the lease. */
  addresses?: string[];
}

export interface GcArgs {
  config: Record<string, unknown>;
  valid: Array<{ containerId: string; ifName: string }>;
}

export interface DaemonOptions {
  settings: ClientSettings;
  hostPrefix: string;
  /** Where leases are persisted; undefined keeps them in memory only. */
  stateDir?: string;
  log: Log;
}

function netName(config: Record<string, unknown>): string {
  return typeof config.name === 'string' ? config.name : '';
}

export class DhcpDaemon {
  readonly leases = new Map<string, Lease>();
  readonly #pending = new Map<string, { promise: Promise<Lease>; abort: AbortController }>();
  readonly #opts: DaemonOptions;
  readonly #store: LeaseStore | undefined;

  constructor(opts: DaemonOptions) {
    this.#opts = opts;
    this.#store = opts.stateDir ? new LeaseStore(opts.stateDir, opts.log) : undefined;
  }

  #hooks() {
    return {
      settings: this.#opts.settings,
      log: this.#opts.log,
      persist: (r: LeaseRecord) => this.#store?.save(r),
      gone: (l: Lease) => {
        if (this.leases.get(l.record.clientId) === l) this.leases.delete(l.record.clientId);
        this.#forget(l.record.clientId);
      },
    };
  }

  #forget(clientId: string): void {
    try {
      this.#store?.remove(clientId);
    } catch (err) {
      this.#opts.log(`${clientId}: cannot remove the lease file: ${(err as Error).message}`);
    }
  }

  /** Resumes the persisted leases whose namespace and interface still exist; forgets the others. */
  resume(): number {
    if (!this.#store) return 0;
    let n = 0;
    for (const r of this.#store.load(this.#opts.log)) {
      if (!linkExists(r.netns, r.ifName)) {
        this.#opts.log(`${r.clientId}: ${r.ifName} in ${r.netns} is gone, forgetting the persisted lease`);
        this.#forget(r.clientId);
        continue;
      }
      const lease = Lease.resume(r, this.#hooks());
      this.leases.set(r.clientId, lease);
      lease.start();
      n++;
      this.#opts.log(`${r.clientId}: resumed lease ${r.address} (${r.state}, expires ${r.expiresAt})`);
    }
    return n;
  }

  #clientId(a: CallArgs): string {
    return generateClientId(a.containerId, netName(a.config), a.ifName);
  }

  async allocate(a: CallArgs): Promise<Result> {
    const conf = readIpamConfig(a.config);
    const opts = prepareOptions(conf, a.args ?? '');
    const clientId = this.#clientId(a);
    let lease = this.leases.get(clientId);
    if (!lease || lease.record.state === 'expired') {
      let p = this.#pending.get(clientId);
      if (!p) {
        const abort = new AbortController();
        const entry: { promise: Promise<Lease>; abort: AbortController } = {
          promise: Promise.resolve() as never,
          abort,
        };
        entry.promise = Lease.acquire(
          {
            clientId,
            containerId: a.containerId,
            netName: netName(a.config),
            ifName: a.ifName,
            netns: this.#opts.hostPrefix + a.netns,
            provide: opts.provide,
            request: opts.request,
            priority: conf.priority,
          },
          this.#hooks(),
          abort.signal,
        )
          .then(async (l) => {
            // a DEL that came meanwhile took the pending entry and releases `l` itself
            if (this.#pending.get(clientId) !== entry) return l;
            const old = this.leases.get(clientId);
            if (old) await old.halt();
            this.leases.set(clientId, l);
            l.start();
            return l;
          })
          .finally(() => {
            if (this.#pending.get(clientId) === entry) this.#pending.delete(clientId);
          });
        entry.promise.catch(() => {});
        p = entry;
        this.#pending.set(clientId, p);
      }
      lease = await p.promise;
      // answer once the lease is on disk: a daemon killed right after the ADD still resumes it
      await this.flush();
    }
    return resultFromAck(lease.ack, conf.priority);
  }

  async release(a: CallArgs): Promise<void> {
    const clientId = this.#clientId(a);
    const p = this.#pending.get(clientId);
    if (p) {
      this.#pending.delete(clientId);
      p.abort.abort();
      const l = await p.promise.catch(() => undefined);
      if (l) await l.release();
    }
    const lease = this.leases.get(clientId);
    if (lease) {
      this.leases.delete(clientId);
      await lease.release();
    }
    this.#forget(clientId);
    await this.flush();
  }

  check(a: CallArgs): Result {
    const conf = readIpamConfig(a.config);
    const clientId = this.#clientId(a);
    const lease = this.leases.get(clientId);
    if (!lease) throw new CniError(ErrorCode.Internal, `no DHCP lease for ${clientId}`);
    if (lease.record.state === 'expired')
      throw new CniError(
        ErrorCode.Internal,
        `the DHCP lease of ${clientId} (${lease.record.address}) has expired`,
      );
    const result = resultFromAck(lease.ack, conf.priority);
    const leased = result.ips?.[0]?.address;
    if (a.addresses?.length && leased && !a.addresses.includes(leased))
      throw new CniError(
        ErrorCode.Internal,
        `DHCP lease of ${clientId} is ${leased}, prevResult has ${a.addresses.join(', ')}`,
      );
    return result;
  }

  /** Releases this network's leases whose attachment is not in `valid`. */
  async gc(a: GcArgs): Promise<string[]> {
    const name = netName(a.config);
    const keep = new Set(a.valid.map((v) => generateClientId(v.containerId, name, v.ifName)));
    const gone: string[] = [];
    for (const [clientId, lease] of [...this.leases]) {
      if (lease.record.netName !== name || keep.has(clientId)) continue;
      this.leases.delete(clientId);
      await lease.release();
      this.#forget(clientId);
      gone.push(clientId);
    }
    await this.flush();
    return gone;
  }

  status(): LeaseRecord[] {
    return [...this.leases.values()].map((l) => ({ ...l.record }));
  }

  /** Stops every lease's maintenance without releasing (they are resumed by the next daemon). */
  async shutdown(): Promise<void> {
    for (const p of this.#pending.values()) p.abort.abort();
    await Promise.all([...this.leases.values()].map((l) => l.halt()));
    await this.#store?.close();
  }

  /** Resolves when every lease change so far is on disk. */
  async flush(): Promise<void> {
    await this.#store?.flush();
  }
}

// ---- the socket server ----

function errorJson(err: unknown): { code: number; msg: string; details: string } {
  if (err instanceof CniError)
    return { code: err.code, msg: err.msg ?? err.message, details: err.details ?? '' };
  return { code: ErrorCode.Internal, msg: (err as Error)?.message ?? String(err), details: '' };
}

const REQUIRED = ['containerId', 'netns', 'ifName'] as const;

async function handle(d: DhcpDaemon, method: Method, args: unknown): Promise<unknown> {
  const a = (args ?? {}) as CallArgs;
  if (method !== 'status' && method !== 'ping' && method !== 'gc') {
    // DEL may come without a namespace (the spec allows it): the lease is found by container ID, network and
    // interface, and released through the namespace it was acquired in
    const needed = method === 'release' ? (['containerId', 'ifName'] as const) : REQUIRED;
    for (const k of needed)
      if (typeof a[k] !== 'string' || !a[k])
        throw new CniError(ErrorCode.InvalidEnvironmentVariables, `missing ${k}`);
    if (a.netns !== undefined && typeof a.netns !== 'string')
      throw new CniError(ErrorCode.InvalidEnvironmentVariables, 'netns must be a string');
    if (typeof a.config !== 'object' || a.config === null)
      throw new CniError(ErrorCode.DecodingFailure, 'missing config');
  }
  switch (method) {
    case 'allocate':
      return d.allocate(a);
    case 'release':
      await d.release(a);
      return {};
    case 'check':
      return d.check(a);
    case 'gc':
      return { released: await d.gc(args as GcArgs) };
    case 'status':
      return { pid: process.pid, leases: d.status() };
    case 'ping':
      return { pid: process.pid };
  }
}

/** Serves `d` on `server`'s connections: one request per connection. */
export function attach(server: net.Server, d: DhcpDaemon, log: Log): void {
  server.on('connection', (sock) => {
    sock.setEncoding('utf8');
    const reader = new LineReader();
    let handled = false;
    const idle = setTimeout(() => sock.destroy(), 10_000);
    const reply = (obj: object) => {
      if (!sock.destroyed) sock.write(`${JSON.stringify({ cnikitDhcp: PROTOCOL_VERSION, ...obj })}\n`);
    };
    sock.on('error', () => {});
    sock.on('close', () => clearTimeout(idle));
    sock.on('data', (chunk: string) => {
      if (handled) return;
      if (/^[A-Z]+ \S+ HTTP\/\d/.test(reader.pending + chunk)) {
        // the reference plugin: rpc.DialHTTP's CONNECT /_goRPC_ HTTP/1.0
        handled = true;
        log('refused a Go net/rpc client (the reference dhcp plugin?) on the socket');
        sock.end(GO_RPC_REFUSAL);
        return;
      }
      let lines: string[];
      try {
        lines = reader.push(chunk);
      } catch {
        handled = true;
        sock.end();
        return;
      }
      const line = lines[0];
      if (line === undefined) return;
      handled = true;
      clearTimeout(idle);
      let req: { cnikitDhcp?: unknown; method?: unknown; args?: unknown };
      try {
        req = JSON.parse(line);
      } catch {
        reply({
          ok: false,
          error: { code: ErrorCode.DecodingFailure, msg: 'request is not JSON', details: '' },
        });
        sock.end();
        return;
      }
      if (req.cnikitDhcp !== PROTOCOL_VERSION || !METHODS.includes(req.method as Method)) {
        reply({
          ok: false,
          error: {
            code: ErrorCode.IncompatibleCNIVersion,
            msg: `unsupported request (protocol ${JSON.stringify(req.cnikitDhcp)}, method ${JSON.stringify(req.method)}); this daemon speaks cnikit dhcp protocol v${PROTOCOL_VERSION}`,
            details: '',
          },
        });
        sock.end();
        return;
      }
      reply({ accepted: true });
      handle(d, req.method as Method, req.args).then(
        (result) => {
          reply({ ok: true, result });
          sock.end();
        },
        (err) => {
          reply({ ok: false, error: errorJson(err) });
          sock.end();
        },
      );
    });
  });
}

// ---- command line ----

/** A Go time.Duration string ("10s", "1m30s", "250ms", "1.5h"); undefined when malformed. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  const units: Record<string, number> = {
    ns: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let i = 0;
  if (!text) return undefined;
  while (i < text.length) {
    re.lastIndex = i;
    const m = re.exec(text);
    if (!m) return undefined;
    total += Number(m[1]) * (units[m[2] as string] as number);
    i = re.lastIndex;
  }
  return total;
}

export interface DaemonFlags {
  socketPath: string;
  pidFile: string;
  hostPrefix: string;
  stateDir: string;
  settings: ClientSettings;
}

const USAGE = `Usage of daemon:
  -broadcast
    \tbroadcast DHCP leases
  -hostprefix string
    \toptional prefix to host root
  -pidfile string
    \toptional path to write daemon PID to
  -resendmax duration
    \toptional dhcp client max resend delay between requests (default 1m2s)
  -resendtimeout duration
    \toptional dhcp client resend timeout, no more retries after this timeout (default 3m28s)
  -socketpath string
    \toptional dhcp server socketpath
  -statedir string
    \twhere leases are persisted and resumed from (cnikit; default ${DEFAULT_STATE_DIR})
  -timeout duration
    \toptional dhcp client timeout duration for each request (default 10s)
`;

export class FlagError extends Error {}

/** Go `flag` syntax: -name value, -name=value, --name; booleans take no value (or =true/=false). */
export function parseDaemonFlags(argv: readonly string[]): DaemonFlags {
  const f: DaemonFlags = {
    socketPath: '',
    pidFile: '',
    hostPrefix: '',
    stateDir: DEFAULT_STATE_DIR,
    settings: { ...DEFAULT_SETTINGS },
  };
  const strings: Record<string, (v: string) => void> = {
    socketpath: (v) => {
      f.socketPath = v;
    },
    pidfile: (v) => {
      f.pidFile = v;
    },
    hostprefix: (v) => {
      f.hostPrefix = v;
    },
    statedir: (v) => {
      f.stateDir = v;
    },
  };
  const durations: Record<string, keyof ClientSettings> = {
    timeout: 'timeoutMs',
    resendmax: 'resendMaxMs',
    resendtimeout: 'resendTimeoutMs',
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') break;
    if (!arg.startsWith('-') || arg === '-')
      throw new FlagError(`unexpected argument ${JSON.stringify(arg)}`);
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    let value = eq >= 0 ? body.slice(eq + 1) : undefined;
    if (name === 'broadcast') {
      if (value !== undefined && !['true', 'false', '1', '0'].includes(value))
        throw new FlagError(`invalid boolean value ${JSON.stringify(value)} for -broadcast`);
      f.settings.broadcast = value === undefined || value === 'true' || value === '1';
      continue;
    }
    const known = strings[name] ?? (durations[name] ? true : undefined);
    if (!known) throw new FlagError(`flag provided but not defined: -${name}`);
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new FlagError(`flag needs an argument: -${name}`);
    }
    const setter = strings[name];
    if (setter) setter(value);
    else {
      const ms = parseGoDuration(value);
      if (ms === undefined)
        throw new FlagError(`invalid value ${JSON.stringify(value)} for flag -${name}: parse error`);
      (f.settings as unknown as Record<string, number>)[durations[name] as string] = ms;
    }
  }
  if (!f.socketPath) f.socketPath = DEFAULT_SOCKET_PATH;
  return f;
}

function goLog(stderr: { write(s: string): unknown }): Log {
  return (msg) => {
    const d = new Date();
    const p = (n: number) => String(n).padStart(2, '0');
    stderr.write(
      `${d.getFullYear()}/${p(d.getMonth() + 1)}/${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${msg}\n`,
    );
  };
}

/** True when systemd (or systemd-socket-activate) passed the listening socket as descriptor 3. */
function socketActivated(): boolean {
  return Number(process.env.LISTEN_FDS ?? 0) > 0 && Number(process.env.LISTEN_PID) === process.pid;
}

async function listen(path: string, log: Log, activation = true): Promise<net.Server> {
  const server = net.createServer();
  const fds = Number(process.env.LISTEN_FDS ?? 0);
  if (activation && socketActivated()) {
    if (fds > 1) throw new Error(`Too many (${fds}) FDs passed through socket activation`);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ fd: 3 }, resolve);
    });
    return server;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tryListen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  try {
    await tryListen();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    // a live daemon answers; a stale socket file does not
    const live = await new Promise<boolean>((resolve) => {
      const c = net.createConnection({ path });
      c.once('connect', () => {
        c.destroy();
        resolve(true);
      });
      c.once('error', () => resolve(false));
    });
    if (live)
      throw new Error(`listen unix ${path}: bind: address already in use (another daemon is running)`);
    log(`removing stale socket ${path}`);
    unlinkSync(path);
    await tryListen();
  }
  return server;
}

/** A running daemon: its listener and leases; stop() ends it as SIGTERM ends `dhcp daemon`. */
export interface RunningDaemon {
  /** Where it listens (the socket path, or the descriptor systemd passed). */
  readonly where: string;
  readonly resumed: number;
  readonly daemon: DhcpDaemon;
  /** Stops listening and maintaining (leases stay on disk for the next daemon); removes the socket and pidfile. */
  stop(): Promise<void>;
}

/** Raised by startDaemon when the daemon cannot start; `exitCode` is what `dhcp daemon` exits with. */
export class DaemonStartError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

/**
 * Starts the daemon of `argv` (the `dhcp daemon` flags) in this process: the pidfile, the listener, the leases
 * resumed from -statedir. `activation`: take a socket passed by systemd (the standalone daemon); a host process
 * with sockets of its own (the warm service) passes false. Throws DaemonStartError (bad flags: exit code 2).
 */
export async function startDaemon(
  argv: readonly string[],
  log: Log,
  opts: { activation?: boolean } = {},
): Promise<RunningDaemon> {
  const activation = opts.activation ?? true;
  let flags: DaemonFlags;
  try {
    flags = parseDaemonFlags(argv);
  } catch (err) {
    throw new DaemonStartError(`${(err as Error).message}\n${USAGE}`, 2);
  }
  if (flags.pidFile) {
    if (!isAbsolute(flags.pidFile))
      throw new DaemonStartError(
        `Error writing pidfile ${JSON.stringify(flags.pidFile)}: path not absolute`,
        1,
      );
    writeFileSync(flags.pidFile, String(process.pid), { mode: 0o644 });
  }
  const socketPath = flags.hostPrefix + flags.socketPath;
  const activated = activation && socketActivated();
  let daemon: DhcpDaemon;
  let server: net.Server;
  try {
    daemon = new DhcpDaemon({
      settings: flags.settings,
      hostPrefix: flags.hostPrefix,
      stateDir: flags.stateDir,
      log,
    });
    server = await listen(socketPath, log, activation);
  } catch (err) {
    if (flags.pidFile) rmQuiet(flags.pidFile);
    throw new DaemonStartError(`Error getting listener: ${(err as Error).message}`, 1);
  }
  const resumed = daemon.resume();
  attach(server, daemon, log);
  let stopping: Promise<void> | undefined;
  return {
    where: activated ? 'the socket passed by systemd (fd 3)' : socketPath,
    resumed,
    daemon,
    stop() {
      stopping ??= (async () => {
        server.close();
        await daemon.shutdown();
        if (!activated) rmQuiet(socketPath);
        if (flags.pidFile) rmQuiet(flags.pidFile);
      })();
      return stopping;
    },
  };
}

function rmQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/** `dhcp daemon [flags]`: runs until SIGINT/SIGTERM. Returns the exit code. */
export async function daemonMain(
  argv: readonly string[],
  io: { stderr: { write(s: string): unknown } } = { stderr: process.stderr },
): Promise<number> {
  const log = goLog(io.stderr);
  // the signal handlers first: whoever waits for "listening on" may send SIGTERM at once (seen under the kernel
  // lab's TCG: the daemon died of the signal's default action, exit status null instead of 0)
  let stop = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  let running: RunningDaemon;
  try {
    running = await startDaemon(argv, log);
  } catch (err) {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    if (!(err instanceof DaemonStartError)) throw err;
    if (err.exitCode === 2) io.stderr.write(`${err.message}`);
    else log(err.message);
    return err.exitCode;
  }
  log(`listening on ${running.where}${running.resumed ? `, ${running.resumed} lease(s) resumed` : ''}`);
  await stopped;
  await running.stop();
  return 0;
}
