/**
 * host-local as separate processes: concurrency (ours alone, ours mixed with the Go reference on one
 * dataDir), SIGKILL during ADD, and on-disk/output compatibility with the Go reference.
 * Ours runs as dist-bin/host-local when built, else from source (a @cnikit/testing `{ source }` target; exec-helpers.ts).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseIP } from '@cnikit/ip';
import { type CniCommand, tempDir } from '@cnikit/testing';
import { exec, goHostLocal, type Impl, ourHostLocal, reservations, storeFiles } from './testenv.ts';

const go = goHostLocal();
// The Go binary here (Debian 1.1.1) supports spec versions up to 1.0.0.
function conf(dataDir: string, ipam: Record<string, unknown>, name = 'mynet'): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name,
    type: 'bridge',
    ipam: { type: 'host-local', dataDir, ...ipam },
  });
}

function assertStoreInvariant(dir: string): void {
  for (const name of readdirSync(dir)) {
    if (name === 'lock' || name.startsWith('last_reserved_ip.') || name.startsWith('.cnikit-')) continue;
    assert.ok(parseIP(name), `unexpected file ${name}`);
    const content = readFileSync(join(dir, name), 'latin1');
    assert.match(
      content,
      /^c[0-9]+\r\neth0$/,
      `reservation ${name} is incomplete: ${JSON.stringify(content)}`,
    );
  }
}

describe(`concurrency (ours: ${ourHostLocal().kind})`, () => {
  test('64 concurrent ADDs of different containers → 64 distinct addresses; 64 concurrent DELs → empty store', async () => {
    using tmp = tempDir();
    const c = conf(tmp.path, { ranges: [[{ subnet: '10.10.0.0/24' }], [{ subnet: 'fd00:10::/64' }]] });
    const ours = ourHostLocal();
    const adds = await Promise.all(Array.from({ length: 64 }, (_, i) => exec(ours, 'ADD', `c${i}`, c)));
    const v4 = new Set<string>();
    const v6 = new Set<string>();
    for (const [i, r] of adds.entries()) {
      assert.equal(r.code, 0, `ADD c${i}: ${r.stdout} ${r.stderr}`);
      const res = JSON.parse(r.stdout);
      v4.add(res.ips[0].address);
      v6.add(res.ips[1].address);
    }
    assert.equal(v4.size, 64);
    assert.equal(v6.size, 64);
    const dir = join(tmp.path, 'mynet');
    assert.equal(Object.keys(reservations(dir)).length, 128);
    assertStoreInvariant(dir);
    const dels = await Promise.all(Array.from({ length: 64 }, (_, i) => exec(ours, 'DEL', `c${i}`, c)));
    for (const r of dels) assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(storeFiles(dir)).sort(), [
      'last_reserved_ip.0',
      'last_reserved_ip.1',
      'lock',
    ]);
  });

  test('half of the calls by the Go reference on the same dataDir: never one address twice', async () => {
    assert.ok(
      go,
      'Go host-local not installed' + ' (Debian package containernetworking-plugins; .ci/run installs it)',
    );
    using tmp = tempDir();
    const c = conf(tmp.path, { ranges: [[{ subnet: '10.20.0.0/24' }], [{ subnet: 'fd00:20::/64' }]] });
    const impl = (i: number): Impl => (i % 2 === 0 ? ourHostLocal() : go!);
    const adds = await Promise.all(Array.from({ length: 64 }, (_, i) => exec(impl(i), 'ADD', `c${i}`, c)));
    const seen = new Map<string, number>();
    for (const [i, r] of adds.entries()) {
      assert.equal(r.code, 0, `ADD c${i} (${impl(i).kind}): ${r.stdout} ${r.stderr}`);
      for (const ip of JSON.parse(r.stdout).ips) {
        assert.equal(seen.get(ip.address), undefined, `${ip.address} handed out twice`);
        seen.set(ip.address, i);
      }
    }
    assert.equal(seen.size, 128);
    const dir = join(tmp.path, 'mynet');
    const files = reservations(dir);
    assert.equal(Object.keys(files).length, 128);
    for (const [ip, i] of seen) assert.equal(files[ip.split('/')[0]!], `c${i}\r\neth0`);
    // DELs crossed over: Go releases what ours reserved and vice versa
    const dels = await Promise.all(
      Array.from({ length: 64 }, (_, i) => exec(impl(i + 1), 'DEL', `c${i}`, c)),
    );
    for (const r of dels) assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(Object.keys(storeFiles(dir)).sort(), [
      'last_reserved_ip.0',
      'last_reserved_ip.1',
      'lock',
    ]);
  });
});

describe('SIGKILL during ADD', () => {
  test('killed at random times: every reservation is complete, and the next ADD works', async (t) => {
    using tmp = tempDir();
    // 12 range sets → 12 reservations written per ADD, so kills land inside the store work often
    const ranges = Array.from({ length: 12 }, (_, k) => [{ subnet: `10.${30 + k}.0.0/24` }]);
    const c = conf(tmp.path, { ranges });
    const ours = ourHostLocal();
    // calibrate: how long one ADD takes
    const t0 = performance.now();
    const first = await exec(ours, 'ADD', 'c0', c);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const span = Math.max(20, performance.now() - t0);
    const dir = join(tmp.path, 'mynet');
    let killed = 0;
    let midway = 0;
    for (let i = 1; i <= 40; i++) {
      const r = await exec(ours, 'ADD', `c${i}`, c, { timeoutMs: Math.random() * span * 1.2 });
      assertStoreInvariant(dir);
      if (r.signal !== 'SIGKILL') continue;
      killed++;
      // a kill between the first and the last reservation leaves some complete files of this container
      const mine = Object.values(reservations(dir)).filter((v) => v === `c${i}\r\neth0`).length;
      if (mine > 0 && mine < 12) midway++;
    }
    t.diagnostic(`killed ${killed}/40, of which ${midway} in the middle of the store work`);
    assert.ok(killed > 0, 'no process was killed');
    const after = await exec(ours, 'ADD', 'c999', c);
    assert.equal(after.code, 0, after.stdout + after.stderr);
    assert.equal(JSON.parse(after.stdout).ips.length, 12);
    // the locked scan of that ADD removed every stale temp file
    assert.deepEqual(
      readdirSync(dir).filter((n) => n.startsWith('.cnikit-')),
      [],
    );
    assertStoreInvariant(dir);
  });
});

describe('byte compatibility with the Go reference', () => {
  assert.ok(
    go,
    'Go host-local not installed' + ' (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  test('same sequence of calls → same outputs and same file contents', async () => {
    using tmpGo = tempDir('go');
    using tmpOurs = tempDir('ours');
    const resolv = join(tmpGo.path, 'resolv.conf');
    writeFileSync(resolv, 'nameserver 192.0.2.3\nsearch example.com\noptions ndots:2\n');
    const ipam = (dataDir: string) => ({
      resolvConf: resolv,
      ranges: [
        [{ subnet: '10.1.2.0/29' }, { subnet: '10.2.2.0/30', gateway: '10.2.2.2' }],
        [{ subnet: '2001:db8:1::/64', rangeStart: '2001:db8:1::fffe' }],
      ],
      routes: [{ dst: '0.0.0.0/0' }, { dst: '2001:db8:2::0/64', gw: '2001:db8:3::1' }],
      dataDir,
    });
    const steps: Array<[CniCommand, string, string, Record<string, string>?]> = [
      ['ADD', 'a', 'eth0'],
      ['ADD', 'b', 'eth0'],
      ['ADD', 'a', 'eth1'],
      ['ADD', 'a', 'eth0'], // duplicate
      ['CHECK', 'a', 'eth0'],
      ['CHECK', 'z', 'eth0'],
      ['DEL', 'b', 'eth0'],
      ['ADD', 'c', 'eth0', { CNI_ARGS: 'IgnoreUnknown=1;IP=10.1.2.6' }],
      ['ADD', 'd', 'eth0', { CNI_ARGS: 'IP=10.1.2.6' }], // taken
      ['ADD', 'e', 'eth0'],
      ['ADD', 'f', 'eth0'],
      ['ADD', 'g', 'eth0'],
      ['ADD', 'h', 'eth0'], // range set exhausted
      ['DEL', 'a', 'eth0'],
      ['DEL', 'nobody', 'eth0'],
      ['ADD', 'i', 'eth0', { CNI_ARGS: 'IP=nonsense' }],
    ];
    for (const [cmd, id, ifname, extra] of steps) {
      const rGo = await exec(go!, cmd, id, conf(tmpGo.path, ipam(tmpGo.path)), {
        ifName: ifname,
        env: extra,
      });
      const rOurs = await exec(ourHostLocal(), cmd, id, conf(tmpOurs.path, ipam(tmpOurs.path)), {
        ifName: ifname,
        env: extra,
      });
      const what = `${cmd} ${id} ${ifname} ${JSON.stringify(extra ?? {})}`;
      assert.equal(rOurs.code, rGo.code, `${what}: exit status\nGo: ${rGo.stdout}\nours: ${rOurs.stdout}`);
      const jGo = rGo.stdout ? JSON.parse(rGo.stdout) : undefined;
      const jOurs = rOurs.stdout ? JSON.parse(rOurs.stdout) : undefined;
      if (rGo.code === 0) assert.deepEqual(jOurs, jGo, what);
      else assert.equal(jOurs?.msg, jGo?.msg, what);
      const norm = (files: Record<string, string>) => files;
      assert.deepEqual(
        norm(storeFiles(join(tmpOurs.path, 'mynet'))),
        norm(storeFiles(join(tmpGo.path, 'mynet'))),
        `${what}: store contents`,
      );
    }
  });
});

describe('messages identical to the Go reference', () => {
  assert.ok(
    go,
    'Go host-local not installed' + ' (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>?, string?]> = [
    ['no ranges', {}],
    ['too small', { subnet: '10.1.2.0/31' }],
    ['too small v6', { subnet: '2001:db8::/127' }],
    ['host bits', { subnet: '10.1.2.5/24' }],
    ['host bits v6', { subnet: '2001:DB8:24:19ff::/63' }],
    ['mapped', { subnet: '::ffff:10.0.0.0/104' }],
    ['start outside', { subnet: '10.1.2.0/24', rangeStart: '10.1.3.1' }],
    ['end outside', { subnet: '10.1.2.0/24', rangeEnd: '10.1.3.1' }],
    ['start after end', { subnet: '10.1.2.0/24', rangeStart: '10.1.2.50', rangeEnd: '10.1.2.40' }],
    ['end before default start', { subnet: '10.1.2.0/24', rangeEnd: '10.1.2.0' }],
    ['bad prefix', { subnet: '10.1.2.0/33' }],
    ['bad gateway', { subnet: '10.1.2.0/24', gateway: '10.1.2.300' }],
    ['empty set', { ranges: [[]] }],
    ['mixed families', { ranges: [[{ subnet: '10.1.0.0/22' }, { subnet: '2001:db8:5::/64' }]] }],
    ['overlap in set', { ranges: [[{ subnet: '10.1.0.0/22' }, { subnet: '10.1.2.0/24' }]] }],
    ['overlap across sets', { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '10.1.0.0/16' }]] }],
    [
      'overlap legacy vs ranges',
      { subnet: '10.1.2.0/24', ranges: [[{ subnet: '10.1.2.0/24', rangeStart: '10.1.2.100' }]] },
    ],
    ['subnet missing', { ranges: [[{ rangeStart: '10.1.2.3' }]] }],
    [
      '0.2.0 two v4 sets',
      { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: '10.1.3.0/24' }]] },
      undefined,
      '0.2.0',
    ],
    ['requested gateway', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'IP=10.1.2.1' }],
    ['requested outside', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'IP=10.1.3.1' }],
    ['requested mapped text', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'IP=::ffff:10.1.2.77' }],
    ['bad CNI_ARGS IP', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'IP=10.1.2.1/40' }],
    ['CNI_ARGS pair', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'IP=1=2' }],
    ['CNI_ARGS unknown', { subnet: '10.1.2.0/24' }, { CNI_ARGS: 'A=1;B=2' }],
    [
      'runtime ranges first',
      { subnet: '10.1.2.0/24' },
      { runtimeConfig: { ipRanges: [[{ subnet: '10.1.0.0/16' }]] } },
    ],
    [
      'args.cni.ips v4+v6',
      { ranges: [[{ subnet: '10.1.2.0/24' }], [{ subnet: 'fd00::/64' }]] },
      { args: { cni: { ips: ['fd00::99/64', '10.1.2.99'] } } },
    ],
  ];
  for (const [name, ipam, extra, ver] of cases) {
    test(name, async () => {
      using tmpGo = tempDir('go');
      using tmpOurs = tempDir('ours');
      const envExtra: Record<string, string> = {};
      const top: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(extra ?? {})) {
        if (k === 'CNI_ARGS') envExtra[k] = v as string;
        else top[k] = v;
      }
      const mk = (dataDir: string) =>
        JSON.stringify({
          cniVersion: ver ?? '1.0.0',
          name: 'mynet',
          type: 'bridge',
          ...top,
          ipam: { type: 'host-local', dataDir, ...ipam },
        });
      const rGo = await exec(go!, 'ADD', 'c1', mk(tmpGo.path), { env: envExtra });
      const rOurs = await exec(ourHostLocal(), 'ADD', 'c1', mk(tmpOurs.path), { env: envExtra });
      assert.equal(rOurs.code, rGo.code, `Go: ${rGo.stdout}\nours: ${rOurs.stdout}`);
      const jGo = JSON.parse(rGo.stdout);
      const jOurs = JSON.parse(rOurs.stdout);
      if (rGo.code === 0) {
        delete jGo.dns;
        delete jOurs.dns;
        assert.deepEqual(jOurs, jGo);
      } else {
        assert.equal(jOurs.msg, jGo.msg);
      }
      const goFiles = storeFiles(join(tmpGo.path, 'mynet'));
      if (rGo.code !== 0) {
        // deliberate difference: a failed ADD leaves last_reserved_ip alone (the reference advances it)
        for (const k of Object.keys(goFiles)) if (k.startsWith('last_reserved_ip.')) delete goFiles[k];
      }
      assert.deepEqual(storeFiles(join(tmpOurs.path, 'mynet')), goFiles);
    });
  }
});
