/**
 * The reclaimer on the etcd datastore (`cluster-ipam reclaimer --datastore etcd`, docs/plugins/cluster-ipam-etcd.md,
 * "Reclaiming"): for a fleet without Kubernetes there are no Node or Pod objects to ask, so "node gone" is defined
 * by a heartbeat. Every node runs one instance (its service); each instance holds one etcd lease of
 * `leaseSeconds` and keeps it alive every third of that:
 *
 *   <prefix>nodes/<node>      the node's registration (no lease): written when the instance gets a new lease
 *   <prefix>alive/<node>      the node's heartbeat, attached to the lease: etcd deletes it when the lease expires
 *   <prefix>reclaimer/leader  the elected instance's identity, attached to its lease: created only when absent
 *                             (a transaction comparing its create revision with 0), so one instance leads at a time
 *
 * A node is gone when it is registered, has no heartbeat, and the leader has seen it without one for the whole
 * grace period (its own clock, from its first run that saw the heartbeat missing; a new leader starts counting
 * again). The leader, every interval: reads every allocation record and block, then the registrations and
 * heartbeats (in that order: a node alive when the records were read still has its heartbeat in the later read);
 * releases the records of gone nodes that are older than the grace, each delete with the record's version as
 * precondition; releases the gone nodes' blocks that are older than the grace and hold no record any more; and
 * removes the registration of a gone node that has neither left. Records of a node that never registered (no
 * reclaimer runs there) are never released: that is an unknown node, not a gone one. The pod UID is not looked at:
 * on etcd there is no API to ask whether a pod exists (the node's CNI GC covers pods that went away).
 *
 * Nothing is released when a read fails, or when this instance's lease was not confirmed within two thirds of its
 * duration (another instance may lead by then). A clean stop deletes the leader key (the next instance takes over
 * at its next step) and leaves the heartbeat to expire with the lease.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { parseIP } from '@cnikit/ip';
import { registerMetricsSource } from '@cnikit/warm/metrics';
import type { AllocationSpec, BlockSpec } from './allocator.ts';
import { type EtcdClient, EtcdError, EtcdUnavailableError, prefixEnd } from './etcd.ts';
import { DEFAULT_ETCD_PREFIX, EtcdStore, etcdOptionsFromConfig } from './etcd-store.ts';
import {
  DEFAULT_GRACE_MS,
  DEFAULT_INTERVAL_MS,
  DEFAULT_LEASE_SECONDS,
  parseDuration,
  runInForeground,
} from './reclaimer.ts';
import type { StoredObject } from './store.ts';

export interface EtcdReclaimerConfig {
  /** This instance's node: its heartbeat and registration. */
  node: string;
  identity: string;
  leaseSeconds: number;
  graceMs: number;
  intervalMs: number;
  /** The store's key prefix (default /cnikit/cluster-ipam/). */
  prefix: string;
  /** Whereabouts' etcd keys (etcd_host, etcd_username, …) for the client. */
  etcd: {
    etcd_host: string;
    etcd_username?: string;
    etcd_password?: string;
    etcd_key_file?: string;
    etcd_cert_file?: string;
    etcd_ca_cert_file?: string;
  };
}

export const ETCD_RECLAIMER_USAGE = `usage: cluster-ipam reclaimer --datastore etcd --etcd-host HOST:PORT
                              [--etcd-username U --etcd-password P | --etcd-password-file F]
                              [--etcd-cert-file F --etcd-key-file F] [--etcd-ca-cert-file F] [--etcd-prefix P]
                              [--node NAME] [--grace DURATION] [--interval DURATION] [--lease-seconds N] [--identity ID]
  Run on every node: keeps the node's heartbeat alive in etcd, and the elected instance releases the records and
  blocks of nodes whose heartbeat has been gone for the grace period. Runs until SIGTERM.
  Defaults (or environment; the DaemonSet sets them from the ConfigMap keys cluster-ipam-etcd-*): --datastore
  $CNIKIT_CLUSTER_IPAM_DATASTORE; --etcd-host $CNIKIT_CLUSTER_IPAM_ETCD_HOST; --etcd-username
  $CNIKIT_CLUSTER_IPAM_ETCD_USERNAME; --etcd-password $CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD; --etcd-password-file
  $CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE; --etcd-cert-file, --etcd-key-file, --etcd-ca-cert-file
  $CNIKIT_CLUSTER_IPAM_ETCD_CERT_FILE, _KEY_FILE, _CA_CERT_FILE; --etcd-prefix $CNIKIT_CLUSTER_IPAM_ETCD_PREFIX or
  /cnikit/cluster-ipam/; --node $NODENAME, $NODE_NAME or the host name; --grace $CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE or
  10m; --interval $CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL or 1m; --lease-seconds 15; --identity: the node name and the
  process id.
`;

/** A whereabouts key of the etcd client as the reclaimer's flag, environment variable and ConfigMap key. */
const SETTINGS = {
  etcd_host: 'host',
  etcd_username: 'username',
  etcd_password: 'password',
  etcd_cert_file: 'cert-file',
  etcd_key_file: 'key-file',
  etcd_ca_cert_file: 'ca-cert-file',
} as const;

export function etcdSettingName(key: keyof typeof SETTINGS | 'etcd_password_file' | 'etcd_prefix'): string {
  const k = key === 'etcd_password_file' ? 'password-file' : key === 'etcd_prefix' ? 'prefix' : SETTINGS[key];
  const env = `CNIKIT_CLUSTER_IPAM_ETCD_${k.toUpperCase().replace(/-/g, '_')}`;
  // the password itself is never a ConfigMap key (its file is)
  const cm = k === 'password' ? '' : `, ConfigMap key cluster-ipam-etcd-${k}`;
  return `--etcd-${k} ($${env}${cm})`;
}

/** An error of the etcd client's settings, with whereabouts' key names as the reclaimer's settings. */
function renamed(message: string): string {
  return message.replace(/\b(etcd_(?:host|username|password|cert_file|key_file|ca_cert_file))\b/g, (k) =>
    etcdSettingName(k as keyof typeof SETTINGS),
  );
}

const FLAGS = [
  'datastore',
  'etcd-host',
  'etcd-username',
  'etcd-password',
  'etcd-cert-file',
  'etcd-key-file',
  'etcd-ca-cert-file',
  'etcd-password-file',
  'etcd-prefix',
  'node',
  'grace',
  'interval',
  'lease-seconds',
  'identity',
] as const;

const NODE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/;

/** Whether the reclaimer's arguments (or environment) ask for the etcd datastore. */
export function wantsEtcd(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): boolean {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--datastore') return args[i + 1] === 'etcd';
    if (a.startsWith('--datastore=')) return a.slice('--datastore='.length) === 'etcd';
  }
  return env.CNIKIT_CLUSTER_IPAM_DATASTORE === 'etcd';
}

/** The etcd reclaimer's configuration from its flags, then the environment. Throws with the flag named. */
export function parseEtcdReclaimerArgs(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): EtcdReclaimerConfig {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m || !(FLAGS as readonly string[]).includes(m[1] as string))
      throw new Error(`unknown argument ${JSON.stringify(a)}`);
    const v = m[2] ?? args[++i];
    if (v === undefined || v === '') throw new Error(`--${m[1]} needs a value`);
    flags.set(m[1] as string, v);
  }
  const datastore = flags.get('datastore') ?? env.CNIKIT_CLUSTER_IPAM_DATASTORE;
  if (datastore !== 'etcd')
    throw new Error(`--datastore must be etcd here; got ${JSON.stringify(datastore)}`);
  const pick = (flag: string, envName: string) =>
    flags.get(flag) ?? (env[envName] !== undefined && env[envName] !== '' ? env[envName] : undefined);
  const host = pick('etcd-host', 'CNIKIT_CLUSTER_IPAM_ETCD_HOST');
  if (!host) throw new Error('--etcd-host (host:port) is needed with --datastore etcd');
  const node = flags.get('node') ?? (env.NODENAME || env.NODE_NAME || hostname());
  if (!NODE.test(node))
    throw new Error(
      `--node must be a node name (letters, digits, '-', '_', '.'); got ${JSON.stringify(node)}`,
    );
  const leaseSeconds = Number(flags.get('lease-seconds') ?? DEFAULT_LEASE_SECONDS);
  if (!Number.isInteger(leaseSeconds) || leaseSeconds < 2 || leaseSeconds > 3600)
    throw new Error(`--lease-seconds must be an integer from 2 to 3600; got ${flags.get('lease-seconds')}`);
  const grace = pick('grace', 'CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE');
  const interval = pick('interval', 'CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL');
  const intervalMs = interval ? parseDuration(interval, 'the reclaim interval') : DEFAULT_INTERVAL_MS;
  if (intervalMs < 500) throw new Error(`the reclaim interval must be at least 500ms; got ${interval}`);
  const prefix = pick('etcd-prefix', 'CNIKIT_CLUSTER_IPAM_ETCD_PREFIX') ?? DEFAULT_ETCD_PREFIX;
  if (!prefix.endsWith('/'))
    throw new Error(`${etcdSettingName('etcd_prefix')} must end with '/'; got ${JSON.stringify(prefix)}`);
  const etcd: EtcdReclaimerConfig['etcd'] = { etcd_host: host };
  for (const k of ['username', 'password', 'cert-file', 'key-file', 'ca-cert-file'] as const) {
    const v = pick(`etcd-${k}`, `CNIKIT_CLUSTER_IPAM_ETCD_${k.toUpperCase().replace(/-/g, '_')}`);
    if (v !== undefined) etcd[`etcd_${k.replace(/-/g, '_')}` as keyof typeof etcd] = v;
  }
  const passwordFile = pick('etcd-password-file', 'CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE');
  if (passwordFile !== undefined) {
    if (etcd.etcd_password !== undefined)
      throw new Error(
        `${etcdSettingName('etcd_password')} and ${etcdSettingName('etcd_password_file')}: give one of them`,
      );
    try {
      etcd.etcd_password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (e) {
      throw new Error(
        `${etcdSettingName('etcd_password_file')}: cannot read ${passwordFile}: ${(e as Error).message}`,
      );
    }
  }
  if ((etcd.etcd_username === undefined) !== (etcd.etcd_password === undefined))
    throw new Error(
      `${etcdSettingName('etcd_username')} and a password (${etcdSettingName('etcd_password_file')} or ${etcdSettingName('etcd_password')}) go together`,
    );
  return {
    node,
    identity: flags.get('identity') ?? `${node}_${process.pid}`,
    leaseSeconds,
    graceMs: grace ? parseDuration(grace, 'the reclaim grace') : DEFAULT_GRACE_MS,
    intervalMs,
    prefix,
    etcd,
  };
}

export interface EtcdRunReport {
  records: number;
  released: Array<{ name: string; ip: string; node: string }>;
  blocksReleased: string[];
  nodesRemoved: string[];
  /** Kept: node alive, within the grace (record young or node missing for less than the grace), node unknown. */
  kept: { live: number; grace: number; unknown: number };
  /** Nodes seen without a heartbeat, with the ms since the leader first saw that. */
  missing: Record<string, number>;
}

export class EtcdReclaimer {
  readonly cfg: EtcdReclaimerConfig;
  readonly client: EtcdClient;
  readonly store: EtcdStore;
  readonly #log: (line: string) => void;
  readonly #now: () => number;
  #lease = '';
  #lastKeepAlive = 0;
  #missingSince = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #busy: Promise<void> | undefined;
  #nextRun = 0;
  #unregister: (() => void) | undefined;
  leader = false;
  acquired = 0;
  runs = { ok: 0, error: 0 };
  released = 0;
  blocksReleased = 0;
  lastSuccess = 0;

  constructor(cfg: EtcdReclaimerConfig, store: EtcdStore, log: (line: string) => void, now = Date.now) {
    this.cfg = cfg;
    this.store = store;
    this.client = store.client;
    this.#log = log;
    this.#now = now;
  }

  /** The store of a configuration (its files read: one that cannot be read is an error here, naming the setting). */
  static open(cfg: EtcdReclaimerConfig): EtcdStore {
    let opts: ReturnType<typeof etcdOptionsFromConfig>;
    try {
      opts = etcdOptionsFromConfig(cfg.etcd);
    } catch (e) {
      throw new Error(renamed((e as Error).message));
    }
    return new EtcdStore({ ...opts, prefix: cfg.prefix, timeoutMs: 5000 });
  }

  key(kind: 'nodes' | 'alive', node: string): string {
    return `${this.cfg.prefix}${kind}/${node}`;
  }

  get leaderKey(): string {
    return `${this.cfg.prefix}reclaimer/leader`;
  }

  /** The lease ID this instance holds now ('' for none). */
  get lease(): string {
    return this.#lease;
  }

  /** Whether this instance may act now: it leads, its lease confirmed within two thirds of its duration. */
  holds(): boolean {
    return this.leader && this.#now() - this.#lastKeepAlive < (this.cfg.leaseSeconds * 1000 * 2) / 3;
  }

  #became(leader: boolean, why: string): void {
    if (leader && !this.leader) {
      this.acquired++;
      this.#log(`reclaimer ${this.cfg.identity}: leader (${why})`);
      this.#nextRun = 0;
      this.#missingSince.clear();
    } else if (!leader && this.leader)
      this.#log(`reclaimer ${this.cfg.identity}: not leader any more (${why})`);
    this.leader = leader;
  }

  /**
   * Keeps the lease alive; a lease that is gone (expired: etcd deleted its heartbeat and leader key) is replaced
   * by a new one, with the registration and heartbeat written again.
   */
  async heartbeat(): Promise<void> {
    const now = this.#now();
    if (this.#lease !== '') {
      if ((await this.client.leaseKeepAlive(this.#lease)) > 0) {
        this.#lastKeepAlive = now;
        return;
      }
      this.#became(false, 'the lease expired');
      this.#lease = '';
    }
    const { id } = await this.client.leaseGrant(this.cfg.leaseSeconds);
    const since = new Date(now).toISOString();
    const nodeKey = this.key('nodes', this.cfg.node);
    await this.client.txn(
      [{ key: nodeKey, target: 'CREATE', createRevision: 0 }],
      [{ put: { key: nodeKey, value: JSON.stringify({ node: this.cfg.node, registered: since }) } }],
    );
    await this.client.txn(
      [],
      [
        {
          put: {
            key: this.key('alive', this.cfg.node),
            value: JSON.stringify({ node: this.cfg.node, identity: this.cfg.identity, since }),
            lease: id,
          },
        },
      ],
    );
    this.#lease = id;
    this.#lastKeepAlive = now;
  }

  /** One election step (after heartbeat()): the leader key is created when absent, else read. */
  async elect(): Promise<boolean> {
    if (this.#lease === '') {
      this.#became(false, 'no lease');
      return false;
    }
    const key = this.leaderKey;
    const r = await this.client.txn(
      [{ key, target: 'CREATE', createRevision: 0 }],
      [{ put: { key, value: this.cfg.identity, lease: this.#lease } }],
      [{ range: { key } }],
    );
    if (r.succeeded) {
      this.#became(true, `created ${key}`);
      return true;
    }
    const kv = r.responses[0]?.kvs?.[0];
    const mine = kv !== undefined && kv.value.toString() === this.cfg.identity && kv.lease === this.#lease;
    this.#became(mine, mine ? 'renewed' : `held by ${kv?.value.toString() || 'nobody'}`);
    return mine;
  }

  async #range(prefix: string): Promise<Map<string, { value: string; modRevision: string }>> {
    const out = new Map<string, { value: string; modRevision: string }>();
    let key = Buffer.from(prefix);
    const end = prefixEnd(prefix);
    let revision: string | undefined;
    for (;;) {
      const page = await this.client.range({ key, rangeEnd: end, limit: 500, revision });
      revision ??= page.revision;
      for (const kv of page.kvs)
        out.set(kv.key.toString().slice(prefix.length), {
          value: kv.value.toString(),
          modRevision: kv.modRevision,
        });
      if (!page.more || page.kvs.length === 0) return out;
      key = Buffer.concat([(page.kvs[page.kvs.length - 1] as { key: Buffer }).key, Buffer.from([0])]);
    }
  }

  /** One reclaiming pass (the leader's work); throws, releasing nothing more, when a read fails or the lease lapses. */
  async reclaim(): Promise<EtcdRunReport> {
    const store = this.store;
    const records = await store.list<AllocationSpec>('allocations');
    const blocks = await store.list<BlockSpec>('blocks');
    const registered = await this.#range(`${this.cfg.prefix}nodes/`);
    const alive = await this.#range(`${this.cfg.prefix}alive/`);
    const now = this.#now();
    for (const n of [...this.#missingSince.keys()])
      if (!registered.has(n) || alive.has(n)) this.#missingSince.delete(n);
    const missing: Record<string, number> = {};
    for (const n of registered.keys()) {
      if (alive.has(n)) continue;
      if (!this.#missingSince.has(n)) this.#missingSince.set(n, now);
      missing[n] = now - (this.#missingSince.get(n) as number);
    }
    const gone = (node: string) => node in missing && (missing[node] as number) >= this.cfg.graceMs;
    const young = (created: string | undefined) => {
      const t = Date.parse(created ?? '');
      return !Number.isFinite(t) || now - t < this.cfg.graceMs;
    };
    const report: EtcdRunReport = {
      records: records.length,
      released: [],
      blocksReleased: [],
      nodesRemoved: [],
      kept: { live: 0, grace: 0, unknown: 0 },
      missing,
    };
    const check = () => {
      if (!this.holds())
        throw new EtcdError('the leader lease is not confirmed any more: stopping this run', 0);
    };
    const left: StoredObject<AllocationSpec>[] = [];
    for (const r of records) {
      const node = r.spec?.node ?? '';
      if (alive.has(node)) report.kept.live++;
      else if (!registered.has(node)) report.kept.unknown++;
      else if (!gone(node) || young(r.spec?.created)) report.kept.grace++;
      else {
        check();
        if (await store.delete('allocations', r.name, r.version, r.spec)) {
          report.released.push({ name: r.name, ip: r.spec.ip, node });
          this.released++;
          this.#log(
            `reclaimer: released ${r.spec.ip} (${r.name}; node ${node} has had no heartbeat for ${Math.round((missing[node] as number) / 1000)} s; container ${r.spec.containerID} ${r.spec.ifName})`,
          );
          continue;
        }
      }
      left.push(r);
    }
    const ipValue = (t: string) => parseIP(t)?.value;
    const blocksLeft = new Set<string>();
    for (const b of blocks) {
      const s = b.spec;
      if (!s || !gone(s.node) || young(s.created)) {
        if (s) blocksLeft.add(s.node);
        continue;
      }
      const base = ipValue(s.base);
      const end = base === undefined ? undefined : base + BigInt(s.size);
      const used =
        base === undefined ||
        left.some((r) => {
          const v = ipValue(r.spec?.ip ?? '');
          return v !== undefined && end !== undefined && v >= base && v < end;
        });
      if (!used) {
        check();
        if (await store.delete('blocks', b.name, b.version, b.spec)) {
          report.blocksReleased.push(b.name);
          this.blocksReleased++;
          this.#log(
            `reclaimer: released block ${b.name} (${s.base}/${s.size} of node ${s.node}, which is gone)`,
          );
          continue;
        }
      }
      blocksLeft.add(s.node);
    }
    // a gone node that holds nothing any more: its registration goes too (it registers again if it comes back)
    const holding = new Set(left.map((r) => r.spec?.node ?? ''));
    for (const [node, reg] of registered) {
      if (!gone(node) || holding.has(node) || blocksLeft.has(node)) continue;
      check();
      const key = this.key('nodes', node);
      const r = await this.client.txn(
        [{ key, target: 'MOD', modRevision: reg.modRevision }],
        [{ deleteRange: { key } }],
      );
      if (r.succeeded) {
        report.nodesRemoved.push(node);
        this.#missingSince.delete(node);
        this.#log(`reclaimer: node ${node} removed (no heartbeat, nothing held any more)`);
      }
    }
    return report;
  }

  /** The last failure of a step that was logged (one line per new failure, not one per step). */
  #lastFailure = '';

  async step(): Promise<EtcdRunReport | undefined> {
    try {
      await this.heartbeat();
      await this.elect();
      if (this.#lastFailure !== '') this.#log(`reclaimer ${this.cfg.identity}: etcd answers again`);
      this.#lastFailure = '';
    } catch (e) {
      const why =
        e instanceof EtcdUnavailableError
          ? `cannot reach etcd: ${(e as Error).message}`
          : `etcd refuses this instance: ${renamed((e as Error).message)}`;
      this.#became(false, why);
      if (why !== this.#lastFailure) this.#log(`reclaimer ${this.cfg.identity}: ${why}; trying again`);
      this.#lastFailure = why;
      return undefined;
    }
    if (!this.holds() || this.#now() < this.#nextRun) return undefined;
    this.#nextRun = this.#now() + this.cfg.intervalMs;
    try {
      this.store.rebound(this.cfg.intervalMs + 30_000);
      const r = await this.reclaim();
      this.runs.ok++;
      this.lastSuccess = this.#now();
      this.#log(
        `reclaimer run: ${r.records} records, released ${r.released.length} records, ${r.blocksReleased.length} blocks and ${r.nodesRemoved.length} nodes, kept ${r.kept.live} of live nodes, ${r.kept.grace} within the grace, ${r.kept.unknown} of unregistered nodes`,
      );
      // objects without their per-node index entry (written by an older cnikit: a rolling upgrade) get it
      const m = await this.store.migrate();
      if (m.indexed + m.removed > 0)
        this.#log(`reclaimer: per-node index: ${m.indexed} entries written, ${m.removed} stale ones removed`);
      return r;
    } catch (e) {
      this.runs.error++;
      this.#log(`reclaimer run failed (nothing more released): ${(e as Error).message}`);
      return undefined;
    }
  }

  /** Starts the loop (a step every third of the lease duration) and the metrics. */
  start(): void {
    this.#unregister = registerMetricsSource(() => this.render());
    const period = Math.max(250, Math.floor((this.cfg.leaseSeconds * 1000) / 3));
    const tick = () => {
      if (this.#stopped) return;
      this.#busy = this.step()
        .then(() => {})
        .finally(() => {
          this.#busy = undefined;
          if (!this.#stopped) this.#timer = setTimeout(tick, period);
        });
    };
    tick();
  }

  /**
   * Stops the loop. `crash`: as if the process died (the heartbeat and the leader key stay until the lease
   * expires); else the leader key is deleted at once.
   */
  async stop(opts: { crash?: boolean } = {}): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#busy;
    this.#unregister?.();
    if (!opts.crash && this.leader && this.#lease !== '') {
      const key = this.leaderKey;
      // only our own key: same identity on the same lease
      try {
        const { kv } = await this.client.get(key);
        if (kv && kv.value.toString() === this.cfg.identity && kv.lease === this.#lease)
          await this.client.txn(
            [{ key, target: 'MOD', modRevision: kv.modRevision }],
            [{ deleteRange: { key } }],
          );
      } catch {
        // it expires with the lease
      }
    }
    this.leader = false;
    await this.store.close();
  }

  render(): string {
    const n = 'cnikit_cluster_ipam_reclaimer';
    return [
      `# HELP ${n}_leader 1 while this instance holds the reclaimer's leader key (etcd).`,
      `# TYPE ${n}_leader gauge`,
      `${n}_leader ${this.holds() ? 1 : 0}`,
      `# HELP ${n}_leader_acquired_total Times this instance became the leader.`,
      `# TYPE ${n}_leader_acquired_total counter`,
      `${n}_leader_acquired_total ${this.acquired}`,
      `# HELP ${n}_runs_total Reclaiming runs of this instance.`,
      `# TYPE ${n}_runs_total counter`,
      `${n}_runs_total{result="ok"} ${this.runs.ok}`,
      `${n}_runs_total{result="error"} ${this.runs.error}`,
      `# HELP ${n}_released_total Allocation records released: their node is gone (no heartbeat for the grace).`,
      `# TYPE ${n}_released_total counter`,
      `${n}_released_total{reason="node"} ${this.released}`,
      `# HELP ${n}_blocks_released_total Blocks of gone nodes released.`,
      `# TYPE ${n}_blocks_released_total counter`,
      `${n}_blocks_released_total ${this.blocksReleased}`,
      `# HELP ${n}_last_success_timestamp_seconds When the last successful run ended (Unix time).`,
      `# TYPE ${n}_last_success_timestamp_seconds gauge`,
      `${n}_last_success_timestamp_seconds ${Math.floor(this.lastSuccess / 1000)}`,
      '',
    ].join('\n');
  }
}

/**
 * Starts an etcd reclaimer with the command's flags and the environment. The first heartbeat is awaited: etcd
 * refusing this instance (a wrong password, no rights on the prefix, a certificate it or we refuse) fails the start
 * with what to fix; an etcd that cannot be reached now does not (the instance tries again every step, logging it).
 */
export async function startEtcdReclaimer(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  log: (line: string) => void,
): Promise<{ description: string; reclaimer: EtcdReclaimer; stop(): Promise<void> }> {
  const cfg = parseEtcdReclaimerArgs(args, env);
  const store = EtcdReclaimer.open(cfg);
  const r = new EtcdReclaimer(cfg, store, log);
  try {
    await r.heartbeat();
  } catch (e) {
    if (!(e instanceof EtcdUnavailableError)) {
      await store.close();
      throw new Error(
        `etcd ${cfg.etcd.etcd_host} refuses the reclaimer: ${renamed((e as Error).message)} (the etcd settings: ${etcdSettingName('etcd_username')}, ${etcdSettingName('etcd_password_file')}, ${etcdSettingName('etcd_cert_file')}, ${etcdSettingName('etcd_key_file')}, ${etcdSettingName('etcd_ca_cert_file')})`,
      );
    }
    log(`reclaimer ${cfg.identity}: cannot reach etcd yet: ${(e as Error).message}; trying again`);
  }
  r.start();
  return {
    description: `cluster-ipam reclaimer ${cfg.identity} on etcd ${cfg.etcd.etcd_host} (${cfg.prefix}): node ${cfg.node}, lease ${cfg.leaseSeconds} s, every ${cfg.intervalMs / 1000} s, grace ${cfg.graceMs / 1000} s`,
    reclaimer: r,
    stop: () => r.stop(),
  };
}

/** `cluster-ipam reclaimer --datastore etcd …` in the foreground, until SIGTERM/SIGINT. */
export function etcdReclaimerMain(args: readonly string[]): Promise<number> {
  return runInForeground(args, ETCD_RECLAIMER_USAGE, startEtcdReclaimer);
}
