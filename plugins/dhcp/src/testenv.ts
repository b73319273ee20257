/**
 * Test lab for the dhcp kernel tests (no test in here): private namespaces only — a "switch" namespace with a
 * bridge, a server namespace running Debian's dnsmasq behind it, and container namespaces whose `eth0` is a veth
 * port of the bridge. Nothing touches the machine's root namespace. Every namespace is removed by `destroy()`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { scaled } from '@cnikit/testing';

export const SUBNET = '10.77.0';
export const SERVER_IP = `${SUBNET}.2`;
export const ROUTER = `${SUBNET}.1`;

function run(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, timeout: 120_000 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.slice(0, 6).join(' ')}… failed: ${r.stderr.trim()}`);
  return r.stdout;
}

export interface Container {
  name: string;
  path: string;
  /** The bridge-side veth in the switch namespace. */
  port: string;
}

export interface DnsmasqOptions {
  leaseTime?: string;
  /** `start,end,netmask` of the dhcp-range (default ${SUBNET}.10-250 /24; the server has a /16). */
  range?: string;
  t1?: number;
  t2?: number;
  /** false: without --dhcp-authoritative (a REQUEST for a lease the server does not know is ignored). */
  authoritative?: boolean;
  extra?: string[];
}

export class Lab {
  readonly id = `dh${process.pid.toString(36)}${Math.floor(Math.random() * 1e4).toString(36)}`;
  readonly dir = mkdtempSync(join(tmpdir(), 'cnikit-dhcp-'));
  readonly sw = `${this.id}-sw`;
  readonly srv = `${this.id}-srv`;
  readonly containers: Container[] = [];
  #dnsmasq: ChildProcess | undefined;
  #n = 0;

  /**
   * `bridge` (default): the switch namespace has a bridge, every namespace a veth port of it. `macvlan`: the switch
   * namespace has a veth pair whose end m0 is the master of bridge-mode macvlans, one per namespace (kernel lab).
   */
  readonly mode: 'bridge' | 'macvlan';

  constructor(mode: 'bridge' | 'macvlan' = 'bridge') {
    this.mode = mode;
    run('ip', ['-batch', '-'], `netns add ${this.sw}\nnetns add ${this.srv}\n`);
    if (mode === 'bridge') {
      run(
        'ip',
        ['-n', this.sw, '-batch', '-'],
        [
          'link add br0 type bridge forward_delay 0',
          'link set br0 up',
          `link add s0 type veth peer name srv0 netns ${this.srv}`,
          'link set s0 master br0 up',
        ].join('\n'),
      );
    } else {
      run(
        'ip',
        ['-n', this.sw, '-batch', '-'],
        [
          'link add m0 type veth peer name m1',
          'link set m1 up',
          'link set m0 up',
          'link add mvsrv link m0 type macvlan mode bridge',
          `link set mvsrv netns ${this.srv}`,
        ].join('\n'),
      );
      run('ip', ['-n', this.srv, 'link', 'set', 'mvsrv', 'name', 'srv0']);
    }
    run(
      'ip',
      ['-n', this.srv, '-batch', '-'],
      ['link set lo up', 'link set srv0 up', `addr add ${SERVER_IP}/16 dev srv0`].join('\n'),
    );
  }

  get leaseFile(): string {
    return join(this.dir, 'dnsmasq.leases');
  }

  /** Adds `count` container namespaces, each with an `eth0` (left down: the daemon sets it up) on the bridge. */
  addContainers(count: number): Container[] {
    const added: Container[] = [];
    for (let i = 0; i < count; i++) {
      const n = this.#n++;
      added.push({ name: `${this.id}-c${n}`, path: `/run/netns/${this.id}-c${n}`, port: `p${n}` });
    }
    run('ip', ['-batch', '-'], `${added.map((c) => `netns add ${c.name}`).join('\n')}\n`);
    this.containers.push(...added);
    if (this.mode === 'bridge') {
      run(
        'ip',
        ['-n', this.sw, '-batch', '-'],
        `${added
          .flatMap((c) => [
            `link add ${c.port} type veth peer name eth0 netns ${c.name}`,
            `link set ${c.port} master br0 up`,
          ])
          .join('\n')}\n`,
      );
    } else {
      run(
        'ip',
        ['-n', this.sw, '-batch', '-'],
        `${added
          .flatMap((c) => [
            `link add ${c.port} link m0 type macvlan mode bridge`,
            `link set ${c.port} netns ${c.name}`,
          ])
          .join('\n')}\n`,
      );
      for (const c of added) run('ip', ['-n', c.name, 'link', 'set', c.port, 'name', 'eth0']);
    }
    return added;
  }

  /** Removes a container namespace (its veth goes with it). */
  removeContainer(c: Container): void {
    spawnSync('ip', ['netns', 'del', c.name]);
  }

  /** Starts dnsmasq in the server namespace (DHCP only, no DNS), waiting until it listens. */
  async startServer(o: DnsmasqOptions = {}): Promise<void> {
    const args = [
      'netns',
      'exec',
      this.srv,
      'dnsmasq',
      '--keep-in-foreground',
      '--conf-file=/dev/null',
      '--no-resolv',
      '--no-hosts',
      '--port=0',
      '--bind-interfaces',
      '--interface=srv0',
      '--user=root',
      '--group=root',
      ...(o.authoritative === false ? [] : ['--dhcp-authoritative']),
      '--no-ping',
      '--log-dhcp',
      `--log-facility=${join(this.dir, 'dnsmasq.log')}`,
      `--dhcp-leasefile=${this.leaseFile}`,
      `--pid-file=${join(this.dir, 'dnsmasq.pid')}`,
      `--dhcp-range=${o.range ?? `${SUBNET}.10,${SUBNET}.250,255.255.255.0`},${o.leaseTime ?? '2m'}`,
      `--dhcp-option=option:router,${ROUTER}`,
      `--dhcp-option=option:dns-server,${SUBNET}.53,${SUBNET}.54`,
      '--dhcp-option=option:domain-name,corp.test',
      '--dhcp-option=option:domain-search,corp.test,lab.test',
      '--dhcp-lease-max=1000',
      ...(o.t1 ? [`--dhcp-option=option:T1,${o.t1}`] : []),
      ...(o.t2 ? [`--dhcp-option=option:T2,${o.t2}`] : []),
      ...(o.extra ?? []),
    ];
    const child = spawn('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    this.#dnsmasq = child;
    const deadline = Date.now() + 10_000;
    while (!existsSync(join(this.dir, 'dnsmasq.pid'))) {
      if (child.exitCode !== null) throw new Error(`dnsmasq exited: ${stderr}`);
      if (Date.now() > deadline) throw new Error(`dnsmasq did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stopServer(): Promise<void> {
    const child = this.#dnsmasq;
    this.#dnsmasq = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(join(this.dir, 'dnsmasq.pid'), { force: true });
  }

  /** dnsmasq's lease file, one entry per line (`expiry mac address hostname client-id`): {@link readDnsmasqLeases}. */
  leases(): DnsmasqLease[] {
    return readDnsmasqLeases(this.leaseFile);
  }

  serverLog(): string {
    const p = join(this.dir, 'dnsmasq.log');
    return existsSync(p) ? readFileSync(p, 'utf8') : '';
  }

  /** `ip -json` output of a command run in a container namespace. */
  ipJson(c: Container, args: string[]): unknown {
    return JSON.parse(run('ip', ['-n', c.name, '-json', ...args]) || '[]');
  }

  async destroy(): Promise<void> {
    await this.stopServer();
    const names = [this.sw, this.srv, ...this.containers.map((c) => c.name)];
    spawnSync('ip', ['-force', '-batch', '-'], {
      input: `${names.map((n) => `netns del ${n}`).join('\n')}\n`,
    });
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface DnsmasqLease {
  expires: number;
  mac: string;
  address: string;
  hostname: string;
  clientId: string;
}

/** The pause between the two reads of the lease file that must agree (see below). */
export const LEASE_FILE_SETTLE_MS = 20;

/**
 * The leases in a dnsmasq lease file. dnsmasq rewrites the file in place (ftruncate to 0, then the lines in one
 * write), so a plain read can land between the two and see none of them: "the lease is gone" passed and "the other
 * lease is still there" failed. The file's times do not tell (on this machine's 6.18 an ftruncate left mtime and
 * ctime as they were), so a read counts when a second one LEASE_FILE_SETTLE_MS later agrees with it: dnsmasq
 * rewrites only when a packet or a timer says so, and holds the file truncated for microseconds (a time slice when
 * it is preempted), so two such moments 20 ms apart do not happen. `timeoutMs`: how long to wait for two reads that
 * agree before giving up; `read`: how the file is read (a test's stand-in for the race).
 */
export function readDnsmasqLeases(
  path: string,
  timeoutMs = scaled(30_000),
  read = () => (existsSync(path) ? readFileSync(path, 'utf8') : ''),
): DnsmasqLease[] {
  const deadline = Date.now() + timeoutMs;
  let last = read();
  for (;;) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, LEASE_FILE_SETTLE_MS);
    const now = read();
    if (now === last) return parseDnsmasqLeases(now);
    if (Date.now() > deadline)
      throw new Error(
        `${path} changed between every two reads ${LEASE_FILE_SETTLE_MS} ms apart for ${timeoutMs} ms`,
      );
    last = now;
  }
}

function parseDnsmasqLeases(text: string): DnsmasqLease[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [expires, mac, address, hostname, clientId] = l.split(' ');
      return {
        expires: Number(expires),
        mac: mac ?? '',
        address: address ?? '',
        hostname: hostname ?? '',
        clientId: clientId ?? '',
      };
    });
}

/** dnsmasq writes client IDs as hex pairs: `00:63:74:72…` for type 0 + the text. */
export function dnsmasqClientId(clientId: string): string {
  return ['00', ...Buffer.from(clientId).toString('hex').match(/../g)!].join(':');
}

/**
 * `dhcp daemon ARGS` from source in a child process (node + tsx, as the executable would run daemonMain); resolves
 * once the socket answers. `binary` runs a compiled executable instead (argv: its path, `daemon`, ARGS).
 */
export async function startDaemon(
  socketPath: string,
  args: string[],
  binary?: string,
): Promise<{ child: ChildProcess; stderr: () => string }> {
  const daemonModule = pathToFileURL(join(import.meta.dirname, 'daemon.ts')).href;
  const child = binary
    ? spawn(binary, ['daemon', '-socketpath', socketPath, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
    : spawn(
        process.execPath,
        [
          '--conditions=cnikit-source',
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          `const { daemonMain } = await import(${JSON.stringify(daemonModule)}); process.exitCode = await daemonMain(process.argv.slice(1));`,
          '--',
          '-socketpath',
          socketPath,
          ...args,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  // generous: a daemon from source compiles its TypeScript first, on a loaded machine that takes a while (scaled: in
  // the kernel lab at load ~10 it took more than 60 s)
  const deadline = Date.now() + scaled(60_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`dhcp daemon exited ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`dhcp daemon did not listen on ${socketPath}: ${stderr}`);
    }
    if (stderr.includes('listening on')) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, stderr: () => stderr };
}

/** Stops a child with `signal` and waits for it to exit. */
export async function stopProcess(
  child: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill(signal);
  return exited;
}
