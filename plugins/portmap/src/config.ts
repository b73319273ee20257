/**
 * portmap configuration (reference: plugins/meta/portmap main.go, plugins.md §4.1): decoding, option/backend
 * consistency, mapping validation and the container address selection from prevResult. Pure except for the
 * backend detection when `backend` is absent.
 */
import { detectBackend, type FirewallBackend } from '@cnikit/firewall';
import { formatIP, parseCIDR, parseIP } from '@cnikit/ip';
import {
  CniError,
  decode,
  ErrorCode,
  type Infer,
  type RequestBase,
  type Result,
  s,
} from '@cnikit/skel/plugin';
import type { PortMapping } from './mapping.ts';

export const DEFAULT_MARK_BIT = 13;

const mappingSchema = s.object({
  hostPort: s.int().default(0),
  containerPort: s.int().default(0),
  protocol: s.string().default(''),
  hostIP: s.string().default(''),
});

const confSchema = s.object({
  name: s.string().default(''),
  backend: s.string().optional(),
  snat: s.bool().optional(),
  conditionsV4: s.array(s.string()).optional(),
  conditionsV6: s.array(s.string()).optional(),
  masqAll: s.bool().default(false),
  markMasqBit: s.int().optional(),
  externalSetMarkChain: s.string().optional(),
  runtimeConfig: s.object({ portMappings: s.array(mappingSchema).optional() }).optional(),
});

export type RawConf = Infer<typeof confSchema>;

export interface PortMapConf {
  name: string;
  backend: FirewallBackend;
  /**
   * No backend configured or implied by an option, and the detection left to the ADD (`deferDetect`): it tries
   * iptables first and runs the detection only when that fails (nothing is changed by a failed iptables batch).
   */
  detectOnFailure?: true;
  snat: boolean;
  masqAll: boolean;
  markMasqBit: number;
  externalSetMarkChain?: string;
  conditionsV4?: string[];
  conditionsV6?: string[];
  mappings: PortMapping[];
}

/** Which backend a conditions list belongs to (the reference's detectBackendOfConditions). */
function backendOfConditions(c: readonly string[] | undefined): FirewallBackend | undefined {
  const first = c?.[0];
  if (!first) return undefined;
  return first[0] === '-' || first[0] === '!' ? 'iptables' : 'nftables';
}

function fail(msg: string): CniError {
  return new CniError(ErrorCode.Internal, msg);
}

/**
 * The reference's parseConfig (without prevResult): defaults snat=true, markMasqBit=13; `Cannot specify
 * externalSetMarkChain and markMasqBit`; `MasqMarkBit must be between 0 and 31`; backend detection and the
 * options-of-the-other-backend error; port numbers > 0. cnikit also refuses what would only fail later inside
 * iptables/nft: ports above 65535, a protocol other than tcp/udp/sctp (any case; lower-cased), a hostIP that is not an IP.
 */
export function decodeConf(
  config: Record<string, unknown>,
  opts: { detect?: () => FirewallBackend; needBackend?: boolean; deferDetect?: boolean } = {},
): PortMapConf {
  const detect = opts.detect ?? detectBackend;
  const raw = decode(confSchema, config);
  if (raw.markMasqBit !== undefined && raw.externalSetMarkChain !== undefined)
    throw fail('Cannot specify externalSetMarkChain and markMasqBit');
  const markMasqBit = raw.markMasqBit ?? DEFAULT_MARK_BIT;
  if (markMasqBit < 0 || markMasqBit > 31) throw fail('MasqMarkBit must be between 0 and 31');
  const owned: Record<FirewallBackend, string[]> = { iptables: [], nftables: [] };
  if (raw.externalSetMarkChain !== undefined) owned.iptables.push('externalSetMarkChain');
  for (const key of ['conditionsV4', 'conditionsV6'] as const) {
    const b = backendOfConditions(raw[key]);
    if (b) owned[b].push(key);
  }
  let backend: FirewallBackend;
  let detectOnFailure: true | undefined;
  if (raw.backend === undefined) {
    // DEL tears down both backends: the detection (a process start) only matters for the consistency check
    const implied = owned.iptables.length > 0 || owned.nftables.length > 0;
    const mustKnow = implied || (opts.needBackend !== false && !opts.deferDetect);
    backend = mustKnow ? detect() : 'iptables';
    if (!mustKnow && opts.deferDetect) detectOnFailure = true;
  } else if (raw.backend === 'iptables' || raw.backend === 'nftables') backend = raw.backend;
  else throw fail(`unrecognized backend ${JSON.stringify(raw.backend)}`);
  const wrong: FirewallBackend = backend === 'iptables' ? 'nftables' : 'iptables';
  if (owned[wrong].length > 0) {
    throw fail(
      `${backend} backend was requested but configuration contains ${wrong}-specific options [${owned[wrong].join(' ')}]`,
    );
  }
  const mappings: PortMapping[] = [];
  for (const m of raw.runtimeConfig?.portMappings ?? []) {
    if (m.containerPort <= 0) throw fail(`Invalid container port number: ${m.containerPort}`);
    if (m.hostPort <= 0) throw fail(`Invalid host port number: ${m.hostPort}`);
    if (m.containerPort > 65535)
      throw new CniError(ErrorCode.InvalidNetworkConfig, `Invalid container port number: ${m.containerPort}`);
    if (m.hostPort > 65535)
      throw new CniError(ErrorCode.InvalidNetworkConfig, `Invalid host port number: ${m.hostPort}`);
    const protocol = m.protocol.toLowerCase();
    if (!['tcp', 'udp', 'sctp'].includes(protocol))
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `Invalid protocol ${JSON.stringify(m.protocol)} for host port ${m.hostPort}: expected tcp, udp or sctp`,
      );
    let hostIP = m.hostIP;
    if (hostIP !== '') {
      const ip = parseIP(hostIP);
      if (!ip)
        throw new CniError(ErrorCode.InvalidNetworkConfig, `Invalid host IP ${JSON.stringify(m.hostIP)}`);
      hostIP = formatIP(ip);
    }
    mappings.push({ hostPort: m.hostPort, containerPort: m.containerPort, protocol, hostIP });
  }
  return {
    name: raw.name,
    backend,
    ...(detectOnFailure ? { detectOnFailure } : {}),
    snat: raw.snat ?? true,
    masqAll: raw.masqAll,
    markMasqBit,
    externalSetMarkChain: raw.externalSetMarkChain,
    conditionsV4: raw.conditionsV4,
    conditionsV6: raw.conditionsV6,
    mappings,
  };
}

/**
 * The plugin's config decoder: CHECK decodes as the reference's parseConfig does; ADD, DEL, GC and STATUS wrap a
 * failure like the reference (`failed to parse config: …`, keeping the code), and only ADD needs a backend when none
 * is configured or implied (DEL, GC and STATUS tear down or probe both); ADD detects it only when iptables fails.
 */
export function parseConf(raw: Record<string, unknown>, req: Pick<RequestBase, 'command'>): PortMapConf {
  if (req.command === 'CHECK') return decodeConf(raw);
  try {
    return decodeConf(raw, { needBackend: req.command === 'ADD', deferDetect: req.command === 'ADD' });
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(e.code, `failed to parse config: ${e.msg}`, e.details, { cause: err });
  }
}

/**
 * The container addresses (`ip/prefix`), IPv4 first: per family the first IP whose `interface` index is absent,
 * out of range, or points at an interface named CNI_IFNAME with a sandbox (the reference's rule).
 */
export function containerIPs(result: Result, ifName: string): Array<{ family: 4 | 6; ip: string }> {
  const out = new Map<4 | 6, string>();
  const ifaces = result.interfaces ?? [];
  for (const ip of result.ips ?? []) {
    const c = parseCIDR(ip.address);
    if (!c || out.has(c.ip.family)) continue;
    const idx = ip.interface;
    if (idx !== undefined && idx !== null && idx >= 0 && idx < ifaces.length) {
      const i = ifaces[idx];
      if (i?.name !== ifName || !i.sandbox) continue;
    }
    out.set(c.ip.family, ip.address);
  }
  return ([4, 6] as const)
    .filter((f) => out.has(f))
    .map((family) => ({ family, ip: out.get(family) as string }));
}
