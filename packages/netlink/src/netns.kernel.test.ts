// withNetns / NetNS / helpers against the real kernel, in namespaces this file creates.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isSysError, NetlinkSocket, SysError } from '@cnikit/sys';
import {
  currentNetnsPath,
  isNetns,
  isNetnsGone,
  isNotNetnsError,
  NetNS,
  NetnsNotFoundError,
  NotNetnsError,
  openNetnsFd,
  sameNetns,
  withNetns,
  withNetnsFd,
} from './netns.ts';

const THREAD_NS = '/proc/thread-self/ns/net';
const inode = (p: string) => statSync(p).ino;

function netnsAdd(tag: string): string {
  const name = `cnikit-sys-${process.pid}-${tag}-${Math.random().toString(36).slice(2, 8)}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return name;
}
const netnsDel = (name: string) => spawnSync('ip', ['netns', 'del', name]);

describe('withNetns', () => {
  let a = '';
  let b = '';
  let pathA = '';
  let pathB = '';
  let dir = '';
  let original = 0;
  before(() => {
    a = netnsAdd('a');
    b = netnsAdd('b');
    pathA = `/run/netns/${a}`;
    pathB = `/run/netns/${b}`;
    dir = mkdtempSync(join(tmpdir(), 'cnikit-netns-'));
    original = inode(THREAD_NS);
  });
  after(() => {
    netnsDel(a);
    netnsDel(b);
    rmSync(dir, { recursive: true, force: true });
  });

  test('runs fn in the namespace, returns its value, and switches back', () => {
    const seen = withNetns(pathA, () => inode(THREAD_NS));
    assert.equal(seen, inode(pathA));
    assert.notEqual(seen, original);
    assert.equal(inode(THREAD_NS), original);
  });

  test('fn receives a handle on the original namespace', () => {
    withNetns(pathA, (host) => {
      assert.equal(statSync(`/proc/self/fd/${host.fd}`).ino, original);
      assert.ok(!sameNetns(host.fd, THREAD_NS));
      // host.path is the thread's own /proc path, which now shows the target: use host.fd
      assert.ok(sameNetns(host.path, pathA));
    });
  });

  test('synchronous work inside sees the namespace: spawnSync, /proc/sys, netlink sockets', () => {
    const r = withNetns(pathA, () => ({
      links: spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).stdout,
      devconf: spawnSync('ls', ['/proc/sys/net/ipv4/conf'], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter(Boolean),
      sockNs: (() => {
        const s = NetlinkSocket.open(0);
        s.close();
        return inode(THREAD_NS);
      })(),
    }));
    assert.match(r.links, /^1: lo:/);
    assert.equal(r.links.trim().split('\n').length, 1, 'only lo in a fresh namespace');
    assert.deepEqual(r.devconf.sort(), ['all', 'default', 'lo']);
    assert.equal(r.sockNs, inode(pathA));
  });

  test('switches back when fn throws, and the error comes through unchanged', () => {
    const boom = new Error('boom');
    assert.throws(
      () =>
        withNetns(pathA, () => {
          assert.equal(inode(THREAD_NS), inode(pathA));
          throw boom;
        }),
      (e: unknown) => e === boom,
    );
    assert.equal(inode(THREAD_NS), original);
  });

  test('rejects a Promise-returning fn after switching back (no unhandled rejection left behind)', async () => {
    let insideNs = 0;
    const unhandled: unknown[] = [];
    const onUnhandled = (r: unknown) => unhandled.push(r);
    process.on('unhandledRejection', onUnhandled);
    try {
      assert.throws(
        () =>
          // @ts-expect-error an async callback does not type-check; a JavaScript caller gets the TypeError
          withNetns(pathA, async () => {
            insideNs = inode(THREAD_NS);
            throw new Error('async failure');
          }),
        (e: unknown) =>
          e instanceof TypeError && /returned a Promise/.test(e.message) && e.message.includes(pathA),
      );
      assert.equal(insideNs, inode(pathA), 'the synchronous part ran inside');
      assert.equal(inode(THREAD_NS), original);
      // @ts-expect-error a Promise-returning callback does not type-check either
      assert.throws(() => withNetns(pathA, () => Promise.resolve(1)), TypeError);
      await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    assert.equal(inode(THREAD_NS), original);
  });

  test('withNetnsFd runs in a namespace open on a descriptor (e.g. the host handle) and checks it', () => {
    const seen = withNetns(pathA, (host) => {
      const back = withNetnsFd(host.fd, () => inode(THREAD_NS));
      return [back, inode(THREAD_NS)];
    });
    assert.deepEqual(seen, [original, inode(pathA)]);
    const fd = openNetnsFd(pathB);
    try {
      assert.equal(
        withNetnsFd(fd, () => inode(THREAD_NS)),
        inode(pathB),
      );
      // @ts-expect-error a Promise-returning callback does not type-check
      assert.throws(() => withNetnsFd(fd, () => Promise.resolve()), TypeError);
    } finally {
      closeSync(fd);
    }
    const plain = openSync('/etc/hostname', 'r');
    try {
      assert.throws(
        () => withNetnsFd(plain, () => 1, 'hostname file'),
        (e: unknown) =>
          e instanceof NotNetnsError && e.message === 'hostname file is not a network namespace',
      );
    } finally {
      closeSync(plain);
    }
    assert.throws(
      () => withNetnsFd(987654, () => 1),
      (e: unknown) => isSysError(e) && e.code === 'EBADF',
    );
    assert.equal(inode(THREAD_NS), original);
  });

  test('nests: inner switches to another namespace and back to the outer one', () => {
    const seen = withNetns(pathA, () => {
      const inner = withNetns(pathB, () => inode(THREAD_NS));
      return [inode(THREAD_NS), inner];
    });
    assert.deepEqual(seen, [inode(pathA), inode(pathB)]);
    assert.equal(inode(THREAD_NS), original);
  });

  test('entering the namespace the thread is already in works (no switch needed)', () => {
    const here = currentNetnsPath();
    assert.equal(
      withNetns(here, () => inode(THREAD_NS)),
      original,
    );
    withNetns(pathA, () =>
      assert.equal(
        withNetns(pathA, () => inode(THREAD_NS)),
        inode(pathA),
      ),
    );
    assert.equal(inode(THREAD_NS), original);
  });

  test('a missing path is NetnsNotFoundError (Go text), which DEL treats as gone', () => {
    const missing = `/run/netns/cnikit-missing-${process.pid}`;
    let caught: unknown;
    try {
      withNetns(missing, () => assert.fail('must not run'));
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof NetnsNotFoundError);
    assert.ok(caught instanceof SysError);
    assert.equal((caught as SysError).code, 'ENOENT');
    assert.equal((caught as Error).message, `failed to Statfs "${missing}": no such file or directory`);
    assert.ok(isNetnsGone(caught));
    assert.ok(isNetnsGone(new Error('wrapped', { cause: caught })));
    assert.ok(!isNetnsGone(new Error('other')));
    assert.throws(
      () => withNetns(`${dir}/notadir/x`, () => 1),
      (e: unknown) => isNetnsGone(e),
    );
    assert.equal(inode(THREAD_NS), original);
  });

  test('a regular file is NotNetnsError "unknown FS magic" (Go text)', () => {
    const file = join(dir, 'plain');
    writeFileSync(file, 'x');
    const magic = spawnSync('stat', ['-f', '-c', '%t', file], { encoding: 'utf8' }).stdout.trim();
    assert.throws(
      () => withNetns(file, () => assert.fail('must not run')),
      (e: unknown) =>
        e instanceof NotNetnsError &&
        isNotNetnsError(e) &&
        !isNetnsGone(e) &&
        e.message === `unknown FS magic on "${file}": ${magic}`,
    );
    assert.throws(() => withNetns(dir, () => 1), NotNetnsError, 'a directory');
    assert.equal(inode(THREAD_NS), original);
  });

  test('another namespace type or a procfs file is "not a network namespace"', () => {
    for (const p of ['/proc/self/ns/mnt', '/proc/self/ns/uts', '/proc/self/status']) {
      assert.throws(
        () => withNetns(p, () => assert.fail('must not run')),
        (e: unknown) => e instanceof NotNetnsError && e.message === `"${p}" is not a network namespace`,
        p,
      );
    }
    assert.equal(inode(THREAD_NS), original);
  });

  test('a namespace deleted while held open stays usable through its handle; the path is gone', () => {
    const c = netnsAdd('c');
    const handle = NetNS.open(`/run/netns/${c}`);
    try {
      netnsDel(c);
      assert.ok(!isNetns(`/run/netns/${c}`));
      assert.equal(
        handle.do(
          () => spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout.trim().split('\n').length,
        ),
        1,
      );
      assert.throws(() => withNetns(`/run/netns/${c}`, () => 1), NetnsNotFoundError);
    } finally {
      handle.close();
      netnsDel(c);
    }
    assert.throws(() => handle.close(), /has already been closed/);
    assert.throws(() => handle.fd, /has already been closed/);
    assert.equal(inode(THREAD_NS), original);
  });
});

describe('netns helpers', () => {
  let a = '';
  before(() => {
    a = netnsAdd('h');
  });
  after(() => netnsDel(a));

  test('isNetns', () => {
    assert.equal(isNetns(`/run/netns/${a}`), true);
    assert.equal(isNetns('/proc/self/ns/net'), true);
    assert.equal(isNetns(currentNetnsPath()), true);
    assert.equal(isNetns('/proc/self/ns/ipc'), false);
    assert.equal(isNetns('/etc/hostname'), false);
    assert.equal(isNetns('/nonexistent'), false);
    assert.equal(isNetns(''), false);
  });

  test('currentNetnsPath names the calling thread and follows withNetns', () => {
    assert.equal(currentNetnsPath(), `/proc/${process.pid}/task/${process.pid}/ns/net`);
    assert.equal(inode(currentNetnsPath()), inode(THREAD_NS));
    withNetns(`/run/netns/${a}`, () => assert.equal(inode(currentNetnsPath()), inode(`/run/netns/${a}`)));
  });

  test('sameNetns compares dev+ino, for paths and descriptors', () => {
    assert.equal(sameNetns('/proc/self/ns/net', currentNetnsPath()), true);
    assert.equal(sameNetns('/proc/self/ns/net', `/run/netns/${a}`), false);
    const fd = openNetnsFd(`/run/netns/${a}`);
    try {
      assert.equal(sameNetns(fd, `/run/netns/${a}`), true);
      assert.equal(sameNetns(fd, THREAD_NS), false);
    } finally {
      closeSync(fd);
    }
  });

  test('NetNS.current is the thread namespace; open errors are typed', () => {
    const cur = NetNS.current();
    try {
      assert.ok(sameNetns(cur.fd, THREAD_NS));
    } finally {
      cur.close();
    }
    assert.throws(
      () => NetNS.open('/nonexistent'),
      (e: unknown) => isNetnsGone(e) && isSysError(e),
    );
    assert.throws(() => NetNS.open('/etc/hostname'), NotNetnsError);
  });

  test('no namespace file descriptors leak', () => {
    // descriptors of this process that point at a namespace or at the test's plain file
    const count = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return /^(net|mnt):\[|hostname$/.test(readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false;
        }
      }).length;
    const before = count();
    for (let i = 0; i < 50; i++) {
      withNetns(`/run/netns/${a}`, () => 1);
      try {
        withNetns(`/run/netns/${a}`, () => {
          throw new Error('x');
        });
      } catch {}
      try {
        withNetns('/etc/hostname', () => 1);
      } catch {}
      try {
        // @ts-expect-error the Promise case is exercised on purpose
        withNetns(`/run/netns/${a}`, () => Promise.resolve());
      } catch {}
      isNetns(`/run/netns/${a}`);
      isNetns('/proc/self/ns/mnt');
      try {
        withNetns(`/run/netns/${a}`, () => withNetns('/nonexistent', () => 1));
      } catch {}
    }
    const afterCount = count();
    assert.equal(afterCount, before, `namespace fds: ${before} before, ${afterCount} after`);
  });
});

describe('withNetns under Bun', () => {
  let ns = '';
  before(() => {
    ns = netnsAdd('bun');
  });
  after(() => netnsDel(ns));

  test('setns, sync fs on /proc/sys, spawnSync and netlink sockets act in the namespace under Bun too', () => {
    const root = new URL('../../../', import.meta.url).pathname;
    const script = `
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { withNetns } from ${JSON.stringify(join(root, 'packages/netlink/src/netns.ts'))};
import { sysctlSet } from ${JSON.stringify(join(root, 'packages/netlink/src/sysctl.ts'))};
import { NetlinkSocket } from ${JSON.stringify(join(root, 'packages/sys/src/index.ts'))};
const ino = () => statSync('/proc/thread-self/ns/net').ino;
const orig = ino();
const r = withNetns('/run/netns/${ns}', () => {
  // ip_forward also exists in the root namespace: never write it unless this thread really is in the test one.
  if (ino() !== statSync('/run/netns/${ns}').ino) throw new Error('withNetns did not switch: refusing to write ip_forward');
  const s = NetlinkSocket.open(0);
  s.close();
  return { ino: ino(), fwd: sysctlSet('net.ipv4.ip_forward', '1'), links: spawnSync('ip', ['-o', 'link']).stdout.toString().trim().split('\\n').length };
});
let promise = '';
try { withNetns('/run/netns/${ns}', async () => 1); } catch (e) { promise = e.constructor.name; }
console.log(JSON.stringify({ ...r, back: ino() === orig, promise }));
`;
    const r = spawnSync(join(root, 'node_modules/.bin/bun'), ['-e', script], { cwd: root, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out, {
      ino: inode(`/run/netns/${ns}`),
      fwd: '1',
      links: 1,
      back: true,
      promise: 'TypeError',
    });
    const seen = spawnSync('ip', ['netns', 'exec', ns, 'cat', '/proc/sys/net/ipv4/ip_forward'], {
      encoding: 'utf8',
    });
    assert.equal(seen.stdout, '1\n');
  });
});
