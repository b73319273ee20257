/**
 * What portmap's two backends share: the mapping and per-address arguments, the reference's names, and the small
 * pure helpers over host IPs and ports. The kernel state each backend writes is described in iptables.ts and
 * nftables.ts; both are identical to the reference's (plugins.md §4), so the Go portmap deletes and checks what
 * cnikit created and the other way round.
 */
import { type IPFamily, type ParsedCidr, parseCidr, type ToolOptions } from '@cnikit/firewall';

export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol: string;
  /** '' = any host address; `0.0.0.0` / `::` also mean any address of that family. */
  hostIP: string;
}

export interface PortMapArgs extends ToolOptions {
  network: string;
  containerID: string;
  mappings: readonly PortMapping[];
  /** The container address with its prefix (`10.1.2.2/24`). */
  containerIP: string;
  snat: boolean;
  masqAll: boolean;
  /** iptables: bit of the masquerade mark (0–31). */
  markMasqBit: number;
  /** iptables: jump here instead of CNI-HOSTPORT-SETMARK (and create neither SETMARK nor MASQ). */
  externalSetMarkChain?: string;
  /** Extra match tokens of this family (iptables: after the entry rule's matches; nftables: before `fib …`). */
  conditions?: readonly string[];
}

/** One backend: install and check one container address, remove a container's rules of every family. */
export interface PortMapBackend {
  setup(a: PortMapArgs, family: IPFamily): void;
  /** CHECK with the reference's messages (throws Error). */
  check(a: PortMapArgs, family: IPFamily): void;
  /** Remove the container's rules without its mappings; returns the failures (missing tables/chains are fine). */
  teardown(network: string, containerID: string, opts: ToolOptions): unknown[];
}

/** Errors of a teardown/GC, reported together after every step was attempted. */
export class PortMapError extends Error {
  readonly errors: unknown[];
  constructor(errors: unknown[]) {
    super(errors.map((e) => (e instanceof Error ? e.message : String(e))).join('\n'));
    this.name = 'PortMapError';
    this.errors = errors;
  }
}

export function sameFamily(m: PortMapping, family: IPFamily): boolean {
  if (m.hostIP === '') return true;
  return parseCidr(m.hostIP).family === family;
}

/** No destination match: no host IP, or `0.0.0.0` / `::` (Go's IsUnspecified). */
export function unspecified(hostIP: string): boolean {
  if (hostIP === '') return true;
  const { ip } = parseCidr(hostIP);
  return ip === '0.0.0.0' || ip === '::';
}

export function hostPortText(ip: ParsedCidr, port: number): string {
  return ip.family === 6 ? `[${ip.ip}]:${port}` : `${ip.ip}:${port}`;
}
