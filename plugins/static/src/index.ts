/**
 * static IPAM: drop-in replacement for the reference plugin (`plugins/ipam/static`). Returns fixed
 * addresses, routes and DNS; keeps no state.
 *
 * Address sources and precedence (as the reference): `runtimeConfig.ips` replaces `args.cni.ips`, which
 * replaces `ipam.addresses` + CNI_ARGS `IP` (appended). CNI_ARGS `GATEWAY` sets the gateway of every
 * CNI_ARGS address whose subnet contains it (config addresses are not parsed yet at that point in the
 * reference, so they never match — kept deliberately).
 *
 * Codes: configuration errors are CNI code 7 (the reference answers 999 with the same message); errors
 * caused by CNI_ARGS and CHECK failures keep code 999.
 */
import { type CIDR, contains, equal, formatCIDR, formatIP, type IP, parseCIDR, parseIP } from '@cnikit/ip';
import {
  checkFamilies,
  configError,
  dnsSchema,
  ipamNetSchema,
  ipField,
  requireIpam,
  routeSchema,
  toDNS,
  toRoute,
} from '@cnikit/ipam';
import {
  CniError,
  CURRENT_VERSION,
  type DNS,
  decode,
  ErrorCode,
  type IPConfig,
  loadArgs,
  type Plugin,
  type Request,
  type Result,
  type Route,
  s,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';

const netSchema = ipamNetSchema(
  s.object({
    type: s.string().optional(),
    routes: s.array(routeSchema).optional(),
    addresses: s.array(s.object({ address: s.string().default(''), gateway: ipField.optional() })).optional(),
    dns: dnsSchema.optional(),
  }),
  s.string(),
);

interface Address {
  text: string;
  /** Parsed address (host bits kept); undefined until parsed (config addresses are parsed last). */
  cidr?: CIDR;
  gateway?: IP;
}

export interface StaticConfig {
  name: string;
  cniVersion: string;
  addresses: Array<{ cidr: CIDR; gateway?: IP }>;
  routes: Route[];
  dns: DNS;
}

function fromList(list: string[]): Address[] {
  return list.map((text) => {
    const cidr = parseCIDR(text);
    if (!cidr) throw configError(`an entry in the 'ips' field is NOT in CIDR notation, got: '${text}'`);
    return { text, cidr };
  });
}

/** Go `LoadIPAMConfig(stdin, CNI_ARGS)` of the static plugin. */
export function loadStaticConfig(req: Pick<Request, 'config' | 'args'>): StaticConfig {
  const n = decode(netSchema, req.config);
  const { name, cniVersion, ipam } = requireIpam(n);
  let addresses: Address[] = (ipam.addresses ?? []).map((a) => {
    const out: Address = { text: a.address };
    if (a.gateway) out.gateway = a.gateway;
    return out;
  });

  if (req.args !== '') {
    const e = loadArgs(req.args, { IP: 'string', GATEWAY: 'string' });
    if (e.IP) {
      for (const item of e.IP.split(',')) {
        const text = item.trim();
        const cidr = parseCIDR(text);
        if (!cidr) throw new Error(`the 'ip' field is expected to be in CIDR notation, got: '${text}'`);
        addresses.push({ text, cidr });
      }
    }
    if (e.GATEWAY) {
      for (const item of e.GATEWAY.split(',')) {
        const gw = parseIP(item.trim());
        if (!gw) throw new Error(`invalid gateway address: ${item}`);
        for (const a of addresses) if (a.cidr && contains(a.cidr, gw)) a.gateway = gw;
      }
    }
  }

  const argIPs = n.args?.cni?.ips ?? [];
  if (argIPs.length > 0) addresses = fromList(argIPs);
  const rtIPs = n.runtimeConfig?.ips ?? [];
  if (rtIPs.length > 0) addresses = fromList(rtIPs);

  const out: StaticConfig['addresses'] = [];
  for (const a of addresses) {
    let cidr = a.cidr;
    if (!cidr) {
      cidr = parseCIDR(a.text);
      if (!cidr)
        throw configError(`the 'address' field is expected to be in CIDR notation, got: '${a.text}'`);
    }
    out.push(a.gateway ? { cidr, gateway: a.gateway } : { cidr });
  }
  checkFamilies(
    cniVersion,
    out.map((a) => a.cidr.ip.family),
  );

  return {
    name,
    cniVersion,
    addresses: out,
    routes: (ipam.routes ?? []).map(toRoute),
    dns: toDNS(ipam.dns),
  };
}

function add(req: Request): Result {
  const conf = loadStaticConfig(req);
  const ips: IPConfig[] = conf.addresses.map((a) =>
    a.gateway
      ? { address: formatCIDR(a.cidr), gateway: formatIP(a.gateway) }
      : { address: formatCIDR(a.cidr) },
  );
  const result: Result = { cniVersion: CURRENT_VERSION };
  if (ips.length > 0) result.ips = ips;
  if (conf.routes.length > 0) result.routes = conf.routes;
  result.dns = conf.dns;
  return result;
}

function check(req: Request): void {
  const conf = loadStaticConfig(req);
  // skel parses prevResult (key matched case-insensitively, like Go); null counts as missing
  const prev = req.prevResult;
  if (!prev) throw new CniError(ErrorCode.Internal, 'Required prevResult missing');
  for (const want of conf.addresses) {
    for (const got of prev.ips ?? []) {
      const gotIP = parseCIDR(got.address)?.ip;
      if (!gotIP || !equal(gotIP, want.cidr.ip)) continue;
      if (!want.gateway) break;
      const gotGw = got.gateway ? parseIP(got.gateway) : undefined;
      if (equal(gotGw, want.gateway)) break;
      throw new CniError(
        ErrorCode.Internal,
        `static: Failed to match addr ${formatIP(gotIP)} on interface ${req.ifName}`,
      );
    }
  }
}

export const plugin: Plugin = {
  name: 'static',
  about: `CNI static plugin cnikit ${VERSION}`,
  add,
  // Nothing to release: static keeps no state (the reference does not even read the config on DEL).
  del() {},
  check,
};
