// Netlink's view of @cnikit/ip: addresses as attribute bytes (4 for IPv4, 16 for IPv6). Parsing and
// printing are @cnikit/ip's (Go net.ParseIP / ParseCIDR / IP.String rules; IPv4-mapped is IPv4).
import {
  broadcast,
  familyPrefix,
  formatIP,
  fromBytes,
  network,
  parseCIDR,
  parseIP,
  toBytes,
} from '@cnikit/ip';

export interface IpBytes {
  family: 4 | 6;
  bytes: Buffer;
}

export interface CidrBytes extends IpBytes {
  prefix: number;
  /** The network address (host bits cleared). */
  network: Buffer;
  /** The last address of the network (IPv4: the broadcast address). */
  broadcast: Buffer;
}

const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.length);

/** Parses an IPv4 or IPv6 address (no prefix). Returns undefined when malformed. */
export function parseIp(s: string): IpBytes | undefined {
  const ip = parseIP(s);
  return ip ? { family: ip.family, bytes: buf(toBytes(ip)) } : undefined;
}

/** Parses 'ip/prefix' (the address is kept as given, host bits included). */
export function parseCidr(s: string): CidrBytes | undefined {
  const c = parseCIDR(s);
  if (!c) return undefined;
  return {
    family: c.ip.family,
    bytes: buf(toBytes(c.ip)),
    prefix: familyPrefix(c),
    network: buf(toBytes(network(c))),
    broadcast: buf(toBytes(broadcast(c))),
  };
}

/** Go net.IP.String() of 4 or 16 attribute bytes ('' for any other length). */
export function formatIp(b: Uint8Array): string {
  const ip = fromBytes(b);
  return ip ? formatIP(ip) : '';
}
