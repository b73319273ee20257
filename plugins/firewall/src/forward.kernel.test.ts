// The firewall plugin's per-address rules removed over nfnetlink: exactly the reference's two rules per address,
// made by the machine's iptables (iptables-nft) in a sandbox namespace; look-alike rules stay.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { execStats } from '@cnikit/firewall/testing';
import { sandboxForFile } from '@cnikit/testing';
import { removePerIPRulesFast } from './forward.ts';

const env = sandboxForFile();
const ipt = (bin: string, args: string[]) => env.sb.exec(bin, args, { ns: 'host' });
const rules = (bin: string) =>
  env.sb
    .exec(bin, ['-t', 'filter', '-S', 'CNI-FORWARD'], { ns: 'host' })
    .stdout.split('\n')
    .filter((l) => l.startsWith('-A '));

describe('removePerIPRulesFast (iptables-nft)', () => {
  for (const [family, bin, a, b] of [
    [4, 'iptables', '10.1.2.2', '10.1.2.3'],
    [6, 'ip6tables', 'fd00::2', 'fd00::3'],
  ] as const) {
    test(`IPv${family}: the two reference rules of the address go in one transaction, look-alikes stay`, () => {
      const p = family === 4 ? 32 : 128;
      ipt(bin, ['-N', 'CNI-FORWARD']);
      const reference = (ip: string) => [
        ['-d', `${ip}/${p}`, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
        ['-s', `${ip}/${p}`, '-j', 'ACCEPT'],
      ];
      const lookalikes = [
        ['-d', `${a}/${p}`, '-m', 'conntrack', '--ctstate', 'NEW', '-j', 'ACCEPT'],
        ['-d', `${a}/${p}`, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'DROP'],
        ['-d', `${a}/${p}`, '-j', 'ACCEPT'],
        ['-s', `${a}/${p}`, '-p', 'tcp', '-j', 'ACCEPT'],
        ['-s', `${a}/${p}`, '-j', 'DROP'],
        ['-i', 'eth9', '-s', `${a}/${p}`, '-j', 'ACCEPT'],
      ];
      for (const r of [...reference(a), ...lookalikes, ...reference(b)])
        ipt(bin, ['-A', 'CNI-FORWARD', ...r]);
      const before = rules(bin);
      const start = execStats.count;
      assert.equal(
        removePerIPRulesFast(family, 'CNI-FORWARD', [`${a}/${p}`], { netns: env.sb.host.path }),
        true,
      );
      assert.equal(execStats.count - start, 0, 'no iptables tool ran');
      const after = rules(bin);
      assert.equal(after.length, before.length - 2);
      assert.deepEqual(
        before.filter((l) => !after.includes(l)),
        [
          `-A CNI-FORWARD -d ${a}/${p} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
          `-A CNI-FORWARD -s ${a}/${p} -j ACCEPT`,
        ],
      );
      // nothing left to find: the caller is told to use its tools (which then find nothing either)
      assert.equal(
        removePerIPRulesFast(family, 'CNI-FORWARD', [`${a}/${p}`], { netns: env.sb.host.path }),
        false,
      );
      assert.deepEqual(rules(bin), after);
      // both addresses of another container in one call
      assert.equal(
        removePerIPRulesFast(family, 'CNI-FORWARD', [`${b}/${p}`], { netns: env.sb.host.path }),
        true,
      );
      assert.equal(rules(bin).length, lookalikes.length);
    });
  }
});
