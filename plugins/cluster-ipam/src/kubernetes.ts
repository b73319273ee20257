/**
 * The Store on the Kubernetes API: one cluster-scoped custom resource per object, group ipam.cnikit.dev
 * (deploy/kubernetes/cluster-ipam-crds.yaml): kind `blocks` → IPAMBlock (ipamblocks), `allocations` → IPAMAllocation
 * (ipamallocations). version = metadata.resourceVersion, uid = metadata.uid; update is a PUT carrying the version (409
 * on a conflict), delete sends both as preconditions (`DeleteOptions.preconditions` {uid, resourceVersion}: 409 when
 * the object changed, or was deleted and created again, since it was read); create is a POST (409 AlreadyExists when
 * the name is taken).
 *
 * Prefix listing: the API server selects by label, not by name prefix, so every object carries the labels
 * `ipam.cnikit.dev/p<k>` = its first k dot-separated name segments (a 63-character label value, or `h-` + a hash of
 * them when longer); a prefix ending in '.' is one label-selected list, anything else a full list filtered here.
 * An object whose spec names a node also carries `ipam.cnikit.dev/node` = that node (same encoding), so "this
 * node's blocks" and "the records this node holds" are one label-selected list each, whatever the pool's size;
 * `cached` lists add `resourceVersion=0`: the API server answers from its watch cache instead of reading (and
 * decoding) every object of the resource from etcd; `fresh` lists (`atLeast`: a create's resourceVersion) add
 * `resourceVersion=<it>&resourceVersionMatch=NotOlderThan`: exact, from the watch cache once it has seen that write.
 *
 * Empty strings are left out of what is written (the spec's top-level fields): kube-apiserver 1.20 refuses an empty
 * string in a CRD's string property as "null" (HTTP 422); read back, such a field is absent (readers take it as empty).
 *
 * Failures: no answer, 429 or 5xx → StoreUnavailableError (CNI code 11), each request bounded by the time left of
 * the operation's deadline (never a hang); 401/403 → StoreConfigError naming the user and the verb/resource that
 * is denied; a collection that does not exist (no CRD) → StoreConfigError naming the CRD to install.
 */
import { createHash } from 'node:crypto';
import {
  closeConnection,
  inClusterConnection,
  KubeConfigError,
  type KubeConnection,
  KubeUnreachableError,
  kubeconfigConnection,
  kubeRequest,
} from '@cnikit/warm/kube';
import {
  type ListOptions,
  type Store,
  type StoredObject,
  type StoreKind,
  StoreUnavailableError,
} from './store.ts';

export const GROUP = 'ipam.cnikit.dev';
export const VERSION = 'v1alpha1';
export const RESOURCES: Record<StoreKind, { plural: string; kind: string }> = {
  blocks: { plural: 'ipamblocks', kind: 'IPAMBlock' },
  allocations: { plural: 'ipamallocations', kind: 'IPAMAllocation' },
};
const LABEL = `${GROUP}/p`;
export const NODE_LABEL = `${GROUP}/node`;
const MAX_SEGMENT_LABELS = 4;
/** How long a `fresh` list waits for the watch cache to catch up before it reads from etcd (a quorum list). */
export const FRESH_WAIT_MS = 1_000;

/** Missing rights, a missing CRD, an unusable kubeconfig: the CNI call fails with code 7 and this text. */
export class StoreConfigError extends Error {
  override name = 'StoreConfigError';
}

function labelValue(prefixSegments: string): string {
  if (prefixSegments.length <= 63 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(prefixSegments))
    return prefixSegments;
  return `h-${createHash('sha256').update(prefixSegments).digest('hex').slice(0, 40)}`;
}

export function labelsFor(name: string, spec?: unknown): Record<string, string> {
  const parts = name.split('.');
  const out: Record<string, string> = {};
  for (let k = 1; k < parts.length && k <= MAX_SEGMENT_LABELS; k++)
    out[`${LABEL}${k}`] = labelValue(parts.slice(0, k).join('.'));
  const node = (spec as { node?: unknown } | null | undefined)?.node;
  if (typeof node === 'string' && node !== '') out[NODE_LABEL] = labelValue(node);
  return out;
}

export interface KubernetesStoreOptions {
  /** A connection made already (the reclaimer's); else from kubeconfig / the service account. */
  connection?: KubeConnection;
  kubeconfig?: string;
  apiRoot?: string;
  env?: Readonly<Record<string, string | undefined>>;
  /** The whole operation's bound in ms (default 30 000); each request gets the time left, at most requestMs. */
  deadlineMs?: number;
  requestMs?: number;
}

interface KubeObject<T> {
  metadata: { name: string; resourceVersion: string; uid?: string; labels?: Record<string, string> };
  spec: T;
}

interface KubeStatus {
  kind?: string;
  reason?: string;
  message?: string;
  details?: { name?: string; kind?: string };
}

/** The connection for a configuration: its kubeconfig (with k8s_api_root), else the service account. */
export function connectionFor(o: KubernetesStoreOptions): KubeConnection {
  try {
    if (o.kubeconfig) return kubeconfigConnection(o.kubeconfig, o.apiRoot ? { apiRoot: o.apiRoot } : {});
    const env = o.env ?? process.env;
    if (env.KUBERNETES_SERVICE_HOST) {
      const c = inClusterConnection(env);
      if (o.apiRoot) c.server = o.apiRoot.replace(/\/+$/, '');
      return c;
    }
  } catch (e) {
    if (e instanceof KubeConfigError) throw new StoreConfigError(e.message);
    throw e;
  }
  throw new StoreConfigError(
    'no Kubernetes credentials: set kubernetes.kubeconfig in the ipam configuration (or its flat file), or run in a pod with a service account',
  );
}

/** The spec as written: top-level empty strings left out (see above). */
export function wireSpec<T>(spec: T): T {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return spec;
  return Object.fromEntries(Object.entries(spec).filter(([, v]) => v !== '')) as T;
}

export class KubernetesStore implements Store {
  private readonly conn: KubeConnection;
  private deadline: number;
  private readonly requestMs: number;

  constructor(o: KubernetesStoreOptions) {
    this.conn = o.connection ?? connectionFor(o);
    this.deadline = Date.now() + (o.deadlineMs ?? 30_000);
    this.requestMs = o.requestMs ?? 10_000;
  }

  private path(kind: StoreKind, name?: string): string {
    return `/apis/${GROUP}/${VERSION}/${RESOURCES[kind].plural}${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;
  }

  private async call(
    method: string,
    kind: StoreKind,
    path: string,
    body?: unknown,
    boundMs?: number,
  ): Promise<{ status: number; json: unknown }> {
    const left = this.deadline - Date.now();
    const what = `${method} ${RESOURCES[kind].plural}.${GROUP}`;
    if (left <= 0)
      throw new StoreUnavailableError(`Kubernetes API ${this.conn.server}: out of time before ${what}`);
    let r: { status: number; body: string };
    try {
      r = await kubeRequest(
        this.conn,
        method,
        path,
        body,
        Math.min(left, this.requestMs, boundMs ?? Infinity),
      );
    } catch (e) {
      if (e instanceof KubeUnreachableError)
        throw new StoreUnavailableError(`Kubernetes API unreachable (${e.message}) during ${what}`);
      if (e instanceof KubeConfigError) throw new StoreConfigError(e.message);
      throw e;
    }
    let json: unknown;
    try {
      json = r.body === '' ? undefined : JSON.parse(r.body);
    } catch {
      json = undefined;
    }
    const st = (json ?? {}) as KubeStatus;
    if (r.status === 401)
      throw new StoreConfigError(
        `Kubernetes API ${this.conn.server}: unauthorized (HTTP 401): the credentials of ${this.conn.source} are rejected`,
      );
    if (r.status === 403)
      throw new StoreConfigError(
        `Kubernetes API: forbidden (HTTP 403) for ${this.conn.source}${this.conn.user ? ` (user ${this.conn.user})` : ''}: ${st.message ?? what}; the ClusterRole cnikit-cluster-ipam (deploy/kubernetes/cluster-ipam-rbac.yaml) grants it`,
      );
    if (r.status === 404 && st.kind !== 'Status')
      throw new StoreConfigError(
        `the CustomResourceDefinition ${RESOURCES[kind].plural}.${GROUP} is not installed (${method} ${path}: HTTP 404); apply deploy/kubernetes/cluster-ipam-crds.yaml`,
      );
    if (r.status === 429 || r.status >= 500 || r.status === 0)
      throw new StoreUnavailableError(
        `Kubernetes API ${this.conn.server}: HTTP ${r.status} during ${what}${st.message ? `: ${st.message}` : ''}`,
      );
    return { status: r.status, json };
  }

  private fail(what: string, status: number, json: unknown): never {
    const st = (json ?? {}) as KubeStatus;
    throw new StoreConfigError(
      `Kubernetes API: ${what}: HTTP ${status}${st.message ? `: ${st.message}` : ''}`,
    );
  }

  private toStored<T>(o: KubeObject<T>): StoredObject<T> {
    return {
      name: o.metadata.name,
      spec: o.spec,
      version: o.metadata.resourceVersion,
      ...(o.metadata.uid ? { uid: o.metadata.uid } : {}),
    };
  }

  /**
   * `node`: the objects labelled with that node; an exact list (not `cached`) also asks for the objects without a
   * node label (written by versions before the label: their node is only in the spec) and keeps those of that
   * node, so DEL and GC never miss them. A cached list (an ADD's hint) does not: it may miss them, which costs at
   * most a failed create. The reclaimer's leader labels such objects (relabel()), after which that second list
   * is empty.
   */
  async list<T>(kind: StoreKind, prefix = '', opts: ListOptions = {}): Promise<StoredObject<T>[]> {
    if (opts.fresh && opts.atLeast !== undefined && !opts.cached) {
      // exact from the watch cache: the lists not older than a write of this resource just made (the cache answers
      // once it has seen that write, so every earlier one too); not older than the present would wait for the
      // resource's next write (kube-apiserver 1.20's cache of a quiet resource lags the present). A cache that does
      // not catch up within FRESH_WAIT_MS, or a server that refuses, gets the quorum list
      try {
        return await this.#nodeList<T>(kind, prefix, opts, { atLeast: opts.atLeast, boundMs: FRESH_WAIT_MS });
      } catch (e) {
        if (e instanceof StoreConfigError) throw e;
      }
    }
    return this.#nodeList<T>(kind, prefix, opts, {});
  }

  async #nodeList<T>(
    kind: StoreKind,
    prefix: string,
    opts: ListOptions,
    at: { atLeast?: string; boundMs?: number },
  ): Promise<StoredObject<T>[]> {
    const items = await this.#list<T>(
      kind,
      prefix,
      opts.node === undefined ? {} : { node: opts.node },
      opts,
      at,
    );
    if (opts.node === undefined || opts.cached) return items;
    const seen = new Set(items.map((o) => o.name));
    for (const o of await this.#list<T>(kind, prefix, { unlabelled: true }, opts, at))
      if (!seen.has(o.name) && (o.spec as { node?: unknown } | null)?.node === opts.node) items.push(o);
    return items;
  }

  /** The objects of the kind without a node label whose spec names a node, labelled now; returns how many. */
  async relabel(kind: StoreKind): Promise<number> {
    let n = 0;
    for (const o of await this.#list<unknown>(kind, '', { unlabelled: true }, {})) {
      const node = (o.spec as { node?: unknown } | null)?.node;
      if (typeof node !== 'string' || node === '') continue;
      if (await this.update(kind, o.name, o.spec, o.version)) n++;
    }
    return n;
  }

  async #list<T>(
    kind: StoreKind,
    prefix: string,
    sel: { node?: string; unlabelled?: boolean },
    opts: ListOptions,
    at: { atLeast?: string; boundMs?: number } = {},
  ): Promise<StoredObject<T>[]> {
    const selectors: string[] = [];
    if (prefix.endsWith('.')) {
      const segs = prefix.slice(0, -1).split('.');
      if (segs.length <= MAX_SEGMENT_LABELS)
        selectors.push(`${LABEL}${segs.length}=${labelValue(segs.join('.'))}`);
    }
    if (sel.node !== undefined) selectors.push(`${NODE_LABEL}=${labelValue(sel.node)}`);
    if (sel.unlabelled) selectors.push(`!${NODE_LABEL}`);
    const query = [
      ...(selectors.length > 0 ? [`labelSelector=${encodeURIComponent(selectors.join(','))}`] : []),
      ...(opts.cached
        ? ['resourceVersion=0']
        : at.atLeast
          ? [`resourceVersion=${at.atLeast}`, 'resourceVersionMatch=NotOlderThan']
          : []),
    ];
    const { status, json } = await this.call(
      'GET',
      kind,
      `${this.path(kind)}${query.length > 0 ? `?${query.join('&')}` : ''}`,
      undefined,
      at.boundMs,
    );
    if (status !== 200) this.fail(`list ${RESOURCES[kind].plural}`, status, json);
    const items = ((json as { items?: KubeObject<T>[] }).items ?? []).filter(
      (o) =>
        o.metadata.name.startsWith(prefix) &&
        (sel.node === undefined || (o.spec as { node?: unknown } | null)?.node === sel.node),
    );
    return items.map((o) => this.toStored(o));
  }

  rebound(ms: number): void {
    this.deadline = Date.now() + ms;
  }

  /**
   * This store's connection with a bound of its own (ms from now): the warm service's concurrent calls share the
   * kept connection, each within its own deadline. Closing it leaves the connection open.
   */
  withBound(ms: number): Store {
    const s = new KubernetesStore({ connection: this.conn, deadlineMs: ms, requestMs: this.requestMs });
    s.close = async () => {};
    return s;
  }

  async get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined> {
    const { status, json } = await this.call('GET', kind, this.path(kind, name));
    if (status === 404) return undefined;
    if (status !== 200) this.fail(`get ${RESOURCES[kind].plural}/${name}`, status, json);
    return this.toStored(json as KubeObject<T>);
  }

  async create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    const body = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: RESOURCES[kind].kind,
      metadata: { name, labels: labelsFor(name, spec) },
      spec: wireSpec(spec),
    };
    const { status, json } = await this.call('POST', kind, this.path(kind), body);
    if (status === 409) return undefined;
    if (status !== 201 && status !== 200) this.fail(`create ${RESOURCES[kind].plural}/${name}`, status, json);
    return this.toStored(json as KubeObject<T>);
  }

  async update<T>(
    kind: StoreKind,
    name: string,
    spec: T,
    version: string,
  ): Promise<StoredObject<T> | undefined> {
    const body = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: RESOURCES[kind].kind,
      metadata: { name, labels: labelsFor(name, spec), resourceVersion: version },
      spec: wireSpec(spec),
    };
    const { status, json } = await this.call('PUT', kind, this.path(kind, name), body);
    if (status === 409 || status === 404) return undefined;
    if (status !== 200) this.fail(`update ${RESOURCES[kind].plural}/${name}`, status, json);
    return this.toStored(json as KubeObject<T>);
  }

  async delete(
    kind: StoreKind,
    name: string,
    version?: string,
    _spec?: unknown,
    uid?: string,
  ): Promise<boolean> {
    // the object as it was read: its resourceVersion (changed meanwhile → 409) and its uid (deleted and created
    // again under the same name meanwhile → 409, whatever its resourceVersion)
    const preconditions = {
      ...(uid !== undefined ? { uid } : {}),
      ...(version !== undefined ? { resourceVersion: version } : {}),
    };
    const body = {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      ...(Object.keys(preconditions).length > 0 ? { preconditions } : {}),
    };
    const { status, json } = await this.call('DELETE', kind, this.path(kind, name), body);
    if (status === 404 || status === 409) return false;
    if (status !== 200 && status !== 202) this.fail(`delete ${RESOURCES[kind].plural}/${name}`, status, json);
    return true;
  }

  async close(): Promise<void> {
    closeConnection(this.conn);
  }
}
