// Kernel tests: everything runs inside private namespaces created by @cnikit/testing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { diffSnapshots, formatDiff, sandboxForFile } from '@cnikit/testing';
import { detectBackend, resolveBackend } from './backend.ts';
import { execStats, runTool, ToolNotFoundError } from './exec.ts';
import { gcIPMasq, IPMASQ_NFT_CHAIN, IPMASQ_NFT_TABLE, setupIPMasq, teardownIPMasq } from './ipmasq.ts';
import {
  hasRule,
  IptablesBatch,
  iptablesSave,
  listChains,
  listRules,
  readTable,
  ruleTarget,
  supportsIPTables,
} from './iptables.ts';
import { iptnftStats } from './iptnft.ts';
import { formatChainName } from './names.ts';
import { nftBatch, nftList, nftListRules, supportsNFTables } from './nftables.ts';
import { setupSpoofCheck, teardownSpoofCheck } from './spoofcheck.ts';

const env = sandboxForFile();
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const save = (family: 4 | 6 = 4, table = 'nat') =>
  env.sb.exec(family === 4 ? 'iptables-save' : 'ip6tables-save', ['-t', table]).stdout;
/**
 * Writes of iptables state: iptables-restore runs (and any other tool run) plus the restore scripts the in-process
 * iptables-nft writer applied instead (iptnft.ts; CNIKIT_IPTABLES_RESTORE=exec makes them all restores).
 */
const writes = () => execStats.count + iptnftStats.applied;
const rulesOf = (text: string, chain: string) => text.split('\n').filter((l) => l.startsWith(`-A ${chain} `));

describe('iptables batch', () => {
  test('a new chain, its rules and a jump to it are applied by ONE iptables-restore, no table read', () => {
    const start = writes();
    const applied = iptnftStats.applied;
    const b = new IptablesBatch(4, ns)
      .ensureChain('filter', 'CNI-T1')
      .appendUnique('filter', 'CNI-T1', ['-s', '10.9.0.1', '-j', 'ACCEPT'])
      .appendUnique('filter', 'CNI-T1', [
        '-d',
        '10.9.0.0/16',
        '-m',
        'comment',
        '--comment',
        'my "rule"',
        '-j',
        'DROP',
      ])
      .insertUnique('filter', 'FORWARD', ['-m', 'comment', '--comment', 'cnikit test', '-j', 'CNI-T1']);
    const r = b.commit();
    // iptables-nft: the chains' existence comes from nfnetlink GETs; a new chain is empty and nothing jumps to it
    // yet, so no iptables-save (whose cost grows with every container's rules) is needed
    assert.equal(r.execs, iptnftStats.applied > applied ? 0 : 1); // in process: no tool at all
    assert.equal(writes() - start, 1);
    const s = save(4, 'filter');
    assert.match(s, /^:CNI-T1 - \[0:0\]$/m);
    assert.deepEqual(rulesOf(s, 'CNI-T1'), [
      '-A CNI-T1 -s 10.9.0.1/32 -j ACCEPT',
      '-A CNI-T1 -d 10.9.0.0/16 -m comment --comment "my \\"rule\\"" -j DROP',
    ]);
    assert.deepEqual(rulesOf(s, 'FORWARD'), ['-A FORWARD -m comment --comment "cnikit test" -j CNI-T1']);
  });

  test('re-applying is idempotent: no duplicates, no restore run', () => {
    const b = new IptablesBatch(4, ns)
      .ensureChain('filter', 'CNI-T1')
      .appendUnique('filter', 'CNI-T1', ['-s', '10.9.0.1/32', '-j', 'ACCEPT'])
      .appendUnique('filter', 'CNI-T1', [
        '-d',
        '10.9.1.2/16',
        '-j',
        'DROP',
        '-m',
        'comment',
        '--comment',
        'my "rule"',
      ])
      .insertUnique('filter', 'FORWARD', ['-j', 'CNI-T1', '-m', 'comment', '--comment', 'cnikit test']);
    const r = b.commit();
    assert.equal(r.script, '');
    assert.equal(r.execs, 1);
    assert.equal(rulesOf(save(4, 'filter'), 'CNI-T1').length, 2);
    assert.equal(rulesOf(save(4, 'filter'), 'FORWARD').length, 1);
  });

  test('deleteRulesWhere with jumpsTo: a missing target needs no read; an existing one is found and removed', () => {
    const start = writes();
    const fresh = new IptablesBatch(4, ns)
      .deleteRulesWhere('filter', 'FORWARD', (r) => ruleTarget(r) === 'CNI-T9', 'CNI-T9')
      .flushChain('filter', 'CNI-T9', { create: true })
      .append('filter', 'CNI-T9', ['-j', 'ACCEPT'])
      .append('filter', 'FORWARD', ['-s', '10.9.9.9', '-j', 'CNI-T9']);
    assert.ok(fresh.commit().execs <= 1);
    assert.equal(writes() - start, 1, 'no iptables-save');
    assert.deepEqual(rulesOf(save(4, 'filter'), 'CNI-T9'), ['-A CNI-T9 -j ACCEPT']);
    // again: the chain exists now, so the jumps to it are read and replaced, never duplicated
    const again = new IptablesBatch(4, ns)
      .deleteRulesWhere('filter', 'FORWARD', (r) => ruleTarget(r) === 'CNI-T9', 'CNI-T9')
      .flushChain('filter', 'CNI-T9', { create: true })
      .append('filter', 'CNI-T9', ['-j', 'ACCEPT'])
      .append('filter', 'FORWARD', ['-s', '10.9.9.9', '-j', 'CNI-T9']);
    again.commit();
    const s = save(4, 'filter');
    assert.deepEqual(rulesOf(s, 'CNI-T9'), ['-A CNI-T9 -j ACCEPT']);
    assert.deepEqual(
      rulesOf(s, 'FORWARD').filter((l) => l.includes('CNI-T9')),
      ['-A FORWARD -s 10.9.9.9/32 -j CNI-T9'],
    );
    new IptablesBatch(4, ns)
      .deleteRulesWhere('filter', 'FORWARD', (r) => ruleTarget(r) === 'CNI-T9', 'CNI-T9')
      .deleteChain('filter', 'CNI-T9')
      .commit();
    assert.doesNotMatch(save(4, 'filter'), /CNI-T9/);
  });

  test('hasRule checks many rules against one read', () => {
    const t = readTable(4, 'filter', ns);
    assert.ok(hasRule(t, 'CNI-T1', ['-s', '10.9.0.1', '-j', 'ACCEPT']));
    assert.ok(
      hasRule(t, 'CNI-T1', ['-d', '10.9.3.3/16', '-j', 'DROP', '-m', 'comment', '--comment', 'my "rule"']),
    );
    assert.ok(!hasRule(t, 'CNI-T1', ['-s', '10.9.0.2', '-j', 'ACCEPT']));
    assert.ok(!hasRule(t, 'FORWARD', ['-s', '10.9.0.1', '-j', 'ACCEPT']));
  });

  test('portmap-shaped rules (as the reference writes them) are recognised after iptables canonicalises them', () => {
    const dn = 'CNI-DN-e88f49d94512ff752ebe6';
    const cm = (c: string) => ['-m', 'comment', '--comment', c];
    const batch = () =>
      new IptablesBatch(4, ns)
        .ensureChain('nat', 'CNI-HOSTPORT-SETMARK')
        .ensureChain('nat', 'CNI-HOSTPORT-MASQ')
        .ensureChain('nat', 'CNI-HOSTPORT-DNAT')
        .ensureChain('nat', dn)
        .appendUnique('nat', 'CNI-HOSTPORT-SETMARK', [
          ...cm('CNI portfwd masquerade mark'),
          '-j',
          'MARK',
          '--set-xmark',
          '0x2000/0x2000',
        ])
        .appendUnique('nat', 'CNI-HOSTPORT-MASQ', [
          '-m',
          'mark',
          '--mark',
          '0x2000/0x2000',
          '-j',
          'MASQUERADE',
        ])
        .insertUnique('nat', 'POSTROUTING', [
          ...cm('CNI portfwd requiring masquerade'),
          '-j',
          'CNI-HOSTPORT-MASQ',
        ])
        .appendUnique('nat', 'PREROUTING', [
          '-m',
          'addrtype',
          '--dst-type',
          'LOCAL',
          '-j',
          'CNI-HOSTPORT-DNAT',
        ])
        .appendUnique('nat', 'OUTPUT', ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'CNI-HOSTPORT-DNAT'])
        .appendUnique('nat', 'CNI-HOSTPORT-DNAT', [
          ...cm('dnat name: "mynet" id: "abc"'),
          '-m',
          'multiport',
          '-p',
          'tcp',
          '--destination-ports',
          '8080',
          '-j',
          dn,
        ])
        .appendUnique('nat', dn, [
          '-p',
          'tcp',
          '--dport',
          '8080',
          '-s',
          '10.1.2.2/24',
          '-j',
          'CNI-HOSTPORT-SETMARK',
        ])
        .appendUnique('nat', dn, [
          '-p',
          'tcp',
          '--dport',
          '8080',
          '-s',
          '127.0.0.1',
          '-j',
          'CNI-HOSTPORT-SETMARK',
        ])
        .appendUnique('nat', dn, [
          '-p',
          'tcp',
          '--dport',
          '8080',
          '-j',
          'DNAT',
          '--to-destination',
          '10.1.2.2:80',
        ])
        .appendUnique('nat', dn, [
          '-p',
          'udp',
          '--dport',
          '53',
          '-d',
          '192.168.1.5',
          '-j',
          'DNAT',
          '--to-destination',
          '10.1.2.2:53',
        ])
        .appendUnique('nat', dn, [...cm('late proto option'), '-p', 'tcp', '--dport', '9', '-j', 'RETURN']);
    batch().commit();
    const again = batch().commit();
    assert.equal(again.script, '', 'nothing to add the second time');
    const s = save(4);
    assert.deepEqual(rulesOf(s, dn), [
      `-A ${dn} -s 10.1.2.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
      `-A ${dn} -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
      `-A ${dn} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.2.2:80`,
      `-A ${dn} -d 192.168.1.5/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.1.2.2:53`,
      `-A ${dn} -p tcp -m comment --comment "late proto option" -m tcp --dport 9 -j RETURN`,
    ]);
    assert.deepEqual(rulesOf(s, 'CNI-HOSTPORT-DNAT'), [
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"mynet\\" id: \\"abc\\"" -m multiport --dports 8080 -j ${dn}`,
    ]);
    assert.deepEqual(rulesOf(s, 'CNI-HOSTPORT-SETMARK'), [
      '-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000',
    ]);
    // Portmap DEL: drop the jumps to the per-container chain, then the chain.
    new IptablesBatch(4, ns)
      .deleteRulesWhere('nat', 'CNI-HOSTPORT-DNAT', (r) => ruleTarget(r) === dn)
      .deleteChain('nat', dn)
      .commit();
    assert.doesNotMatch(save(4), new RegExp(dn));
  });

  test('listChains / listRules read the state', () => {
    assert.ok(listChains(4, 'filter', ns).includes('CNI-T1'));
    const rules = listRules(4, 'filter', 'CNI-T1', ns);
    assert.deepEqual(
      rules.map((r) => r.text),
      ['-s 10.9.0.1/32 -j ACCEPT', '-d 10.9.0.0/16 -m comment --comment "my \\"rule\\"" -j DROP'],
    );
  });

  test('a failing line aborts the whole restore (atomic)', () => {
    const b = new IptablesBatch(4, ns)
      .appendUnique('filter', 'CNI-T1', ['-s', '10.9.0.77', '-j', 'ACCEPT'])
      .appendUnique('filter', 'CNI-T1', ['-j', 'CNI-DOES-NOT-EXIST']);
    assert.throws(() => b.commit(), /iptables-restore --noflush failed/);
    assert.equal(rulesOf(save(4, 'filter'), 'CNI-T1').length, 2);
    assert.doesNotMatch(save(4, 'filter'), /10\.9\.0\.77/);
  });

  test('deletes tolerate missing rules and chains; flush + delete chain', () => {
    new IptablesBatch(4, ns)
      .deleteRule('filter', 'CNI-T1', ['-s', '10.200.0.1', '-j', 'ACCEPT'])
      .deleteRule('filter', 'CNI-NOPE', ['-j', 'ACCEPT'])
      .deleteChain('filter', 'CNI-NOPE')
      .flushChain('filter', 'CNI-NOPE')
      .commit();
    new IptablesBatch(4, ns)
      .deleteRule('filter', 'FORWARD', ['-m', 'comment', '--comment', 'cnikit test', '-j', 'CNI-T1'])
      .deleteChain('filter', 'CNI-T1')
      .commit();
    const s = save(4, 'filter');
    assert.doesNotMatch(s, /CNI-T1/);
  });

  test('IPv6 goes through ip6tables-restore', () => {
    new IptablesBatch(6, ns)
      .ensureChain('filter', 'CNI-T6')
      .appendUnique('filter', 'CNI-T6', ['-s', 'fd00::1', '-j', 'ACCEPT'])
      .commit();
    assert.deepEqual(rulesOf(save(6, 'filter'), 'CNI-T6'), ['-A CNI-T6 -s fd00::1/128 -j ACCEPT']);
    assert.doesNotMatch(save(4, 'filter'), /CNI-T6/);
    new IptablesBatch(6, ns).deleteChain('filter', 'CNI-T6').commit();
    assert.doesNotMatch(save(6, 'filter'), /CNI-T6/);
  });

  test('iptablesSave reads the namespace given', () => {
    assert.match(iptablesSave(4, 'nat', ns), /^\*nat$/m);
  });

  test('benchmark: one iptables-restore vs one iptables exec per rule (10 rules)', (t) => {
    const N = 10;
    const rule = (i: number) => [
      '-s',
      `10.77.0.${i}`,
      '-m',
      'comment',
      '--comment',
      `bench ${i}`,
      '-j',
      'ACCEPT',
    ];
    const rounds = 5;
    let batchMs = 0;
    let execMs = 0;
    for (let round = 0; round < rounds; round++) {
      let t0 = performance.now();
      const b = new IptablesBatch(4, ns).ensureChain('filter', 'CNI-BENCH');
      for (let i = 0; i < N; i++) b.appendUnique('filter', 'CNI-BENCH', rule(i));
      b.commit();
      batchMs += performance.now() - t0;
      new IptablesBatch(4, ns).deleteChain('filter', 'CNI-BENCH').commit();

      t0 = performance.now();
      // What go-iptables does: -N, then per rule -C (check) and -A.
      runTool('iptables', ['--wait', '-t', 'filter', '-N', 'CNI-BENCH'], ns);
      for (let i = 0; i < N; i++) {
        runTool('iptables', ['--wait', '-t', 'filter', '-C', 'CNI-BENCH', ...rule(i)], ns);
        runTool('iptables', ['--wait', '-t', 'filter', '-A', 'CNI-BENCH', ...rule(i)], ns);
      }
      execMs += performance.now() - t0;
      assert.equal(rulesOf(save(4, 'filter'), 'CNI-BENCH').length, N);
      new IptablesBatch(4, ns).deleteChain('filter', 'CNI-BENCH').commit();
    }
    t.diagnostic(
      `${N} rules: batch (1 save + 1 restore) ${(batchMs / rounds).toFixed(1)} ms; ` +
        `per-rule execs (1 + ${2 * N} iptables runs) ${(execMs / rounds).toFixed(1)} ms`,
    );
    assert.ok(batchMs < execMs);
  });
});

describe('ipmasq, iptables backend', () => {
  const comment = (net: string, id: string) => `"name: \\"${net}\\" id: \\"${id}\\""`;
  before(() => {
    // Another container stays in place throughout: teardown must not touch it.
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.1.2.9/24', 'fd00::9/64'],
      network: 'mynet',
      ifName: 'eth0',
      containerID: 'other',
      ...ns,
    });
  });

  test('setup produces the reference rules; teardown restores the exact previous state', () => {
    const beforeSnap = env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] });
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.1.2.2/24', 'fd00::2/64'],
      network: 'mynet',
      ifName: 'eth0',
      containerID: 'abc',
      ...ns,
    });
    // Twice: idempotent.
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.1.2.2/24', 'fd00::2/64'],
      network: 'mynet',
      ifName: 'eth0',
      containerID: 'abc',
      ...ns,
    });
    const chain = 'CNI-e88f49d94512ff752ebe6070';
    const s4 = save(4);
    assert.deepEqual(rulesOf(s4, chain), [
      `-A ${chain} -d 10.1.2.0/24 -m comment --comment ${comment('mynet', 'abc')} -j ACCEPT`,
      `-A ${chain} ! -d 224.0.0.0/4 -m comment --comment ${comment('mynet', 'abc')} -j MASQUERADE`,
    ]);
    assert.ok(
      rulesOf(s4, 'POSTROUTING').includes(
        `-A POSTROUTING -s 10.1.2.2/32 -m comment --comment ${comment('mynet', 'abc')} -j ${chain}`,
      ),
    );
    const s6 = save(6);
    assert.deepEqual(rulesOf(s6, chain), [
      `-A ${chain} -d fd00::/64 -m comment --comment ${comment('mynet', 'abc')} -j ACCEPT`,
      `-A ${chain} ! -d ff00::/8 -m comment --comment ${comment('mynet', 'abc')} -j MASQUERADE`,
    ]);
    assert.equal(rulesOf(s6, 'POSTROUTING').filter((l) => l.endsWith(chain)).length, 1);

    teardownIPMasq({
      ips: ['10.1.2.2/24', 'fd00::2/64'],
      network: 'mynet',
      ifName: 'eth0',
      containerID: 'abc',
      ...ns,
    });
    const d = diffSnapshots(
      beforeSnap,
      env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] }),
    );
    assert.deepEqual(d, [], formatDiff(d));
    // Teardown again: nothing left, no error.
    teardownIPMasq({ ips: ['10.1.2.2/24'], network: 'mynet', ifName: 'eth0', containerID: 'abc', ...ns });
  });

  test('teardown with no IPs still removes the chain and its POSTROUTING jumps', () => {
    const beforeSnap = env.sb.snapshot('host', { sections: ['iptables', 'ip6tables'] });
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.1.2.3/24', 'fd00::3/64'],
      network: 'mynet',
      ifName: 'eth0',
      containerID: 'noips',
      ...ns,
    });
    assert.match(save(4), new RegExp(formatChainName('mynet', 'noips')));
    teardownIPMasq({ ips: [], network: 'mynet', ifName: 'eth0', containerID: 'noips', ...ns });
    assert.doesNotMatch(save(4), new RegExp(formatChainName('mynet', 'noips')));
    assert.doesNotMatch(save(6), new RegExp(formatChainName('mynet', 'noips')));
    const d = diffSnapshots(beforeSnap, env.sb.snapshot('host', { sections: ['iptables', 'ip6tables'] }));
    assert.deepEqual(d, [], formatDiff(d));
  });

  test('GC keeps exactly the valid attachments of the network', () => {
    const ids = ['gc-a', 'gc-b', 'gc-c'];
    for (const [i, id] of ids.entries()) {
      setupIPMasq({
        backend: 'iptables',
        ips: [`10.5.0.${i + 2}/24`, `fd05::${i + 2}/64`],
        network: 'gcnet',
        ifName: 'eth0',
        containerID: id,
        ...ns,
      });
    }
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.6.0.2/24'],
      network: 'gcnet2',
      ifName: 'eth0',
      containerID: 'gc-b',
      ...ns,
    });
    gcIPMasq(
      'gcnet',
      [
        { containerID: 'gc-a', ifName: 'eth0' },
        { containerID: 'unrelated', ifName: 'eth0' },
      ],
      ns,
    );
    const s4 = save(4);
    const s6 = save(6);
    assert.match(s4, new RegExp(formatChainName('gcnet', 'gc-a')));
    assert.match(s6, new RegExp(formatChainName('gcnet', 'gc-a')));
    for (const id of ['gc-b', 'gc-c']) {
      assert.doesNotMatch(s4, new RegExp(formatChainName('gcnet', id)));
      assert.doesNotMatch(s6, new RegExp(formatChainName('gcnet', id)));
    }
    assert.match(s4, new RegExp(formatChainName('gcnet2', 'gc-b')), 'other network untouched');
    assert.match(s4, new RegExp(formatChainName('mynet', 'other')), 'other network untouched');
    gcIPMasq('gcnet', [], ns);
    assert.doesNotMatch(save(4), new RegExp(formatChainName('gcnet', 'gc-a')));
    assert.doesNotMatch(save(6), new RegExp(formatChainName('gcnet', 'gc-a')));
    teardownIPMasq({ ips: [], network: 'gcnet2', ifName: 'eth0', containerID: 'gc-b', ...ns });
  });

  test('setup commits one restore per family', () => {
    const start = writes();
    setupIPMasq({
      backend: 'iptables',
      ips: ['10.8.0.2/24', '10.8.1.2/24', 'fd08::2/64'],
      network: 'n',
      ifName: 'eth0',
      containerID: 'x',
      ...ns,
    });
    assert.equal(writes() - start, 2); // one restore per family; a new chain needs no iptables-save
    // iptables-nft: the teardown goes over nfnetlink (one nf_tables transaction per family), no tool at all
    const before = execStats.count;
    teardownIPMasq({ ips: [], network: 'n', ifName: 'eth0', containerID: 'x', ...ns });
    assert.equal(execStats.count - before, 0, 'no iptables-save/iptables-restore on teardown');
    for (const f of [4, 6] as const) {
      assert.doesNotMatch(save(f), new RegExp(formatChainName('n', 'x')), `IPv${f} chain and jumps gone`);
    }
  });
});

describe('concurrent plugin processes', () => {
  const runChild = (args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const c = spawn(
        process.execPath,
        ['--conditions=cnikit-source', '--import', 'tsx', '-e', CHILD, ...args],
        {
          cwd: import.meta.dirname,
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let err = '';
      c.stderr.on('data', (d) => {
        err += d;
      });
      c.on('exit', (status) =>
        status === 0 ? resolve() : reject(new Error(`child exited ${status}: ${err}`)),
      );
    });
  const CHILD = `
    const [verb, worker, backend, netns] = process.argv.slice(1);
    import('@cnikit/firewall').then((fw) => {
      for (let i = 0; i < 5; i++) {
        const a = { ips: ['10.44.' + worker + '.' + (i + 2) + '/24', 'fd44::' + worker + ':' + (i + 2) + '/64'],
          network: 'race', ifName: 'eth0', containerID: 'w' + worker + '-' + i, netns };
        if (verb === 'setup') fw.setupIPMasq({ backend, ...a }); else fw.teardownIPMasq(a);
      }
    });`;
  const script = (verb: 'setup' | 'teardown', worker: number, backend: string) => [
    verb,
    String(worker),
    backend,
    env.sb.host.path,
  ];

  for (const backend of ['iptables', 'nftables']) {
    test(`4 processes × 5 containers set up and torn down in parallel (${backend})`, async () => {
      const before = env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] });
      await Promise.all([0, 1, 2, 3].map((w) => runChild(script('setup', w, backend))));
      if (backend === 'iptables') {
        const s4 = save(4);
        for (let w = 0; w < 4; w++) {
          for (let i = 0; i < 5; i++) {
            const chain = formatChainName('race', `w${w}-${i}`);
            assert.equal(rulesOf(s4, chain).length, 2, chain);
            assert.equal(rulesOf(s4, 'POSTROUTING').filter((l) => l.endsWith(`-j ${chain}`)).length, 1);
            assert.equal(rulesOf(save(6), chain).length, 2);
          }
        }
      } else {
        const rules = nftList(['chain', 'inet', 'cni_plugins_masquerade', 'masq_checks'], ns).rules;
        assert.equal(rules.filter((r) => r.comment?.includes('net: race,')).length, 40);
      }
      await Promise.all([0, 1, 2, 3].map((w) => runChild(script('teardown', w, backend))));
      const after = env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] });
      const d = diffSnapshots(before, after).filter(
        (x) => backend === 'iptables' || x.section === 'nftables',
      );
      if (backend === 'iptables') assert.deepEqual(d, [], formatDiff(d));
      else
        assert.ok(
          d.every((x) => x.added.every((l) => !l.includes('net: race,'))),
          formatDiff(d),
        );
    });
  }
});

describe('ipmasq, nftables backend', () => {
  const T = 'inet cni_plugins_masquerade';
  const listText = () => env.sb.exec('nft', ['list', 'table', 'inet', 'cni_plugins_masquerade']).stdout;
  const masqRules = () =>
    nftList(['chain', 'inet', 'cni_plugins_masquerade', 'masq_checks'], ns).rules.map((r) => r.comment);

  test('reference table, chains and rules; teardown restores the previous state', () => {
    setupIPMasq({
      backend: 'nftables',
      ips: ['192.168.1.1/24'],
      network: 'unit-test',
      ifName: 'eth0',
      containerID: 'one',
      ...ns,
    });
    const beforeSnap = env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] });
    setupIPMasq({
      backend: 'nftables',
      ips: ['192.168.1.2/24', '2001:db8::2/64'],
      network: 'unit-test',
      ifName: 'eth0',
      containerID: 'two',
      ...ns,
    });
    const text = listText();
    assert.match(text, /comment "Masquerading for plugins from github.com\/containernetworking\/plugins"/);
    assert.match(
      text,
      /chain masq_checks \{\n\s+comment "Masquerade traffic from certain IPs to any \(non-multicast\) IP outside their subnet"/,
    );
    assert.match(
      text,
      /chain postrouting \{\n\s+type nat hook postrouting priority srcnat; policy accept;\n\s+ip daddr 224.0.0.0\/4 return\n\s+ip6 daddr ff00::\/8 return\n\s+goto masq_checks\n/,
    );
    assert.match(
      text,
      /ip saddr 192.168.1.2 ip daddr != 192.168.1.0\/24 masquerade comment "6fd94d501e58f0aa-d750b2c8f0f25d5f, net: unit-test, if: eth0, id: two"/,
    );
    assert.match(
      text,
      /ip6 saddr 2001:db8::2 ip6 daddr != 2001:db8::\/64 masquerade comment "6fd94d501e58f0aa-d750b2c8f0f25d5f, net: unit-test, if: eth0, id: two"/,
    );
    assert.equal((text.match(/goto masq_checks/g) ?? []).length, 1);
    teardownIPMasq({
      ips: ['192.168.1.2/24', '2001:db8::2/64'],
      network: 'unit-test',
      ifName: 'eth0',
      containerID: 'two',
      ...ns,
    });
    const d = diffSnapshots(
      beforeSnap,
      env.sb.snapshot('host', { sections: ['iptables', 'ip6tables', 'nftables'] }),
    );
    assert.deepEqual(d, [], formatDiff(d));
    assert.deepEqual(masqRules(), ['6fd94d501e58f0aa-287fc69eff0574a2, net: unit-test, if: eth0, id: one']);
    teardownIPMasq({ ips: [], network: 'unit-test', ifName: 'eth0', containerID: 'one', ...ns });
    assert.deepEqual(masqRules(), []);
  });

  test('upstream scenario: re-setup replaces, reused IP survives the old owner, GC keeps valid', () => {
    const containers = [
      { network: 'unit-test', ifName: 'eth0', containerID: 'one', ips: ['192.168.1.1/24'] },
      { network: 'unit-test', ifName: 'eth0', containerID: 'two', ips: ['192.168.1.2/24', '2001:db8::2/64'] },
      { network: 'unit-test', ifName: 'eth0', containerID: 'three', ips: ['192.168.99.5/24'] },
      {
        network: 'alternate',
        ifName: 'net1',
        containerID: 'three',
        ips: [
          '10.0.0.5/24',
          '10.0.0.6/24',
          '10.0.1.7/24',
          '2001:db8::5/64',
          '2001:db8::6/64',
          '2001:db8:1::7/64',
        ],
      },
    ];
    for (const c of containers) setupIPMasq({ backend: 'nftables', ...c, ...ns });
    setupIPMasq({ backend: 'nftables', ...containers[0]!, ...ns }); // again: replaced, not duplicated
    assert.equal(masqRules().length, 1 + 2 + 1 + 6);
    setupIPMasq({
      backend: 'nftables',
      network: 'unit-test',
      ifName: 'eth0',
      containerID: 'four',
      ips: ['192.168.1.1/24'],
      ...ns,
    });
    teardownIPMasq({
      network: 'unit-test',
      ifName: 'eth0',
      containerID: 'one',
      ips: ['192.168.1.1/24'],
      ...ns,
    });
    assert.match(
      listText(),
      /ip saddr 192.168.1.1 ip daddr != 192.168.1.0\/24 masquerade comment "6fd94d501e58f0aa-e766de567ef6c543, net: unit-test, if: eth0, id: four"/,
    );
    assert.equal(masqRules().filter((c) => c?.endsWith('id: one')).length, 0);
    gcIPMasq(
      'unit-test',
      [
        { ifName: 'eth0', containerID: 'two' },
        { ifName: 'eth0', containerID: 'three' },
        { ifName: 'eth0', containerID: 'one' },
      ],
      ns,
    );
    gcIPMasq('alternate', [{ ifName: 'net1', containerID: 'three' }], ns);
    const left = masqRules();
    assert.equal(left.length, 2 + 1 + 6);
    assert.ok(!left.some((c) => c?.endsWith('id: four')));
    gcIPMasq('unit-test', [], ns);
    gcIPMasq('alternate', [], ns);
    assert.deepEqual(masqRules(), []);
    assert.match(listText(), /goto masq_checks/, 'table and chains stay, like the reference');
    void T;
  });
});

describe('nft batch', () => {
  test('one transaction: table, base chain, set, map, elements, rules; read back with handles', () => {
    nftBatch(ns)
      .addTable('ip', 'cnikit_t', { comment: 'test table' })
      .addChain({
        family: 'ip',
        table: 'cnikit_t',
        name: 'pre',
        type: 'nat',
        hook: 'prerouting',
        priority: -100,
      })
      .addSet('ip', 'cnikit_t', 'allowed', { type: 'ipv4_addr', flags: ['interval'] })
      .addMap('ip', 'cnikit_t', 'hostports_map', {
        type: 'inet_proto . inet_service : ipv4_addr . inet_service',
      })
      .addElements('ip', 'cnikit_t', 'allowed', ['10.0.0.0/24', '192.168.7.7'])
      .addElements('ip', 'cnikit_t', 'hostports_map', ['tcp . 8080 : 10.0.0.2 . 80'])
      .addRule(
        'ip',
        'cnikit_t',
        'pre',
        'ip saddr @allowed dnat ip to meta l4proto . th dport map @hostports_map',
        {
          comment: 'c1',
        },
      )
      .addRule('ip', 'cnikit_t', 'pre', 'tcp dport 9999 return', { comment: 'c2' })
      .commit();
    const l = nftList(['table', 'ip', 'cnikit_t'], ns);
    assert.deepEqual(
      l.rules.map((r) => r.comment),
      ['c1', 'c2'],
    );
    assert.ok(l.rules.every((r) => Number.isInteger(r.handle) && r.handle > 0));
    assert.ok(l.objects.some((o) => 'set' in o) && l.objects.some((o) => 'map' in o));
    assert.match(
      env.sb.exec('nft', ['list', 'set', 'ip', 'cnikit_t', 'allowed']).stdout,
      /elements = \{ 10\.0\.0\.0\/24, 192\.168\.7\.7 \}/,
    );
    // Delete one rule by handle.
    nftBatch(ns).deleteRule('ip', 'cnikit_t', 'pre', l.rules[1]!.handle).commit();
    assert.deepEqual(
      nftList(['chain', 'ip', 'cnikit_t', 'pre'], ns).rules.map((r) => r.comment),
      ['c1'],
    );
  });

  test('a failing statement aborts the whole transaction', () => {
    const before = nftList(['ruleset'], ns).rules.length;
    assert.throws(
      () =>
        nftBatch(ns)
          .addRule('ip', 'cnikit_t', 'pre', 'tcp dport 1 return', { comment: 'should not stay' })
          .deleteRule('ip', 'cnikit_t', 'pre', 999999)
          .commit(),
      /nft -f - failed/,
    );
    assert.equal(nftList(['ruleset'], ns).rules.length, before);
    nftBatch(ns).deleteTable('ip', 'cnikit_t').commit();
    assert.deepEqual(nftList(['table', 'ip', 'cnikit_t'], ns).tables, []);
  });
});

describe('backend selection and tool errors', () => {
  test('unknown backend', () => {
    assert.throws(
      () =>
        setupIPMasq({ backend: 'ebtables', ips: [], network: 'n', ifName: 'eth0', containerID: 'x', ...ns }),
      { message: 'unknown ipmasq backend "ebtables"' },
    );
    assert.equal(resolveBackend('nftables'), 'nftables');
  });
  test('invalid IPs are rejected', () => {
    assert.throws(
      () =>
        setupIPMasq({
          backend: 'iptables',
          ips: ['10.0.0.300/24'],
          network: 'n',
          ifName: 'eth0',
          containerID: 'x',
          ...ns,
        }),
      /invalid IP address for masquerading: "10.0.0.300\/24"/,
    );
  });
  test('detection: iptables here; nftables when only nft is in PATH; support probes', () => {
    assert.equal(detectBackend(ns), 'iptables');
    assert.equal(supportsIPTables(4, ns), true);
    assert.equal(supportsNFTables(ns), true);
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-fw-path-'));
    symlinkSync('/usr/sbin/nft', join(dir, 'nft'));
    const savedPath = process.env.PATH;
    try {
      process.env.PATH = dir;
      assert.equal(supportsIPTables(4, ns), false);
      assert.equal(detectBackend(ns), 'nftables');
      process.env.PATH = join(dir, 'empty');
      assert.equal(supportsNFTables(ns), false);
      assert.equal(detectBackend(ns), 'iptables');
      assert.throws(
        () => new IptablesBatch(4, ns).ensureChain('filter', 'X').commit(),
        (e: unknown) =>
          e instanceof ToolNotFoundError &&
          e.message === 'iptables-restore not found in PATH: install it (Debian/Ubuntu package "iptables")',
      );
      assert.throws(
        () => nftBatch(ns).addTable('inet', 'x').commit(),
        /nft not found in PATH: install it \(Debian\/Ubuntu package "nftables"\)/,
      );
      // Teardown with no tools at all: nothing supported, nothing reported.
      teardownIPMasq({ ips: ['10.0.0.2/24'], network: 'n', ifName: 'eth0', containerID: 'x', ...ns });
      // auto setup tries iptables first; without iptables it falls back to nftables (as detection decides)
      process.env.PATH = dir;
      const auto = { ips: ['10.0.0.7/24'], network: 'auto-net', ifName: 'eth0', containerID: 'auto', ...ns };
      setupIPMasq(auto);
      assert.equal(
        nftListRules('inet', IPMASQ_NFT_TABLE, IPMASQ_NFT_CHAIN, ns).filter((r) =>
          r.comment?.endsWith('id: auto'),
        ).length,
        1,
      );
      teardownIPMasq(auto);
      assert.equal(
        nftListRules('inet', IPMASQ_NFT_TABLE, IPMASQ_NFT_CHAIN, ns).filter((r) =>
          r.comment?.endsWith('id: auto'),
        ).length,
        0,
      );
    } finally {
      process.env.PATH = savedPath;
      rmSync(dir, { recursive: true, force: true });
    }
  });
  test('a path that is not a network namespace is refused', () => {
    assert.throws(
      () => runTool('true', [], { netns: '/etc/hostname' }),
      /unknown FS magic|not a network namespace/,
    );
    assert.throws(() => runTool('true', [], { netns: '/run/netns/cnikit-does-not-exist' }), /no such file/i);
  });
});

describe('spoof check (nftables bridge family)', () => {
  const table = () => env.sb.exec('nft', ['list', 'table', 'bridge', 'nat'], { check: false }).stdout;
  test('rules present after setup, gone after teardown', () => {
    const refID = 'c0ffee-eth0';
    setupSpoofCheck({ iface: 'veth1234', mac: '0A:58:0a:f4:00:02', refID, ...ns });
    setupSpoofCheck({ iface: 'veth1234', mac: '0a:58:0a:f4:00:02', refID, ...ns }); // idempotent
    setupSpoofCheck({ iface: 'vethother', mac: '0A-58-0A-F4-00-03', refID: 'other-eth0', ...ns }); // dash form
    const t = table();
    // Bridge family: priority -300 is printed as "dstnat".
    assert.match(t, /chain PREROUTING \{\n\s+type filter hook prerouting priority dstnat; policy accept;/);
    const base = nftList(['chain', 'bridge', 'nat', 'PREROUTING'], ns).chains[0];
    assert.equal(base?.prio, -300);
    assert.equal(
      (t.match(/iifname "veth1234" jump cni-br-iface-c0ffee-eth0 comment "macspoofchk-c0ffee-eth0"/g) ?? [])
        .length,
      1,
    );
    assert.match(
      t,
      /chain cni-br-iface-c0ffee-eth0 \{\n\s+jump cni-br-iface-c0ffee-eth0-mac comment "macspoofchk-c0ffee-eth0"\n\s+\}/,
    );
    assert.match(
      t,
      /chain cni-br-iface-c0ffee-eth0-mac \{\n\s+ether saddr 0a:58:0a:f4:00:02 return comment "macspoofchk-c0ffee-eth0"\n\s+drop comment "macspoofchk-c0ffee-eth0"\n\s+\}/,
    );
    assert.match(
      t,
      /ether saddr 0a:58:0a:f4:00:03 return comment "macspoofchk-other-eth0"/,
      'normalised MAC',
    );
    teardownSpoofCheck(refID, ns);
    const after = table();
    assert.doesNotMatch(after, /c0ffee/);
    assert.match(after, /chain PREROUTING/, 'table and base chain stay');
    assert.match(after, /cni-br-iface-other-eth0-mac/, 'other port untouched');
    teardownSpoofCheck(refID, ns); // already gone: fine
    teardownSpoofCheck('other-eth0', ns);
    assert.doesNotMatch(table(), /other-eth0/);
  });
  test('bad input', () => {
    assert.throws(
      () => setupSpoofCheck({ iface: 'v1', mac: 'zz:58:0a:f4:00:02', refID: 'r', ...ns }),
      /invalid MAC/,
    );
    assert.throws(
      () => setupSpoofCheck({ iface: 'v1', mac: '0a:58-0a:f4:00:02', refID: 'r', ...ns }),
      /invalid MAC/,
    );
    assert.throws(
      () => setupSpoofCheck({ iface: 'v"1', mac: '0a:58:0a:f4:00:02', refID: 'r', ...ns }),
      /invalid interface name/,
    );
    assert.throws(
      () => setupSpoofCheck({ iface: 'v1', mac: '0a:58:0a:f4:00:02', refID: 'r x', ...ns }),
      /invalid nftables chain name/,
    );
  });
});
