/** firewall configuration, rule texts and records: pure tests (no root). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import {
  adminChainProblem,
  adminJumpRule,
  bridgeName,
  forwardJumpRule,
  goList,
  hostRoute,
  ingressPolicyOf,
  ipRules,
  isolationSteps,
  parseConf,
  resultIPs,
} from './config.ts';
import { formatRecord, parseRecord, recordName } from './records.ts';

describe('parseConf', () => {
  test('defaults', () => {
    const c = parseConf({ name: 'n', type: 'firewall' });
    assert.equal(c.backend, undefined);
    assert.equal(c.adminChain, 'CNI-ADMIN');
    assert.equal(c.zone, 'trusted');
    assert.equal(c.ingressPolicy, 'open');
    assert.equal(c.dataDir, '/var/lib/cni/firewall');
  });

  test('backend: iptables / firewalld as given, anything else is auto (the reference)', () => {
    assert.equal(parseConf({ backend: 'iptables' }).backend, 'iptables');
    assert.equal(parseConf({ backend: 'firewalld' }).backend, 'firewalld');
    assert.equal(parseConf({ backend: 'nftables' }).backend, undefined);
    assert.equal(parseConf({ backend: '' }).backend, undefined);
  });

  test('ingress policies; an unknown one is kept as a code-7 error for the handlers', () => {
    assert.equal(parseConf({ ingressPolicy: 'open' }).ingressPolicy, 'open');
    assert.equal(parseConf({ ingressPolicy: 'same-bridge' }).ingressPolicy, 'same-bridge');
    assert.equal(parseConf({ ingressPolicy: 'isolated' }).ingressPolicy, 'isolated');
    const c = parseConf({ ingressPolicy: 'Isolated' });
    assert.throws(
      () => ingressPolicyOf(c),
      (e: unknown) => CniError.is(e) && e.code === 7 && e.msg === 'unknown ingress policy: "Isolated"',
    );
  });

  test('type errors are code 7 "failed to load netconf: …"', () => {
    for (const key of ['backend', 'iptablesAdminChainName', 'firewalldZone', 'ingressPolicy', 'dataDir']) {
      assert.throws(
        () => parseConf({ [key]: 1 }),
        (e: unknown) => CniError.is(e) && e.code === 7 && e.msg.startsWith(`failed to load netconf: ${key}`),
        key,
      );
    }
  });

  test('admin chain names', () => {
    for (const ok of ['CNI-ADMIN', 'MY_ADMIN', 'a', 'x'.repeat(28), 'lower.case:1', 'accept'])
      assert.equal(adminChainProblem(ok), undefined, ok);
    for (const bad of [
      'x'.repeat(29),
      'a b',
      '-a',
      '!a',
      'ACCEPT',
      'MASQUERADE',
      'INPUT',
      'CNI-FORWARD',
      'a"b',
      "a'b",
      'a\\b',
      'ü',
      'CNI-ISOLATION-STAGE-1',
    ])
      assert.ok(adminChainProblem(bad), bad);
    assert.throws(
      () => parseConf({ iptablesAdminChainName: 'DROP' }),
      (e: unknown) =>
        CniError.is(e) &&
        e.code === 7 &&
        e.msg ===
          'invalid iptablesAdminChainName "DROP": an iptables chain name is the name of an iptables target',
    );
  });
});

describe('addresses and rules', () => {
  test('host routes like the reference ipString', () => {
    assert.deepEqual(hostRoute('10.1.2.3/24'), { family: 4, ip: '10.1.2.3/32' });
    assert.deepEqual(hostRoute('FD00:0::3/64'), { family: 6, ip: 'fd00::3/128' });
    assert.deepEqual(hostRoute('::ffff:10.0.0.1/120'), { family: 4, ip: '10.0.0.1/32' });
    assert.equal(hostRoute('nonsense'), undefined);
    assert.deepEqual(
      resultIPs({
        cniVersion: '1.0.0',
        ips: [{ address: '10.0.0.2/24' }, { address: 'fd00::2/64' }, { address: '10.0.0.2/16' }],
      }),
      [
        { family: 4, ip: '10.0.0.2/32' },
        { family: 6, ip: 'fd00::2/128' },
      ],
    );
    assert.deepEqual(resultIPs(undefined), []);
  });

  test('rule texts and Go %v formatting', () => {
    assert.equal(
      goList(forwardJumpRule()),
      '[-m comment --comment CNI firewall plugin rules -j CNI-FORWARD]',
    );
    assert.equal(
      goList(adminJumpRule('X')),
      '[-m comment --comment CNI firewall plugin admin overrides -j X]',
    );
    assert.deepEqual(ipRules('10.0.0.2/32'), [
      ['-d', '10.0.0.2/32', '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
      ['-s', '10.0.0.2/32', '-j', 'ACCEPT'],
    ]);
  });

  test('isolation steps in the reference order', () => {
    const same = isolationSteps('br0', 'same-bridge');
    assert.deepEqual(
      same.map((s) => `${s.chain} ${s.first ? 'I' : 'A'} ${s.rule.join(' ')}`),
      [
        'FORWARD I -j CNI-ISOLATION-STAGE-1 -m comment --comment CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)',
        'CNI-ISOLATION-STAGE-1 I -i br0 ! -o br0 -j CNI-ISOLATION-STAGE-2 -m comment --comment CNI firewall plugin rules (ingressPolicy: same-bridge)',
        'CNI-ISOLATION-STAGE-1 A -j RETURN -m comment --comment CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)',
        'CNI-ISOLATION-STAGE-2 I -o br0 -j DROP -m comment --comment CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)',
        'CNI-ISOLATION-STAGE-2 A -j RETURN -m comment --comment CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)',
      ],
    );
    const iso = isolationSteps('br0', 'isolated');
    assert.equal(iso.length, 6);
    assert.deepEqual(iso[2]!.rule.slice(0, 6), ['-i', 'br0', '-o', 'br0', '-j', 'DROP']);
  });

  test("bridge name from prevResult.interfaces[0], with the reference's errors", () => {
    const r = (interfaces: unknown) => ({ cniVersion: '1.0.0', interfaces }) as never;
    assert.equal(bridgeName(r([{ name: 'cni0' }, { name: 'veth' }]), 'same-bridge'), 'cni0');
    assert.throws(
      () => bridgeName(r([]), 'isolated'),
      /interface needs to be set for ingress policy "isolated"/,
    );
    assert.throws(() => bridgeName(r(undefined), 'isolated'), /interface needs to be set/);
    assert.throws(
      () => bridgeName(r([{ name: '' }]), 'isolated'),
      /^CniError: got empty bridge name$|got empty bridge name/,
    );
    assert.throws(() => bridgeName(r([null]), 'isolated'), /got nil interface/);
    assert.throws(() => bridgeName(r([{ name: 'a"b' }]), 'isolated'), /invalid bridge name/);
    assert.throws(() => bridgeName(r([{ name: 'x'.repeat(16) }]), 'isolated'), /invalid bridge name/);
  });
});

describe('records', () => {
  test('names cannot collide and always fit a file name', () => {
    assert.equal(recordName('net', 'ctr', 'eth0'), 'net:ctr:eth0.json');
    assert.notEqual(recordName('a_b', 'c', 'eth0'), recordName('a', 'b_c', 'eth0'));
    const long = recordName('n', 'c'.repeat(300), 'eth0');
    assert.match(long, /^h-[0-9a-f]{64}\.json$/);
    assert.equal(long, recordName('n', 'c'.repeat(300), 'eth0'));
    assert.notEqual(long, recordName('n', 'c'.repeat(300), 'eth1'));
  });

  test('format and parse round trip; malformed records are refused', () => {
    const rec = {
      network: 'n',
      containerID: 'c',
      ifname: 'eth0',
      backend: 'firewalld' as const,
      zone: 'trusted',
      ips: ['10.0.0.2/32'],
    };
    assert.deepEqual(parseRecord(formatRecord(rec)), rec);
    assert.equal(parseRecord(''), undefined);
    assert.equal(parseRecord('[]'), undefined);
    assert.equal(parseRecord(JSON.stringify({ ...rec, backend: 'nft' })), undefined);
    assert.equal(parseRecord(JSON.stringify({ ...rec, ips: [1] })), undefined);
    assert.equal(parseRecord(JSON.stringify({ ...rec, network: undefined })), undefined);
  });
});
