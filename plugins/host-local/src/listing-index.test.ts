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
import { indexName } from './store.ts';
import { GO_HOST_LOCAL, ipamEnv, net, ourHostLocal, reservations } from './testenv.ts';

const hl = cniRunner(plugin, { containerId: 'dummy', netns: '/var/run/netns/test', path: '/opt/cni/bin' });
const SUBNET = { subnet: '10.1.0.0/16' };
const IDX = indexName('mynet');

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
    const ix = JSON.parse(readFileSync(join(tmp.path, IDX), 'utf8'));
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
    const ix = JSON.parse(readFileSync(join(tmp.path, IDX), 'utf8'));
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
        Object.fromEntries(JSON.parse(readFileSync(join(tmp.path, IDX), 'utf8')).files),
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
    const ix = JSON.parse(readFileSync(join(tmp.path, IDX), 'utf8'));
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'still valid after the DEL');
    assert.deepEqual(Object.fromEntries(ix.files), left);
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
    const ix = JSON.parse(readFileSync(join(tmp.path, IDX), 'utf8'));
    assert.equal(ix.mtimeNs, String(mtimeNs(dir)), 'still valid after STATUS');
    assert.equal((await hl.call('DEL', conf, { containerId: 'c' })).code, 0);
    assert.equal((await hl.call('STATUS', conf)).code, 0, 'one address free again');
  });
});
