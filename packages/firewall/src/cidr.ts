/**
 * The firewall's view of an address: canonical text forms from @cnikit/ip (Go net.ParseIP/ParseCIDR and
 * IP.String rules; IPv4-mapped is IPv4, like Go's `ipn.IP.To4() != nil` in SetupIPMasq).
 */
import { bitsOf, cidrOf, familyPrefix, formatIP, network, parseCIDR, parseIP } from '@cnikit/ip';

export interface ParsedCidr {
  family: 4 | 6;
  /** The address as given, in canonical text (`10.1.2.2`, `2001:db8::2`). */
  ip: string;
  prefix: number;
  /** The masked network address in canonical text (`10.1.2.0`). */
  network: string;
}

/** Parse `ip` or `ip/prefix` (a bare IP gets /32 or /128). Throws TypeError on bad input. */
export function parseCidr(text: string): ParsedCidr {
  let c = text.includes('/') ? parseCIDR(text) : undefined;
  if (!text.includes('/')) {
    const ip = parseIP(text);
    if (ip) c = cidrOf(ip, bitsOf(ip.family));
  }
  if (!c) throw new TypeError(`invalid CIDR address: ${text}`);
  return { family: c.ip.family, ip: formatIP(c.ip), prefix: familyPrefix(c), network: formatIP(network(c)) };
}
