/**
 * host-local configuration (`backend/allocator/config.go`): range sets (runtime `ipRanges` first, then the
 * legacy single range, then `ipam.ranges`), requested IPs (CNI_ARGS `IP`, `args.cni.ips`,
 * `runtimeConfig.ips`), routes, dataDir, resolvConf — with the reference's validation messages.
 *
 * Codes: configuration errors are CNI code 7 (invalid network config; the reference answers 999 with the
 * same message); CNI_ARGS errors keep the reference's code 999.
 */
import { formatIP, type IP, parseIPOrCIDR } from '@cnikit/ip';
import {
  checkFamilies,
  cidrField,
  configError,
  ipamNetSchema,
  ipField,
  requireIpam,
  routeSchema,
  toRoute,
} from '@cnikit/ipam';
import { decode, type Infer, loadArgs, type RequestBase, type Route, s } from '@cnikit/skel';
import { canonicalizeRangeSet, mayOverlap, type RangeSet, type RawRange, rangeSetsOverlap } from './range.ts';

/** JSON `pkg/ip.IP` (`ip` or `ip/prefix`): '' means "no address" (rejected later as `IP <nil>`). */
const requestedIPField = s.string().refine((text): IP | null => {
  if (text === '') return null;
  const parsed = parseIPOrCIDR(text);
  if (!parsed) throw configError(`invalid IP address ${text}`);
  return parsed.ip;
});

const rangeSchema = s.object({
  subnet: cidrField.optional(),
  rangeStart: ipField.optional(),
  rangeEnd: ipField.optional(),
  gateway: ipField.optional(),
});
const rangeSetSchema = s.array(rangeSchema);

const ipamSchema = s.object({
  type: s.string().optional(),
  subnet: cidrField.optional(),
  rangeStart: ipField.optional(),
  rangeEnd: ipField.optional(),
  gateway: ipField.optional(),
  routes: s.array(routeSchema).optional(),
  dataDir: s.string().optional(),
  resolvConf: s.string().optional(),
  ranges: s.array(rangeSetSchema).optional(),
});

const netSchema = ipamNetSchema(ipamSchema, requestedIPField, {
  ipRanges: s.array(rangeSetSchema).optional(),
});

type RawRangeIn = Infer<typeof rangeSchema>;

export interface IPAMConfig {
  name: string;
  cniVersion: string;
  /** Canonical range sets; the index is the rangeID of `last_reserved_ip.<rangeID>`. */
  ranges: RangeSet[];
  /** Requested addresses, canonical, de-duplicated, in the reference's order. */
  requestedIPs: IP[];
  routes: Route[];
  dataDir: string;
  resolvConf: string;
}

function toRaw(r: RawRangeIn): RawRange {
  const out: RawRange = {};
  if (r.subnet) out.subnet = r.subnet;
  if (r.rangeStart) out.rangeStart = r.rangeStart;
  if (r.rangeEnd) out.rangeEnd = r.rangeEnd;
  if (r.gateway) out.gateway = r.gateway;
  return out;
}

/** Parse the CNI_ARGS `IP` value like Go `pkg/ip.IP.UnmarshalText`. */
function parseArgIP(text: string): IP | undefined {
  if (text === '') return undefined;
  const parsed = parseIPOrCIDR(text);
  if (!parsed) throw new Error(`invalid IP address ${text}`);
  return parsed.ip;
}

/** The plugin's config decoder: Go `LoadIPAMConfig(stdin, CNI_ARGS)`. */
export function parseConf(raw: Record<string, unknown>, req: Pick<RequestBase, 'args'>): IPAMConfig {
  const n = decode(netSchema, raw);
  const { name, cniVersion, ipam } = requireIpam(n);

  const requested: Array<IP | null> = [];
  if (req.args !== '') {
    // plain Error → code 999 with Go's `ARGS: …` text
    const e = loadArgs(req.args, { IP: parseArgIP });
    if (e.IP) requested.push(e.IP);
  }
  for (const ip of n.args?.cni?.ips ?? []) requested.push(ip);
  for (const ip of n.runtimeConfig?.ips ?? []) requested.push(ip);
  const requestedIPs: IP[] = [];
  const seen = new Set<string>();
  for (const ip of requested) {
    if (ip === null) throw configError('cannot understand ip: IP <nil> not v4 nor v6');
    const key = formatIP(ip);
    if (seen.has(key)) continue;
    seen.add(key);
    requestedIPs.push(ip);
  }

  const rawSets: RawRange[][] = [];
  for (const set of n.runtimeConfig?.ipRanges ?? []) rawSets.push(set.map(toRaw));
  if (ipam.subnet) rawSets.push([toRaw(ipam)]);
  for (const set of ipam.ranges ?? []) rawSets.push(set.map(toRaw));
  if (rawSets.length === 0) throw configError('no IP ranges specified');

  const ranges: RangeSet[] = [];
  for (let i = 0; i < rawSets.length; i++) {
    let set: RangeSet;
    try {
      set = canonicalizeRangeSet(rawSets[i]!);
    } catch (err) {
      throw configError(`invalid range set ${i}: ${(err as Error).message}`);
    }
    ranges.push(set);
  }
  checkFamilies(
    cniVersion,
    ranges.map((set) => set[0]!.rangeStart.family),
  );

  // Ranges inside one set never overlap (checked above), so any overlap found here is across sets.
  const overlapping = mayOverlap(ranges.flat());
  for (let i = 0; overlapping && i < ranges.length - 1; i++) {
    for (let j = i + 1; j < ranges.length; j++) {
      if (rangeSetsOverlap(ranges[i]!, ranges[j]!)) throw configError(`range set ${i} overlaps with ${j}`);
    }
  }

  return {
    name,
    cniVersion,
    ranges,
    requestedIPs,
    routes: (ipam.routes ?? []).map(toRoute),
    dataDir: ipam.dataDir ?? '',
    resolvConf: ipam.resolvConf ?? '',
  };
}
