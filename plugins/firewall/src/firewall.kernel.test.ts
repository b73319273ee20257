/**
 * firewall (iptables backend and ingress policies) against the real kernel, in-process through skel: exact
 * iptables-save text compared with the Go firewall run side by side in another namespace, every spec version,
 * CHECK without side effects, DEL with and without prevResult, GC, STATUS, rollback, bad input, and interop with
 * the Go firewall both ways. The test's main thread lives in a private "host" namespace until the end.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  cniCall,
  cniRunner,
  createNamedNetns,
  deleteNamedNetns,
  expectCniError,
  expectOk,
  type NamedNetns,
  sandboxForFile,
  tempDir,
} from '@cnikit/testing';
import { plugin } from './index.ts';

// biome-ignore lint/suspicious/noExplicitAny: result JSON of every spec version under test
type J = any;

const GO = '/usr/lib/cni/firewall';
const env = sandboxForFile({ enterHost: true });
let other: NamedNetns;
const data = tempDir('firewall');
before(() => {
  other = createNamedNetns('cnikit-fwgo');
});
after(() => {
  if (other) deleteNamedNetns(other);
  data.remove();
});

function exec(cmd: string, args: string[], ns: string = env.sb.host.name): string {
  return env.sb.exec(cmd, args, { ns: { name: ns, path: `/run/netns/${ns}` } }).stdout;
}
/** The filter table as iptables-save prints it, without comment lines and counters. */
function filter(family: 4 | 6, ns: string = env.sb.host.name): string {
  return exec(family === 4 ? 'iptables-save' : 'ip6tables-save', ['-t', 'filter'], ns)
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.replace(/ \[\d+:\d+\]$/, ''))
    .join('\n');
}
function reset(ns: string = env.sb.host.name): void {
  for (const t of ['iptables', 'ip6tables']) {
    exec(t, ['-t', 'filter', '-F'], ns);
    exec(t, ['-t', 'filter', '-X'], ns);
  }
}
const EMPTY = '*filter\n:INPUT ACCEPT\n:FORWARD ACCEPT\n:OUTPUT ACCEPT\nCOMMIT';

const prevResult = (v = '1.0.0', ips = ['10.1.2.2/24', 'fd00::2/64']) => ({
  cniVersion: v,
  interfaces: [
    { name: 'cni0', mac: '02:00:00:00:00:01' },
    { name: 'veth1', mac: '02:00:00:00:00:02' },
    { name: 'eth0', mac: '02:00:00:00:00:03', sandbox: '/run/netns/x' },
  ],
  ips: ips.map((address) =>
    v === '0.4.0'
      ? { version: address.includes(':') ? '6' : '4', address, interface: 2 }
      : { address, interface: 2 },
  ),
});

function conf(extra: Record<string, unknown> = {}, v = '1.0.0', ips?: string[]) {
  return {
    cniVersion: v,
    name: 'fwnet',
    type: 'firewall',
    backend: 'iptables',
    dataDir: data.path,
    prevResult: prevResult(v, ips),
    ...extra,
  };
}
const noPrev = (c: Record<string, unknown>) => {
  const { prevResult: _p, ...rest } = c;
  return rest;
};

const cni = cniRunner(plugin, { containerId: 'ctr-a', ifName: 'eth0', netns: '/run/netns/x' });
const go = cniRunner({ binary: GO }, { containerId: 'ctr-a', ifName: 'eth0', netns: '/run/netns/x' });

const V4_ADDED = `*filter
:INPUT ACCEPT
:FORWARD ACCEPT
:OUTPUT ACCEPT
:CNI-ADMIN -
:CNI-FORWARD -
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -d 10.1.2.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s 10.1.2.2/32 -j ACCEPT
COMMIT`;

describe('firewall iptables backend', () => {
  test('ADD: exact rules for v4 + v6, the same text as the Go firewall in another namespace', async () => {
    reset();
    reset(other.name);
    const r = expectOk<J>(await cni.add(conf()));
    assert.deepEqual(r, prevResult());
    assert.equal(filter(4), V4_ADDED);
    assert.equal(
      filter(6),
      V4_ADDED.replace('-d 10.1.2.2/32', '-d fd00::2/128').replace('-s 10.1.2.2/32', '-s fd00::2/128'),
    );
    expectOk<J>(await go.add(conf(), { inNetns: other.name }), 'Go firewall ADD');
    assert.equal(filter(4), filter(4, other.name), 'IPv4 filter table as the Go plugin leaves it');
    assert.equal(filter(6), filter(6, other.name), 'IPv6 filter table as the Go plugin leaves it');
    // a second ADD of the same attachment adds nothing
    expectOk<J>(await cni.add(conf()));
    assert.equal(filter(4), V4_ADDED);
    // a second container appends its rules after the first one's
    expectOk<J>(await cni.add(conf({}, '1.0.0', ['10.1.2.3/24']), { containerId: 'ctr-b' }));
    expectOk<J>(
      await go.add(conf({}, '1.0.0', ['10.1.2.3/24']), { containerId: 'ctr-b', inNetns: other.name }),
    );
    assert.equal(filter(4), filter(4, other.name));
    assert.match(filter(4), /-s 10\.1\.2\.2\/32 -j ACCEPT\n-A CNI-FORWARD -d 10\.1\.2\.3\/32/);
    expectOk<J>(await cni.del(conf({}, '1.0.0', ['10.1.2.3/24']), { containerId: 'ctr-b' }));
    expectOk<J>(await cni.del(conf()));
  });

  test('every supported spec version; 0.3.1 and older refused', async () => {
    for (const v of ['0.4.0', '1.0.0', '1.1.0']) {
      reset();
      const r = expectOk<J>(await cni.add(conf({}, v)), `ADD ${v}`);
      assert.equal(r.cniVersion, v);
      assert.deepEqual(r.ips, prevResult(v).ips, `prevResult passes through (${v})`);
      assert.equal(filter(4), V4_ADDED, `rules for ${v}`);
      expectOk<J>(await cni.check(conf({}, v)), `CHECK ${v}`);
      expectOk<J>(await cni.del(conf({}, v)), `DEL ${v}`);
      assert.doesNotMatch(filter(4), /10\.1\.2\.2/);
    }
    for (const v of ['0.3.1', '0.3.0', '0.2.0']) {
      expectCniError(await cni.add(conf({}, v)), 1, /incompatible CNI versions|does not support/);
    }
    const ver = expectOk<J>(await cni.version());
    assert.deepEqual(ver.supportedVersions, ['0.4.0', '1.0.0', '1.1.0']);
  });

  test('only the families that have addresses are touched', async () => {
    reset();
    expectOk<J>(await cni.add(conf({}, '1.0.0', ['10.1.2.2/24'])));
    assert.equal(filter(4), V4_ADDED);
    assert.equal(filter(6), EMPTY, 'ip6tables untouched by an IPv4-only result');
    expectOk<J>(await cni.check(conf({}, '1.0.0', ['10.1.2.2/24'])));
    expectOk<J>(await cni.del(conf({}, '1.0.0', ['10.1.2.2/24'])));
    assert.equal(filter(6), EMPTY);
  });

  test('custom admin chain', async () => {
    reset();
    const c = conf({ iptablesAdminChainName: 'MY-ADMIN' });
    expectOk<J>(await cni.add(c));
    const t = filter(4);
    assert.match(t, /^:MY-ADMIN -$/m);
    assert.doesNotMatch(t, /CNI-ADMIN/);
    assert.match(t, /-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j MY-ADMIN/);
    expectOk<J>(await cni.check(c));
    expectCniError(
      await cni.check(conf()),
      999,
      'expected CNI-FORWARD rule [-m comment --comment CNI firewall plugin admin overrides -j CNI-ADMIN] not found',
    );
    expectOk<J>(await cni.del(c));
  });

  test('CHECK: before ADD (nothing created), after ADD, after tampering', async () => {
    reset();
    expectCniError(
      await cni.check(conf()),
      999,
      'expected FORWARD rule [-m comment --comment CNI firewall plugin rules -j CNI-FORWARD] not found',
    );
    assert.equal(filter(4), EMPTY, 'CHECK created nothing (the reference creates the chains)');
    assert.equal(filter(6), EMPTY);
    expectOk<J>(await cni.add(conf()));
    expectOk<J>(await cni.check(conf()));
    exec('ip6tables', ['-D', 'CNI-FORWARD', '-s', 'fd00::2/128', '-j', 'ACCEPT']);
    expectCniError(await cni.check(conf()), 999, 'expected rule [-s fd00::2/128 -j ACCEPT] not found');
    exec('iptables', [
      '-D',
      'CNI-FORWARD',
      '-d',
      '10.1.2.2/32',
      '-m',
      'conntrack',
      '--ctstate',
      'RELATED,ESTABLISHED',
      '-j',
      'ACCEPT',
    ]);
    expectCniError(
      await cni.check(conf()),
      999,
      'expected rule [-d 10.1.2.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT] not found',
    );
    exec('iptables', ['-D', 'CNI-FORWARD', '1']);
    expectCniError(
      await cni.check(conf()),
      999,
      'expected CNI-FORWARD rule [-m comment --comment CNI firewall plugin admin overrides -j CNI-ADMIN] not found',
    );
    exec('iptables', ['-D', 'FORWARD', '1']);
    const before = filter(4);
    expectCniError(
      await cni.check(conf()),
      999,
      'expected FORWARD rule [-m comment --comment CNI firewall plugin rules -j CNI-FORWARD] not found',
    );
    assert.equal(filter(4), before, 'CHECK changed nothing');
    // ADD repairs what is missing
    expectOk<J>(await cni.add(conf()));
    expectOk<J>(await cni.check(conf()));
    expectOk<J>(await cni.del(conf()));
  });

  test('DEL: per-address rules go, shared chains and jumps stay; idempotent; without prevResult (record)', async () => {
    reset();
    expectOk<J>(await cni.add(conf()));
    const rec = join(data.path, 'fwnet:ctr-a:eth0.json');
    assert.deepEqual(JSON.parse(readFileSync(rec, 'utf8')), {
      network: 'fwnet',
      containerID: 'ctr-a',
      ifname: 'eth0',
      backend: 'iptables',
      zone: 'trusted',
      ips: ['10.1.2.2/32', 'fd00::2/128'],
    });
    expectOk<J>(await cni.del(noPrev(conf())));
    const shared = V4_ADDED.split('\n')
      .filter((l) => !l.includes('10.1.2.2'))
      .join('\n');
    assert.equal(filter(4), shared, 'DEL without prevResult removed the rules through the record');
    assert.doesNotMatch(filter(6), /fd00::2/);
    assert.ok(!readdirSync(data.path).includes('fwnet:ctr-a:eth0.json'), 'record removed');
    expectOk<J>(await cni.del(conf()), 'second DEL');
    expectOk<J>(await cni.del(noPrev(conf())), 'DEL without prevResult nor record');
    assert.equal(filter(4), shared);
    // nothing of ours in iptables at all: DEL succeeds and creates nothing
    reset();
    expectOk<J>(await cni.del(conf()));
    expectOk<J>(await cni.del(noPrev(conf())));
    assert.equal(filter(4), EMPTY);
    assert.equal(filter(6), EMPTY);
    // ADD → CHECK → DEL leaves only the shared chains
    expectOk<J>(await cni.add(conf()));
    expectOk<J>(await cni.check(conf()));
    expectOk<J>(await cni.del(conf()));
    assert.equal(filter(4), shared);
  });

  test('an ADD killed midway leaves nothing that DEL without prevResult misses, no temp file either', async () => {
    // the real plugin process, killed by the kernel on entering a system call (strace fault injection)
    const main = join(import.meta.dirname, '..', '..', '..', 'packages', 'testing', 'src', 'plugin-main.ts');
    const killedAt = (inject: string) =>
      cniRunner(
        {
          binary: 'strace',
          args: [
            '-f',
            '-qq',
            '-o',
            '/dev/null',
            '-e',
            `inject=${inject}:signal=SIGKILL`,
            process.execPath,
          ].concat(['--conditions=cnikit-source', '--import', 'tsx', main]),
        },
        {
          containerId: 'ctr-k',
          ifName: 'eth0',
          netns: '/run/netns/x',
          inNetns: env.sb.host.name,
          env: { CNIKIT_TEST_PLUGIN_MODULE: join(import.meta.dirname, 'index.ts') },
        },
      );
    const dir = join(data.path, 'killed');
    const c = conf({ dataDir: dir });
    const record = 'fwnet:ctr-k:eth0.json';
    const ours = /10\.1\.2\.2|fd00::2/;
    // killed at the record's rename: before the fix the rules were already in place and no record existed
    reset();
    let r = await killedAt('rename,renameat,renameat2').add(c);
    assert.equal(r.signal, 'SIGKILL', `killed at the rename: ${r.code} ${r.stderr}`);
    const temps = readdirSync(dir);
    assert.equal(temps.length, 1, String(temps));
    assert.match(temps[0] as string, /^\.fwnet:ctr-k:eth0\.json\..*\.tmp$/);
    expectOk<J>(await cni.del(noPrev(c), { containerId: 'ctr-k' }));
    assert.doesNotMatch(filter(4), ours);
    assert.doesNotMatch(filter(6), ours);
    assert.deepEqual(readdirSync(dir), [], 'DEL removed the temp file of the killed write');
    // killed right after the record became durable (the directory fsync): DEL finds the attachment through it
    reset();
    r = await killedAt('fsync:when=2').add(c);
    assert.equal(r.signal, 'SIGKILL', `killed at the second fsync: ${r.code} ${r.stderr}`);
    assert.deepEqual(readdirSync(dir), [record]);
    expectOk<J>(await cni.del(noPrev(c), { containerId: 'ctr-k' }));
    assert.doesNotMatch(filter(4), ours);
    assert.doesNotMatch(filter(6), ours);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('GC removes the rules and records of stale attachments of this network only', async () => {
    reset();
    for (const [id, ip] of [
      ['gc-a', '10.1.3.1/24'],
      ['gc-b', '10.1.3.2/24'],
      ['gc-c', '10.1.3.3/24'],
    ] as const) {
      expectOk<J>(
        await cni.add(conf({}, '1.1.0', [ip, `fd00::3:${ip.split('.')[3]!.split('/')[0]}/64`]), {
          containerId: id,
        }),
      );
    }
    expectOk<J>(await cni.add(conf({ name: 'othernet' }, '1.1.0', ['10.1.4.1/24']), { containerId: 'gc-x' }));
    // gc-c died without DEL; its address went to gc-d, alive: GC must not remove gc-d's rules
    expectOk<J>(await cni.add(conf({}, '1.1.0', ['10.1.3.3/24']), { containerId: 'gc-d' }));
    const gcConf = {
      cniVersion: '1.1.0',
      name: 'fwnet',
      type: 'firewall',
      backend: 'iptables',
      dataDir: data.path,
      'cni.dev/valid-attachments': [
        { containerID: 'gc-b', ifname: 'eth0' },
        { containerID: 'gc-d', ifname: 'eth0' },
      ],
    };
    expectOk<J>(await cni.gc(gcConf));
    const t = filter(4);
    assert.match(t, /-s 10\.1\.3\.2\/32 -j ACCEPT/, 'valid attachment kept');
    assert.doesNotMatch(t, /10\.1\.3\.1\//, 'stale attachment removed');
    assert.match(
      t,
      /-s 10\.1\.3\.3\/32 -j ACCEPT/,
      'the address of a stale attachment now held by a live one kept',
    );
    assert.match(t, /-s 10\.1\.4\.1\/32 -j ACCEPT/, 'another network untouched');
    assert.doesNotMatch(filter(6), /fd00::3:1\/|fd00::3:3\//);
    assert.match(filter(6), /fd00::3:2\/128/);
    assert.deepEqual(
      readdirSync(data.path)
        .filter((n) => n.endsWith('.json'))
        .sort(),
      ['fwnet:gc-b:eth0.json', 'fwnet:gc-d:eth0.json', 'othernet:gc-x:eth0.json'],
    );
    expectOk<J>(await cni.gc(gcConf), 'second GC');
    expectOk<J>(await cni.gc({ ...gcConf, 'cni.dev/valid-attachments': [] }));
    assert.doesNotMatch(filter(4), /10\.1\.3\.[23]\//);
    expectOk<J>(await cni.gc({ ...gcConf, name: 'othernet', 'cni.dev/valid-attachments': [] }));
    assert.deepEqual(
      readdirSync(data.path).filter((n) => n.endsWith('.json')),
      [],
    );
  });

  test('STATUS: ok with iptables, code 50 without', async () => {
    const st = {
      cniVersion: '1.1.0',
      name: 'fwnet',
      type: 'firewall',
      backend: 'iptables',
      dataDir: data.path,
    };
    expectOk<J>(await cni.status(st));
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      expectCniError(await cni.status(st), 50, /neither iptables nor ip6tables is usable/);
    } finally {
      process.env.PATH = path;
    }
    expectCniError(
      await cni.status(
        { ...st, backend: 'firewalld' },
        { env: { DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${data.path}/none` } },
      ),
      50,
      /firewalld is not running/,
    );
  });

  test('a failed ADD removes the rules it added and only those', async () => {
    reset();
    const file = join(data.path, 'not-a-dir');
    writeFileSync(file, '');
    // the record is written before any rule: its failure changes nothing
    expectCniError(await cni.add(conf({ dataDir: file })), 999, /failed to write the firewall record/);
    assert.equal(filter(4), EMPTY, 'no IPv4 rule added');
    assert.equal(filter(6), EMPTY, 'no IPv6 rule added');
    // rules that were there before the failing ADD stay
    expectOk<J>(await cni.add(conf({}, '1.0.0', ['10.1.2.2/24'])));
    expectCniError(await cni.add(conf({ dataDir: file })), 999, /failed to write the firewall record/);
    assert.match(filter(4), /-s 10\.1\.2\.2\/32 -j ACCEPT/, 'pre-existing IPv4 rules kept');
    assert.doesNotMatch(filter(6), /fd00::2/, 'the IPv6 rules this ADD added are gone');
    expectOk<J>(await cni.del(conf()));
  });

  test('ADD by the Go firewall, CHECK and DEL by cnikit; and the other way round', async () => {
    reset();
    expectOk<J>(await go.add(conf()), 'Go ADD');
    expectOk<J>(await cni.check(conf()), 'cnikit CHECK of the Go rules');
    expectOk<J>(await cni.del(conf()), 'cnikit DEL of the Go rules');
    assert.doesNotMatch(filter(4), /10\.1\.2\.2/);
    assert.doesNotMatch(filter(6), /fd00::2/);
    expectCniError(await go.check(conf()), 999, /not found/);
    reset();
    expectOk<J>(await cni.add(conf()), 'cnikit ADD');
    const ours = filter(4);
    expectOk<J>(await go.check(conf()), 'Go CHECK of the cnikit rules');
    assert.equal(filter(4), ours, 'nothing for the Go CHECK to create');
    expectOk<J>(await go.del(conf()), 'Go DEL of the cnikit rules');
    assert.doesNotMatch(filter(4), /10\.1\.2\.2/);
    assert.doesNotMatch(filter(6), /fd00::2/);
    expectCniError(await cni.check(conf()), 999, /expected rule \[-d 10\.1\.2\.2\/32/);
    expectOk<J>(await cni.del(conf()), 'cnikit DEL after the Go DEL');
  });
});

describe('ingress policy', () => {
  const DEF = '-m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)"';
  const SAME = `-A FORWARD ${DEF} -j CNI-ISOLATION-STAGE-1
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -d 10.1.2.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s 10.1.2.2/32 -j ACCEPT
-A CNI-ISOLATION-STAGE-1 -i cni0 ! -o cni0 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j CNI-ISOLATION-STAGE-2
-A CNI-ISOLATION-STAGE-1 ${DEF} -j RETURN
-A CNI-ISOLATION-STAGE-2 -o cni0 ${DEF} -j DROP
-A CNI-ISOLATION-STAGE-2 ${DEF} -j RETURN`;
  const rules = (family: 4 | 6) =>
    filter(family)
      .split('\n')
      .filter((l) => l.startsWith('-A '))
      .join('\n');

  test('same-bridge: exact rules in one transaction with the rest; the Go 1.1.1 text differs only by its comment', async () => {
    reset();
    reset(other.name);
    const c = conf({ ingressPolicy: 'same-bridge' });
    expectOk<J>(await cni.add(c));
    assert.equal(rules(4), SAME);
    assert.match(filter(4), /^:CNI-ISOLATION-STAGE-1 -$/m);
    assert.equal(
      rules(6),
      SAME.replace('-d 10.1.2.2/32', '-d fd00::2/128').replace('-s 10.1.2.2/32', '-s fd00::2/128'),
    );
    // a second bridge adds its rules before the others
    expectOk<J>(
      await cni.add(
        { ...c, prevResult: { ...prevResult(), interfaces: [{ name: 'cni1' }] } },
        { containerId: 'b2' },
      ),
    );
    assert.match(
      rules(4),
      /-A CNI-ISOLATION-STAGE-1 -i cni1 ! -o cni1 [^\n]*\n-A CNI-ISOLATION-STAGE-1 -i cni0 ! -o cni0/,
    );
    assert.match(
      rules(4),
      /-A CNI-ISOLATION-STAGE-2 -o cni1 [^\n]*-j DROP\n-A CNI-ISOLATION-STAGE-2 -o cni0 [^\n]*-j DROP/,
    );
    expectOk<J>(await go.add(c, { inNetns: other.name }));
    // Debian's Go firewall is 1.1.1: its shared rules carry "(ingressPolicy: same-bridge)" (HEAD: "same-bridge|isolated")
    const goRules = filter(4, other.name)
      .split('\n')
      .filter((l) => l.startsWith('-A '))
      .join('\n');
    assert.equal(
      goRules,
      SAME.replaceAll('(ingressPolicy: same-bridge|isolated)', '(ingressPolicy: same-bridge)'),
    );
    // DEL keeps the isolation rules (shared by the bridge)
    expectOk<J>(await cni.del(c));
    assert.match(rules(4), /-A CNI-ISOLATION-STAGE-2 -o cni0 [^\n]*-j DROP/);
    assert.doesNotMatch(rules(4), /10\.1\.2\.2/);
  });

  test('isolated: the extra DROP rule first in stage 1', async () => {
    reset();
    expectOk<J>(await cni.add(conf({ ingressPolicy: 'isolated' })));
    const t = rules(4).split('\n');
    assert.deepEqual(
      t.filter((l) => l.startsWith('-A CNI-ISOLATION-STAGE-1')),
      [
        '-A CNI-ISOLATION-STAGE-1 -i cni0 -o cni0 -m comment --comment "CNI firewall plugin rules (ingressPolicy: isolated)" -j DROP',
        '-A CNI-ISOLATION-STAGE-1 -i cni0 ! -o cni0 -m comment --comment "CNI firewall plugin rules (ingressPolicy: isolated)" -j CNI-ISOLATION-STAGE-2',
        `-A CNI-ISOLATION-STAGE-1 ${DEF} -j RETURN`,
      ],
    );
    expectOk<J>(await cni.check(conf({ ingressPolicy: 'isolated' })));
    expectOk<J>(await cni.del(conf({ ingressPolicy: 'isolated' })));
  });

  test("bridge name errors are the reference's, and change nothing", async () => {
    reset();
    const c = conf({ ingressPolicy: 'same-bridge' });
    expectCniError(
      await cni.add({ ...c, prevResult: { ...prevResult(), interfaces: [] } }),
      999,
      'interface needs to be set for ingress policy "same-bridge", make sure to chain "firewall" plugin with "bridge"',
    );
    expectCniError(
      await cni.add({ ...c, prevResult: { ...prevResult(), interfaces: [{ name: '' }] } }),
      999,
      'got empty bridge name',
    );
    expectCniError(
      await cni.add({ ...c, prevResult: { ...prevResult(), interfaces: [{ name: 'br 0' }] } }),
      999,
      'invalid bridge name "br 0" in prevResult.interfaces[0] for ingress policy "same-bridge"',
    );
    assert.equal(filter(4), EMPTY);
    assert.equal(filter(6), EMPTY);
  });
});

describe('bad input', () => {
  test('unknown ingress policy: code 7 on ADD/CHECK/GC; DEL still cleans up, then reports it', async () => {
    reset();
    const bad = conf({ ingressPolicy: 'closed' });
    expectCniError(await cni.add(bad), 7, 'unknown ingress policy: "closed"');
    assert.equal(filter(4), EMPTY, 'nothing added');
    expectCniError(await cni.check(bad), 7, 'unknown ingress policy: "closed"');
    expectCniError(
      await cni.gc({ ...noPrev(bad), cniVersion: '1.1.0' }),
      7,
      'unknown ingress policy: "closed"',
    );
    expectOk<J>(await cni.add(conf()));
    expectCniError(await cni.del(bad), 7, 'unknown ingress policy: "closed"');
    assert.doesNotMatch(filter(4), /10\.1\.2\.2/, 'rules removed before the error, like the reference');
  });

  test('invalid admin chain names: code 7 with the reason, nothing touched', async () => {
    reset();
    for (const [name, why] of [
      ['a'.repeat(29), /longer than 28/],
      ['has space', /printable ASCII/],
      ['-X', /may not start/],
      ['!X', /may not start/],
      ['ACCEPT', /iptables target/],
      ['DROP', /iptables target/],
      ['FORWARD', /built-in chain/],
      ['CNI-FORWARD', /chain of the plugin/],
      ['a"b', /quotes/],
      ['é', /printable ASCII/],
    ] as const) {
      const e = expectCniError(await cni.add(conf({ iptablesAdminChainName: name })), 7, why);
      assert.match(e.msg, /^invalid iptablesAdminChainName /);
    }
    assert.equal(filter(4), EMPTY);
    expectOk<J>(await cni.add(conf({ iptablesAdminChainName: 'a'.repeat(28) })));
    assert.match(filter(4), new RegExp(`^:${'a'.repeat(28)} -$`, 'm'));
    expectOk<J>(await cni.del(conf({ iptablesAdminChainName: 'a'.repeat(28) })));
  });

  test('missing prevResult, wrong types, unparsable prevResult', async () => {
    reset();
    expectCniError(await cni.add(noPrev(conf())), 999, 'missing prevResult from earlier plugin');
    expectCniError(await cni.check(noPrev(conf())), 999, 'missing prevResult from earlier plugin');
    expectCniError(await cni.add(conf({ backend: 5 })), 7, /^failed to load netconf: backend/);
    expectCniError(
      await cni.add(conf({ firewalldZone: ['x'] })),
      7,
      /^failed to load netconf: firewalldZone/,
    );
    expectCniError(await cni.add(conf({ prevResult: 'x' })), 999, /^could not parse prevResult: /);
    // explicit firewalld without a bus: the address that failed and why
    expectCniError(
      await cni.add(conf({ backend: 'firewalld' }), {
        env: { DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${data.path}/no-bus` },
      }),
      999,
      /^failed to add the address 10\.1\.2\.2\/32 to trusted zone: failed to connect to the D-Bus at .*no-bus: connect ENOENT/,
    );
    assert.equal(filter(4), EMPTY);
    // an unknown backend name means "auto" like the reference: here iptables
    expectOk<J>(await cni.add(conf({ backend: 'nftables' })));
    assert.equal(filter(4), V4_ADDED);
    expectOk<J>(await cni.del(conf({ backend: 'nftables' })));
  });
});

test('the Go plugin is the Debian one this test was written against', async () => {
  const r = await cniCall({ binary: GO }, 'VERSION', '');
  assert.deepEqual(JSON.parse(r.stdout).supportedVersions, ['0.4.0', '1.0.0']);
});
