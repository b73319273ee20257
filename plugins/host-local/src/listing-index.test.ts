/**
 * The listing index (store.ts): a call reads `<dataDir>/.cnikit-index-<hash>` instead of every reservation file
 * only while the network directory's mtime is still the sentinel the index names; any other writer's change (the
 * Go plugin, an operator) makes the next call read the directory again. The directory's content stays the
 * reference's, allocation (duplicate check, last_reserved_ip cursor) is unchanged.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniRunner, tempDir } from '@cnikit/testing';
import { plugin } from './index.ts';
import { indexName, parseIndex } from './store.ts';
import { GO_HOST_LOCAL, ipamEnv, net, ourHostLocal, reservations } from './testenv.ts';

const hl = cniRunner(plugin, { containerId: 'dummy', netns: '/var/run/netns/test', path: '/opt/cni/bin' });
const SUBNET = { subnet: '10.1.0.0/16' };
const IDX = indexName('mynet');

/** The index as a call sees it (snapshot and journal replayed): its last sentinel, reservations and line count. */
function readIx(dataDir: string): {
  mtimeNs: string;
  files: [string, string][];
  names: string[];
  lines: number;
} {
  const text = readFileSync(join(dataDir, IDX), 'utf8');
  const ix = parseIndex(text);
  assert.ok(ix, `the index parses: ${JSON.stringify(text.slice(0, 200))}`);
  return {
    mtimeNs: ix.sentinel,
    files: [...ix.files],
    names: [...ix.names],
    lines: text.split('\n').length - 1,
  };
}

/** `n` reservations of other containers (10.1.0.10 …), written like the reference does. */
function fill(dir: string, n: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < n; i++) writeFileSync(join(dir, `10.1.${i >> 8}.${(i & 255) + 10}`), `c${i}\r\neth0`);
}

const addr = (r: { json: { ips: Array<{ address: string }> } }) => r.json.ips[0]!.address;
const mtimeNs = (p: string) => statSync(p, { bigint: true }).mtimeNs;
/** A short pause (20 ms), so that the change that follows is clearly later than the index. */
const tick = () => spawnSync('sleep', ['0.02']);

describe('listing index', () => {
  test('written beside the network directory; the directory holds only the reference files; its mtime is the sentinel', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const r = await hl.call('ADD', net(tmp.path, SUBNET), { containerId: 'a' });
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(readdirSync(dir).sort(), ['10.1.0.2', 'last_reserved_ip.0', 'lock']);
    assert.deepEqual(readdirSync(tmp.path).sort(), [IDX, 'mynet']);
    const ix = readIx(tmp.path);
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'the directory mtime is the sentinel the index names');
    assert.ok(
      BigInt(ix.mtimeNs) % 1_000_000_000n === 0n && Number(BigInt(ix.mtimeNs) / 1_000_000n) < Date.now(),
    );
    assert.deepEqual(ix.files, [['10.1.0.2', 'a\r\neth0']]);
  });

  test('with a valid index an ADD reads no reservation file and lists nothing (built executable, strace)', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    fill(dir, 200);
    // the first call lists the directory and writes the index
    assert.equal((await hl.call('ADD', net(tmp.path, SUBNET), { containerId: 'first' })).code, 0);
    const bin = ourHostLocal();
    if (bin.kind !== 'binary') return; // the syscall trace needs the executable (npm run build)
    const trace = join(tmp.path, 'trace');
    const r = spawnSync(
      'strace',
      ['-f', '-qq', '-o', trace, '-e', 'trace=getdents64,openat', (bin.target as { binary: string }).binary],
      { input: JSON.stringify(net(tmp.path, SUBNET)), env: ipamEnv('ADD', 'second'), encoding: 'utf8' },
    );
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    const lines = readFileSync(trace, 'utf8').split('\n');
    const fdPaths = lines.filter((l) => /\/proc\/self\/fd\/\d+\//.test(l));
    assert.deepEqual(
      fdPaths.filter((l) => l.includes('getdents64') || /fd\/\d+\/10\.1\.\d+\.\d+"/.test(l)),
      [],
      'no listing, no reservation file opened: the index said everything',
    );
    assert.ok(
      fdPaths.some((l) => l.includes(IDX)),
      'the index was read',
    );
    const left = reservations(dir);
    assert.equal(Object.keys(left).length, 202);
    assert.equal(left['10.1.0.3'], 'second\r\neth0', 'the next address after the cursor (first got .2)');
  });

  test('duplicate check and round-robin cursor through the index, over process restarts (every call a new store)', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'a' })), '10.1.0.2/16');
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'b' })), '10.1.0.3/16');
    const dup = await hl.call('ADD', conf, { containerId: 'a' });
    assert.equal(dup.json.code, 999);
    assert.match(dup.json.msg, /10\.1\.0\.2 has been allocated to a, duplicate allocation is not allowed/);
    assert.equal((await hl.call('DEL', conf, { containerId: 'a' })).code, 0);
    // the cursor is at .3: .2 is free again but the walk goes on to .4
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'c' })), '10.1.0.4/16');
    assert.equal(readFileSync(join(dir, 'last_reserved_ip.0'), 'utf8'), '10.1.0.4');
    assert.equal((await hl.call('CHECK', conf, { containerId: 'b' })).code, 0);
    assert.notEqual((await hl.call('CHECK', conf, { containerId: 'a' })).code, 0);
    const ix = readIx(tmp.path);
    assert.deepEqual(
      Object.fromEntries(ix.files),
      reservations(dir),
      'the index lists exactly the reservations',
    );
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)));
  });

  test('a reservation written by another writer (same second) is seen: the index is not trusted after it', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'a' })), '10.1.0.2/16');
    // as the Go plugin does it: a new file named by the address, holding "<id>\r\n<ifname>"
    writeFileSync(join(dir, '10.1.0.3'), 'x\r\neth0');
    const dup = await hl.call('ADD', conf, { containerId: 'x' });
    assert.equal(dup.json.code, 999, 'x already holds 10.1.0.3');
    assert.match(dup.json.msg, /10\.1\.0\.3 has been allocated to x/);
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'y' })), '10.1.0.4/16', '.3 is taken');
    // removed by another writer: released
    rmSync(join(dir, '10.1.0.2'));
    assert.equal((await hl.call('CHECK', conf, { containerId: 'a' })).code !== 0, true);
    const gc = await hl.call('GC', {
      ...conf,
      'cni.dev/valid-attachments': [{ containerID: 'y', ifname: 'eth0' }],
    });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual(reservations(dir), { '10.1.0.4': 'y\r\neth0' });
  });

  test('after a reboot or a lost index (missing, torn, of another directory) the directory is listed again', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    fill(dir, 5);
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'a' })), '10.1.0.2/16');
    const good = readFileSync(join(tmp.path, IDX), 'utf8');
    for (const bad of [
      undefined,
      good.slice(0, good.length >> 1),
      good.replace(/"ino":"\d+"/, '"ino":"1"'),
      '{}',
    ]) {
      if (bad === undefined) rmSync(join(tmp.path, IDX));
      else writeFileSync(join(tmp.path, IDX), bad);
      // with the index of another listing trusted, a's duplicate would be missed
      const dup = await hl.call('ADD', conf, { containerId: 'a' });
      assert.equal(
        dup.json.code,
        999,
        `index ${bad === undefined ? 'missing' : JSON.stringify(bad.slice(0, 30))}`,
      );
      assert.deepEqual(
        Object.fromEntries(readIx(tmp.path).files),
        reservations(dir),
        'the index was rewritten from the directory',
      );
    }
    // a stale index of an earlier listing whose sentinel the directory no longer has
    writeFileSync(join(tmp.path, IDX), good);
    tick();
    writeFileSync(join(dir, '10.1.0.3'), 'z\r\neth0');
    assert.equal((await hl.call('ADD', conf, { containerId: 'z' })).json.code, 999);
  });

  test('DEL by the prevResult keeps the index valid: 249 others stay, the next ADD lists nothing', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    fill(dir, 249);
    const r = await hl.call('ADD', conf, { containerId: 'probe' });
    const ip = addr(r);
    const del = await hl.call(
      'DEL',
      { ...conf, prevResult: { cniVersion: '1.1.0', ips: [{ address: ip }] } },
      {
        containerId: 'probe',
      },
    );
    assert.equal(del.code, 0, del.stdout);
    const left = reservations(dir);
    assert.equal(Object.keys(left).length, 249);
    assert.ok(!Object.values(left).includes('probe\r\neth0'));
    const ix = readIx(tmp.path);
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'still valid after the DEL');
    assert.deepEqual(Object.fromEntries(ix.files), left);
  });

  test('a failed ADD that reserved and rolled back changes no file: the index and the directory mtime stay as they were', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    assert.equal((await hl.call('ADD', conf, { containerId: 'a' })).code, 0);
    const before = {
      ix: readFileSync(join(tmp.path, IDX)),
      mtime: mtimeNs(dir),
      names: readdirSync(dir).sort(),
    };
    tick();
    // an address for the range set is reserved, then the requested one outside it fails the ADD: rolled back
    const r = await hl.call('ADD', { ...conf, args: { cni: { ips: ['10.99.0.1'] } } }, { containerId: 'b' });
    assert.notEqual(r.code, 0, r.stdout);
    assert.match(r.json.msg, /failed to allocate all requested IPs: 10\.99\.0\.1/);
    assert.deepEqual(readdirSync(dir).sort(), before.names);
    assert.equal(mtimeNs(dir), before.mtime, 'the directory mtime is the sentinel again');
    assert.deepEqual(readFileSync(join(tmp.path, IDX)), before.ix, 'the index is unchanged');
    // and still trusted: the next ADD appends to it (a scan would write a one-line snapshot)
    assert.equal((await hl.call('ADD', conf, { containerId: 'c' })).code, 0);
    assert.ok(readIx(tmp.path).lines > before.ix.toString('utf8').split('\n').length - 1);
  });

  test('a call after a trusted index appends its changes (O(1)), a long journal becomes a new snapshot', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    fill(dir, 100);
    assert.equal((await hl.call('ADD', conf, { containerId: 'first' })).code, 0);
    const snap = readFileSync(join(tmp.path, IDX), 'utf8');
    assert.equal(snap.split('\n').length - 1, 1, 'after a scan: one snapshot line');
    const ino = statSync(join(tmp.path, IDX)).ino;
    const stamps: bigint[] = [BigInt(readIx(tmp.path).mtimeNs)];
    for (let i = 0; i < 10; i++) {
      const id = `p${i}`;
      const ip = addr(await hl.call('ADD', conf, { containerId: id }));
      stamps.push(BigInt(readIx(tmp.path).mtimeNs));
      const d = await hl.call(
        'DEL',
        { ...conf, prevResult: { cniVersion: '1.1.0', ips: [{ address: ip }] } },
        {
          containerId: id,
        },
      );
      assert.equal(d.code, 0, d.stdout);
      stamps.push(BigInt(readIx(tmp.path).mtimeNs));
    }
    const text = readFileSync(join(tmp.path, IDX), 'utf8');
    assert.equal(statSync(join(tmp.path, IDX)).ino, ino, 'the same file, appended to (not renamed over)');
    assert.ok(text.startsWith(snap), 'the snapshot line is not rewritten');
    const ix = readIx(tmp.path);
    assert.ok(ix.lines > 20, `one line per change and one sentinel per call (${ix.lines} lines)`);
    assert.deepEqual(
      Object.fromEntries(ix.files),
      reservations(dir),
      'the replayed journal lists the directory',
    );
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'its last sentinel is the directory mtime');
    for (let i = 1; i < stamps.length; i++)
      assert.ok(stamps[i]! > stamps[i - 1]!, `sentinels strictly increase (${stamps[i - 1]} → ${stamps[i]})`);
    assert.ok(stamps.at(-1)! < BigInt(Math.floor(Date.now() / 1000)) * 1_000_000_000n, 'and lie in the past');
    // the journal is bounded: beyond max(64, names) lines the next call writes a new snapshot
    for (let i = 0; i < 40; i++) {
      const id = `q${i}`;
      const ip = addr(await hl.call('ADD', conf, { containerId: id }));
      await hl.call(
        'DEL',
        { ...conf, prevResult: { cniVersion: '1.1.0', ips: [{ address: ip }] } },
        {
          containerId: id,
        },
      );
    }
    const after = readIx(tmp.path);
    assert.ok(after.lines <= 103, `compacted (${after.lines} lines for ${after.names.length} names)`);
    assert.deepEqual(Object.fromEntries(after.files), reservations(dir));
    assert.equal(after.mtimeNs, String(mtimeNs(dir)));
  });

  test('a lost append or a lost snapshot (the directory mtime kept) is not trusted: the directory is listed', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    fill(dir, 5);
    assert.equal((await hl.call('ADD', conf, { containerId: 'x' })).code, 0);
    for (const lose of ['append', 'snapshot'] as const) {
      const id = `lost-${lose}`;
      let old = readFileSync(join(tmp.path, IDX), 'utf8');
      if (lose === 'snapshot') {
        // a trusted index whose journal is full (sentinel lines only): the next change writes a new snapshot
        old += `${JSON.stringify(['@', readIx(tmp.path).mtimeNs])}\n`.repeat(70);
        writeFileSync(join(tmp.path, IDX), old);
      }
      const ino = statSync(join(tmp.path, IDX)).ino;
      // same second as the call before: its sentinel must still differ from the one in `old`
      assert.equal((await hl.call('ADD', conf, { containerId: id })).code, 0);
      assert.notEqual(readIx(tmp.path).mtimeNs, parseIndex(old)!.sentinel, 'a new sentinel');
      assert.equal(
        statSync(join(tmp.path, IDX)).ino !== ino,
        lose === 'snapshot',
        lose === 'snapshot' ? 'renamed over' : 'appended to',
      );
      // a crash that kept the directory (its reservation and mtime) but lost the index write
      writeFileSync(join(tmp.path, IDX), old);
      const dup = await hl.call('ADD', conf, { containerId: id });
      assert.equal(dup.json.code, 999, `${lose} lost: the duplicate is still seen (${dup.stdout})`);
      assert.deepEqual(Object.fromEntries(readIx(tmp.path).files), reservations(dir), 'listed again');
    }
  });

  test('a torn append (a last line cut short, or not a sentinel) is not trusted', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, SUBNET);
    fill(dir, 5);
    assert.equal((await hl.call('ADD', conf, { containerId: 'x' })).code, 0);
    assert.equal((await hl.call('ADD', conf, { containerId: 'y' })).code, 0);
    const good = readFileSync(join(tmp.path, IDX), 'utf8');
    assert.ok(good.split('\n').length - 1 > 1, 'a journal was appended');
    const lastNl = good.lastIndexOf('\n', good.length - 2);
    const stamp = good.slice(lastNl + 1);
    for (const bad of [
      good.slice(0, -3), // the sentinel line cut short
      good.slice(0, lastNl + 1), // the sentinel lost, the change kept
      `${good}["+","10.1.9.9","z\\r\\neth0"]\n`, // a change after the last sentinel
      good.slice(0, lastNl + 1) + '\0'.repeat(stamp.length), // zeros where the data did not reach the disk
    ]) {
      // the directory mtime stays the sentinel of `good`: only the file is damaged
      writeFileSync(join(tmp.path, IDX), bad);
      assert.equal(
        parseIndex(bad)?.sentinel === String(mtimeNs(dir)) && bad !== good,
        false,
        JSON.stringify(bad.slice(-40)),
      );
      assert.equal(
        (await hl.call('ADD', conf, { containerId: 'y' })).json.code,
        999,
        'the duplicate is seen',
      );
      assert.deepEqual(
        Object.fromEntries(readIx(tmp.path).files),
        reservations(dir),
        'the index was rewritten',
      );
      writeFileSync(join(tmp.path, IDX), readFileSync(join(tmp.path, IDX)));
    }
  });

  test('the Go plugin and cnikit on one directory: each sees the other’s reservations', async () => {
    assert.ok(
      existsSync(GO_HOST_LOCAL),
      `Go host-local not installed at ${GO_HOST_LOCAL} (Debian package containernetworking-plugins; .ci/run installs it)`,
    );
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = { ...net(tmp.path, SUBNET), cniVersion: '1.0.0' }; // Go 1.1.1 speaks up to 1.0.0
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'ours' })), '10.1.0.2/16');
    const go = (cmd: 'ADD' | 'DEL', id: string) =>
      spawnSync(GO_HOST_LOCAL, [], { input: JSON.stringify(conf), env: ipamEnv(cmd, id), encoding: 'utf8' });
    const g = go('ADD', 'theirs');
    assert.equal(g.status, 0, g.stdout);
    assert.equal(JSON.parse(g.stdout).ips[0].address, '10.1.0.3/16');
    assert.equal(
      (await hl.call('ADD', conf, { containerId: 'theirs' })).json.code,
      999,
      'Go’s reservation seen',
    );
    assert.equal(addr(await hl.call('ADD', conf, { containerId: 'next' })), '10.1.0.4/16');
    assert.equal(go('DEL', 'next').status, 0, 'Go releases a reservation cnikit made under the index');
    assert.equal(
      (await hl.call('CHECK', conf, { containerId: 'next' })).code !== 0,
      true,
      'and cnikit sees it gone',
    );
    assert.equal(go('ADD', 'ours').status !== 0, true, 'Go sees cnikit’s reservation (duplicate)');
    assert.deepEqual(reservations(dir), { '10.1.0.2': 'ours\r\neth0', '10.1.0.3': 'theirs\r\neth0' });
  });
});

describe('listing index: STATUS', () => {
  test('STATUS uses the index and keeps it valid (its write test included); a full range set is still seen', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const conf = net(tmp.path, { subnet: '10.1.2.0/29' });
    for (const id of ['a', 'b', 'c', 'd', 'e'])
      assert.equal((await hl.call('ADD', conf, { containerId: id })).code, 0);
    const st = await hl.call('STATUS', conf);
    assert.equal(st.json.code, 50, 'the /29 is full');
    const ix = readIx(tmp.path);
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'still valid after STATUS');
    assert.equal((await hl.call('DEL', conf, { containerId: 'c' })).code, 0);
    assert.equal((await hl.call('STATUS', conf)).code, 0, 'one address free again');
  });
});
