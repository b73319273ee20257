// Benchmark: the node agent's routes to 100 peer nodes (dual stack: 200 routes).
//  1. kernel side only: the agent's applyPlan (netlink, one sync) vs the same 200 routes through `ip route replace`
//     processes (one each) and through one `ip -batch`, each in a fresh namespace (created outside the timing);
//  2. end to end with a real kube-apiserver (scripts/k8s/control-plane.ts): 100 Node objects created through the API
//     in one `kubectl create` (no kubelet) → all 200 routes in the namespace of a node whose agent
//     (`dist-bin/cnikit serve --node-agent`) is running;
//  3. convergence after a join: a Node object's podCIDR assigned (PATCH) → its route on that node, 100 peers known.
//   node --conditions=cnikit-source --import tsx bench/node-agent.ts [runs=10] [--kernel-only]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { linkIndex, withNetns } from '@cnikit/netlink';
import { applyPlan, RTPROT_CNIKIT } from '../packages/warm/src/node-agent/kernel.ts';
import { type PeerNode, plan } from '../packages/warm/src/node-agent/plan.ts';
import { startControlPlane } from '../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../scripts/k8s-build.mjs';
import { ensureBuilt } from '../test-netns/dist.ts';
import { Lab } from '../test-netns/k8s/node-agent-lab.ts';
import { quantile } from './lib/side-by-side.ts';

const runs = Math.max(3, Number(process.argv[2] ?? 10) || 10);
/** `--kernel-only`: part 1 only (no control plane). */
const kernelOnly = process.argv.includes('--kernel-only');
const PEERS = 100;

function sh(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const peers: PeerNode[] = Array.from({ length: PEERS }, (_, i) => ({
  name: `peer-${i}`,
  podCidrs: [`10.${100 + (i >> 8)}.${i & 255}.0/24`, `fd00:10:${(100 + i).toString(16)}::/64`],
  internalIps: [`192.168.${96 + (i >> 8)}.${(i & 255) + 2}`, `fd00:50::${(i + 2).toString(16)}`],
  vtepMac: undefined,
}));
const self: PeerNode = {
  name: 'self',
  podCidrs: ['10.99.0.0/24'],
  internalIps: ['192.168.96.1'],
  vtepMac: undefined,
};
const underlay = { prefixes: ['192.168.96.1/20', 'fd00:50::1/64'], vtepFamily: 4 as const };
const p = plan(self, peers, 'host-gw', underlay);
if (p.routes.length !== 2 * PEERS) throw new Error(`plan: ${p.routes.length} routes`);

function freshNs(): string {
  const ns = `cnbench-na-${process.pid}`;
  spawnSync('ip', ['netns', 'del', ns]);
  sh('ip', ['netns', 'add', ns]);
  sh('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
  sh('ip', ['-n', ns, 'link', 'set', 'eth1', 'up']);
  sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
  sh('ip', ['-n', ns, 'addr', 'add', '192.168.96.1/20', 'dev', 'eth0']);
  sh('ip', ['-n', ns, 'addr', 'add', 'fd00:50::1/64', 'dev', 'eth0', 'nodad']);
  return ns;
}

function count(ns: string): number {
  return (
    sh('ip', ['-n', ns, '-4', 'route', 'show', 'proto', String(RTPROT_CNIKIT)])
      .trim()
      .split('\n').length +
    sh('ip', ['-n', ns, '-6', 'route', 'show', 'proto', String(RTPROT_CNIKIT)])
      .trim()
      .split('\n').length
  );
}

const lines = p.routes.map((r) => `route replace ${r.dst} via ${r.gw} dev eth0 proto ${RTPROT_CNIKIT}`);
const variants: Record<string, (ns: string) => void> = {
  'node agent (netlink, one sync)': (ns) => {
    withNetns(`/run/netns/${ns}`, () => {
      applyPlan(p, linkIndex('eth0'), undefined);
    });
  },
  'ip route (200 execs)': (ns) => {
    for (const l of lines) sh('ip', ['-n', ns, ...l.split(' ')]);
  },
  'ip -batch (1 exec)': (ns) => {
    sh('ip', ['-n', ns, '-batch', '-'], `${lines.join('\n')}\n`);
  },
};

console.log(
  `node agent: ${2 * PEERS} routes to ${PEERS} peers (dual stack), ${runs} runs each, median / p90`,
);
const results: Record<string, number[]> = {};
try {
  for (let i = 0; i < runs; i++) {
    for (const [name, fn] of Object.entries(variants)) {
      const ns = freshNs();
      const t0 = performance.now();
      fn(ns);
      const ms = performance.now() - t0;
      if (count(ns) !== 2 * PEERS) throw new Error(`${name}: ${count(ns)} routes`);
      results[name] = [...(results[name] ?? []), ms];
    }
  }
} finally {
  spawnSync('ip', ['netns', 'del', `cnbench-na-${process.pid}`]);
}
for (const [name, t] of Object.entries(results))
  console.log(
    `  ${name.padEnd(32)} ${quantile(t, 0.5).toFixed(1).padStart(8)} ms ${quantile(t, 0.9).toFixed(1).padStart(8)} ms`,
  );

// 2. end to end: Node objects through the API → routes in a node running the agent
if (kernelOnly) process.exit(0);
ensureBuilt();
const tag = `cnbna${process.pid % 10000}`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-bench-node-agent-'));
const { dir: cacheDir } = await k8sBinaries();
const cp = await startControlPlane({
  binDir: join(cacheDir, 'bin'),
  dir: join(dir, 'cp'),
  netns: `${tag}-cp`,
  apiserverArgs: ['--feature-gates=IPv6DualStack=true'],
});
const lab = new Lab(cp, tag, dir);
try {
  lab.setupHub();
  lab.serviceAccount();
  const a = lab.addNode('a', 1);
  lab.createNodeObject(a);
  lab.startAgent(a, { CNIKIT_NODE_AGENT_MODE: 'host-gw', CNIKIT_NODE_AGENT_RESYNC_SECONDS: '60' });
  for (let t = Date.now(); lab.http(a, 9809, '/readyz')[0] !== 200; ) {
    if (Date.now() - t > 30_000) throw new Error(`agent not ready:\n${lab.log(a)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const items = Array.from({ length: PEERS }, (_, i) => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: `peer-${i}` },
    spec: { podCIDRs: [`10.245.${i}.0/24`, `fd00:10:245:${i.toString(16)}::/64`] },
    status: {
      addresses: [
        { type: 'InternalIP', address: `192.168.50.${100 + i}` },
        { type: 'InternalIP', address: `fd00:50::${(100 + i).toString(16)}` },
      ],
    },
  }));
  const t0 = performance.now();
  lab.kubectl(['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const created = performance.now() - t0;
  for (;;) {
    const n = lab.routes(a).length;
    if (n >= 2 * PEERS) break;
    if (performance.now() - t0 > 60_000) throw new Error(`${n} routes after 60 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const all = performance.now() - t0;
  const m = lab.http(a, 9808, '/metrics')[1];
  console.log(
    `end to end: ${PEERS} Node objects in one kubectl create (${created.toFixed(0)} ms) → ${2 * PEERS} routes on the node after ${all.toFixed(0)} ms; ` +
      `the agent's last sync ${m.match(/^cnikit_node_agent_last_sync_duration_seconds (\S+)$/m)?.[1]} s`,
  );
  // 3. convergence after a join: a Node object without a pod CIDR (a kubelet registering), then its podCIDR
  // assigned (what the controller-manager's allocator does: one PATCH of spec) → its route on the agent's node,
  // with the 100 peers already there
  const joins: number[] = [];
  const fromRequest: number[] = [];
  for (let i = 0; i < runs; i++) {
    const name = `joiner-${i}`;
    const cidr = `10.246.${i}.0/24`;
    lab.kubectl(
      ['create', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name },
        status: { addresses: [{ type: 'InternalIP', address: `192.168.50.${10 + i}` }] },
      }),
    );
    const before = performance.now();
    lab.kubectl(['patch', 'node', name, '-p', JSON.stringify({ spec: { podCIDR: cidr, podCIDRs: [cidr] } })]);
    const assigned = performance.now();
    for (;;) {
      if (lab.routes(a).some((r) => r.startsWith(cidr))) break;
      if (performance.now() - before > 30_000) throw new Error(`no route to ${cidr} after 30 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
    const seen = performance.now();
    joins.push(seen - assigned);
    fromRequest.push(seen - before);
  }
  console.log(
    `convergence after a join (podCIDR assigned by a PATCH → route on the node, ${PEERS} peers known, ${runs} joins): ` +
      `median ${quantile(joins, 0.5).toFixed(0)} ms, p90 ${quantile(joins, 0.9).toFixed(0)} ms after the PATCH returned ` +
      `(${quantile(fromRequest, 0.5).toFixed(0)} / ${quantile(fromRequest, 0.9).toFixed(0)} ms from the request)`,
  );
} finally {
  await lab.destroy();
  await cp.stop();
  rmSync(dir, { recursive: true, force: true });
}
