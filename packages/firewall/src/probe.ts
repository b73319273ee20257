/**
 * Kernel probes that let teardown code skip tool executions (each a process start) when nothing of its own can
 * exist: a /proc read and nfnetlink GETs, run in `opts.netns` when given. Anything unclear counts as "may exist".
 */
import { nftExists, withNetns, xtablesTableLoaded } from '@cnikit/netlink';
import type { ToolOptions } from './exec.ts';
import type { IPFamily } from './iptables.ts';

/** False only when none of `chains` can exist in the nat table of `family` (legacy x_tables or iptables-nft). */
export function natChainsMayExist(family: IPFamily, chains: readonly string[]): boolean {
  return (
    xtablesTableLoaded(family, 'nat') !== false ||
    chains.some((c) => nftExists(family === 4 ? 'ip' : 'ip6', 'nat', c) !== false)
  );
}

/** Run `probe` in the tools' namespace; any failure gives `fallback` (the "may exist" answer). */
export function probeKernel<T>(opts: ToolOptions, probe: () => T, fallback: T): T {
  try {
    return opts.netns ? withNetns(opts.netns, probe) : probe();
  } catch {
    return fallback;
  }
}
