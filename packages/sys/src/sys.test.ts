// Addon + loader tests that need no root (the addon must be built: npm run build:native).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  closeFd,
  errnoMessage,
  errnoName,
  flock,
  gettid,
  isSysError,
  loadNative,
  NetlinkSocket,
  nativeCandidates,
  SysError,
  setns,
} from './index.ts';

const ADDON = new URL('../build/Release/cnikit_sys.node', import.meta.url).pathname;
const ROOT = new URL('../../../', import.meta.url).pathname;

describe('sys addon basics', () => {
  test('loads from the development checkout and gettid is the main thread id', () => {
    const n = loadNative();
    assert.equal(typeof n.setns, 'function');
    assert.equal(gettid(), process.pid);
    // the npm package's prebuilt addon first (the repository has it only while npm pack runs), then a source build
    const prebuilt = new URL(
      `../prebuilds/${process.platform}-${process.arch}/cnikit_sys.node`,
      import.meta.url,
    ).pathname;
    assert.deepEqual(nativeCandidates().slice(0, 2), [prebuilt, ADDON]);
  });

  test('errors carry errno, code, syscall and the Go errno text', () => {
    let caught: unknown;
    try {
      setns(987654);
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof SysError);
    assert.ok(caught instanceof Error);
    assert.ok(isSysError(caught));
    assert.equal(caught.errno, 9);
    assert.equal(caught.code, 'EBADF');
    assert.equal(caught.syscall, 'setns');
    assert.equal(caught.message, 'bad file descriptor');
  });

  test('errno names and messages', () => {
    assert.equal(errnoName(17), 'EEXIST');
    assert.equal(errnoName(-19), 'ENODEV');
    assert.equal(errnoMessage(17), 'file exists');
    assert.equal(errnoMessage(19), 'no such device');
    assert.equal(errnoMessage(95), 'operation not supported');
    assert.equal(errnoName(4095), 'E4095');
    const e = new SysError(-17, 'netlink');
    assert.equal(e.code, 'EEXIST');
    assert.equal(e.errno, 17);
    assert.equal(e.message, 'file exists');
    assert.equal(new SysError(2, 'open', 'custom').message, 'custom');
  });

  test('SysError brand survives a second copy of the class', () => {
    const foreign = Object.assign(new Error('x'), { errno: 1 });
    Object.defineProperty(foreign, Symbol.for('cnikit.SysError'), { value: true });
    assert.ok(foreign instanceof SysError);
    assert.ok(!(new Error('y') instanceof SysError));
    class Sub extends SysError {}
    assert.ok(!(new SysError(1, 'x') instanceof Sub));
    assert.ok(new Sub(1, 'x') instanceof Sub);
  });

  test('bad arguments throw TypeErrors, not crashes', () => {
    const n = loadNative();
    assert.throws(() => n.setns('x' as unknown as number, 0), TypeError);
    assert.throws(() => flock(0, 'bogus' as 'ex'), /unknown operation/);
    const s = NetlinkSocket.open(0);
    try {
      assert.throws(() => s.send('abc' as unknown as Uint8Array), TypeError);
    } finally {
      s.close();
    }
  });

  test('closeFd on a bad descriptor is EBADF', () => {
    assert.throws(
      () => closeFd(999999),
      (e: unknown) => isSysError(e) && e.code === 'EBADF' && e.syscall === 'close',
    );
  });
});

describe('netlink transport (no namespace switch)', () => {
  test('open gives a descriptor and a port id; recv times out with null; close is idempotent', () => {
    const s = NetlinkSocket.open(0);
    assert.ok(s.fd > 2);
    assert.ok(s.portId > 0);
    const t0 = Date.now();
    assert.equal(s.recv(120), null);
    assert.ok(Date.now() - t0 >= 100, 'recv waited for the timeout');
    assert.equal(s.recv(0), null);
    s.close();
    assert.equal(s.fd, -1);
    s.close();
    assert.throws(
      () => s.recv(0),
      (e: unknown) => isSysError(e) && e.code === 'EBADF',
    );
  });

  test('unknown protocol is EPROTONOSUPPORT from socket', () => {
    assert.throws(
      () => NetlinkSocket.open(31),
      (e: unknown) => isSysError(e) && e.syscall === 'socket' && e.code === 'EPROTONOSUPPORT',
    );
  });

  test('closeInBackground: the socket is unusable at once and its descriptor closed soon after', async () => {
    const socks = Array.from({ length: 3 }, () => NetlinkSocket.open(0));
    const fds = socks.map((s) => s.fd);
    const open = (fd: number) => existsSync(`/proc/self/fd/${fd}`);
    assert.ok(fds.every(open));
    for (const s of socks) s.closeInBackground();
    assert.ok(socks.every((s) => s.fd === -1));
    socks[0]?.closeInBackground(); // twice: a no-op
    assert.throws(
      () => socks[0]?.recv(0),
      (e: unknown) => isSysError(e) && e.code === 'EBADF',
    );
    for (let i = 0; fds.some(open); i++) {
      assert.ok(i < 200, `descriptors ${fds.filter(open).join(', ')} still open after 2 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
  });

  test('closeInBackground: a burst of descriptors queued while the thread waits is closed as one batch, all of them', async () => {
    // the background thread waits for an RCU grace period before each batch: every descriptor queued meanwhile
    // must still be closed (none lost, none closed twice: a reused number would be closed under its new owner)
    const socks = Array.from({ length: 40 }, () => NetlinkSocket.open(0));
    const fds = socks.map((s) => s.fd);
    const open = (fd: number) => existsSync(`/proc/self/fd/${fd}`);
    for (const s of socks.slice(0, 20)) s.closeInBackground();
    await new Promise((r) => setImmediate(r));
    for (const s of socks.slice(20)) s.closeInBackground();
    for (let i = 0; fds.some(open); i++) {
      assert.ok(i < 300, `descriptors ${fds.filter(open).join(', ')} still open after 3 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    // a socket opened now may get one of those numbers; it stays open (no late second close of the old number)
    const after = NetlinkSocket.open(0);
    try {
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(open(after.fd), `descriptor ${after.fd} of a new socket was closed`);
    } finally {
      after.close();
    }
  });

  test('two sockets get different port ids', () => {
    const a = NetlinkSocket.open(0);
    const b = NetlinkSocket.open(0);
    try {
      assert.notEqual(a.portId, b.portId);
    } finally {
      a.close();
      b.close();
    }
  });
});

describe('loader overrides (child processes)', () => {
  const script = (body: string) =>
    `import { gettid, nativeCandidates, loadNative } from ${JSON.stringify(join(ROOT, 'packages/sys/src/index.ts'))};\n${body}`;
  const run = (body: string, env: Record<string, string>) =>
    spawnSync(
      process.execPath,
      ['--conditions=cnikit-source', '--import', 'tsx', '--input-type=module', '-e', script(body)],
      {
        cwd: ROOT,
        env: { ...process.env, ...env },
        encoding: 'utf8',
      },
    );

  test('CNIKIT_NATIVE_PATH is used (and only it)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-sys-'));
    try {
      const copy = join(dir, 'copy.node');
      copyFileSync(ADDON, copy);
      const r = run('console.log(JSON.stringify([nativeCandidates(), gettid() === process.pid]))', {
        CNIKIT_NATIVE_PATH: copy,
      });
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), [[copy], true]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('globalThis.__CNIKIT_NATIVE_PATH__ wins and a wrong override is an error, not a fallback', () => {
    const r = run(
      'globalThis.__CNIKIT_NATIVE_PATH__ = "/nonexistent/cnikit_sys.node"; try { loadNative(); console.log("loaded") } catch (e) { console.log(e.message) }',
      {},
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /cannot load the native addon \/nonexistent\/cnikit_sys\.node/);
  });

  test('nothing is loaded at import time', () => {
    const r = run('console.log("imported")', { CNIKIT_NATIVE_PATH: '/nonexistent/x.node' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'imported');
  });
});

describe('Bun', () => {
  const bun = join(ROOT, 'node_modules', '.bin', 'bun');
  test('the same addon loads under Bun (process.dlopen and the TypeScript API)', () => {
    const raw = spawnSync(
      bun,
      [
        '-e',
        `const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(ADDON)}); const [fd, port] = m.exports.nlOpen(0, 1 << 20); console.log(JSON.stringify({ tid: m.exports.gettid(), pid: process.pid, port, timeout: m.exports.nlRecv(fd, 10) })); m.exports.closeFd(fd);`,
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.equal(raw.status, 0, raw.stderr);
    const out = JSON.parse(raw.stdout);
    assert.equal(out.tid, out.pid);
    assert.ok(out.port > 0);
    assert.equal(out.timeout, null);

    const api = spawnSync(
      bun,
      [
        '-e',
        `import { gettid, SysError, setns } from ${JSON.stringify(join(ROOT, 'packages/sys/src/index.ts'))}; let code; try { setns(99999) } catch (e) { code = e instanceof SysError && e.code } console.log(JSON.stringify({ same: gettid() === process.pid, code }))`,
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.equal(api.status, 0, api.stderr);
    assert.deepEqual(JSON.parse(api.stdout), { same: true, code: 'EBADF' });
  });
});

describe('netlink datagram sizes', () => {
  test('datagrams larger than the 64 KiB receive buffer arrive whole, in order, byte for byte', () => {
    const a = NetlinkSocket.open(0, { receiveBufferSize: 4 << 20 });
    const b = NetlinkSocket.open(0);
    try {
      const sizes = [16, 65535, 65536, 65537, 200_000, 16];
      const sent = sizes.map((n, i) => {
        const buf = Buffer.alloc(n);
        for (let j = 0; j < n; j++) buf[j] = (j * 7 + i) & 0xff;
        return buf;
      });
      for (const m of sent) b.send(m, a.portId);
      for (const m of sent) {
        const got = a.recv(1000);
        assert.ok(got, 'received');
        assert.equal(got.length, m.length);
        assert.ok(got.equals(m), `payload of ${m.length} bytes intact`);
      }
      assert.equal(a.recv(0), null);
    } finally {
      a.close();
      b.close();
    }
  });
});

describe('EINTR', () => {
  test('a signal during recv does not cut the wait short or surface EINTR', async () => {
    let signals = 0;
    const onSignal = () => {
      signals++;
    };
    process.on('SIGUSR2', onSignal);
    const s = NetlinkSocket.open(0);
    try {
      const child = spawn(process.execPath, [
        '-e',
        `setTimeout(() => { process.kill(${process.pid}, 'SIGUSR2'); setTimeout(() => process.kill(${process.pid}, 'SIGUSR2'), 100); }, 150)`,
      ]);
      const t0 = Date.now();
      assert.equal(s.recv(1500), null);
      const waited = Date.now() - t0;
      assert.ok(waited >= 1450, `waited ${waited} ms`);
      await new Promise((r) => child.once('exit', r));
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(signals, 2, 'both signals arrived while recv was blocked');
    } finally {
      s.close();
      process.off('SIGUSR2', onSignal);
    }
  });
});
