/**
 * Store path safety: nothing is ever created, read, locked or written outside
 * `<dataDir>/<network>`, whatever symlinks are planted in or instead of it; a reservation larger than 4096 bytes
 * (a very long container ID written by the reference) is still found and released.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniRunner, tempDir } from '@cnikit/testing';
import { plugin } from './index.ts';
import { net } from './testenv.ts';

// host-local in-process, with the reference tests' environment (CNI_NETNS is not used by IPAM)
const hl = cniRunner(plugin, { containerId: 'dummy', netns: '/var/run/netns/test', path: '/opt/cni/bin' });

const SUBNET = { subnet: '10.1.2.0/24' };

/** Every entry of a directory as lstat sees it: file content, `-> target` for symlinks, `<dir>` for directories. */
function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(dir)) return out;
  for (const n of readdirSync(dir).sort()) {
    const p = join(dir, n);
    const st = lstatSync(p);
    out[n] = st.isSymbolicLink()
      ? `-> ${readlinkSync(p)}`
      : st.isDirectory()
        ? '<dir>'
        : readFileSync(p, 'latin1');
  }
  return out;
}

/** Content, mode, size and mtime of a file outside the store: must not change. */
function fingerprint(path: string): string {
  const st = statSync(path);
  return JSON.stringify([readFileSync(path, 'latin1'), st.mode, st.size, st.mtimeMs, st.ino]);
}

function gcConf(dataDir: string, valid: Array<{ containerID: string; ifname: string }>) {
  return { ...net(dataDir, SUBNET), 'cni.dev/valid-attachments': valid };
}

describe('symlinked network directory', () => {
  for (const dangling of [false, true]) {
    test(`${dangling ? 'dangling ' : ''}symlink as <dataDir>/<network>: every verb refuses it, nothing is created outside`, async () => {
      using tmp = tempDir();
      const data = join(tmp.path, 'data');
      const outside = join(tmp.path, 'outside');
      mkdirSync(data);
      if (!dangling) mkdirSync(outside);
      symlinkSync(outside, join(data, 'mynet'));
      const conf = net(data, SUBNET);

      const a = await hl.call('ADD', conf);
      assert.equal(a.code, 1);
      assert.equal(a.json.code, 5, a.stdout);
      assert.match(
        a.json.msg,
        /^host-local store .*\/data\/mynet is not a directory: it is a symlink, which is never followed/,
      );
      for (const command of ['DEL', 'CHECK'] as const) {
        const r = await hl.call(command, conf);
        assert.equal(r.json?.code, 5, `${command}: ${r.stdout}`); // never a silent success
        assert.match(r.json.msg, /is a symlink, which is never followed/);
      }
      const gc = await hl.call('GC', gcConf(data, []));
      assert.equal(gc.json?.code, 5, gc.stdout);
      const st = await hl.call('STATUS', conf);
      assert.equal(st.json?.code, 50, st.stdout);
      assert.match(st.json.msg, /^host-local store is not usable: .*is a symlink/);

      if (dangling) assert.equal(existsSync(outside), false, 'the dangling target was created');
      else assert.deepEqual(listing(outside), {}, 'files were created through the symlink');
      assert.deepEqual(listing(data), { mynet: `-> ${outside}` });
    });
  }

  test('a file as <dataDir>/<network> is refused with its own message', async () => {
    using tmp = tempDir();
    writeFileSync(join(tmp.path, 'mynet'), 'x');
    const r = await hl.call('ADD', net(tmp.path, SUBNET));
    assert.equal(r.json.code, 5);
    assert.match(r.json.msg, /mynet is not a directory: it is a file; replace it with a real directory$/);
  });

  test('the dataDir itself may be a symlink (the operator chose it); the store is created behind it', async () => {
    using tmp = tempDir();
    mkdirSync(join(tmp.path, 'real'));
    symlinkSync(join(tmp.path, 'real'), join(tmp.path, 'data'));
    const r = await hl.call('ADD', net(join(tmp.path, 'data'), SUBNET));
    assert.equal(r.code, 0, r.stdout);
    assert.equal(readFileSync(join(tmp.path, 'real', 'mynet', '10.1.2.2'), 'latin1'), 'dummy\r\neth0');
  });
});

describe('symlinked lock file', () => {
  for (const dangling of [true, false]) {
    test(`${dangling ? 'dangling ' : ''}symlink as lock: refused by every verb, the target is ${dangling ? 'never created' : 'untouched'}`, async () => {
      using tmp = tempDir();
      const dir = join(tmp.path, 'mynet');
      const target = join(tmp.path, 'outside-lock');
      mkdirSync(dir);
      if (!dangling) writeFileSync(target, 'precious');
      const before = dangling ? '' : fingerprint(target);
      symlinkSync(target, join(dir, 'lock'));
      writeFileSync(join(dir, '10.1.2.7'), 'dummy\r\neth0', { mode: 0o600 }); // a reservation of ours
      const conf = net(tmp.path, SUBNET);

      const a = await hl.call('ADD', conf, { containerId: 'other' });
      assert.equal(a.json?.code, 5, a.stdout);
      assert.match(
        a.json.msg,
        /^host-local store lock .*\/mynet\/lock is a symlink, which is never followed \(nothing was changed\); replace it with a regular file$/,
      );
      // DEL cannot take the lock: it fails (its reservation is still there) instead of reporting success
      const d = await hl.call('DEL', conf);
      assert.equal(d.json?.code, 5, d.stdout);
      assert.equal(readFileSync(join(dir, '10.1.2.7'), 'latin1'), 'dummy\r\neth0');
      assert.equal((await hl.call('CHECK', conf)).json?.code, 5);
      assert.equal((await hl.call('GC', gcConf(tmp.path, []))).json?.code, 5);
      assert.equal((await hl.call('STATUS', conf)).json?.code, 50);

      if (dangling) assert.equal(existsSync(target), false, 'the lock target was created outside the store');
      else assert.equal(fingerprint(target), before);
      assert.deepEqual(listing(dir), { '10.1.2.7': 'dummy\r\neth0', lock: `-> ${target}` });
    });
  }
});

describe('symlinked last_reserved_ip', () => {
  test('a symlink to a file outside is never read nor written: the walk starts at rangeStart, the link is replaced', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const target = join(tmp.path, 'outside-last');
    mkdirSync(dir);
    writeFileSync(target, '10.1.2.50');
    const before = fingerprint(target);
    symlinkSync(target, join(dir, 'last_reserved_ip.0'));
    const r = await hl.call('ADD', net(tmp.path, SUBNET));
    assert.equal(r.code, 0, r.stdout);
    // following the link would have continued after .50
    assert.equal(r.json.ips[0].address, '10.1.2.2/24');
    assert.match(
      r.stderr,
      /Error retrieving last reserved ip: .*last_reserved_ip\.0 is a symlink, which is never followed/,
    );
    assert.equal(fingerprint(target), before);
    assert.equal(lstatSync(join(dir, 'last_reserved_ip.0')).isFile(), true);
    assert.equal(readFileSync(join(dir, 'last_reserved_ip.0'), 'latin1'), '10.1.2.2');
    assert.equal(statSync(join(dir, 'last_reserved_ip.0')).mode & 0o777, 0o600);
  });

  test('a dangling symlink: its target is never created', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const target = join(tmp.path, 'nowhere');
    mkdirSync(dir);
    symlinkSync(target, join(dir, 'last_reserved_ip.0'));
    const r = await hl.call('ADD', net(tmp.path, SUBNET));
    assert.equal(r.code, 0, r.stdout);
    assert.equal(existsSync(target), false);
    assert.equal(readFileSync(join(dir, 'last_reserved_ip.0'), 'latin1'), '10.1.2.2');
  });
});

describe('symlinked reservation', () => {
  test('a symlink named like an address keeps it taken, is not read, not counted as ours, never removed', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const target = join(tmp.path, 'outside-res');
    mkdirSync(dir);
    writeFileSync(target, 'dummy\r\neth0'); // would look like our reservation if followed
    const before = fingerprint(target);
    symlinkSync(target, join(dir, '10.1.2.2'));
    const conf = net(tmp.path, SUBNET);

    // CHECK: the symlink is not our reservation (following it would find one)
    const c0 = await hl.call('CHECK', conf);
    assert.equal(c0.json?.code, 999, c0.stdout);
    assert.match(c0.json.msg, /Failed to find address added by container dummy/);
    // ADD: not a duplicate allocation (following it would say so), .2 stays taken
    const a = await hl.call('ADD', conf);
    assert.equal(a.code, 0, a.stdout);
    assert.equal(a.json.ips[0].address, '10.1.2.3/24');
    // DEL removes our real reservation only
    const d = await hl.call('DEL', conf);
    assert.equal(d.code, 0, d.stdout);
    assert.deepEqual(listing(dir), {
      '10.1.2.2': `-> ${target}`,
      'last_reserved_ip.0': '10.1.2.3',
      lock: '',
    });
    // GC keeps it (with a warning): it is nobody's reservation
    const g = await hl.call('GC', gcConf(tmp.path, []));
    assert.equal(g.code, 0, g.stdout);
    assert.match(g.stderr, /10\.1\.2\.2 is a symlink, not a reservation: kept/);
    assert.equal(lstatSync(join(dir, '10.1.2.2')).isSymbolicLink(), true);
    assert.equal(fingerprint(target), before);
  });

  test('a dangling symlink named like the next address: skipped, its target never created', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const target = join(tmp.path, 'nowhere');
    mkdirSync(dir);
    symlinkSync(target, join(dir, '10.1.2.2'));
    const r = await hl.call('ADD', net(tmp.path, SUBNET));
    assert.equal(r.code, 0, r.stdout);
    assert.equal(r.json.ips[0].address, '10.1.2.3/24');
    assert.equal(existsSync(target), false);
    // a requested address behind a symlink is not available either
    const q = await hl.call('ADD', net(tmp.path, SUBNET), { containerId: 'q', args: 'IP=10.1.2.2' });
    assert.equal(q.json?.code, 999, q.stdout);
    assert.match(q.json.msg, /requested IP address 10\.1\.2\.2 is not available/);
    assert.equal(existsSync(target), false);
  });
});

describe('reservations larger than 4096 bytes', () => {
  test('DEL releases a reservation written with a 5000-byte container ID (the reference format); CHECK finds it', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir);
    const id = `c${'x'.repeat(4999)}`;
    writeFileSync(join(dir, '10.1.2.9'), `${id}\r\neth0`, { mode: 0o600 });
    writeFileSync(join(dir, '10.1.2.10'), `${id}\r\neth1`, { mode: 0o600 }); // another interface: kept
    assert.ok(statSync(join(dir, '10.1.2.9')).size > 4096);
    const conf = net(tmp.path, SUBNET);
    const c = await hl.call('CHECK', conf, { containerId: id });
    assert.equal(c.code, 0, c.stdout);
    const d = await hl.call('DEL', conf, { containerId: id });
    assert.equal(d.code, 0, d.stdout);
    assert.deepEqual(Object.keys(listing(dir)), ['10.1.2.10', 'lock']);
  });

  test('a legacy (ID-only) 9000-byte reservation is released too', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir);
    const id = 'L'.repeat(9000);
    writeFileSync(join(dir, '10.1.2.9'), `${id}\n`, { mode: 0o600 });
    const d = await hl.call('DEL', net(tmp.path, SUBNET), { containerId: id });
    assert.equal(d.code, 0, d.stdout);
    assert.deepEqual(Object.keys(listing(dir)), ['lock']);
  });
});
