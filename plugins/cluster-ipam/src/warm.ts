/**
 * cluster-ipam in the node's warm service (`cnikit serve`, packages/warm): the runtime's call reaches the service
 * through cnikit-client (docs/warm-mode.md), which runs this plugin in its own long-lived process. There the
 * plugin keeps, from call to call, per datastore: one open store (its connection kept alive; each call bounds it
 * anew with `rebound`), and per network and node: the NodeView (allocator.ts) — this node's blocks and the
 * records it holds, a bitmap in memory kept in sync by the service's own writes; the views of one node and network
 * (configurations that differ in their pools or spelling) share its blocks and one lock for reads and block claims
 * (NodeBlocks: a pool's block claimed once, not once per view). An ADD is then one durable write
 *  (the record's create), a DEL one delete. The view is read from the watch cache (at the first call, when it runs
 * dry, when it is a minute old, after a store failure) and once exactly after its first create, not older than it
 * (what a killed image of the service wrote is seen: allocator.ts confirm). The service runs these calls beside
 * each other (packages/warm/src/serve.ts BESIDE): each gets the kept store with a bound of its own (withBound).
 * Without the service (an exec'd plugin, a process that ends with the call) nothing is kept: the cold path.
 */
import { statSync } from 'node:fs';
import { NodeBlocks, NodeView } from './allocator.ts';
import type { ClusterIPAMConf } from './config.ts';
import { isResident } from './resident.ts';
import type { Store } from './store.ts';

export { isResident };

interface Entry {
  store: Store;
}

const stores = new Map<string, Entry>();
const views = new Map<string, NodeView>();
/** Per store, network and node: the blocks and claim lock every view of them shares (allocator.ts NodeBlocks). */
const nodes = new Map<string, NodeBlocks>();

function netnsId(): string {
  try {
    return String(statSync('/proc/thread-self/ns/net').ino);
  } catch {
    return '';
  }
}

function storeKey(conf: ClusterIPAMConf): string {
  // the caller's network namespace too: a connection opened in one namespace is not used from another
  return JSON.stringify([conf.datastore, conf.kubernetes, conf.etcd, netnsId()]);
}

function nodeKey(conf: ClusterIPAMConf): string {
  return JSON.stringify([storeKey(conf), conf.net, conf.node]);
}

function viewKey(conf: ClusterIPAMConf): string {
  return JSON.stringify([
    storeKey(conf),
    conf.net,
    conf.node,
    conf.overlapping,
    conf.pools.map((p) => p.key),
  ]);
}

export interface WarmUse {
  store: Store;
  view: NodeView;
  /** After the call: keep the store open (warm), or close a store that cannot be kept. */
  done(failed: boolean): Promise<void>;
}

/**
 * The store and view of a call in the warm service; undefined in a cold process. `open` makes a store; one
 * without `rebound` (a per-call bound it cannot renew) is opened per call and closed after it.
 */
export function warmUse(conf: ClusterIPAMConf, deadlineMs: number, open: () => Store): WarmUse | undefined {
  if (!isResident()) return undefined;
  const sk = storeKey(conf);
  let entry = stores.get(sk);
  let kept = true;
  if (!entry) {
    const store = open();
    if (store.rebound) {
      entry = { store };
      stores.set(sk, entry);
    } else {
      entry = { store };
      kept = false;
    }
  }
  // a call of its own bound beside the others (concurrent calls of the service), else the one store re-bounded
  const bounded = entry.store.withBound?.(deadlineMs);
  if (!bounded) entry.store.rebound?.(deadlineMs);
  const vk = viewKey(conf);
  let view = views.get(vk);
  if (!view) {
    const nk = nodeKey(conf);
    let shared = nodes.get(nk);
    if (!shared) {
      shared = new NodeBlocks();
      nodes.set(nk, shared);
    }
    view = new NodeView(shared);
    views.set(vk, view);
  }
  const store = bounded ?? entry.store;
  const v = view;
  return {
    store,
    view: v,
    async done(failed) {
      if (failed) {
        // a failed call may have left the view behind the store: read it exactly next time
        v.loadedAt = 0;
      }
      if (!kept) await store.close();
    },
  };
}

/** Forgets every kept store and view (tests; a store that failed for good). */
export async function dropWarmState(): Promise<void> {
  const all = [...stores.values()];
  stores.clear();
  views.clear();
  nodes.clear();
  for (const e of all) await e.store.close().catch(() => {});
}
