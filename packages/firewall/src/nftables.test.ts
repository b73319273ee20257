import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NftBatch, nftQuote, parseNftJson } from './nftables.ts';

describe('nft batch rendering', () => {
  test('tables, chains (base and regular, with comments), rules, deletes', () => {
    const b = new NftBatch()
      .addTable('inet', 'cni_plugins_masquerade', { comment: 'T c' })
      .addChain({ family: 'inet', table: 'cni_plugins_masquerade', name: 'masq_checks', comment: 'C c' })
      .addChain({
        family: 'inet',
        table: 'cni_plugins_masquerade',
        name: 'postrouting',
        type: 'nat',
        hook: 'postrouting',
        priority: 100,
      })
      .addChain({
        family: 'bridge',
        table: 'nat',
        name: 'PREROUTING',
        type: 'filter',
        hook: 'prerouting',
        priority: -300,
        policy: 'accept',
      })
      .flushChain('inet', 'cni_plugins_masquerade', 'postrouting')
      .addRule('inet', 'cni_plugins_masquerade', 'postrouting', 'goto masq_checks')
      .insertRule('inet', 'cni_plugins_masquerade', 'postrouting', 'ip daddr 1.2.3.4 return', {
        comment: 'x',
      })
      .deleteRule('inet', 'cni_plugins_masquerade', 'masq_checks', 7)
      .deleteChain('bridge', 'nat', 'cni-br-iface-abc.1-eth0')
      .deleteTable('ip', 'old');
    assert.equal(b.size, 10);
    assert.equal(
      b.render(),
      [
        'add table inet cni_plugins_masquerade { comment "T c" ; }',
        'add chain inet cni_plugins_masquerade masq_checks { comment "C c" ; }',
        'add chain inet cni_plugins_masquerade postrouting { type nat hook postrouting priority 100 ; }',
        'add chain bridge nat PREROUTING { type filter hook prerouting priority -300 ; policy accept ; }',
        'flush chain inet cni_plugins_masquerade postrouting',
        'add rule inet cni_plugins_masquerade postrouting goto masq_checks',
        'insert rule inet cni_plugins_masquerade postrouting ip daddr 1.2.3.4 return comment "x"',
        'delete rule inet cni_plugins_masquerade masq_checks handle 7',
        'delete chain bridge nat cni-br-iface-abc.1-eth0',
        'delete table ip old',
        '',
      ].join('\n'),
    );
    assert.deepEqual(new NftBatch().commit(), { script: '' });
  });

  test('names, strings and rule text are validated', () => {
    const b = new NftBatch();
    assert.throws(() => b.addTable('inet', '1abc'), /invalid nftables table name/);
    assert.throws(() => b.addTable('foo' as 'ip', 'x'), /invalid nftables family/);
    assert.throws(() => b.addChain({ family: 'ip', table: 't', name: 'a b' }), /invalid nftables chain name/);
    assert.throws(() => b.addChain({ family: 'ip', table: 't', name: 'c', type: 'nat' }), /base chain needs/);
    assert.throws(() => b.addRule('ip', 't', 'c', 'accept; flush ruleset'), /invalid nftables rule text/);
    assert.throws(() => b.addRule('ip', 't', 'c', 'accept', { comment: 'a"b' }), /cannot be used/);
    assert.throws(() => b.deleteRule('ip', 't', 'c', 0), /handle/);
    assert.throws(() => nftQuote('x\ny'), TypeError);
    assert.equal(b.size, 0);
  });
});

describe('nft sets, maps, elements, raw', () => {
  test('rendering and validation', () => {
    const b = new NftBatch()
      .addSet('ip', 't', 'ips', { type: 'ipv4_addr', flags: ['interval'], comment: 'c' })
      .addMap('ip', 't', 'ports', { type: 'inet_proto . inet_service : ipv4_addr . inet_service' })
      .addElements('ip', 't', 'ips', ['10.0.0.0/24', '10.1.0.1'])
      .addElements('ip', 't', 'ips', [])
      .deleteElements('ip', 't', 'ports', ['tcp . 80'])
      .raw('add rule ip t c ip saddr @ips accept');
    assert.equal(
      b.render(),
      [
        'add set ip t ips { type ipv4_addr ; flags interval ; comment "c" ; }',
        'add map ip t ports { type inet_proto . inet_service : ipv4_addr . inet_service ; }',
        'add element ip t ips { 10.0.0.0/24, 10.1.0.1 }',
        'delete element ip t ports { tcp . 80 }',
        'add rule ip t c ip saddr @ips accept',
        '',
      ].join('\n'),
    );
    assert.throws(
      () => new NftBatch().addSet('ip', 't', 's', { type: 'ipv4_addr; flush ruleset' }),
      /invalid nftables set type/,
    );
    assert.throws(
      () => new NftBatch().addElements('ip', 't', 's', ['1.2.3.4 }']),
      /invalid nftables element/,
    );
    assert.throws(() => new NftBatch().raw('flush ruleset\nadd table x'), /invalid nftables statement/);
  });
});

describe('nft JSON parsing', () => {
  test('tables, chains, rules with handles and comments', () => {
    const json = JSON.stringify({
      nftables: [
        { metainfo: { version: '1.0.6', json_schema_version: 1 } },
        { table: { family: 'inet', name: 't', handle: 6 } },
        {
          chain: {
            family: 'inet',
            table: 't',
            name: 'c',
            handle: 1,
            type: 'nat',
            hook: 'postrouting',
            prio: 100,
            policy: 'accept',
          },
        },
        {
          rule: {
            family: 'inet',
            table: 't',
            chain: 'c',
            handle: 2,
            comment: 'hi',
            expr: [{ masquerade: null }],
          },
        },
        { rule: { family: 'inet', table: 't', chain: 'c', handle: 3 } },
        { set: { family: 'inet', table: 't', name: 's' } },
      ],
    });
    const l = parseNftJson(json);
    assert.equal(l.tables[0]!.handle, 6);
    assert.equal(l.chains[0]!.prio, 100);
    assert.deepEqual(
      l.rules.map((r) => [r.handle, r.comment, r.expr.length]),
      [
        [2, 'hi', 1],
        [3, undefined, 0],
      ],
    );
    assert.equal(l.objects.length, 5);
    assert.deepEqual(parseNftJson('').rules, []);
  });
});
