/**
 * Cluster-wide IPAM under load: 1000 ADDs spread over 10 "node" processes, each running --per-node ADDs at a time,
 * against a real kube-apiserver (scripts/k8s/control-plane.ts, private network namespace) and a real etcd
 * (Debian's, loopback port of its own), for a pool of 1000 addresses (addresses = pods) and of 4096.
 *
 *   node --conditions=cnikit-source --import tsx bench/cluster-ipam.ts --full        (the issue's run, ~10 min)
 *   node --conditions=cnikit-source --import tsx bench/cluster-ipam.ts [--adds=N] [--nodes=10] [--per-node=10]
 *        [--pools=1000,4096] [--only=whereabouts,cnikit-k8s,cnikit-k8s-warm,cnikit-etcd] [--budget=S] [--json]
 *        [--warm=service|in-process]
 * Without --full (what `npm run bench` runs): 100 ADDs, pool 1000, the baseline's budget 30 s (a minute or two).
 * --full: 1000 ADDs, pools 1000 and 4096, budget 240 s per scenario.
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
 *                 store and the node's view, and runs cluster-ipam calls beside each other). Needs `npm run build`.
 *                 The node's store calls are not seen from outside: the API server's own counts are reported;
 *                 `failed` counts the ADDs the client answered from the cold executable (a fallback).
 *                 --warm=in-process: the allocator in the node process itself (NodeView kept, no client, no
 *                 service), ADDs beside each other as the service runs them.
 *   cnikit-etcd   cnikit cold on etcd (a store per ADD).
 * Reported: total wall time from the start signal to the last ADD, ADDs/s, p50/p99 of one ADD, failed ADDs,
 * duplicates (the same address handed out twice, from the answers and from the stored state), leaks (records in
 * the store that no successful ADD answered).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Allocator, NodeView } from '../plugins/cluster-ipam/src/allocator.ts';
import { parseConf } from '../plugins/cluster-ipam/src/config.ts';
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
  create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    return this.#timed(
      `create ${kind}`,
      () => this.inner.create<T>(kind, name, spec),
      (v) => v === undefined,
    );
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
  const dist = join(ROOT, 'dist-bin');
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
    createInterface({ input: process.stdin }).once('line', () => resolve());
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
  await Promise.all(
    Array.from({ length: spec.perNode }, async () => {
      for (;;) {
        const i = next++;
        if (i >= spec.adds) return;
        if (Date.now() > budgetEnd) {
          res.unfinished++;
          continue;
        }
        const podName = `pod-${spec.nodeIndex}-${i}`;
        const t0 = performance.now();
        const perAdd = { n: 0 };
        try {
          const r = await add(podName, `ctr-${spec.nodeIndex}-${i}`, perAdd);
          res.latencies.push(performance.now() - t0);
          res.callsPerAdd.push(perAdd.n);
          res.ips.push(r.ip);
          res.retries += r.retries;
        } catch (e) {
          if (e instanceof OutOfBudget) res.unfinished++;
          else res.errors.push((e as Error).message);
        }
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

async function runScenario(
  base: Omit<WorkerSpec, 'node' | 'nodeIndex' | 'adds'> & { totalAdds: number },
  netns: string | undefined,
  stored: () => Promise<string[]>,
  probe: ServerProbe,
): Promise<RunResult> {
  const procs = Array.from({ length: base.nodes }, (_, n) => {
    const spawnedAt = performance.now();
    const adds = Math.floor(base.totalAdds / base.nodes) + (n < base.totalAdds % base.nodes ? 1 : 0);
    const spec: WorkerSpec = { ...base, node: `node-${n}`, nodeIndex: n, adds };
    const cmd = [process.execPath, ...process.execArgv, join(ROOT, 'bench', 'cluster-ipam.ts'), '--worker'];
    const p = netns
      ? spawn('ip', ['netns', 'exec', netns, ...cmd], {
          stdio: ['pipe', 'pipe', 'inherit'],
          env: { ...process.env, BENCH_WORKER: JSON.stringify(spec) },
        })
      : spawn(process.execPath, cmd.slice(1), {
          stdio: ['pipe', 'pipe', 'inherit'],
          env: { ...process.env, BENCH_WORKER: JSON.stringify(spec) },
        });
    const lines = createInterface({ input: p.stdout as NonNullable<typeof p.stdout> });
    const ready = new Promise<number>((resolve, reject) => {
      lines.once('line', (l) =>
        l === 'ready' ? resolve(performance.now() - spawnedAt) : reject(new Error(`worker: ${l}`)),
      );
      p.once('exit', (c) => reject(new Error(`worker exited ${c} before ready`)));
    });
    const done = new Promise<WorkerResult>((resolve, reject) => {
      lines.on('line', (l) => {
        if (l !== 'ready') resolve(JSON.parse(l));
      });
      p.once('exit', (c) => reject(new Error(`worker exited ${c} without a result`)));
    });
    // a worker that dies before it is ready rejects both: the run's failure is the one of ready
    done.catch(() => {});
    return { p, ready, done };
  });
  let starts: number[];
  try {
    starts = (await Promise.all(procs.map((x) => x.ready))).sort((a, b) => a - b);
  } catch (e) {
    for (const x of procs) x.p.kill('SIGKILL');
    throw e;
  }
  const before = probeStart(probe);
  const t0 = performance.now();
  for (const x of procs) x.p.stdin?.write('go\n');
  const results = await Promise.all(procs.map((x) => x.done.then((r) => ({ r, t: performance.now() }))));
  const totalMs = Math.max(...results.map((x) => x.t)) - t0;
  const server = probeEnd(probe, before);
  for (const x of procs) x.p.stdin?.end();
  const lat = results.flatMap((x) => x.r.latencies).sort((a, b) => a - b);
  const ips = results.flatMap((x) => x.r.ips);
  const errors = results.flatMap((x) => x.r.errors);
  const dup = (list: string[]) => list.length - new Set(list).size;
  const inStore = await stored();
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
    leaks: (() => {
      const answered = new Set(ips);
      return inStore.filter((ip) => !answered.has(ip)).length;
    })(),
    stored: inStore.length,
    retries: results.reduce((s, x) => s + x.r.retries, 0),
    unfinished: results.reduce((s, x) => s + x.r.unfinished, 0),
    driver:
      base.scenario === 'whereabouts'
        ? 'baseline'
        : base.scenario === 'cnikit-k8s-warm'
          ? base.warm === 'in-process'
            ? 'warm in-process'
            : 'warm service'
          : `${base.driver} cold`,
    ...(errors.length ? { firstError: errors[0] } : {}),
    calls: mergeCalls(results.map((x) => x.r.calls)),
    callsPerAdd: (() => {
      const c = results.flatMap((x) => x.r.callsPerAdd).sort((a, b) => a - b);
      const mean = c.reduce((a, b) => a + b, 0) / Math.max(1, c.length);
      return {
        mean: Math.round(mean * 100) / 100,
        p50: quantile(c, 0.5),
        p99: quantile(c, 0.99),
        max: c[c.length - 1] ?? 0,
      };
    })(),
    connections: results.reduce((s, x) => s + x.r.connections, 0),
    startMs: { p50: Math.round(quantile(starts, 0.5)), max: Math.round(starts[starts.length - 1] ?? 0) },
    server,
  };
}

async function main(): Promise<void> {
  if (process.argv.includes('--worker')) return worker(JSON.parse(process.env.BENCH_WORKER as string));
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
  const warm = arg('warm', 'service') as NonNullable<WorkerSpec['warm']>;

  const needK8s = only.some((s) => s !== 'cnikit-etcd');
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-bench-cluster-ipam-'));
  const netns = `cnikit-bench-ipam-${process.pid}`;
  let cp: ControlPlane | undefined;
  let etcd: Awaited<ReturnType<typeof startTestEtcd>> | undefined;
  const results: RunResult[] = [];
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
    for (const pool of pools) {
      for (const scenario of only) {
        const net = `b${pool}-${scenario.replace('cnikit-', 'c').replace('-warm', 'w')}`;
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
          const r = await runScenario(base, scenario === 'cnikit-etcd' ? undefined : netns, stored, probe);
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
  const rows = [
    [
      'backend',
      'driver',
      'pool',
      'ADDs ok',
      'failed',
      'unfinished',
      'total s',
      'ADDs/s',
      'p50 ms',
      'p99 ms',
      'duplicates',
      'leaks',
    ],
    ...results.map((r) => [
      r.scenario,
      r.driver,
      String(r.pool),
      String(r.adds),
      String(r.failed),
      String(r.unfinished),
      r.totalS.toFixed(1),
      r.addsPerS.toFixed(1),
      r.p50.toFixed(0),
      r.p99.toFixed(0),
      `${r.duplicates} (${r.storedDuplicates} in store of ${r.stored})`,
      String(r.leaks),
    ]),
  ];
  const w = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(w[i] ?? 0)).join(' | ')} |`;
  rows.forEach((r, i) => {
    console.log(line(r));
    if (i === 0) console.log(line(r.map((_, j) => '-'.repeat(w[j] ?? 1))));
  });
  for (const r of results)
    if (r.firstError) console.log(`${r.scenario} pool ${r.pool}: first error: ${r.firstError}`);
  console.log(
    "\nWhere the time goes (calls as the node processes timed them; the servers' own figures after):",
  );
  for (const r of results) console.log(breakdown(r));
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
  return out.join('\n');
}

await main();
