/** Result assembly helpers (pure). */
import type { DNS, Interface, Result } from '@cnikit/skel';

/** The reference's `dnsConfSet`: any of the four DNS keys present (an empty list counts). */
export function dnsConfSet(dns: DNS | undefined): boolean {
  if (!dns) return false;
  return (
    dns.nameservers !== undefined || dns.search !== undefined || dns.options !== undefined || !!dns.domain
  );
}

/** netconf `dns` replaces IPAM's DNS when set, otherwise IPAM's DNS passes through. */
export function chooseDns(confDns: DNS | undefined, ipamDns: DNS | undefined): DNS | undefined {
  if (dnsConfSet(confDns)) return confDns;
  return ipamDns;
}

/** The interface skeleton: [bridge, host veth, container iface (in the sandbox)]. */
export function interfaceSkeleton(
  bridge: { name: string; mac: string },
  hostVeth: { name: string; mac: string },
  container: { name: string; mac: string; sandbox: string },
): Interface[] {
  return [
    { name: bridge.name, mac: bridge.mac },
    { name: hostVeth.name, mac: hostVeth.mac },
    { name: container.name, mac: container.mac, sandbox: container.sandbox },
  ];
}

/** Copy the IPAM result's ips/routes/dns into the bridge result (deep copies: they get mutated). */
export function mergeIpamResult(result: Result, ipam: Result): void {
  result.ips = (ipam.ips ?? []).map((ip) => ({ ...ip }));
  result.routes = (ipam.routes ?? []).map((r) => ({ ...r }));
  if (ipam.dns) result.dns = structuredClone(ipam.dns);
}
