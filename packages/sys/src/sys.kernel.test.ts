// Kernel tests (root): flock between processes, setns, a netlink socket opened inside a namespace.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { flock, gettid, isSysError, NetlinkSocket, setns } from './index.ts';

const ADDON = new URL('../build/Release/cnikit_sys.node', import.meta.url).pathname;
const THREAD_NS = '/proc/thread-self/ns/net';

function netnsAdd(): string {
  const name = `cnikit-sys-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return name;
}
function netnsDel(name: string): void {
  spawnSync('ip', ['netns', 'del', name]);
}
function ip(ns: string, ...args: string[]): void {
  const r = spawnSync('ip', ['-n', ns, ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `ip -n ${ns} ${args.join(' ')}: ${r.stderr}`);
}
const inode = (p: string) => statSync(p).ino;

// ---------------------------------------------------------------------------------------------------------
// flock between two processes

/** A child process holding a lock on `file`; it prints 'locked', and releases+exits when told. */
async function lockHolder(file: string, op: 0 | 1): Promise<ChildProcessWithoutNullStreams> {
  const src = `const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(ADDON)});
const fd = require('fs').openSync(${JSON.stringify(file)}, 'r');
m.exports.flock(fd, ${op}, false); process.stdout.write('locked\\n');
process.stdin.on('data', () => { m.exports.flock(fd, 2, false); process.stdout.write('unlocked\\n'); });
process.stdin.on('end', () => process.exit(0));`;
  const child = spawn(process.execPath, ['-e', src]);
  await waitFor(child, 'locked');
  return child;
}
function waitFor(child: ChildProcessWithoutNullStreams, word: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      if (buf.includes(word)) {
        child.stdout.off('data', onData);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`lock holder exited (${code}) before "${word}"`)));
  });
}

describe('flock between processes', () => {
  let dir = '';
  let file = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'cnikit-flock-'));
    file = join(dir, 'lock');
    writeFileSync(file, '');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('exclusive lock held elsewhere: non-blocking ex/sh return false, then succeed after release', async () => {
    const child = await lockHolder(file, 1);
    const fd = openSync(file, 'r');
    try {
      assert.equal(flock(fd, 'ex', true), false);
      assert.equal(flock(fd, 'sh', true), false);
      child.stdin.write('x');
      await waitFor(child, 'unlocked');
      assert.equal(flock(fd, 'ex', true), true);
      // now the child cannot get it
      const probe = spawnSync(process.execPath, [
        '-e',
        `const m={exports:{}};process.dlopen(m,${JSON.stringify(ADDON)});const fd=require('fs').openSync(${JSON.stringify(file)},'r');console.log(m.exports.flock(fd,0,true))`,
      ]);
      assert.equal(probe.stdout.toString().trim(), 'false');
      assert.equal(flock(fd, 'un'), true);
    } finally {
      closeSync(fd);
      child.stdin.end();
    }
  });

  test('shared locks coexist; exclusive is refused while shared is held', async () => {
    const child = await lockHolder(file, 0);
    const fd = openSync(file, 'r');
    try {
      assert.equal(flock(fd, 'sh', true), true);
      assert.equal(flock(fd, 'ex', true), false, 'upgrade refused while the other process holds shared');
      assert.equal(flock(fd, 'un'), true);
    } finally {
      closeSync(fd);
      child.stdin.end();
    }
  });

  test('a blocking exclusive lock waits until the holder exits', async () => {
    const src = `const m={exports:{}};process.dlopen(m,${JSON.stringify(ADDON)});const fd=require('fs').openSync(${JSON.stringify(file)},'r');m.exports.flock(fd,1,false);console.log('locked');setTimeout(()=>process.exit(0),400)`;
    const child = spawn(process.execPath, ['-e', src]);
    await waitFor(child as ChildProcessWithoutNullStreams, 'locked');
    const fd = openSync(file, 'r');
    try {
      const t0 = Date.now();
      assert.equal(flock(fd, 'ex'), true); // blocks this thread until the child dies
      assert.ok(Date.now() - t0 >= 250, `waited ${Date.now() - t0} ms`);
    } finally {
      closeSync(fd);
    }
  });

  test('flock on a bad descriptor is EBADF', () => {
    assert.throws(
      () => flock(987654, 'ex', true),
      (e: unknown) => isSysError(e) && e.code === 'EBADF',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// setns and a netlink socket inside a namespace

const RTM_NEWLINK = 16;
const RTM_GETLINK = 18;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const IFLA_IFNAME = 3;

/** RTM_GETLINK dump request: 16-byte nlmsghdr + 16-byte ifinfomsg. */
function getLinkDump(seq: number): Uint8Array {
  const b = Buffer.alloc(32);
  b.writeUInt32LE(32, 0); // nlmsg_len
  b.writeUInt16LE(RTM_GETLINK, 4); // nlmsg_type
  b.writeUInt16LE(0x1 | 0x300, 6); // NLM_F_REQUEST | NLM_F_DUMP
  b.writeUInt32LE(seq, 8); // nlmsg_seq
  b.writeUInt32LE(0, 12); // nlmsg_pid
  // ifinfomsg: family AF_UNSPEC, type 0, index 0, flags 0, change 0 (all zero)
  return b;
}

/** Sends the dump and returns the link names, reading every datagram until NLMSG_DONE. */
function dumpLinkNames(sock: NetlinkSocket): { names: string[]; datagrams: number } {
  const seq = Math.floor(Math.random() * 1e9);
  sock.send(getLinkDump(seq));
  const names: string[] = [];
  let datagrams = 0;
  for (;;) {
    const buf = sock.recv(2000);
    assert.ok(buf, 'reply before the timeout');
    datagrams++;
    let off = 0;
    while (off + 16 <= buf.length) {
      const len = buf.readUInt32LE(off);
      const type = buf.readUInt16LE(off + 4);
      assert.equal(buf.readUInt32LE(off + 8), seq);
      assert.equal(buf.readUInt32LE(off + 12), sock.portId);
      if (type === NLMSG_DONE) return { names, datagrams };
      if (type === NLMSG_ERROR) throw new Error(`netlink error ${buf.readInt32LE(off + 16)}`);
      assert.equal(type, RTM_NEWLINK);
      let a = off + 16 + 16;
      while (a + 4 <= off + len) {
        const alen = buf.readUInt16LE(a);
        const atype = buf.readUInt16LE(a + 2) & 0x3fff;
        if (alen < 4) break;
        if (atype === IFLA_IFNAME) names.push(buf.toString('utf8', a + 4, a + alen).replace(/\0+$/, ''));
        a += (alen + 3) & ~3;
      }
      off += (len + 3) & ~3;
    }
  }
}

describe('setns and netlink in a namespace', () => {
  let ns = '';
  before(() => {
    ns = netnsAdd();
  });
  after(() => netnsDel(ns));

  test('setns switches only the calling thread into the namespace and back', () => {
    const original = inode(THREAD_NS);
    const target = openSync(`/run/netns/${ns}`, 'r');
    const home = openSync(THREAD_NS, 'r');
    try {
      setns(target);
      try {
        assert.equal(inode(THREAD_NS), inode(`/run/netns/${ns}`));
        assert.notEqual(inode(THREAD_NS), original);
        assert.equal(gettid(), process.pid);
        // the other threads of the process (V8 platform, libuv pool) stay where they were
        const others = readdirSync('/proc/self/task').filter((t) => t !== String(process.pid));
        assert.ok(others.length > 0);
        for (const t of others) assert.equal(inode(`/proc/self/task/${t}/ns/net`), original, `thread ${t}`);
      } finally {
        setns(home);
      }
      assert.equal(inode(THREAD_NS), original);
    } finally {
      closeSync(target);
      closeSync(home);
    }
  });

  test('setns on a non-namespace descriptor is EINVAL and leaves the thread where it was', () => {
    const original = inode(THREAD_NS);
    const fd = openSync('/etc/hostname', 'r');
    try {
      assert.throws(
        () => setns(fd),
        (e: unknown) => isSysError(e) && e.code === 'EINVAL' && e.syscall === 'setns',
      );
    } finally {
      closeSync(fd);
    }
    assert.equal(inode(THREAD_NS), original);
  });

  test("a socket opened inside a namespace sees that namespace's links, even after switching back", () => {
    const target = openSync(`/run/netns/${ns}`, 'r');
    const home = openSync(THREAD_NS, 'r');
    let sock: NetlinkSocket;
    try {
      setns(target);
      try {
        sock = NetlinkSocket.open(0);
      } finally {
        setns(home);
      }
    } finally {
      closeSync(target);
      closeSync(home);
    }
    try {
      assert.deepEqual(dumpLinkNames(sock).names, ['lo']);
      ip(ns, 'link', 'add', 'cnk-a', 'type', 'veth', 'peer', 'name', 'cnk-b');
      assert.deepEqual(dumpLinkNames(sock).names.sort(), ['cnk-a', 'cnk-b', 'lo']);
      // and the root-namespace socket does not see them
      const rootSock = NetlinkSocket.open(0);
      try {
        const rootNames = dumpLinkNames(rootSock).names;
        assert.ok(!rootNames.includes('cnk-a'));
        assert.ok(rootNames.includes('lo'));
      } finally {
        rootSock.close();
      }
      assert.equal(sock.recv(50), null, 'nothing left to read after DONE');
    } finally {
      sock.close();
    }
  });

  test('a dump spanning many datagrams arrives complete', () => {
    const lines: string[] = [];
    for (let i = 0; i < 60; i++) lines.push(`link add cnk-m${i} type veth peer name cnk-p${i}`);
    const r = spawnSync('ip', ['-n', ns, '-batch', '-'], {
      input: `${lines.join('\n')}\n`,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const target = openSync(`/run/netns/${ns}`, 'r');
    const home = openSync(THREAD_NS, 'r');
    let sock: NetlinkSocket;
    try {
      setns(target);
      try {
        sock = NetlinkSocket.open(0, { receiveBufferSize: 1 << 20 });
      } finally {
        setns(home);
      }
    } finally {
      closeSync(target);
      closeSync(home);
    }
    try {
      const { names, datagrams } = dumpLinkNames(sock);
      assert.ok(datagrams > 1, `expected a multi-datagram dump, got ${datagrams}`);
      for (let i = 0; i < 60; i++) {
        assert.ok(names.includes(`cnk-m${i}`) && names.includes(`cnk-p${i}`), `link pair ${i} in the dump`);
      }
      assert.equal(new Set(names).size, names.length, 'no duplicates');
    } finally {
      sock.close();
    }
  });
});
