/**
 * One node of the lab cluster (docs/lab-cluster.md). A process `unshare --cgroup --net --mount --pid --uts --ipc
 * --fork --mount-proc sleep infinity`, started inside the node's cgroup subtree (scripts/k8s/labexec.c), holds the
 * node's namespaces; its network namespace is pinned as `ip netns` NAME. In its mount namespace: a fresh sysfs and
 * cgroup mounts (the cgroup namespace makes the node's subtree their root), a tmpfs on /run, the node's own
 * /var/lib/{cni,kubelet,containerd}, /var/log, /etc/cni and /opt bound from its scratch tree, and the six kernel
 * knobs kubelet checks under --protect-kernel-defaults bound over /proc/sys as files holding the values it wants.
 * containerd, kubelet and kube-proxy are started in all of those namespaces, so ending the namespace's first
 * process ends every process of the node.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { type Hierarchy, procsFiles } from './cgroups.ts';
import { containerdConfig } from './containerd.ts';
import { SANDBOX_IMAGE } from './images.ts';
import { alive, type ProcRef, procRef } from './procs.ts';

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The values kubelet wants (pkg/kubelet/cm setupKernelTunables), bound over these /proc/sys files. */
export const KERNEL_DEFAULTS: Record<string, string> = {
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};

export const CONTAINERD_SOCKET = '/run/containerd/containerd.sock';

export function run(cmd: string, args: string[], opts: { timeout?: number; input?: string } = {}): RunResult {
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    timeout: opts.timeout ?? 60_000,
    input: opts.input,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function must(cmd: string, args: string[], opts: { timeout?: number; input?: string } = {}): string {
  const r = run(cmd, args, opts);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a node is made of, as recorded in the cluster's state file (enough for another process to remove it). */
export interface NodeRecord {
  name: string;
  ip: string;
  /** The node's IPv6 underlay address (dual-stack clusters): a second InternalIP. */
  ip6?: string;
  /** The `ip netns` name pinning the node's network namespace. */
  netns: string;
  dir: string;
  /** The unshare process and the namespaces' first process (pid 1 inside). */
  holder?: ProcRef;
  init?: ProcRef;
  /** The nsenter processes that started containerd, kubelet and kube-proxy. */
  procs: ProcRef[];
  /** scripts/k8s/labexec.c compiled, and the node cgroup's cgroup.procs files it joins. */
  labexec: string;
  cgroupProcs: string[];
}

export interface NodeConfig {
  record: NodeRecord;
  /** The node's cgroup, relative to this process's cgroup in every hierarchy. */
  cgroup: string;
  hierarchies: Hierarchy[];
  labexec: string;
  binDir: string;
  /** The underlay: its namespace, its bridge, the node's prefix length and gateway (and IPv6 gateway with ip6). */
  underlay: { netns: string; bridge: string; prefix: number; gateway: string; gateway6?: string };
  detached: boolean;
  /** Saves the record (called after every resource made, so a failure or `down` finds it). */
  save: () => void;
}

/** The node's filesystem tree, seen from the machine. */
export function nodeTree(dir: string) {
  return {
    varLibCni: join(dir, 'var-lib-cni'),
    varLibKubelet: join(dir, 'var-lib-kubelet'),
    varLibContainerd: join(dir, 'var-lib-containerd'),
    varLog: join(dir, 'var-log'),
    etcCni: join(dir, 'etc-cni'),
    confDir: join(dir, 'etc-cni', 'net.d'),
    opt: join(dir, 'opt'),
    cniBin: join(dir, 'opt', 'cni', 'bin'),
    sysctl: join(dir, 'sysctl'),
    logs: join(dir, 'logs'),
    etc: join(dir, 'etc'),
  };
}

/** The argument vector running cmd in the node's cgroup and every one of its namespaces. */
export function nodeArgv(r: NodeRecord, cmd: string, args: string[]): string[] {
  if (!r.init) throw new Error(`${r.name} has no namespaces`);
  return [
    r.labexec,
    ...r.cgroupProcs,
    '--',
    'nsenter',
    '-t',
    String(r.init.pid),
    '-n',
    '-m',
    '-p',
    '-C',
    '-u',
    '-i',
    '--',
    cmd,
    ...args,
  ];
}

/** Runs a command on the node: in its cgroup subtree and all of its namespaces. */
export function nodeExec(
  r: NodeRecord,
  cmd: string,
  args: string[],
  opts: { timeout?: number; input?: string } = {},
) {
  const [exe = '', ...argv] = nodeArgv(r, cmd, args);
  return run(exe, argv, opts);
}

/** Namespaces, mounts, the underlay link and sysctl files; then containerd (ready, images imported). */
export async function startNodeBase(c: NodeConfig, images: string[]): Promise<void> {
  const r = c.record;
  const t = nodeTree(r.dir);
  for (const d of [
    t.varLibCni,
    t.varLibKubelet,
    t.varLibContainerd,
    t.varLog,
    t.confDir,
    t.cniBin,
    t.sysctl,
    t.logs,
    t.etc,
  ]) {
    mkdirSync(d, { recursive: true });
  }
  const procs = procsFiles(c.cgroup, c.hierarchies);
  const holder = spawn(
    c.labexec,
    [
      ...procs,
      '--',
      'unshare',
      '--cgroup',
      '--net',
      '--mount',
      '--pid',
      '--uts',
      '--ipc',
      '--fork',
      '--mount-proc',
      '--propagation',
      'private',
      'sleep',
      'infinity',
    ],
    { stdio: 'ignore', detached: c.detached },
  );
  if (c.detached) holder.unref();
  if (!holder.pid) throw new Error('the namespace holder did not start');
  r.holder = procRef(holder.pid);
  c.save();
  for (let i = 0; !r.init; i++) {
    if (!alive(r.holder) || i > 400) throw new Error(`the namespace holder of ${r.name} did not start`);
    try {
      const child = readFileSync(`/proc/${holder.pid}/task/${holder.pid}/children`, 'utf8').trim();
      if (child && readFileSync(`/proc/${child}/comm`, 'utf8').trim() === 'sleep') {
        r.init = procRef(Number(child));
      }
    } catch {
      // not yet forked
    }
    if (!r.init) await sleep(10);
  }
  c.save();
  const init = r.init;
  const pid = String(init.pid);
  must('ip', ['netns', 'attach', r.netns, pid]);
  c.save();
  const inNs = (cmd: string, args: string[]) =>
    must('nsenter', ['-t', pid, '-n', '-m', '-C', '-u', '--', cmd, ...args]);
  inNs('hostname', [r.name]);
  // the node's sysfs (its own links under /sys/class/net) and its cgroup view
  inNs('mount', ['-t', 'sysfs', 'sysfs', '/sys']);
  inNs('mount', ['-t', 'tmpfs', '-o', 'mode=755', 'cgroup', '/sys/fs/cgroup']);
  for (const h of c.hierarchies) {
    inNs('mkdir', ['-p', h.mount]);
    if (h.fstype === 'cgroup2') inNs('mount', ['-t', 'cgroup2', 'cgroup2', h.mount]);
    else inNs('mount', ['-t', 'cgroup', '-o', h.options, 'cgroup', h.mount]);
  }
  inNs('mount', ['-t', 'tmpfs', '-o', 'mode=755', 'run', '/run']);
  inNs('mount', ['-t', 'tmpfs', '-o', 'mode=755', 'var-lib', '/var/lib']);
  for (const [src, dst] of [
    [t.varLibCni, '/var/lib/cni'],
    [t.varLibKubelet, '/var/lib/kubelet'],
    [t.varLibContainerd, '/var/lib/containerd'],
  ] as const) {
    inNs('mkdir', [dst]);
    inNs('mount', ['--bind', src, dst]);
  }
  inNs('mount', ['--bind', t.varLog, '/var/log']);
  inNs('mount', ['--bind', t.etcCni, '/etc/cni']);
  inNs('mount', ['--bind', t.opt, '/opt']);
  for (const [knob, value] of Object.entries(KERNEL_DEFAULTS)) {
    const f = join(t.sysctl, knob.replaceAll('/', '.'));
    writeFileSync(f, `${value}\n`);
    inNs('mount', ['--bind', f, `/proc/sys/${knob}`]);
  }
  // the node's link to the underlay
  const u = c.underlay;
  must('ip', [
    '-n',
    u.netns,
    'link',
    'add',
    r.name,
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    r.netns,
  ]);
  must('ip', ['-n', u.netns, 'link', 'set', r.name, 'master', u.bridge, 'up']);
  for (const args of [
    ['link', 'set', 'lo', 'up'],
    ['addr', 'add', `${r.ip}/${u.prefix}`, 'dev', 'eth0'],
    ['link', 'set', 'eth0', 'up'],
    ['route', 'add', 'default', 'via', u.gateway],
    ...(r.ip6 && u.gateway6
      ? [
          ['addr', 'add', `${r.ip6}/64`, 'dev', 'eth0', 'nodad'],
          ['-6', 'route', 'add', 'default', 'via', u.gateway6],
        ]
      : []),
  ]) {
    must('ip', ['-n', r.netns, ...args]);
  }
  // a node routes its pods' traffic (the node's namespace, not the machine's)
  must('ip', ['netns', 'exec', r.netns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  if (r.ip6) must('ip', ['netns', 'exec', r.netns, 'sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
  const hosts = join(t.etc, 'hosts');
  writeFileSync(hosts, `127.0.0.1 localhost\n${r.ip} ${r.name}\n`);
  inNs('mount', ['--bind', hosts, '/etc/hosts']);

  const config = join(r.dir, 'containerd.toml');
  writeFileSync(
    config,
    containerdConfig({
      root: '/var/lib/containerd',
      state: '/run/containerd',
      socket: CONTAINERD_SOCKET,
      binDir: '/opt/cni/bin',
      confDir: '/etc/cni/net.d',
    }),
  );
  startInNode(c, 'containerd', 'containerd', ['--config', config]);
  for (let i = 0; ; i++) {
    const v = nodeExec(r, 'ctr', ['--address', CONTAINERD_SOCKET, 'version'], { timeout: 10_000 });
    if (v.status === 0) break;
    if (i > 300)
      throw new Error(`containerd of ${r.name} did not start:\n${tail(join(t.logs, 'containerd.log'))}`);
    await sleep(100);
  }
  for (const archive of images) {
    const out = nodeExec(
      r,
      'ctr',
      ['--address', CONTAINERD_SOCKET, '--namespace', 'k8s.io', 'images', 'import', archive],
      { timeout: 300_000 },
    );
    if (out.status !== 0) throw new Error(`ctr images import ${archive} on ${r.name}: ${out.stderr}`);
  }
}

export function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** Starts a long-running process of the node (log in the node's logs/NAME.log) and records it. */
export function startInNode(c: NodeConfig, name: string, cmd: string, args: string[]): ProcRef {
  const r = c.record;
  if (!r.init) throw new Error(`${r.name} has no namespaces`);
  const out = openSync(join(nodeTree(r.dir).logs, `${name}.log`), 'a');
  const [exe = '', ...argv] = nodeArgv(r, cmd, args);
  const p = spawn(exe, argv, { stdio: ['ignore', out, out], detached: c.detached });
  closeSync(out);
  if (c.detached) p.unref();
  if (!p.pid) throw new Error(`${name} of ${r.name} did not start`);
  const ref = procRef(p.pid);
  r.procs.push(ref);
  c.save();
  return ref;
}

/** Node credentials and configuration files made by the cluster, and the API server's address. */
export interface NodeAuth {
  kubeletKubeconfig: string;
  kubeProxyKubeconfig: string;
  caFile: string;
  servingCert: string;
  servingKey: string;
  /** The cluster's pod CIDR (dual stack: v4,v6). */
  clusterCidr: string;
  /** Feature gates of kubelet and kube-proxy (dual stack: IPv6DualStack). */
  featureGates?: Record<string, boolean>;
}

/** kubelet (CRI to the node's containerd, cgroupfs, no QoS cgroups) and kube-proxy (iptables) on the node. */
export function startKubelet(c: NodeConfig, auth: NodeAuth): void {
  const r = c.record;
  const config = join(r.dir, 'kubelet.json');
  writeFileSync(
    config,
    JSON.stringify(
      {
        kind: 'KubeletConfiguration',
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        address: r.ip,
        port: 10250,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        healthzPort: 10248,
        tlsCertFile: auth.servingCert,
        tlsPrivateKeyFile: auth.servingKey,
        authentication: {
          anonymous: { enabled: false },
          webhook: { enabled: true },
          x509: { clientCAFile: auth.caFile },
        },
        authorization: { mode: 'Webhook' },
        cgroupDriver: 'cgroupfs',
        cgroupsPerQOS: false,
        enforceNodeAllocatable: [],
        protectKernelDefaults: true,
        failSwapOn: false,
        clusterDomain: 'cluster.local',
        resolvConf: '',
        makeIPTablesUtilChains: true,
        serializeImagePulls: false,
        evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        nodeStatusUpdateFrequency: '4s',
        syncFrequency: '10s',
        fileCheckFrequency: '10s',
        volumeStatsAggPeriod: '0s',
        ...(auth.featureGates ? { featureGates: auth.featureGates } : {}),
      },
      null,
      2,
    ),
  );
  startInNode(c, 'kubelet', join(c.binDir, 'kubelet'), [
    `--config=${config}`,
    `--kubeconfig=${auth.kubeletKubeconfig}`,
    '--container-runtime=remote',
    `--container-runtime-endpoint=unix://${CONTAINERD_SOCKET}`,
    `--image-service-endpoint=unix://${CONTAINERD_SOCKET}`,
    `--pod-infra-container-image=${SANDBOX_IMAGE}`,
    `--hostname-override=${r.name}`,
    `--node-ip=${r.ip6 ? `${r.ip},${r.ip6}` : r.ip}`,
    '--v=2',
  ]);
  startInNode(c, 'kube-proxy', join(c.binDir, 'kube-proxy'), [
    `--kubeconfig=${auth.kubeProxyKubeconfig}`,
    '--proxy-mode=iptables',
    `--hostname-override=${r.name}`,
    `--bind-address=${r.ip}`,
    `--cluster-cidr=${auth.clusterCidr}`,
    ...(auth.featureGates
      ? [
          `--feature-gates=${Object.entries(auth.featureGates)
            .map(([k, v]) => `${k}=${v}`)
            .join(',')}`,
        ]
      : []),
    '--metrics-bind-address=127.0.0.1:10249',
    '--healthz-bind-address=127.0.0.1:10256',
    // the conntrack table size and timeouts are the machine's (or per namespace): leave them
    '--conntrack-max-per-core=0',
    '--conntrack-min=0',
    '--conntrack-tcp-timeout-established=0',
    '--conntrack-tcp-timeout-close-wait=0',
    '--profiling=false',
  ]);
}

/**
 * cnikit as the DaemonSet's install-cni would put it: the executable, a link per plugin, a conflist (with podCIDR6,
 * a second host-local range and an IPv6 default route: dual stack).
 */
export function installCni(
  dir: string,
  distBin: string,
  podCIDR: string,
  plugins: string[],
  podCIDR6?: string,
): void {
  const t = nodeTree(dir);
  const exe = join(t.cniBin, 'cnikit');
  if (!existsSync(exe)) linkSync(join(distBin, 'cnikit'), exe);
  for (const p of plugins) if (!existsSync(join(t.cniBin, p))) linkSync(exe, join(t.cniBin, p));
  const conflist = {
    cniVersion: '1.0.0',
    name: 'cnikit',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: podCIDR }], ...(podCIDR6 ? [[{ subnet: podCIDR6 }]] : [])],
          routes: [{ dst: '0.0.0.0/0' }, ...(podCIDR6 ? [{ dst: '::/0' }] : [])],
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
  const tmp = join(t.confDir, '.10-cnikit.conflist.tmp');
  writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`);
  renameSync(tmp, join(t.confDir, '10-cnikit.conflist'));
}
