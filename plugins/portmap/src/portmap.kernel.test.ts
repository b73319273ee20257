/**
 * portmap against the real kernel, both backends: exact iptables-save / nft output, CHECK, DEL, GC, option
 * errors and interop with the Go portmap (iptables; Debian 1.1.1 has no nftables backend). The test moves its main
 * thread into a private "host" namespace (portmap works in the runtime's namespace) and never leaves it until the end.
 */
import assert from 'node:assert/strict';
import { existsSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execStats, iptnftStats } from '@cnikit/firewall/testing';
import { cniRunner, expectCniError, expectOk, sandboxForFile, tempDir } from '@cnikit/testing';
import { plugin } from './index.ts';

const GO = '/usr/lib/cni/portmap';
const env = sandboxForFile({ enterHost: true });

/** iptables writes: tool runs plus the restore scripts the in-process iptables-nft writer applied instead. */
const writes = () => execStats.count + iptnftStats.applied;
const run = (cmd: string, args: string[]) => env.sb.exec(cmd, args, { ns: 'host' }).stdout;
/** The nat table of a family as iptables-save prints it (counters and comments of the dump removed). */
function natRules(family: 4 | 6): string[] {
  return run(family === 4 ? 'iptables-save' : 'ip6tables-save', ['-t', 'nat'])
    .split('\n')
    .filter((l) => l.startsWith('-A '))
    .sort();
}
function nftTable(family: 'ip' | 'ip6'): string {
  const r = env.sb.exec('nft', ['list', 'table', family, 'cni_hostport'], { ns: 'host', check: false });
  return r.status === 0 ? r.stdout.replace(/ # handle \d+/g, '') : '';
}
function flushAll(): void {
  for (const t of ['iptables', 'ip6tables']) {
    run(t, ['-t', 'nat', '-F']);
    run(t, ['-t', 'nat', '-X']);
  }
  env.sb.exec('nft', ['delete', 'table', 'ip', 'cni_hostport'], { ns: 'host', check: false });
  env.sb.exec('nft', ['delete', 'table', 'ip6', 'cni_hostport'], { ns: 'host', check: false });
}

const prevResult = (v = '1.0.0') => ({
  cniVersion: v,
  interfaces: [
    { name: 'veth1', mac: '02:00:00:00:00:01' },
    { name: 'eth0', mac: '02:00:00:00:00:02', sandbox: '/run/netns/x' },
  ],
  ips: [
    { address: '10.1.2.2/24', gateway: '10.1.2.1', interface: 1 },
    { address: 'fd00::2/64', gateway: 'fd00::1', interface: 1 },
  ],
});

const MAPPINGS = [
  { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
  { hostPort: 53, containerPort: 53, protocol: 'udp', hostIP: '192.168.1.5' },
];

function conf(extra: Record<string, unknown> = {}, mappings: unknown[] = MAPPINGS, v = '1.0.0') {
  return {
    cniVersion: v,
    name: 'mynet',
    type: 'portmap',
    backend: 'iptables',
    capabilities: { portMappings: true },
    runtimeConfig: { portMappings: mappings },
    prevResult: prevResult(v),
    ...extra,
  };
}

const cni = cniRunner(plugin, { containerId: 'abc', ifName: 'eth0', netns: '/run/netns/x' });
const DN = 'CNI-DN-e88f49d94512ff752ebe6';

describe('portmap iptables backend', () => {
  test('ADD writes exactly the reference rules (v4 + v6), CHECK passes, DEL removes the container chain', async () => {
    flushAll();
    expectCniError(
      await cni.check(conf()),
      999,
      `could not check ipv4 dnat: chain ${DN} not found in iptables table nat`,
    );
    const r = expectOk(await cni.add(conf()));
    assert.deepEqual(r, prevResult());
    assert.deepEqual(natRules(4), [
      '-A CNI-DN-e88f49d94512ff752ebe6 -d 192.168.1.5/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.1.2.2:53',
      '-A CNI-DN-e88f49d94512ff752ebe6 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.2.2:80',
      '-A CNI-DN-e88f49d94512ff752ebe6 -s 10.1.2.0/24 -d 192.168.1.5/32 -p udp -m udp --dport 53 -j CNI-HOSTPORT-SETMARK',
      '-A CNI-DN-e88f49d94512ff752ebe6 -s 10.1.2.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      '-A CNI-DN-e88f49d94512ff752ebe6 -s 127.0.0.1/32 -d 192.168.1.5/32 -p udp -m udp --dport 53 -j CNI-HOSTPORT-SETMARK',
      '-A CNI-DN-e88f49d94512ff752ebe6 -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"mynet\\" id: \\"abc\\"" -m multiport --dports 8080 -j CNI-DN-e88f49d94512ff752ebe6',
      '-A CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"mynet\\" id: \\"abc\\"" -m multiport --dports 53 -j CNI-DN-e88f49d94512ff752ebe6',
      '-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE',
      '-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000',
      '-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
      '-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ',
      '-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
    ]);
    const v6 = natRules(6);
    assert.ok(
      v6.includes(
        '-A CNI-DN-e88f49d94512ff752ebe6 -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00::2]:80',
      ),
    );
    assert.ok(
      v6.includes(
        '-A CNI-DN-e88f49d94512ff752ebe6 -s fd00::/64 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      ),
    );
    assert.ok(!v6.some((l) => l.includes('--dport 53 ')), 'the v4 hostIP mapping is not in ip6tables');
    assert.equal(
      v6.filter((l) => l.startsWith('-A CNI-HOSTPORT-DNAT')).length,
      2,
      'entry rules ignore the hostIP family',
    );
    expectOk(await cni.check(conf()));
    // a re-ADD replaces the container's rules, never duplicates them
    expectOk(await cni.add(conf()));
    assert.equal(natRules(4).length, 13);
    // changed behind CHECK's back
    run('iptables', [
      '-t',
      'nat',
      '-D',
      DN,
      '-p',
      'tcp',
      '--dport',
      '8080',
      '-j',
      'DNAT',
      '--to-destination',
      '10.1.2.2:80',
    ]);
    expectCniError(
      await cni.check(conf()),
      999,
      /^could not check ipv4 dnat: rule \[\[-p tcp --dport 8080 -s 10\.1\.2\.2\/24 -j CNI-HOSTPORT-SETMARK\]/,
    );
    expectOk(await cni.del(conf()));
    const left = natRules(4);
    assert.ok(!left.some((l) => l.includes(DN)), 'container chain and jumps removed');
    assert.equal(left.length, 5, 'shared chains stay');
    assert.ok(!natRules(6).some((l) => l.includes(DN)), '!natRules(6).some((l) => l.includes(DN))');
    expectCniError(await cni.check(conf()), 999, /chain CNI-DN-e88f49d94512ff752ebe6 not found/);
  });

  test('snat=false, masqAll, markMasqBit, externalSetMarkChain, hostIP 0.0.0.0/::, conditions, > 15 ports', async () => {
    flushAll();
    const many = Array.from({ length: 17 }, (_, i) => ({
      hostPort: 9000 + i,
      containerPort: 80,
      protocol: 'TCP',
    }));
    expectOk(
      await cni.add(
        conf({ snat: false, conditionsV4: ['-s', '10.9.9.0/24'] }, [
          ...many,
          { hostPort: 81, containerPort: 81, protocol: 'udp', hostIP: '0.0.0.0' },
          { hostPort: 82, containerPort: 82, protocol: 'udp', hostIP: '::' },
        ]),
      ),
    );
    const v4 = natRules(4);
    assert.ok(
      !v4.some((l) => l.includes('SETMARK') || l.includes('MASQ')),
      'no masquerade machinery with snat=false',
    );
    const entries = v4.filter((l) => l.startsWith('-A CNI-HOSTPORT-DNAT'));
    assert.deepEqual(
      entries.map((l) => /--dports (\S+)/.exec(l)?.[1]),
      ['9000,9001,9002,9003,9004,9005,9006,9007,9008,9009,9010,9011,9012,9013,9014', '9015,9016', '81,82'],
    );
    assert.ok(
      entries.every((l) => l.includes('-s 10.9.9.0/24')),
      'conditions on the entry rules',
    );
    assert.ok(
      v4.some((l) => l.includes('-p udp -m udp --dport 81 -j DNAT --to-destination 10.1.2.2:81')),
      "v4.some((l) => l.includes('-p udp -m udp --dport 81 -j DNAT --to-destination 10.1.2.2:81'))",
    );
    assert.ok(!v4.some((l) => l.includes('--dport 82 -j DNAT')), ':: is IPv6 only');
    assert.ok(
      natRules(6).some((l) => l.includes('--dport 82 -j DNAT --to-destination [fd00::2]:82')),
      "natRules(6).some((l) => l.includes('--dport 82 -j DNAT --to-destination [fd00::2]:82'))",
    );
    expectOk(await cni.del(conf()));
    flushAll();
    expectOk(await cni.add(conf({ masqAll: true, markMasqBit: 5 }, [MAPPINGS[0]])));
    const m = natRules(4);
    assert.ok(
      m.includes('-A CNI-HOSTPORT-MASQ -m mark --mark 0x20/0x20 -j MASQUERADE'),
      "m.includes('-A CNI-HOSTPORT-MASQ -m mark --mark 0x20/0x20 -j MASQUERADE')",
    );
    assert.ok(
      m.includes(`-A ${DN} -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`),
      'masqAll: any source',
    );
    assert.ok(!m.some((l) => l.includes('127.0.0.1')), "!m.some((l) => l.includes('127.0.0.1'))");
    expectOk(await cni.del(conf()));
    flushAll();
    run('iptables', ['-t', 'nat', '-N', 'MY-MARK']);
    run('ip6tables', ['-t', 'nat', '-N', 'MY-MARK']);
    expectOk(await cni.add(conf({ externalSetMarkChain: 'MY-MARK' }, [MAPPINGS[0]])));
    const e = natRules(4);
    assert.ok(
      !e.some((l) => l.includes('CNI-HOSTPORT-SETMARK') || l.includes('CNI-HOSTPORT-MASQ')),
      "!e.some((l) => l.includes('CNI-HOSTPORT-SETMARK') || l.includes('CNI-HOSTPORT-MASQ'))",
    );
    assert.ok(
      e.includes(`-A ${DN} -s 10.1.2.0/24 -p tcp -m tcp --dport 8080 -j MY-MARK`),
      'the DN chain jumps to the external mark chain',
    );
    expectOk(await cni.del(conf()));
  });

  test('a further container reads no nat table (one iptables-restore per family); a shared rule removed by hand comes back', async () => {
    flushAll();
    expectOk(await cni.add(conf()));
    const shared = natRules(4).filter((l) => !l.includes('CNI-DN-'));
    const start = writes();
    expectOk(
      await cni.add(conf({}, [{ hostPort: 8081, containerPort: 80, protocol: 'tcp' }]), {
        containerId: 'def',
      }),
    );
    // no iptables-save of a table that grows with every container: the shared chains are seen in place over
    // nfnetlink, the new container's chain is known to be new
    assert.equal(writes() - start, 2, 'one iptables-restore per family, nothing else');
    const after = natRules(4);
    assert.deepEqual(
      after.filter((l) => !l.includes('CNI-DN-')),
      shared,
      'the shared chains keep one rule each and one jump from each entry chain',
    );
    assert.equal(after.filter((l) => l.startsWith('-A CNI-HOSTPORT-DNAT ')).length, 3);
    // a shared jump deleted by hand: the next ADD puts it back (the shared chains are then ensured in full)
    run('iptables', [
      '-t',
      'nat',
      '-D',
      'OUTPUT',
      '-m',
      'addrtype',
      '--dst-type',
      'LOCAL',
      '-j',
      'CNI-HOSTPORT-DNAT',
    ]);
    expectOk(
      await cni.add(conf({}, [{ hostPort: 8082, containerPort: 80, protocol: 'tcp' }]), {
        containerId: 'ghi',
      }),
    );
    assert.deepEqual(
      natRules(4).filter((l) => !l.includes('CNI-DN-')),
      shared,
    );
    for (const id of ['abc', 'def', 'ghi']) expectOk(await cni.del(conf(), { containerId: id }));
    assert.deepEqual(
      natRules(4).filter((l) => l.includes('CNI-DN-')),
      [],
    );
  });

  test('DEL needs no mappings, no prevResult and no namespace; three DELs succeed; a failed ADD leaves nothing', async () => {
    flushAll();
    expectOk(await cni.add(conf()));
    // kubelet: DEL with the netns + cached prevResult, then twice with an empty CNI_NETNS and no prevResult
    expectOk(await cni.del(conf({ prevResult: undefined, runtimeConfig: {} }), { netns: '' }));
    assert.ok(!natRules(4).some((l) => l.includes(DN)), '!natRules(4).some((l) => l.includes(DN))');
    expectOk(await cni.del(conf({ prevResult: undefined }), { netns: '' }));
    expectOk(await cni.del(conf({ prevResult: undefined }), { netns: '' }));
    // the nft conditions are parsed by iptables and fail there: the v4 rules must not stay behind
    flushAll();
    const before = natRules(4);
    expectCniError(
      await cni.add(conf({ conditionsV4: ['-m', 'nonexistentmatch', '--foo'] }, [MAPPINGS[0]])),
      999,
      /^unable to setup DNAT: /,
    );
    assert.deepEqual(natRules(4), before);
  });

  test('option and mapping errors (reference messages; cnikit extra checks are code 7)', async () => {
    const cases: Array<[Record<string, unknown>, unknown[] | undefined, number, string | RegExp]> = [
      [
        { markMasqBit: 3, externalSetMarkChain: 'X' },
        undefined,
        999,
        'failed to parse config: Cannot specify externalSetMarkChain and markMasqBit',
      ],
      [{ markMasqBit: 32 }, undefined, 999, 'failed to parse config: MasqMarkBit must be between 0 and 31'],
      [{ backend: 'pf' }, undefined, 999, 'failed to parse config: unrecognized backend "pf"'],
      [
        { conditionsV4: ['ip saddr 1.2.3.4'], conditionsV6: ['ip6 saddr ::1'] },
        undefined,
        999,
        'failed to parse config: iptables backend was requested but configuration contains nftables-specific options [conditionsV4 conditionsV6]',
      ],
      [
        {
          backend: 'nftables',
          externalSetMarkChain: 'X',
          conditionsV4: ['-s', '1.2.3.4'],
          conditionsV6: ['!', '-s', '::1'],
        },
        undefined,
        999,
        'failed to parse config: nftables backend was requested but configuration contains iptables-specific options [externalSetMarkChain conditionsV4 conditionsV6]',
      ],
      [
        {},
        [{ hostPort: 0, containerPort: 80, protocol: 'tcp' }],
        999,
        'failed to parse config: Invalid host port number: 0',
      ],
      [
        {},
        [{ hostPort: 80, containerPort: -1, protocol: 'tcp' }],
        999,
        'failed to parse config: Invalid container port number: -1',
      ],
      [
        {},
        [{ hostPort: 70000, containerPort: 80, protocol: 'tcp' }],
        7,
        'failed to parse config: Invalid host port number: 70000',
      ],
      [
        {},
        [{ hostPort: 80, containerPort: 80, protocol: 'icmp' }],
        7,
        /Invalid protocol "icmp" for host port 80/,
      ],
      [
        {},
        [{ hostPort: 80, containerPort: 80, protocol: 'tcp', hostIP: 'nope' }],
        7,
        /Invalid host IP "nope"/,
      ],
      [{ snat: 'yes' }, undefined, 7, /snat/],
      [{ prevResult: undefined }, undefined, 999, 'must be called as chained plugin'],
    ];
    flushAll();
    for (const [extra, mappings, code, msg] of cases) {
      expectCniError(await cni.add(conf(extra, mappings ?? MAPPINGS)), code, msg);
    }
    assert.deepEqual(natRules(4), [], 'nothing was installed by any failed ADD');
    expectCniError(await cni.check(conf({ prevResult: undefined })), 999, 'Required prevResult missing');
    // containerd's capitalised keys are the same mapping
    expectOk(await cni.add(conf({}, [{ HostPort: 8080, ContainerPort: 80, Protocol: 'tcp', HostIP: '' }])));
    assert.ok(
      natRules(4).some((l) => l.includes('--dport 8080 -j DNAT --to-destination 10.1.2.2:80')),
      "natRules(4).some((l) => l.includes('--dport 8080 -j DNAT --to-destination 10.1.2.2:80'))",
    );
    expectOk(await cni.del(conf()));
  });

  test('GC removes the chains of this network whose container is not valid, nothing else', async () => {
    flushAll();
    for (const id of ['a1', 'a2'])
      expectOk(await cni.add(conf({ cniVersion: '1.1.0' }), { containerId: id }));
    expectOk(await cni.add({ ...conf(), name: 'othernet' }, { containerId: 'a3' }));
    expectOk(
      await cni.gc({
        ...conf(),
        cniVersion: '1.1.0',
        prevResult: undefined,
        'cni.dev/valid-attachments': [{ containerID: 'a1', ifname: 'eth0' }],
      }),
    );
    const ids = (f: 4 | 6) =>
      natRules(f)
        .filter((l) => l.startsWith('-A CNI-HOSTPORT-DNAT'))
        .map((l) => /id: \\"(\w+)\\"/.exec(l)?.[1])
        .sort();
    assert.deepEqual(ids(4), ['a1', 'a1', 'a3', 'a3']);
    assert.deepEqual(ids(6), ['a1', 'a1', 'a3', 'a3'], 'entry rules ignore the hostIP family');
    expectOk(await cni.status({ ...conf(), cniVersion: '1.1.0' }));
  });
});

describe('portmap without a configured backend', () => {
  test('ADD runs no detection probe while iptables works: one iptables-restore per family, nothing else', async () => {
    flushAll();
    expectOk(await cni.add(conf({ backend: undefined })));
    const start = writes();
    expectOk(
      await cni.add(conf({ backend: undefined }, [{ hostPort: 8081, containerPort: 80, protocol: 'tcp' }]), {
        containerId: 'def',
      }),
    );
    assert.equal(writes() - start, 2, 'no `iptables -S INPUT` before the batch');
    assert.equal(natRules(4).filter((l) => l.startsWith('-A CNI-HOSTPORT-DNAT ')).length, 3);
    assert.equal(nftTable('ip'), '', 'nothing in the nftables backend');
    for (const id of ['abc', 'def']) expectOk(await cni.del(conf(), { containerId: id }));
  });

  test('iptables unusable: the detection picks nftables and the failed iptables attempt left nothing', async () => {
    flushAll();
    using fake = tempDir();
    // iptables tools that fail (as on a kernel without x_tables/nf_tables compat), the real nft
    for (const t of [
      'iptables',
      'ip6tables',
      'iptables-restore',
      'ip6tables-restore',
      'iptables-save',
      'ip6tables-save',
    ])
      writeFileSync(join(fake.path, t), '#!/bin/sh\necho "iptables: unusable here" >&2\nexit 3\n', {
        mode: 0o755,
      });
    symlinkSync('/usr/sbin/nft', join(fake.path, 'nft'));
    const path = process.env.PATH;
    process.env.PATH = fake.path;
    try {
      expectOk(await cni.add(conf({ backend: undefined })));
    } finally {
      process.env.PATH = path;
    }
    assert.match(nftTable('ip'), /tcp dport 8080 dnat to 10\.1\.2\.2:80 comment "abc"/);
    assert.match(nftTable('ip6'), /tcp dport 8080 dnat to \[fd00::2\]:80 comment "abc"/);
    assert.deepEqual(natRules(4), [], 'no iptables rule');
    assert.deepEqual(natRules(6), []);
    expectOk(await cni.del(conf({ backend: 'nftables' })));
    assert.doesNotMatch(nftTable('ip'), /comment "abc"/);
  });
});

describe('portmap nftables backend', () => {
  const nconf = (extra: Record<string, unknown> = {}, mappings: unknown[] = MAPPINGS) =>
    conf({ backend: 'nftables', ...extra }, mappings);
  test('ADD writes the reference table, CHECK counts rules, re-ADD does not duplicate, DEL removes the container rules', async () => {
    flushAll();
    expectCniError(await cni.check(nconf()), 999, 'missing hostport rules in "hostports" chain');
    expectOk(await cni.add(nconf({ conditionsV4: ['ip saddr != 10.99.0.0/16'] })));
    const want = [
      'table ip cni_hostport {',
      '\tcomment "CNI portmap plugin"',
      '\tchain hostports {',
      '\t\ttcp dport 8080 dnat to 10.1.2.2:80 comment "abc"',
      '\t\tip daddr 192.168.1.5 udp dport 53 dnat to 10.1.2.2:53 comment "abc"',
      '\t}',
      '',
      '\tchain hostip_hostports {',
      '\t}',
      '',
      '\tchain hostports_all {',
      '\t\tjump hostip_hostports',
      '\t\tjump hostports',
      '\t}',
      '',
      '\tchain prerouting {',
      '\t\ttype nat hook prerouting priority dstnat; policy accept;',
      '\t\tip saddr != 10.99.0.0/16 fib daddr type local jump hostports_all',
      '\t}',
      '',
      '\tchain output {',
      '\t\ttype nat hook output priority -100; policy accept;',
      '\t\tip saddr != 10.99.0.0/16 fib daddr type local jump hostports_all',
      '\t}',
      '',
      '\tchain masquerading {',
      '\t\ttype nat hook postrouting priority srcnat; policy accept;',
      '\t\tip saddr 10.1.2.2 ip daddr 10.1.2.2 masquerade comment "abc"',
      '\t\tip saddr 127.0.0.1 ip daddr 10.1.2.2 masquerade comment "abc"',
      '\t}',
      '}',
      '',
    ];
    assert.deepEqual(nftTable('ip').split('\n'), want);
    assert.match(nftTable('ip6'), /tcp dport 8080 dnat to \[fd00::2\]:80 comment "abc"/);
    assert.match(nftTable('ip6'), /ip6 saddr fd00::2 ip6 daddr fd00::2 masquerade comment "abc"/);
    expectOk(await cni.check(nconf()));
    expectOk(await cni.add(nconf()));
    assert.equal(nftTable('ip').match(/comment "abc"/g)?.length, 4, 're-ADD replaced, not duplicated');
    expectOk(await cni.add(nconf({ snat: false }), { containerId: 'other' }));
    expectOk(await cni.check(nconf({ snat: false }), { containerId: 'other' }));
    expectCniError(
      await cni.check(nconf({}), { containerId: 'other' }),
      999,
      'missing hostport rules in "masquerading" chain',
    );
    // DEL without mappings, and whatever the configured backend
    expectOk(await cni.del(conf({ backend: 'iptables', prevResult: undefined, runtimeConfig: {} })));
    assert.ok(
      !nftTable('ip').includes('"abc"') && !nftTable('ip6').includes('"abc"'),
      "!nftTable('ip').includes('\"abc\"') && !nftTable('ip6').includes('\"abc\"')",
    );
    assert.ok(nftTable('ip').includes('"other"'), "nftTable('ip').includes('\"other\"')");
    expectCniError(await cni.check(nconf()), 999, 'missing hostport rules in "hostports" chain');
    expectOk(await cni.del(nconf(), { containerId: 'other' }));
    assert.doesNotMatch(nftTable('ip'), /comment "(abc|other)"/);
  });

  test('masqAll masquerades any source', async () => {
    flushAll();
    expectOk(await cni.add(nconf({ masqAll: true })));
    assert.match(nftTable('ip'), /ip saddr 0\.0\.0\.0\/0 ip daddr 10\.1\.2\.2 masquerade comment "abc"/);
    assert.doesNotMatch(nftTable('ip'), /127\.0\.0\.1/);
    assert.match(nftTable('ip6'), /ip6 saddr ::\/0 ip6 daddr fd00::2 masquerade comment "abc"/);
    expectOk(await cni.check(nconf({ masqAll: true })));
    expectOk(await cni.del(nconf()));
  });
});

describe('side by side with the Go portmap (Debian 1.1.1, iptables)', () => {
  assert.ok(
    existsSync(GO),
    'Go portmap not installed in /usr/lib/cni (Debian package containernetworking-plugins)',
  );
  const go = cniRunner({ binary: GO }, { containerId: 'abc', ifName: 'eth0', netns: '/run/netns/x' });
  // Go 1.1.1 knows no `backend` key and CHECKs v4 and v6 tables for every IP: a v4-only prevResult
  const v4only = () => {
    const c = conf();
    const p = prevResult();
    return { ...c, backend: undefined, prevResult: { ...p, ips: [p.ips[0]] } };
  };
  test('identical rules; ADD by one, CHECK + DEL by the other, both ways (Go 1.1.1 CHECK as broken as on its own rules)', async () => {
    flushAll();
    expectOk(await go.add(v4only()));
    const goRules = natRules(4);
    expectOk(await cni.check(v4only()));
    expectOk(await cni.del(v4only()));
    assert.ok(!natRules(4).some((l) => l.includes(DN)), '!natRules(4).some((l) => l.includes(DN))');
    flushAll();
    expectOk(await cni.add(v4only()));
    assert.deepEqual(natRules(4), goRules, 'the same rules as the Go portmap');
    // Go 1.1.1's CHECK looks for the chain in ip6tables too and so fails for every pod, its own ADDs included
    // (plugins.md §4.4): on our rules it fails the same way, after finding the IPv4 side
    expectCniError(
      await go.check(v4only()),
      999,
      `could not check ipv6 dnat: chain ${DN} not found in iptables table nat`,
    );
    expectOk(await go.del(v4only()));
    assert.ok(!natRules(4).some((l) => l.includes(DN)), '!natRules(4).some((l) => l.includes(DN))');
  });
});
