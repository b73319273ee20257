// Types of scripts/host-state.mjs (plain JavaScript: run-tests.mjs imports it without a TypeScript loader).
export interface HostState {
  links: string[];
  addresses: string[];
  routes: string[];
  rules: string[];
  iptables: string[];
  nftables: string[];
  /** Path under /proc/sys (`net/ipv4/ip_forward`) → value. */
  sysctls: Record<string, string>;
}
export const SYSCTL_TREES: readonly string[];
export function hostState(netns?: string): HostState;
export function diffHostState(before: HostState, after: HostState): { problems: string[]; notes: string[] };
