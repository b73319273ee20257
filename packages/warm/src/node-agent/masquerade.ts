/**
 * Masquerade once per node, ip-masq-agent's semantics: traffic from this node's pod CIDRs to a destination that is
 * not local and not in nonMasqueradeCIDRs leaves with the node's address; pod-to-pod (the cluster CIDR) and
 * pod-to-Service traffic (DNATed to a pod address before POSTROUTING) keeps the pod's. One chain of our own per
 * family in the nat table, changed with one iptables-restore per family (@cnikit/firewall's IptablesBatch), and
 * only when it differs from what is there.
 */
import { IptablesBatch, listRules, normalizeRule } from '@cnikit/firewall';
import { familyOfCidr } from './config.ts';

export const MASQ_CHAIN = 'CNIKIT-NODE-MASQ';
const COMMENT = 'cnikit node agent: masquerade pod traffic leaving the cluster network';

/** The rules of MASQ_CHAIN for one family (RETURN for each non-masquerade CIDR, then MASQUERADE). */
export function masqueradeRules(family: 4 | 6, nonMasquerade: readonly string[]): string[][] {
  const rules = nonMasquerade
    .filter((c) => familyOfCidr(c) === family)
    .map((c) => ['-d', c, '-m', 'comment', '--comment', COMMENT, '-j', 'RETURN']);
  rules.push(['-m', 'comment', '--comment', COMMENT, '-j', 'MASQUERADE']);
  return rules;
}

/** The POSTROUTING jumps: one per pod CIDR of the node in that family. */
export function jumpRules(family: 4 | 6, ownPodCidrs: readonly string[]): string[][] {
  return ownPodCidrs
    .filter((c) => familyOfCidr(c) === family)
    .map((c) => [
      '-s',
      c,
      '-m',
      'addrtype',
      '!',
      '--dst-type',
      'LOCAL',
      '-m',
      'comment',
      '--comment',
      COMMENT,
      '-j',
      MASQ_CHAIN,
    ]);
}

/** Brings the nat table to the rules; returns the iptables-restore runs made (0 when all was in place). */
export function syncMasquerade(ownPodCidrs: readonly string[], nonMasquerade: readonly string[]): number {
  let runs = 0;
  for (const family of [4, 6] as const) {
    const jumps = jumpRules(family, ownPodCidrs);
    const chainRules = masqueradeRules(family, nonMasquerade);
    const nat = listRules(family, 'nat');
    const inChain = nat.filter((r) => r.chain === MASQ_CHAIN).map((r) => r.key);
    const wantChain = chainRules.map((r) => normalizeRule(r));
    const post = nat.filter((r) => r.chain === 'POSTROUTING' && r.args.includes(MASQ_CHAIN));
    const wantJumps = new Set(jumps.map((r) => normalizeRule(r)));
    // a family without a pod CIDR on this node and nothing of ours in its table: nothing to do (no ip6tables call
    // beyond the read on an IPv4-only node)
    if (jumps.length === 0 && post.length === 0 && !nat.some((r) => r.chain === MASQ_CHAIN)) continue;
    const chainOk = inChain.length === wantChain.length && inChain.every((k, i) => k === wantChain[i]);
    const jumpsOk = post.length === wantJumps.size && post.every((r) => wantJumps.has(r.key));
    if (chainOk && jumpsOk) continue;
    const b = new IptablesBatch(family);
    b.ensureChain('nat', MASQ_CHAIN);
    if (!chainOk) {
      b.flushChain('nat', MASQ_CHAIN, { create: true });
      for (const r of chainRules) b.append('nat', MASQ_CHAIN, r);
    }
    b.deleteRulesWhere('nat', 'POSTROUTING', (r) => r.args.includes(MASQ_CHAIN) && !wantJumps.has(r.key));
    for (const r of jumps) b.appendUnique('nat', 'POSTROUTING', r);
    b.commit();
    runs++;
  }
  return runs;
}
