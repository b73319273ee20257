// `cnikit serve` stops on SIGTERM within a bound whatever is in flight (a service once outlived its
// bench, ignoring SIGTERM). Each case drives the compiled binary and asserts that the process exited in time and that the socket
// file is gone.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cniEnv, createSandbox, eventually, type Sandbox, scaled, sleep } from '@cnikit/testing';
import { DIST, ensureBuilt } from './dist.ts';
import { hangFirewallTools, slowIpam as slowIpamIn } from './stuck.ts';

ensureBuilt();
const WARM = join(DIST, 'warm');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-serve-term-'));
const sandboxes: Sandbox[] = [];
const procs: ChildProcess[] = [];
const pidfiles: string[] = [];

after(() => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const f of pidfiles) killPids(f);
  for (const sb of sandboxes) sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
});

function killPids(pidfile: string): void {
  if (!existsSync(pidfile)) return;
  for (const p of readFileSync(pidfile, 'utf8').split('\n').filter(Boolean)) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      // gone
    }
  }
}

function serve(name: string, args: string[], env: Record<string, string> = {}) {
  const socket = join(scratch, `${name}.sock`);
  const logFile = `${socket}.log`;
  const fd = openSync(logFile, 'a');
  const proc = spawn(join(DIST, 'cnikit'), ['serve', '--socket', socket, '--verbose', ...args], {
    stdio: ['ignore', 'ignore', fd],
    env: { PATH, ...env },
  });
  closeSync(fd);
  procs.push(proc);
  const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((r) =>
    proc.once('exit', (code, signal) => r({ code, signal, at: performance.now() })),
  );
  const log = () => readFileSync(logFile, 'utf8');
  const ready = () =>
    eventually(
      () => spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', socket]).status === 0,
      `service on ${socket} answers --check`,
      scaled(10_000),
    );
  /** SIGTERM, then the exit within `boundMs` (else SIGKILL and a failure); the socket file removed. */
  const stopWithin = async (boundMs: number) => {
    const t0 = performance.now();
    proc.kill('SIGTERM');
    const killer = setTimeout(() => proc.kill('SIGKILL'), boundMs);
    const e = await exited;
    clearTimeout(killer);
    const took = e.at - t0;
    assert.equal(e.signal, null, `stopped by itself within ${boundMs} ms, not killed (log:\n${log()})`);
    assert.ok(took < boundMs, `exited after ${took.toFixed(0)} ms`);
    assert.equal(e.code, 0, `exit code (log:\n${log()})`);
    assert.ok(!existsSync(socket), 'the socket file is gone');
    return took;
  };
  return { socket, proc, log, ready, stopWithin, exited };
}

/** A CNI_PATH directory whose `slow-ipam` hangs (stuck.ts); its pids are killed after the tests. */
function slowIpam(tag: string): { dir: string; pidfile: string } {
  const s = slowIpamIn(scratch, tag);
  pidfiles.push(s.pidfile);
  return s;
}

describe('cnikit serve stops on SIGTERM within a bound', () => {
  test('SIGTERM while a request is stuck in a delegate past its deadline: it stops, it does not re-execute', async () => {
    const deadline = 1000;
    const s = serve('stuck-delegate', ['--deadline-ms', String(deadline)]);
    await s.ready();
    const sb = createSandbox();
    sandboxes.push(sb);
    const { dir, pidfile } = slowIpam('term');
    const conf = {
      cniVersion: '1.0.0',
      name: 'serve-term',
      type: 'bridge',
      bridge: 'cnsterm0',
      ipam: { type: 'slow-ipam' },
    };
    const client = new Promise<{ code: number | null; stdout: string }>((resolve) =>
      sb.runInHost(() => {
        const c = spawn(join(WARM, 'bridge'), [], {
          env: {
            PATH,
            CNIKIT_SOCKET: s.socket,
            CNIKIT_TEST_PIDFILE: pidfile,
            ...cniEnv('ADD', { netns: sb.container.path, path: `${dir}:${WARM}` }),
          },
        });
        let stdout = '';
        c.stdout.on('data', (d) => {
          stdout += d;
        });
        c.once('exit', (code) => resolve({ code, stdout }));
        c.stdin.end(JSON.stringify(conf));
      }),
    );
    await eventually(() => existsSync(pidfile), 'the delegate runs', scaled(10_000));
    // bound: the current request's deadline, then the grace of the stop
    await s.stopWithin(deadline + scaled(4000));
    assert.doesNotMatch(s.log(), /re-executing/, 'a stopping service does not re-execute itself');
    const r = await client;
    assert.equal(r.code, 1);
    assert.equal((JSON.parse(r.stdout) as { code: number }).code, 11, r.stdout);
  });

  test('SIGTERM while a client holds a connection and sends half a frame: it stops within the request read bound', async () => {
    const s = serve('half-frame', ['--deadline-ms', '1000']);
    await s.ready();
    const sock = connect(s.socket);
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write(Buffer.from([0x00, 0x00, 0x10])); // a frame header cut short, then nothing
    await sleep(100);
    await s.stopWithin(scaled(8000));
    sock.destroy();
  });

  test('SIGTERM while the metrics server has an open keep-alive connection', async () => {
    const metrics = join(scratch, 'metrics-http.sock');
    const s = serve('metrics', ['--deadline-ms', '1000', '--metrics', metrics]);
    await s.ready();
    await eventually(() => existsSync(metrics), 'metrics socket', scaled(10_000));
    const sock = connect(metrics);
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write('GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    await new Promise<void>((r) => sock.once('data', () => r()));
    await s.stopWithin(scaled(4000));
    sock.destroy();
  });

  test('a second SIGTERM while the first one waits stops at once', async () => {
    const deadline = 20_000;
    const s = serve('second', ['--deadline-ms', String(deadline)]);
    await s.ready();
    const sb = createSandbox();
    sandboxes.push(sb);
    const { dir, pidfile } = slowIpam('second');
    const conf = {
      cniVersion: '1.0.0',
      name: 'serve-term2',
      type: 'bridge',
      bridge: 'cnsterm1',
      ipam: { type: 'slow-ipam' },
    };
    sb.runInHost(() => {
      const c = spawn(join(WARM, 'bridge'), [], {
        stdio: ['pipe', 'ignore', 'ignore'],
        env: {
          PATH,
          CNIKIT_SOCKET: s.socket,
          CNIKIT_TEST_PIDFILE: pidfile,
          ...cniEnv('ADD', { netns: sb.container.path, path: `${dir}:${WARM}` }),
        },
      });
      procs.push(c);
      c.stdin?.end(JSON.stringify(conf));
    });
    await eventually(() => existsSync(pidfile), 'the delegate runs', scaled(10_000));
    s.proc.kill('SIGTERM');
    await sleep(300);
    await s.stopWithin(scaled(3000));
  });

  test('SIGTERM while a request is stuck in synchronous code: the watchdog re-execution stops, it does not serve on', async () => {
    const { dir, pidfile } = slowIpam('sync');
    hangFirewallTools(dir);
    const s = serve('sync', ['--deadline-ms', '1000'], {
      PATH: `${dir}:${PATH}`,
      CNIKIT_TEST_PIDFILE: pidfile,
    });
    await s.ready();
    const sb = createSandbox();
    sandboxes.push(sb);
    const conf = {
      cniVersion: '1.0.0',
      name: 'serve-term-sync',
      type: 'bridge',
      bridge: 'cnsterm2',
      ipMasq: true,
      ipam: { type: 'host-local', subnet: '10.252.9.0/24', dataDir: join(scratch, 'ipam-sync') },
    };
    sb.runInHost(() => {
      const c = spawn(join(WARM, 'bridge'), [], {
        stdio: ['pipe', 'ignore', 'ignore'],
        env: { PATH, CNIKIT_SOCKET: s.socket, ...cniEnv('ADD', { netns: sb.container.path, path: WARM }) },
      });
      procs.push(c);
      c.stdin?.end(JSON.stringify(conf));
    });
    await eventually(() => existsSync(pidfile), 'a firewall tool runs', scaled(10_000));
    // bound: deadline 1000 + watchdog grace 2000, then the new image stops at once
    await s.stopWithin(scaled(8000));
    assert.match(s.log(), /re-executed while stopping: stopping/);
  });
});
