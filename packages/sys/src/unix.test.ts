// Unix stream sockets of the native layer: listen/accept/connect, SO_PEERCRED, SCM_RIGHTS, timeouts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  fstatSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  acceptUnix,
  closeFd,
  connectUnix,
  isSysError,
  listenUnix,
  peerCred,
  recvMsg,
  sendAll,
  setCloexec,
} from './index.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-unix-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

function pair(): {
  listen: number;
  client: number;
  server: number;
  peer: { pid: number; uid: number; gid: number };
} {
  const path = join(dir, `s${n++}.sock`);
  const listen = listenUnix(path, 8);
  const client = connectUnix(path);
  const acc = acceptUnix(listen, 1000);
  assert.ok(acc, 'a pending connection is accepted');
  return { listen, client, server: acc.fd, peer: acc };
}

function closeAll(...fds: number[]): void {
  for (const fd of fds) closeFd(fd);
}

describe('unix sockets', () => {
  test('listenUnix creates a socket file; acceptUnix reports the peer credentials', () => {
    const { listen, client, server, peer } = pair();
    assert.ok(statSync(join(dir, `s${n - 1}.sock`)).isSocket());
    assert.equal(peer.pid, process.pid);
    assert.equal(peer.uid, process.getuid?.());
    assert.equal(peer.gid, process.getgid?.());
    assert.deepEqual(peerCred(client), {
      pid: process.pid,
      uid: process.getuid?.(),
      gid: process.getgid?.(),
    });
    closeAll(listen, client, server);
  });

  test('acceptUnix returns null when nobody connects within the timeout', () => {
    const listen = listenUnix(join(dir, `s${n++}.sock`), 8);
    const t0 = performance.now();
    assert.equal(acceptUnix(listen, 50), null);
    assert.ok(performance.now() - t0 >= 45);
    closeFd(listen);
  });

  test('sendAll/recvMsg carry bytes and a descriptor (SCM_RIGHTS)', () => {
    const { listen, client, server } = pair();
    const ns = openSync('/proc/self/ns/net', 'r');
    sendAll(client, Buffer.from('hello'), 1000, [ns]);
    const got = recvMsg(server, 1024, 1000);
    assert.ok(got);
    assert.equal(got.data.toString(), 'hello');
    assert.equal(got.fds.length, 1);
    const a = fstatSync(ns);
    const b = fstatSync(got.fds[0] as number);
    assert.equal(b.ino, a.ino, 'the received descriptor is the same namespace');
    assert.notEqual(got.fds[0], ns);
    closeSync(ns);
    closeAll(got.fds[0] as number, listen, client, server);
  });

  test('recvMsg: null on timeout, empty data at end of stream', () => {
    const { listen, client, server } = pair();
    assert.equal(recvMsg(server, 16, 30), null);
    closeFd(client);
    const eof = recvMsg(server, 16, 1000);
    assert.ok(eof);
    assert.equal(eof.data.length, 0);
    assert.deepEqual(eof.fds, []);
    closeAll(listen, server);
  });

  test('large messages arrive whole across several reads', () => {
    const { listen, client, server } = pair();
    const big = Buffer.alloc(3 << 20, 7);
    // the socket buffer is smaller than 3 MiB: alternate sends and reads
    let received = 0;
    const chunk = 64 << 10;
    for (let off = 0; off < big.length; off += chunk) {
      sendAll(client, big.subarray(off, off + chunk), 1000);
      for (;;) {
        const r = recvMsg(server, 1 << 20, 0);
        if (!r) break;
        received += r.data.length;
      }
    }
    for (;;) {
      const r = recvMsg(server, 1 << 20, 0);
      if (!r) break;
      received += r.data.length;
    }
    assert.equal(received, big.length);
    closeAll(listen, client, server);
  });

  test('sendAll times out (ETIMEDOUT) when the peer does not read; EPIPE when it is gone', () => {
    const { listen, client, server } = pair();
    assert.throws(
      () => sendAll(client, Buffer.alloc(64 << 20), 50),
      (e: unknown) => isSysError(e) && e.code === 'ETIMEDOUT',
    );
    closeFd(server);
    assert.throws(
      () => sendAll(client, Buffer.from('x'), 50),
      (e: unknown) => isSysError(e) && (e.code === 'EPIPE' || e.code === 'ECONNRESET'),
    );
    closeAll(listen, client);
  });

  test('errors: a path too long for sun_path, a missing socket', () => {
    assert.throws(
      () => listenUnix(join(dir, 'x'.repeat(120))),
      (e: unknown) => isSysError(e) && e.code === 'ENAMETOOLONG',
    );
    assert.throws(
      () => connectUnix(join(dir, 'missing.sock')),
      (e: unknown) => isSysError(e) && e.code === 'ENOENT',
    );
  });
});

describe('setCloexec', () => {
  test('toggles FD_CLOEXEC (seen in /proc/self/fdinfo flags)', () => {
    const fd = openSync('/proc/self/ns/net', 'r');
    const cloexec = () =>
      (Number.parseInt(
        /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'))?.[1] ?? '0',
        8,
      ) &
        0o2000000) !==
      0;
    setCloexec(fd, false);
    assert.equal(cloexec(), false);
    setCloexec(fd, true);
    assert.equal(cloexec(), true);
    closeSync(fd);
    assert.throws(
      () => setCloexec(fd, true),
      (e: unknown) => isSysError(e) && e.code === 'EBADF',
    );
  });
});

describe('watchdog', () => {
  const index = join(import.meta.dirname, 'index.ts');
  const run = (body: string) => {
    const file = join(dir, `wd-${n++}.ts`);
    writeFileSync(
      file,
      `import { watchdogArm, watchdogDisarm, watchdogOnStopSignal, watchdogSet } from ${JSON.stringify(index)};\n${body}\n`,
    );
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', timeout: 20_000 });
    return { ...r, ms: performance.now() - t0 };
  };

  test('fires when the main thread is stuck in synchronous code: the process image is replaced', () => {
    const r = run(
      "watchdogSet('/bin/echo', ['echo', 'replaced'], [], -1);\nwatchdogArm(100);\nconst end = Date.now() + 10_000;\nwhile (Date.now() < end) {}\nconsole.log('not replaced');",
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'replaced\n');
    assert.match(r.stderr, /watchdog: the main thread overran its deadline/);
    assert.ok(r.ms < 8000, `replaced after ${r.ms} ms`);
  });

  test('a disarmed or re-armed watchdog does not fire', () => {
    const r = run(
      "watchdogSet('/bin/echo', ['echo', 'replaced'], [], -1);\nwatchdogArm(150);\nwatchdogDisarm();\nwatchdogArm(5000);\nconst end = Date.now() + 400;\nwhile (Date.now() < end) {}\nwatchdogDisarm();\nconsole.log('still here');",
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'still here\n');
  });

  test('a stop signal the stuck main thread never saw survives the exec (the entry in its envp)', () => {
    const r = run(
      "process.on('SIGTERM', () => console.log('handled'));\nwatchdogSet('/usr/bin/env', ['env'], ['A=1'], -1);\nwatchdogOnStopSignal('STOPPING=1');\nwatchdogArm(300);\nprocess.kill(process.pid, 'SIGTERM');\nconst end = Date.now() + 10_000;\nwhile (Date.now() < end) {}",
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'A=1\nSTOPPING=1\n');
  });

  test('without a stop signal the envp is unchanged, and the JavaScript handler still runs', () => {
    const r = run(
      "watchdogSet('/usr/bin/env', ['env'], ['A=1'], -1);\nprocess.on('SIGTERM', () => { console.log('handled'); process.exit(0); });\nwatchdogOnStopSignal('STOPPING=1');\nprocess.kill(process.pid, 'SIGTERM');\nsetTimeout(() => {}, 5000);",
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'handled\n');
    const q = run(
      "watchdogSet('/usr/bin/env', ['env'], ['A=1'], -1);\nwatchdogOnStopSignal('STOPPING=1');\nwatchdogArm(100);\nconst end = Date.now() + 10_000;\nwhile (Date.now() < end) {}",
    );
    assert.equal(q.stdout, 'A=1\n');
  });
});
