/**
 * cluster-ipam configuration: whereabouts' keys as they are (pkg/config, pkg/types of k8snetworkplumbingwg/whereabouts)
 * so that switching is a change of `type`:
 *
 *   range (`10.0.0.0/24` or `10.0.0.10-10.0.0.50/24`), range_start, range_end, exclude[], ipRanges[] (each with
 *   range, range_start, range_end, exclude), network_name, enable_overlapping_ranges (default true), gateway,
 *   routes, dns, addresses[] ({address, gateway}), kubernetes.kubeconfig, kubernetes.k8s_api_root,
 *   configuration_path; datastore ("kubernetes", default, or "etcd") with etcd_host, etcd_username,
 *   etcd_password, etcd_key_file, etcd_cert_file, etcd_ca_cert_file.
 *
 * The flat file: the first that exists of configuration_path, /etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf,
 * /etc/cni/net.d/whereabouts.d/whereabouts.conf, /host/etc/cni/net.d/whereabouts.d/whereabouts.conf gives defaults
 * for keys the stdin config leaves unset (enable_overlapping_ranges always comes from stdin), as whereabouts does.
 * Ignored (they tune whereabouts' lock or its logs): leader_lease_duration, leader_renew_deadline,
 * leader_retry_period, sleep_for_race, log_file, log_level, reconciler_cron_expression, node_slice_size.
 *
 * Differences, deliberate: a range_start / range_end outside the range, an inverted range, ipRanges that overlap and
 * an exclude that misses its range are configuration errors (code 7) where whereabouts silently ignores or
 * misbehaves; ranges of /31, /32, /127 and /128 hand out every address (whereabouts refuses them); the gateway is
 * never handed out. Ours: `block_size` (addresses per node block, a power of two ≤ 256, default 32) and
 * `node_name` (else NODENAME, else `<configuration_path>/nodename`, else /etc/hostname: whereabouts' order).
 */

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  broadcast,
  type CIDR,
  contains,
  familyPrefix,
  formatIP,
  network,
  parseCIDR,
  parseIP,
} from '@cnikit/ip';
import { configError, dnsSchema, routeSchema, toDNS, toRoute } from '@cnikit/ipam';
import { CniError, type DNS, decode, ErrorCode, type RequestBase, type Route, s } from '@cnikit/skel';
import { makePool, nameKey, type Pool, type Span } from './pool.ts';
import { isResident } from './resident.ts';

export const FLAT_FILES = [
  '/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf',
  '/etc/cni/net.d/whereabouts.d/whereabouts.conf',
  '/host/etc/cni/net.d/whereabouts.d/whereabouts.conf',
];

const rangeSchema = s.object({
  range: s.string().optional(),
  range_start: s.string().optional(),
  range_end: s.string().optional(),
  exclude: s.array(s.string()).optional(),
});

const ipamSchema = s.object({
  type: s.string().optional(),
  range: s.string().optional(),
  range_start: s.string().optional(),
  range_end: s.string().optional(),
  exclude: s.array(s.string()).optional(),
  ipRanges: s.array(rangeSchema).optional(),
  network_name: s.string().optional(),
  enable_overlapping_ranges: s.bool().optional(),
  gateway: s.string().optional(),
  routes: s.array(routeSchema).optional(),
  dns: dnsSchema.optional(),
  addresses: s.array(s.object({ address: s.string(), gateway: s.string().optional() })).optional(),
  kubernetes: s.object({ kubeconfig: s.string().optional(), k8s_api_root: s.string().optional() }).optional(),
  configuration_path: s.string().optional(),
  datastore: s.string().optional(),
  etcd_host: s.string().optional(),
  etcd_username: s.string().optional(),
  etcd_password: s.string().optional(),
  etcd_key_file: s.string().optional(),
  etcd_cert_file: s.string().optional(),
  etcd_ca_cert_file: s.string().optional(),
  block_size: s.int({ min: 1 }).optional(),
  node_name: s.string().optional(),
});

const netSchema = s.object({
  name: s.string().optional(),
  cniVersion: s.string().optional(),
  ipam: ipamSchema.optional(),
});

export interface EtcdConf {
  host: string;
  username?: string;
  password?: string;
  keyFile?: string;
  certFile?: string;
  caCertFile?: string;
}

export interface StaticAddress {
  address: string;
  gateway?: string;
  family: 4 | 6;
}

export interface ClusterIPAMConf {
  name: string;
  cniVersion: string;
  /** The network's part of every store name (network_name, else "default"). */
  net: string;
  networkName: string;
  overlapping: boolean;
  pools: Pool[];
  /** Gateway text per pool index, when the gateway lies in that pool's range. */
  gateways: Map<number, string>;
  addresses: StaticAddress[];
  routes: Route[];
  dns: DNS;
  datastore: 'kubernetes' | 'etcd';
  kubernetes: { kubeconfig?: string; apiRoot?: string };
  etcd?: EtcdConf;
  configurationPath: string;
  /** The flat file the defaults came from, '' for none. */
  flatFile: string;
  node: string;
  pod: { namespace: string; name: string; uid: string };
}

type RawIpam = NonNullable<ReturnType<typeof decodeNet>['ipam']>;

function decodeNet(raw: unknown) {
  return decode(netSchema, raw);
}

/** CNI_ARGS as key=value pairs, leniently (whereabouts' args plus K8S_POD_UID; unknown keys are fine). */
export function cniArgs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(';')) {
    const i = pair.indexOf('=');
    if (i > 0) out[pair.slice(0, i)] = pair.slice(i + 1);
  }
  return out;
}

function parseRangeText(text: string, where: string): { cidr: CIDR; start?: bigint; end?: bigint } {
  const dash = text.indexOf('-');
  if (dash >= 0) {
    const first = parseIP(text.slice(0, dash).trim());
    if (!first) throw configError(`${where}: invalid range start IP in ${JSON.stringify(text)}`);
    const c = parseCIDR(text.slice(dash + 1).trim());
    if (!c) throw configError(`${where}: invalid CIDR ${JSON.stringify(text.slice(dash + 1))}`);
    return { cidr: c, start: first.value, end: c.ip.value };
  }
  const c = parseCIDR(text.trim());
  if (!c) throw configError(`${where}: invalid CIDR ${JSON.stringify(text)}`);
  return { cidr: c };
}

function parseBound(text: string | undefined, where: string, key: string): bigint | undefined {
  if (text === undefined || text === '') return undefined;
  const ip = parseIP(text);
  if (!ip) throw configError(`${where}: invalid ${key} ${JSON.stringify(text)}`);
  return ip.value;
}

function parseExclude(text: string, where: string, family: 4 | 6): Span {
  const c = parseCIDR(text);
  if (c) {
    if (c.ip.family !== family)
      throw configError(`${where}: exclude ${text} is not of the range's family (IPv${family})`);
    return { start: network(c).value, end: broadcast(c).value };
  }
  const ip = parseIP(text);
  if (!ip) throw configError(`${where}: invalid CIDR in exclude list ${text}`);
  if (ip.family !== family)
    throw configError(`${where}: exclude ${text} is not of the range's family (IPv${family})`);
  return { start: ip.value, end: ip.value };
}

function buildPool(
  index: number,
  r: { range?: string; range_start?: string; range_end?: string; exclude?: string[] },
  gateway: string | undefined,
  blockSize: number | undefined,
): Pool {
  const where = `range ${index}${r.range ? ` (${r.range})` : ''}`;
  if (!r.range) throw configError(`${where}: "range" is missing`);
  const parsed = parseRangeText(r.range, where);
  const cidr = parsed.cidr;
  const fam = cidr.ip.family;
  const prefix = familyPrefix(cidr);
  const net = network(cidr).value;
  const last = broadcast(cidr).value;
  const hostBits = (fam === 4 ? 32 : 128) - prefix;
  // whereabouts' usable addresses: not the network address, not the last one (ranges of ≥ 2 host bits)
  const firstUsable = hostBits >= 2 ? net + 1n : net;
  const lastUsable = hostBits >= 2 ? last - 1n : last;
  const cidrText = `${formatIP({ family: fam, value: net })}/${prefix}`;
  const startGiven = parsed.start ?? parseBound(r.range_start, where, 'range_start');
  const endGiven = parsed.end ?? parseBound(r.range_end, where, 'range_end');
  for (const [key, v] of [
    ['range_start', startGiven],
    ['range_end', endGiven],
  ] as const) {
    if (v !== undefined && (v < net || v > last))
      throw configError(
        `${where}: ${key} ${formatIP({ family: fam, value: v })} is outside the range ${cidrText}`,
      );
  }
  // range_start may name the network address (whereabouts' default): the first usable one is meant
  const start = startGiven === undefined || startGiven < firstUsable ? firstUsable : startGiven;
  const end = endGiven === undefined || endGiven > lastUsable ? lastUsable : endGiven;
  if (start > end)
    throw configError(
      `${where}: the range is inverted or empty: start ${formatIP({ family: fam, value: start })} is after end ${formatIP({ family: fam, value: end })}`,
    );
  const excludes: Span[] = [];
  for (const e of r.exclude ?? []) {
    const span = parseExclude(e, where, fam);
    if (span.end < start || span.start > end)
      throw configError(
        `${where}: exclude ${e} is outside the range ${formatIP({ family: fam, value: start })}-${formatIP({ family: fam, value: end })}`,
      );
    excludes.push(span);
  }
  let gw: bigint | undefined;
  if (gateway) {
    const g = parseIP(gateway);
    if (g && g.family === fam) gw = g.value;
  }
  const p = makePool(index, cidr, cidrText, start, end, excludes, gw, blockSize);
  if (p.size === 0n) throw configError(`${where}: every address of the range is excluded`);
  return p;
}

function readFlatFile(paths: string[]): { ipam: RawIpam | undefined; file: string } {
  for (const path of paths) {
    if (!existsSync(path)) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw configError(`flat configuration file ${path}: ${(err as Error).message}`);
    }
    return { ipam: decode(ipamSchema, parsed, path), file: path };
  }
  return { ipam: undefined, file: '' };
}

/**
 * Whereabouts' node name: NODENAME, then `<configuration_path>/nodename`, then /etc/hostname (first line). In the
 * warm service the call's environment holds only the forwarded CNI_/CNIKIT_ variables: there NODENAME, else
 * NODE_NAME (the DaemonSet's downward-API variable) of the service's own environment comes before the files.
 */
export function nodeName(
  env: Readonly<Record<string, string | undefined>>,
  configurationPath: string,
  configured?: string,
): string {
  if (configured?.trim()) return configured.trim();
  const fromEnv =
    env.NODENAME?.trim() ||
    (isResident() ? (process.env.NODENAME ?? process.env.NODE_NAME)?.trim() : undefined);
  if (fromEnv) return fromEnv;
  for (const f of [...(configurationPath ? [join(configurationPath, 'nodename')] : []), '/etc/hostname']) {
    try {
      const t = readFileSync(f, 'utf8').trim();
      if (t) return t;
    } catch {
      // next source
    }
  }
  throw new CniError(
    ErrorCode.InvalidEnvironmentVariables,
    'cannot determine the node name: set NODENAME, write <configuration_path>/nodename or /etc/hostname',
  );
}

export interface ParseOptions {
  /** The flat-file lookup list (tests); default FLAT_FILES. */
  flatFiles?: string[];
}

/** The plugin's config decoder. */
export function parseConf(
  raw: Record<string, unknown>,
  req: Pick<RequestBase, 'args' | 'command'> & { env?: Readonly<Record<string, string | undefined>> },
  opts: ParseOptions = {},
): ClusterIPAMConf {
  const n = decodeNet(raw);
  if (!n.ipam) throw configError("IPAM config missing 'ipam' key");
  const own = n.ipam;
  const flat = readFlatFile([
    ...(own.configuration_path ? [own.configuration_path] : []),
    ...(opts.flatFiles ?? FLAT_FILES),
  ]);
  // stdin wins key by key; the flat file fills what stdin leaves unset
  const ipam: RawIpam = { ...(flat.ipam ?? {}) };
  for (const [k, v] of Object.entries(own)) {
    if (v !== undefined) (ipam as Record<string, unknown>)[k] = v;
  }
  if (flat.ipam?.kubernetes && own.kubernetes)
    ipam.kubernetes = { ...flat.ipam.kubernetes, ...stripUndefined(own.kubernetes) };
  ipam.enable_overlapping_ranges = own.enable_overlapping_ranges;

  const args = cniArgs(req.args);
  const entries = [
    ...(ipam.range
      ? [
          {
            range: ipam.range,
            range_start: ipam.range_start,
            range_end: ipam.range_end,
            exclude: ipam.exclude,
          },
        ]
      : []),
    ...(ipam.ipRanges ?? []),
  ];
  if (entries.length === 0 && (ipam.addresses ?? []).length === 0 && !args.IP)
    throw configError('no range given: set "range" or "ipRanges"');
  const bs = ipam.block_size;
  if (bs !== undefined && (bs > 256 || (bs & (bs - 1)) !== 0))
    throw configError(`block_size ${bs} is not a power of two between 1 and 256`);
  const blockBits = bs === undefined ? undefined : Math.log2(bs);
  const pools = entries.map((e, i) => buildPool(i, e, ipam.gateway, blockBits));
  for (let i = 0; i < pools.length; i++) {
    for (let j = i + 1; j < pools.length; j++) {
      const a = pools[i]!;
      const b = pools[j]!;
      if (a.family === b.family && a.start <= b.end && b.start <= a.end)
        throw configError(`range ${i} (${a.cidr}) overlaps with range ${j} (${b.cidr})`);
    }
  }
  const gateways = new Map<number, string>();
  if (ipam.gateway) {
    const g = parseIP(ipam.gateway);
    if (!g) throw configError(`couldn't parse gateway IP: ${ipam.gateway}`);
    for (const p of pools) {
      if (contains(parseCIDR(p.cidr)!, g)) gateways.set(p.index, formatIP(g));
    }
  }

  const addresses: StaticAddress[] = [];
  const staticAddr = (text: string, gateway: string | undefined, where: string) => {
    const c = parseCIDR(text.trim());
    if (!c) throw configError(`invalid CIDR in ${where} ${text}`);
    let gw: string | undefined;
    if (gateway) {
      const g = parseIP(gateway.trim());
      if (!g) throw configError(`invalid gateway address: ${gateway}`);
      gw = formatIP(g);
    }
    addresses.push({
      address: `${formatIP(c.ip)}/${familyPrefix(c)}`,
      ...(gw ? { gateway: gw } : {}),
      family: c.ip.family,
    });
  };
  for (const a of ipam.addresses ?? []) staticAddr(a.address, a.gateway, 'addresses');
  if (args.IP) for (const item of args.IP.split(',')) staticAddr(item, undefined, 'CNI_ARGS IP');
  if (args.GATEWAY) {
    for (const item of args.GATEWAY.split(',')) {
      const g = parseIP(item.trim());
      if (!g) throw configError(`invalid gateway address: ${item}`);
      for (const a of addresses) {
        if (contains(parseCIDR(a.address)!, g)) a.gateway = formatIP(g);
      }
    }
  }
  const cniVersion = n.cniVersion ?? '';
  const v4 = addresses.filter((a) => a.family === 4).length + pools.filter((p) => p.family === 4).length;
  const v6 = addresses.length + pools.length - v4;
  if ((v4 > 1 || v6 > 1) && ['', '0.1.0', '0.2.0'].includes(cniVersion))
    throw configError(`CNI version ${cniVersion} does not support more than 1 address per family`);

  const datastore = ipam.datastore ?? 'kubernetes';
  if (datastore !== 'kubernetes' && datastore !== 'etcd')
    throw configError(`datastore ${JSON.stringify(datastore)}: expected "kubernetes" or "etcd"`);
  let etcd: EtcdConf | undefined;
  if (datastore === 'etcd') {
    if (!ipam.etcd_host) throw configError('datastore "etcd" needs etcd_host (host:port)');
    etcd = {
      host: ipam.etcd_host,
      ...(ipam.etcd_username ? { username: ipam.etcd_username } : {}),
      ...(ipam.etcd_password ? { password: ipam.etcd_password } : {}),
      ...(ipam.etcd_key_file ? { keyFile: ipam.etcd_key_file } : {}),
      ...(ipam.etcd_cert_file ? { certFile: ipam.etcd_cert_file } : {}),
      ...(ipam.etcd_ca_cert_file ? { caCertFile: ipam.etcd_ca_cert_file } : {}),
    };
  }
  const networkName = ipam.network_name ?? '';
  const configurationPath = ipam.configuration_path
    ? flat.file === ipam.configuration_path
      ? dirname(ipam.configuration_path)
      : ipam.configuration_path
    : '';
  const env = req.env ?? process.env;
  // GC and STATUS carry no pod; the node is needed by every verb (GC is node-scoped)
  const node = nodeName(env, configurationPath, ipam.node_name);
  return {
    name: n.name ?? '',
    cniVersion,
    net: nameKey(networkName || 'default'),
    networkName,
    overlapping: ipam.enable_overlapping_ranges ?? true,
    pools,
    gateways,
    addresses,
    routes: (ipam.routes ?? []).map(toRoute),
    dns: toDNS(ipam.dns ?? {}),
    datastore,
    kubernetes: {
      ...(ipam.kubernetes?.kubeconfig ? { kubeconfig: ipam.kubernetes.kubeconfig } : {}),
      ...(ipam.kubernetes?.k8s_api_root ? { apiRoot: ipam.kubernetes.k8s_api_root } : {}),
    },
    ...(etcd ? { etcd } : {}),
    configurationPath,
    flatFile: flat.file,
    node,
    pod: {
      namespace: args.K8S_POD_NAMESPACE ?? '',
      name: args.K8S_POD_NAME ?? '',
      uid: args.K8S_POD_UID ?? '',
    },
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
