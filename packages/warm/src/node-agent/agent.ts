/**
 * The node agent (docs/kubernetes.md, "cnikit as the cluster network"): hosted by `cnikit serve --node-agent` (or
 * the ConfigMap key node-agent: "on"), on the service's event loop. It lists and watches the Node objects (resuming
 * from the last resourceVersion after a clean end, relisting on 410 Gone and after any failed watch so that nothing
 * changed during an outage is missed, dropping a watch silent longer than its bound, backing off on errors), keeps only what it needs of each
 * (name, pod CIDRs, InternalIPs, VTEP MAC: bounded memory), and after every change, on start and every
 * resync period brings the kernel to the plan (./plan.ts, ./kernel.ts) and the masquerade chain to the config
 * (./masquerade.ts). While the API server is unreachable nothing is removed: routes stay as they are until a
 * successful list or a watch event says otherwise.
 */
import { createServer, type Server } from 'node:http';
import { type ResidentHandle, type Span, traced } from '@cnikit/skel';
import { inClusterConnection, kubeconfigConnection } from '../kube.ts';
import { KubeClient as Client, type KubeClient } from '../kube-client.ts';
import { escapeLabel, registerMetricsSource } from '../metrics.ts';
import { ConfigError, type NodeAgentConfig, parseNodeAgentConfig } from './config.ts';
import { applyPlan, ensureVxlan, findUnderlay, removeVxlan } from './kernel.ts';
import { syncMasquerade } from './masquerade.ts';
import { type PeerNode, peerFromNode, plan, VTEP_MAC_ANNOTATION } from './plan.ts';
import { type AgentTracing, KIND, rootSpan } from './trace.ts';

/** Node objects kept at most (a cluster's documented limit is 5000 nodes). */
export const MAX_NODES = 20_000;
const LIST_PAGE = 500;
/**
 * Watch timing: the server ends each watch after `watchTimeoutS` (a clean end, resumed from the last
 * resourceVersion); a watch with no data for `watchTimeoutS + idleMarginS` is dropped and the nodes listed again
 * (a connection that stays open and silent, e.g. one accepted while the API server was starting). Errors retry after
 * `backoffMinMs`, doubling up to `backoffMaxMs`; the delay resets only after a watch that delivered (an event, or a
 * clean end after at least half its timeout).
 */
export interface WatchTiming {
  watchTimeoutS: number;
  idleMarginS: number;
  backoffMinMs: number;
  backoffMaxMs: number;
}
export const WATCH_TIMING: WatchTiming = {
  watchTimeoutS: 60,
  idleMarginS: 15,
  backoffMinMs: 250,
  backoffMaxMs: 30_000,
};

class Gone extends Error {}

function same(a: PeerNode | undefined, b: PeerNode): boolean {
  return (
    a !== undefined &&
    a.vtepMac === b.vtepMac &&
    a.podCidrs.join(',') === b.podCidrs.join(',') &&
    a.internalIps.join(',') === b.internalIps.join(',')
  );
}

export class NodeAgent {
  readonly cfg: NodeAgentConfig;
  readonly #client: KubeClient;
  readonly #log: (m: string) => void;
  readonly #tracing: AgentTracing | undefined;
  readonly #timing: WatchTiming;
  readonly nodes = new Map<string, PeerNode>();
  #rv = '';
  #listed = false;
  #stopped = false;
  #abort = new AbortController();
  #syncTimer: NodeJS.Timeout | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  #syncing = false;
  #published: string | undefined;
  // observable state (metrics, readiness, tests)
  ready = false;
  lastError = '';
  routesProgrammed = 0;
  lastSync = 0;
  lastSyncSeconds = 0;
  syncs = 0;
  readonly errors: Record<string, number> = {};
  problems: string[] = [];
  /** Lists done, watches opened, and the delay of the last retry (tests, metrics). */
  lists = 0;
  watches = 0;
  lastBackoffMs = 0;

  constructor(
    cfg: NodeAgentConfig,
    client: KubeClient,
    log: (m: string) => void,
    tracing?: AgentTracing,
    timing: Partial<WatchTiming> = {},
  ) {
    this.cfg = cfg;
    this.#timing = { ...WATCH_TIMING, ...timing };
    this.#client = client;
    this.#log = log;
    this.#tracing = tracing;
  }

  /** Counts an error; logs it when it differs from the last one (`detail`, e.g. the retry delay, aside). */
  #error(kind: string, msg: string, detail = ''): void {
    this.errors[kind] = (this.errors[kind] ?? 0) + 1;
    if (msg !== this.lastError) this.#log(`node agent: ${msg}${detail}`);
    this.lastError = msg;
  }

  start(): void {
    void this.#loop();
    this.#resyncTimer = setInterval(() => this.schedule(0), this.cfg.resyncMs);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    clearInterval(this.#resyncTimer);
    clearTimeout(this.#syncTimer);
  }

  /** A sync soon (changes that arrive together are applied together). */
  schedule(delayMs = 5): void {
    if (this.#stopped || !this.#listed || this.#syncTimer) return;
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined;
      this.sync();
    }, delayMs);
  }

  async #loop(): Promise<void> {
    const t = this.#timing;
    let backoff = t.backoffMinMs;
    const pause = async (msg: string): Promise<void> => {
      this.lastBackoffMs = backoff;
      this.#error('api', `Kubernetes API ${this.#client.server}: ${msg}; retrying in ${backoff} ms`);
      await new Promise((r) => setTimeout(r, backoff * (0.8 + Math.random() * 0.4)));
      backoff = Math.min(backoff * 2, t.backoffMaxMs);
    };
    while (!this.#stopped) {
      try {
        if (!this.#rv) await this.#list();
        const t0 = Date.now();
        const events = await this.#watch();
        if (this.#stopped) return;
        if (events > 0 || Date.now() - t0 >= (t.watchTimeoutS * 1000) / 2) backoff = t.backoffMinMs;
        // a clean end at once with nothing delivered (e.g. a server shutting down): list again, after the delay
        else {
          this.#rv = '';
          await pause('watch nodes ended at once with no event: listing again');
        }
      } catch (e) {
        if (this.#stopped) return;
        if (e instanceof Gone) {
          this.#log(`node agent: watch from resourceVersion ${this.#rv} expired (410 Gone): listing again`);
          this.#rv = '';
          continue;
        }
        // what changed while the watch was failing is not known: list again rather than resume
        this.#rv = '';
        await pause((e as Error).message);
      }
    }
  }

  #list(): Promise<void> {
    return rootSpan(
      this.#tracing,
      'node-agent list nodes',
      { 'server.address': this.#client.server },
      KIND.Client,
      (span) => this.#listPages(span),
    );
  }

  async #listPages(span?: Span): Promise<void> {
    const fresh = new Map<string, PeerNode>();
    let cont = '';
    let rv = '';
    do {
      const q = `/api/v1/nodes?limit=${LIST_PAGE}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const r = await this.#client.request('GET', q, { timeoutMs: 30_000 });
      if (r.status === 410) {
        cont = '';
        fresh.clear();
        continue;
      }
      if (r.status !== 200) throw new Error(`GET ${q}: HTTP ${r.status}${httpReason(r.status, r.body)}`);
      const body = JSON.parse(r.body) as {
        metadata?: { resourceVersion?: string; continue?: string };
        items?: unknown[];
      };
      for (const it of body.items ?? []) {
        const p = peerFromNode(it);
        if (p && fresh.size < MAX_NODES) fresh.set(p.name, p);
      }
      cont = body.metadata?.continue ?? '';
      rv = body.metadata?.resourceVersion ?? rv;
    } while (cont);
    this.nodes.clear();
    for (const [k, v] of fresh) this.nodes.set(k, v);
    this.#rv = rv;
    this.lists++;
    span?.setAttributes({ 'cnikit.node_agent.nodes': fresh.size, 'k8s.resource_version': rv });
    const first = !this.#listed;
    this.#listed = true;
    if (first) this.#log(`node agent: ${this.nodes.size} node(s) listed (resourceVersion ${rv})`);
    this.schedule(0);
  }

  /** One watch from the last resourceVersion; resolves with the events it delivered when the server ends it. */
  async #watch(): Promise<number> {
    const t = this.#timing;
    const q = `/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=${t.watchTimeoutS}&resourceVersion=${encodeURIComponent(this.#rv)}`;
    let events = 0;
    this.watches++;
    const r = await this.#client.stream(
      q,
      (line) => {
        events++;
        this.#event(line);
      },
      { idleMs: (t.watchTimeoutS + t.idleMarginS) * 1000, signal: this.#abort.signal },
    );
    if (r.status === 410) throw new Gone();
    if (r.status !== 200) throw new Error(`watch nodes: HTTP ${r.status}${httpReason(r.status, r.body)}`);
    return events;
  }

  #event(line: string): void {
    let ev: {
      type?: string;
      object?: { metadata?: { resourceVersion?: string }; code?: number; message?: string };
    };
    try {
      ev = JSON.parse(line);
    } catch {
      this.#error('api', 'watch nodes: an event that is not JSON');
      return;
    }
    const obj = ev.object;
    if (ev.type === 'ERROR') {
      if (obj?.code === 410) throw new Gone();
      throw new Error(`watch nodes: ${obj?.message ?? 'error event'}`);
    }
    const rv = obj?.metadata?.resourceVersion;
    if (rv) this.#rv = rv;
    if (ev.type === 'BOOKMARK') return;
    const p = peerFromNode(obj);
    if (!p) return;
    if (ev.type === 'DELETED') {
      if (this.nodes.delete(p.name)) this.schedule();
      return;
    }
    if (same(this.nodes.get(p.name), p)) return;
    if (!this.nodes.has(p.name) && this.nodes.size >= MAX_NODES) {
      this.#error('nodes', `more than ${MAX_NODES} nodes: node ${p.name} ignored`);
      return;
    }
    this.nodes.set(p.name, p);
    this.schedule();
  }

  /** One reconcile pass (synchronous: the kernel calls are netlink requests and one iptables-restore at most). */
  sync(): void {
    if (this.#syncing) return;
    this.#syncing = true;
    const t0 = performance.now();
    try {
      rootSpan(
        this.#tracing,
        'node-agent reconcile',
        { 'k8s.node.name': this.cfg.nodeName, 'cnikit.node_agent.mode': this.cfg.mode },
        KIND.Internal,
        (span) => this.#reconcile(span),
      );
    } catch (e) {
      this.#error('sync', `sync: ${(e as Error).message}`);
    } finally {
      this.syncs++;
      this.lastSync = Date.now();
      this.lastSyncSeconds = (performance.now() - t0) / 1000;
      this.#syncing = false;
    }
  }

  #reconcile(span?: Span): void {
    const self = this.nodes.get(this.cfg.nodeName);
    if (!self) throw new Error(`node ${this.cfg.nodeName} (NODE_NAME) is not among the Node objects`);
    const u = findUnderlay(self.internalIps);
    if (!u)
      throw new Error(
        `none of node ${self.name}'s InternalIPs (${self.internalIps.join(', ') || 'none'}) is an address of this host`,
      );
    let vxlanIndex: number | undefined;
    if (this.cfg.mode !== 'host-gw') {
      const vx = traced('node-agent vxlan', { 'network.interface.name': `cnikit.${this.cfg.vxlan.id}` }, () =>
        ensureVxlan(
          {
            vni: this.cfg.vxlan.id,
            port: this.cfg.vxlan.port,
            mtu: this.cfg.vxlan.mtu,
            nodeName: self.name,
            ownPodCidrs: self.podCidrs,
          },
          u,
          this.#log,
        ),
      );
      vxlanIndex = vx.index;
      if (self.vtepMac !== vx.mac && this.#published !== vx.mac) void this.#publish(vx.mac);
    } else if (removeVxlan(this.cfg.vxlan.id)) this.#log('node agent: mode host-gw: VXLAN device removed');
    const p = plan(self, this.nodes.values(), this.cfg.mode, u);
    const res = traced('node-agent routes', { 'cnikit.node_agent.routes_wanted': p.routes.length }, (s) => {
      const r = applyPlan(p, u.linkIndex, vxlanIndex);
      s?.setAttributes({
        'cnikit.node_agent.routes': r.routes,
        'cnikit.node_agent.changes': r.changes,
        'cnikit.node_agent.conflicts': r.conflicts.length,
      });
      return r;
    });
    if (this.cfg.masquerade)
      traced('node-agent masquerade', {}, () => syncMasquerade(self.podCidrs, this.cfg.nonMasqueradeCidrs));
    const problems = [...p.problems, ...res.conflicts];
    if (problems.join('\n') !== this.problems.join('\n'))
      for (const m of problems) this.#log(`node agent: ${m}`);
    this.problems = problems;
    if (res.conflicts.length) this.errors.conflict = (this.errors.conflict ?? 0) + res.conflicts.length;
    this.routesProgrammed = res.routes;
    if (res.changes > 0 || !this.ready)
      this.#log(
        `node agent: ${res.routes} route(s) to ${this.nodes.size - 1} peer(s), ${res.changes} change(s)`,
      );
    span?.setAttributes({
      'cnikit.node_agent.peers': this.nodes.size - 1,
      'cnikit.node_agent.routes': res.routes,
      'cnikit.node_agent.changes': res.changes,
    });
    this.ready = true;
    this.lastError = '';
  }

  async #publish(mac: string): Promise<void> {
    this.#published = mac;
    const path = `/api/v1/nodes/${encodeURIComponent(this.cfg.nodeName)}/status`;
    try {
      const r = await this.#client.request('PATCH', path, {
        body: { metadata: { annotations: { [VTEP_MAC_ANNOTATION]: mac } } },
        contentType: 'application/merge-patch+json',
      });
      if (r.status !== 200) throw new Error(`PATCH ${path}: HTTP ${r.status}${httpReason(r.status, r.body)}`);
      this.#log(`node agent: ${VTEP_MAC_ANNOTATION}=${mac} on node ${this.cfg.nodeName}`);
    } catch (e) {
      this.#published = undefined;
      this.#error('api', (e as Error).message);
    }
  }

  renderMetrics(): string {
    const l: string[] = [
      '# HELP cnikit_node_agent_ready 1 when the node agent has programmed the node after its last change.',
      '# TYPE cnikit_node_agent_ready gauge',
      `cnikit_node_agent_ready ${this.ready ? 1 : 0}`,
      '# HELP cnikit_node_agent_nodes_known Node objects the node agent knows (this node included).',
      '# TYPE cnikit_node_agent_nodes_known gauge',
      `cnikit_node_agent_nodes_known ${this.nodes.size}`,
      '# HELP cnikit_node_agent_routes_programmed Routes of the node agent in the kernel after the last sync.',
      '# TYPE cnikit_node_agent_routes_programmed gauge',
      `cnikit_node_agent_routes_programmed ${this.routesProgrammed}`,
      '# HELP cnikit_node_agent_last_sync_timestamp_seconds When the last sync ran (Unix time).',
      '# TYPE cnikit_node_agent_last_sync_timestamp_seconds gauge',
      `cnikit_node_agent_last_sync_timestamp_seconds ${this.lastSync / 1000}`,
      '# HELP cnikit_node_agent_last_sync_duration_seconds How long the last sync took.',
      '# TYPE cnikit_node_agent_last_sync_duration_seconds gauge',
      `cnikit_node_agent_last_sync_duration_seconds ${this.lastSyncSeconds}`,
      '# HELP cnikit_node_agent_syncs_total Syncs run.',
      '# TYPE cnikit_node_agent_syncs_total counter',
      `cnikit_node_agent_syncs_total ${this.syncs}`,
      '# HELP cnikit_node_agent_errors_total Errors by kind (config, api, sync, conflict, nodes).',
      '# TYPE cnikit_node_agent_errors_total counter',
    ];
    for (const [k, v] of Object.entries(this.errors))
      l.push(`cnikit_node_agent_errors_total{kind="${escapeLabel(k)}"} ${v}`);
    return `${l.join('\n')}\n`;
  }
}

function httpReason(status: number, body: string): string {
  if (status === 403)
    return ' (forbidden: the service account needs list/watch on nodes and patch on nodes/status, rbac.yaml)';
  if (status === 401) return ' (unauthorized: token rejected)';
  try {
    const m = (JSON.parse(body) as { message?: string }).message;
    return m ? ` (${m})` : '';
  } catch {
    return '';
  }
}

function serveHealth(cfg: NodeAgentConfig, state: () => { ready: boolean; error: string }): Promise<Server> {
  const h = cfg.health as { host: string; port: number };
  const srv = createServer((req, res) => {
    const s = state();
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (req.url === '/readyz') {
      res
        .writeHead(s.ready ? 200 : 503, { 'content-type': 'text/plain' })
        .end(s.ready ? 'ok\n' : `not ready: ${s.error || 'not synced yet'}\n`);
    } else res.writeHead(404).end();
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(h.port, h.host, () => resolve(srv));
  });
}

/**
 * Starts the agent hosted by the service. A bad configuration does not stop the service: the agent logs the error
 * (naming the ConfigMap key), programs nothing and its /readyz answers 503 with that error.
 */
export async function startNodeAgent(
  env: Readonly<Record<string, string | undefined>>,
  log: (m: string) => void,
  tracing?: AgentTracing,
): Promise<ResidentHandle & { agent: NodeAgent | undefined }> {
  let cfg: NodeAgentConfig | undefined;
  let fatal = '';
  try {
    cfg = parseNodeAgentConfig(env);
  } catch (e) {
    fatal = e instanceof ConfigError ? e.message : `configuration: ${(e as Error).message}`;
  }
  let agent: NodeAgent | undefined;
  if (cfg) {
    try {
      const conn = cfg.kubeconfig ? kubeconfigConnection(cfg.kubeconfig) : inClusterConnection(env);
      agent = new NodeAgent(cfg, new Client(conn), log, tracing);
    } catch (e) {
      fatal = (e as Error).message;
    }
  }
  if (fatal) log(`node agent: ${fatal}; nothing is programmed and the agent is not ready`);
  const configErrors = fatal ? 1 : 0;
  const unregister = registerMetricsSource(() =>
    agent
      ? agent.renderMetrics()
      : '# TYPE cnikit_node_agent_ready gauge\ncnikit_node_agent_ready 0\n# TYPE cnikit_node_agent_errors_total counter\n' +
        `cnikit_node_agent_errors_total{kind="config"} ${configErrors}\n`,
  );
  let health: Server | undefined;
  const healthCfg = cfg ?? safeHealthConfig(env);
  if (healthCfg?.health) {
    try {
      health = await serveHealth(healthCfg, () => ({
        ready: agent?.ready ?? false,
        error: fatal || (agent?.lastError ?? ''),
      }));
    } catch (e) {
      log(
        `node agent: cannot serve /readyz on ${healthCfg.health.host}:${healthCfg.health.port}: ${(e as Error).message}`,
      );
    }
  }
  agent?.start();
  const h = healthCfg?.health;
  return {
    agent,
    description: `${agent ? `node agent for node ${cfg?.nodeName}, mode ${cfg?.mode}` : 'node agent NOT running (bad configuration)'}${h ? `, /readyz on ${h.host}:${h.port}` : ''}`,
    async stop() {
      await agent?.stop();
      unregister();
      health?.close();
      health?.closeAllConnections();
    },
  };
}

/** The health listener of a configuration that failed elsewhere (so the readiness probe can say why). */
function safeHealthConfig(env: Readonly<Record<string, string | undefined>>): NodeAgentConfig | undefined {
  try {
    return parseNodeAgentConfig({
      NODE_NAME: 'x',
      CNIKIT_MASQUERADE: 'off',
      CNIKIT_NODE_AGENT_HEALTH: env.CNIKIT_NODE_AGENT_HEALTH,
    });
  } catch {
    return undefined;
  }
}
