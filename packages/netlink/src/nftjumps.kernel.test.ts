// nftRemoveJumpChains against the real kernel: rules made by iptables-nft (the machine's iptables) inside a
// namespace this file creates, removed over nfnetlink, checked with iptables-save.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { withNetns } from './netns.ts';
import { nftChainJumps, nftRemoveJumpChains } from './nftjumps.ts';
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

  test('nftChainJumps with `until` stops reading a long chain once the jumps looked for were seen', () => {
    withTestNs(1, (ns) => {
      // POSTROUTING: a shared jump inserted at the top, then 400 per-container jumps (one restore)
      let script = '*nat\n:CNI-SHARED - [0:0]\n';
      for (let i = 0; i < 400; i++) script += `:CNI-c${i} - [0:0]\n`;
      for (let i = 0; i < 400; i++)
        script += `-A POSTROUTING -s 10.9.${i >> 8}.${i & 255}/32 -m comment --comment "name: \\"n\\" id: \\"c${i}\\"" -j CNI-c${i}\n`;
      script += '-I POSTROUTING 1 -m comment --comment "shared" -j CNI-SHARED\nCOMMIT\n';
      const r = spawnSync('ip', ['netns', 'exec', ns.name, 'iptables-restore', '--noflush'], {
        input: script,
      });
      assert.equal(r.status, 0, String(r.stderr));
      const whole = withNetns(ns.path, () => nftChainJumps(4, 'nat', 'POSTROUTING'));
      assert.equal(whole?.rules, 401);
      assert.equal(whole?.jumps[0], 'CNI-SHARED');
      const top = withNetns(ns.path, () => nftChainJumps(4, 'nat', 'POSTROUTING', { until: ['CNI-SHARED'] }));
      assert.ok(top, 'an answer');
      assert.ok(top.jumps.includes('CNI-SHARED'), 'the shared jump is seen');
      assert.ok(top.rules < 401, `read ${top.rules} of 401 rules`);
      // a jump that is not there: the whole chain is read
      const none = withNetns(ns.path, () => nftChainJumps(4, 'nat', 'POSTROUTING', { until: ['CNI-NOPE'] }));
      assert.equal(none?.rules, 401);
      // the socket dropped mid-dump leaves the namespace usable: a full dump again
      assert.equal(withNetns(ns.path, () => nftChainJumps(4, 'nat', 'POSTROUTING'))?.rules, 401);
    });
  });
});
