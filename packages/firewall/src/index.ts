/**
 * @cnikit/firewall — iptables / nftables / tc for CNI plugins.
 *
 * - Every plugin call applies its iptables changes with ONE iptables-restore per family
 *   (`iptablesBatch`), its nftables changes with ONE `nft -f -` (`nftBatch`), and its qdiscs and
 *   filters with ONE `tc -batch -` (`tcBatch`); state is read with iptables-save / `nft -j` / `tc -j`.
 * - Names and comments are the reference plugins' (`formatChainName`, `nftInstanceComment`, …).
 * - High-level helpers used by plugins: `setupIPMasq` / `teardownIPMasq` / `gcIPMasq`,
 *   `setupSpoofCheck` / `teardownSpoofCheck`, `detectBackend` / `resolveBackend`.
 * Every function takes an optional `{ netns }` to run the tools in another network namespace.
 */
export * from './backend.ts';
// exec.ts's execStats counter is a test/bench seam: import it from the file, not the package.
export {
  type RunOptions,
  runTool,
  ToolError,
  ToolNotFoundError,
  type ToolOptions,
  type ToolResult,
} from './exec.ts';
export * from './firewalld.ts';
export * from './ipmasq.ts';
export * from './iptables.ts';
export * from './names.ts';
export * from './nftables.ts';
export * from './portmap.ts';
export * from './spoofcheck.ts';
export * from './tc.ts';
