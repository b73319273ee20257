/**
 * The lab cluster (docs/lab-cluster.md): a Kubernetes control plane and 1–3 nodes on this machine, each node in
 * namespaces of its own, joined by an underlay bridge in a private network namespace; nothing is created in the
 * machine's network namespace, its sysctls or the roots of its cgroup hierarchies.
 *
 *   npm run cluster -- up [--nodes N] [--name NAME] [--cni conflist|daemonset|none]  start (N = 1–3, default 2); returns once every node is Ready (none: registered, no network)
 *   npm run cluster -- kubectl ARGS…                     kubectl as cluster admin (in the control plane's namespace)
 *   npm run cluster -- exec NODE CMD ARGS…              a command in every namespace of a node
 *   npm run cluster -- status | down
 *
 * From a test: `const c = await startCluster({ nodes: 2 })`, then c.kubectl([...]), c.nodes[i].exec(...), c.stop().
 * Everything the cluster makes is recorded in DIR/state.json as it is made, so `down` (or a failed `up`) removes
 * exactly that: processes by pid and start time, network namespaces, cgroup directories, the scratch directory.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildImage } from '../image.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../k8s-build.mjs';
import { hierarchies, makeSubtree, procsFiles, removeSubtrees } from './cgroups.ts';
import { APISERVER_PORT, CLIENT_EXT, issueCert, kubeconfigFor, startControlPlane } from './control-plane.ts';
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

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..', '..');
export const CLUSTER_CIDR = '10.244.0.0/16';
export const NODE_CIDR_MASK = 24;
/** The underlay: the bridge's address is the nodes' default gateway, the control plane is .10, node i is .10+i. */
export const UNDERLAY_PREFIX = '192.168.240';
export const CNI_PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'];
const BRIDGE = 'br0';

export interface ClusterState {
  name: string;
  dir: string;
  binDir: string;
  underlay: { netns: string; bridge: string; gateway: string; prefix: number };
  controlPlane: { netns: string; ip: string; dir: string; kubeconfig: string; procs: ProcRef[] };
  /** Cgroup directories made for the cluster, top first (one per hierarchy). */
  cgroupDirs: string[];
  nodes: (NodeRecord & { podCIDR?: string })[];
  netnsMade: string[];
}

export interface LabNode {
  name: string;
  /** The `ip netns` name of the node's network namespace. */
  netns: string;
  /** The node's address on the underlay (its InternalIP). */
  ip: string;
  podCIDR: string;
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
  kubectl(args: string[], opts?: { timeout?: number; input?: string }): RunResult;
  stop(): Promise<void>;
  /** Seconds taken by up (set by startCluster). */
  upSeconds?: number;
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
    nodes: s.nodes.map((n) => ({
      name: n.name,
      netns: n.netns,
      ip: n.ip,
      podCIDR: n.podCIDR ?? '',
      pid: n.init?.pid ?? 0,
      dir: n.dir,
      exec: (cmd: string, args: string[], opts?: { timeout?: number; input?: string }) =>
        nodeExec(n, cmd, args, opts),
    })),
    kubectl,
    stop: () => teardown(s),
    upSeconds,
  };
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
      controllers: { clusterCidr: CLUSTER_CIDR, nodeCidrMaskSize: NODE_CIDR_MASK },
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
      const record: NodeRecord & { podCIDR?: string } = {
        name: nodeName,
        ip: `${UNDERLAY_PREFIX}.${10 + i}`,
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
        underlay: { netns: u.netns, bridge: BRIDGE, prefix: u.prefix, gateway: u.gateway },
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
        clusterCidr: CLUSTER_CIDR,
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
        spec: { podCIDR?: string };
        status: { conditions?: { type: string; status: string }[] };
      }[];
    };
    log('waiting for the nodes and their podCIDRs');
    for (;;) {
      check();
      const items = nodeList();
      for (const n of s.nodes) {
        const cidr = items.find((i) => i.metadata.name === n.name)?.spec.podCIDR;
        if (cidr && !n.podCIDR) {
          n.podCIDR = cidr;
          save();
          if (opts.cni === undefined || opts.cni === 'conflist')
            installCni(n.dir, distBin, cidr, CNI_PLUGINS);
        }
      }
      if (s.nodes.every((n) => n.podCIDR)) break;
      await sleep(500);
    }
    // pod routes over the underlay: the control plane and every other node reach a node's pods through it
    for (const n of s.nodes) {
      must('ip', ['-n', s.controlPlane.netns, 'route', 'add', n.podCIDR as string, 'via', n.ip]);
      for (const o of s.nodes) {
        if (o !== n) must('ip', ['-n', o.netns, 'route', 'add', n.podCIDR as string, 'via', n.ip]);
      }
    }
    if (opts.cni === 'daemonset') {
      log('applying deploy/kubernetes/');
      const manifests = ['rbac.yaml', 'configmap.yaml', 'daemonset.yaml'].flatMap((f) => [
        '-f',
        join(ROOT, 'deploy', 'kubernetes', f),
      ]);
      must('ip', [
        'netns',
        'exec',
        s.controlPlane.netns,
        join(binDir, 'kubectl'),
        '--kubeconfig',
        s.controlPlane.kubeconfig,
        'apply',
        ...manifests,
      ]);
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
      const c = await startCluster({
        nodes,
        name,
        dir,
        detached: true,
        cni,
        log: (m) => process.stderr.write(`cluster: ${m}\n`),
      });
      process.stdout.write(
        `lab cluster ${name} up in ${c.upSeconds?.toFixed(1)} s (state in ${dir}):\n` +
          c.nodes.map((n) => `  ${n.name}  ${n.ip}  podCIDR ${n.podCIDR}  netns ${n.netns}\n`).join('') +
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
        'usage: npm run cluster -- up [--nodes N] [--name NAME] | down [--name NAME] | status | kubectl ARGS… | exec NODE CMD…\n',
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
