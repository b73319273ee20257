/**
 * @cnikit/ipam — what IPAM plugins (host-local, static, third-party ones) share when they read their
 * `ipam` configuration: the JSON field types of Go's `types.IPNet` / `net.IP` as schema fields, the route
 * entry with its 1.1.0 fields, the DNS block, and the one-address-per-family version gate.
 *
 * It sits on @cnikit/skel (schemas, errors) and @cnikit/ip (parsing); @cnikit/ip itself stays free of skel.
 *
 * Configuration errors are CNI code 7 (invalid network config) with the reference's messages; the
 * reference answers 999 with the same text.
 */
import { type CIDR, formatCIDR, formatIP, type IP, parseCIDR, parseIP } from '@cnikit/ip';
import {
  CniError,
  DNSSchema,
  ErrorCode,
  type Infer,
  normalizeDNS,
  normalizeRoute,
  type Route,
  type Schema,
  s,
  versionGte,
} from '@cnikit/skel';

/** A configuration error: CNI code 7 with `msg`. */
export function configError(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

/** JSON `types.IPNet`: Go `net.ParseCIDR`, host bits kept. */
export const cidrField = s.string().refine((text): CIDR => {
  const c = parseCIDR(text);
  if (!c) throw configError(`invalid CIDR address: ${text}`);
  return c;
});

/** JSON `net.IP`: '' means unset. */
export const ipField = s.string().refine((text): IP | undefined => {
  if (text === '') return undefined;
  const ip = parseIP(text);
  if (!ip) throw configError(`invalid IP address: ${text}`);
  return ip;
});

/** A `types.Route` entry of an IPAM config (1.1.0 fields: mtu, advmss, priority, table, scope). */
export const routeSchema = s.object({
  dst: cidrField,
  gw: ipField.optional(),
  mtu: s.int().optional(),
  advmss: s.int().optional(),
  priority: s.int().optional(),
  table: s.int().optional(),
  scope: s.int().optional(),
});
export type RouteConfig = Infer<typeof routeSchema>;

/** A config route as the result carries it (canonical text, zero MTU/AdvMSS/priority omitted, table/scope kept). */
export function toRoute(r: RouteConfig): Route {
  return normalizeRoute({ ...r, dst: formatCIDR(r.dst), gw: r.gw && formatIP(r.gw) });
}

/** The `dns` block of an IPAM config (`types.DNS`). */
export const dnsSchema = DNSSchema;

/** A config DNS block as the result carries it (empty lists and strings dropped). */
export const toDNS = normalizeDNS;

/** More than one address of a family needs spec 0.3.0 or later (the reference's check, same message). */
export function checkAddressesPerFamily(cniVersion: string, numV4: number, numV6: number): void {
  if (numV4 <= 1 && numV6 <= 1) return;
  let ok = false;
  try {
    ok = versionGte(cniVersion, '0.3.0');
  } catch {
    ok = false;
  }
  if (!ok) throw configError(`CNI version ${cniVersion} does not support more than 1 address per family`);
}

/**
 * The top-level frame of an IPAM plugin's stdin (the reference's `Net` struct): `name`, `cniVersion`, the
 * plugin's own `ipam` object (optional here; `requireIpam` rejects its absence), `runtimeConfig.ips` and
 * `args.cni.ips` (items decoded by `ipsItem`). `runtimeConfig` adds plugin-specific runtimeConfig fields
 * (decoded before `ips`, e.g. host-local's `ipRanges`).
 */
export function ipamNetSchema<I, P, R extends Record<string, Schema<unknown>> = Record<never, never>>(
  ipam: Schema<I>,
  ipsItem: Schema<P>,
  runtimeConfig?: R,
) {
  const ips = s.array(ipsItem).optional();
  return s.object({
    name: s.string().optional(),
    cniVersion: s.string().optional(),
    ipam: ipam.optional(),
    runtimeConfig: s.object({ ...(runtimeConfig ?? ({} as R)), ips }).optional(),
    args: s.object({ cni: s.object({ ips }).optional() }).optional(),
  });
}

/** `name`, `cniVersion` ('' when absent) and the `ipam` object of a decoded frame; no `ipam` is a config error. */
export function requireIpam<T>(n: { name?: string; cniVersion?: string; ipam?: T }): {
  name: string;
  cniVersion: string;
  ipam: NonNullable<T>;
} {
  if (!n.ipam) throw configError("IPAM config missing 'ipam' key");
  return { name: n.name ?? '', cniVersion: n.cniVersion ?? '', ipam: n.ipam };
}

/** `checkAddressesPerFamily` over the families of a list (addresses or range sets), counted per family. */
export function checkFamilies(cniVersion: string, families: Iterable<4 | 6>): void {
  let numV4 = 0;
  let numV6 = 0;
  for (const f of families) {
    if (f === 4) numV4++;
    else numV6++;
  }
  checkAddressesPerFamily(cniVersion, numV4, numV6);
}
