/**
 * host-local scenarios through the skel seam (invokeInProcess), with temp dataDirs: the reference's own
 * test scenarios (host_local_test.go, allocator_test.go, config_test.go) plus GC/STATUS and hostile input.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ALL_VERSIONS, decodeRequest, type RequestBase } from '@cnikit/skel';
import { cniRunner, tempDir } from '@cnikit/testing';
import { plugin } from './index.ts';
import { goFsError } from './store.ts';
import { ipamEnv, net, ourHostLocal, reservations, storeFiles } from './testenv.ts';

// host-local in-process, with the reference tests' environment (CNI_NETNS is not used by IPAM)
const hl = cniRunner(plugin, { containerId: 'dummy', netns: '/var/run/netns/test', path: '/opt/cni/bin' });

describe('ADD/DEL (reference host_local_test.go)', () => {
  for (const ver of ALL_VERSIONS) {
    test(`[${ver}] allocates and releases addresses with ADD/DEL`, async () => {
      using tmp = tempDir();
      writeFileSync(join(tmp.path, 'resolv.conf'), 'nameserver 192.0.2.3');
      const conf = net(
        tmp.path,
        {
          resolvConf: `${tmp.path}/resolv.conf`,
          ranges: [[{ subnet: '10.1.2.0/24' }, { subnet: '10.2.2.0/24' }], [{ subnet: '2001:db8:1::0/64' }]],
          routes: [
            { dst: '0.0.0.0/0' },
            { dst: '::/0' },
            { dst: '192.168.0.0/16', gw: '1.1.1.1' },
            { dst: '2001:db8:2::0/64', gw: '2001:db8:3::1' },
          ],
        },
        { cniVersion: ver },
      );
      const r = await hl.call('ADD', conf);
      assert.equal(r.code, 0, r.stdout);
      const dir = join(tmp.path, 'mynet');
      if (ver === '0.1.0' || ver === '0.2.0') {
        assert.deepEqual(r.json.ip4, {
          ip: '10.1.2.2/24',
          gateway: '10.1.2.1',
          routes: [{ dst: '0.0.0.0/0' }, { dst: '192.168.0.0/16', gw: '1.1.1.1' }],
        });
        assert.equal(r.json.ip6.ip, '2001:db8:1::2/64');
        assert.equal(r.json.ip6.gateway, '2001:db8:1::1');
      } else {
        const ips = r.json.ips.map((x: { address: string; gateway: string }) => [x.address, x.gateway]);
        assert.deepEqual(ips, [
          ['10.1.2.2/24', '10.1.2.1'],
          ['2001:db8:1::2/64', '2001:db8:1::1'],
        ]);
        if (ver.startsWith('0.')) assert.match(r.stdout, /"version":/);
        assert.deepEqual(r.json.routes, [
          { dst: '0.0.0.0/0' },
          { dst: '::/0' },
          { dst: '192.168.0.0/16', gw: '1.1.1.1' },
          { dst: '2001:db8:2::/64', gw: '2001:db8:3::1' },
        ]);
      }
      assert.deepEqual(r.json.dns.nameservers, ['192.0.2.3']);
      assert.deepEqual(storeFiles(dir), {
        '10.1.2.2': 'dummy\r\neth0',
        '2001:db8:1::2': 'dummy\r\neth0',
        'last_reserved_ip.0': '10.1.2.2',
        'last_reserved_ip.1': '2001:db8:1::2',
        lock: '',
      });
      const del = await hl.call('DEL', conf);
      assert.equal(del.code, 0, del.stdout);
      assert.equal(del.stdout, '');
      assert.deepEqual(reservations(dir), {});
      assert.ok(existsSync(join(dir, 'last_reserved_ip.0')), 'DEL never touches last_reserved_ip');
    });
  }

  test('file modes: dir 0755, lock 0750, reservations and last_reserved_ip 0600', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('ADD', conf)).code, 0);
    const dir = join(tmp.path, 'mynet');
    const mode = (p: string) => statSync(join(dir, p)).mode & 0o777;
    assert.equal(statSync(dir).mode & 0o777, 0o755 & ~process.umask());
    assert.equal(mode('lock'), 0o750 & ~process.umask());
    assert.equal(mode('10.1.2.2'), 0o600);
    assert.equal(mode('last_reserved_ip.0'), 0o600);
  });

  test('allocates and releases on a specific interface (two networks, eth0/eth1)', async () => {
    using tmp = tempDir();
    const conf0 = { ...net(tmp.path, { ranges: [[{ subnet: '10.1.2.0/24' }]] }), name: 'mynet0' };
    const conf1 = { ...net(tmp.path, { ranges: [[{ subnet: '10.2.2.0/24' }]] }), name: 'mynet1' };
    const r0 = await hl.call('ADD', conf0, { ifName: 'eth0' });
    const r1 = await hl.call('ADD', conf1, { ifName: 'eth1' });
    assert.equal(r0.json.ips[0].address, '10.1.2.2/24');
    assert.equal(r1.json.ips[0].address, '10.2.2.2/24');
    assert.deepEqual(reservations(join(tmp.path, 'mynet0')), { '10.1.2.2': 'dummy\r\neth0' });
    assert.deepEqual(reservations(join(tmp.path, 'mynet1')), { '10.2.2.2': 'dummy\r\neth1' });
    assert.equal((await hl.call('DEL', conf0, { ifName: 'eth0' })).code, 0);
    assert.deepEqual(reservations(join(tmp.path, 'mynet0')), {});
    assert.deepEqual(reservations(join(tmp.path, 'mynet1')), { '10.2.2.2': 'dummy\r\neth1' });
    assert.equal((await hl.call('DEL', conf1, { ifName: 'eth1' })).code, 0);
    assert.deepEqual(reservations(join(tmp.path, 'mynet1')), {});
  });

  test('eth0 and eth1 of one container in one network get two addresses; DEL eth0 keeps eth1', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('ADD', conf, { ifName: 'eth0' })).json.ips[0].address, '10.1.2.2/24');
    assert.equal((await hl.call('ADD', conf, { ifName: 'eth1' })).json.ips[0].address, '10.1.2.3/24');
    assert.equal((await hl.call('DEL', conf, { ifName: 'eth0' })).code, 0);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.3': 'dummy\r\neth1' });
  });

  test('repeat ADD for the same container+ifname fails; another container gets the next address', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('ADD', conf)).code, 0);
    const again = await hl.call('ADD', conf);
    assert.equal(again.code, 1);
    assert.deepEqual(again.json, {
      code: 999,
      msg: 'failed to allocate for range 0: 10.1.2.2 has been allocated to dummy, duplicate allocation is not allowed',
    });
    const other = await hl.call('ADD', conf, { containerId: 'other' });
    assert.equal(other.json.ips[0].address, '10.1.2.3/24');
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {
      '10.1.2.2': 'dummy\r\neth0',
      '10.1.2.3': 'other\r\neth0',
    });
  });

  test('DEL works on backward-compatible (ID-only) files; CHECK finds them', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '10.1.2.2'), 'dummy');
    writeFileSync(join(dir, '10.1.2.3'), 'other');
    assert.equal((await hl.call('CHECK', conf)).code, 0);
    const dup = await hl.call('ADD', conf);
    assert.equal(
      dup.json.msg,
      'failed to allocate for range 0: 10.1.2.2 has been allocated to dummy, duplicate allocation is not allowed',
    );
    assert.equal((await hl.call('DEL', conf)).code, 0);
    assert.deepEqual(reservations(dir), { '10.1.2.3': 'other' });
  });

  test('DEL prefers new-format files; with two range sets the second pass also removes legacy files (like Go)', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '10.1.2.2'), 'dummy\r\neth0');
    writeFileSync(join(dir, '10.1.2.3'), 'dummy');
    const one = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('DEL', one)).code, 0);
    assert.deepEqual(reservations(dir), { '10.1.2.3': 'dummy' });
    writeFileSync(join(dir, '10.1.2.2'), 'dummy\r\neth0');
    const two = net(tmp.path, { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '2001:db8::/64' }]] });
    assert.equal((await hl.call('DEL', two)).code, 0);
    assert.deepEqual(reservations(dir), {});
  });

  test('no error on DEL of an unknown ID, without CNI_NETNS', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    const r = await hl.call('DEL', conf, { containerId: 'nothere', netns: '' });
    assert.equal(r.code, 0, r.stdout);
  });

  test('DEL and CHECK never create state: no dataDir, no network directory, no lock file', async () => {
    using tmp = tempDir();
    const dataDir = join(tmp.path, 'fresh');
    const conf = net(dataDir, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('DEL', conf, { containerId: 'never-added' })).code, 0);
    assert.equal((await hl.call('CHECK', conf)).code, 1);
    assert.equal(existsSync(dataDir), false, 'DEL/CHECK created the dataDir');
    mkdirSync(dataDir);
    assert.equal((await hl.call('DEL', conf, { containerId: 'never-added' })).code, 0);
    assert.equal((await hl.call('CHECK', conf)).code, 1);
    assert.equal(existsSync(join(dataDir, 'mynet')), false, 'DEL/CHECK created the network directory');
    // with a store in place, DEL still releases
    assert.equal((await hl.call('ADD', conf)).code, 0);
    assert.equal((await hl.call('DEL', conf)).code, 0);
    assert.deepEqual(reservations(join(dataDir, 'mynet')), {});
  });

  test('whitespace in the container ID is trimmed in the file (in-process; skel rejects it on the wire)', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    const base: RequestBase = {
      command: 'ADD',
      containerId: '   dummy\n ',
      netns: '/x',
      ifName: 'eth0',
      args: '',
      path: [],
      stdin: new Uint8Array(),
      config: conf as never,
      cniVersion: '1.1.0',
      env: {},
      log: { debug() {}, info() {}, warn() {}, error() {} },
    };
    const res = await plugin.add!(decodeRequest(plugin, base));
    assert.equal(res.ips![0]!.address, '10.1.2.2/24');
    assert.equal(readFileSync(join(tmp.path, 'mynet', '10.1.2.2'), 'latin1'), 'dummy\r\neth0');
    await plugin.check!(decodeRequest(plugin, { ...base, command: 'CHECK' }));
    await plugin.del!(decodeRequest(plugin, { ...base, command: 'DEL' }));
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {});
  });

  test('no "Error retrieving last reserved ip" output on first allocation', async () => {
    using tmp = tempDir();
    const r = await hl.call('ADD', net(tmp.path, { subnet: '10.1.2.0/24' }));
    assert.equal(r.code, 0);
    assert.doesNotMatch(r.stderr, /Error retrieving last reserved ip/);
  });

  test('CHECK succeeds iff a reservation exists', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    const miss = await hl.call('CHECK', conf);
    assert.deepEqual(miss.json, {
      code: 999,
      msg: 'host-local: Failed to find address added by container dummy',
    });
    await hl.call('ADD', conf);
    assert.equal((await hl.call('CHECK', conf)).code, 0);
    assert.equal((await hl.call('CHECK', conf, { ifName: 'eth1' })).code, 1);
  });
});

describe('DEL by the addresses of the prevResult', () => {
  const prevOf = (...addrs: string[]) => ({
    cniVersion: '1.1.0',
    ips: addrs.map((address) => ({ address })),
  });
  /** A store of `others` reservations of other containers plus this container's, at the given addresses. */
  const fill = (dir: string, others: number, mine: Record<string, string>) => {
    mkdirSync(dir, { recursive: true });
    for (let i = 0; i < others; i++)
      writeFileSync(join(dir, `10.1.${i >> 8}.${(i & 255) + 10}`), `c${i}\r\neth0`);
    for (const [ip, content] of Object.entries(mine)) writeFileSync(join(dir, ip), content);
  };

  test('a prevResult naming the files of this attachment: only those are read and removed, the directory is not listed', () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    fill(dir, 200, { '10.1.9.2': 'dummy\r\neth0', '2001:db8::2': 'dummy\r\neth0' });
    const conf = net(
      tmp.path,
      { ranges: [[{ subnet: '10.1.0.0/16' }], [{ subnet: '2001:db8::/64' }]] },
      {
        prevResult: prevOf('10.1.9.2/16', '2001:db8::2/64'),
      },
    );
    // the built executable under strace: no getdents64 (no listing), one open of a reservation file per address
    const bin = ourHostLocal();
    if (bin.kind !== 'binary') return; // the syscall trace needs the executable (npm run build)
    const trace = join(tmp.path, 'trace');
    const r = spawnSync(
      'strace',
      ['-f', '-qq', '-o', trace, '-e', 'trace=getdents64,openat', (bin.target as { binary: string }).binary],
      {
        input: JSON.stringify(conf),
        env: { ...ipamEnv('DEL', 'dummy'), CNI_IFNAME: 'eth0' },
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    const lines = readFileSync(trace, 'utf8').split('\n');
    assert.deepEqual(
      lines.filter((l) => l.includes('getdents64')),
      [],
      'the store directory is not listed',
    );
    const opened = lines.filter(
      (l) => /openat\(.*\/proc\/self\/fd\/\d+\/[0-9a-f.:]+"/.test(l) && !l.includes('= -1'),
    );
    assert.equal(opened.length, 2, opened.join('\n'));
    const left = reservations(dir);
    assert.equal(Object.keys(left).length, 200);
    assert.ok(!('10.1.9.2' in left) && !('2001:db8::2' in left));
  });

  test('in-process: the same release, and stale temp files are left to the next scan (no listing happened)', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    fill(dir, 20, { '10.1.9.2': 'dummy\r\neth0' });
    writeFileSync(join(dir, '.cnikit-999999-1.tmp'), 'x');
    const conf = net(tmp.path, { subnet: '10.1.0.0/16' }, { prevResult: prevOf('10.1.9.2/16') });
    assert.equal((await hl.call('DEL', conf)).code, 0);
    assert.ok(!existsSync(join(dir, '10.1.9.2')));
    assert.ok(existsSync(join(dir, '.cnikit-999999-1.tmp')), 'a scan would have removed it');
    assert.equal(Object.keys(reservations(dir)).length, 21);
  });

  test('falls back to the scan when a named file belongs to another container, is missing, or a range set has no address', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    const two = { ranges: [[{ subnet: '10.1.0.0/16' }], [{ subnet: '2001:db8::/64' }]] };
    // prevResult names another container's address: kept; ours (elsewhere) found by the scan
    fill(dir, 3, { '10.1.9.2': 'dummy\r\neth0' });
    let r = await hl.call(
      'DEL',
      net(tmp.path, { subnet: '10.1.0.0/16' }, { prevResult: prevOf('10.1.0.10/16') }),
    );
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(reservations(dir)).sort(), ['10.1.0.10', '10.1.0.11', '10.1.0.12']);
    // prevResult names only the v4 address of a dual-stack attachment: both go (scan)
    writeFileSync(join(dir, '10.1.9.2'), 'dummy\r\neth0');
    writeFileSync(join(dir, '2001:db8::2'), 'dummy\r\neth0');
    r = await hl.call('DEL', net(tmp.path, two, { prevResult: prevOf('10.1.9.2/16') }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(reservations(dir)).sort(), ['10.1.0.10', '10.1.0.11', '10.1.0.12']);
    // a legacy ID-only file named by the prevResult: the scan removes it like the reference
    writeFileSync(join(dir, '10.1.9.3'), 'dummy');
    r = await hl.call('DEL', net(tmp.path, { subnet: '10.1.0.0/16' }, { prevResult: prevOf('10.1.9.3/16') }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(reservations(dir)).sort(), ['10.1.0.10', '10.1.0.11', '10.1.0.12']);
    // an address that is not a file (a directory in its place): not read, the scan releases nothing else
    mkdirSync(join(dir, '10.1.9.4'));
    r = await hl.call('DEL', net(tmp.path, { subnet: '10.1.0.0/16' }, { prevResult: prevOf('10.1.9.4/16') }));
    assert.equal(r.code, 0, r.stdout);
    assert.ok(existsSync(join(dir, '10.1.9.4')));
  });
});

describe('requested IPs', () => {
  test('custom IP via CNI_ARGS (with and without prefix)', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('ADD', conf, { args: 'IP=10.1.2.88' })).json.ips[0].address, '10.1.2.88/24');
    assert.equal(
      (
        await hl.call('ADD', conf, {
          containerId: 'b',
          args: 'IgnoreUnknown=1;IP=10.1.2.89/16;K8S_POD_NAME=x',
        })
      ).json.ips[0].address,
      '10.1.2.89/24',
    );
    assert.equal(readFileSync(join(tmp.path, 'mynet', 'last_reserved_ip.0'), 'latin1'), '10.1.2.89');
  });

  test('CNI_ARGS errors keep the reference text', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.deepEqual((await hl.call('ADD', conf, { args: 'IP=foo' })).json, {
      code: 999,
      msg: 'ARGS: error parsing value of pair "IP=foo": invalid IP address foo',
    });
    assert.deepEqual((await hl.call('ADD', conf, { args: 'FOO=bar' })).json, {
      code: 999,
      msg: 'ARGS: unknown args ["FOO=bar"]',
    });
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {});
  });

  test('custom IPs across multiple ranges, v4 + v6, from args.cni.ips and runtimeConfig.ips', async () => {
    using tmp = tempDir();
    const conf = {
      ...net(tmp.path, {
        ranges: [
          [{ subnet: '10.1.2.0/24' }, { subnet: '10.1.3.0/24' }],
          [{ subnet: '11.1.2.0/24' }],
          [{ subnet: '2001:db8:1::/64' }],
        ],
      }),
      args: { cni: { ips: ['10.1.3.11/24', '2001:db8:1::11'] } },
      runtimeConfig: { ips: ['11.1.2.11'] },
    };
    const r = await hl.call('ADD', conf);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(
      r.json.ips.map((x: { address: string }) => x.address),
      ['10.1.3.11/24', '11.1.2.11/24', '2001:db8:1::11/64'],
    );
  });

  test('fails when a requested IP cannot be used, releasing everything', async () => {
    using tmp = tempDir();
    const conf = {
      ...net(tmp.path, { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '2001:db8:1::/64' }]] }),
      args: { cni: { ips: ['10.1.2.88', '10.1.2.99', '12.1.1.1'] } },
    };
    const r = await hl.call('ADD', conf);
    assert.deepEqual(r.json, { code: 999, msg: 'failed to allocate all requested IPs: 10.1.2.99 12.1.1.1' });
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {});
  });

  test('requested gateway / taken / out of range', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '192.168.1.0/29' });
    assert.deepEqual((await hl.call('ADD', conf, { args: 'IP=192.168.1.1' })).json, {
      code: 999,
      msg: "failed to allocate for range 0: requested ip 192.168.1.1 is subnet's gateway",
    });
    assert.equal((await hl.call('ADD', conf, { args: 'IP=192.168.1.5' })).code, 0);
    assert.deepEqual((await hl.call('ADD', conf, { containerId: 'b', args: 'IP=192.168.1.5' })).json, {
      code: 999,
      msg: 'failed to allocate for range 0: requested IP address 192.168.1.5 is not available in range set 192.168.1.1-192.168.1.6',
    });
    // a requested IP outside every set is "not fulfilled"
    assert.deepEqual((await hl.call('ADD', conf, { containerId: 'c', args: 'IP=192.168.1.7' })).json, {
      code: 999,
      msg: 'failed to allocate all requested IPs: 192.168.1.7',
    });
  });

  test('an empty args.cni.ips entry is rejected like the reference', async () => {
    using tmp = tempDir();
    const conf = { ...net(tmp.path, { subnet: '10.1.2.0/24' }), args: { cni: { ips: [''] } } };
    const r = await hl.call('ADD', conf);
    assert.equal(r.json.msg, 'cannot understand ip: IP <nil> not v4 nor v6');
  });
});

describe('round-robin allocation table (reference allocator_test.go)', () => {
  const cases: Array<{ subnets: string[]; ipmap?: string[]; lastIP?: string; expect: string }> = [
    { subnets: ['10.0.0.0/29'], expect: '10.0.0.2' },
    { subnets: ['2001:db8:1::0/64'], expect: '2001:db8:1::2' },
    { subnets: ['10.0.0.0/30'], expect: '10.0.0.2' },
    { subnets: ['10.0.0.0/29'], ipmap: ['10.0.0.2'], expect: '10.0.0.3' },
    { subnets: ['10.0.0.0/29'], lastIP: '10.0.0.5', expect: '10.0.0.6' },
    { subnets: ['10.0.0.0/29'], ipmap: ['10.0.0.4', '10.0.0.5'], lastIP: '10.0.0.3', expect: '10.0.0.6' },
    { subnets: ['10.0.0.0/29'], ipmap: ['10.0.0.6'], lastIP: '10.0.0.5', expect: '10.0.0.2' },
    { subnets: ['10.0.0.0/29'], ipmap: ['10.0.0.2'], lastIP: '10.0.0.128', expect: '10.0.0.3' },
    {
      subnets: ['10.0.0.0/29'],
      ipmap: ['10.0.0.2', '10.0.0.4', '10.0.0.5', '10.0.0.6'],
      lastIP: '10.0.0.3',
      expect: '10.0.0.3',
    },
    { subnets: ['10.0.0.0/30', '10.0.1.0/30'], expect: '10.0.0.2' },
    { subnets: ['10.0.0.0/30', '10.0.1.0/30'], lastIP: '10.0.0.2', expect: '10.0.1.2' },
    { subnets: ['10.0.0.0/30', '10.0.1.0/30', '10.0.2.0/30'], lastIP: '10.0.2.2', expect: '10.0.0.2' },
  ];
  cases.forEach((tc, idx) => {
    test(`case ${idx}: ${tc.subnets.join(',')} ipmap=[${tc.ipmap ?? ''}] last=${tc.lastIP ?? ''} → ${tc.expect}`, async () => {
      using tmp = tempDir();
      const dir = join(tmp.path, 'mynet');
      mkdirSync(dir, { recursive: true });
      for (const ip of tc.ipmap ?? []) writeFileSync(join(dir, ip), 'id');
      if (tc.lastIP) writeFileSync(join(dir, 'last_reserved_ip.0'), tc.lastIP);
      const r = await hl.call('ADD', net(tmp.path, { ranges: [tc.subnets.map((subnet) => ({ subnet }))] }), {
        containerId: 'ID',
      });
      assert.equal(r.code, 0, r.stdout);
      assert.equal(r.json.ips[0].address.split('/')[0], tc.expect);
    });
  });

  const full: Array<{ subnets: string[]; ipmap: string[]; set: string; size: number }> = [
    { subnets: ['10.0.0.0/30'], ipmap: ['10.0.0.2'], set: '10.0.0.1-10.0.0.2', size: 1 },
    {
      subnets: ['10.0.0.0/29'],
      ipmap: ['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.6'],
      set: '10.0.0.1-10.0.0.6',
      size: 5,
    },
    {
      subnets: ['10.0.0.0/30', '10.0.1.0/30'],
      ipmap: ['10.0.0.2', '10.0.1.2'],
      set: '10.0.0.1-10.0.0.2,10.0.1.1-10.0.1.2',
      size: 2,
    },
  ];
  full.forEach((tc, idx) => {
    test(`out of IPs ${idx}: meaningful error (the reference's msg; details name the set and its size); STATUS 50`, async () => {
      using tmp = tempDir();
      const dir = join(tmp.path, 'mynet');
      mkdirSync(dir, { recursive: true });
      for (const ip of tc.ipmap) writeFileSync(join(dir, ip), 'id');
      const conf = net(tmp.path, { ranges: [tc.subnets.map((subnet) => ({ subnet }))] });
      const r = await hl.call('ADD', conf, { containerId: 'ID' });
      assert.deepEqual(r.json, {
        code: 999,
        msg: `failed to allocate for range 0: no IP addresses available in range set: ${tc.set}`,
        details: `range set ${tc.set} has ${tc.size} addresses, all allocated`,
      });
      assert.deepEqual(Object.keys(reservations(dir)).sort(), [...tc.ipmap].sort());
      const st = await hl.call('STATUS', conf);
      assert.deepEqual(st.json, {
        code: 50,
        msg: `host-local: no IP addresses available in range set ${tc.set} (${tc.size} addresses, all allocated)`,
      });
      // one address free again: STATUS succeeds
      rmSync(join(dir, tc.ipmap[0]!));
      assert.equal((await hl.call('STATUS', conf)).code, 0);
    });
  });

  test('never allocates the broadcast address; the 6th ADD in a /29 fails', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '192.168.1.0/29' });
    for (let i = 2; i < 7; i++) {
      assert.equal(
        (await hl.call('ADD', conf, { containerId: `ID${i}` })).json.ips[0].address,
        `192.168.1.${i}/29`,
      );
    }
    const r = await hl.call('ADD', conf, { containerId: 'ID8' });
    assert.equal(r.code, 1);
    assert.match(r.json.msg, /no IP addresses available in range set: 192\.168\.1\.1-192\.168\.1\.6$/);
  });

  test('round-robin after release: .2 released, next is .3', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '192.168.1.0/29' });
    assert.equal((await hl.call('ADD', conf)).json.ips[0].address, '192.168.1.2/29');
    await hl.call('DEL', conf);
    assert.equal((await hl.call('ADD', conf)).json.ips[0].address, '192.168.1.3/29');
  });

  test('last reserved IP at the end of range 1 continues in range 2; rangeStart may equal the network', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'last_reserved_ip.0'), '192.168.1.3');
    const conf = net(tmp.path, {
      ranges: [
        [
          {
            subnet: '192.168.1.0/30',
            rangeStart: '192.168.1.1',
            rangeEnd: '192.168.1.3',
            gateway: '192.168.1.9',
          },
          {
            subnet: '192.168.2.0/30',
            rangeStart: '192.168.2.1',
            rangeEnd: '192.168.2.3',
            gateway: '192.168.2.9',
          },
        ],
      ],
    });
    assert.equal((await hl.call('ADD', conf)).json.ips[0].address, '192.168.2.1/30');
  });

  test('a failed ADD changes nothing: no reservation, last_reserved_ip not advanced (the reference advances it)', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    // the allocation of range set 0 succeeds, then the requested address outside every range fails the ADD
    const conf = { ...net(tmp.path, { subnet: '10.1.2.0/24' }), args: { cni: { ips: ['10.9.9.9'] } } };
    const r = await hl.call('ADD', conf);
    assert.equal(r.code, 1);
    assert.match(r.json.msg, /failed to allocate all requested IPs: 10\.9\.9\.9/);
    assert.ok(!existsSync(join(dir, 'last_reserved_ip.0')), 'no last_reserved_ip written');
    assert.deepEqual(reservations(dir), {});
    // with an existing value: unchanged by the failed ADD, advanced by the next successful one
    writeFileSync(join(dir, 'last_reserved_ip.0'), '10.1.2.7');
    assert.equal((await hl.call('ADD', conf)).code, 1);
    assert.equal(readFileSync(join(dir, 'last_reserved_ip.0'), 'latin1'), '10.1.2.7');
    const ok = await hl.call('ADD', net(tmp.path, { subnet: '10.1.2.0/24' }));
    assert.equal(ok.json.ips[0].address, '10.1.2.8/24');
    assert.equal(readFileSync(join(dir, 'last_reserved_ip.0'), 'latin1'), '10.1.2.8');
  });
});

describe('large ranges', () => {
  test('/8 and /64: first, round-robin and wrap at the end, without iterating the range', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { ranges: [[{ subnet: '10.0.0.0/8' }], [{ subnet: '2001:db8::/64' }]] });
    const dir = join(tmp.path, 'mynet');
    const t0 = performance.now();
    const r = await hl.call('ADD', conf);
    assert.deepEqual(
      r.json.ips.map((x: { address: string }) => x.address),
      ['10.0.0.2/8', '2001:db8::2/64'],
    );
    writeFileSync(join(dir, 'last_reserved_ip.0'), '10.255.255.253');
    writeFileSync(join(dir, 'last_reserved_ip.1'), '2001:db8::ffff:ffff:ffff:fffe');
    const r2 = await hl.call('ADD', conf, { containerId: 'b' });
    assert.deepEqual(
      r2.json.ips.map((x: { address: string }) => x.address),
      ['10.255.255.254/8', '2001:db8::ffff:ffff:ffff:ffff/64'],
    );
    // wraps to the start: .1 is the gateway, .2 taken by "dummy", so .3
    const r3 = await hl.call('ADD', conf, { containerId: 'c' });
    assert.deepEqual(
      r3.json.ips.map((x: { address: string }) => x.address),
      ['10.0.0.3/8', '2001:db8::3/64'],
    );
    assert.ok(performance.now() - t0 < 2000);
  });

  test('a /8 with 300 consecutive taken addresses allocates the next free one', async () => {
    using tmp = tempDir();
    const dir = join(tmp.path, 'mynet');
    mkdirSync(dir, { recursive: true });
    for (let i = 2; i < 302; i++) writeFileSync(join(dir, `10.0.${i >> 8}.${i & 255}`), `c${i}\r\neth0`);
    const r = await hl.call('ADD', net(tmp.path, { subnet: '10.0.0.0/8' }));
    assert.equal(r.json.ips[0].address, '10.0.1.46/8');
  });
});

describe('configuration (reference config_test.go) and validation', () => {
  test('old-style config (single range keys)', async () => {
    using tmp = tempDir();
    const r = await hl.call(
      'ADD',
      net(tmp.path, {
        subnet: '10.1.2.0/24',
        rangeStart: '10.1.2.9',
        rangeEnd: '10.1.2.20',
        gateway: '10.1.2.30',
      }),
    );
    assert.deepEqual(r.json.ips, [{ address: '10.1.2.9/24', gateway: '10.1.2.30' }]);
  });

  test('range-set order: runtime ipRanges, then legacy subnet, then ranges (rangeIDs follow)', async () => {
    using tmp = tempDir();
    const conf = {
      ...net(tmp.path, { subnet: '10.1.2.0/24', ranges: [[{ subnet: '11.1.2.0/24' }]] }),
      runtimeConfig: { ipRanges: [[{ subnet: '12.1.3.0/24' }]] },
    };
    const r = await hl.call('ADD', conf);
    assert.deepEqual(
      r.json.ips.map((x: { address: string }) => x.address),
      ['12.1.3.2/24', '10.1.2.2/24', '11.1.2.2/24'],
    );
    const files = storeFiles(join(tmp.path, 'mynet'));
    assert.equal(files['last_reserved_ip.0'], '12.1.3.2');
    assert.equal(files['last_reserved_ip.1'], '10.1.2.2');
    assert.equal(files['last_reserved_ip.2'], '11.1.2.2');
  });

  const invalid: Array<[string, Record<string, unknown>, string, string?]> = [
    ['no ipam key', {}, "IPAM config missing 'ipam' key"],
    ['no ranges', { ipam: {} }, 'no IP ranges specified'],
    [
      'overlap between sets',
      {
        ipam: {
          ranges: [[{ subnet: '10.1.2.0/24' }, { subnet: '10.2.2.0/24' }], [{ subnet: '10.1.2.0/24' }]],
        },
      },
      'range set 0 overlaps with 1',
    ],
    [
      'overlap within a set',
      {
        ipam: {
          ranges: [
            [{ subnet: '10.1.2.0/24' }, { subnet: '10.2.2.0/24' }],
            [
              { subnet: '10.1.4.0/24' },
              { subnet: '10.1.6.0/24' },
              { subnet: '10.1.8.0/24' },
              { subnet: '10.1.6.0/24' },
            ],
          ],
        },
      },
      'invalid range set 1: subnets 10.1.6.1-10.1.6.254 and 10.1.6.1-10.1.6.254 overlap',
    ],
    [
      'mixed families',
      { ipam: { ranges: [[{ subnet: '10.1.2.0/24' }, { subnet: '2001:db8:5::/64' }]] } },
      'invalid range set 0: mixed address families',
    ],
    ['empty set', { ipam: { ranges: [[]] } }, 'invalid range set 0: empty range set'],
    [
      'too many ranges for 0.2.0',
      { cniVersion: '0.2.0', ipam: { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '10.1.3.0/24' }]] } },
      'CNI version 0.2.0 does not support more than 1 address per family',
    ],
    [
      'too small',
      { ipam: { subnet: '10.1.2.0/31' } },
      'invalid range set 0: Network 10.1.2.0/31 too small to allocate from',
    ],
    [
      'host bits',
      { ipam: { subnet: '10.1.2.5/24' } },
      'invalid range set 0: Network has host bits set. For a subnet mask of length 24 the network address is 10.1.2.0',
    ],
    [
      'rangeStart outside',
      { ipam: { subnet: '10.1.2.0/24', rangeStart: '10.1.3.1' } },
      'invalid range set 0: RangeStart 10.1.3.1 not in network 10.1.2.0/24',
    ],
    [
      'rangeEnd outside',
      { ipam: { subnet: '10.1.2.0/24', rangeEnd: '10.1.3.1' } },
      'invalid range set 0: RangeEnd 10.1.3.1 not in network 10.1.2.0/24',
    ],
    ['absurd prefix', { ipam: { subnet: '10.1.2.0/99' } }, 'invalid CIDR address: 10.1.2.0/99'],
    [
      'negative prefix',
      { ipam: { ranges: [[{ subnet: '10.1.2.0/-1' }]] } },
      'invalid CIDR address: 10.1.2.0/-1',
    ],
    ['bad gateway', { ipam: { subnet: '10.1.2.0/24', gateway: 'nope' } }, 'invalid IP address: nope'],
    [
      'subnet missing in a range',
      { ipam: { ranges: [[{ rangeStart: '10.1.2.3' }]] } },
      'invalid range set 0: IP <nil> not v4 nor v6',
    ],
    [
      'bad runtimeConfig.ips',
      { runtimeConfig: { ips: ['10.1.2.300'] }, ipam: { subnet: '10.1.2.0/24' } },
      'invalid IP address 10.1.2.300',
    ],
    [
      'mapped subnet',
      { ipam: { subnet: '::ffff:10.0.0.0/104' } },
      'invalid range set 0: IPNet IP and Mask version mismatch',
    ],
    ['ranges not an array', { ipam: { ranges: 'x' } }, 'ipam.ranges: expected array, got string'],
    ['network name escaping the store', { name: '..', ipam: { subnet: '10.1.2.0/24' } }, '', 'name'],
    [
      'relative dataDir',
      { ipam: { subnet: '10.1.2.0/24', dataDir: 'rel/dir' } },
      'invalid dataDir "rel/dir": must be an absolute path without ".." components',
    ],
    [
      'dataDir with ..',
      { ipam: { subnet: '10.1.2.0/24', dataDir: '/tmp/../etc' } },
      'invalid dataDir "/tmp/../etc": must be an absolute path without ".." components',
    ],
  ];
  for (const [name, conf, msg, kind] of invalid) {
    test(`rejects: ${name}`, async () => {
      using tmp = tempDir();
      const base = net(tmp.path, {});
      const ipam = conf.ipam === undefined ? undefined : { ...base.ipam, ...(conf.ipam as object) };
      const full: Record<string, unknown> = { ...base, ...conf };
      if (ipam) full.ipam = ipam;
      else delete full.ipam;
      const r = await hl.call('ADD', full);
      assert.equal(r.code, 1);
      if (kind === 'name') {
        assert.ok([4, 7].includes(r.json.code), r.stdout);
      } else {
        assert.equal(r.json.msg, msg);
        if (!msg.startsWith('ARGS')) assert.equal(r.json.code, 7, r.stdout);
      }
      // nothing written anywhere
      assert.deepEqual(storeFiles(tmp.path), {});
    });
  }

  test('one v4 + one v6 set is fine for 0.2.0', async () => {
    using tmp = tempDir();
    const r = await hl.call(
      'ADD',
      net(
        tmp.path,
        { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '2001:db8:1::/64' }]] },
        { cniVersion: '0.2.0' },
      ),
    );
    assert.equal(r.code, 0, r.stdout);
    assert.equal(r.json.ip4.ip, '10.1.2.2/24');
  });

  test('route 1.1.0 fields pass through; zero mtu/advmss/priority omitted like Go', async () => {
    using tmp = tempDir();
    const routes = [
      { dst: '10.9.0.0/16', gw: '10.1.2.1', mtu: 1400, advmss: 1360, priority: 10, table: 100, scope: 0 },
    ];
    const r = await hl.call('ADD', net(tmp.path, { subnet: '10.1.2.0/24', routes }));
    assert.deepEqual(r.json.routes, routes);
    const zero = [{ dst: '10.8.0.0/16', mtu: 0, advmss: 0, priority: 0, table: 0 }];
    const r0 = await hl.call('ADD', net(tmp.path, { subnet: '10.1.2.0/24', routes: zero }), {
      containerId: 'b',
    });
    assert.deepEqual(r0.json.routes, [{ dst: '10.8.0.0/16', table: 0 }]);
  });

  test('resolvConf: comments ignored, all fields, missing file is an error', async () => {
    using tmp = tempDir();
    const rc = join(tmp.path, 'resolv.conf');
    writeFileSync(
      rc,
      '# comment\n;other\nnameserver 192.0.2.0\nnameserver 192.0.2.1\n  domain example.com\nsearch a.example.com   b.example.com\noptions ndots:5 rotate\noptions timeout:1\ndomain example.net\nnameserver\n',
    );
    const r = await hl.call('ADD', net(tmp.path, { subnet: '10.1.2.0/24', resolvConf: rc }));
    assert.deepEqual(r.json.dns, {
      nameservers: ['192.0.2.0', '192.0.2.1'],
      domain: 'example.net',
      search: ['a.example.com', 'b.example.com'],
      options: ['ndots:5', 'rotate', 'timeout:1'],
    });
    const missing = await hl.call(
      'ADD',
      net(tmp.path, { subnet: '10.1.2.0/24', resolvConf: join(tmp.path, 'nope') }),
      { containerId: 'b' },
    );
    assert.equal(missing.json.msg, `open ${join(tmp.path, 'nope')}: no such file or directory`);
  });
});

describe('GC (spec 1.1.0)', () => {
  test('keeps exactly the valid attachments, never touches other networks', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '2001:db8::/64' }]] });
    const other = { ...net(tmp.path, { subnet: '10.9.0.0/24' }), name: 'othernet' };
    for (const id of ['a', 'b', 'c']) {
      assert.equal((await hl.call('ADD', conf, { containerId: id, ifName: 'eth0' })).code, 0);
      assert.equal((await hl.call('ADD', conf, { containerId: id, ifName: 'eth1' })).code, 0);
    }
    assert.equal((await hl.call('ADD', other, { containerId: 'z' })).code, 0);
    const dir = join(tmp.path, 'mynet');
    writeFileSync(join(dir, '10.1.2.200'), 'b'); // legacy file of a valid container: kept
    writeFileSync(join(dir, '10.1.2.201'), 'gone'); // legacy file of a gone container: removed
    writeFileSync(join(dir, '10.1.2.202'), ''); // empty file (reference crash bug): removed
    writeFileSync(join(dir, 'notes.txt'), 'x'); // not a reservation: untouched
    const before = reservations(dir);
    const r = await hl.call('GC', {
      ...conf,
      'cni.dev/valid-attachments': [
        { containerID: 'a', ifname: 'eth1' },
        { containerID: 'b', ifname: 'eth0' },
      ],
    });
    assert.equal(r.code, 0, r.stdout);
    assert.equal(r.stdout, '');
    const after = reservations(dir);
    const expected = Object.fromEntries(
      Object.entries(before).filter(
        ([name, v]) => v === 'a\r\neth1' || v === 'b\r\neth0' || v === 'b' || name === 'notes.txt',
      ),
    );
    assert.deepEqual(after, expected);
    assert.equal(Object.keys(after).length, 2 * 2 + 2);
    assert.deepEqual(reservations(join(tmp.path, 'othernet')), { '10.9.0.2': 'z\r\neth0' });
  });

  test('without valid attachments key nothing is removed; missing store dir is fine', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    assert.equal((await hl.call('GC', conf)).code, 0);
    assert.equal(existsSync(join(tmp.path, 'mynet')), false);
    await hl.call('ADD', conf);
    const r = await hl.call('GC', conf);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'dummy\r\neth0' });
    const empty = await hl.call('GC', { ...conf, 'cni.dev/valid-attachments': [] });
    assert.equal(empty.code, 0);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {});
  });

  test('"cni.dev/valid-attachments": null removes nothing (same as a missing key)', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    await hl.call('ADD', conf);
    const r = await hl.call('GC', { ...conf, 'cni.dev/valid-attachments': null });
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'dummy\r\neth0' });
    const both = await hl.call('GC', {
      ...conf,
      'cni.dev/valid-attachments': null,
      'cni.dev/attachments': null,
    });
    assert.equal(both.code, 0, both.stdout);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'dummy\r\neth0' });
  });

  test('the old key cni.dev/attachments is used when cni.dev/valid-attachments is absent', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    await hl.call('ADD', conf, { containerId: 'keep' });
    await hl.call('ADD', conf, { containerId: 'gone' });
    const r = await hl.call('GC', {
      ...conf,
      'cni.dev/attachments': [{ containerID: 'keep', ifname: 'eth0' }],
    });
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'keep\r\neth0' });
  });

  test('the key is matched case-insensitively, like skel and Go', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    await hl.call('ADD', conf, { containerId: 'keep' });
    await hl.call('ADD', conf, { containerId: 'gone' });
    const r = await hl.call('GC', {
      ...conf,
      'CNI.dev/Valid-Attachments': [{ containerID: 'keep', ifname: 'eth0' }],
    });
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'keep\r\neth0' });
  });
});

describe('STATUS (spec 1.1.0)', () => {
  test('code 50 as soon as one range set of several is full (an ADD needs one address of each)', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '10.9.0.0/30' }]] });
    assert.equal((await hl.call('ADD', conf, { containerId: 'a' })).code, 0);
    const st = await hl.call('STATUS', conf);
    assert.equal(st.json.code, 50);
    assert.match(st.json.msg, /range set 10\.9\.0\.1-10\.9\.0\.2 \(1 addresses, all allocated\)/);
    // IPv6: sizes beyond 2^53 are counted exactly
    const v6 = net(tmp.path, { subnet: 'fd00::/64' }, { name: 'v6' });
    assert.equal((await hl.call('STATUS', v6)).code, 0);
  });

  test('succeeds with a usable store (created if missing)', async () => {
    using tmp = tempDir();
    const r = await hl.call('STATUS', net(tmp.path, { subnet: '10.1.2.0/24' }));
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(storeFiles(join(tmp.path, 'mynet'))), ['lock']);
  });

  test('code 50 when the store cannot be created', async () => {
    using tmp = tempDir();
    writeFileSync(join(tmp.path, 'file'), '');
    const r = await hl.call('STATUS', net(join(tmp.path, 'file'), { subnet: '10.1.2.0/24' }));
    assert.equal(r.json.code, 50);
    assert.match(r.json.msg, /^host-local store is not usable: mkdir .*: not a directory$/);
  });

  test('code 50 when the store path is not a directory', async () => {
    using tmp = tempDir();
    writeFileSync(join(tmp.path, 'mynet'), '');
    const r = await hl.call('STATUS', net(tmp.path, { subnet: '10.1.2.0/24' }));
    assert.equal(r.json.code, 50);
    assert.match(r.json.msg, /^host-local store is not usable: /);
  });

  test('invalid config fails STATUS with the config error', async () => {
    using tmp = tempDir();
    const r = await hl.call('STATUS', net(tmp.path, { subnet: '10.1.2.0/31' }));
    assert.equal(r.json.code, 7);
  });
});

describe('hostile input (handlers called directly, past skel validation)', () => {
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  function req(config: Record<string, unknown>, containerId = 'c1', command: RequestBase['command'] = 'ADD') {
    return decodeRequest(plugin, {
      command,
      containerId,
      netns: '/x',
      ifName: 'eth0',
      args: '',
      path: [],
      stdin: new Uint8Array(),
      config: config as never,
      cniVersion: '1.1.0',
      env: {},
      log: quiet,
    });
  }
  for (const name of ['..', '.', '../escape', 'a/b', '']) {
    test(`network name ${JSON.stringify(name)} is rejected, nothing written`, async () => {
      using tmp = tempDir();
      const conf = { ...net(join(tmp.path, 'data'), { subnet: '10.1.2.0/24' }), name };
      const verbs = {
        ADD: plugin.add!,
        DEL: plugin.del!,
        CHECK: plugin.check!,
        GC: plugin.gc!,
        STATUS: plugin.status!,
      };
      for (const [command, h] of Object.entries(verbs)) {
        await assert.rejects(
          async () => h(req(conf, 'c1', command as RequestBase['command'])),
          (e: { code: number; msg: string }) => {
            assert.ok(e.code === 7 || e.code === 50, e.msg);
            assert.match(e.msg, /invalid network name/);
            return true;
          },
        );
      }
      assert.deepEqual(storeFiles(tmp.path), {});
    });
  }
  test('a container ID made only of whitespace never matches other reservations', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.1.2.0/24' });
    await plugin.add!(req(conf, 'c1'));
    await plugin.del!(req(conf, ' \n ', 'DEL'));
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), { '10.1.2.2': 'c1\r\neth0' });
  });
  test('a huge /1 IPv4 and ::/1 IPv6 range allocate instantly', async () => {
    using tmp = tempDir();
    const t0 = performance.now();
    const r = await hl.call(
      'ADD',
      net(tmp.path, { ranges: [[{ subnet: '0.0.0.0/1' }], [{ subnet: '::/1' }]] }),
    );
    assert.deepEqual(
      r.json.ips.map((x: { address: string }) => x.address),
      ['0.0.0.2/1', '::2/1'],
    );
    assert.ok(performance.now() - t0 < 1000);
  });
});

// Not a concurrency test: the handlers are synchronous, so these calls run one after another.
// Concurrency across processes (ours and Go's) is covered by process.test.ts.
describe('many in-process calls on one store', () => {
  test('32 sequential in-process ADDs on one store get 32 distinct addresses; DELs empty it', async () => {
    using tmp = tempDir();
    const conf = net(tmp.path, { subnet: '10.3.0.0/24' });
    const rs = await Promise.all(
      Array.from({ length: 32 }, (_, i) => hl.call('ADD', conf, { containerId: `p${i}` })),
    );
    const addrs = new Set(rs.map((r) => r.json.ips[0].address));
    assert.equal(addrs.size, 32);
    assert.equal(Object.keys(reservations(join(tmp.path, 'mynet'))).length, 32);
    await Promise.all(Array.from({ length: 32 }, (_, i) => hl.call('DEL', conf, { containerId: `p${i}` })));
    assert.deepEqual(reservations(join(tmp.path, 'mynet')), {});
  });
});

describe('store error text', () => {
  test('goFsError words any errno like Go (strerror, lower case), code 5', () => {
    const busy = Object.assign(new Error('EBUSY: resource busy or locked, open /x'), {
      code: 'EBUSY',
      errno: -16,
    });
    const e = goFsError('open', '/x', busy);
    assert.equal(e.code, 5);
    assert.equal(e.msg, 'open /x: device or resource busy');
    const noent = Object.assign(new Error('ENOENT'), { code: 'ENOENT', errno: -2 });
    assert.equal(goFsError('open', '/y', noent).msg, 'open /y: no such file or directory');
    assert.equal(goFsError('read', '/z', new Error('odd')).msg, 'read /z: odd');
  });
});
