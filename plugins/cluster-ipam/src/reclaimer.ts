/**
 * The cluster-level reclaimer of cluster-ipam (docs/plugins/cluster-ipam.md, "Reclaiming"): one instance in the
 * cluster acts at a time, elected with a coordination.k8s.io/v1 Lease (create-if-absent, renew with the
 * resourceVersion as precondition, take over only after the holder let it expire as seen by this instance's own
 * clock, release on a clean stop). The leader, every interval:
 *
 *   1. lists every allocation record and block, then every pod and node (in that order: a pod that held its record
 *      when the records were read is in the later pod list unless it is gone);
 *   2. keeps every record younger than the grace period (an ADD of a pod being created), and every record whose pod
 *      UID is a pod that exists (whatever its node);
 *   3. releases the others whose pod UID names no pod, and those without a pod UID whose node is gone; each delete
 *      carries the preconditions {uid, resourceVersion} of the record as listed: one changed meanwhile, or deleted
 *      and created again under the same name (the address handed out anew, to a pod being created), is left;
 *   4. releases the blocks of gone nodes that are older than the grace and hold no record any more.
 *
 * Nothing is released when any list fails, or when this instance's lease is not confirmed within the renew
 * deadline (another instance may be leader by then). The node-scoped CNI GC (the runtime's live sandboxes) stays
 * the node's own business; this catches what no node will clean any more.
 *
 * Metrics (added to the warm service's exposition when it hosts the reclaimer):
 *   cnikit_cluster_ipam_reclaimer_leader                         gauge   1 while this instance holds the Lease
 *   cnikit_cluster_ipam_reclaimer_leader_acquired_total          counter times this instance became leader
 *   cnikit_cluster_ipam_reclaimer_runs_total{result}             counter ok, error
 *   cnikit_cluster_ipam_reclaimer_released_total{reason}         counter records released: pod, node
 *   cnikit_cluster_ipam_reclaimer_blocks_released_total          counter
 *   cnikit_cluster_ipam_reclaimer_kept{reason}                   gauge   at the last run: live, grace, unknown
 *   cnikit_cluster_ipam_reclaimer_last_success_timestamp_seconds gauge
 */
import { hostname } from 'node:os';
import { parseIP } from '@cnikit/ip';
import {
  inClusterConnection,
  type KubeConnection,
  KubeUnreachableError,
  kubeconfigConnection,
  kubeRequest,
} from '@cnikit/warm/kube';
import { registerMetricsSource } from '@cnikit/warm/metrics';
import type { AllocationSpec, BlockSpec } from './allocator.ts';
import { KubernetesStore } from './kubernetes.ts';
import type { Store, StoredObject } from './store.ts';

export const DEFAULT_LEASE_NAME = 'cnikit-cluster-ipam-reclaimer';
export const DEFAULT_GRACE_MS = 10 * 60_000;
export const DEFAULT_INTERVAL_MS = 60_000;
export const DEFAULT_LEASE_SECONDS = 15;
const PAGE = 500;
const REQUEST_MS = 10_000;

export interface ReclaimerConfig {
  kubeconfig?: string;
  leaseNamespace: string;
  leaseName: string;
  leaseSeconds: number;
  graceMs: number;
  intervalMs: number;
  identity: string;
}

export const RECLAIMER_USAGE = `usage: cluster-ipam reclaimer [--kubeconfig FILE] [--grace DURATION] [--interval DURATION]
                              [--lease-namespace NS] [--lease-name NAME] [--lease-seconds N] [--identity ID]
  The cluster-level reclaimer (one elected instance per cluster, a coordination.k8s.io Lease). Runs until SIGTERM.
  Defaults (or environment): --kubeconfig $CNIKIT_CLUSTER_IPAM_KUBECONFIG, else the pod's service account;
  --grace $CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE or 10m; --interval $CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL or 1m;
  --lease-namespace $POD_NAMESPACE or kube-system; --lease-name ${DEFAULT_LEASE_NAME}; --lease-seconds 15;
  --identity: the node name ($NODE_NAME or the host name) and the process id.
`;

/** `90s`, `10m`, `1h`, `500ms` or seconds. */
export function parseDuration(v: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) throw new Error(`${what} must be a duration such as 90s, 10m or 1h; got ${JSON.stringify(v)}`);
  return Math.round(
    Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'],
  );
}

/** The reclaimer's configuration from its flags, then the environment. Throws with the flag or variable named. */
export function parseReclaimerArgs(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ReclaimerConfig {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    const known = [
      'kubeconfig',
      'grace',
      'interval',
      'lease-namespace',
      'lease-name',
      'lease-seconds',
      'identity',
    ];
    if (!m || !known.includes(m[1] as string)) throw new Error(`unknown argument ${JSON.stringify(a)}`);
    const v = m[2] ?? args[++i];
    if (v === undefined || v === '') throw new Error(`--${m[1]} needs a value`);
    flags.set(m[1] as string, v);
  }
  const pick = (flag: string, envName: string) =>
    flags.get(flag) ?? (env[envName] !== undefined && env[envName] !== '' ? env[envName] : undefined);
  const grace = pick('grace', 'CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE');
  const interval = pick('interval', 'CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL');
  const leaseSeconds = Number(flags.get('lease-seconds') ?? DEFAULT_LEASE_SECONDS);
  if (!Number.isInteger(leaseSeconds) || leaseSeconds < 2 || leaseSeconds > 3600)
    throw new Error(`--lease-seconds must be an integer from 2 to 3600; got ${flags.get('lease-seconds')}`);
  const intervalMs = interval ? parseDuration(interval, 'the reclaim interval') : DEFAULT_INTERVAL_MS;
  if (intervalMs < 500) throw new Error(`the reclaim interval must be at least 500ms; got ${interval}`);
  const kubeconfig = pick('kubeconfig', 'CNIKIT_CLUSTER_IPAM_KUBECONFIG');
  return {
    ...(kubeconfig ? { kubeconfig } : {}),
    leaseNamespace: flags.get('lease-namespace') ?? (env.POD_NAMESPACE || 'kube-system'),
    leaseName: flags.get('lease-name') ?? DEFAULT_LEASE_NAME,
    leaseSeconds,
    graceMs: grace ? parseDuration(grace, 'the reclaim grace') : DEFAULT_GRACE_MS,
    intervalMs,
    identity: flags.get('identity') ?? `${env.NODE_NAME || hostname()}_${process.pid}`,
  };
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: LeaseSpec;
}

/** A MicroTime of the API (RFC 3339 with 6 fraction digits). */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

class ApiError extends Error {}

export interface RunReport {
  records: number;
  released: Array<{ name: string; ip: string; reason: 'pod' | 'node' }>;
  blocksReleased: string[];
  kept: { live: number; grace: number; unknown: number };
  /** Objects without the node label (older versions wrote none) that this run labelled. */
  relabelled?: number;
}

export class Reclaimer {
  readonly cfg: ReclaimerConfig;
  readonly #conn: KubeConnection;
  readonly #log: (line: string) => void;
  readonly #now: () => number;
  #observedVersion = '';
  #observedAt = 0;
  #lastRenew = 0;
  #version = '';
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #busy: Promise<void> | undefined;
  #nextRun = 0;
  #unregister: (() => void) | undefined;
  leader = false;
  acquired = 0;
  runs = { ok: 0, error: 0 };
  released = { pod: 0, node: 0 };
  blocksReleased = 0;
  kept = { live: 0, grace: 0, unknown: 0 };
  lastSuccess = 0;

  constructor(cfg: ReclaimerConfig, conn: KubeConnection, log: (line: string) => void, now = Date.now) {
    this.cfg = cfg;
    this.#conn = conn;
    this.#log = log;
    this.#now = now;
  }

  static connect(cfg: ReclaimerConfig, env: Readonly<Record<string, string | undefined>>): KubeConnection {
    return cfg.kubeconfig ? kubeconfigConnection(cfg.kubeconfig) : inClusterConnection(env);
  }

  async #request(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    const r = await kubeRequest(this.#conn, method, path, body, REQUEST_MS);
    let json: unknown;
    try {
      json = r.body ? JSON.parse(r.body) : undefined;
    } catch {
      json = undefined;
    }
    return { status: r.status, json };
  }

  get #leasePath(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.cfg.leaseNamespace)}/leases`;
  }

  /** Whether this instance may act now: it holds the lease, renewed within two thirds of its duration. */
  holds(): boolean {
    return this.leader && this.#now() - this.#lastRenew < (this.cfg.leaseSeconds * 1000 * 2) / 3;
  }

  #lease(spec: LeaseSpec, version?: string): Lease {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.cfg.leaseName,
        namespace: this.cfg.leaseNamespace,
        ...(version ? { resourceVersion: version } : {}),
      },
      spec,
    };
  }

  #became(leader: boolean, why: string): void {
    if (leader && !this.leader) {
      this.acquired++;
      this.#log(`reclaimer ${this.cfg.identity}: leader (${why})`);
      this.#nextRun = 0;
    } else if (!leader && this.leader)
      this.#log(`reclaimer ${this.cfg.identity}: not leader any more (${why})`);
    this.leader = leader;
  }

  /** One election step: acquire, renew or observe the lease. Resolves whether this instance is the leader. */
  async elect(): Promise<boolean> {
    const now = this.#now();
    const me = this.cfg.identity;
    const name = encodeURIComponent(this.cfg.leaseName);
    const got = await this.#request('GET', `${this.#leasePath}/${name}`);
    if (got.status === 404) {
      const made = await this.#request(
        'POST',
        this.#leasePath,
        this.#lease({
          holderIdentity: me,
          leaseDurationSeconds: this.cfg.leaseSeconds,
          acquireTime: microTime(now),
          renewTime: microTime(now),
          leaseTransitions: 0,
        }),
      );
      if (made.status === 201 || made.status === 200) {
        this.#version = (made.json as Lease).metadata.resourceVersion ?? '';
        this.#lastRenew = now;
        this.#became(true, `created Lease ${this.cfg.leaseNamespace}/${this.cfg.leaseName}`);
        return true;
      }
      if (made.status === 409) return false;
      throw new ApiError(`create Lease: HTTP ${made.status}: ${JSON.stringify(made.json)}`);
    }
    if (got.status !== 200) throw new ApiError(`get Lease: HTTP ${got.status}: ${JSON.stringify(got.json)}`);
    const lease = got.json as Lease;
    const version = lease.metadata.resourceVersion ?? '';
    const spec = lease.spec ?? {};
    if (version !== this.#observedVersion) {
      this.#observedVersion = version;
      this.#observedAt = now;
    }
    const holder = spec.holderIdentity ?? '';
    const duration = (spec.leaseDurationSeconds ?? this.cfg.leaseSeconds) * 1000;
    if (holder !== me) {
      this.#became(false, `held by ${holder || 'nobody'}`);
      if (holder !== '' && now < this.#observedAt + duration) return false;
    }
    const next: LeaseSpec =
      holder === me
        ? { ...spec, renewTime: microTime(now), leaseDurationSeconds: this.cfg.leaseSeconds }
        : {
            holderIdentity: me,
            leaseDurationSeconds: this.cfg.leaseSeconds,
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: (spec.leaseTransitions ?? 0) + 1,
          };
    const put = await this.#request('PUT', `${this.#leasePath}/${name}`, this.#lease(next, version));
    if (put.status === 200) {
      this.#version = (put.json as Lease).metadata.resourceVersion ?? '';
      this.#observedVersion = this.#version;
      this.#observedAt = now;
      this.#lastRenew = now;
      this.#became(
        true,
        holder === me ? 'renewed' : `took over from ${holder || 'a released lease'} (expired)`,
      );
      return true;
    }
    if (put.status === 409) {
      this.#became(false, 'lost a race for the Lease');
      return false;
    }
    throw new ApiError(`update Lease: HTTP ${put.status}: ${JSON.stringify(put.json)}`);
  }

  /** Gives the lease up (a clean stop): the next instance takes it at its next step, not after the expiry. */
  async release(): Promise<void> {
    if (!this.leader) return;
    this.leader = false;
    const name = encodeURIComponent(this.cfg.leaseName);
    try {
      const got = await this.#request('GET', `${this.#leasePath}/${name}`);
      const lease = got.json as Lease;
      if (got.status !== 200 || lease.spec?.holderIdentity !== this.cfg.identity) return;
      await this.#request(
        'PUT',
        `${this.#leasePath}/${name}`,
        this.#lease(
          { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 },
          lease.metadata.resourceVersion,
        ),
      );
    } catch {
      // it expires by itself
    }
  }

  async #listAll(path: string): Promise<Array<{ metadata: { name: string; uid: string } }>> {
    const out: Array<{ metadata: { name: string; uid: string } }> = [];
    let cont = '';
    for (;;) {
      const q = `?limit=${PAGE}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const r = await this.#request('GET', `${path}${q}`);
      if (r.status !== 200) throw new ApiError(`list ${path}: HTTP ${r.status}: ${JSON.stringify(r.json)}`);
      const j = r.json as { items?: typeof out; metadata?: { continue?: string } };
      out.push(...(j.items ?? []));
      cont = j.metadata?.continue ?? '';
      if (!cont) return out;
    }
  }

  /** One reclaiming pass over `store` (the leader's work); throws, releasing nothing more, when a list fails. */
  async reclaim(store: Store): Promise<RunReport> {
    const records = await store.list<AllocationSpec>('allocations');
    const blocks = await store.list<BlockSpec>('blocks');
    const pods = new Set((await this.#listAll('/api/v1/pods')).map((p) => p.metadata.uid));
    const nodes = new Set((await this.#listAll('/api/v1/nodes')).map((n) => n.metadata.name));
    const now = this.#now();
    const report: RunReport = {
      records: records.length,
      released: [],
      blocksReleased: [],
      kept: { live: 0, grace: 0, unknown: 0 },
    };
    const young = (created: string | undefined) => {
      const t = Date.parse(created ?? '');
      return !Number.isFinite(t) || now - t < this.cfg.graceMs;
    };
    const left: StoredObject<AllocationSpec>[] = [];
    for (const r of records) {
      const s = r.spec ?? ({} as AllocationSpec);
      let reason: 'pod' | 'node' | undefined;
      if (young(s.created)) report.kept.grace++;
      else if (s.podUID && pods.has(s.podUID)) report.kept.live++;
      else if (s.podUID) reason = 'pod';
      else if (!nodes.has(s.node)) reason = 'node';
      else report.kept.unknown++;
      if (!reason) {
        left.push(r);
        continue;
      }
      if (!this.holds()) throw new ApiError('the Lease is not confirmed any more: stopping this run');
      if (await store.delete('allocations', r.name, r.version, r.spec, r.uid)) {
        report.released.push({ name: r.name, ip: s.ip, reason });
        this.released[reason]++;
        this.#log(
          `reclaimer: released ${s.ip} (${r.name}; ${reason === 'pod' ? `pod UID ${s.podUID} ${s.podNamespace}/${s.podName} is gone` : `node ${s.node} is gone`}; container ${s.containerID} ${s.ifName})`,
        );
      } else left.push(r);
    }
    const ipValue = (t: string) => parseIP(t)?.value;
    for (const b of blocks) {
      const s = b.spec;
      if (!s || nodes.has(s.node) || young(s.created)) continue;
      const base = ipValue(s.base);
      if (base === undefined) continue;
      const end = base + BigInt(s.size);
      const used = left.some((r) => {
        const v = ipValue(r.spec?.ip ?? '');
        return v !== undefined && v >= base && v < end;
      });
      if (used) continue;
      if (!this.holds()) throw new ApiError('the Lease is not confirmed any more: stopping this run');
      if (await store.delete('blocks', b.name, b.version, b.spec, b.uid)) {
        report.blocksReleased.push(b.name);
        this.blocksReleased++;
        this.#log(
          `reclaimer: released block ${b.name} (${s.base}/${s.size} of node ${s.node}, which is gone)`,
        );
      }
    }
    // objects written before the node label: labelled, so the nodes' label-selected lists find them
    if (store instanceof KubernetesStore) {
      if (!this.holds()) throw new ApiError('the Lease is not confirmed any more: stopping this run');
      report.relabelled = (await store.relabel('allocations')) + (await store.relabel('blocks'));
      if (report.relabelled > 0)
        this.#log(`reclaimer: labelled ${report.relabelled} objects written without the node label`);
    }
    this.kept = report.kept;
    return report;
  }

  async #step(): Promise<void> {
    try {
      await this.elect();
    } catch (e) {
      this.#became(false, `cannot reach the Lease: ${errText(e)}`);
      return;
    }
    if (!this.holds() || this.#now() < this.#nextRun) return;
    this.#nextRun = this.#now() + this.cfg.intervalMs;
    const store = new KubernetesStore({
      connection: { ...this.#conn },
      deadlineMs: this.cfg.intervalMs + 30_000,
    });
    try {
      const r = await this.reclaim(store);
      this.runs.ok++;
      this.lastSuccess = this.#now();
      this.#log(
        `reclaimer run: ${r.records} records, released ${r.released.length} records and ${r.blocksReleased.length} blocks, kept ${r.kept.live} live, ${r.kept.grace} within the grace, ${r.kept.unknown} without pod UID on live nodes`,
      );
    } catch (e) {
      this.runs.error++;
      this.#log(`reclaimer run failed (nothing more released): ${errText(e)}`);
    } finally {
      await store.close();
    }
  }

  /** Starts the election loop (a step every third of the lease duration) and the metrics. */
  start(): void {
    this.#unregister = registerMetricsSource(() => this.render());
    const period = Math.max(250, Math.floor((this.cfg.leaseSeconds * 1000) / 3));
    const tick = () => {
      if (this.#stopped) return;
      this.#busy = this.#step().finally(() => {
        this.#busy = undefined;
        if (!this.#stopped) this.#timer = setTimeout(tick, period);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#busy;
    await this.release();
    this.#unregister?.();
  }

  render(): string {
    const n = 'cnikit_cluster_ipam_reclaimer';
    return [
      `# HELP ${n}_leader 1 while this instance holds the reclaimer Lease.`,
      `# TYPE ${n}_leader gauge`,
      `${n}_leader ${this.holds() ? 1 : 0}`,
      `# HELP ${n}_leader_acquired_total Times this instance became the leader.`,
      `# TYPE ${n}_leader_acquired_total counter`,
      `${n}_leader_acquired_total ${this.acquired}`,
      `# HELP ${n}_runs_total Reclaiming runs of this instance.`,
      `# TYPE ${n}_runs_total counter`,
      `${n}_runs_total{result="ok"} ${this.runs.ok}`,
      `${n}_runs_total{result="error"} ${this.runs.error}`,
      `# HELP ${n}_released_total Allocation records released: their pod UID is gone (pod) or, without one, their node (node).`,
      `# TYPE ${n}_released_total counter`,
      `${n}_released_total{reason="pod"} ${this.released.pod}`,
      `${n}_released_total{reason="node"} ${this.released.node}`,
      `# HELP ${n}_blocks_released_total Blocks of gone nodes released.`,
      `# TYPE ${n}_blocks_released_total counter`,
      `${n}_blocks_released_total ${this.blocksReleased}`,
      `# HELP ${n}_kept Records kept at the last run: of live pods, within the grace, without pod UID on a live node.`,
      `# TYPE ${n}_kept gauge`,
      `${n}_kept{reason="live"} ${this.kept.live}`,
      `${n}_kept{reason="grace"} ${this.kept.grace}`,
      `${n}_kept{reason="unknown"} ${this.kept.unknown}`,
      `# HELP ${n}_last_success_timestamp_seconds When the last successful run ended (Unix time).`,
      `# TYPE ${n}_last_success_timestamp_seconds gauge`,
      `${n}_last_success_timestamp_seconds ${Math.floor(this.lastSuccess / 1000)}`,
      '',
    ].join('\n');
  }
}

function errText(e: unknown): string {
  if (e instanceof KubeUnreachableError) return `unreachable: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

/** Starts a reclaimer with the command's flags and the environment; the handle stops it and gives up the Lease. */
export async function startReclaimer(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  log: (line: string) => void,
): Promise<{ description: string; reclaimer: Reclaimer; stop(): Promise<void> }> {
  const cfg = parseReclaimerArgs(args, env);
  const r = new Reclaimer(cfg, Reclaimer.connect(cfg, env), log);
  r.start();
  return {
    description: `cluster-ipam reclaimer ${cfg.identity}: Lease ${cfg.leaseNamespace}/${cfg.leaseName} (${cfg.leaseSeconds} s), every ${cfg.intervalMs / 1000} s, grace ${cfg.graceMs / 1000} s`,
    reclaimer: r,
    stop: () => r.stop(),
  };
}

/** `cluster-ipam reclaimer …` in the foreground, until SIGTERM/SIGINT. */
export function reclaimerMain(args: readonly string[]): Promise<number> {
  return runInForeground(args, RECLAIMER_USAGE, startReclaimer);
}

/**
 * A reclaimer command in the foreground (either datastore's): `--help` prints the usage; bad flags or an unusable
 * store exit 2 with the usage; otherwise it runs until SIGTERM/SIGINT, then stops (giving up its leadership).
 */
export async function runInForeground(
  args: readonly string[],
  usage: string,
  start: (
    args: readonly string[],
    env: Readonly<Record<string, string | undefined>>,
    log: (line: string) => void,
  ) =>
    | Promise<{ description: string; stop(): Promise<void> }>
    | { description: string; stop(): Promise<void> },
): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(usage);
    return 0;
  }
  const log = (line: string) => process.stderr.write(`${line}\n`);
  let handle: { description: string; stop(): Promise<void> };
  try {
    handle = await start(args, process.env, log);
  } catch (e) {
    process.stderr.write(`cluster-ipam reclaimer: ${errText(e)}\n${usage}`);
    return 2;
  }
  log(handle.description);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await handle.stop();
  log('cluster-ipam reclaimer: stopped');
  return 0;
}
