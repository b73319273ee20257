/**
 * tuning against the real kernel: a container namespace with a veth `eth0`, the plugin run in-process (and the Go
 * tuning from /usr/lib/cni side by side), state checked with `ip -json` and /proc/sys.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cniRunner, expectCniError, expectOk, sandboxForFile, tempDir } from '@cnikit/testing';
import { plugin } from './index.ts';

// biome-ignore lint/suspicious/noExplicitAny: result JSON of every spec version under test
type J = any;

const GO = '/usr/lib/cni/tuning';
const env = sandboxForFile();
const data = tempDir('tuning');
after(() => data.remove());

let seq = 0;
/** A fresh veth `eth0` in the container namespace (peer in the host namespace); returns its original state. */
function freshEth0(): Link {
  env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: 'container', check: false });
  const peer = `vt${seq++}`;
  env.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', peer], { ns: 'container' });
  env.sb.exec('ip', ['link', 'set', peer, 'netns', env.sb.host.name], { ns: 'container' });
  env.sb.exec('ip', ['link', 'set', 'eth0', 'up'], { ns: 'container' });
  return link();
}

interface Link {
  mac: string;
  mtu: number;
  promisc: boolean;
  allmulti: boolean;
  txqlen: number;
}
function link(name = 'eth0'): Link {
  const [l] = JSON.parse(
    env.sb.exec('ip', ['-j', '-d', 'link', 'show', name], { ns: 'container' }).stdout,
  ) as Array<Record<string, unknown>>;
  const flags = (l?.flags as string[]) ?? [];
  return {
    mac: l?.address as string,
    mtu: l?.mtu as number,
    promisc: flags.includes('PROMISC'),
    allmulti: flags.includes('ALLMULTI'),
    txqlen: l?.txqlen as number,
  };
}
const sysctl = (path: string) => env.sb.exec('cat', [`/proc/sys/${path}`], { ns: 'container' }).stdout.trim();
const setSysctl = (path: string, v: string) =>
  env.sb.exec('sh', ['-c', `echo ${v} > /proc/sys/${path}`], { ns: 'container' });

function prev(version: string, mac = '00:11:22:33:44:55') {
  const v0 = version.startsWith('0.');
  return {
    cniVersion: version,
    interfaces: [{ name: 'eth0', mac, sandbox: env.sb.container.path }],
    ips: [{ ...(v0 ? { version: '4' } : {}), address: '10.1.2.3/24', gateway: '10.1.2.1', interface: 0 }],
  };
}

function conf(version: string, extra: Record<string, unknown> = {}, dataDir = data.path) {
  return { cniVersion: version, name: 'tnet', type: 'tuning', dataDir, prevResult: prev(version), ...extra };
}

const cni = () => cniRunner(plugin, { netns: env.sb.container.path, containerId: 'ctr1', ifName: 'eth0' });
const VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

describe('tuning ADD/CHECK/DEL (every spec version from 0.3.0)', () => {
  for (const v of VERSIONS) {
    test(`${v}: sysctl only passes prevResult through and writes no backup`, async () => {
      freshEth0();
      const before = sysctl('net/ipv4/conf/eth0/arp_filter');
      const c = conf(v, {
        sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1', 'net/ipv4/conf/all/log_martians': '1' },
      });
      const r = expectOk<J>(await cni().add(c));
      // 0.x results always carry a (possibly empty) dns object, as Go prints them
      assert.deepEqual(r, v.startsWith('0.') ? { ...prev(v), dns: {} } : prev(v));
      assert.equal(sysctl('net/ipv4/conf/eth0/arp_filter'), '1');
      assert.equal(sysctl('net/ipv4/conf/all/log_martians'), '1');
      assert.ok(
        !existsSync(join(data.path, 'ctr1_eth0.json')),
        "!existsSync(join(data.path, 'ctr1_eth0.json'))",
      );
      if (v >= '0.4.0') expectOk<J>(await cni().check(c));
      expectOk<J>(await cni().del(c));
      // sysctls are never restored (reference)
      assert.equal(sysctl('net/ipv4/conf/eth0/arp_filter'), '1');
      setSysctl('net/ipv4/conf/eth0/arp_filter', before);
      setSysctl('net/ipv4/conf/all/log_martians', '0');
    });

    test(`${v}: mac + promisc + mtu + allmulti + txQLen, backup, CHECK, DEL restores every attribute`, async () => {
      const orig = freshEth0();
      const c = conf(v, { mac: 'c2:11:22:33:44:55', promisc: true, mtu: 1400, allmulti: true, txQLen: 123 });
      const r = expectOk<J>(await cni().add(c));
      assert.equal(r.interfaces[0].mac, 'c2:11:22:33:44:55');
      assert.deepEqual(link(), {
        mac: 'c2:11:22:33:44:55',
        mtu: 1400,
        promisc: true,
        allmulti: true,
        txqlen: 123,
      });
      const file = join(data.path, 'ctr1_eth0.json');
      assert.equal(
        readFileSync(file, 'utf8'),
        `{\n "mac": "${orig.mac}",\n "promisc": false,\n "mtu": ${orig.mtu},\n "allmulti": false,\n "txQLen": ${orig.txqlen}\n}`,
      );
      assert.equal(lstatSync(file).mode & 0o777, 0o600);
      assert.equal(readFileSync(`${file}.network`, 'utf8'), 'tnet');
      if (v >= '0.4.0') expectOk<J>(await cni().check({ ...c, prevResult: r }));
      expectOk<J>(await cni().del(c));
      assert.deepEqual(link(), orig);
      assert.ok(!existsSync(file) && !existsSync(`${file}.network`), 'backup and owner record removed');
      expectOk<J>(await cni().del(c), 'second DEL');
    });
  }

  test('values from args.cni, CNI_ARGS MAC and runtimeConfig.mac', async () => {
    const orig = freshEth0();
    const v = '1.0.0';
    let r = expectOk<J>(
      await cni().add(
        conf(v, {
          args: { cni: { promisc: true, mtu: 1300, allmulti: true, txQLen: 50, mac: 'c2:00:00:00:00:0a' } },
        }),
      ),
    );
    assert.deepEqual(link(), {
      mac: 'c2:00:00:00:00:0a',
      mtu: 1300,
      promisc: true,
      allmulti: true,
      txqlen: 50,
    });
    assert.equal(r.interfaces[0].mac, 'c2:00:00:00:00:0a');
    expectOk<J>(await cni().del(conf(v)));
    assert.deepEqual(link(), orig);
    r = expectOk<J>(await cni().add(conf(v), { args: 'IgnoreUnknown=1;MAC=c2:00:00:00:00:0b' }));
    assert.equal(link().mac, 'c2:00:00:00:00:0b');
    expectOk<J>(await cni().del(conf(v)));
    r = expectOk<J>(
      await cni().add(conf(v, { runtimeConfig: { mac: 'c2:00:00:00:00:0c' } }), {
        args: 'MAC=c2:00:00:00:00:0b',
      }),
    );
    assert.equal(link().mac, 'c2:00:00:00:00:0c');
    assert.equal(r.interfaces[0].mac, 'c2:00:00:00:00:0c');
    expectOk<J>(await cni().del(conf(v)));
    assert.deepEqual(link(), orig);
  });

  test('CHECK reports a change made behind its back, with the reference messages', async () => {
    freshEth0();
    const c = conf('1.0.0', { mtu: 1400, promisc: true, sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' } });
    const r = expectOk<J>(await cni().add(c));
    const withPrev = { ...c, prevResult: r };
    expectOk<J>(await cni().check(withPrev));
    env.sb.exec('ip', ['link', 'set', 'eth0', 'mtu', '1450'], { ns: 'container' });
    expectCniError(
      await cni().check(withPrev),
      999,
      'Error: Tuning configured MTU of eth0 is 1400, current value is 1450',
    );
    env.sb.exec('ip', ['link', 'set', 'eth0', 'mtu', '1400', 'promisc', 'off'], { ns: 'container' });
    expectCniError(
      await cni().check(withPrev),
      999,
      'Error: Tuning link eth0 configured promisc is true, current value is 0',
    );
    env.sb.exec('ip', ['link', 'set', 'eth0', 'promisc', 'on'], { ns: 'container' });
    setSysctl('net/ipv4/conf/eth0/arp_filter', '0');
    expectCniError(
      await cni().check(withPrev),
      999,
      'Error: Tuning configured value of /proc/sys/net/ipv4/conf/eth0/arp_filter is 1, current value is 0',
    );
    // promisc false (default) means CHECK expects it off
    expectCniError(
      await cni().check({ ...conf('1.0.0'), prevResult: r }),
      999,
      /configured promisc is false, current value is 1/,
    );
    env.sb.exec('ip', ['link', 'del', 'eth0'], { ns: 'container' });
    expectCniError(
      await cni().check({ ...conf('1.0.0'), prevResult: r }),
      999,
      'Cannot find container link eth0',
    );
    expectOk<J>(await cni().del(c), 'DEL with the interface gone');
    assert.ok(!existsSync(join(data.path, 'ctr1_eth0.json')), 'an unrestorable backup is removed');
  });

  test('bad input: CNI error objects, nothing changed', async () => {
    const orig = freshEth0();
    const v = '1.0.0';
    expectCniError(
      await cni().add({ ...conf(v), prevResult: undefined }),
      999,
      'Required prevResult missing',
    );
    expectCniError(
      await cni().add(conf(v, { sysctl: { 'kernel.hostname': 'x' } })),
      999,
      'invalid net sysctl key: "kernel/hostname"',
    );
    expectCniError(
      await cni().add(conf(v, { mac: 'zz' })),
      999,
      'invalid args zz for MAC addr: address zz: invalid MAC address',
    );
    expectCniError(await cni().add(conf(v, { mtu: 'big' })), 7, /mtu/);
    expectCniError(
      await cni().add(
        '{"cniVersion":"1.0.0","name":"tnet","type":"tuning","sysctl":{"net.a":"1","net.a":"2"}}',
      ),
      999,
      'duplicated sysctl keys are not allowed',
    );
    expectCniError(await cni().add(conf(v), { ifName: 'a/b' }), 4, /contains \/ or :/);
    expectCniError(await cni().add(conf(v), { args: 'BOGUS=1' }), 999, /ARGS: unknown args/);
    expectCniError(
      await cni().add(conf(v, { mtu: 1400 }), { ifName: 'eth9' }),
      999,
      'failed to get "eth9": Link not found',
    );
    assert.deepEqual(link(), orig);
    assert.deepEqual(readdirSync(data.path), []);
  });

  test('a failed ADD restores the sysctls and the link and leaves no backup', async () => {
    const orig = freshEth0();
    const before = sysctl('net/ipv4/conf/eth0/arp_filter');
    // a valid sysctl, then one that does not exist
    expectCniError(
      await cni().add(
        conf('1.0.0', { sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1', 'net.ipv4.nonexistent': '1' } }),
      ),
      999,
      'open /proc/sys/net/ipv4/nonexistent: no such file or directory',
    );
    assert.equal(sysctl('net/ipv4/conf/eth0/arp_filter'), before);
    // the MAC changes, then the MTU is refused by the kernel: MAC and sysctl are restored, no backup is left
    const r = await cni().add(
      conf('1.0.0', {
        sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' },
        mac: 'c2:00:00:00:00:0d',
        mtu: 70000,
      }),
    );
    expectCniError(r, 999, /invalid argument/);
    assert.deepEqual(link(), orig);
    assert.equal(sysctl('net/ipv4/conf/eth0/arp_filter'), before);
    assert.deepEqual(readdirSync(data.path), []);
  });

  test('a change that cannot be undone is refused; a restore the kernel refuses fails DEL', async () => {
    const lo = () => link('lo');
    const before = lo();
    assert.equal(before.mac, '00:00:00:00:00:00');
    // lo's all-zero MAC can never be set again: ADD changes nothing (no MTU, no MAC) and writes no backup
    expectCniError(
      await cni().add(conf('1.0.0', { mac: 'c2:00:00:00:00:0e', mtu: 1400 }), { ifName: 'lo' }),
      999,
      'refusing to change "lo": its MAC address 00:00:00:00:00:00 could not be restored (only a unicast Ethernet address can be set) on DEL',
    );
    assert.deepEqual(lo(), before);
    assert.deepEqual(readdirSync(data.path), []);
    // other attributes of lo are restorable and still change and come back
    expectOk<J>(await cni().add(conf('1.0.0', { mtu: 1400, txQLen: 7 }), { ifName: 'lo' }));
    assert.equal(lo().mtu, 1400);
    expectOk<J>(await cni().del(conf('1.0.0', { mtu: 1400, txQLen: 7 }), { ifName: 'lo' }));
    assert.deepEqual(lo(), before);
    // a backup the kernel refuses in part (written by the Go tuning after changing lo's MAC): DEL restores what
    // it can, fails naming what it could not, and keeps only that for a retry
    freshEth0();
    env.sb.exec('ip', ['link', 'set', 'eth0', 'mtu', '1400', 'address', 'c2:00:00:00:00:0f'], {
      ns: 'container',
    });
    writeFileSync(join(data.path, 'ctr1_eth0.json'), '{\n "mac": "00:00:00:00:00:00",\n "mtu": 1500\n}');
    const r = await cni().del(conf('1.0.0', { mtu: 1400 }));
    expectCniError(r, 999, /^failed to restore MAC address: .*cannot assign requested address/);
    assert.equal(link().mtu, 1500, 'the MTU is restored');
    assert.equal(link().mac, 'c2:00:00:00:00:0f');
    assert.equal(
      readFileSync(join(data.path, 'ctr1_eth0.json'), 'utf8'),
      '{\n "mac": "00:00:00:00:00:00"\n}',
    );
    // a sysctl whose old value cannot be read (an unset stable_secret) cannot be rolled back: the rollback says so
    const secret = 'net.ipv6.conf.IFNAME.stable_secret';
    const failed = await cni().add(conf('1.0.0', { sysctl: { [secret]: '::1' }, mtu: 70000 }));
    expectCniError(failed, 999, /invalid argument/);
    assert.match(
      failed.stderr,
      /rollback: restore \/proc\/sys\/net\/ipv6\/conf\/eth0\/stable_secret failed: its previous value was unreadable, it stays ::1/,
    );
    // the namespace gone for the runtime: nothing can be restored any more, DEL succeeds and drops the backup
    expectOk<J>(await cni().del(conf('1.0.0', { mtu: 1400 }), { netns: '' }));
    assert.deepEqual(readdirSync(data.path), []);
  });

  test('an ADD killed at its backup write leaves a temp file that DEL and GC remove', async () => {
    const orig = freshEth0();
    const dir = join(data.path, 'killed');
    // the real plugin process, killed by the kernel on entering rename(2) (strace fault injection)
    const main = join(import.meta.dirname, '..', '..', '..', 'packages', 'testing', 'src', 'plugin-main.ts');
    const killed = () =>
      cniRunner(
        {
          binary: 'strace',
          args: [
            '-f',
            '-qq',
            '-o',
            '/dev/null',
            '-e',
            'inject=rename,renameat,renameat2:signal=SIGKILL',
          ].concat([process.execPath, '--conditions=cnikit-source', '--import', 'tsx', main]),
        },
        {
          netns: env.sb.container.path,
          containerId: 'ctr1',
          ifName: 'eth0',
          env: { CNIKIT_TEST_PLUGIN_MODULE: join(import.meta.dirname, 'index.ts') },
        },
      );
    const c = conf('1.1.0', { mtu: 1400 }, dir);
    const r = await killed().add(c);
    assert.equal(r.signal, 'SIGKILL', `killed at the rename: ${r.code} ${r.stderr}`);
    assert.deepEqual(link(), orig, 'killed before the link changed');
    assert.match(readdirSync(dir).join(','), /^\.ctr1_eth0\.json\..*\.tmp$/);
    expectOk<J>(await cni().del(c));
    assert.deepEqual(readdirSync(dir), []);
    const r2 = await killed().add(c);
    assert.equal(r2.signal, 'SIGKILL');
    assert.equal(readdirSync(dir).length, 1);
    expectOk<J>(await cni().gc({ ...c, 'cni.dev/valid-attachments': [] }));
    assert.deepEqual(readdirSync(dir), []);
  });

  test('DEL succeeds with the namespace gone, an empty CNI_NETNS, or a corrupt backup — and drops the backup', async () => {
    freshEth0();
    const c = conf('1.0.0', { mtu: 1400 });
    expectOk<J>(await cni().add(c, { containerId: 'gone' }));
    expectOk<J>(await cni().del(c, { containerId: 'gone', netns: '/run/netns/does-not-exist' }));
    assert.ok(
      !existsSync(join(data.path, 'gone_eth0.json')),
      "!existsSync(join(data.path, 'gone_eth0.json'))",
    );
    expectOk<J>(await cni().add(c, { containerId: 'empty' }));
    expectOk<J>(await cni().del(c, { containerId: 'empty', netns: '' }));
    assert.ok(
      !existsSync(join(data.path, 'empty_eth0.json')),
      "!existsSync(join(data.path, 'empty_eth0.json'))",
    );
    writeFileSync(join(data.path, 'corrupt_eth0.json'), '{not json');
    expectOk<J>(await cni().del(c, { containerId: 'corrupt' }));
    assert.ok(
      !existsSync(join(data.path, 'corrupt_eth0.json')),
      "!existsSync(join(data.path, 'corrupt_eth0.json'))",
    );
    expectOk<J>(
      await cni().del(conf('1.0.0', {}, join(data.path, 'never-created'))),
      'DEL without a data dir',
    );
  });

  test('state directory safety: a symlinked data dir is refused, symlinked backup names are never followed', async () => {
    const orig = freshEth0();
    const outside = tempDir('tuning-outside');
    try {
      const link1 = join(data.path, 'linkdir');
      symlinkSync(outside.path, link1);
      expectCniError(
        await cni().add(conf('1.0.0', { mtu: 1400 }, link1)),
        999,
        /is not a directory \(a symlink is not accepted\)/,
      );
      assert.deepEqual(link(), orig);
      assert.deepEqual(readdirSync(outside.path), []);
      expectOk<J>(await cni().del(conf('1.0.0', { mtu: 1400 }, link1)), 'DEL still succeeds');
      // a dangling symlink where the backup goes: replaced by the real file, the target is never created
      const dir = join(data.path, 'd2');
      mkdirSync(dir);
      symlinkSync(join(outside.path, 'victim'), join(dir, 'ctr1_eth0.json'));
      expectOk<J>(await cni().add(conf('1.0.0', { mtu: 1400 }, dir)));
      assert.ok(
        !lstatSync(join(dir, 'ctr1_eth0.json')).isSymbolicLink(),
        "!lstatSync(join(dir, 'ctr1_eth0.json')).isSymbolicLink()",
      );
      assert.deepEqual(readdirSync(outside.path), []);
      expectOk<J>(await cni().del(conf('1.0.0', { mtu: 1400 }, dir)));
      assert.deepEqual(link(), orig);
      // DEL finding a symlink in place of the backup removes the link, never reads or touches its target
      writeFileSync(join(outside.path, 'secret'), '{"mtu":1280}');
      symlinkSync(join(outside.path, 'secret'), join(dir, 'ctr1_eth0.json'));
      expectOk<J>(await cni().del(conf('1.0.0', { mtu: 1400 }, dir)));
      assert.ok(!existsSync(join(dir, 'ctr1_eth0.json')), "!existsSync(join(dir, 'ctr1_eth0.json'))");
      assert.equal(readFileSync(join(outside.path, 'secret'), 'utf8'), '{"mtu":1280}');
      assert.equal(link().mtu, orig.mtu);
    } finally {
      outside.remove();
    }
  });

  test('GC removes this network’s backups of attachments that are not valid, nothing else', async () => {
    freshEth0();
    const dir = join(data.path, 'gc');
    const c = (name: string) => ({ ...conf('1.1.0', { mtu: 1400 }, dir), name });
    for (const id of ['a', 'b']) expectOk<J>(await cni().add(c('net1'), { containerId: id }));
    expectOk<J>(await cni().add(c('net2'), { containerId: 'c' }));
    writeFileSync(join(dir, 'go_eth0.json'), '{\n "mtu": 1500\n}'); // written by the Go tuning: owner unknown
    const gc = { ...c('net1'), 'cni.dev/valid-attachments': [{ containerID: 'a', ifname: 'eth0' }] };
    expectOk<J>(await cni().gc(gc));
    assert.deepEqual(readdirSync(dir).sort(), [
      'a_eth0.json',
      'a_eth0.json.network',
      'c_eth0.json',
      'c_eth0.json.network',
      'go_eth0.json',
    ]);
    expectOk<J>(await cni().status(c('net1')));
    writeFileSync(join(data.path, 'file'), '');
    expectCniError(
      await cni().status({ ...c('net1'), dataDir: join(data.path, 'file', 'x') }),
      50,
      /tuning data directory is not usable: mkdir .*not a directory/,
    );
  });
});

describe('side by side with the Go tuning (Debian 1.1.1): ADD by one, CHECK and DEL by the other', () => {
  assert.ok(
    existsSync(GO),
    'Go tuning not installed in /usr/lib/cni (Debian package containernetworking-plugins)',
  );
  const go = () =>
    cniRunner({ binary: GO }, { netns: env.sb.container.path, containerId: 'ctr1', ifName: 'eth0' });
  const c = () =>
    conf('1.0.0', {
      mac: 'c2:00:00:00:01:01',
      promisc: true,
      mtu: 1400,
      allmulti: true,
      sysctl: { 'net.ipv4.conf.all.log_martians': '1' },
    });
  for (const [addBy, otherBy] of [
    ['cnikit', 'Go'],
    ['Go', 'cnikit'],
  ] as const) {
    test(`ADD by ${addBy}, CHECK + DEL by ${otherBy}`, async () => {
      const orig = freshEth0();
      const [a, o] = addBy === 'cnikit' ? [cni(), go()] : [go(), cni()];
      const r = expectOk<J>(await a.add(c()));
      assert.equal(link().mtu, 1400);
      expectOk<J>(await o.check({ ...c(), prevResult: r }));
      expectOk<J>(await o.del(c()));
      assert.deepEqual(link(), orig);
      assert.ok(
        !existsSync(join(data.path, 'ctr1_eth0.json')),
        "!existsSync(join(data.path, 'ctr1_eth0.json'))",
      );
      setSysctl('net/ipv4/conf/all/log_martians', '0');
    });
  }
});
