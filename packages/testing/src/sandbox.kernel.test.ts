import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readlinkSync, statSync } from 'node:fs';
import { describe, test } from 'node:test';
import { currentNetnsPath, sameNetns } from '@cnikit/netlink';
import { createSandbox, deleteNamedNetns, sandboxForFile, withSandbox } from './sandbox.ts';
import { diffSnapshots, formatDiff, type Snapshot, snapshotNetns } from './snapshot.ts';
import { scaled } from './timescale.ts';

const rootNs = readlinkSync('/proc/self/ns/net');

describe('sandbox lifecycle', () => {
  test('two private namespaces with lo up; destroy removes them and is idempotent', () => {
    const sb = createSandbox();
    try {
      assert.match(sb.host.name, new RegExp(`^cnikit-host-${process.pid}-[0-9a-f]{6}$`));
      assert.match(sb.container.name, new RegExp(`^cnikit-container-${process.pid}-[0-9a-f]{6}$`));
      assert.equal(sb.host.path, `/run/netns/${sb.host.name}`);
      assert.ok(existsSync(sb.host.path) && existsSync(sb.container.path));
      assert.ok(!sameNetns(sb.host.path, sb.container.path));
      assert.ok(!sameNetns(sb.host.path, '/proc/self/ns/net'));
      for (const ns of ['host', 'container'] as const) {
        const lo = JSON.parse(sb.exec('ip', ['-json', 'link', 'show', 'lo'], { ns }).stdout)[0];
        assert.ok(lo.flags.includes('UP'), `lo up in ${ns}`);
      }
    } finally {
      sb.destroy();
    }
    assert.ok(sb.destroyed);
    assert.ok(!existsSync(sb.host.path) && !existsSync(sb.container.path));
    sb.destroy(); // idempotent
    assert.throws(() => sb.exec('true'), /destroyed/);
  });

  test('a name prefix: <prefix>-host-<pid>-<hex>, <prefix>-container-…; a bad prefix creates nothing', async () => {
    await withSandbox(
      (sb) => {
        assert.match(sb.host.name, new RegExp(`^myproj-host-${process.pid}-[0-9a-f]{6}$`));
        assert.match(sb.container.name, new RegExp(`^myproj-container-${process.pid}-[0-9a-f]{6}$`));
        assert.match(sb.newContainer().name, /^myproj-container-/);
      },
      { prefix: 'myproj' },
    );
    assert.throws(() => createSandbox({ prefix: 'a/b' }), /invalid sandbox name prefix "a\/b"/);
  });

  test('destroy tolerates namespaces already removed by someone else', () => {
    const sb = createSandbox();
    deleteNamedNetns(sb.container);
    sb.destroy();
    assert.ok(!existsSync(sb.host.path));
  });

  test('withSandbox destroys after a failure and passes the error through', async () => {
    let paths: string[] = [];
    await assert.rejects(
      withSandbox((sb) => {
        paths = [sb.host.path, sb.container.path];
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(paths.length, 2);
    for (const p of paths) assert.ok(!existsSync(p));
  });

  for (const how of ['exit', 'SIGTERM'] as const) {
    test(`namespaces left alive are removed when the process ends (${how})`, () => {
      const end =
        how === 'exit'
          ? 'process.exit(3)'
          : "setTimeout(() => {}, 10000); process.kill(process.pid, 'SIGTERM')";
      const code = `import('@cnikit/testing').then((m) => { const sb = m.createSandbox(); console.log(sb.host.path + ' ' + sb.container.path); ${end}; })`;
      const r = spawnSync(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', '-e', code], {
        encoding: 'utf8',
        cwd: import.meta.dirname,
      });
      assert.equal(how === 'exit' ? r.status : r.signal, how === 'exit' ? 3 : 'SIGTERM', r.stderr);
      const paths = r.stdout.trim().split(' ');
      assert.equal(paths.length, 2);
      for (const p of paths) assert.ok(p.startsWith('/run/netns/cnikit-') && !existsSync(p), `${p} removed`);
    });
  }

  test("sandboxForFile: a test process killed mid-test (SIGTERM) removes the file's namespaces and directory", () => {
    const code =
      "Promise.all([import('@cnikit/testing'), import('node:test')]).then(([m, { test }]) => { const env = m.sandboxForFile(); " +
      "test('hangs', () => new Promise(() => { setTimeout(() => {}, 10000); console.log(env.sb.host.path + ' ' + env.dir); process.kill(process.pid, 'SIGTERM'); })); })";
    const r = spawnSync(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', '-e', code], {
      encoding: 'utf8',
      cwd: import.meta.dirname,
    });
    assert.equal(r.signal, 'SIGTERM', r.stderr);
    const [ns, dir] = (r.stdout.split('\n')[0] ?? '').split(' '); // then the child's TAP lines
    assert.ok(ns?.startsWith('/run/netns/cnikit-') && !existsSync(ns), `${ns} removed`);
    assert.ok(dir?.includes('cnikit-sandbox-') && !existsSync(dir), `${dir} removed`);
  });

  test('runInHost / runInContainer switch the thread and come back', async () => {
    await withSandbox((sb) => {
      assert.ok(sb.runInHost(() => sameNetns(currentNetnsPath(), sb.host.path)));
      assert.ok(sb.runInContainer(() => sameNetns(currentNetnsPath(), sb.container.path)));
      assert.equal(readlinkSync('/proc/thread-self/ns/net'), rootNs);
    });
  });

  test('exec: runs in the chosen namespace, reports failures', async () => {
    await withSandbox((sb) => {
      sb.exec('ip', ['link', 'add', 'only-host', 'type', 'veth', 'peer', 'name', 'only-host-p']);
      assert.match(sb.exec('ip', ['-br', 'link']).stdout, /only-host/);
      assert.doesNotMatch(sb.exec('ip', ['-br', 'link'], { ns: 'container' }).stdout, /only-host/);
      assert.equal(sb.exec('cat', [], { input: 'hello' }).stdout, 'hello');
      assert.equal(sb.exec('sh', ['-c', 'echo $X'], { env: { X: 'y' } }).stdout, 'y\n');
      assert.throws(() => sb.exec('ip', ['link', 'del', 'nope']), /exited 1/);
      assert.equal(sb.exec('ip', ['link', 'del', 'nope'], { check: false }).status, 1);
    });
  });

  test('exec direct: the same namespace without ip netns exec (no private mount namespace, one process)', async () => {
    await withSandbox((sb) => {
      const netOf = (p: string) => readlinkSync(p);
      for (const role of ['host', 'container'] as const) {
        const ns = role === 'host' ? sb.host : sb.container;
        const direct = sb.exec('readlink', ['/proc/self/ns/net', '/proc/self/ns/mnt'], {
          ns: role,
          direct: true,
        });
        const viaIp = sb.exec('readlink', ['/proc/self/ns/net', '/proc/self/ns/mnt'], { ns: role });
        const [dNet, dMnt] = direct.stdout.trim().split('\n');
        const [iNet, iMnt] = viaIp.stdout.trim().split('\n');
        assert.equal(dNet, iNet, `${role}: the same network namespace either way`);
        assert.equal(dNet, `net:[${statSync(ns.path).ino}]`);
        assert.notEqual(dNet, netOf('/proc/self/ns/net'));
        assert.equal(dMnt, netOf('/proc/self/ns/mnt'), 'direct: our mount namespace');
        assert.notEqual(iMnt, dMnt, 'ip netns exec: its own mount namespace');
      }
      assert.equal(netOf('/proc/thread-self/ns/net'), rootNs, 'the thread is back');
      assert.equal(sb.exec('cat', [], { input: 'hi', direct: true }).stdout, 'hi');
      assert.throws(() => sb.exec('ip', ['link', 'del', 'nope'], { direct: true }), /exited 1/);
    });
  });
});

describe('more containers, entering the host, per-file sandboxes', () => {
  test('newContainer adds a namespace with lo up to `containers`; destroy removes it too', () => {
    const sb = createSandbox();
    let extra: { name: string; path: string } | undefined;
    try {
      extra = sb.newContainer();
      assert.deepEqual(
        sb.containers.map((c) => c.name),
        [sb.container.name, extra.name],
      );
      assert.ok(existsSync(extra.path));
      assert.match(sb.exec('ip', ['-o', 'link', 'show', 'lo'], { ns: extra }).stdout, /UP/);
    } finally {
      sb.destroy();
    }
    assert.ok(extra && !existsSync(extra.path), 'extra container removed with the sandbox');
    assert.throws(() => sb.newContainer(), /already destroyed/);
  });

  test('withSandbox enterHost: the main thread is in the host namespace during fn, and back after', async () => {
    const nsIno = () => statSync('/proc/thread-self/ns/net').ino;
    const outside = nsIno();
    let inside = -1;
    await withSandbox(
      (sb) => {
        inside = nsIno();
        assert.equal(inside, statSync(sb.host.path).ino, 'in the host namespace');
      },
      { enterHost: true },
    );
    assert.notEqual(inside, outside, 'the host is another namespace');
    assert.equal(nsIno(), outside, 'back where it started');
    await assert.rejects(
      withSandbox(
        () => {
          throw new Error('boom');
        },
        { enterHost: true },
      ),
      /boom/,
    );
    assert.equal(nsIno(), outside, 'back after a failure too');
  });
});

describe('sandboxForFile', () => {
  const env = sandboxForFile({ enterHost: true, containers: 3 });
  test('hooks give a sandbox with n containers and a private directory; the thread is in its host', () => {
    assert.equal(env.sb.containers.length, 3);
    assert.equal(new Set(env.sb.containers.map((c) => c.name)).size, 3);
    assert.ok(existsSync(env.dir));
    assert.ok(sameNetns('/proc/thread-self/ns/net', env.sb.host.path));
  });
});

describe('snapshots', () => {
  test('an unchanged namespace snapshots equal; each kind of change is detected', async () => {
    await withSandbox((sb) => {
      const s0 = sb.snapshot();
      assert.deepEqual(diffSnapshots(s0, sb.snapshot()), []);
      assert.ok(s0.links.some((l) => l.includes('"ifname":"lo"')));
      assert.ok(s0.sysctls.includes('net/ipv4/ip_forward = 0'));

      const changes: [string, () => void][] = [
        ['links', () => sb.exec('ip', ['link', 'add', 'snapv0', 'type', 'veth', 'peer', 'name', 'snapv1'])],
        ['addresses', () => sb.exec('ip', ['addr', 'add', '10.99.0.1/24', 'dev', 'snapv0'])],
        ['routes', () => sb.exec('ip', ['route', 'add', '10.98.0.0/16', 'dev', 'lo', 'table', '100'])],
        ['iptables', () => sb.exec('iptables', ['-t', 'nat', '-N', 'SNAPTEST'])],
        ['ip6tables', () => sb.exec('ip6tables', ['-t', 'filter', '-N', 'SNAPTEST6'])],
        ['nftables', () => sb.exec('nft', ['add', 'table', 'inet', 'snaptest'])],
        [
          'tc',
          () =>
            sb.exec('tc', [
              'qdisc',
              'add',
              'dev',
              'snapv0',
              'root',
              'tbf',
              'rate',
              '1mbit',
              'burst',
              '10k',
              'limit',
              '20k',
            ]),
        ],
        ['sysctls', () => sb.exec('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1'])],
      ];
      let prev: Snapshot = sb.snapshot();
      for (const [section, change] of changes) {
        change();
        const next = sb.snapshot();
        const d = diffSnapshots(prev, next);
        assert.ok(
          d.some((x) => x.section === section && x.added.length > 0),
          `${section} change detected:\n${formatDiff(d)}`,
        );
        prev = next;
      }
      // Changes in the host namespace are not visible in the container one.
      const c = sb.snapshot('container');
      assert.ok(!c.links.some((l) => l.includes('snapv0')));
      assert.deepEqual(c.iptables, []);
      // Undo: a removal shows up as "removed" lines.
      sb.exec('ip', ['link', 'del', 'snapv0']);
      const d = diffSnapshots(prev, sb.snapshot());
      const links = d.find((x) => x.section === 'links');
      assert.equal(links?.removed.length, 2);
      assert.match(formatDiff(d), /^\[links\]\n- /m);
    });
  });

  test('volatile data is ignored (traffic counters, iptables counters)', async () => {
    await withSandbox((sb) => {
      sb.exec('iptables', ['-A', 'OUTPUT', '-o', 'lo', '-j', 'ACCEPT']);
      sb.exec('nft', [
        'add table inet t; add chain inet t c { type filter hook output priority 0; }; add rule inet t c counter',
      ]);
      const s1 = sb.snapshot();
      // Some traffic over lo (UDP datagrams sent by a node child inside the namespace).
      const send =
        "const s=require('dgram').createSocket('udp4');let n=0;const f=()=>s.send('x',9,'127.0.0.1',()=>{if(++n<5)f();else s.close()});f();";
      sb.exec(process.execPath, ['-e', send]);
      const s2 = sb.snapshot();
      assert.match(
        sb.exec('iptables-save', ['-c']).stdout,
        /^\[[1-9]\d*:\d+\] -A OUTPUT -o lo -j ACCEPT$/m,
        'counters did move',
      );
      const d = diffSnapshots(s1, s2);
      assert.deepEqual(d, [], formatDiff(d));
    });
  });

  test('sections option and extra sysctls; snapshotNetns by path', async () => {
    await withSandbox((sb) => {
      const s = snapshotNetns(sb.container.path, {
        sections: ['sysctls'],
        sysctls: ['net.ipv4.conf.lo.arp_ignore'],
      });
      assert.deepEqual(s.links, []);
      assert.ok(s.sysctls.includes('net/ipv4/conf/lo/arp_ignore = 0'));
      assert.ok(s.sysctls.some((l) => l.startsWith('net/ipv6/conf/lo/disable_ipv6 = ')));
      // A name with '..' is rejected, not read (it would reach /etc/shadow).
      assert.throws(
        () =>
          snapshotNetns(sb.container.path, { sections: ['sysctls'], sysctls: ['net/../../../etc/shadow'] }),
        /invalid sysctl name/,
      );
    });
  });

  test('settleMs: waits for IPv6 DAD on links with carrier, so a snapshot does not depend on when it is taken', async () => {
    await withSandbox((sb) => {
      const ip = (...a: string[]) => sb.exec('ip', a, { ns: 'container', check: true });
      ip('link', 'add', 's0', 'type', 'veth', 'peer', 'name', 's1');
      // DAD lasts dad_transmits (1) × retrans_time: 2 s, scaled, so that the first snapshot below is taken while it
      // runs (the default 1 s had passed before it in the kernel lab, where each `ip` takes ~1 s)
      sb.exec('sysctl', ['-q', '-w', `net.ipv6.neigh.s0.retrans_time_ms=${scaled(2000)}`], {
        ns: 'container',
        check: true,
      });
      ip('addr', 'add', '2001:db8::5/64', 'dev', 's0');
      ip('link', 'set', 's1', 'up');
      ip('link', 'set', 's0', 'up');
      const tentative = (s: Snapshot) => s.addresses.filter((l) => l.includes('"tentative":true'));
      // at once: DAD has not finished
      assert.notDeepEqual(tentative(snapshotNetns(sb.container.path, { sections: ['addresses'] })), []);
      const t0 = Date.now();
      const settled = snapshotNetns(sb.container.path, {
        sections: ['addresses', 'routes'],
        settleMs: 10_000,
      });
      assert.deepEqual(tentative(settled), []);
      assert.ok(settled.addresses.some((l) => l.startsWith('s0 ') && l.includes('2001:db8::5')));
      // the local route the kernel adds only once DAD is done
      assert.ok(
        settled.routes.some((l) => l.includes('"dst":"2001:db8::5"') && l.includes('"type":"local"')),
      );
      assert.ok(Date.now() - t0 < scaled(9_000), 'returned when DAD finished, not at the bound');
      // a link without carrier never finishes DAD: not waited for
      ip('link', 'add', 'n0', 'type', 'veth', 'peer', 'name', 'n1');
      ip('addr', 'add', '2001:db8::6/64', 'dev', 'n0');
      ip('link', 'set', 'n0', 'up');
      const t1 = Date.now();
      const down = snapshotNetns(sb.container.path, { sections: ['addresses'], settleMs: 10_000 });
      assert.ok(
        Date.now() - t1 < scaled(5_000),
        `no wait for a link without carrier (${Date.now() - t1} ms)`,
      );
      assert.ok(down.addresses.some((l) => l.startsWith('n0 ') && l.includes('"tentative":true')));
    });
  });
});
