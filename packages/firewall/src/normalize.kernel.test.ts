// Property test of normalizeRule against the real iptables canonicaliser: random rules written
// in random (valid) argument orders are applied with one restore, then applying the same batch
// again must find every rule already present (nothing to do), and deleting them must succeed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sandboxForFile } from '@cnikit/testing';
import fc from 'fast-check';
import { IptablesBatch, listRules } from './iptables.ts';

const env = sandboxForFile();

const octet = fc.integer({ min: 0, max: 255 });
const v4 = fc.tuple(octet, octet, octet, octet).map((o) => o.join('.'));
const v6 = fc
  .array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 })
  .map((w) => w.map((x) => x.toString(16)).join(':'));
const neg = fc.boolean().map((b) => (b ? ['!'] : []));
const comment = fc
  .array(fc.constantFrom(...'ab c"\\\'-_:.,=x1 '.split('')), { minLength: 1, maxLength: 20 })
  .map((a) => a.join('').trim())
  .filter((c) => c !== '');

function ruleArb(family: 4 | 6) {
  const addr = (family === 4 ? v4 : v6).chain((ip) =>
    fc
      .option(fc.integer({ min: 0, max: family === 4 ? 32 : 128 }), { nil: undefined })
      .map((p) => (p === undefined ? ip : `${ip}/${p}`)),
  );
  // iptables-nft rejects a negated /0 ("! -s x/0"): never generate it.
  const negAddr = fc.tuple(neg, addr).map(([n, a]): [string[], string] => [a.endsWith('/0') ? [] : n, a]);
  return fc
    .record({
      s: fc.option(negAddr, { nil: undefined }),
      d: fc.option(negAddr, { nil: undefined }),
      i: fc.option(fc.constantFrom('eth0', 'veth+', 'br-x'), { nil: undefined }),
      proto: fc.option(
        fc.record({
          p: fc.constantFrom('tcp', 'udp'),
          dport: fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined }),
          multi: fc.option(
            fc.uniqueArray(fc.integer({ min: 1, max: 65535 }), { minLength: 1, maxLength: 4 }),
            { nil: undefined },
          ),
        }),
        { nil: undefined },
      ),
      comment: fc.option(comment, { nil: undefined }),
      mark: fc.option(fc.integer({ min: 0, max: 31 }), { nil: undefined }),
      target: fc.constantFrom('ACCEPT', 'DROP', 'RETURN'),
      order: fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
      commentFirst: fc.boolean(),
    })
    .map((r) => {
      // Independent pieces that may appear in any order (iptables keeps the relative order of -m
      // matches, so those stay in generation order; basic options and the target move freely).
      const free: string[][] = [];
      if (r.s) free.push([...r.s[0], '-s', r.s[1]]);
      if (r.d) free.push([...r.d[0], '-d', r.d[1]]);
      if (r.i) free.push(['-i', r.i]);
      free.push(['-j', r.target]);
      const matches: string[][] = [];
      const cm = r.comment === undefined ? undefined : ['-m', 'comment', '--comment', r.comment];
      if (cm && r.commentFirst) matches.push(cm);
      // (--dport right after -m multiport would be taken by getopt as an abbreviation of --dports.)
      if (r.proto?.dport !== undefined) matches.push(['--dport', String(r.proto.dport)]);
      if (r.mark !== undefined)
        matches.push([
          '-m',
          'mark',
          '--mark',
          `0x${(2 ** r.mark).toString(16)}/0x${(2 ** r.mark).toString(16)}`,
        ]);
      if (r.proto?.multi) matches.push(['-m', 'multiport', '--dports', r.proto.multi.join(',')]);
      if (cm && !r.commentFirst) matches.push(cm);
      const shuffled = free
        .map((f, k) => ({ f, k: r.order[k] ?? 0 }))
        .sort((a, b) => a.k - b.k)
        .map((x) => x.f);
      const cut = (r.order[7] ?? 0) % (shuffled.length + 1);
      const args = [
        ...shuffled.slice(0, cut).flat(),
        ...(r.proto ? ['-p', r.proto.p] : []),
        ...matches.flat(),
        ...shuffled.slice(cut).flat(),
      ];
      return args;
    });
}

for (const family of [4, 6] as const) {
  test(`random rules (IPv${family}) are recognised after iptables canonicalises them`, () => {
    let run = 0;
    fc.assert(
      fc.property(fc.array(ruleArb(family), { minLength: 1, maxLength: 15 }), (rules) => {
        const chain = `CNI-PROP-${family}-${run++}`;
        const ns = { netns: env.sb.host.path };
        const batch = () => {
          const b = new IptablesBatch(family, ns).ensureChain('filter', chain);
          for (const r of rules) b.appendUnique('filter', chain, r);
          return b;
        };
        batch().commit();
        const applied = listRules(family, 'filter', chain, ns);
        const again = batch().render(
          new Map([['filter', { name: 'filter', chains: new Map([[chain, '-']]), rules: applied }]]),
        );
        assert.equal(
          again,
          '',
          `re-apply wanted to add:\n${again}\nkernel has:\n${applied.map((a) => a.text).join('\n')}`,
        );
        // Every rule can be deleted by its own spec.
        const del = new IptablesBatch(family, ns);
        for (const r of rules) del.deleteRule('filter', chain, r);
        del.deleteChain('filter', chain);
        del.commit();
        assert.ok(!listRules(family, 'filter', undefined, ns).some((x) => x.chain === chain));
      }),
      {
        numRuns: Number(process.env.CNIKIT_PROP_RUNS ?? 12),
        seed: Number(process.env.CNIKIT_PROP_SEED ?? 20261122) + family,
        endOnFailure: true,
      },
    );
  });
}
