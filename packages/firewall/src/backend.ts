/** Choosing between the iptables and nftables backends. */
import type { ToolOptions } from './exec.ts';
import { supportsIPTables } from './iptables.ts';
import { goQuote } from './names.ts';
import { supportsNFTables } from './nftables.ts';

export type FirewallBackend = 'iptables' | 'nftables';

/** Thrown for a backend name that is neither "iptables" nor "nftables" (bad configuration). */
export class UnknownBackendError extends Error {
  readonly backend: string;
  constructor(backend: string, what = 'ipmasq') {
    super(`unknown ${what} backend ${goQuote(backend)}`);
    this.name = 'UnknownBackendError';
    this.backend = backend;
  }
}

/**
 * The backend to use when the configuration does not say: iptables, unless iptables is unusable
 * (missing or failing) and nftables is usable (`nft` works) — the reference's rule.
 */
export function detectBackend(opts: ToolOptions = {}): FirewallBackend {
  if (!supportsIPTables(4, opts) && supportsNFTables(opts)) return 'nftables';
  return 'iptables';
}

/**
 * Resolve a configured backend: undefined → detectBackend(); "iptables"/"nftables" as is; anything
 * else → UnknownBackendError (`unknown ipmasq backend "x"`).
 */
export function resolveBackend(
  backend: string | undefined | null,
  opts: ToolOptions = {},
  what = 'ipmasq',
): FirewallBackend {
  if (backend === undefined || backend === null) return detectBackend(opts);
  if (backend === 'iptables' || backend === 'nftables') return backend;
  throw new UnknownBackendError(backend, what);
}
