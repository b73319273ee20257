/**
 * The firewall plugin's iptables backend (filter table, ONE iptables-restore per family per call): the reference's
 * CNI-FORWARD and admin chains with their jumps, two rules per container address, and the ingress-policy isolation
 * chains (also used with the firewalld backend). Per-address rules are removed over nfnetlink where iptables-nft
 * holds them (forward.ts), else by iptables-restore.
 */
import {
  hasRule,
  type IptablesBatch,
  iptablesBatch,
  quoteRuleArg,
  readTable,
  supportsIPTables,
} from '@cnikit/firewall';
import { nftExists, xtablesTableLoaded } from '@cnikit/netlink';
import { errorReason, internalError, type Rollback } from '@cnikit/skel';
import {
  adminJumpRule,
  type FirewallConf,
  forwardJumpRule,
  goList,
  type HostIP,
  ipRules,
  isolationSteps,
  PRIV_CHAIN,
  STAGE1_CHAIN,
  STAGE2_CHAIN,
} from './config.ts';
import { removePerIPRulesFast } from './forward.ts';

export const FILTER = 'filter';
export type Family = 4 | 6;
export const FAMILIES: readonly Family[] = [4, 6];
export const familyName = (f: Family) => (f === 4 ? 'IPv4' : 'IPv6');

export const ofFamily = (ips: readonly HostIP[], f: Family) => ips.filter((i) => i.family === f);

/** False only when CNI-FORWARD cannot exist in the filter table of `family` (no exec needed to know). */
export function filterChainMayExist(family: Family): boolean {
  try {
    return (
      xtablesTableLoaded(family, FILTER) !== false ||
      nftExists(family === 4 ? 'ip' : 'ip6', FILTER, PRIV_CHAIN) !== false
    );
  } catch {
    return true;
  }
}

export function deletePerIPRules(b: IptablesBatch, ips: readonly HostIP[]): void {
  for (const { ip } of ips) for (const rule of ipRules(ip)) b.deleteRule(FILTER, PRIV_CHAIN, rule);
}

/**
 * Remove the per-address rules of `ips`: with iptables-nft in one nf_tables transaction over nfnetlink (no process),
 * else one iptables-restore per family; nothing at all when the chain cannot be there.
 */
export function removeIptablesRules(ips: readonly HostIP[]): void {
  for (const f of FAMILIES) {
    const mine = ofFamily(ips, f);
    if (mine.length === 0 || !filterChainMayExist(f)) continue;
    if (
      removePerIPRulesFast(
        f,
        PRIV_CHAIN,
        mine.map((i) => i.ip),
        {},
      )
    )
      continue;
    const b = iptablesBatch(f);
    deletePerIPRules(b, mine);
    b.commit();
  }
}

/**
 * The iptables part of an ADD, one iptables-restore per family: with `backend` the reference's chains, jumps and
 * per-address rules; with `ingress` the isolation chains and rules of the bridge. Records an undo step for the
 * per-address rules each commit actually added.
 */
export function addIptables(
  conf: FirewallConf,
  ips: readonly HostIP[],
  backend: boolean,
  ingress: { bridge: string; policy: 'same-bridge' | 'isolated' } | undefined,
  undo: Rollback,
): void {
  for (const f of FAMILIES) {
    const mine = ofFamily(ips, f);
    if (mine.length === 0) continue;
    const b = iptablesBatch(f);
    if (backend) {
      b.ensureChain(FILTER, PRIV_CHAIN)
        .ensureChain(FILTER, conf.adminChain)
        .insertUnique(FILTER, 'FORWARD', forwardJumpRule(), 1)
        .insertUnique(FILTER, PRIV_CHAIN, adminJumpRule(conf.adminChain), 1);
      for (const { ip } of mine) for (const rule of ipRules(ip)) b.appendUnique(FILTER, PRIV_CHAIN, rule);
    }
    if (ingress) {
      b.ensureChain(FILTER, STAGE1_CHAIN).ensureChain(FILTER, STAGE2_CHAIN);
      for (const step of isolationSteps(ingress.bridge, ingress.policy)) {
        if (step.first) b.insertUnique(FILTER, step.chain, step.rule, 1);
        else b.appendUnique(FILTER, step.chain, step.rule);
      }
    }
    let script: string;
    try {
      script = b.commit().script;
    } catch (err) {
      throw internalError(`failed to set up the ${familyName(f)} firewall rules: ${errorReason(err)}`, err);
    }
    if (!backend) continue;
    const lines = new Set(script.split('\n'));
    const added = mine.filter(({ ip }) =>
      ipRules(ip).some((r) => lines.has(`-A ${PRIV_CHAIN} ${r.map(quoteRuleArg).join(' ')}`)),
    );
    if (added.length > 0)
      undo.push(`removal of the ${familyName(f)} rules`, () => removeIptablesRules(added));
  }
}

/** CHECK with the reference's messages: the jumps and every address's two rules, one iptables-save per family. */
export function checkIptables(conf: FirewallConf, ips: readonly HostIP[]): void {
  for (const f of FAMILIES) {
    const mine = ofFamily(ips, f);
    if (mine.length === 0) continue;
    let table: ReturnType<typeof readTable>;
    try {
      table = readTable(f, FILTER);
    } catch (err) {
      throw internalError(`could not read the ${familyName(f)} filter table: ${errorReason(err)}`, err);
    }
    const fwd = forwardJumpRule();
    if (!hasRule(table, 'FORWARD', fwd))
      throw internalError(`expected FORWARD rule ${goList(fwd)} not found`);
    const admin = adminJumpRule(conf.adminChain);
    if (!hasRule(table, PRIV_CHAIN, admin))
      throw internalError(`expected ${PRIV_CHAIN} rule ${goList(admin)} not found`);
    for (const { ip } of mine) {
      for (const rule of ipRules(ip)) {
        if (!hasRule(table, PRIV_CHAIN, rule)) throw internalError(`expected rule ${goList(rule)} not found`);
      }
    }
  }
}

/** Whether iptables or ip6tables can be used (STATUS). */
export const iptablesUsable = () => supportsIPTables(4) || supportsIPTables(6);
