/**
 * Kernel probes that let teardown code skip tool executions (each a process start) when nothing of its own can
 * exist: a /proc read and nfnetlink GETs, run in `opts.netns` when given. Anything unclear counts as "may exist".
 */
import {
  type JumpChain,
  type KnownJumps,
  nftChainJumps,
  nftExists,
  nftRemoveJumpChains,
  nftRemoveKnownJumpChains,
  type Sync,
  withNetns,
  xtablesTableLoaded,
} from '@cnikit/netlink';
import type { ToolOptions } from './exec.ts';
import { forgetJumps, recalledJumps } from './handles.ts';
import type { IPFamily } from './iptables.ts';

/** False only when none of `chains` can exist in the nat table of `family` (legacy x_tables or iptables-nft). */
export function natChainsMayExist(family: IPFamily, chains: readonly string[]): boolean {
  return (
    xtablesTableLoaded(family, 'nat') !== false ||
    chains.some((c) => nftExists(family === 4 ? 'ip' : 'ip6', 'nat', c) !== false)
  );
}

/** Run `probe` in the tools' namespace; any failure gives `fallback` (the "may exist" answer). */
export function probeKernel<T>(opts: ToolOptions, probe: () => Sync<T>, fallback: NoInfer<T>): T {
  try {
    return opts.netns ? withNetns(opts.netns, probe) : probe();
  } catch {
    return fallback;
  }
}

/**
 * Teardown fast path for iptables-nft: when no legacy x_tables `table` of `family` is loaded (so every iptables rule
 * lives in nf_tables), remove the jumps to each per-container chain and the chain itself in one nf_tables
 * transaction over nfnetlink, without iptables-save/iptables-restore. When the ADD recorded the jumps' handles
 * (handles.ts) the rules are fetched by handle and nothing is listed; otherwise (no record, or it does not hold)
 * the chains holding the jumps are listed. True when done (the records are then removed); false when the caller
 * must use the tools (legacy tables in use, or the kernel did not go along — then nothing was changed).
 */
export function removeJumpChainsFast(
  family: IPFamily,
  table: string,
  pairs: readonly JumpChain[],
  opts: ToolOptions,
): boolean {
  // the records are files: read before entering the namespace (they are keyed by it, not in it)
  const known: KnownJumps[] = [];
  const absent: string[] = [];
  for (const p of pairs) {
    const jumps = recalledJumps(family, table, p.target, opts);
    if (jumps?.every((j) => j.from === p.from)) known.push({ target: p.target, jumps });
    else absent.push(p.target);
  }
  const done = probeKernel(
    opts,
    () =>
      xtablesTableLoaded(family, table) === false &&
      ((known.length > 0 && nftRemoveKnownJumpChains(family, table, known, absent) === true) ||
        nftRemoveJumpChains(family, table, pairs) === true),
    false,
  );
  if (done) for (const p of pairs) forgetJumps(family, table, p.target, opts);
  return done;
}

/**
 * For iptables-nft (no legacy x_tables `table` of `family` loaded): true when every chain of `chains` holds exactly
 * `rules` rules (when given) and a rule jumping to each chain of `jumpsTo`, read with one nfnetlink dump of each of
 * those chains (never the whole table, no tool process). False when not, or when it cannot be told (legacy tables,
 * no answer): the caller then takes its full path.
 */
export function natChainsInPlace(
  family: IPFamily,
  table: string,
  chains: ReadonlyArray<{ chain: string; rules?: number; jumpsTo?: readonly string[] }>,
  opts: ToolOptions,
): boolean {
  return probeKernel(
    opts,
    () =>
      xtablesTableLoaded(family, table) === false &&
      chains.every((c) => {
        // without a rule count to check, the dump stops once the jumps looked for were seen
        const j = nftChainJumps(
          family,
          table,
          c.chain,
          c.rules === undefined ? { until: c.jumpsTo ?? [] } : {},
        );
        if (!j) return false;
        if (c.rules !== undefined && j.rules !== c.rules) return false;
        return (c.jumpsTo ?? []).every((t) => j.jumps.includes(t));
      }),
    false,
  );
}
