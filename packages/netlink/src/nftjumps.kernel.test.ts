// nftRemoveJumpChains against the real kernel: rules made by iptables-nft (the machine's iptables) inside a
// namespace this file creates, removed over nfnetlink, checked with iptables-save.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withNetns } from './netns.ts';
import { nftRemoveJumpChains } from './nftjumps.ts';
import { run, withTestNs } from './testns.ts';

const save = (ns: string, bin = 'iptables-save') =>
  run('ip', ['netns', 'exec', ns, bin, '-t', 'nat'])
    .split('\n')
    .filter((l) => l.startsWith('-A ') || l.startsWith(':CNI'))
    .sort();

describe('nftRemoveJumpChains (iptables-nft rulesets)', () => {
  test('deletes exactly the jumps to the chain, flushes and deletes it, in one transaction; idempotent', () => {
    withTestNs(1, (ns) => {
      const ipt = (bin: string, args: string[]) =>
        run('ip', ['netns', 'exec', ns.name, bin, '-t', 'nat', ...args]);
      for (const [bin, net] of [
        ['iptables', '10.9.0.0/24'],
        ['ip6tables', 'fd09::/64'],
      ] as const) {
        ipt(bin, ['-N', 'CNI-aaaa']);
        ipt(bin, ['-N', 'CNI-bbbb']);
        ipt(bin, ['-A', 'CNI-aaaa', '-d', net, '-j', 'ACCEPT']);
        ipt(bin, ['-A', 'CNI-aaaa', '!', '-d', net, '-j', 'MASQUERADE']);
        ipt(bin, [
          '-A',
          'POSTROUTING',
          '-s',
          net,
          '-j',
          'CNI-aaaa',
          '-m',
          'comment',
          '--comment',
          'name: "n" id: "a"',
        ]);
        ipt(bin, [
          '-A',
          'POSTROUTING',
          '-s',
          net,
          '-j',
          'CNI-bbbb',
          '-m',
          'comment',
          '--comment',
          'name: "n" id: "b"',
        ]);
        ipt(bin, ['-A', 'POSTROUTING', '-j', 'CNI-aaaa']); // a second jump to the same chain
        ipt(bin, ['-A', 'POSTROUTING', '-o', 'eth9', '-j', 'MASQUERADE']);
      }
      for (const family of [4, 6] as const) {
        const r = withNetns(ns.path, () =>
          nftRemoveJumpChains(family, 'nat', [
            { from: 'POSTROUTING', target: 'CNI-aaaa' },
            { from: 'CNI-NOPE', target: 'CNI-absent' },
          ]),
        );
        assert.equal(r, true);
      }
      const net = { 4: '10.9.0.0/24', 6: 'fd09::/64' } as const;
      for (const [family, bin] of [
        [4, 'iptables-save'],
        [6, 'ip6tables-save'],
      ] as const) {
        assert.deepEqual(
          save(ns.name, bin),
          [
            ':CNI-bbbb - [0:0]',
            `-A POSTROUTING -o eth9 -j MASQUERADE`,
            `-A POSTROUTING -s ${net[family]} -m comment --comment "name: \\"n\\" id: \\"b\\"" -j CNI-bbbb`,
          ].sort(),
          `IPv${family}: only the other chain, its jump and the unrelated rule stay`,
        );
      }
      // nothing of ours left: still true, nothing changed
      assert.equal(
        withNetns(ns.path, () =>
          nftRemoveJumpChains(4, 'nat', [{ from: 'POSTROUTING', target: 'CNI-aaaa' }]),
        ),
        true,
      );
      assert.equal(save(ns.name).length, 3);
    });
  });

  test('a namespace without any nat table: true, nothing to do', () => {
    withTestNs(1, (ns) => {
      assert.equal(
        withNetns(ns.path, () => nftRemoveJumpChains(4, 'nat', [{ from: 'POSTROUTING', target: 'CNI-x' }])),
        true,
      );
    });
  });
});
