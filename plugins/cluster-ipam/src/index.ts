/**
 * cluster-ipam: one address pool for the whole cluster (Multus secondary networks on a shared L2), configured with
 * whereabouts' keys (config.ts), stored as per-node blocks and one record per address on the Kubernetes API
 * (kubernetes.ts) or etcd, with no global lock (allocator.ts). ADD, DEL (idempotent), CHECK (the record is there
 * and is this attachment's), GC (this node's records of attachments that are not valid) and STATUS (code 50 when
 * an ADD on this node could not get an address).
 *
 * Codes: the backend unreachable or answering 5xx/429 → 11 (try again later) within the call's bound
 * (CNIKIT_CLUSTER_IPAM_TIMEOUT_MS, default 30 s); no rights, no CRD, an unusable kubeconfig → 7; an exhausted pool
 * → 11 naming the pool and its size (addresses come back as pods go).
 */
import {
  CniError,
  CURRENT_VERSION,
  ErrorCode,
  errorReason,
  type IPConfig,
  internalError,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import { Allocator, addressOf, PoolExhaustedError } from './allocator.ts';
import { deadlineOf, openStore } from './backend.ts';
import { type ClusterIPAMConf, parseConf } from './config.ts';
import { StoreConfigError } from './kubernetes.ts';
import { describePool } from './pool.ts';
import { type Store, StoreUnavailableError } from './store.ts';
import { warmUse } from './warm.ts';

/** A store or allocator failure as the CNI error it is. */
export function toCniError(err: unknown, what: string): unknown {
  if (CniError.is(err)) return err;
  if (err instanceof StoreUnavailableError)
    return new CniError(ErrorCode.TryAgainLater, `${what}: ${err.message}`, '', { cause: err });
  if (err instanceof StoreConfigError)
    return new CniError(ErrorCode.InvalidNetworkConfig, `${what}: ${err.message}`, '', { cause: err });
  if (err instanceof PoolExhaustedError)
    return new CniError(ErrorCode.TryAgainLater, `${what}: ${err.message}`, '', { cause: err });
  return err;
}

async function withAllocator<T>(
  req: Request<ClusterIPAMConf>,
  what: string,
  f: (a: Allocator) => Promise<T>,
): Promise<T> {
  const conf = req.conf;
  const allocatorConf = {
    net: conf.net,
    overlapping: conf.overlapping,
    pools: conf.pools,
    node: conf.node,
  };
  let store: Store | undefined;
  let warm: ReturnType<typeof warmUse>;
  let failed = true;
  try {
    // in the node's warm service: its kept store and in-memory view of this node (warm.ts); else cold
    warm = warmUse(conf, deadlineOf(req.env), () => openStore(conf, req.env));
    if (warm) {
      const out = await f(new Allocator(warm.store, allocatorConf, undefined, warm.view));
      failed = false;
      return out;
    }
    store = openStore(conf, req.env);
    return await f(new Allocator(store, allocatorConf));
  } catch (err) {
    throw toCniError(err, what);
  } finally {
    await warm?.done(failed);
    await store?.close();
  }
}

async function add(req: Request<ClusterIPAMConf>): Promise<Result> {
  const conf = req.conf;
  const ips: IPConfig[] = [];
  if (conf.pools.length > 0) {
    const got = await withAllocator(req, 'cluster-ipam ADD', (a) =>
      a.allocate({
        containerID: req.containerId,
        ifName: req.ifName,
        podNamespace: conf.pod.namespace,
        podName: conf.pod.name,
        podUID: conf.pod.uid,
      }),
    );
    for (const g of got) {
      const gw = conf.gateways.get(g.pool.index);
      ips.push({ address: addressOf(g.record.spec), ...(gw ? { gateway: gw } : {}) });
    }
  }
  for (const s of conf.addresses)
    ips.push({ address: s.address, ...(s.gateway ? { gateway: s.gateway } : {}) });
  const result: Result = { cniVersion: CURRENT_VERSION, ips };
  if (conf.routes.length > 0) result.routes = conf.routes;
  if (Object.keys(conf.dns).length > 0) result.dns = conf.dns;
  return result;
}

async function del(req: Request<ClusterIPAMConf>): Promise<void> {
  if (req.conf.pools.length === 0) return;
  const released = await withAllocator(req, 'cluster-ipam DEL', (a) =>
    a.release(req.containerId, req.ifName),
  );
  if (released.length > 0) req.log.info(`released ${released.join(', ')}`);
}

async function check(req: Request<ClusterIPAMConf>): Promise<void> {
  const conf = req.conf;
  if (conf.pools.length === 0) return;
  const found = await withAllocator(req, 'cluster-ipam CHECK', (a) => a.find(req.containerId, req.ifName));
  const prev = new Set((req.prevResult?.ips ?? []).map((ip) => ip.address));
  for (const p of conf.pools) {
    const r = found.find((x) => x.spec.pool === p.key);
    if (!r)
      throw internalError(
        `cluster-ipam: no address of container ${req.containerId} interface ${req.ifName} in pool ${describePool(p)}`,
      );
    if (req.prevResult && !prev.has(addressOf(r.spec)))
      throw internalError(
        `cluster-ipam: ${addressOf(r.spec)} of container ${req.containerId} interface ${req.ifName} is not in prevResult (${[...prev].join(', ') || 'no address'})`,
      );
  }
}

async function gc(req: Request<ClusterIPAMConf>): Promise<void> {
  const valid = req.validAttachments;
  if (!valid) {
    req.log.warn('GC without cni.dev/valid-attachments: nothing removed');
    return;
  }
  if (req.conf.pools.length === 0) return;
  const released = await withAllocator(req, 'cluster-ipam GC', (a) => a.gc(valid));
  if (released.length > 0) req.log.info(`GC released ${released.join(', ')}`);
}

async function status(req: Request<ClusterIPAMConf>): Promise<void> {
  if (req.conf.pools.length === 0) return;
  let pools: Awaited<ReturnType<Allocator['status']>>;
  try {
    pools = await withAllocator(req, 'cluster-ipam STATUS', (a) => a.status());
  } catch (err) {
    const e = CniError.is(err) ? err : undefined;
    throw new CniError(ErrorCode.PluginNotAvailable, e ? e.msg : errorReason(err), '', { cause: err });
  }
  for (const s of pools) {
    if (s.freeOwn + s.freeUnclaimed + s.freeBorrowable === 0n)
      throw new CniError(
        ErrorCode.PluginNotAvailable,
        `cluster-ipam: pool ${describePool(s.pool)} is exhausted: ${s.used} addresses allocated, none free in this node's ${s.ownBlocks} blocks, no unclaimed block, none to borrow in the other ${s.blocks - s.ownBlocks} blocks`,
      );
  }
}

export const plugin: Plugin<ClusterIPAMConf> = {
  name: 'cluster-ipam',
  ipam: true,
  about: `CNI cluster-ipam plugin cnikit ${VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
  // `cluster-ipam import …` (whereabouts' objects into records), `cluster-ipam reclaimer …` (the elected reclaimer)
  commands: {
    import: async (args) => (await import('./import-command.ts')).importMain(args),
    reclaimer: async (args) => {
      const etcd = await import('./etcd-reclaimer.ts');
      if (etcd.wantsEtcd(args, process.env)) return etcd.etcdReclaimerMain(args);
      return (await import('./reclaimer.ts')).reclaimerMain(args);
    },
  },
  // `cnikit serve` with $CNIKIT_CLUSTER_IPAM_RECLAIMER on hosts the reclaimer on its event loop
  resident: {
    command: 'reclaimer',
    async start(args, log) {
      // --datastore etcd (or $CNIKIT_CLUSTER_IPAM_DATASTORE=etcd): the heartbeat reclaimer of etcd-reclaimer.ts
      const ds = process.env.CNIKIT_CLUSTER_IPAM_DATASTORE;
      if (ds !== undefined && ds !== '' && ds !== 'etcd' && ds !== 'kubernetes')
        throw new Error(
          `CNIKIT_CLUSTER_IPAM_DATASTORE (ConfigMap key cluster-ipam-datastore) must be "kubernetes" or "etcd"; got ${JSON.stringify(ds)}`,
        );
      const etcd = await import('./etcd-reclaimer.ts');
      if (etcd.wantsEtcd(args, process.env)) return etcd.startEtcdReclaimer(args, process.env, log);
      const { startReclaimer } = await import('./reclaimer.ts');
      return startReclaimer(args, process.env, log);
    },
  },
};

// The switch from whereabouts (its IPPool and OverlappingRangeIPReservation objects into this plugin's records).
export { importWhereabouts } from './whereabouts-import.ts';
