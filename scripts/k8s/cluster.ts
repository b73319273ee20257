/**
 * The lab cluster (docs/lab-cluster.md): a Kubernetes control plane and 1–3 nodes on this machine, each node in
 * namespaces of its own, joined by an underlay bridge in a private network namespace; nothing is created in the
 * machine's network namespace, its sysctls or the roots of its cgroup hierarchies.
 *
 *   npm run cluster -- up [--nodes N] [--name NAME] [--cni conflist|daemonset|none]  start (N = 1–3, default 2); returns once every node is Ready (none: registered, no network)
 *        [--node-agent host-gw|vxlan|auto] [--dual-stack] [--underlay bridge|routed|mixed] [--outside]   (docs/lab-cluster.md)
 *   npm run cluster -- kubectl ARGS…                     kubectl as cluster admin (in the control plane's namespace)
 *   npm run cluster -- exec NODE CMD ARGS…              a command in every namespace of a node
 *   npm run cluster -- status | down
 *
 * From a test: `const c = await startCluster({ nodes: 2 })`, then c.kubectl([...]), c.nodes[i].exec(...), c.stop().
 * Everything the cluster makes is recorded in DIR/state.json as it is made, so `down` (or a failed `up`) removes
 * exactly that: processes by pid and start time, network namespaces, cgroup directories, the scratch directory.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildImage } from '../image.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../k8s-build.mjs';
import { hierarchies, makeSubtree, procsFiles, removeSubtrees } from './cgroups.ts';
import {
  APISERVER_PORT,
  CLIENT_EXT,
  issueCert,
  kubeconfigFor,
  SERVICE_CIDR,
  startControlPlane,
} from './control-plane.ts';
import { buildBusyboxImage, buildPauseImage } from './images.ts';
import {
  installCni,
  must,
  type NodeConfig,
  type NodeRecord,
  nodeArgv,
  nodeExec,
  nodeTree,
  type RunResult,
  run,
  startKubelet,
  startNodeBase,
  tail,
} from './lab-node.ts';
import { alive, type ProcRef, terminate } from './procs.ts';
import { apiserverOf, kubeletOf, type Restartable } from './restart.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..', '..');
export const CLUSTER_CIDR = '10.244.0.0/16';
export const NODE_CIDR_MASK = 24;
/** The underlay: the bridge's address is the nodes' default gateway, the control plane is .10, node i is .10+i. */
export const UNDERLAY_PREFIX = '192.168.240';
export const CNI_PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'];
const BRIDGE = 'br0';
/** Dual stack (`dualStack: true`): the IPv6 pod CIDR (/64 per node), Service range and underlay prefix. */
export const CLUSTER_CIDR_V6 = 'fd00:10:244::/56';
export const NODE_CIDR_MASK_V6 = 64;
export const SERVICE_CIDR_V6 = 'fd00:10:96::/112';
export const UNDERLAY_PREFIX6 = 'fd00:240::';
/** The "outside" host (`outside: true`): a namespace beyond the underlay's router, not part of the cluster. */
export const OUTSIDE = {
  ip: '203.0.113.2',
  ip6: '2001:db8:113::2',
  gateway: '203.0.113.1',
  gateway6: '2001:db8:113::1',
};

/** Whether node i is alone on a subnet of its own: every node of a routed underlay, node 3 of a mixed one. */
export function ownSubnet(i: number, layout: { routed?: boolean; mixed?: boolean }): boolean {
  return layout.routed === true || (layout.mixed === true && i >= 3);
}

/** Node i's underlay addresses: the shared subnet (bridge), or a subnet of its own (routed: ownSubnet()). */
export function nodeUnderlay(i: number, routed: boolean) {
  const net = routed ? 240 + i : 240;
  return {
    bridge: routed ? `br${i}` : BRIDGE,
    ip: `192.168.${net}.${10 + i}`,
    gateway: `192.168.${net}.1`,
    ip6: routed ? `fd00:${net}::${10 + i}` : `${UNDERLAY_PREFIX6}${10 + i}`,
    gateway6: routed ? `fd00:${net}::1` : `${UNDERLAY_PREFIX6}1`,
  };
}

export interface ClusterState {
  name: string;
  dir: string;
  binDir: string;
  underlay: { netns: string; bridge: string; gateway: string; prefix: number };
  controlPlane: { netns: string; ip: string; dir: string; kubeconfig: string; procs: ProcRef[] };
  /** Cgroup directories made for the cluster, top first (one per hierarchy). */
  cgroupDirs: string[];
  nodes: (NodeRecord & { podCIDR?: string; podCIDRs?: string[] })[];
  netnsMade: string[];
  /** The outside host's namespace and addresses (outside: true). */
  outside?: { netns: string; ip: string; ip6: string };
  dualStack?: boolean;
  /** The underlay is routed (a subnet per node) and the node agent's mode: what a reboot must start again alike. */
  routed?: boolean;
  /** Nodes 1 and 2 on the shared subnet, node 3 on a routed subnet of its own (underlay 'mixed'). */
  mixed?: boolean;
  nodeAgent?: string;
}

export interface LabNode {
  name: string;
  /** The `ip netns` name of the node's network namespace. */
  netns: string;
  /** The node's address on the underlay (its InternalIP). */
  ip: string;
  /** Its IPv6 underlay address (dual stack), '' otherwise. */
  ip6: string;
  podCIDR: string;
  /** spec.podCIDRs (dual stack: the IPv4 and the IPv6 subnet). */
  podCIDRs: string[];
  /** The pid (on the machine) of the node's first process: nsenter -t PID joins the node. */
  pid: number;
  /** The node's scratch tree (its /var/lib/cni is dir/var-lib-cni, and so on: nodeTree()). */
  dir: string;
  /** A command in every namespace of the node. */
  exec(cmd: string, args: string[], opts?: { timeout?: number; input?: string }): RunResult;
}

export interface Cluster {
  name: string;
  dir: string;
  binDir: string;
  nodes: LabNode[];
  controlPlane: { netns: string; ip: string; kubeconfig: string };
  /** The outside host (outside: true): `ip netns exec NETNS …` runs a command there. */
  outside?: { netns: string; ip: string; ip6: string };
  dualStack: boolean;
  kubectl(args: string[], opts?: { timeout?: number; input?: string }): RunResult;
  /**
   * A node "reboot" (rebootNode): every process of the node killed at once, its namespaces gone (with them /run, the
   * pods' netns pins and network namespaces, the tmpfs state), then the node started again on the same disk tree
   * (/var/lib/{cni,kubelet,containerd}, /etc/cni, /opt persist) with containerd, kubelet and kube-proxy.
   */
  rebootNode(name: string, opts?: RebootOptions): Promise<{ downSeconds: number; upSeconds: number }>;
  stop(): Promise<void>;
  /** Seconds taken by up (set by startCluster). */
  upSeconds?: number;
  /** The control plane's kube-apiserver, to stop and start again (./restart.ts). */
  apiserver: Restartable;
  /** A node's kubelet, to stop and start again (./restart.ts). */
  kubelet(node: string): Restartable;
}

export function defaultDir(name: string): string {
  return join(tmpdir(), `cnikit-${name}`);
}

function saveState(s: ClusterState): void {
  const tmp = join(s.dir, '.state.json.tmp');
  writeFileSync(tmp, JSON.stringify(s, null, 2));
  spawnSync('mv', [tmp, join(s.dir, 'state.json')]);
}

export function readState(dir: string): ClusterState {
  return JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as ClusterState;
}

function netnsExists(name: string): boolean {
  return existsSync(join('/run/netns', name));
}

/** Removes everything state records, in reverse order of making; safe to call on a partly made cluster. */
export async function teardown(s: ClusterState): Promise<void> {
  const errors: string[] = [];
  const step = async (what: string, f: () => unknown) => {
    try {
      await f();
    } catch (e) {
      errors.push(`${what}: ${(e as Error).message}`);
    }
  };
  for (const n of s.nodes) {
    // the namespaces' first process: when it ends, the kernel ends every process of the node's PID namespace
    if (n.init) await step(`${n.name} init`, () => terminate([n.init as ProcRef], 0, 'SIGKILL'));
    await step(`${n.name} processes`, () => terminate([...n.procs, ...(n.holder ? [n.holder] : [])], 5000));
  }
  await step('control plane', async () => {
    await terminate(s.controlPlane.procs.slice(1));
    await terminate(s.controlPlane.procs.slice(0, 1));
  });
  for (const ns of [...s.netnsMade].reverse()) {
    if (netnsExists(ns)) await step(`netns ${ns}`, () => must('ip', ['netns', 'del', ns]));
  }
  await step('cgroups', () => removeSubtrees(s.cgroupDirs));
  await step('directory', () => rmSync(s.dir, { recursive: true, force: true }));
  if (errors.length)
    throw new Error(`the lab cluster ${s.name} was not removed completely:\n${errors.join('\n')}`);
}

function handle(s: ClusterState, upSeconds?: number): Cluster {
  const kubectl = (args: string[], opts: { timeout?: number; input?: string } = {}) =>
    run(
      'ip',
      [
        'netns',
        'exec',
        s.controlPlane.netns,
        join(s.binDir, 'kubectl'),
        '--kubeconfig',
        s.controlPlane.kubeconfig,
        ...args,
      ],
      opts,
    );
  return {
    name: s.name,
    dir: s.dir,
    binDir: s.binDir,
    controlPlane: {
      netns: s.controlPlane.netns,
      ip: s.controlPlane.ip,
      kubeconfig: s.controlPlane.kubeconfig,
    },
    ...(s.outside ? { outside: s.outside } : {}),
    dualStack: s.dualStack ?? false,
    nodes: s.nodes.map((n) => ({
      name: n.name,
      netns: n.netns,
      ip: n.ip,
      ip6: n.ip6 ?? '',
      podCIDR: n.podCIDR ?? '',
      podCIDRs: n.podCIDRs ?? (n.podCIDR ? [n.podCIDR] : []),
      // a getter: a reboot gives the node a new first process
      get pid() {
        return n.init?.pid ?? 0;
      },
      dir: n.dir,
      exec: (cmd: string, args: string[], opts?: { timeout?: number; input?: string }) =>
        nodeExec(n, cmd, args, opts),
    })),
    kubectl,
    rebootNode: (name: string, opts?: RebootOptions) => rebootNode(s, name, opts),
    stop: () => teardown(s),
    upSeconds,
    apiserver: apiserverOf(s, () => saveState(s)),
    kubelet: (node: string) => kubeletOf(s, () => saveState(s), node),
  };
}

export interface RebootOptions {
  /** The node's processes outlive this one (as for `up` from the CLI). */
  detached?: boolean;
  log?: (msg: string) => void;
  /**
   * The runtime's own records go too (/var/lib/containerd emptied: a node whose containerd root is not kept, or one
   * re-imaged with /var/lib/cni kept): containerd no longer knows the old sandboxes, so nothing runs their CNI DEL.
   * The images of `up` are imported again.
   */
  loseRuntimeState?: boolean;
}

/**
 * Kills every process of node `name` at once (SIGKILL to the first process of its PID namespace: no process gets
 * to clean up, as in a power cut), drops its `ip netns` pin so its network namespace — the pods' veths, the bridge,
 * the node's iptables — goes, and with its mount namespace the tmpfs on /run (containerd's state, the pods' netns
 * pins, /run/cnikit); what is on the node's disk tree stays. Then starts the node again: namespaces, mounts, the
 * underlay link, containerd (its images are still in /var/lib/containerd), kubelet and kube-proxy, and the routes
 * to the other nodes' podCIDRs. Returns once the new processes run (the Node's Ready condition follows).
 */
export async function rebootNode(
  s: ClusterState,
  name: string,
  opts: RebootOptions = {},
): Promise<{ downSeconds: number; upSeconds: number }> {
  const log = opts.log ?? (() => {});
  const record = s.nodes.find((n) => n.name === name);
  if (!record) throw new Error(`no node ${name}: ${s.nodes.map((n) => n.name).join(', ')}`);
  const t0 = Date.now();
  log(`${name}: power off`);
  if (record.init) await terminate([record.init], 0, 'SIGKILL');
  await terminate([...record.procs, ...(record.holder ? [record.holder] : [])], 5000, 'SIGKILL');
  if (netnsExists(record.netns)) must('ip', ['netns', 'del', record.netns]);
  record.init = undefined;
  record.holder = undefined;
  record.procs = [];
  saveState(s);
  // the kernel removes a network namespace (and the underlay end of the node's veth) once its last user is gone
  for (let i = 0; ; i++) {
    const links = run('ip', ['-n', s.underlay.netns, '-o', 'link', 'show', 'dev', name]);
    if (links.status !== 0) break;
    if (i > 600)
      throw new Error(`the underlay link of ${name} is still there 60 s after its namespace was dropped`);
    await sleep(100);
  }
  const downSeconds = (Date.now() - t0) / 1000;
  const t1 = Date.now();
  log(`${name}: power on`);
  const hs = hierarchies();
  const top = `cnikit-${s.name}`;
  const nu = nodeUnderlay(s.nodes.indexOf(record) + 1, ownSubnet(s.nodes.indexOf(record) + 1, s));
  const c: NodeConfig = {
    record,
    cgroup: `${top}/${name}`,
    hierarchies: hs,
    labexec: record.labexec,
    binDir: s.binDir,
    underlay: {
      netns: s.underlay.netns,
      bridge: nu.bridge,
      prefix: s.underlay.prefix,
      gateway: nu.gateway,
      ...(s.dualStack ? { gateway6: nu.gateway6 } : {}),
    },
    detached: opts.detached ?? false,
    save: () => saveState(s),
  };
  const images: string[] = [];
  if (opts.loseRuntimeState) {
    rmSync(nodeTree(record.dir).varLibContainerd, { recursive: true, force: true });
    const imagesDir = join(s.dir, 'images');
    for (const d of readdirSync(imagesDir))
      for (const f of readdirSync(join(imagesDir, d)))
        if (f.endsWith('.oci.tar')) images.push(join(imagesDir, d, f));
  }
  await startNodeBase(c, images);
  const pki = join(s.controlPlane.dir, 'pki');
  startKubelet(c, {
    kubeletKubeconfig: join(record.dir, 'kubelet.kubeconfig'),
    kubeProxyKubeconfig: join(s.dir, 'kube-proxy.kubeconfig'),
    caFile: join(pki, 'ca.crt'),
    servingCert: join(pki, `kubelet-serving-${name}.crt`),
    servingKey: join(pki, `kubelet-serving-${name}.key`),
    clusterCidr: s.dualStack ? `${CLUSTER_CIDR},${CLUSTER_CIDR_V6}` : CLUSTER_CIDR,
    ...(s.dualStack ? { featureGates: { IPv6DualStack: true } } : {}),
  });
  // the static pod routes of a node (addPodRoutes; with the node agent, the agent puts its own back, and on a
  // routed underlay they are in the router)
  if (!s.nodeAgent && !s.routed && !s.mixed) {
    for (const o of s.nodes) {
      if (o === record) continue;
      for (const cidr of o.podCIDRs ?? (o.podCIDR ? [o.podCIDR] : [])) {
        const via = cidr.includes(':') ? (o.ip6 as string) : o.ip;
        must('ip', ['-n', record.netns, 'route', 'add', cidr, 'via', via]);
      }
    }
  }
  return { downSeconds, upSeconds: (Date.now() - t1) / 1000 };
}

/** A handle on a cluster started by another process (`npm run cluster -- up`). */
export function attachCluster(dir = defaultDir('lab')): Cluster {
  return handle(readState(dir));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ClusterOptions {
  /** 1–3, default 2. */
  nodes?: number;
  /** Names the namespaces (cnikit-NAME-cp, -ul, -n1 …), the cgroups and the default directory; unique per run. */
  name?: string;
  dir?: string;
  /** The processes outlive this one (the CLI); a test leaves it false. */
  detached?: boolean;
  /** dist-bin with cnikit (npm run build). */
  distBin?: string;
  log?: (msg: string) => void;
  readyTimeoutMs?: number;
  /**
   * How cnikit gets onto the nodes: 'conflist' (default) installs dist-bin/cnikit and a bridge + host-local
   * conflist on each node's podCIDR itself; 'daemonset' builds the image (scripts/image.ts) from dist-bin, imports
   * it on every node and applies deploy/kubernetes/ (its install-cni renders the conflist, serve runs warm mode);
   * 'none' installs no CNI at all: up returns once every node is registered with its podCIDR (not Ready: the
   * caller installs a network, as the operator's guide does, and waits for Ready itself).
   */
  cni?: 'conflist' | 'daemonset' | 'none';
  /**
   * The node agent of the DaemonSet (needs cni 'daemonset'): the ConfigMap gets node-agent "on", this
   * node-agent-mode, cluster-cidr (no mtu: install-cni gives the conflist the mode's MTU), and its conflist ipMasq false (the agent
   * masquerades); `up` then adds no pod routes of its own — the agents route every peer's podCIDRs.
   */
  nodeAgent?: 'host-gw' | 'vxlan' | 'auto';
  /**
   * Dual stack: IPv6DualStack on apiserver, controller-manager, kubelet and kube-proxy; cluster CIDR
   * 10.244.0.0/16 + fd00:10:244::/56 (/24 and /64 per node), Services 10.96.0.0/16 + fd00:10:96::/112; each node an
   * IPv6 underlay address too (a second InternalIP), and a host-local range per family in its conflist.
   */
  dualStack?: boolean;
  /**
   * 'bridge' (default): every node on 192.168.240.0/24. 'routed': node i alone on 192.168.(240+i).0/24 (fd00:(240+i)::/64),
   * each subnet a bridge of the underlay namespace, which routes between them (forwarding on): no node is on-link to
   * another (VXLAN's case). The control plane stays on 192.168.240.0/24. 'mixed' (3 nodes, node agent): nodes 1 and 2
   * share 192.168.240.0/24, node 3 is alone on 192.168.243.0/24 behind the router (mode auto's case: host-gw between
   * n1 and n2, VXLAN to n3).
   */
  underlay?: 'bridge' | 'routed' | 'mixed';
  /** An "outside" host (OUTSIDE) beyond the underlay namespace, which routes to it: for masquerade tests. */
  outside?: boolean;
}

/** Static pod routes (no node agent): via each node's address, or on a routed underlay in its router. */
function addPodRoutes(s: ClusterState, routed: boolean): void {
  for (const n of s.nodes) {
    for (const cidr of n.podCIDRs ?? [n.podCIDR as string]) {
      const via = cidr.includes(':') ? (n.ip6 as string) : n.ip;
      if (routed) {
        must('ip', ['-n', s.underlay.netns, 'route', 'add', cidr, 'via', via]);
        continue;
      }
      if (!cidr.includes(':')) must('ip', ['-n', s.controlPlane.netns, 'route', 'add', cidr, 'via', via]);
      for (const o of s.nodes) if (o !== n) must('ip', ['-n', o.netns, 'route', 'add', cidr, 'via', via]);
    }
  }
}

/**
 * The ConfigMap of deploy/kubernetes/ for the node agent and/or dual stack, patched before the DaemonSet starts: the
 * agent's keys, and in the conflist ipMasq false (the agent masquerades) and a host-local range (and default route)
 * per family. Each edit of the conflist text must find what it replaces: a changed configmap.yaml fails here.
 */
function configureDaemonSet(
  kubectl: Cluster['kubectl'],
  o: { nodeAgent?: string; dualStack: boolean; clusterCidr: string },
): void {
  const get = kubectl(['-n', 'kube-system', 'get', 'configmap', 'cnikit-config', '-o', 'json']);
  if (get.status !== 0) throw new Error(`kubectl get configmap cnikit-config: ${get.stderr}`);
  let conflist =
    (JSON.parse(get.stdout) as { data: Record<string, string> }).data['10-cnikit.conflist'] ?? '';
  const edit = (from: string, to: string) => {
    if (!conflist.includes(from))
      throw new Error(`the ConfigMap's conflist has no ${from}: update cluster.ts`);
    conflist = conflist.replace(from, to);
  };
  const data: Record<string, string> = {};
  if (o.nodeAgent) {
    edit('"ipMasq": true', '"ipMasq": false');
    Object.assign(data, {
      'node-agent': 'on',
      'node-agent-mode': o.nodeAgent,
      'cluster-cidr': o.clusterCidr,
    });
  }
  if (o.dualStack) {
    // install-cni's variables (the node's spec.podCIDRs by family)
    const v = (n: string) => `\${${n}}`;
    edit(
      `"ranges": [[{ "subnet": "${v('POD_CIDR')}" }]]`,
      `"ranges": [[{ "subnet": "${v('POD_CIDR_V4')}" }], [{ "subnet": "${v('POD_CIDR_V6')}" }]]`,
    );
    edit('"routes": [{ "dst": "0.0.0.0/0" }]', '"routes": [{ "dst": "0.0.0.0/0" }, { "dst": "::/0" }]');
  }
  data['10-cnikit.conflist'] = conflist;
  const r = kubectl([
    '-n',
    'kube-system',
    'patch',
    'configmap',
    'cnikit-config',
    '--type',
    'merge',
    '-p',
    JSON.stringify({ data }),
  ]);
  if (r.status !== 0) throw new Error(`kubectl patch configmap cnikit-config: ${r.stderr}`);
}

export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const t0 = Date.now();
  const count = opts.nodes ?? 2;
  if (!Number.isInteger(count) || count < 1 || count > 3)
    throw new Error(`--nodes must be 1, 2 or 3, not ${count}`);
  const name = opts.name ?? `lab${process.pid}`;
  if (!/^[a-z0-9]{1,12}$/.test(name))
    throw new Error(`the cluster name must be 1–12 of [a-z0-9], not ${name}`);
  const dir = opts.dir ?? defaultDir(name);
  const log = opts.log ?? (() => {});
  const distBin = opts.distBin ?? join(ROOT, 'dist-bin');
  if (!existsSync(join(distBin, 'cnikit')))
    throw new Error(`${distBin}/cnikit is missing: run npm run build`);
  if (existsSync(join(dir, 'state.json'))) {
    throw new Error(`a lab cluster is recorded in ${dir}: remove it first (npm run cluster -- down)`);
  }
  const { dir: cacheDir } = await k8sBinaries({ log });
  const binDir = join(cacheDir, 'bin');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const cpIp = `${UNDERLAY_PREFIX}.10`;
  const routed = opts.underlay === 'routed';
  const mixed = opts.underlay === 'mixed';
  const layout = { routed, mixed };
  const dual = opts.dualStack === true;
  if (opts.nodeAgent && opts.cni !== 'daemonset')
    throw new Error('the node agent comes with the DaemonSet: nodeAgent needs cni daemonset');
  if (opts.nodeAgent && !['host-gw', 'vxlan', 'auto'].includes(opts.nodeAgent))
    throw new Error(`the node agent's mode is host-gw, vxlan or auto, not ${opts.nodeAgent}`);
  if (opts.underlay && !['bridge', 'routed', 'mixed'].includes(opts.underlay))
    throw new Error(`the underlay is bridge, routed or mixed, not ${opts.underlay}`);
  if (mixed && (count !== 3 || !opts.nodeAgent))
    throw new Error('the mixed underlay is for 3 nodes with the node agent (it routes between the subnets)');
  const clusterCidr = dual ? `${CLUSTER_CIDR},${CLUSTER_CIDR_V6}` : CLUSTER_CIDR;
  const s: ClusterState = {
    name,
    dir,
    binDir,
    underlay: { netns: `cnikit-${name}-ul`, bridge: BRIDGE, gateway: `${UNDERLAY_PREFIX}.1`, prefix: 24 },
    controlPlane: {
      netns: `cnikit-${name}-cp`,
      ip: cpIp,
      dir: join(dir, 'control-plane'),
      kubeconfig: join(dir, 'control-plane', 'admin.kubeconfig'),
      procs: [],
    },
    cgroupDirs: [],
    nodes: [],
    netnsMade: [],
    ...(dual ? { dualStack: true } : {}),
    ...(routed ? { routed: true } : {}),
    ...(mixed ? { mixed: true } : {}),
    ...(opts.nodeAgent ? { nodeAgent: opts.nodeAgent } : {}),
  };
  const save = () => saveState(s);
  save();
  try {
    log('images and helpers');
    const labexec = join(dir, 'labexec');
    must('cc', ['-O2', '-o', labexec, join(HERE, 'labexec.c')]);
    const images = [
      buildPauseImage(join(dir, 'images', 'pause'), join(ROOT, 'test-netns', 'k8s', 'pause.c')),
      buildBusyboxImage(join(dir, 'images', 'busybox')),
    ];
    if (opts.cni === 'daemonset') {
      const work = join(dir, 'images', 'cnikit');
      mkdirSync(work, { recursive: true });
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      images.push(
        buildImage({
          arch: { name: 'amd64', cc: 'cc', objdump: 'objdump' },
          exe: join(distBin, 'cnikit'),
          client: join(distBin, 'warm', 'cnikit-client'),
          license: join(ROOT, 'LICENSE'),
          version,
          epoch: 1_764_115_200,
          work,
          out: work,
          level: 1,
        }).file,
      );
    }
    log('underlay');
    const u = s.underlay;
    s.netnsMade.push(u.netns);
    save();
    must('ip', ['netns', 'add', u.netns]);
    for (const args of [
      ['link', 'set', 'lo', 'up'],
      ['link', 'add', BRIDGE, 'type', 'bridge'],
      ['addr', 'add', `${u.gateway}/${u.prefix}`, 'dev', BRIDGE],
      ['link', 'set', BRIDGE, 'up'],
    ]) {
      must('ip', ['-n', u.netns, ...args]);
    }
    if (dual) must('ip', ['-n', u.netns, 'addr', 'add', `${UNDERLAY_PREFIX6}1/64`, 'dev', BRIDGE, 'nodad']);
    if (routed || mixed || opts.outside) {
      // the underlay namespace is the router between the node subnets and to the outside host
      must('ip', ['netns', 'exec', u.netns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
      must('ip', ['netns', 'exec', u.netns, 'sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
    }
    if (routed || mixed) {
      for (let i = 1; i <= count; i++) {
        if (!ownSubnet(i, layout)) continue;
        const nu = nodeUnderlay(i, true);
        for (const args of [
          ['link', 'add', nu.bridge, 'type', 'bridge'],
          ['addr', 'add', `${nu.gateway}/24`, 'dev', nu.bridge],
          ...(dual ? [['addr', 'add', `${nu.gateway6}/64`, 'dev', nu.bridge, 'nodad']] : []),
          ['link', 'set', nu.bridge, 'up'],
        ]) {
          must('ip', ['-n', u.netns, ...args]);
        }
      }
    }
    if (opts.outside) {
      const out = { netns: `cnikit-${name}-out`, ip: OUTSIDE.ip, ip6: OUTSIDE.ip6 };
      s.outside = out;
      s.netnsMade.push(out.netns);
      save();
      must('ip', ['netns', 'add', out.netns]);
      must('ip', [
        '-n',
        u.netns,
        'link',
        'add',
        'out',
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        out.netns,
      ]);
      for (const args of [
        ['addr', 'add', `${OUTSIDE.gateway}/24`, 'dev', 'out'],
        ['addr', 'add', `${OUTSIDE.gateway6}/64`, 'dev', 'out', 'nodad'],
        ['link', 'set', 'out', 'up'],
      ]) {
        must('ip', ['-n', u.netns, ...args]);
      }
      for (const args of [
        ['link', 'set', 'lo', 'up'],
        ['addr', 'add', `${OUTSIDE.ip}/24`, 'dev', 'eth0'],
        ['addr', 'add', `${OUTSIDE.ip6}/64`, 'dev', 'eth0', 'nodad'],
        ['link', 'set', 'eth0', 'up'],
        ['route', 'add', 'default', 'via', OUTSIDE.gateway],
        ['-6', 'route', 'add', 'default', 'via', OUTSIDE.gateway6],
      ]) {
        must('ip', ['-n', out.netns, ...args]);
      }
    }
    const hs = hierarchies();
    const top = `cnikit-${name}`;
    s.cgroupDirs = makeSubtree(top, hs).filter((d) => d.endsWith(`/${top}`));
    save();
    log('control plane');
    s.netnsMade.push(s.controlPlane.netns);
    save();
    const cp = await startControlPlane({
      binDir,
      dir: s.controlPlane.dir,
      netns: s.controlPlane.netns,
      advertiseAddress: cpIp,
      controllers: {
        clusterCidr,
        nodeCidrMaskSize: NODE_CIDR_MASK,
        ...(dual
          ? { nodeCidrMaskSizeV6: NODE_CIDR_MASK_V6, args: ['--feature-gates=IPv6DualStack=true'] }
          : {}),
      },
      ...(dual
        ? {
            serviceCidr: `${SERVICE_CIDR},${SERVICE_CIDR_V6}`,
            apiserverArgs: ['--feature-gates=IPv6DualStack=true'],
          }
        : {}),
      detached: opts.detached,
      onProcess: (p) => {
        s.controlPlane.procs.push(p);
        save();
      },
      setupNetns: (netns) => {
        must('ip', [
          '-n',
          u.netns,
          'link',
          'add',
          'cp',
          'type',
          'veth',
          'peer',
          'name',
          'eth0',
          'netns',
          netns,
        ]);
        must('ip', ['-n', u.netns, 'link', 'set', 'cp', 'master', BRIDGE, 'up']);
        must('ip', ['-n', netns, 'addr', 'add', `${cpIp}/${u.prefix}`, 'dev', 'eth0']);
        must('ip', ['-n', netns, 'link', 'set', 'eth0', 'up']);
        // the nodes of a routed underlay are behind the underlay's router
        if (routed || mixed) must('ip', ['-n', netns, 'route', 'add', 'default', 'via', u.gateway]);
      },
    });
    const pki = cp.pki;
    const server = `https://${cpIp}:${APISERVER_PORT}`;
    issueCert(pki, 'kube-proxy', '/CN=system:kube-proxy', CLIENT_EXT);
    const kubeProxyKubeconfig = join(dir, 'kube-proxy.kubeconfig');
    writeFileSync(
      kubeProxyKubeconfig,
      kubeconfigFor(pki, server, 'kube-proxy', 'kube-proxy.crt', 'kube-proxy.key'),
    );
    for (let i = 1; i <= count; i++) {
      const nodeName = `n${i}`;
      const nu = nodeUnderlay(i, ownSubnet(i, layout));
      const record: NodeRecord & { podCIDR?: string; podCIDRs?: string[] } = {
        name: nodeName,
        ip: nu.ip,
        ...(dual ? { ip6: nu.ip6 } : {}),
        netns: `cnikit-${name}-${nodeName}`,
        dir: join(dir, 'nodes', nodeName),
        procs: [],
        labexec,
        cgroupProcs: procsFiles(`${top}/${nodeName}`, hs),
      };
      s.nodes.push(record);
      s.netnsMade.push(record.netns);
      save();
      log(`node ${nodeName}`);
      makeSubtree(`${top}/${nodeName}`, hs);
      const c: NodeConfig = {
        record,
        cgroup: `${top}/${nodeName}`,
        hierarchies: hs,
        labexec,
        binDir,
        underlay: {
          netns: u.netns,
          bridge: nu.bridge,
          prefix: u.prefix,
          gateway: nu.gateway,
          ...(dual ? { gateway6: nu.gateway6 } : {}),
        },
        detached: opts.detached ?? false,
        save,
      };
      await startNodeBase(c, images);
      issueCert(pki, `kubelet-${nodeName}`, `/O=system:nodes/CN=system:node:${nodeName}`, CLIENT_EXT);
      issueCert(pki, `kubelet-serving-${nodeName}`, `/O=system:nodes/CN=system:node:${nodeName}`, [
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth',
        `subjectAltName=IP:${record.ip},DNS:${nodeName}`,
      ]);
      const kubeletKubeconfig = join(record.dir, 'kubelet.kubeconfig');
      writeFileSync(
        kubeletKubeconfig,
        kubeconfigFor(
          pki,
          server,
          `system:node:${nodeName}`,
          `kubelet-${nodeName}.crt`,
          `kubelet-${nodeName}.key`,
        ),
      );
      startKubelet(c, {
        kubeletKubeconfig,
        kubeProxyKubeconfig,
        caFile: join(pki, 'ca.crt'),
        servingCert: join(pki, `kubelet-serving-${nodeName}.crt`),
        servingKey: join(pki, `kubelet-serving-${nodeName}.key`),
        clusterCidr,
        ...(dual ? { featureGates: { IPv6DualStack: true } } : {}),
      });
    }
    const kubectl = handle(s).kubectl;
    const deadline = Date.now() + (opts.readyTimeoutMs ?? 240_000);
    const check = () => {
      for (const n of s.nodes) {
        for (const p of n.procs) {
          if (!alive(p)) {
            const logs = nodeTree(n.dir).logs;
            throw new Error(
              `a process of node ${n.name} exited:\n${['containerd', 'kubelet', 'kube-proxy']
                .map((f) => `--- ${f}\n${tail(join(logs, `${f}.log`), 12)}`)
                .join('\n')}`,
            );
          }
        }
      }
      if (Date.now() > deadline) {
        throw new Error(
          `the nodes are not Ready after ${opts.readyTimeoutMs ?? 240_000} ms:\n${kubectl(['get', 'nodes', '-o', 'wide']).stdout}\n${s.nodes
            .map((n) => `--- ${n.name} kubelet\n${tail(join(nodeTree(n.dir).logs, 'kubelet.log'), 15)}`)
            .join('\n')}`,
        );
      }
    };
    const nodeList = () => {
      const r = kubectl(['get', 'nodes', '-o', 'json']);
      if (r.status !== 0) return [];
      return JSON.parse(r.stdout).items as {
        metadata: { name: string };
        spec: { podCIDR?: string; podCIDRs?: string[] };
        status: { conditions?: { type: string; status: string }[] };
      }[];
    };
    log('waiting for the nodes and their podCIDRs');
    for (;;) {
      check();
      const items = nodeList();
      for (const n of s.nodes) {
        const spec = items.find((i) => i.metadata.name === n.name)?.spec;
        const cidr = spec?.podCIDR;
        const cidrs = spec?.podCIDRs ?? (cidr ? [cidr] : []);
        if (cidr && !n.podCIDR && (!dual || cidrs.length === 2)) {
          n.podCIDR = cidr;
          n.podCIDRs = cidrs;
          save();
          if (opts.cni === undefined || opts.cni === 'conflist')
            installCni(
              n.dir,
              distBin,
              cidr,
              CNI_PLUGINS,
              cidrs.find((c) => c.includes(':')),
            );
        }
      }
      if (s.nodes.every((n) => n.podCIDR)) break;
      await sleep(500);
    }
    // pod routes over the underlay: the control plane and every other node reach a node's pods through it (on a
    // routed underlay: its router); with the node agent, the agents route and up adds none
    if (!opts.nodeAgent) addPodRoutes(s, routed);
    if (opts.cni === 'daemonset') {
      log('applying deploy/kubernetes/');
      const apply = (files: string[]) =>
        must('ip', [
          'netns',
          'exec',
          s.controlPlane.netns,
          join(binDir, 'kubectl'),
          '--kubeconfig',
          s.controlPlane.kubeconfig,
          'apply',
          ...files.flatMap((f) => ['-f', join(ROOT, 'deploy', 'kubernetes', f)]),
        ]);
      if (opts.nodeAgent || dual) {
        apply(['rbac.yaml', 'configmap.yaml']);
        configureDaemonSet(handle(s).kubectl, {
          ...(opts.nodeAgent ? { nodeAgent: opts.nodeAgent } : {}),
          dualStack: dual,
          clusterCidr,
        });
        apply(['daemonset.yaml']);
      } else {
        apply(['rbac.yaml', 'configmap.yaml', 'daemonset.yaml']);
      }
    }
    log('waiting for Ready');
    for (; opts.cni !== 'none'; ) {
      check();
      const items = nodeList();
      const ready = (n: string) =>
        items
          .find((i) => i.metadata.name === n)
          ?.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      if (s.nodes.every((n) => ready(n.name))) break;
      await sleep(500);
    }
    // pods of the default namespace need its service account (made by the controller-manager)
    for (;;) {
      check();
      if (kubectl(['get', 'serviceaccount', 'default', '-o', 'name']).status === 0) break;
      await sleep(500);
    }
    return handle(s, (Date.now() - t0) / 1000);
  } catch (e) {
    await teardown(s).catch((t) => {
      (e as Error).message += `\n${(t as Error).message}`;
    });
    throw e;
  }
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const opt = (flag: string) => {
    const i = rest.indexOf(flag);
    if (i < 0) return undefined;
    const v = rest[i + 1];
    rest.splice(i, 2);
    return v;
  };
  // kubectl and exec pass their arguments on untouched: they name the cluster by CNIKIT_LAB_NAME
  const fallback = process.env.CNIKIT_LAB_NAME || 'lab';
  const name = cmd === 'up' || cmd === 'down' || cmd === 'status' ? (opt('--name') ?? fallback) : fallback;
  const dir = defaultDir(name);
  switch (cmd) {
    case 'up': {
      const nodes = Number(opt('--nodes') ?? '2');
      const cni = opt('--cni') ?? 'conflist';
      if (cni !== 'conflist' && cni !== 'daemonset' && cni !== 'none')
        throw new Error(`--cni is conflist, daemonset or none, not ${cni}`);
      const flag = (f: string) => {
        const i = rest.indexOf(f);
        if (i >= 0) rest.splice(i, 1);
        return i >= 0;
      };
      const nodeAgent = opt('--node-agent') as ClusterOptions['nodeAgent'];
      const underlay = opt('--underlay') as ClusterOptions['underlay'];
      const c = await startCluster({
        nodes,
        name,
        dir,
        detached: true,
        cni: nodeAgent ? 'daemonset' : cni,
        ...(nodeAgent ? { nodeAgent } : {}),
        ...(underlay ? { underlay } : {}),
        dualStack: flag('--dual-stack'),
        outside: flag('--outside'),
        log: (m) => process.stderr.write(`cluster: ${m}\n`),
      });
      process.stdout.write(
        `lab cluster ${name} up in ${c.upSeconds?.toFixed(1)} s (state in ${dir}):\n` +
          c.nodes
            .map(
              (n) =>
                `  ${n.name}  ${[n.ip, n.ip6].filter(Boolean).join(' ')}  podCIDRs ${n.podCIDRs.join(',')}  netns ${n.netns}\n`,
            )
            .join('') +
          (c.outside ? `  outside  ${c.outside.ip} ${c.outside.ip6}  netns ${c.outside.netns}\n` : '') +
          'npm run cluster -- kubectl get nodes -o wide; npm run cluster -- down\n',
      );
      return 0;
    }
    case 'down': {
      if (!existsSync(join(dir, 'state.json'))) {
        process.stderr.write(`no lab cluster recorded in ${dir}\n`);
        return 0;
      }
      const t0 = Date.now();
      await teardown(readState(dir));
      process.stdout.write(`lab cluster ${name} removed in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
      return 0;
    }
    case 'status': {
      if (!existsSync(join(dir, 'state.json'))) {
        process.stdout.write(`no lab cluster recorded in ${dir}\n`);
        return 1;
      }
      const r = attachCluster(dir).kubectl(['get', 'nodes', '-o', 'wide']);
      process.stdout.write(r.stdout + r.stderr);
      return r.status ?? 1;
    }
    case 'kubectl':
    case 'exec': {
      const s = readState(dir);
      const args =
        cmd === 'kubectl'
          ? [
              'netns',
              'exec',
              s.controlPlane.netns,
              join(s.binDir, 'kubectl'),
              '--kubeconfig',
              s.controlPlane.kubeconfig,
              ...rest,
            ]
          : (() => {
              const n = s.nodes.find((x) => x.name === rest[0]);
              if (!n?.init) throw new Error(`no node ${rest[0]}: ${s.nodes.map((x) => x.name).join(', ')}`);
              return nodeArgv(n, rest[1] ?? 'sh', rest.slice(2));
            })();
      const [exe = '', ...argv] = cmd === 'kubectl' ? ['ip', ...args] : args;
      const r = spawnSync(exe, argv, { stdio: 'inherit' });
      return r.status ?? 1;
    }
    default:
      process.stderr.write(
        'usage: npm run cluster -- up [--nodes N] [--name NAME] [--cni conflist|daemonset] [--node-agent host-gw|vxlan|auto] [--dual-stack] [--underlay bridge|routed|mixed] [--outside] | down [--name NAME] | status | kubectl ARGS… | exec NODE CMD…\n',
      );
      return 2;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`cluster: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
