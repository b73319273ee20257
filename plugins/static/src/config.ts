/**
 * static IPAM configuration: `ipam.addresses`/`routes`/`dns`, CNI_ARGS `IP`/`GATEWAY`, `args.cni.ips` and
 * `runtimeConfig.ips`, with the reference's precedence (see index.ts).
 */
import { type CIDR, contains, type IP, parseCIDR, parseIP } from '@cnikit/ip';
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
import { type DNS, decode, loadArgs, type RequestBase, type Route, s } from '@cnikit/skel';

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

/** The plugin's config decoder: Go `LoadIPAMConfig(stdin, CNI_ARGS)` of the static plugin. */
export function parseConf(raw: Record<string, unknown>, req: Pick<RequestBase, 'args'>): StaticConfig {
  const n = decode(netSchema, raw);
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
