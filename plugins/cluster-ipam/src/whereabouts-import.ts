/**
 * Import of whereabouts' state, so that switching a network from whereabouts to cluster-ipam never hands out an
 * address a running pod holds: every allocation of every IPPool (whereabouts.cni.cncf.io/v1alpha1; spec.range,
 * spec.allocations: offset from the range's network address → {id, podref, ifname}) and every
 * OverlappingRangeIPReservation (one object per address, named after it, optionally `<network_name>-` first)
 * becomes a cluster-ipam allocation record, named by its address like the allocator names its own.
 *
 * The pod of each allocation is looked up (podref "namespace/name"): its UID and node go into the record, so
 * the reclaimer can later tell a live pod from a gone one. A record that already exists is left alone: the same
 * attachment (container ID + ifname) counts as imported before; another attachment is reported as a conflict.
 * Running the import twice is harmless.
 */
import { formatIP, type IP, network, parseCIDR, parseIP } from '@cnikit/ip';
import type { AllocationSpec } from './allocator.ts';
import { nameKey, rangeKeyOf, recordName } from './pool.ts';
import type { Store } from './store.ts';

/** How the importer reads the API: GET of a path, JSON answer (see kube-client in the tests). */
export type KubeGet = (path: string) => Promise<{ status: number; body: unknown }>;

export interface WhereaboutsImportOptions {
  /** The node recorded when the pod cannot be found (its own node is used when it can). */
  fallbackNode?: string;
  /** Namespace to read whereabouts' objects from; all namespaces when absent. */
  namespace?: string;
  /** Report what would be written without writing. */
  dryRun?: boolean;
  /**
   * network_names whose configurations set `enable_overlapping_ranges: false`: the allocator names their records per
   * range CIDR, so their IPPool entries are imported under those names (whereabouts keeps no
   * OverlappingRangeIPReservation for them; one found is skipped, since it names no range).
   */
  perRangeNetworks?: readonly string[];
  now?: () => Date;
}

export interface ImportedRecord {
  name: string;
  ip: string;
  network: string;
  containerID: string;
  ifName: string;
  podRef: string;
  source: string;
}

export interface WhereaboutsImportReport {
  /** Records written by this run. */
  created: ImportedRecord[];
  /** Addresses already recorded for the same attachment (an earlier import, or cluster-ipam itself). */
  existing: ImportedRecord[];
  /** Addresses recorded for another attachment: left as they are, listed for a human. */
  conflicts: Array<ImportedRecord & { holder: string }>;
  /** Objects or entries that could not be read (bad range, bad offset, unparseable name). */
  skipped: Array<{ source: string; reason: string }>;
}

/** The record spec the allocator writes; imported records also carry `imported: "whereabouts"`. */
export type ImportedAllocationSpec = AllocationSpec & { imported: string };

/**
 * The record name the allocator gives the address (pool.ts): per network_name (enable_overlapping_ranges, the
 * default), or per network_name and range CIDR when `range` is given (enable_overlapping_ranges false).
 */
export function recordNameFor(networkName: string, ip: IP, range?: { prefix: number }): string {
  const net = nameKey(networkName || 'default');
  const prefix = range ? `${net}.${rangeKeyOf(ip.family, ip.value, range.prefix)}` : net;
  return recordName(prefix, ip.family, ip.value);
}

/** whereabouts' normalizeRange: ':' and '/' become '-', a trailing ':' gets a '0'. */
function normalizeRange(range: string): string {
  return (range.endsWith(':') ? `${range}0` : range).replaceAll(':', '-').replaceAll('/', '-');
}

/** The network name an IPPool's name carries: `<network_name>-<normalized range>`, or the range alone. */
export function networkOfPool(poolName: string, range: string): string | undefined {
  const norm = normalizeRange(range);
  if (poolName === norm) return '';
  if (poolName.endsWith(`-${norm}`)) return poolName.slice(0, -norm.length - 1);
  return undefined;
}

/** An OverlappingRangeIPReservation's name: `[<network_name>-]<ip with ':' as '-'>`; known networks first. */
export function parseReservationName(
  name: string,
  knownNetworks: string[],
): { network: string; ip: IP } | undefined {
  const asIP = (t: string) => {
    const v4 = parseIP(t);
    if (v4?.family === 4) return v4;
    return parseIP(t.replaceAll('-', ':'));
  };
  for (const n of [...knownNetworks].sort((a, b) => b.length - a.length)) {
    if (n !== '' && name.startsWith(`${n}-`)) {
      const ip = asIP(name.slice(n.length + 1));
      if (ip) return { network: n, ip };
    }
  }
  const whole = asIP(name);
  if (whole) return { network: '', ip: whole };
  // an unknown network name: the longest tail that is an address
  for (let i = name.indexOf('-'); i >= 0; i = name.indexOf('-', i + 1)) {
    const ip = asIP(name.slice(i + 1));
    if (ip) return { network: name.slice(0, i), ip };
  }
  return undefined;
}

interface Item {
  metadata: { name: string; namespace?: string };
  // biome-ignore lint/suspicious/noExplicitAny: whereabouts' objects as the API returns them
  spec?: any;
}

async function listAll(get: KubeGet, plural: string, namespace?: string): Promise<Item[]> {
  const base = namespace
    ? `/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/${encodeURIComponent(namespace)}/${plural}`
    : `/apis/whereabouts.cni.cncf.io/v1alpha1/${plural}`;
  const items: Item[] = [];
  let cont = '';
  for (;;) {
    const r = await get(`${base}?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
    if (r.status === 404) return items; // whereabouts' CRDs are not installed: nothing to import
    if (r.status !== 200)
      throw new Error(`list ${plural}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    const body = r.body as { items?: Item[]; metadata?: { continue?: string } };
    items.push(...(body.items ?? []));
    cont = body.metadata?.continue ?? '';
    if (!cont) return items;
  }
}

interface Entry {
  network: string;
  ip: IP;
  prefix: number;
  pool: string;
  containerID: string;
  ifName: string;
  podRef: string;
  source: string;
}

/** Reads whereabouts' objects and writes a cluster-ipam allocation record for every address they hold. */
export async function importWhereabouts(
  get: KubeGet,
  store: Store,
  opts: WhereaboutsImportOptions = {},
): Promise<WhereaboutsImportReport> {
  const now = opts.now ?? (() => new Date());
  const report: WhereaboutsImportReport = { created: [], existing: [], conflicts: [], skipped: [] };
  const entries = new Map<string, Entry>(); // by record name: an address held in a pool and a reservation once
  const perRangeNames = new Set(opts.perRangeNetworks ?? []);
  const perRange = { has: (net: string) => perRangeNames.has(net || 'default') };

  const pools = await listAll(get, 'ippools', opts.namespace);
  const networks = new Set<string>();
  for (const p of pools) {
    const source = `ippool ${p.metadata.namespace ?? ''}/${p.metadata.name}`;
    const range = String(p.spec?.range ?? '');
    // a CIDR; a range written a-b/prefix counts from the network of its first address
    const slash = range.lastIndexOf('/');
    const addr = range.slice(0, Math.max(0, slash));
    const cidrOf = slash > 0 ? parseCIDR(`${addr.split('-')[0]}/${range.slice(slash + 1)}`) : undefined;
    if (!cidrOf) {
      report.skipped.push({ source, reason: `spec.range "${range}" is not a CIDR` });
      continue;
    }
    const first = network(cidrOf);
    const net = networkOfPool(p.metadata.name, range) ?? '';
    networks.add(net);
    const allocations = (p.spec?.allocations ?? {}) as Record<
      string,
      { id?: string; podref?: string; ifname?: string }
    >;
    for (const [offset, a] of Object.entries(allocations)) {
      if (!/^[0-9]+$/.test(offset)) {
        report.skipped.push({ source, reason: `allocation offset "${offset}" is not a number` });
        continue;
      }
      const value = first.value + BigInt(offset);
      const limit = first.family === 4 ? 1n << 32n : 1n << 128n;
      if (value >= limit) {
        report.skipped.push({ source, reason: `allocation offset ${offset} lies outside ${range}` });
        continue;
      }
      const ip: IP = { family: first.family, value };
      entries.set(recordNameFor(net, ip, perRange.has(net) ? cidrOf : undefined), {
        network: net,
        ip,
        prefix: cidrOf.prefix,
        pool: `${formatIP(first)}/${cidrOf.prefix}`,
        containerID: a.id ?? '',
        ifName: a.ifname ?? '',
        podRef: a.podref ?? '',
        source,
      });
    }
  }

  for (const r of await listAll(get, 'overlappingrangeipreservations', opts.namespace)) {
    const source = `overlappingrangeipreservation ${r.metadata.namespace ?? ''}/${r.metadata.name}`;
    const parsed = parseReservationName(r.metadata.name, [...networks]);
    if (!parsed) {
      report.skipped.push({ source, reason: 'the name is no address' });
      continue;
    }
    if (perRange.has(parsed.network)) {
      report.skipped.push({
        source,
        reason: `network ${parsed.network || 'default'} is imported per range (--no-overlapping-ranges): a reservation names no range`,
      });
      continue;
    }
    const name = recordNameFor(parsed.network, parsed.ip);
    if (entries.has(name)) continue; // the pool's allocation says the same, with its range
    entries.set(name, {
      network: parsed.network,
      ip: parsed.ip,
      prefix: parsed.ip.family === 4 ? 32 : 128,
      pool: '',
      containerID: r.spec?.containerid ?? '',
      ifName: r.spec?.ifname ?? '',
      podRef: r.spec?.podref ?? '',
      source,
    });
  }

  const pods = new Map<string, Promise<{ uid: string; node: string } | undefined>>();
  const podOf = (ref: string) => {
    const [ns, name] = ref.includes('/') ? ref.split('/', 2) : ['default', ref];
    if (!ns || !name) return Promise.resolve(undefined);
    let p = pods.get(ref);
    if (!p) {
      p = get(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`).then((r) => {
        if (r.status !== 200) return undefined;
        const b = r.body as { metadata?: { uid?: string }; spec?: { nodeName?: string } };
        return { uid: b.metadata?.uid ?? '', node: b.spec?.nodeName ?? '' };
      });
      pods.set(ref, p);
    }
    return p;
  };

  for (const [name, e] of entries) {
    const ipText = formatIP(e.ip);
    const rec: ImportedRecord = {
      name,
      ip: ipText,
      network: e.network,
      containerID: e.containerID,
      ifName: e.ifName,
      podRef: e.podRef,
      source: e.source,
    };
    const pod = await podOf(e.podRef);
    const [podNamespace, podName] = e.podRef.includes('/') ? e.podRef.split('/', 2) : ['', e.podRef];
    const spec: ImportedAllocationSpec = {
      // the allocator's network key (config.ts `net`): its DEL, GC and CHECK find the record by it
      network: nameKey(e.network || 'default'),
      pool: e.pool,
      ip: ipText,
      prefix: e.prefix,
      containerID: e.containerID,
      ifName: e.ifName,
      podNamespace: podNamespace ?? '',
      podName: podName ?? '',
      podUID: pod?.uid ?? '',
      node: pod?.node || opts.fallbackNode || '',
      block: '',
      borrowed: false,
      created: now().toISOString(),
      imported: 'whereabouts',
    };
    if (opts.dryRun) {
      const cur = await store.get<ImportedAllocationSpec>('allocations', name);
      if (!cur) report.created.push(rec);
      else if (cur.spec.containerID === e.containerID && (cur.spec.ifName ?? '') === e.ifName)
        report.existing.push(rec);
      else report.conflicts.push({ ...rec, holder: `${cur.spec.containerID}/${cur.spec.ifName}` });
      continue;
    }
    if (await store.create('allocations', name, spec)) {
      report.created.push(rec);
      continue;
    }
    const cur = await store.get<ImportedAllocationSpec>('allocations', name);
    if (cur && cur.spec.containerID === e.containerID && (cur.spec.ifName ?? '') === e.ifName)
      report.existing.push(rec);
    else if (cur) report.conflicts.push({ ...rec, holder: `${cur.spec.containerID}/${cur.spec.ifName}` });
    else if (await store.create('allocations', name, spec))
      report.created.push(rec); // deleted meanwhile
    else
      report.skipped.push({
        source: e.source,
        reason: `${ipText}: record ${name} changed during the import`,
      });
  }
  return report;
}
