/**
 * Cluster-wide IPAM under load: 1000 ADDs spread over 10 "node" processes, each running --per-node ADDs at a time,
 * against a real kube-apiserver (scripts/k8s/control-plane.ts, private network namespace) and a real etcd
 * (Debian's, loopback port of its own), for a pool of 1000 addresses (addresses = pods) and of 4096.
 *
 *   node --conditions=cnikit-source --import tsx bench/cluster-ipam.ts --full        (the issue's run, ~20 min)
 *   node --conditions=cnikit-source --import tsx bench/cluster-ipam.ts [--adds=N] [--nodes=10] [--per-node=10]
 *        [--pools=1000,4096] [--only=whereabouts,cnikit-k8s,cnikit-k8s-warm,cnikit-etcd] [--budget=S] [--kills=3]
 *        [--warm=service|in-process] [--rate=R[,R…]] [--json]
 * --rate=R: the open loop: pods arrive at R per second over the nodes (as a scheduler binds them) and each ADD
 * starts on arrival, however many are in flight; R=0 or no --rate: the closed loop (--per-node at a time per node,
 * the saturation figure). Several rates: one run of every scenario each. Every scenario also prints its latency
 * by start-time decile (is the tail the start or the steady state).
 * Without --full (what `npm run bench` runs): 100 ADDs, pool 1000, the baseline's budget 30 s (a minute or two).
 * --full: 1000 ADDs, pools 1000 and 4096, budget 240 s per scenario (22 min at load 20–40: 8 of them the two
 * whereabouts-style runs, 2 each the cleanups of the cold Kubernetes runs).
 *
 * Side by side in one run:
 *   whereabouts   whereabouts' algorithm, written here from its source: every ADD is one leader election on the
 *                 cluster-wide Lease "whereabouts" (coordination.k8s.io/v1; client-go semantics: lease 1500 ms,
 *                 retry 500 ms with jitter 1.2, released on cancel), then a LIST of the IPPools (its connectivity
 *                 check), a GET of the one IPPool holding every allocation, the lowest free offset, and a JSON
 *                 patch of the IPPool with a resourceVersion test (422 -> read again, up to 100 times), then the
 *                 release of the Lease. whereabouts' own CRDs (plugins/cluster-ipam/src/testdata/whereabouts-crds.yaml).
 *   cnikit-k8s    cnikit cold on the Kubernetes API: per ADD what an exec'd plugin does (its own store: a new
 *                 connection and TLS handshake, the node's view read from the watch cache, the record's create);
 *                 the process start of the plugin is not in it (cold start: docs/benchmarks.md)
 *   cnikit-k8s-warm  cnikit in the node's warm service: per node the real `dist-bin/cnikit serve` (its own socket
 *                 and directory, NODENAME of the node), and every ADD is the static warm client
 *                 dist-bin/warm/cluster-ipam exec'd with the CNI environment and the configuration on stdin, as a
 *                 runtime calls it (the latency of an ADD is the client's exec to its exit; the service keeps the
 *                 store and the node's view, and runs cluster-ipam calls beside each other). Needs `npm run build`
 *                 (BENCH_DIST=dir: another build's dist-bin/, for A/B runs of two builds).
 *                 The node's store calls are not seen from outside: the API server's own counts are reported;
 *                 `failed` counts the ADDs the client answered from the cold executable (a fallback).
 *                 --warm=in-process: the allocator in the node process itself (NodeView kept, no client, no
 *                 service), ADDs beside each other as the service runs them.
 *   cnikit-etcd   cnikit cold on etcd (a store per ADD).
 * Kills (--kills=N, default 3 per scenario): at 1/(N+1), 2/(N+1), … of the ADDs answered or of the budget, whichever
 * comes first, a node process with ADDs in flight is killed with SIGKILL (with the service processes it named on a
 * `pid` line, for a scenario that starts one) — every second kill the moment its next durable write of an address
 * lands, before the answer (the worker kills itself there), the others whenever the bench's timer fires. A kill is a
 * node crash: the runtime dies too, so the ADDs it cut are never answered nor DEL'd. The node restarts at once
 * (a standby process, its modules already loaded, takes over: the restart is the node-scoped CNI GC with the pods
 * the node answered as the valid attachments, then the store and view of a fresh start), and ADDs the pods not
 * answered yet, the cut ones with new container IDs (new sandboxes). whereabouts has no CNI GC: its restart is the
 * start alone.
 * After each scenario (not timed): GC on every node with the answered pods valid, the runtime's DEL of every pod
 * (answered or failed), then every record left is a leak ("leaks after kills"); whereabouts gets the DELs (one
 * read-modify-write of its IPPool removing those containers' allocations, what its DELs do one at a time) and no GC.
 * Then the backend is emptied (deletecollection of every kind, etcd's /bench/ range) and the next scenario's
 * precondition, the objects each kind holds, is counted and printed: a scenario never lists another's records.
 * Reported: total wall time from the start signal to the last ADD, ADDs/s, p50/p99 of one ADD, failed ADDs,
 * duplicates (the same address handed out twice, from the answers and from the stored state), kills, leaks after
 * kills, calls per ADD, the load average; then one markdown table of every scenario, and where the time goes.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Allocator, type AllocatorConf, NodeView } from '../plugins/cluster-ipam/src/allocator.ts';
import { parseConf } from '../plugins/cluster-ipam/src/config.ts';
import { prefixEnd } from '../plugins/cluster-ipam/src/etcd.ts';
import { EtcdStore } from '../plugins/cluster-ipam/src/etcd-store.ts';
import { KubernetesStore } from '../plugins/cluster-ipam/src/kubernetes.ts';
import type { ListOptions, Store, StoredObject, StoreKind } from '../plugins/cluster-ipam/src/store.ts';
import { startTestEtcd } from '../plugins/cluster-ipam/src/testdata/etcd-testenv.ts';
import { type ControlPlane, startControlPlane } from '../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../scripts/k8s-build.mjs';
import { KubeClient } from './lib/kube-client.ts';

const ROOT = join(import.meta.dirname, '..');
const NS = 'kube-system'; // whereabouts' namespace when the kubeconfig's context names none
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Scenario = 'whereabouts' | 'cnikit-k8s' | 'cnikit-k8s-warm' | 'cnikit-etcd';

interface WorkerSpec {
  scenario: Scenario;
  node: string;
  nodeIndex: number;
  nodes: number;
  adds: number;
  perNode: number;
  pool: number;
  /** The run's network name: names the IPPool / the records. */
  net: string;
  kubeconfig?: string;
  etcd?: { host: string };
  /** 'allocator': cluster-ipam's allocator (allocator.ts); 'records': the storage layer alone (see below). */
  driver: 'allocator' | 'records';
  /** No new ADD starts after this many ms from the start signal; waiting ones give up. */
  budgetMs: number;
  /** cnikit-k8s-warm: the real service and client ('service', default), or the allocator in the node process. */
  warm?: 'service' | 'in-process';
  /**
   * Open loop (--rate=R): pods arrive at R per second over all the nodes (pod k of the run at k/R s, node k mod
   * nodes), each ADD starts on arrival whatever is in flight, as kubelet runs a bound pod's sandbox; without it the
   * closed loop: perNode ADDs at a time on every node (the saturation figure).
   */
  rate?: number;
  /** The pods this node process ADDs (pod name, container ID); without it `adds` pods named by index. */
  pods?: Pod[];
  /**
   * A restarted node (after a kill): before it is ready it runs the node-scoped CNI GC with these container IDs
   * as the valid attachments (the runtime's live sandboxes on the node), as a node's runtime does at its start.
   */
  gc?: string[];
}

/** One pod of the run: its name and the container ID of its sandbox (a new one when a kill made it start again). */
interface Pod {
  pod: string;
  cid: string;
}

interface WorkerResult {
  latencies: number[];
  ips: string[];
  errors: string[];
  retries: number;
  /** ADDs not started, or given up, when the time budget ran out. */
  unfinished: number;
  /** Store / API calls of the run by verb (see Calls), and how many calls each finished ADD made. */
  calls: CallTable;
  callsPerAdd: number[];
  /** TCP/TLS connections the node process opened during the run (keep-alive: few; one store per ADD: one each). */
  connections: number;
}

class OutOfBudget extends Error {}
/** cnikit-k8s-warm with the real service: how many ADDs the client answered from the cold executable. */
let warmFallbacks = () => 0;
let budgetEnd = Number.POSITIVE_INFINITY;
/**
 * Told by the bench (`die` on stdin): the node process kills itself with SIGKILL the moment its next durable write
 * of an address lands (a record's create, whereabouts' IPPool patch), before the ADD is answered: the kill that
 * leaves an allocation nobody was told about.
 */
let dieAtWrite = false;
const wrote = () => {
  if (dieAtWrite) process.kill(process.pid, 'SIGKILL');
};

// ---------------------------------------------------------------------------------------------------------------
// instrumentation: every store / API call by verb, its outcome and its time as the node process sees it

interface CallStat {
  n: number;
  /** create-if-absent that found the name taken, update/delete precondition failures, HTTP 409/422 */
  conflicts: number;
  errors: number;
  ms: number[];
}
type CallTable = Record<string, CallStat>;

function record(table: CallTable, key: string, ms: number, outcome: 'ok' | 'conflict' | 'error'): void {
  let s = table[key];
  if (!s) {
    s = { n: 0, conflicts: 0, errors: 0, ms: [] };
    table[key] = s;
  }
  s.n++;
  if (outcome === 'conflict') s.conflicts++;
  if (outcome === 'error') s.errors++;
  s.ms.push(Math.round(ms * 10) / 10);
}

/** A Store that counts and times every call into `table`, and into `perAdd` (the calls of one ADD). */
class CountingStore implements Store {
  rebound?: (ms: number) => void;
  constructor(
    readonly inner: Store,
    readonly table: CallTable,
    readonly perAdd: { n: number } = { n: 0 },
  ) {
    if (inner.rebound) this.rebound = (ms) => inner.rebound?.(ms);
  }
  async #timed<T>(key: string, f: () => Promise<T>, conflict: (v: T) => boolean): Promise<T> {
    const t0 = performance.now();
    this.perAdd.n++;
    try {
      const v = await f();
      record(this.table, key, performance.now() - t0, conflict(v) ? 'conflict' : 'ok');
      return v;
    } catch (e) {
      record(this.table, key, performance.now() - t0, 'error');
      throw e;
    }
  }
  list<T>(kind: StoreKind, prefix?: string, opts?: ListOptions): Promise<StoredObject<T>[]> {
    const key = `list ${kind}${opts?.node ? ' (node)' : ' (pool)'}${opts?.cached ? ' cached' : ' exact'}`;
    return this.#timed(
      key,
      () => this.inner.list<T>(kind, prefix, opts),
      () => false,
    );
  }
  get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined> {
    return this.#timed(
      `get ${kind}`,
      () => this.inner.get<T>(kind, name),
      () => false,
    );
  }
  async create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    const v = await this.#timed(
      `create ${kind}`,
      () => this.inner.create<T>(kind, name, spec),
      (v) => v === undefined,
    );
    if (v && kind === 'allocations') wrote();
    return v;
  }
  update<T>(kind: StoreKind, name: string, spec: T, version: string): Promise<StoredObject<T> | undefined> {
    return this.#timed(
      `update ${kind}`,
      () => this.inner.update<T>(kind, name, spec, version),
      (v) => v === undefined,
    );
  }
  delete(kind: StoreKind, name: string, version?: string): Promise<boolean> {
    return this.#timed(
      `delete ${kind}`,
      () => this.inner.delete(kind, name, version),
      (v) => !v,
    );
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Counts the connections this process opens (http and https agents). */
let connections = 0;
function countConnections(): void {
  for (const proto of [http.Agent.prototype, https.Agent.prototype] as unknown as Array<{
    createConnection: (...a: unknown[]) => unknown;
  }>) {
    const orig = proto.createConnection;
    proto.createConnection = function (this: unknown, ...a: unknown[]) {
      connections++;
      return orig.apply(this, a);
    };
  }
}

/** The bench's KubeClient with every request counted by verb and resource kind. */
function countedKube(kube: KubeClient, table: CallTable, perAdd: { n: number }): KubeClient['request'] {
  return async (method, path, body, contentType) => {
    const res = /\/(leases|ippools|allocations)(\/[^/?]+)?/.exec(path);
    const key = `${method} ${res ? `${res[1]}${res[2] ? '/name' : ''}` : path}`;
    const t0 = performance.now();
    perAdd.n++;
    try {
      const r = await kube.request(method, path, body, contentType);
      record(table, key, performance.now() - t0, r.status === 409 || r.status === 422 ? 'conflict' : 'ok');
      if (method === 'PATCH' && r.status === 200 && key.startsWith('PATCH ippools')) wrote();
      return r;
    } catch (e) {
      record(table, key, performance.now() - t0, 'error');
      throw e;
    }
  };
}

// ---------------------------------------------------------------------------------------------------------------
// addresses: 10.10.0.0/19, the pool is range_start 10.10.0.1 .. range_start + size - 1

const FIRST = (10 << 24) | (10 << 16); // 10.10.0.0, the range's network address: whereabouts' offset 0
const ipOf = (offset: number) => {
  const v = FIRST + offset;
  return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
};
const RANGE = '10.10.0.0/19';

// ---------------------------------------------------------------------------------------------------------------
// whereabouts' algorithm

const LEASE_MS = 1500; // leader_lease_duration
const RETRY_MS = 500; // leader_retry_period
const JITTER = 1.2; // client-go's JitterFactor for the elector's retry loop
const DATASTORE_RETRIES = 100;

const jitter = () => sleep(RETRY_MS + Math.random() * JITTER * RETRY_MS);

/** One ADD the way whereabouts does it on the Kubernetes API. */
async function whereaboutsAdd(
  kube: Pick<KubeClient, 'request'>,
  spec: WorkerSpec,
  podName: string,
  containerID: string,
): Promise<{ ip: string; retries: number }> {
  const identity = `default/${podName}`;
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/whereabouts`;
  const now = () => new Date().toISOString().replace(/Z$/, '000Z'); // MicroTime
  let retries = 0;
  // leader election (client-go tryAcquireOrRenew in a jittered loop)
  let lease: { metadata: { resourceVersion: string }; spec: Record<string, unknown> } | undefined;
  let observedRaw = '';
  let observedAt = 0;
  for (;;) {
    const got = await kube.request('GET', leasePath);
    if (got.status === 404) {
      const made = await kube.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'whereabouts', namespace: NS },
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: Math.trunc(LEASE_MS / 1000),
          acquireTime: now(),
          renewTime: now(),
          leaseTransitions: 0,
        },
      });
      if (made.status === 201) {
        lease = made.body;
        break;
      }
    } else if (got.status === 200) {
      const cur = got.body.spec ?? {};
      const raw = JSON.stringify(cur);
      if (raw !== observedRaw) {
        observedRaw = raw;
        observedAt = Date.now();
      }
      const heldByOther =
        cur.holderIdentity && cur.holderIdentity !== identity && observedAt + LEASE_MS > Date.now();
      if (!heldByOther) {
        const upd = await kube.request('PUT', leasePath, {
          ...got.body,
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: Math.trunc(LEASE_MS / 1000),
            acquireTime: now(),
            renewTime: now(),
            leaseTransitions: (cur.leaseTransitions ?? 0) + (cur.holderIdentity === identity ? 0 : 1),
          },
        });
        if (upd.status === 200) {
          lease = upd.body;
          break;
        }
      }
    } else throw new Error(`GET lease: HTTP ${got.status}`);
    retries++;
    if (Date.now() > budgetEnd) throw new OutOfBudget();
    await jitter();
  }
  try {
    // IPManagementKubernetesUpdate
    const pools = `/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/${NS}/ippools`;
    const name = `${spec.net}-${RANGE.replaceAll('/', '-')}`;
    for (let j = 0; j < DATASTORE_RETRIES; j++) {
      const status = await kube.request('GET', pools); // "Status": a LIST of every IPPool
      if (status.status !== 200) throw new Error(`LIST ippools: HTTP ${status.status}`);
      const got = await kube.request('GET', `${pools}/${name}`);
      if (got.status === 404) {
        await kube.request('POST', pools, {
          apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
          kind: 'IPPool',
          metadata: { name, namespace: NS },
          spec: { range: RANGE, allocations: {} },
        });
        retries++;
        continue; // "pool initialized": once more, to read its resourceVersion
      }
      if (got.status !== 200) throw new Error(`GET ippool: HTTP ${got.status}`);
      const allocations: Record<string, unknown> = got.body.spec.allocations ?? {};
      let offset = -1;
      for (let o = 1; o <= spec.pool; o++) {
        if (!(String(o) in allocations)) {
          offset = o;
          break;
        }
      }
      if (offset < 0) throw new Error(`pool ${RANGE} exhausted`);
      const path = `/spec/allocations/${offset}`;
      const patch = [
        { op: 'test', path: '/metadata/resourceVersion', value: got.body.metadata.resourceVersion },
        { op: 'test', path, value: null },
        { op: 'add', path, value: { id: containerID, podref: `default/${podName}`, ifname: 'net1' } },
      ];
      const r = await kube.request('PATCH', `${pools}/${name}`, patch, 'application/json-patch+json');
      if (r.status === 200) return { ip: ipOf(offset), retries };
      if (r.status !== 422)
        throw new Error(`PATCH ippool: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
      retries++;
    }
    throw new Error(`no update of the IPPool after ${DATASTORE_RETRIES} tries`);
  } finally {
    // ReleaseOnCancel: an empty holder, 1 s
    if (lease)
      await kube.request('PUT', leasePath, {
        ...lease,
        spec: {
          leaseDurationSeconds: 1,
          acquireTime: now(),
          renewTime: now(),
          leaseTransitions: lease.spec.leaseTransitions,
        },
      });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// cnikit
//
// CNIKIT_DRIVER: until the cluster-ipam allocator is merged into this branch, the cnikit side is the storage
// layer alone: one allocation record per address, taken by create-if-absent (the Store contract), each node
// scanning from its own start (offset node × pool / nodes) so nodes rarely meet. No lock, no whole-pool object.

const BENCH_GROUP = 'bench.cnikit.dev';
const BENCH_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: allocations.${BENCH_GROUP}
spec:
  group: ${BENCH_GROUP}
  names: { kind: Allocation, listKind: AllocationList, plural: allocations, singular: allocation }
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`;

/** Create-if-absent of one custom resource per record (the bench's stand-in for the Kubernetes Store). */
class BenchKubeRecords {
  constructor(readonly kube: KubeClient) {}
  async create(name: string, spec: unknown): Promise<boolean> {
    const r = await this.kube.request('POST', `/apis/${BENCH_GROUP}/v1alpha1/namespaces/${NS}/allocations`, {
      apiVersion: `${BENCH_GROUP}/v1alpha1`,
      kind: 'Allocation',
      metadata: { name },
      spec,
    });
    if (r.status === 201) return true;
    if (r.status === 409) return false;
    throw new Error(`POST allocation: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
  }
}

/** One ADD of a node process; `perAdd` counts the store / API calls it makes. */
type Adder = (
  podName: string,
  containerID: string,
  perAdd: { n: number },
) => Promise<{ ip: string; retries: number }>;

/** Every call of the node process, by verb. */
const calls: CallTable = {};

function cnikitAdder(spec: WorkerSpec, create: (name: string, body: unknown) => Promise<boolean>): Adder {
  let cursor = Math.floor((spec.nodeIndex * spec.pool) / spec.nodes);
  return async (podName, containerID, perAdd) => {
    let retries = 0;
    for (let tried = 0; tried < spec.pool; tried++) {
      const offset = 1 + (cursor++ % spec.pool);
      const ip = ipOf(offset);
      const name = `${spec.net}.${ip}`;
      const body = { ip, containerID, ifName: 'net1', podNamespace: 'default', podName, node: spec.node };
      const t0 = performance.now();
      perAdd.n++;
      const made = await create(name, body);
      record(calls, 'create allocations', performance.now() - t0, made ? 'ok' : 'conflict');
      if (made) return { ip, retries };
      retries++;
    }
    throw new Error(`pool ${RANGE} exhausted`);
  };
}

/**
 * cluster-ipam's allocator: one ADD = allocate() for a pod, as the plugin's ADD does. Cold (`open` given): a store
 * of its own per ADD, closed after it. Warm (`view` given): the node's one store and view, one ADD at a time.
 */
function allocatorAdder(spec: WorkerSpec, store: Store | (() => Store), view?: NodeView): Adder {
  const conf = parseConf(
    {
      name: spec.net,
      cniVersion: '1.1.0',
      ipam: {
        type: 'cluster-ipam',
        range: RANGE,
        range_start: ipOf(1),
        range_end: ipOf(spec.pool),
        network_name: spec.net,
      },
    },
    { args: '', command: 'ADD', env: { NODENAME: spec.node } },
    { flatFiles: [] },
  );
  const aconf = { net: conf.net, overlapping: conf.overlapping, pools: conf.pools, node: spec.node };
  return async (podName, containerID, perAdd) => {
    const one = async () => {
      const s = typeof store === 'function' ? store() : store;
      try {
        const [a] = await new Allocator(new CountingStore(s, calls, perAdd), aconf, undefined, view).allocate(
          {
            containerID,
            ifName: 'net1',
            podNamespace: 'default',
            podName,
            podUID: `uid-${containerID}`,
          },
        );
        if (!a) throw new Error('no address');
        return { ip: a.ip, retries: 0 };
      } finally {
        if (typeof store === 'function') await s.close();
      }
    };
    // the warm service runs a node's ADDs beside each other (packages/warm/src/serve.ts, BESIDE)
    return one();
  };
}

/**
 * The node's warm service: the real `cnikit serve` of dist-bin/ (socket and directory of its own, NODENAME), and
 * one ADD = one exec of the static warm client dist-bin/warm/cluster-ipam, as a runtime makes it.
 */
async function serviceAdder(
  spec: WorkerSpec,
): Promise<{ add: Adder; close: () => Promise<void>; fallbacks: () => number }> {
  // BENCH_DIST: another build's dist-bin/ (A/B runs of two builds)
  const dist = process.env.BENCH_DIST ?? join(ROOT, 'dist-bin');
  for (const f of ['cnikit', 'warm/cluster-ipam'])
    if (!existsSync(join(dist, f))) throw new Error(`${join(dist, f)} is missing: npm run build`);
  const dir = mkdtempSync(join(tmpdir(), `cnikit-bench-warm-${spec.nodeIndex}-`));
  const sockDir = join(dir, 'run');
  mkdirSync(sockDir, { mode: 0o700 });
  const socket = join(sockDir, 'cnikit.sock');
  const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
  const log = openSync(join(dir, 'serve.log'), 'a');
  const svc = spawn(
    join(dist, 'cnikit'),
    ['serve', '--socket', socket, '--metrics', 'off', '--deadline-ms', '60000'],
    { stdio: ['ignore', 'ignore', log], env: { PATH, NODENAME: spec.node } },
  );
  closeSync(log);
  // the bench's kills take the node's service with the node (a node crash)
  if (svc.pid) process.stdout.write(`pid\t${svc.pid}\n`);
  for (let i = 0; ; i++) {
    const r = spawnSync(join(dist, 'cnikit'), ['serve', '--check', '--socket', socket], { env: { PATH } });
    if (r.status === 0) break;
    if (i > 300 || svc.exitCode !== null) throw new Error(`cnikit serve of ${spec.node} does not answer`);
    await sleep(100);
  }
  const conf = JSON.stringify({
    cniVersion: '1.1.0',
    name: spec.net,
    type: 'cluster-ipam',
    ipam: {
      type: 'cluster-ipam',
      range: RANGE,
      range_start: ipOf(1),
      range_end: ipOf(spec.pool),
      network_name: spec.net,
      kubernetes: { kubeconfig: spec.kubeconfig },
    },
  });
  const add: Adder = (podName, containerID) =>
    new Promise((resolve, reject) => {
      const p = spawn(join(dist, 'warm', 'cluster-ipam'), [], {
        stdio: ['pipe', 'pipe', 'ignore'],
        env: {
          PATH,
          CNIKIT_SOCKET: socket,
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: containerID,
          // a namespace that is not the caller's (the plugin checks that); cluster-ipam never enters it
          CNI_NETNS: '/proc/1/ns/net',
          CNI_IFNAME: 'net1',
          CNI_PATH: join(dist, 'warm'),
          CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${podName};K8S_POD_UID=uid-${containerID}`,
        },
      });
      let out = '';
      p.stdout.on('data', (d: Buffer) => {
        out += d.toString('utf8');
      });
      p.on('error', reject);
      p.on('close', (code) => {
        try {
          const j = JSON.parse(out) as { ips?: Array<{ address: string }>; msg?: string };
          const ip = j.ips?.[0]?.address?.split('/')[0];
          if (code === 0 && ip) resolve({ ip, retries: 0 });
          else reject(new Error(`warm client exit ${code}: ${j.msg ?? out.slice(0, 200)}`));
        } catch {
          reject(new Error(`warm client exit ${code}: ${out.slice(0, 200)}`));
        }
      });
      p.stdin.end(conf);
    });
  const fallbacks = () => {
    try {
      return readFileSync(join(sockDir, 'client-fallbacks'), 'utf8')
        .split('\n')
        .filter((l) => l !== '').length;
    } catch {
      return 0;
    }
  };
  const close = async () => {
    if (svc.exitCode === null && svc.signalCode === null) {
      const done = new Promise((r) => svc.once('exit', r));
      svc.kill('SIGTERM');
      const t = setTimeout(() => svc.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(t);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { add, close, fallbacks };
}

// ---------------------------------------------------------------------------------------------------------------
// a node process

async function worker(spec: WorkerSpec): Promise<void> {
  if (spec.gc) {
    // a GC that fails (the API server too busy to answer the node's exact list in time) is the runtime's to try
    // again later: the node goes on; what it would have released is counted by the cleanup after the run
    try {
      process.stdout.write(`gc\t${await nodeGc(spec, spec.gc)}\n`);
    } catch (e) {
      process.stdout.write(`gcerr\t${(e as Error).message.replace(/\s+/g, ' ')}\n`);
    }
  }
  let add: Adder;
  let close = async () => {};
  if (spec.scenario !== 'cnikit-etcd') {
    const kube = new KubeClient(spec.kubeconfig as string, { maxSockets: spec.perNode * 2 });
    close = async () => kube.close();
    if (spec.scenario === 'whereabouts')
      add = (p, c, perAdd) => whereaboutsAdd({ request: countedKube(kube, calls, perAdd) }, spec, p, c);
    else if (spec.scenario === 'cnikit-k8s-warm' && spec.warm !== 'in-process') {
      // the node's real warm service, ADDs through the warm client
      const served = await serviceAdder(spec);
      add = served.add;
      warmFallbacks = served.fallbacks;
      const prev = close;
      close = async () => {
        await served.close();
        await prev();
      };
    } else if (spec.scenario === 'cnikit-k8s-warm') {
      // one store for the node's process, as the warm service keeps it (its bound: the whole run)
      const store = new KubernetesStore({ kubeconfig: spec.kubeconfig as string, deadlineMs: 3_600_000 });
      const view = new NodeView();
      add = allocatorAdder(spec, store, view);
      // the service's start: the view read once, the connection open, before the start signal
      await new Allocator(store, {
        net: spec.net,
        overlapping: true,
        pools: [],
        node: spec.node,
      }).listAll({ cached: true });
      const prev = close;
      close = async () => {
        await store.close();
        await prev();
      };
    } else if (spec.driver === 'allocator') {
      add = allocatorAdder(
        spec,
        () => new KubernetesStore({ kubeconfig: spec.kubeconfig as string, deadlineMs: 30_000 }),
      );
    } else {
      const records = new BenchKubeRecords(kube);
      add = cnikitAdder(spec, (n, b) => records.create(n, b));
    }
    // perNode connections open before the start signal (TLS handshakes are not part of an ADD)
    // (a loaded API server may take long: tried again for up to a minute)
    await Promise.all(
      Array.from({ length: spec.perNode }, async () => {
        for (let i = 0; ; i++) {
          try {
            return await kube.request('GET', '/version');
          } catch (e) {
            if (i >= 5) throw e;
          }
        }
      }),
    );
  } else {
    const store: Store = new EtcdStore({ endpoints: spec.etcd?.host as string, prefix: '/bench/' });
    close = () => store.close();
    add =
      spec.driver === 'allocator'
        ? allocatorAdder(
            spec,
            () =>
              new EtcdStore({
                endpoints: spec.etcd?.host as string,
                prefix: '/bench/',
                deadline: Date.now() + 30_000,
              }),
          )
        : cnikitAdder(spec, async (n, b) => (await store.create('allocations', n, b)) !== undefined);
    await Promise.all(Array.from({ length: spec.perNode }, () => store.get('allocations', 'warm-up')));
  }
  countConnections();
  process.stdout.write('ready\n');
  await new Promise<void>((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.once('line', () => resolve());
    rl.on('line', (l) => {
      if (l === 'die') dieAtWrite = true;
    });
  });
  budgetEnd = Date.now() + spec.budgetMs;
  const res: WorkerResult = {
    latencies: [],
    ips: [],
    errors: [],
    retries: 0,
    unfinished: 0,
    calls,
    callsPerAdd: [],
    connections: 0,
  };
  let next = 0;
  const pods =
    spec.pods ??
    Array.from({ length: spec.adds }, (_, i) => ({
      pod: `pod-${spec.nodeIndex}-${i}`,
      cid: `ctr-${spec.nodeIndex}-${i}`,
    }));
  // every ADD is told to the bench as it starts and ends (a killed node process tells nothing more: its ADDs
  // in flight are the ones the kill cut)
  const say = (...f: (string | number)[]) => process.stdout.write(`${f.join('\t')}\n`);
  const goAt = performance.now();
  await Promise.all(
    Array.from({ length: spec.rate ? pods.length : spec.perNode }, async () => {
      for (;;) {
        const i = next++;
        const pod = pods[i];
        if (!pod) return;
        if (spec.rate) {
          // open loop: this node's i-th pod arrives at (i * nodes + nodeIndex) / rate s after the start signal
          const at = goAt + ((i * spec.nodes + spec.nodeIndex) * 1000) / spec.rate;
          const wait = at - performance.now();
          if (wait > 0) await sleep(wait);
        }
        if (Date.now() > budgetEnd) {
          res.unfinished++;
          say('unf', pod.cid);
          continue;
        }
        const t0 = performance.now();
        const perAdd = { n: 0 };
        say('start', pod.cid);
        try {
          const r = await add(pod.pod, pod.cid, perAdd);
          const ms = performance.now() - t0;
          res.latencies.push(ms);
          res.callsPerAdd.push(perAdd.n);
          res.ips.push(r.ip);
          res.retries += r.retries;
          say('ok', pod.cid, r.ip, ms.toFixed(1), perAdd.n);
        } catch (e) {
          if (e instanceof OutOfBudget) {
            res.unfinished++;
            say('unf', pod.cid);
          } else {
            res.errors.push((e as Error).message);
            say('err', pod.cid, (e as Error).message.replace(/\s+/g, ' '));
          }
        }
        if (spec.rate) return; // open loop: one ADD per arrival
      }
    }),
  );
  res.connections = connections;
  // a warm ADD the client ran cold (the service did not take it in time) is not the service's answer
  for (let i = warmFallbacks(); i > 0; i--)
    res.errors.push('the warm client fell back to the cold executable');
  await close();
  process.stdout.write(`${JSON.stringify(res)}\n`);
}

// ---------------------------------------------------------------------------------------------------------------
// after a scenario: the runtime's DEL of every pod, the node-scoped GC, the leaks; then a clean state

/** The allocator's configuration of the bench's network (what allocatorAdder parses), without the node. */
function benchConf(net: string, pool: number): Omit<AllocatorConf, 'node'> {
  const conf = parseConf(
    {
      name: net,
      cniVersion: '1.1.0',
      ipam: {
        type: 'cluster-ipam',
        range: RANGE,
        range_start: ipOf(1),
        range_end: ipOf(pool),
        network_name: net,
      },
    },
    { args: '', command: 'GC', env: { NODENAME: 'bench' } },
    { flatFiles: [] },
  );
  return { net: conf.net, overlapping: conf.overlapping, pools: conf.pools };
}

/** A store of the scenario's backend, bounded generously (cleanup is not timed). */
function cleanupStore(scenario: Scenario, where: { kubeconfig?: string; etcd?: { host: string } }): Store {
  return scenario === 'cnikit-etcd'
    ? new EtcdStore({
        endpoints: where.etcd?.host as string,
        prefix: '/bench/',
        deadline: Date.now() + 600_000,
      })
    : new KubernetesStore({ kubeconfig: where.kubeconfig as string, deadlineMs: 600_000 });
}

/** The node-scoped CNI GC: this node's records whose attachment is not among `valid` are deleted. */
async function nodeGc(spec: WorkerSpec, valid: string[]): Promise<number> {
  if (spec.scenario === 'whereabouts' || spec.driver !== 'allocator') return 0; // whereabouts has no CNI GC
  const store = cleanupStore(spec.scenario, spec);
  try {
    const a = new Allocator(store, { ...benchConf(spec.net, spec.pool), node: spec.node });
    return (await a.gc(valid.map((containerID) => ({ containerID, ifname: 'net1' })))).length;
  } finally {
    await store.close();
  }
}

interface CleanupSpec {
  scenario: Scenario;
  driver: WorkerSpec['driver'];
  net: string;
  pool: number;
  kubeconfig?: string;
  etcd?: { host: string };
  /** Per node: the live attachments (GC's valid ones) and every container the runtime DELs. */
  nodes: Array<{ node: string; valid: string[]; del: string[] }>;
}

interface CleanupResult {
  /** Records the node-scoped GC deleted, and the addresses the DELs released. */
  gcReleased: number;
  delReleased: number;
  /** Records left after DEL + GC: every one is a leak (its container never got an address, or was deleted). */
  leaks: number;
  leakSample: string[];
  ms: number;
  /** What is left in the backend's kinds after the reset (all must be 0: the next scenario's precondition). */
  after: Record<string, number>;
  error?: string;
}

const WB_POOLS = `/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/${NS}/ippools`;
const KUBE_COLLECTIONS: Record<string, string> = {
  ipamallocations: '/apis/ipam.cnikit.dev/v1alpha1/ipamallocations',
  ipamblocks: '/apis/ipam.cnikit.dev/v1alpha1/ipamblocks',
  ippools: WB_POOLS,
  'bench allocations': `/apis/${BENCH_GROUP}/v1alpha1/namespaces/${NS}/allocations`,
  'whereabouts lease': `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/whereabouts`,
};

/**
 * After a scenario, where its backend is reachable: GC on every node with the pods that hold an address as the
 * valid attachments (a node's runtime after a crash: the killed ADDs' sandboxes are gone), then the runtime's DEL
 * of every pod the bench created (answered or failed), then every record still there is counted as a leak. The
 * whereabouts-style baseline gets the DELs (one read-modify-write of the IPPool removing every allocation of those
 * containers, what its DELs do one by one) and no GC: it has none. Then everything of the backend is deleted.
 */
async function cleanupScenario(c: CleanupSpec): Promise<CleanupResult> {
  const t0 = performance.now();
  // NaN until counted: a cleanup that failed reports no figure rather than 0
  const out: CleanupResult = {
    gcReleased: 0,
    delReleased: 0,
    leaks: Number.NaN,
    leakSample: [],
    ms: 0,
    after: {},
  };
  // not timed: a call the loaded API server did not answer in its bound is tried again
  const retried = async <T>(f: () => Promise<T>): Promise<T> => {
    for (let i = 0; ; i++) {
      try {
        return await f();
      } catch (e) {
        if (i >= 4) throw e;
        await sleep(2000);
      }
    }
  };
  try {
    if (c.scenario === 'whereabouts') {
      const kube = new KubeClient(c.kubeconfig as string);
      try {
        const del = new Set(c.nodes.flatMap((n) => n.del));
        const name = `${c.net}-${RANGE.replaceAll('/', '-')}`;
        for (let j = 0; j < 20; j++) {
          const got = await kube.request('GET', `${WB_POOLS}/${name}`);
          if (got.status === 404) {
            out.leaks = 0;
            break;
          }
          const keep: Record<string, { id: string; podref?: string }> = {};
          let removed = 0;
          for (const [o, v] of Object.entries(
            (got.body.spec.allocations ?? {}) as Record<string, { id: string; podref?: string }>,
          ))
            if (del.has(v.id)) removed++;
            else keep[o] = v;
          const r = await kube.request(
            'PATCH',
            `${WB_POOLS}/${name}`,
            [
              { op: 'test', path: '/metadata/resourceVersion', value: got.body.metadata.resourceVersion },
              { op: 'replace', path: '/spec/allocations', value: keep },
            ],
            'application/json-patch+json',
          );
          if (r.status === 422) continue;
          if (r.status !== 200) throw new Error(`PATCH ippool: HTTP ${r.status}`);
          out.delReleased = removed;
          out.leaks = Object.keys(keep).length;
          out.leakSample = Object.entries(keep)
            .slice(0, 5)
            .map(([o, v]) => `${ipOf(Number(o))} ${v.id} ${v.podref ?? ''}`);
          break;
        }
      } finally {
        kube.close();
      }
    } else if (c.driver === 'allocator') {
      const conf = benchConf(c.net, c.pool);
      for (const n of c.nodes) {
        const store = cleanupStore(c.scenario, c);
        try {
          const view = new NodeView();
          const a = new Allocator(store, { ...conf, node: n.node }, undefined, view);
          const gced = await retried(() =>
            a.gc(n.valid.map((containerID) => ({ containerID, ifname: 'net1' }))),
          );
          out.gcReleased += gced.length;
          await retried(() => a.load(view, true));
          let i = 0;
          await Promise.all(
            Array.from({ length: 8 }, async () => {
              for (let cid = n.del[i++]; cid !== undefined; cid = n.del[i++]) {
                const released = await retried(() => a.release(cid, 'net1'));
                out.delReleased += released.length;
              }
            }),
          );
        } finally {
          await store.close();
        }
      }
      const store = cleanupStore(c.scenario, c);
      try {
        const left = await retried(() => new Allocator(store, { ...conf, node: '' }).listAll({}));
        out.leaks = left.length;
        out.leakSample = left.slice(0, 5).map((r) => `${r.spec.ip} ${r.spec.containerID} ${r.spec.node}`);
      } finally {
        await store.close();
      }
    }
  } catch (e) {
    out.error = (e as Error).message;
  }
  out.after = await resetBackend(c.scenario === 'cnikit-etcd' ? 'etcd' : 'kubernetes', c);
  out.ms = Math.round(performance.now() - t0);
  return out;
}

/** Deletes every object the bench's scenarios write in a backend; returns what is left per kind (0 each). */
async function resetBackend(
  backend: 'kubernetes' | 'etcd',
  where: { kubeconfig?: string; etcd?: { host: string } },
): Promise<Record<string, number>> {
  if (backend === 'etcd') {
    const s = new EtcdStore({ endpoints: where.etcd?.host as string, prefix: '/bench/' });
    try {
      await s.client.deleteRange('/bench/', prefixEnd('/bench/'));
      const r = await s.client.range({ key: '/bench/', rangeEnd: prefixEnd('/bench/'), limit: 1 });
      return { 'etcd /bench/ keys': r.count };
    } finally {
      await s.close();
    }
  }
  const kube = new KubeClient(where.kubeconfig as string);
  try {
    const left: Record<string, number> = {};
    for (const [kind, path] of Object.entries(KUBE_COLLECTIONS)) {
      // a collection's DELETE is a deletecollection: one call for every object of the kind
      const d = await kube.request('DELETE', path);
      if (d.status !== 200 && d.status !== 404) throw new Error(`DELETE ${path}: HTTP ${d.status}`);
      const l = await kube.request('GET', path);
      left[kind] = l.status !== 200 ? 0 : Array.isArray(l.body.items) ? l.body.items.length : 1;
    }
    return left;
  } finally {
    kube.close();
  }
}

/** The --cleanup process (in the API server's network namespace): cleanupScenario of BENCH_CLEANUP. */
async function cleanupProcess(): Promise<void> {
  const r = await cleanupScenario(JSON.parse(process.env.BENCH_CLEANUP as string));
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

// ---------------------------------------------------------------------------------------------------------------
// the run

interface RunResult {
  scenario: Scenario;
  pool: number;
  adds: number;
  totalS: number;
  addsPerS: number;
  p50: number;
  p99: number;
  failed: number;
  duplicates: number;
  storedDuplicates: number;
  /** Records in the store that no successful ADD answered. */
  leaks: number;
  stored: number;
  retries: number;
  unfinished: number;
  driver: string;
  firstError?: string;
  /** Every node process's calls merged; calls per finished ADD (mean, p50, max); connections opened. */
  calls: CallTable;
  callsPerAdd: { mean: number; p50: number; p99: number; max: number };
  connections: number;
  /** Node processes: spawn to ready (process start, module load, store/connection warm-up), median and max. */
  startMs: { p50: number; max: number };
  /** What the servers spent during the run (from the start signal to the last answer). */
  server: ServerUse;
  /** Node processes killed with SIGKILL mid-ADD (and restarted), the ADDs in flight they cut, kill -> ready ms. */
  kills: number;
  killedAdds: number;
  /** Records the restarted nodes' GC deleted (ADDs whose create landed before the kill cut their answer). */
  gcAtRestart: number;
  /** GCs of restarted nodes that failed (the node went on without). */
  gcErrors: string[];
  /** Of the kills, those that landed just after a durable write of an address (before its answer). */
  killsAfterWrite: number;
  restartMs: number[];
  /** After the run: GC, the runtime's DELs, the leaks, the reset. */
  cleanup: CleanupResult;
  /** What the stores held when the scenario started (the previous scenario's reset). */
  stateBefore: string;
  /** Open loop: pods per second (--rate); closed loop: undefined (nodes × perNode in flight). */
  rate?: number;
  inFlight: number;
  /** Latency by start-time decile: each tenth of the answered ADDs in order of start (ms from the start signal). */
  timeline: Array<{ fromS: number; toS: number; n: number; p50: number; p99: number; max: number }>;
}

interface ServerUse {
  /** CPU seconds (user + system, /proc/PID/stat) of kube-apiserver and of etcd. */
  apiserverCpuS?: number;
  etcdCpuS?: number;
  /** The machine's load average (1 min) at the start and at the end. */
  loadStart: number;
  loadEnd: number;
  /** kube-apiserver's own view (its /metrics): requests by verb and resource, mean time at the server, ms. */
  apiserver?: Record<string, { n: number; meanMs: number }>;
  /** kube-apiserver's etcd client: operations by type, mean ms. */
  apiserverEtcd?: Record<string, { n: number; meanMs: number }>;
}

/** CPU seconds a process has used (utime + stime, clock ticks of 100 Hz). */
function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return undefined;
  }
}

const loadavg = () => Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);

/** Sums and counts of a Prometheus histogram by a label set, e.g. `verb,resource`. */
function histogram(
  text: string,
  metric: string,
  labels: string[],
): Map<string, { sum: number; count: number }> {
  const out = new Map<string, { sum: number; count: number }>();
  const re = new RegExp(`^${metric}_(sum|count)\\{([^}]*)\\} ([0-9.e+-]+)$`, 'gm');
  for (const m of text.matchAll(re)) {
    const l = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1] as string, x[2] as string]),
    );
    const key = labels.map((k) => l[k] ?? '').join(' ');
    const e = out.get(key) ?? { sum: 0, count: 0 };
    if (m[1] === 'sum') e.sum += Number(m[3]);
    else e.count += Number(m[3]);
    out.set(key, e);
  }
  return out;
}

function histogramDelta(
  before: Map<string, { sum: number; count: number }>,
  after: Map<string, { sum: number; count: number }>,
  keep: (key: string) => boolean,
): Record<string, { n: number; meanMs: number }> {
  const out: Record<string, { n: number; meanMs: number }> = {};
  for (const [k, a] of after) {
    if (!keep(k)) continue;
    const b = before.get(k) ?? { sum: 0, count: 0 };
    const n = a.count - b.count;
    if (n > 0) out[k] = { n, meanMs: Math.round(((a.sum - b.sum) / n) * 10000) / 10 };
  }
  return out;
}

/** Measures the servers around a scenario. */
interface ServerProbe {
  apiserverPid?: number;
  etcdPid?: number;
  metrics?: () => string | undefined;
}

function probeStart(p: ServerProbe) {
  const text = p.metrics?.();
  return {
    api: cpuSeconds(p.apiserverPid),
    etcd: cpuSeconds(p.etcdPid),
    load: loadavg(),
    text,
  };
}

function probeEnd(p: ServerProbe, s: ReturnType<typeof probeStart>): ServerUse {
  const text = p.metrics?.();
  const api = cpuSeconds(p.apiserverPid);
  const etcd = cpuSeconds(p.etcdPid);
  const out: ServerUse = { loadStart: s.load, loadEnd: loadavg() };
  if (api !== undefined && s.api !== undefined) out.apiserverCpuS = Math.round((api - s.api) * 100) / 100;
  if (etcd !== undefined && s.etcd !== undefined) out.etcdCpuS = Math.round((etcd - s.etcd) * 100) / 100;
  if (text && s.text) {
    const ours = /ipamallocations|ipamblocks|leases|ippools|allocations/;
    out.apiserver = histogramDelta(
      histogram(s.text, 'apiserver_request_duration_seconds', ['verb', 'resource']),
      histogram(text, 'apiserver_request_duration_seconds', ['verb', 'resource']),
      (k) => ours.test(k),
    );
    out.apiserverEtcd = histogramDelta(
      histogram(s.text, 'etcd_request_duration_seconds', ['operation', 'type']),
      histogram(text, 'etcd_request_duration_seconds', ['operation', 'type']),
      (k) => ours.test(k),
    );
  }
  return out;
}

function mergeCalls(tables: CallTable[]): CallTable {
  const out: CallTable = {};
  for (const t of tables)
    for (const [k, v] of Object.entries(t)) {
      const o = out[k] ?? { n: 0, conflicts: 0, errors: 0, ms: [] };
      o.n += v.n;
      o.conflicts += v.conflicts;
      o.errors += v.errors;
      o.ms.push(...v.ms);
      out[k] = o;
    }
  return out;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

/** A node process of the bench (bench/cluster-ipam.ts --worker): started idle, given its spec on stdin. */
interface NodeProc {
  p: ReturnType<typeof spawn>;
  /** Modules loaded (the process printed `standby`): a restart does not pay the TypeScript load. */
  loaded: Promise<void>;
  /** Resolves when stdout is closed and the process has exited. */
  closed: Promise<void>;
  /** Extra processes of the node (a service the worker started: `pid\t<n>`), killed with it. */
  extraPids: number[];
  onLine: (fields: string[]) => void;
  onReady: () => void;
  result?: WorkerResult;
}

/** Every node process alive (killed when the bench is interrupted). */
const liveProcs = new Set<ReturnType<typeof spawn>>();

function spawnNodeProc(netns: string | undefined): NodeProc {
  const cmd = [process.execPath, ...process.execArgv, join(ROOT, 'bench', 'cluster-ipam.ts'), '--worker'];
  const env = { ...process.env };
  delete env.BENCH_WORKER;
  const p = netns
    ? spawn('ip', ['netns', 'exec', netns, ...cmd], { stdio: ['pipe', 'pipe', 'inherit'], env })
    : spawn(process.execPath, cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], env });
  liveProcs.add(p);
  p.once('exit', () => liveProcs.delete(p));
  let loaded!: () => void;
  const np: NodeProc = {
    p,
    loaded: new Promise<void>((r) => {
      loaded = r;
    }),
    closed: Promise.all([
      new Promise<void>((r) => p.once('exit', () => r())),
      new Promise<void>((r) => p.stdout?.once('close', () => r())),
    ]).then(() => {}),
    extraPids: [],
    onLine: () => {},
    onReady: () => {},
  };
  createInterface({ input: p.stdout as NonNullable<typeof p.stdout> }).on('line', (l) => {
    if (l === 'standby') loaded();
    else if (l === 'ready') np.onReady();
    else if (l.startsWith('{')) np.result = JSON.parse(l);
    else if (l.startsWith('pid\t')) np.extraPids.push(Number(l.slice(4)));
    else np.onLine(l.split('\t'));
  });
  return np;
}

/** The state of one node during a scenario. */
interface NodeRun {
  index: number;
  name: string;
  proc: NodeProc;
  /** Given to the current process, not started yet; started and not answered (in flight). */
  queued: Map<string, Pod>;
  inflight: Map<string, Pod>;
  /** Container ID -> address, of the ADDs answered on this node; the failed ADDs' containers. */
  answered: Map<string, string>;
  failed: Set<string>;
  restarting: boolean;
  finished: boolean;
}

async function runScenario(
  base: Omit<WorkerSpec, 'node' | 'nodeIndex' | 'adds'> & { totalAdds: number },
  netns: string | undefined,
  stored: () => Promise<string[]>,
  probe: ServerProbe,
  kills: number,
  cleanup: (c: CleanupSpec) => Promise<CleanupResult>,
  stateBefore: string,
): Promise<RunResult> {
  const lat: number[] = [];
  // each ADD's start (ms from the start signal, as its 'start' line arrives) and its latency
  const startedAt = new Map<string, number>();
  const byStart: Array<{ at: number; ms: number }> = [];
  const callsPerAdd: number[] = [];
  const ips: string[] = [];
  const errors: string[] = [];
  let unfinished = 0;
  const starts: number[] = [];
  const restartMs: number[] = [];
  let killsDone = 0;
  let killedAdds = 0;
  let gcAtRestart = 0;
  let killsAfterWrite = 0;
  const gcErrors: string[] = [];
  let answeredTotal = 0;
  let t0 = 0;
  let budgetAt = 0;
  let lastDone = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => {
    allDone = r;
  });
  const nodes: NodeRun[] = [];
  const checkDone = () => {
    if (nodes.every((n) => n.finished && !n.restarting)) allDone();
  };

  const attach = (n: NodeRun, np: NodeProc) => {
    n.proc = np;
    np.onLine = ([t, cid = '', a = '', b = '', c = '']) => {
      if (t === 'start') {
        const pod = n.queued.get(cid);
        n.queued.delete(cid);
        if (pod) n.inflight.set(cid, pod);
        startedAt.set(cid, performance.now() - t0);
      } else if (t === 'ok') {
        byStart.push({ at: startedAt.get(cid) ?? Number.NaN, ms: Number(b) });
        n.inflight.delete(cid);
        n.answered.set(cid, a);
        ips.push(a);
        lat.push(Number(b));
        callsPerAdd.push(Number(c));
        answeredTotal++;
        maybeKill();
      } else if (t === 'err') {
        n.inflight.delete(cid);
        n.failed.add(cid);
        errors.push(a);
      } else if (t === 'gc') {
        gcAtRestart += Number(cid);
      } else if (t === 'gcerr') {
        gcErrors.push(cid);
      } else if (t === 'unf') {
        n.queued.delete(cid);
        n.inflight.delete(cid);
        unfinished++;
      }
    };
    np.closed.then(() => {
      if (n.proc !== np || n.restarting) return; // a kill: the restart takes over
      if (!np.result) {
        // died on its own: what it had in flight is lost
        errors.push(...[...n.inflight.keys()].map((c) => `${c}: node process exited without an answer`));
        for (const c of n.inflight.keys()) n.failed.add(c);
        n.inflight.clear();
      }
      n.finished = true;
      lastDone = performance.now();
      checkDone();
    });
  };

  const assign = (n: NodeRun, np: NodeProc, pods: Pod[], extra: Partial<WorkerSpec>) => {
    n.queued = new Map(pods.map((p) => [p.cid, p]));
    const spec: WorkerSpec = { ...base, node: n.name, nodeIndex: n.index, adds: pods.length, pods, ...extra };
    const ready = new Promise<void>((r) => {
      np.onReady = r;
    });
    np.p.stdin?.write(`${JSON.stringify(spec)}\n`);
    return ready;
  };

  // a kill: SIGKILL of a node process (and its service) with ADDs in flight, at a fraction of the ADDs answered
  // or of the budget, whichever comes first; a standby process (modules loaded) restarts the node: GC with the
  // node's live pods, then the pods not answered yet (the killed ones with new sandboxes)
  const standbys: NodeProc[] = [];
  const maybeKill = () => {
    if (killsDone >= kills || t0 === 0 || nodes.some((n) => n.restarting)) return;
    const f = (killsDone + 1) / (kills + 1);
    if (answeredTotal < base.totalAdds * f && performance.now() - t0 < base.budgetMs * f) return;
    const first = (2 + 3 * killsDone) % nodes.length;
    const n = [...nodes.slice(first), ...nodes.slice(0, first)].find(
      (x) => !x.finished && !x.restarting && x.inflight.size > 0,
    );
    if (!n) return;
    // every second kill lands just after a durable write of an address, before its answer (the worker kills
    // itself there: see dieAtWrite); the others at whatever moment the bench's timer hits
    const afterWrite = killsDone % 2 === 1;
    killsDone++;
    void restart(n, afterWrite);
  };
  const restart = async (n: NodeRun, afterWrite: boolean) => {
    n.restarting = true;
    const np = n.proc;
    const tk = performance.now();
    if (afterWrite) {
      np.p.stdin?.write('die\n');
      // no write within 30 s (its ADDs all wait, e.g. for whereabouts' Lease): killed from outside, and counted
      // as a kill at a timer's moment
      let fellBack = false;
      const t = setTimeout(() => {
        fellBack = true;
        np.p.kill('SIGKILL');
      }, 30_000);
      await np.closed;
      clearTimeout(t);
      if (!fellBack) killsAfterWrite++;
    } else np.p.kill('SIGKILL');
    for (const pid of np.extraPids)
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    await np.closed;
    const killed = [...n.inflight.values()];
    n.inflight.clear();
    killedAdds += killed.length;
    if (np.result) {
      // it had finished before the signal landed
      n.restarting = false;
      n.finished = true;
      checkDone();
      return;
    }
    const again = killed.map((p) => {
      const m = /^(.*?)(?:-r(\d+))?$/.exec(p.cid);
      return { pod: p.pod, cid: `${m?.[1]}-r${Number(m?.[2] ?? 0) + 1}` };
    });
    const pods = [...n.queued.values(), ...again];
    const next = standbys.shift() ?? spawnNodeProc(netns);
    await next.loaded;
    attach(n, next);
    const up = await Promise.race([
      assign(n, next, pods, {
        budgetMs: Math.max(0, budgetAt - Date.now()),
        gc: [...n.answered.keys()],
      }).then(() => true),
      next.closed.then(() => false),
    ]);
    if (!up) {
      // the restarted node process died before it was ready: its pods fail
      errors.push(...pods.map((p) => `${p.cid}: the restarted node process exited before ready`));
      for (const p of pods) n.failed.add(p.cid);
      n.queued.clear();
      n.restarting = false;
      n.finished = true;
      lastDone = performance.now();
      checkDone();
      return;
    }
    restartMs.push(performance.now() - tk);
    next.p.stdin?.write('go\n');
    n.restarting = false;
    checkDone();
  };

  // the node processes, and one standby per kill
  for (let i = 0; i < base.nodes; i++) {
    const adds = Math.floor(base.totalAdds / base.nodes) + (i < base.totalAdds % base.nodes ? 1 : 0);
    const pods = Array.from({ length: adds }, (_, j) => ({ pod: `pod-${i}-${j}`, cid: `ctr-${i}-${j}` }));
    const n: NodeRun = {
      index: i,
      name: `node-${i}`,
      proc: undefined as unknown as NodeProc,
      queued: new Map(),
      inflight: new Map(),
      answered: new Map(),
      failed: new Set(),
      restarting: false,
      finished: false,
    };
    nodes.push(n);
    const spawnedAt = performance.now();
    const np = spawnNodeProc(netns);
    attach(n, np);
    (n as NodeRun & { ready?: Promise<void> }).ready = assign(n, np, pods, {}).then(() => {
      starts.push(performance.now() - spawnedAt);
    });
  }
  for (let k = 0; k < kills; k++) standbys.push(spawnNodeProc(netns));
  const died = (np: NodeProc) =>
    np.closed.then(() => Promise.reject(new Error('a node process exited before ready')));
  try {
    await Promise.race([
      Promise.all([
        ...nodes.map((n) => (n as NodeRun & { ready?: Promise<void> }).ready),
        ...standbys.map((s) => s.loaded),
      ]),
      ...nodes.map((n) => died(n.proc)),
    ]);
  } catch (e) {
    for (const n of nodes) n.proc.p.kill('SIGKILL');
    for (const s of standbys) s.p.kill('SIGKILL');
    throw e;
  }
  starts.sort((a, b) => a - b);
  const before = probeStart(probe);
  t0 = performance.now();
  budgetAt = Date.now() + base.budgetMs;
  for (const n of nodes) n.proc.p.stdin?.write('go\n');
  const timer = setInterval(maybeKill, 100);
  // every node process ends its stdin after its result: the worker then exits
  const ender = setInterval(() => {
    for (const n of nodes) if (n.proc.result && n.proc.p.stdin?.writable) n.proc.p.stdin.end();
  }, 50);
  await finished;
  clearInterval(timer);
  clearInterval(ender);
  const totalMs = lastDone - t0;
  const server = probeEnd(probe, before);
  for (const s of standbys) s.p.stdin?.end();
  const results = nodes.map((n) => n.proc.result).filter((r): r is WorkerResult => r !== undefined);
  lat.sort((a, b) => a - b);
  byStart.sort((a, b) => a.at - b.at);
  const timeline: RunResult['timeline'] = [];
  for (let d = 0; d < 10 && byStart.length >= 10; d++) {
    const part = byStart.slice(
      Math.floor((d * byStart.length) / 10),
      Math.floor(((d + 1) * byStart.length) / 10),
    );
    const ms = part.map((x) => x.ms).sort((a, b) => a - b);
    timeline.push({
      fromS: Math.round((part[0]?.at ?? 0) / 100) / 10,
      toS: Math.round((part[part.length - 1]?.at ?? 0) / 100) / 10,
      n: part.length,
      p50: Math.round(quantile(ms, 0.5)),
      p99: Math.round(quantile(ms, 0.99)),
      max: Math.round(ms[ms.length - 1] ?? 0),
    });
  }
  const dup = (list: string[]) => list.length - new Set(list).size;
  const inStore = await stored();
  const answered = new Set(ips);
  const clean = await cleanup({
    scenario: base.scenario,
    driver: base.driver,
    net: base.net,
    pool: base.pool,
    ...(base.kubeconfig ? { kubeconfig: base.kubeconfig } : {}),
    ...(base.etcd ? { etcd: base.etcd } : {}),
    nodes: nodes.map((n) => ({
      node: n.name,
      valid: [...n.answered.keys()],
      del: [...n.answered.keys(), ...n.failed],
    })),
  });
  callsPerAdd.sort((a, b) => a - b);
  return {
    scenario: base.scenario,
    pool: base.pool,
    adds: ips.length,
    totalS: totalMs / 1000,
    addsPerS: ips.length / (totalMs / 1000),
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
    failed: errors.length,
    duplicates: dup(ips),
    storedDuplicates: dup(inStore),
    leaks: inStore.filter((ip) => !answered.has(ip)).length,
    stored: inStore.length,
    retries: results.reduce((s, r) => s + r.retries, 0),
    unfinished,
    driver:
      base.scenario === 'whereabouts'
        ? 'baseline'
        : base.scenario === 'cnikit-k8s-warm'
          ? base.warm === 'in-process'
            ? 'warm in-process'
            : 'warm service'
          : `${base.driver} cold`,
    ...(errors.length ? { firstError: errors[0] } : {}),
    calls: mergeCalls(results.map((r) => r.calls)),
    callsPerAdd: {
      mean:
        Math.round((callsPerAdd.reduce((a, b) => a + b, 0) / Math.max(1, callsPerAdd.length)) * 100) / 100,
      p50: quantile(callsPerAdd, 0.5),
      p99: quantile(callsPerAdd, 0.99),
      max: callsPerAdd[callsPerAdd.length - 1] ?? 0,
    },
    connections: results.reduce((s, r) => s + r.connections, 0),
    startMs: { p50: Math.round(quantile(starts, 0.5)), max: Math.round(starts[starts.length - 1] ?? 0) },
    server,
    kills: killsDone,
    killedAdds,
    gcAtRestart,
    gcErrors,
    killsAfterWrite,
    restartMs: restartMs.map((m) => Math.round(m)),
    cleanup: clean,
    stateBefore,
    ...(base.rate ? { rate: base.rate } : {}),
    inFlight: base.nodes * base.perNode,
    timeline,
  };
}

async function main(): Promise<void> {
  if (process.argv.includes('--worker')) {
    // BENCH_WORKER, else a standby: modules loaded, the spec comes as the first line of stdin
    let text = process.env.BENCH_WORKER;
    if (text === undefined) {
      process.stdout.write('standby\n');
      const rl = createInterface({ input: process.stdin });
      const first = await new Promise<string | undefined>((r) => {
        rl.once('line', r);
        rl.once('close', () => r(undefined));
      });
      rl.close();
      if (first === undefined) return; // not needed: stdin closed
      text = first;
    }
    return worker(JSON.parse(text));
  }
  if (process.argv.includes('--cleanup')) return cleanupProcess();
  const arg = (name: string, def: string) =>
    process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
  const full = process.argv.includes('--full');
  const totalAdds = Number(arg('adds', full ? '1000' : '100'));
  const nodes = Number(arg('nodes', '10'));
  const perNode = Number(arg('per-node', '10'));
  const pools = arg('pools', full ? '1000,4096' : '1000')
    .split(',')
    .map(Number);
  // the baseline last: its lingering load on the API server does not slow the others down
  const only = arg('only', 'cnikit-k8s-warm,cnikit-k8s,cnikit-etcd,whereabouts').split(',') as Scenario[];
  const json = process.argv.includes('--json');
  const budgetMs = Number(arg('budget', full ? '240' : '30')) * 1000;
  const driver = arg('driver', 'allocator') as WorkerSpec['driver'];
  const kills = Number(arg('kills', '3'));
  const loadStart = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const startedAt = new Date();
  const warm = arg('warm', 'service') as NonNullable<WorkerSpec['warm']>;
  // open loop: pods per second over the nodes (several: --rate=20,40,80, one run each); none: the closed loop
  const rates = arg('rate', '').split(',').filter(Boolean).map(Number);

  const needK8s = only.some((s) => s !== 'cnikit-etcd');
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-bench-cluster-ipam-'));
  const netns = `cnikit-bench-ipam-${process.pid}`;
  let cp: ControlPlane | undefined;
  let etcd: Awaited<ReturnType<typeof startTestEtcd>> | undefined;
  const results: RunResult[] = [];
  const order: string[] = [];
  // interrupted (SIGINT, SIGTERM): the node processes, the servers, the namespace and the directory go
  const interrupted = (sig: NodeJS.Signals) => {
    process.stderr.write(`cluster-ipam bench: ${sig}: stopping\n`);
    for (const p of liveProcs) p.kill('SIGKILL');
    void (async () => {
      await etcd?.stop().catch(() => {});
      await cp?.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      process.exit(130);
    })();
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    if (needK8s) {
      const { dir: cacheDir } = await k8sBinaries();
      const binDir = join(cacheDir, 'bin');
      cp = await startControlPlane({ binDir, dir: join(dir, 'cp'), netns });
      const crds = readFileSync(
        join(ROOT, 'plugins', 'cluster-ipam', 'src', 'testdata', 'whereabouts-crds.yaml'),
        'utf8',
      );
      const ours = readFileSync(join(ROOT, 'deploy', 'kubernetes', 'cluster-ipam-crds.yaml'), 'utf8');
      for (const y of [crds, BENCH_CRD, ours]) {
        const r = cp.kubectl(['apply', '-f', '-'], y);
        if (r.status !== 0) throw new Error(`kubectl apply: ${r.stderr}`);
      }
      for (const c of [
        'ippools.whereabouts.cni.cncf.io',
        `allocations.${BENCH_GROUP}`,
        'ipamallocations.ipam.cnikit.dev',
      ]) {
        cp.kubectl(['wait', '--for=condition=Established', `crd/${c}`, '--timeout=60s']);
      }
    }
    if (only.includes('cnikit-etcd')) etcd = await startTestEtcd();
    const kubectlJson = (args: string[]) => {
      if (!cp) throw new Error('no control plane');
      const r = cp.kubectl([...args, '-o', 'json']);
      if (r.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    // every scenario starts from empty stores: the one before it deleted what it wrote (its cleanup's reset);
    // what the stores hold at the start is counted and printed (a scenario's lists must not pay for another's)
    const stateNow = async (): Promise<string> => {
      const out: string[] = [];
      if (cp) {
        const r = cp.kubectl([
          'get',
          'ipamallocations.ipam.cnikit.dev,ipamblocks.ipam.cnikit.dev',
          '-A',
          '-o',
          'name',
        ]);
        const names = r.stdout.split('\n').filter(Boolean);
        out.push(`ipamallocations ${names.filter((n) => n.startsWith('ipamallocation')).length}`);
        out.push(`ipamblocks ${names.filter((n) => n.startsWith('ipamblock')).length}`);
        const w = cp.kubectl(['-n', NS, 'get', 'ippools.whereabouts.cni.cncf.io', '-o', 'name']);
        out.push(`ippools ${w.stdout.split('\n').filter(Boolean).length}`);
      }
      if (etcd) {
        const e = new EtcdStore({ endpoints: etcd.host, prefix: '/bench/' });
        try {
          const r = await e.client.range({ key: '/bench/', rangeEnd: prefixEnd('/bench/'), limit: 1 });
          out.push(`etcd keys ${r.count}`);
        } finally {
          await e.close();
        }
      }
      return out.join(', ');
    };
    for (const pool of pools) {
      for (const rate of rates.length ? rates : [0])
        for (const scenario of only) {
          const net = `b${pool}-${scenario.replace('cnikit-', 'c').replace('-warm', 'w')}${rate ? `-r${rate}` : ''}`;
          const base = {
            scenario,
            nodes,
            perNode,
            pool,
            net,
            totalAdds,
            driver,
            budgetMs,
            warm,
            ...(rate ? { rate } : {}),
            ...(cp ? { kubeconfig: cp.kubeconfig } : {}),
            ...(etcd ? { etcd: { host: etcd.host } } : {}),
          };
          const stored = async (): Promise<string[]> => {
            if (scenario === 'whereabouts') {
              const p = kubectlJson([
                '-n',
                NS,
                'get',
                'ippools.whereabouts.cni.cncf.io',
                `${net}-${RANGE.replaceAll('/', '-')}`,
              ]);
              return Object.keys(p.spec.allocations ?? {}).map((o) => ipOf(Number(o)));
            }
            if (scenario === 'cnikit-k8s' || scenario === 'cnikit-k8s-warm') {
              const l =
                driver === 'allocator'
                  ? kubectlJson(['get', 'ipamallocations.ipam.cnikit.dev'])
                  : kubectlJson(['-n', NS, 'get', `allocations.${BENCH_GROUP}`]);
              return l.items
                .filter((o: { metadata: { name: string } }) => o.metadata.name.startsWith(`${net}.`))
                .map((o: { spec: { ip: string } }) => o.spec.ip);
            }
            const s = new EtcdStore({ endpoints: etcd?.host as string, prefix: '/bench/' });
            try {
              return (await s.list<{ ip: string }>('allocations', `${net}.`)).map((o) => o.spec.ip);
            } finally {
              await s.close();
            }
          };
          process.stderr.write(
            `cluster-ipam bench: ${scenario}, pool ${pool}, ${totalAdds} ADDs on ${nodes} nodes ...\n`,
          );
          try {
            const probe: ServerProbe =
              scenario === 'cnikit-etcd'
                ? { etcdPid: etcd?.pid() }
                : {
                    etcdPid: cp?.procs[0]?.pid,
                    apiserverPid: cp?.procs[1]?.pid,
                    metrics: () => {
                      const m = cp?.kubectl(['get', '--raw', '/metrics']);
                      return m?.status === 0 ? m.stdout : undefined;
                    },
                  };
            const stateBefore = await stateNow();
            order.push(`${scenario} ${pool}`);
            process.stderr.write(`  state at the start: ${stateBefore}\n`);
            // the cleanup runs where the store is: etcd on this host's loopback, the API server in its namespace
            const cleanup = async (c: CleanupSpec): Promise<CleanupResult> => {
              if (c.scenario === 'cnikit-etcd') return cleanupScenario(c);
              const cmd = [...process.execArgv, join(ROOT, 'bench', 'cluster-ipam.ts'), '--cleanup'];
              const r = spawnSync('ip', ['netns', 'exec', netns, process.execPath, ...cmd], {
                env: { ...process.env, BENCH_CLEANUP: JSON.stringify(c) },
                encoding: 'utf8',
                stdio: ['ignore', 'pipe', 'inherit'],
                maxBuffer: 64 << 20,
              });
              const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
              if (!line) throw new Error(`cleanup process: exit ${r.status}`);
              return JSON.parse(line);
            };
            const r = await runScenario(
              base,
              scenario === 'cnikit-etcd' ? undefined : netns,
              stored,
              probe,
              kills,
              cleanup,
              stateBefore,
            );
            results.push(r);
            const { calls: _calls, ...brief } = r;
            process.stderr.write(`  ${JSON.stringify(brief)}\n`);
          } catch (e) {
            process.stderr.write(`  ${scenario} pool ${pool}: the run failed: ${(e as Error).message}\n`);
          }
        }
    }
  } finally {
    await etcd?.stop();
    await cp?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  if (json) {
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
    return;
  }
  const loadEnd = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const cpu = cpus();
  console.log(
    `cluster-ipam bench, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC: ${totalAdds} ADDs on ${nodes} ` +
      `node processes × ${perNode} at a time, budget ${budgetMs / 1000} s, ${kills} kills per scenario; ` +
      `${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}; ` +
      `load average (1/5/15 min) ${loadStart} at the start, ${loadEnd} at the end`,
  );
  console.log(
    `order: ${order.join(', ')}; every scenario starts from empty stores (its state printed below)\n`,
  );
  console.log(summaryTable(results));
  console.log('');
  for (const r of results)
    console.log(
      `${r.scenario} pool ${r.pool}: state at the start: ${r.stateBefore}; kills ${r.kills} (${r.killsAfterWrite} ` +
        `just after a write; ${r.killedAdds} ADDs in flight cut), kill -> restarted node ready ${r.restartMs.join(', ') || '-'} ms, its GC released ${r.gcAtRestart}${r.gcErrors.length ? ` (${r.gcErrors.length} GC failed: ${r.gcErrors[0]})` : ''}; after the run ${r.stored} ` +
        `records, ${r.leaks} with no answer; GC released ${r.cleanup.gcReleased}, DELs ${r.cleanup.delReleased}, ` +
        `left ${r.cleanup.leaks}${r.cleanup.leakSample.length ? ` (${r.cleanup.leakSample.join('; ')})` : ''}; ` +
        `cleanup ${(r.cleanup.ms / 1000).toFixed(1)} s, then ${Object.entries(r.cleanup.after)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}${r.cleanup.error ? `; cleanup error: ${r.cleanup.error}` : ''}`,
    );
  for (const r of results)
    if (r.firstError) console.log(`${r.scenario} pool ${r.pool}: first error: ${r.firstError}`);
  console.log(
    "\nWhere the time goes (calls as the node processes timed them; the servers' own figures after):",
  );
  for (const r of results) console.log(breakdown(r));
}

const LABEL: Record<Scenario, string> = {
  whereabouts: 'whereabouts-style (Lease + whole IPPool)',
  'cnikit-k8s': 'cnikit, Kubernetes API, cold',
  'cnikit-k8s-warm': 'cnikit, Kubernetes API, warm',
  'cnikit-etcd': 'cnikit, etcd, cold',
};

/** The one table of the run (markdown): what docs/plugins/cluster-ipam.md quotes. */
function summaryTable(results: RunResult[]): string {
  const ms = (v: number) =>
    Number.isFinite(v) ? Math.round(v).toLocaleString('en').replaceAll(',', ' ') : '—';
  const rows = [
    [
      'scenario',
      'pool',
      'rate/in-flight',
      'pods ok',
      'failed',
      'unfinished',
      'total s',
      'ADDs/s',
      'p50 ms',
      'p99 ms',
      'dups',
      'kills (ADDs cut)',
      'leaks after kills',
      'calls/ADD',
      'load',
    ],
    ...results.map((r) => [
      r.scenario === 'cnikit-k8s' && r.driver !== 'allocator cold'
        ? `${LABEL[r.scenario]} (${r.driver})`
        : LABEL[r.scenario],
      String(r.pool),
      r.rate ? `${r.rate}/s open` : `${r.inFlight} closed`,
      String(r.adds),
      String(r.failed),
      String(r.unfinished),
      r.totalS.toFixed(1),
      r.addsPerS.toFixed(1),
      ms(r.p50),
      ms(r.p99),
      String(r.duplicates + r.storedDuplicates),
      `${r.kills} (${r.killedAdds})`,
      r.driver === 'records cold'
        ? '—'
        : r.cleanup.leaks == null || Number.isNaN(r.cleanup.leaks)
          ? '?'
          : String(r.cleanup.leaks),
      r.callsPerAdd.mean.toFixed(2),
      `${r.server.loadStart.toFixed(1)}–${r.server.loadEnd.toFixed(1)}`,
    ]),
  ];
  const w = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(w[i] ?? 0)).join(' | ')} |`;
  return rows
    .flatMap((r, i) => (i === 0 ? [line(r), line(r.map((_, j) => '-'.repeat(w[j] ?? 3)))] : [line(r)]))
    .join('\n');
}

/** The per-scenario breakdown: calls per ADD by verb, their latencies and conflicts, the servers' CPU. */
function breakdown(r: RunResult): string {
  const ok = Math.max(1, r.adds);
  const sv = r.server;
  const out = [
    `\n${r.scenario} (${r.driver}), pool ${r.pool}: load ${sv.loadStart.toFixed(1)} -> ${sv.loadEnd.toFixed(1)}; ` +
      `calls per ADD mean ${r.callsPerAdd.mean} (p50 ${r.callsPerAdd.p50}, p99 ${r.callsPerAdd.p99}, max ${r.callsPerAdd.max}); ` +
      `connections opened ${r.connections} (${(r.connections / ok).toFixed(2)} per ADD); ` +
      `node process start to ready p50 ${r.startMs.p50} ms, max ${r.startMs.max} ms`,
    `  CPU during the run: kube-apiserver ${sv.apiserverCpuS ?? '-'} s, etcd ${sv.etcdCpuS ?? '-'} s ` +
      `(${sv.apiserverCpuS !== undefined ? ((sv.apiserverCpuS * 1000) / ok).toFixed(1) : '-'} / ` +
      `${sv.etcdCpuS !== undefined ? ((sv.etcdCpuS * 1000) / ok).toFixed(1) : '-'} ms per ADD; ${r.totalS.toFixed(1)} s wall on 2 cores)`,
    '  | call | n | per ADD | conflicts | errors | p50 ms | p99 ms | total s |',
    '  | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const [k, v] of Object.entries(r.calls).sort((a, b) => b[1].n - a[1].n)) {
    const ms = [...v.ms].sort((a, b) => a - b);
    const total = ms.reduce((a, b) => a + b, 0) / 1000;
    out.push(
      `  | ${k} | ${v.n} | ${(v.n / ok).toFixed(2)} | ${v.conflicts} | ${v.errors} | ${quantile(ms, 0.5).toFixed(0)} | ${quantile(ms, 0.99).toFixed(0)} | ${total.toFixed(1)} |`,
    );
  }
  const server = (title: string, t?: Record<string, { n: number; meanMs: number }>) => {
    if (!t || Object.keys(t).length === 0) return;
    out.push(
      `  ${title}: ${Object.entries(t)
        .sort((a, b) => b[1].n - a[1].n)
        .map(([k, v]) => `${k} ${v.n}× mean ${v.meanMs} ms`)
        .join('; ')}`,
    );
  };
  server('at kube-apiserver', sv.apiserver);
  server('kube-apiserver -> etcd', sv.apiserverEtcd);
  if (r.timeline.length)
    out.push(
      `  latency by start-time decile (${r.rate ? `open loop ${r.rate}/s` : `closed loop, ${r.inFlight} in flight`}): ` +
        r.timeline.map((d) => `${d.fromS}–${d.toS} s p50 ${d.p50} p99 ${d.p99} max ${d.max}`).join('; '),
    );
  return out.join('\n');
}

await main();
