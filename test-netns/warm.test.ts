/**
 * Warm mode, black box: dist-bin/warm/<plugin> (the static client) talking to `dist-bin/cnikit serve` on a socket in
 * a temporary directory (CNIKIT_SOCKET), compared byte for byte with the cold executables dist-bin/<plugin>. Plugins
 * run from a private "host" namespace against a private container namespace, like a runtime would call them.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closeFd, listenUnix } from '@cnikit/sys';
import {
  type CniCallOptions,
  type CniCommand,
  cniEnv,
  createSandbox,
  enterNetns,
  eventually,
  type Sandbox,
  scaled,
  sleep,
} from '@cnikit/testing';
import { DIST, distPlugins, ensureBuilt } from './dist.ts';
import { hangFirewallTools, slowIpam as slowIpamIn } from './stuck.ts';

ensureBuilt();
const WARM = join(DIST, 'warm');
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-warm-'));
const sockDir = join(scratch, 'run');
mkdirSync(sockDir, { mode: 0o700 });
const SOCK = join(sockDir, 'cnikit.sock');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
const DEADLINE_MS = scaled(3000);

/** A `cnikit serve` process started by the test; stopped (SIGTERM, then SIGKILL) in teardown. */
class ServiceProc {
  readonly proc: ChildProcess;
  readonly logFile: string;
  constructor(
    readonly socket: string,
    args: string[] = [],
    env: Record<string, string> = {},
  ) {
    // the log goes to a file: a pipe that this (often synchronously busy) process does not drain would block it
    this.logFile = `${socket}.log`;
    const fd = openSync(this.logFile, 'a');
    try {
      this.proc = spawn(join(DIST, 'cnikit'), ['serve', '--socket', socket, '--verbose', ...args], {
        stdio: ['ignore', 'ignore', fd],
        env: { PATH, ...env },
      });
    } finally {
      closeSync(fd);
    }
  }
  get log(): string {
    return readFileSync(this.logFile, 'utf8');
  }
  get pid(): number {
    return this.proc.pid as number;
  }
  /** Requests answered so far (one `→ exit` line each with --verbose). */
  served(): number {
    return this.log.split('\n').filter((l) => l.includes(' → exit ')).length;
  }
  async ready(): Promise<void> {
    await eventually(
      () => check(this.socket).status === 0,
      `service on ${this.socket} answers --check`,
      10_000,
    );
  }
  async waitServed(n: number): Promise<void> {
    await eventually(() => this.served() >= n, `service answered ${n} requests (log:\n${this.log})`, 30_000);
  }
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), scaled(5000));
    await done;
    clearTimeout(t);
  }
}

function check(socket: string) {
  return spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', socket], {
    encoding: 'utf8',
    env: { PATH },
  });
}

let svc: ServiceProc;
const sandboxes: Sandbox[] = [];
function sandbox(): Sandbox {
  const sb = createSandbox();
  sandboxes.push(sb);
  return sb;
}
const extraPids: number[] = [];

before(async () => {
  svc = new ServiceProc(SOCK, ['--deadline-ms', String(DEADLINE_MS)]);
  await svc.ready();
});
after(async () => {
  await svc?.stop();
  for (const pid of extraPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const sb of sandboxes) sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
});

type Mode = 'cold' | 'warm';
interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

function bin(mode: Mode, plugin: string): string {
  return mode === 'warm' ? join(WARM, plugin) : join(DIST, plugin);
}

function envFor(command: CniCommand | '', o: CniCallOptions, socket = SOCK): Record<string, string> {
  const env: Record<string, string> = command === '' ? {} : cniEnv(command, o);
  if (command === '') for (const [k, v] of Object.entries(o.env ?? {})) if (v !== undefined) env[k] = v;
  return { PATH, CNIKIT_SOCKET: socket, ...env };
}

/** One call through the cold or the warm executable, from the sandbox's host namespace (or this one). */
function call(
  mode: Mode,
  plugin: string,
  command: CniCommand | '',
  conf: unknown,
  o: CniCallOptions = {},
  sb?: Sandbox,
): Out {
  const input = typeof conf === 'string' ? conf : JSON.stringify(conf);
  const run = () =>
    spawnSync(bin(mode, plugin), [], {
      input,
      env: envFor(command, o),
      encoding: 'utf8',
      timeout: scaled(30_000),
    });
  const r = sb ? sb.runInHost(run) : run();
  // EPIPE: the executable answered without reading stdin (VERSION) and exited before Node wrote it
  if (r.error && (r.error as NodeJS.ErrnoException).code !== 'EPIPE') throw r.error;
  return { code: r.status ?? 128, stdout: r.stdout, stderr: r.stderr };
}

/** Random parts of a result (MAC addresses, host-side veth names) replaced by placeholders. */
function normalize(s: string): string {
  return s.replace(/"mac": "[0-9a-f:]{17}"/g, '"mac": "<mac>"').replace(/veth[0-9a-f]{8}/g, 'veth<id>');
}

function startAsync(
  file: string,
  env: Record<string, string>,
  input: string,
  sb?: Sandbox,
): { child: ChildProcess; done: Promise<Out> } {
  const inNs = sb ? enterNetns(sb.host.path) : undefined;
  let child: ChildProcess;
  try {
    child = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  } finally {
    inNs?.restore();
  }
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  child.stdin?.on('error', () => {});
  child.stdin?.end(input);
  const done = new Promise<Out>((resolve) => {
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
  return { child, done };
}

function spawnAsync(file: string, env: Record<string, string>, input: string, sb?: Sandbox): Promise<Out> {
  return startAsync(file, env, input, sb).done;
}

const VERSION_STDIN = '{"cniVersion":"1.1.0"}';

describe('warm mode: cold and warm answer byte for byte', () => {
  test('VERSION and the bare invocation of every plugin', async () => {
    const plugins = distPlugins();
    assert.ok(plugins.length >= 8, `plugins: ${plugins.join(', ')}`);
    const before0 = svc.served();
    for (const p of plugins) {
      const cold = call('cold', p, 'VERSION', VERSION_STDIN);
      const warm = call('warm', p, 'VERSION', VERSION_STDIN);
      assert.equal(cold.code, 0, `${p}: ${cold.stderr}`);
      assert.match(cold.stdout, /"supportedVersions"/);
      assert.deepEqual(warm, cold, p);
      const bareCold = call('cold', p, '', '');
      const bareWarm = call('warm', p, '', '');
      assert.match(bareCold.stderr, /CNI protocol versions supported/);
      assert.deepEqual(bareWarm, bareCold, `${p} without CNI_COMMAND`);
    }
    await svc.waitServed(before0 + plugins.length * 2);
  });

  test('error cases: bad JSON, unknown version, missing/unknown CNI_COMMAND, missing variables, own namespace', async () => {
    const sb = sandbox();
    const base: CniCallOptions = { netns: sb.container.path, path: WARM };
    const lo = { cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' };
    const cases: Array<[string, string, CniCommand | '', unknown, CniCallOptions, number | 'about']> = [
      ['bad JSON', 'bridge', 'ADD', '{"cniVersion": "1.0.0", nope', base, 6],
      ['empty stdin', 'loopback', 'ADD', '', base, 6],
      ['unknown version', 'loopback', 'ADD', { ...lo, cniVersion: '9.9.9' }, base, 1],
      ['CHECK on 0.3.1', 'loopback', 'CHECK', { ...lo, cniVersion: '0.3.1' }, base, 1],
      [
        'missing CNI_COMMAND',
        'bridge',
        '',
        lo,
        { env: { CNI_NETNS: sb.container.path, CNI_PATH: WARM } },
        'about',
      ],
      ['unknown CNI_COMMAND', 'loopback', 'ADD', lo, { ...base, env: { CNI_COMMAND: 'FROB' } }, 4],
      ['missing CNI_CONTAINERID', 'loopback', 'ADD', lo, { ...base, env: { CNI_CONTAINERID: undefined } }, 4],
      ['bad interface name', 'bridge', 'ADD', { ...lo, type: 'bridge' }, { ...base, ifName: 'a/b' }, 4],
      ['missing network name', 'loopback', 'DEL', { cniVersion: '1.0.0', type: 'loopback' }, base, 7],
      ["CNI_NETNS is the plugin's own namespace", 'loopback', 'ADD', lo, { ...base, netns: sb.host.path }, 8],
      [
        'no such namespace',
        'loopback',
        'ADD',
        lo,
        { ...base, netns: '/run/netns/cnikit-no-such-ns' },
        'any',
      ] as never,
      ['bridge of a bad type', 'bridge', 'ADD', { ...lo, type: 'bridge', mtu: 'big' }, base, 'any'] as never,
    ];
    const before0 = svc.served();
    for (const [what, plugin, cmd, conf, o, want] of cases) {
      const cold = call('cold', plugin, cmd, conf, { ...o, path: DIST }, sb);
      const warm = call('warm', plugin, cmd, conf, o, sb);
      if (want === 'about') {
        assert.equal(cold.code, 0, what);
        assert.match(cold.stderr, /CNI protocol versions supported/, what);
      } else {
        assert.equal(cold.code, 1, `${what}: ${cold.stdout}`);
        const err = JSON.parse(cold.stdout) as { code: number; msg: string };
        if (typeof want === 'number') assert.equal(err.code, want, `${what}: ${cold.stdout}`);
        assert.ok(err.msg.length > 0);
      }
      assert.deepEqual(warm, cold, what);
    }
    await svc.waitServed(before0 + cases.length);
  });

  test('closed stdin, /dev/null stdin, closed or /dev/null stdout: the same answers', () => {
    const sb = sandbox();
    const lo = JSON.stringify({ cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' });
    const loUp = () =>
      sb.exec('ip', ['-o', 'link', 'show', 'lo'], { ns: 'container' }).stdout.includes(',UP');
    // a shell only to close descriptors the way a caller can (`<&-`, `>&-`); "$0" is the executable
    const variants: Array<[string, string, string]> = [
      ['stdin closed', 'exec "$0" <&-', ''],
      ['stdin /dev/null', 'exec "$0" </dev/null', ''],
      ['stdout closed', 'exec "$0" >&-', lo],
      ['stdout /dev/null', 'exec "$0" >/dev/null', lo],
    ];
    for (const [what, script, input] of variants) {
      const res: Record<Mode, Out & { up: boolean }> = {} as never;
      for (const mode of ['cold', 'warm'] as const) {
        sb.exec('ip', ['link', 'set', 'lo', 'down'], { ns: 'container' });
        const r = sb.runInHost(() =>
          spawnSync('sh', ['-c', script, bin(mode, 'loopback')], {
            input,
            env: envFor('ADD', { netns: sb.container.path, path: mode === 'warm' ? WARM : DIST }),
            encoding: 'utf8',
          }),
        );
        res[mode] = { code: r.status ?? 128, stdout: r.stdout, stderr: r.stderr, up: loUp() };
      }
      // stdin: error 5/6; stdout closed or /dev/null: delivered (a closed fd 1 is reopened on /dev/null), so the ADD
      // stays; a real write failure is rolled back (test-netns/hardening.test.ts)
      const stdout = what.startsWith('stdout');
      assert.equal(res.cold.code, stdout ? 0 : 1, `${what}: ${res.cold.stdout}`);
      if (stdout) assert.equal(res.cold.up, true, `${what}: the ADD was applied`);
      if (what === 'stdout closed') {
        // the one known difference: the C client sees its closed fd 1 and the service rolls the ADD back (code 5
        // on stderr), where the cold runtime cannot tell it from /dev/null
        assert.equal(res.warm.code, 1, what);
        assert.equal(res.warm.up, false, `${what}: warm rolled the ADD back`);
        assert.match(res.warm.stderr, /stdout is closed/);
      } else assert.deepEqual(res.warm, res.cold, what);
    }
  });

  test('loopback ADD / CHECK / DEL', async () => {
    const sb = sandbox();
    const lo = { cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' };
    const loUp = () =>
      (
        JSON.parse(sb.exec('ip', ['-json', 'link', 'show', 'lo'], { ns: 'container' }).stdout) as Array<{
          flags: string[];
        }>
      )[0]?.flags.includes('UP');
    sb.exec('ip', ['link', 'set', 'lo', 'down'], { ns: 'container' });
    const out: Record<Mode, Out[]> = { cold: [], warm: [] };
    for (const mode of ['cold', 'warm'] as const) {
      const o = { netns: sb.container.path, path: mode === 'warm' ? WARM : DIST };
      const add = call(mode, 'loopback', 'ADD', lo, o, sb);
      assert.equal(add.code, 0, add.stdout);
      assert.ok(loUp(), `${mode}: lo is UP after ADD`);
      const chk = call(mode, 'loopback', 'CHECK', { ...lo, prevResult: JSON.parse(add.stdout) }, o, sb);
      assert.equal(chk.code, 0, chk.stdout);
      const del = call(mode, 'loopback', 'DEL', lo, o, sb);
      assert.equal(del.code, 0, del.stdout);
      assert.ok(!loUp(), `${mode}: lo is DOWN after DEL`);
      out[mode] = [add, chk, del];
    }
    assert.deepEqual(out.warm, out.cold);
  });

  test('bridge + host-local ADD / CHECK / DEL (delegation in-process through the warm client path)', () => {
    const sb = sandbox();
    const conf = (mode: Mode) => ({
      cniVersion: '1.0.0',
      name: 'warm-br',
      type: 'bridge',
      bridge: 'cnwbr0',
      isGateway: true,
      ipam: { type: 'host-local', subnet: '10.250.7.0/24', dataDir: join(scratch, `ipam-${mode}`) },
    });
    const results: Record<string, Out[]> = {};
    for (const mode of ['cold', 'warm'] as const) {
      // host-local in CNI_PATH is a warm client: the service must run it in-process. Through a nested client it would
      // wait for a hello the busy service never sends (here: for a minute, past the service's deadline) → code 11.
      const o = {
        netns: sb.container.path,
        path: mode === 'warm' ? WARM : DIST,
        containerId: 'ctr-warm-br',
        env: { CNIKIT_HELLO_TIMEOUT_MS: '60000' },
      };
      const add = call(mode, 'bridge', 'ADD', conf(mode), o, sb);
      assert.equal(add.code, 0, `${mode}: ${add.stdout}${add.stderr}`);
      const addrs = sb.exec('ip', ['-4', '-o', 'addr', 'show', 'eth0'], { ns: 'container' }).stdout;
      assert.match(addrs, /10\.250\.7\.2\/24/, `${mode}: eth0 got the first address`);
      assert.match(
        sb.exec('ip', ['-o', 'link', 'show', 'master', 'cnwbr0']).stdout,
        /veth/,
        `${mode}: veth on the bridge`,
      );
      assert.ok(
        existsSync(join(scratch, `ipam-${mode}`, 'warm-br', '10.250.7.2')),
        `${mode}: reservation file`,
      );
      const chk = call(mode, 'bridge', 'CHECK', { ...conf(mode), prevResult: JSON.parse(add.stdout) }, o, sb);
      assert.equal(chk.code, 0, `${mode} CHECK: ${chk.stdout}`);
      const del = call(mode, 'bridge', 'DEL', conf(mode), o, sb);
      assert.equal(del.code, 0, `${mode} DEL: ${del.stdout}`);
      assert.equal(
        sb.exec('ip', ['link', 'show', 'eth0'], { ns: 'container', check: false }).status,
        1,
        `${mode}: eth0 gone`,
      );
      assert.ok(
        !existsSync(join(scratch, `ipam-${mode}`, 'warm-br', '10.250.7.2')),
        `${mode}: reservation released`,
      );
      const del2 = call(mode, 'bridge', 'DEL', conf(mode), o, sb);
      assert.equal(del2.code, 0, `${mode} DEL again`);
      results[mode] = [add, chk, del, del2].map((r) => ({ ...r, stdout: normalize(r.stdout) }));
    }
    assert.deepEqual(results.warm, results.cold);
  });
});

interface WarmChain {
  name: string;
  /** The plugins after bridge + host-local. */
  plugins: (mode: Mode) => Array<Record<string, unknown>>;
  /** What must be in the host while the container is attached. */
  up: (sb: ReturnType<typeof sandbox>, mode: Mode) => void;
}

const WARM_CHAINS: WarmChain[] = [
  {
    name: 'kubelet-style (bridge + host-local, tuning, portmap, bandwidth)',
    plugins: (mode) => [
      {
        type: 'tuning',
        dataDir: join(scratch, `chain-tuning-${mode}`),
        mtu: 1400,
        sysctl: { 'net.ipv4.conf.eth0.arp_ignore': '1' },
      },
      {
        type: 'portmap',
        capabilities: { portMappings: true },
        runtimeConfig: { portMappings: [{ hostPort: 18082, containerPort: 80, protocol: 'tcp' }] },
      },
      {
        type: 'bandwidth',
        ingressRate: 100_000_000,
        ingressBurst: 1_000_000,
        egressRate: 100_000_000,
        egressBurst: 1_000_000,
      },
    ],
    up: (sb, mode) => {
      assert.match(
        sb.exec('ip', ['-o', 'link', 'show', 'eth0'], { ns: 'container' }).stdout,
        /mtu 1400/,
        `${mode}: tuning`,
      );
      assert.match(sb.exec('iptables-save', ['-t', 'nat']).stdout, /--dport 18082/, `${mode}: portmap rule`);
      assert.match(sb.exec('tc', ['qdisc', 'show']).stdout, /tbf/, `${mode}: bandwidth qdisc`);
    },
  },
  {
    name: "podman's default (bridge + host-local, portmap, firewall, tuning)",
    plugins: (mode) => [
      {
        type: 'portmap',
        capabilities: { portMappings: true },
        runtimeConfig: { portMappings: [{ hostPort: 18082, containerPort: 80, protocol: 'tcp' }] },
      },
      { type: 'firewall', backend: 'iptables', dataDir: join(scratch, `chain-firewall-${mode}`) },
      { type: 'tuning', dataDir: join(scratch, `chain-tuning-p-${mode}`), mtu: 1400 },
    ],
    up: (sb, mode) => {
      assert.match(sb.exec('iptables-save', ['-t', 'nat']).stdout, /--dport 18082/, `${mode}: portmap rule`);
      assert.match(
        sb.exec('iptables-save', ['-t', 'filter']).stdout,
        /-A CNI-FORWARD -s 10\.251\.3\.\d+\/32 -j ACCEPT/,
        `${mode}: firewall rule`,
      );
    },
  },
];

for (const wc of WARM_CHAINS) {
  describe(`warm mode: ${wc.name}`, () => {
    test('ADD / CHECK / DEL byte for byte', () => {
      const sb = sandbox();
      const chain = (mode: Mode): Array<Record<string, unknown>> => [
        {
          type: 'bridge',
          bridge: 'cnwch0',
          isGateway: true,
          ipMasq: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.251.3.0/24' }]],
            dataDir: join(scratch, `chain-ipam-${wc.name.length}-${mode}`),
          },
        },
        ...wc.plugins(mode),
      ];
      const head = { cniVersion: '1.0.0', name: 'warm-chain' };
      const outs: Record<string, string[]> = {};
      for (const mode of ['cold', 'warm'] as const) {
        const o = {
          netns: sb.container.path,
          path: mode === 'warm' ? WARM : DIST,
          containerId: 'ctr-warm-chain',
        };
        const log: string[] = [];
        let prev: unknown;
        for (const p of chain(mode)) {
          const r = call(
            mode,
            p.type as string,
            'ADD',
            { ...head, ...p, ...(prev ? { prevResult: prev } : {}) },
            o,
            sb,
          );
          assert.equal(r.code, 0, `${mode} ${p.type} ADD: ${r.stdout}${r.stderr}`);
          prev = JSON.parse(r.stdout);
          log.push(`ADD ${p.type} ${r.code} ${normalize(r.stdout)} ${r.stderr}`);
        }
        wc.up(sb, mode);
        for (const p of chain(mode)) {
          const r = call(mode, p.type as string, 'CHECK', { ...head, ...p, prevResult: prev }, o, sb);
          log.push(`CHECK ${p.type} ${r.code} ${r.stdout} ${r.stderr}`);
        }
        for (const p of [...chain(mode)].reverse()) {
          const r = call(mode, p.type as string, 'DEL', { ...head, ...p, prevResult: prev }, o, sb);
          assert.equal(r.code, 0, `${mode} ${p.type} DEL: ${r.stdout}`);
          log.push(`DEL ${p.type} ${r.code} ${r.stdout} ${r.stderr}`);
        }
        assert.doesNotMatch(
          sb.exec('iptables-save', ['-t', 'nat']).stdout,
          /--dport 18082/,
          `${mode}: portmap rule removed`,
        );
        assert.equal(
          sb.exec('ip', ['link', 'show', 'eth0'], { ns: 'container', check: false }).status,
          1,
          `${mode}: eth0 gone`,
        );
        outs[mode] = log;
      }
      assert.deepEqual(outs.warm, outs.cold);
    });
  });
}

describe('warm mode: failures and fallback', () => {
  test('service absent (no socket, stale socket) → the cold executable answers', () => {
    const cold = call('cold', 'bridge', 'VERSION', VERSION_STDIN);
    for (const socket of [join(scratch, 'none.sock'), staleSocket()]) {
      const r = spawnSync(join(WARM, 'bridge'), [], {
        input: VERSION_STDIN,
        env: { PATH, CNI_COMMAND: 'VERSION', CNIKIT_SOCKET: socket },
        encoding: 'utf8',
      });
      assert.deepEqual({ code: r.status, stdout: r.stdout, stderr: r.stderr }, cold, socket);
    }
    // the fallback reads the configuration the client never touched
    const sb = sandbox();
    const lo = { cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' };
    const r = sb.runInHost(() =>
      spawnSync(join(WARM, 'loopback'), [], {
        input: JSON.stringify(lo),
        env: {
          ...envFor('ADD', { netns: sb.container.path, path: WARM }),
          CNIKIT_SOCKET: join(scratch, 'none.sock'),
        },
        encoding: 'utf8',
      }),
    );
    assert.equal(r.status, 0, r.stdout);
    assert.equal((JSON.parse(r.stdout) as { ips: unknown[] }).ips.length, 2);
  });

  test('a peer that is no cnikit service (bad magic, other version, silent) gets no byte; cold answers', async () => {
    const cold = call('cold', 'loopback', 'VERSION', VERSION_STDIN);
    const hellos: Array<[string, Buffer | undefined]> = [
      ['bad magic', Buffer.from('HTTP/1.1 400 Bad')],
      [
        'protocol version 2',
        (() => {
          const b = Buffer.alloc(16);
          b.write('CNKW', 0, 'latin1');
          b[4] = 2;
          return b;
        })(),
      ],
      ['silent', undefined],
    ];
    for (const [what, hello] of hellos) {
      const path = join(sockDir, `fake-${what.replace(/\W/g, '')}.sock`);
      let received = 0;
      const server: Server = createServer((s) => {
        s.on('data', (d) => {
          received += d.length;
        });
        s.on('error', () => {});
        if (hello) s.write(hello);
      });
      await new Promise<void>((r) => server.listen(path, r));
      try {
        const r = await spawnAsync(
          join(WARM, 'loopback'),
          { PATH, CNI_COMMAND: 'VERSION', CNIKIT_SOCKET: path, CNIKIT_HELLO_TIMEOUT_MS: '300' },
          VERSION_STDIN,
        );
        assert.deepEqual(r, cold, what);
        assert.equal(received, 0, `${what}: the client sent nothing to a peer that is not the service`);
      } finally {
        await new Promise((r) => server.close(r));
      }
    }
  });

  test('a non-root client: the 0600 socket refuses it, and so does SO_PEERCRED; the cold executable answers', async () => {
    const asNobody = (socket: string) =>
      spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', join(WARM, 'bridge')], {
        input: VERSION_STDIN,
        env: { PATH, CNI_COMMAND: 'VERSION', CNIKIT_SOCKET: socket },
        encoding: 'utf8',
      });
    const cold = call('cold', 'bridge', 'VERSION', VERSION_STDIN);
    const served0 = svc.served();
    const r1 = asNobody(SOCK);
    assert.equal(r1.error, undefined);
    assert.deepEqual({ code: r1.status, stdout: r1.stdout, stderr: r1.stderr }, cold);
    // open the permissions so that only the service's SO_PEERCRED check stands between nobody and the service
    chmodSync(scratch, 0o711);
    chmodSync(sockDir, 0o711);
    chmodSync(SOCK, 0o666);
    try {
      const r2 = asNobody(SOCK);
      assert.deepEqual({ code: r2.status, stdout: r2.stdout, stderr: r2.stderr }, cold);
      await eventually(
        () => svc.log.includes('refused a client of uid 65534'),
        'the service logs the refusal',
      );
    } finally {
      chmodSync(scratch, 0o700);
      chmodSync(sockDir, 0o700);
      chmodSync(SOCK, 0o600);
    }
    assert.equal(svc.served(), served0, 'no request of uid 65534 was served');
  });

  test('a request that exceeds the deadline answers code 11; the service re-executes itself and goes on', async () => {
    const sb = sandbox();
    const { dir, pidfile } = slowIpam('deadline');
    const conf = slowBridge('warm-dl');
    const t0 = performance.now();
    const r = call(
      'warm',
      'bridge',
      'ADD',
      conf,
      {
        netns: sb.container.path,
        path: `${dir}:${WARM}`,
        env: { CNIKIT_TEST_PIDFILE: pidfile },
      },
      sb,
    );
    const took = performance.now() - t0;
    killPids(pidfile);
    assert.equal(r.code, 1);
    const err = JSON.parse(r.stdout) as { code: number; msg: string };
    assert.equal(err.code, 11);
    assert.match(err.msg, new RegExp(`did not finish within ${DEADLINE_MS} ms`));
    assert.ok(took >= DEADLINE_MS - 100 && took < DEADLINE_MS + scaled(3000), `answered after ${took} ms`);
    await eventually(() => svc.log.includes('re-executing'), 'the service re-executes itself');
    await svc.ready();
    assert.match(check(SOCK).stdout, new RegExp(`pid ${svc.pid} `), 'same pid after the re-exec');
    const v = call('warm', 'loopback', 'VERSION', VERSION_STDIN);
    assert.deepEqual(v, call('cold', 'loopback', 'VERSION', VERSION_STDIN));
  });

  test('a request stuck in synchronous code: the watchdog re-executes the service; the client reports code 11', async () => {
    const sb = sandbox();
    // every firewall tool the bridge's ipMasq could run blocks (spawnSync, well past the deadline)
    const { dir, pidfile } = slowIpam('sync');
    hangFirewallTools(dir);
    const socket = join(sockDir, 'sync.sock');
    const stuck = new ServiceProc(socket, ['--deadline-ms', '1000'], {
      PATH: `${dir}:${PATH}`,
      CNIKIT_TEST_PIDFILE: pidfile,
    });
    try {
      await stuck.ready();
      const conf = {
        cniVersion: '1.0.0',
        name: 'warm-sync',
        type: 'bridge',
        bridge: 'cnwsync0',
        ipMasq: true,
        ipam: { type: 'host-local', subnet: '10.252.1.0/24', dataDir: join(scratch, 'ipam-sync') },
      };
      const t0 = performance.now();
      const r = sb.runInHost(() =>
        spawnSync(join(WARM, 'bridge'), [], {
          input: JSON.stringify(conf),
          env: envFor('ADD', { netns: sb.container.path, path: WARM }, socket),
          encoding: 'utf8',
          timeout: scaled(30_000),
        }),
      );
      const took = performance.now() - t0;
      killPids(pidfile);
      assert.equal(r.status, 1, r.stdout);
      const err = JSON.parse(r.stdout) as { code: number; msg: string };
      assert.equal(err.code, 11);
      assert.match(err.msg, /connection lost during the request/);
      assert.ok(
        took >= 2900 && took < scaled(10_000),
        `answered after ${took.toFixed(0)} ms (deadline 1000 + grace 2000)`,
      );
      assert.ok(existsSync(pidfile), 'a firewall tool was running when the watchdog fired');
      await eventually(() => stuck.log.includes('watchdog'), 'the watchdog logs');
      await stuck.ready();
      assert.match(check(socket).stdout, new RegExp(`pid ${stuck.pid} `), 'same pid, new image');
    } finally {
      await stuck.stop();
      killPids(pidfile);
    }
  });

  test('service killed mid-request → code 11, never replayed cold; the state is that of a killed cold process', async () => {
    const state: Record<Mode, string[]> = { cold: [], warm: [] };
    for (const mode of ['cold', 'warm'] as const) {
      const sb = sandbox();
      const socket = join(sockDir, `kill-${mode}.sock`);
      const victim = mode === 'warm' ? new ServiceProc(socket) : undefined;
      await victim?.ready();
      const { dir, pidfile } = slowIpam(`kill-${mode}`);
      const env = {
        ...envFor(
          'ADD',
          {
            netns: sb.container.path,
            path: `${dir}:${mode === 'warm' ? WARM : DIST}`,
            containerId: 'ctr-kill',
          },
          socket,
        ),
        CNIKIT_TEST_PIDFILE: pidfile,
      };
      const running = startAsync(bin(mode, 'bridge'), env, JSON.stringify(slowBridge('warm-kill')), sb);
      await eventually(
        () => existsSync(pidfile) && readFileSync(pidfile, 'utf8').trim() !== '',
        'the IPAM delegate runs',
      );
      assert.equal(running.child.exitCode, null, 'the call is still running');
      // warm: kill the service; cold: kill the plugin process itself, at the same point
      if (victim) victim.proc.kill('SIGKILL');
      else running.child.kill('SIGKILL');
      const r = await running.done;
      killPids(pidfile);
      if (mode === 'warm') {
        assert.equal(r.code, 1);
        const err = JSON.parse(r.stdout) as { code: number; msg: string };
        assert.equal(err.code, 11, r.stdout);
        assert.match(err.msg, /connection lost/);
      } else {
        assert.equal(r.code, 128, 'the cold process was killed');
      }
      state[mode] = linkState(sb);
      await victim?.stop();
    }
    assert.deepEqual(state.warm, state.cold);
    assert.ok(
      state.cold.some((l) => l.startsWith('host cnwkill0')),
      `the bridge exists: ${state.cold}`,
    );
  });

  test('64 concurrent clients are all served, with the cold answer', async () => {
    const sb = sandbox();
    const lo = { cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' };
    const o = { netns: sb.container.path, path: WARM };
    const cold = call('cold', 'loopback', 'ADD', lo, { ...o, path: DIST }, sb);
    assert.equal(cold.code, 0);
    const served0 = svc.served();
    // the client's 2 s wait for the service's hello (then it answers cold) is not what this test is about: on a loaded
    // machine the one-threaded service greets the 64th client later than that and the client rightly goes cold
    // ("client pid N went away"), so give them a test-sized wait
    const env = { ...envFor('ADD', o), CNIKIT_HELLO_TIMEOUT_MS: String(scaled(60_000)) };
    const all = await Promise.all(
      Array.from({ length: 64 }, () => spawnAsync(join(WARM, 'loopback'), env, JSON.stringify(lo), sb)),
    );
    for (const r of all) assert.deepEqual(r, cold);
    await svc.waitServed(served0 + 64);
  });

  test('1000 sequential ADD/DEL through the service: no growth of file descriptors or memory', async (t) => {
    const sb = sandbox();
    const lo = { cniVersion: '1.0.0', name: 'warm-lo', type: 'loopback' };
    const input = JSON.stringify(lo);
    const o = { netns: sb.container.path, path: WARM };
    const envAdd = envFor('ADD', o);
    const envDel = envFor('DEL', o);
    const round = () => {
      for (const env of [envAdd, envDel]) {
        const r = spawnSync(join(WARM, 'loopback'), [], { input, env, encoding: 'utf8' });
        assert.equal(r.status, 0, `${r.stdout}\nservice log:\n${svc.log.split('\n').slice(-20).join('\n')}`);
      }
    };
    const pid = svc.pid;
    const fds = () => readdirSync(`/proc/${pid}/fd`).length;
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;
    sb.runInHost(() => {
      for (let i = 0; i < 100; i++) round();
    });
    await sleep(1500); // idle (500 ms without a connection): the service collects its garbage
    const fd0 = fds();
    const rss0 = rss();
    const served0 = svc.served();
    const t0 = performance.now();
    sb.runInHost(() => {
      for (let i = 0; i < 1000; i++) round();
    });
    const ms = performance.now() - t0;
    await sleep(1500);
    const fd1 = fds();
    const rss1 = rss();
    await svc.waitServed(served0 + 2000);
    t.diagnostic(
      `1000 × loopback ADD+DEL in ${(ms / 1000).toFixed(1)} s; service fds ${fd0} → ${fd1}; RSS ${(rss0 / 2 ** 20).toFixed(1)} → ${(rss1 / 2 ** 20).toFixed(1)} MiB`,
    );
    assert.equal(fd1, fd0, 'no descriptor leaked');
    assert.ok(rss1 - rss0 < 8 * 2 ** 20, `RSS grew by ${((rss1 - rss0) / 2 ** 20).toFixed(1)} MiB`);
  });
});

describe('cnikit serve: start, check, upgrade', () => {
  test('--check reports an absent service; a second service on a live socket refuses to start', () => {
    const none = check(join(sockDir, 'absent.sock'));
    assert.equal(none.status, 1);
    assert.match(none.stdout, /unhealthy: cannot connect to .*absent\.sock/);
    const ok = check(SOCK);
    assert.equal(ok.status, 0, ok.stdout);
    assert.match(ok.stdout, new RegExp(`^ok: cnikit service pid ${svc.pid} on `));
    const second = spawnSync(join(DIST, 'cnikit'), ['serve', '--socket', SOCK], {
      encoding: 'utf8',
      env: { PATH },
      timeout: scaled(10_000),
    });
    assert.equal(second.status, 1);
    assert.match(second.stderr, /another service is already listening on/);
    const bad = spawnSync(join(DIST, 'cnikit'), ['serve', '--deadline-ms', '5'], {
      encoding: 'utf8',
      env: { PATH },
    });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--deadline-ms must be an integer between 100 and 3600000, got "5"/);
  });

  test('a socket directory open to others is refused', () => {
    const dir = join(scratch, 'open-dir');
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    const r = spawnSync(join(DIST, 'cnikit'), ['serve', '--socket', join(dir, 's.sock')], {
      encoding: 'utf8',
      env: { PATH },
      timeout: scaled(10_000),
    });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /has mode 755; expected 0700; refusing to use it/);
    assert.ok(!existsSync(join(dir, 's.sock')));
  });

  test('a replaced executable: the service re-executes the new file between requests (same pid)', async () => {
    const dir = join(scratch, 'upgrade');
    mkdirSync(dir);
    const exe = join(dir, 'cnikit');
    linkSync(join(DIST, 'bun', 'cnikit'), exe);
    const socket = join(sockDir, 'upgrade.sock');
    const fd = openSync(`${socket}.log`, 'a');
    const proc = spawn(exe, ['serve', '--socket', socket], {
      stdio: ['ignore', 'ignore', fd],
      env: { PATH },
    });
    closeSync(fd);
    try {
      await eventually(() => check(socket).status === 0, 'the service answers');
      const before = readlinkSync(`/proc/${proc.pid}/exe`);
      // the upgrade: another build of the executable renamed over the file (here: the SEA back-end)
      linkSync(join(DIST, 'sea', 'cnikit'), `${exe}.new`);
      renameSync(`${exe}.new`, exe);
      await eventually(
        () => readFileSync(`${socket}.log`, 'utf8').includes('was replaced'),
        'the service notices the new file',
      );
      await eventually(() => check(socket).status === 0, 'the new image answers');
      assert.equal(proc.exitCode, null, 'same process, still running');
      assert.equal(
        statSync(`/proc/${proc.pid}/exe`).ino,
        statSync(join(DIST, 'sea', 'cnikit')).ino,
        `was ${before}`,
      );
      const v = spawnSync(join(WARM, 'bridge'), [], {
        input: VERSION_STDIN,
        env: { PATH, CNI_COMMAND: 'VERSION', CNIKIT_SOCKET: socket },
        encoding: 'utf8',
      });
      assert.deepEqual(
        { code: v.status, stdout: v.stdout, stderr: v.stderr },
        call('cold', 'bridge', 'VERSION', VERSION_STDIN),
      );
    } finally {
      const done = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await done;
    }
    assert.ok(!existsSync(socket), 'a stopped service removes its socket');
  });
});

function staleSocket(): string {
  const p = join(sockDir, 'stale.sock');
  rmSync(p, { force: true });
  closeFd(listenUnix(p, 1)); // a socket file nobody listens on any more
  return p;
}

/** A CNI_PATH directory whose `slow-ipam` hangs (stuck.ts). */
function slowIpam(tag: string): { dir: string; pidfile: string } {
  return slowIpamIn(scratch, tag);
}

function slowBridge(name: string) {
  return {
    cniVersion: '1.0.0',
    name,
    type: 'bridge',
    bridge: name === 'warm-kill' ? 'cnwkill0' : 'cnwdl0',
    ipam: { type: 'slow-ipam' },
  };
}

function killPids(pidfile: string): void {
  if (!existsSync(pidfile)) return;
  for (const p of readFileSync(pidfile, 'utf8').split('\n').filter(Boolean)) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Links of both namespaces as "ns name kind master", random veth names normalised. */
function linkState(sb: Sandbox): string[] {
  const out: string[] = [];
  for (const ns of ['host', 'container'] as const) {
    const links = JSON.parse(sb.exec('ip', ['-d', '-json', 'link', 'show'], { ns }).stdout) as Array<{
      ifname: string;
      master?: string;
      operstate: string;
      linkinfo?: { info_kind?: string };
    }>;
    for (const l of links)
      out.push(normalize(`${ns} ${l.ifname} ${l.linkinfo?.info_kind ?? ''} ${l.master ?? ''}`));
  }
  return out.sort();
}
