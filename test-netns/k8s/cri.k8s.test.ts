/**
 * Kubernetes end to end: Debian's containerd 1.6 with its CRI plugin, a private instance per scenario
 * (test-netns/k8s/node.ts), driven like kubelet over gRPC (cri.ts). cnikit comes from the release image and is
 * installed by the DaemonSet's install-cni init container, run by that containerd (the executable, the warm client
 * under every plugin name, the ConfigMap's kubelet-style conflist: bridge + host-local, portmap, bandwidth, tuning).
 * The same pod scenario runs twice on fresh nodes:
 * cold (no service: every client execs the cold executable) and warm (`cnikit serve` running); pods get addresses,
 * talk, the hostPort answers from another machine, the bandwidth annotations become tbf qdiscs, Stop/Remove leaves
 * no veth, ifb, rule or reservation behind, and the node state of the two runs is identical byte for byte once the
 * random names (sandbox IDs, veth names, MACs, netns paths, ID hashes) are replaced by per-pod labels.
 * Then the upgrade: the v2 image's init container installs over v1 while pods are created and deleted in a loop,
 * zero failed calls.
 * Run with `npm run test:k8s` (docs/kubernetes.md).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { eventually, type Snapshot, sleep, snapshotNetns, stableStateFile } from '@cnikit/testing';
import { parse as parseYaml } from 'yaml';
import { buildImage, type ImageResult } from '../../scripts/image.ts';
import { DIST, ensureBuilt, ROOT } from '../dist.ts';
import type { PodSpec, SandboxInfo } from './cri.ts';
import { buildPauseImage, CGROUP_PARENT, NODE_IP, PrivateNode } from './node.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const NET = 'cnikit';
const SUBNET = '10.244.0.0/24';
const HOST_PORT = 30080;
const readManifest = <T>(name: string): T =>
  parseYaml(readFileSync(join(ROOT, 'deploy', 'kubernetes', name), 'utf8')) as T;
/** The ConfigMap and the DaemonSet that deploy/kubernetes/ applies. */
const CONFIGMAP = readManifest<{ data: Record<string, string> }>('configmap.yaml');
// no API server here to give the node its spec.podCIDR: the ConfigMap override a one-node cluster would set
CONFIGMAP.data['pod-cidr'] = SUBNET;
interface K8sContainer {
  name: string;
  image: string;
  command: string[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string }; configMapKeyRef?: { key: string } };
  }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
const POD_SPEC = readManifest<{
  spec: {
    template: {
      spec: {
        initContainers: K8sContainer[];
        volumes: {
          name: string;
          hostPath?: { path: string };
          configMap?: { items: { key: string; path: string }[] };
        }[];
      };
    };
  };
}>('daemonset.yaml').spec.template.spec;
const INSTALL_CNI = POD_SPEC.initContainers.find((c) => c.name === 'install-cni') as K8sContainer;
const POD_A: PodSpec = {
  name: 'web',
  uid: 'uid-web',
  namespace: 'default',
  cgroupParent: CGROUP_PARENT,
  portMappings: [{ containerPort: 8080, hostPort: HOST_PORT }],
  annotations: { 'kubernetes.io/ingress-bandwidth': '10M', 'kubernetes.io/egress-bandwidth': '20M' },
};
const POD_B: PodSpec = {
  name: 'client',
  uid: 'uid-client',
  namespace: 'default',
  cgroupParent: CGROUP_PARENT,
};

ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-k8s-'));
let pauseArchive = '';
/** The release image (deploy/kubernetes's DaemonSet runs it) with the Bun executable (v1) and the SEA one (v2). */
const images: Partial<Record<'v1' | 'v2', ImageResult>> = {};
const image = (v: 'v1' | 'v2'): ImageResult => {
  const i = images[v];
  assert.ok(i, `image ${v} built`);
  return i;
};

/**
 * The DaemonSet's install-cni init container, run from the image by the node's containerd (`ctr run`, host network,
 * as kubelet would): its command and environment from daemonset.yaml, its hostPath volumes mapped to the node's
 * scratch tree (/opt/cni/bin, /etc/cni/net.d) or its private /run, the ConfigMap as a directory of files.
 */
function runInitContainer(node: PrivateNode, ref: string): string {
  const r = node.exec('ctr', initContainerArgs(node, ref), 120_000);
  assert.equal(r.status, 0, `install-cni container: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The same, without blocking this thread (pods are created and deleted meanwhile). */
async function runInitContainerAsync(node: PrivateNode, ref: string): Promise<string> {
  const args = ['-t', String(node.pid), '-n', '-m', '--', 'ctr', ...initContainerArgs(node, ref)];
  const p = spawn('nsenter', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d));
  p.stderr.on('data', (d: Buffer) => (out += d));
  const code = await new Promise<number | null>((resolve) => p.on('exit', resolve));
  assert.equal(code, 0, `install-cni container: ${out}`);
  return out;
}

function initContainerArgs(node: PrivateNode, ref: string): string[] {
  const cmDir = join(node.paths.root, 'configmap');
  mkdirSync(cmDir, { recursive: true });
  const hostPaths: Record<string, string> = {
    '/opt/cni/bin': node.paths.binDir,
    '/etc/cni/net.d': node.paths.confDir,
    '/run/cnikit': '/run/cnikit',
  };
  node.execOk('mkdir', ['-p', '/run/cnikit']);
  const mounts: string[] = [];
  for (const m of INSTALL_CNI.volumeMounts ?? []) {
    const vol = POD_SPEC.volumes.find((v) => v.name === m.name);
    let src: string | undefined;
    if (vol?.hostPath) src = hostPaths[vol.hostPath.path];
    else if (vol?.configMap) {
      for (const item of vol.configMap.items)
        writeFileSync(join(cmDir, item.path), CONFIGMAP.data[item.key] ?? '');
      src = cmDir;
    }
    assert.ok(src, `volume ${m.name} is mapped`);
    mounts.push(
      '--mount',
      `type=bind,src=${src},dst=${m.mountPath},options=rbind:${m.readOnly ? 'ro' : 'rw'}`,
    );
  }
  const env: string[] = [];
  for (const e of INSTALL_CNI.env ?? []) {
    const v =
      e.value ??
      (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName'
        ? 'node-1'
        : CONFIGMAP.data[e.valueFrom?.configMapKeyRef?.key ?? '']);
    if (v !== undefined) env.push('--env', `${e.name}=${v}`);
  }
  const id = `install-cni-${Date.now()}`;
  return [
    ...['--address', node.paths.socket, '--namespace', 'k8s.io', 'run', '--rm', '--net-host'],
    ...['--cgroup', `${CGROUP_PARENT}/${id}`, ...mounts, ...env, ref, id, ...INSTALL_CNI.command],
  ];
}

/** A TCP server in a pod's network namespace answering every connection with `name`. */
async function podServer(pid: number, port: number, name: string): Promise<{ kill(): void }> {
  const code = `require('node:net').createServer((c) => c.end(${JSON.stringify(name)}))
    .listen(${port}, '0.0.0.0', () => console.log('up')); setTimeout(() => process.exit(2), 120000).unref();`;
  const p = spawn('nsenter', ['-t', String(pid), '-n', '--', process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    p.stdout.on('data', (d: Buffer) => d.toString().includes('up') && resolve());
    p.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return { kill: () => p.kill() };
}

/** One TCP connection from the network namespace of `pid` to ip:port: what came back ('' = nothing). */
function ask(pid: number, ip: string, port: number): string {
  const code = `const c = require('node:net').connect(${port}, '${ip}'); let b = '';
    c.on('data', (d) => b += d); c.on('end', () => { process.stdout.write(b); process.exit(0); });
    c.on('error', () => process.exit(0)); setTimeout(() => process.exit(0), 3000);`;
  const r = spawnSync('nsenter', ['-t', String(pid), '-n', '--', process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: 15_000,
  });
  return r.stdout;
}

interface Pod {
  label: string;
  id: string;
  ip: string;
  info: SandboxInfo;
}

async function runPod(node: PrivateNode, spec: PodSpec, label: string): Promise<Pod> {
  const id = await node.cri.runPodSandbox(spec);
  const { status, info } = await node.cri.podSandboxStatus(id);
  assert.equal(status.state, 'SANDBOX_READY');
  const ip = status.network?.ip ?? '';
  assert.match(ip, /^10\.244\.0\.\d+$/, `pod ${label} has an address in ${SUBNET}`);
  assert.ok(
    info.pid > 0 && info.cniResult?.Interfaces?.eth0,
    `verbose status of ${label}: ${JSON.stringify(info)}`,
  );
  return { label, id, ip, info };
}

/** Random strings a run produces (IDs, names, MACs, paths) → stable labels, longest first. */
function replacements(node: PrivateNode, pods: Pod[]): [string, string][] {
  const map = new Map<string, string>();
  const links = JSON.parse(node.execOk('ip', ['-json', 'link', 'show'])) as {
    ifname: string;
    address: string;
  }[];
  for (const l of links)
    if (l.ifname === 'eth0' || l.ifname === 'cni0') map.set(l.address, `<mac:node:${l.ifname}>`);
  for (const p of pods) {
    map.set(p.id, `<id:${p.label}>`);
    const h = createHash('sha512').update(`${NET}${p.id}`).digest('hex');
    for (let n = 12; n <= 24; n++) map.set(h.slice(0, n), `<hash:${p.label}:${n}>`);
    for (const [name, intf] of Object.entries(p.info.cniResult?.Interfaces ?? {})) {
      if (intf.Sandbox) map.set(intf.Sandbox, `<netns:${p.label}>`);
      if (intf.Mac && intf.Mac !== '00:00:00:00:00:00' && name !== 'cni0')
        map.set(intf.Mac, `<mac:${p.label}:${kind(name)}>`);
      if (name.startsWith('veth') || name.startsWith('bwp')) map.set(name, `<if:${p.label}:${kind(name)}>`);
    }
  }
  map.set(node.paths.root, '<root>');
  return [...map].sort((a, b) => b[0].length - a[0].length);
}

const kind = (ifname: string) =>
  ifname.startsWith('veth') ? 'veth' : ifname.startsWith('bwp') ? 'ifb' : ifname;

function normalise(text: string, repl: [string, string][]): string {
  let out = text;
  for (const [from, to] of repl) out = out.split(from).join(to);
  return out;
}

/** containerd's cached CNI results list the CNI_ARGS in Go map order (random per call): sorted here. */
function content(path: string, text: string): string {
  if (!path.startsWith('results/')) return stableStateFile(path, text);
  const cache = JSON.parse(text) as { cniArgs?: [string, string][] };
  cache.cniArgs?.sort((x, y) => x[0].localeCompare(y[0]));
  return JSON.stringify(cache);
}

/** Every file under a directory: path, mode and contents. */
function tree(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const p = join(rel, name);
    const st = statSync(join(dir, p));
    if (st.isDirectory()) out.push(`${p}/ ${(st.mode & 0o7777).toString(8)}`, ...tree(dir, p));
    else
      out.push(
        `${p} ${(st.mode & 0o7777).toString(8)} ${JSON.stringify(content(p, readFileSync(join(dir, p), 'utf8')))}`,
      );
  }
  return out;
}

/** The node's state as text: kernel state of the node and of every pod, and the /var/lib/cni tree. */
function nodeState(node: PrivateNode, pods: Pod[], repl: [string, string][]): string {
  // random per run beyond the labelled names: link-local addresses (from random MACs), bridge IDs (a MAC), timers
  const line = (l: string) =>
    normalise(l.replace(/"(bridge_id|root_id)":"[^"]*"/g, '"$1":"<bridge-id>"'), repl)
      .replace(/"(ifindex|link_index|link_netnsid)":\d+/g, '"$1":N')
      .replace(/fe80::[0-9a-f:]+/g, 'fe80::<eui64>')
      .replace(/"(\w+_timer)":[\d.]+/g, '"$1":N');
  // settled: the warm run reaches this point sooner after the pods' links came up; IPv6 DAD (tentative flags, the
  // local routes that follow) must not make the two runs differ
  const snap = (path: string) =>
    Object.entries(snapshotNetns(path, { settleMs: 10_000 }) as Snapshot).map(
      ([k, lines]) => `## ${k}\n${lines.map(line).sort().join('\n')}`,
    );
  const parts = ['# node', ...snap(node.netnsPath)];
  for (const p of pods) parts.push(`# pod ${p.label}`, ...snap(`/proc/${p.info.pid}/ns/net`));
  parts.push('# /var/lib/cni', ...tree(node.paths.varLibCni).map(line).sort());
  return parts.join('\n');
}

interface Outcome {
  afterAdd: string;
  afterDel: string;
  served: number;
}

/** The pod scenario on a fresh node; warm: with `cnikit serve` running. */
async function scenario(mode: 'cold' | 'warm'): Promise<Outcome> {
  const node = new PrivateNode(join(scratch, mode));
  const servers: { kill(): void }[] = [];
  try {
    await node.start(pauseArchive, [image('v1').file]);
    assert.equal(INSTALL_CNI.image, image('v1').ref, 'the DaemonSet runs the image this tree builds');
    runInitContainer(node, image('v1').ref);
    await node.networkReady();
    const serveLog = mode === 'warm' ? await node.startServe() : undefined;
    const a = await runPod(node, POD_A, 'a');
    const b = await runPod(node, POD_B, 'b');
    assert.notEqual(a.ip, b.ip);

    // two pods talk, both ways
    servers.push(await podServer(a.info.pid, 8080, 'pod-a'), await podServer(b.info.pid, 8080, 'pod-b'));
    assert.equal(ask(b.info.pid, a.ip, 8080), 'pod-a');
    assert.equal(ask(a.info.pid, b.ip, 8080), 'pod-b');
    // the hostPort, from another machine
    assert.equal(ask(node.clientPid, NODE_IP, HOST_PORT), 'pod-a');
    assert.equal(ask(node.clientPid, NODE_IP, HOST_PORT + 1), '', 'only the mapped port answers');
    // the bandwidth annotations: tbf at 10 Mbit/s towards the pod (host veth), 20 Mbit/s from it (ifb)
    const ifs = Object.keys(a.info.cniResult?.Interfaces ?? {});
    const veth = ifs.find((n) => n.startsWith('veth'));
    const ifb = ifs.find((n) => n.startsWith('bwp'));
    assert.ok(veth && ifb, `pod a's host interfaces: ${ifs.join(' ')}`);
    const qdiscs = JSON.parse(node.execOk('tc', ['-json', 'qdisc', 'show'])) as {
      kind: string;
      dev: string;
      root?: boolean;
      options?: { rate?: number };
    }[];
    const tbf = (dev: string) => qdiscs.find((q) => q.dev === dev && q.kind === 'tbf' && q.root);
    assert.equal(tbf(veth)?.options?.rate, 10_000_000 / 8);
    assert.equal(tbf(ifb)?.options?.rate, 20_000_000 / 8);
    assert.ok(qdiscs.some((q) => q.dev === veth && q.kind === 'ingress'));
    const bIfs = Object.keys(b.info.cniResult?.Interfaces ?? {});
    assert.ok(!bIfs.some((n) => n.startsWith('bwp')), 'no ifb for the pod without annotations');
    for (const s of servers.splice(0)) s.kill();

    const repl = replacements(node, [a, b]);
    const afterAdd = nodeState(node, [a, b], repl);
    assert.doesNotMatch(afterAdd, /\b[0-9a-f]{32,}\b/, 'every sandbox ID and hash is replaced by a label');

    for (const p of [a, b]) {
      await node.cri.stopPodSandbox(p.id);
      await node.cri.removePodSandbox(p.id);
    }
    assert.deepEqual(await node.cri.listPodSandbox(), []);
    // the bridge loses its carrier with its last port, asynchronously (linkwatch): wait for it before the snapshot
    const cni0 = () =>
      JSON.parse(node.execOk('ip', ['-json', 'link', 'show', 'cni0']))[0] as { operstate: string };
    await eventually(() => cni0().operstate === 'DOWN', 'cni0 without ports is DOWN');
    const afterDel = nodeState(node, [], repl);
    // Stop/Remove cleans: no veth, no ifb, no per-pod rule or chain, no reservation, no cached result
    const links = JSON.parse(node.execOk('ip', ['-json', 'link', 'show'])) as { ifname: string }[];
    assert.deepEqual(links.map((l) => l.ifname).sort(), ['cni0', 'eth0', 'lo']);
    assert.doesNotMatch(afterDel, /<(id|hash|if|netns|mac):[ab]\b/, 'nothing of a removed pod stays');
    assert.doesNotMatch(afterDel, /10\.244\.0\.\d+\/32|--to-destination/);
    const reservations = readdirSync(join(node.paths.varLibCni, 'networks', NET)).sort();
    assert.deepEqual(reservations, ['last_reserved_ip.0', 'lock']);
    assert.deepEqual(readdirSync(join(node.paths.varLibCni, 'results')), []);

    let served = 0;
    if (serveLog) {
      const log = readFileSync(serveLog, 'utf8');
      served = log.split('\n').filter((l) => l.includes(' → exit ')).length;
      assert.equal(log.split('\n').filter((l) => / → exit [1-9]/.test(l)).length, 0, log);
      // per pod: loopback, bridge, portmap, bandwidth, tuning on ADD and DEL (host-local runs in-process)
      assert.ok(served >= 20, `the service answered the calls (${served})\n${log}`);
    } else {
      assert.ok(
        !existsSync(node.nodeFsPath('/run/cnikit/cnikit.sock')),
        'cold: no service socket on the node',
      );
    }
    return { afterAdd, afterDel, served };
  } finally {
    for (const s of servers) s.kill();
    await node.stop();
  }
}

describe('Kubernetes end to end: containerd CRI + cnikit', { concurrency: false }, () => {
  const outcomes: Partial<Record<'cold' | 'warm', Outcome>> = {};

  before(() => {
    pauseArchive = buildPauseImage(join(scratch, 'image'), join(HERE, 'pause.c'));
    const client = join(DIST, 'warm', 'cnikit-client');
    // v1 carries this tree's version: the tag the DaemonSet names
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const [v, exe, tag] of [
      ['v1', join(DIST, 'cnikit'), version],
      ['v2', join(DIST, 'sea', 'cnikit'), `${version}-upgrade`],
    ] as const) {
      const work = join(scratch, `image-${v}`);
      mkdirSync(work);
      images[v] = buildImage({
        arch: { name: 'amd64', cc: 'cc', objdump: 'objdump' },
        ...{
          exe,
          client,
          license: join(ROOT, 'LICENSE'),
          version: tag,
          epoch: 1_764_115_200,
          work,
          out: work,
          level: 1,
        },
      });
    }
  });

  after(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  test('cold: pods get addresses, talk, hostPort and bandwidth work, Stop/Remove cleans', async () => {
    outcomes.cold = await scenario('cold');
  });

  test('warm (cnikit serve running): the same, every call served by the service', async () => {
    outcomes.warm = await scenario('warm');
  });

  test('upgrade: v2 installed with install-cni over v1 while pods are created and deleted, zero failed calls', async (t) => {
    const node = new PrivateNode(join(scratch, 'upgrade'));
    const exe = join(node.paths.binDir, 'cnikit');
    try {
      await node.start(pauseArchive, [image('v1').file, image('v2').file]);
      runInitContainer(node, image('v1').ref); // v1: the Bun back-end (dist-bin's default)
      await node.networkReady();
      const serveLog = await node.startServe();
      assert.match(node.execOk(exe, ['--version']), /back-end: bun /);

      const counts: Record<string, number> = {};
      const failures: string[] = [];
      const call = async <T>(what: string, fn: () => Promise<T>): Promise<T | undefined> => {
        counts[what] = (counts[what] ?? 0) + 1;
        try {
          return await fn();
        } catch (e) {
          failures.push(`${what}: ${(e as Error).message}`);
          return undefined;
        }
      };
      let cycles = 0;
      let stop = false;
      const churn = async (worker: number) => {
        // a failure ends the churn (it is reported below), so a dead runtime never spins this loop
        for (let i = 0; !stop && failures.length === 0; i++) {
          const spec: PodSpec = {
            name: `churn-${worker}-${i}`,
            uid: `uid-churn-${worker}-${i}`,
            namespace: 'default',
            cgroupParent: CGROUP_PARENT,
            // one worker's pods publish a port, the other's are shaped: every plugin of the chain runs
            portMappings: worker === 0 ? [{ containerPort: 8080, hostPort: HOST_PORT }] : [],
            annotations: worker === 1 ? { 'kubernetes.io/ingress-bandwidth': '10M' } : {},
          };
          const id = await call('RunPodSandbox', () => node.cri.runPodSandbox(spec));
          if (id) {
            const st = await call('PodSandboxStatus', () => node.cri.podSandboxStatus(id));
            if (st && !/^10\.244\.0\.\d+$/.test(st.status.network?.ip ?? ''))
              failures.push(`no address: ${id}`);
            await call('StopPodSandbox', () => node.cri.stopPodSandbox(id));
            await call('RemovePodSandbox', () => node.cri.removePodSandbox(id));
          }
          cycles++;
        }
      };
      const workers = [churn(0), churn(1)];
      const waitCycles = async (n: number) => {
        while (cycles < n && failures.length === 0) await sleep(50);
      };
      let installed = '';
      let installMs = 0;
      try {
        await waitCycles(2);
        const t0 = Date.now();
        // the DaemonSet's rolling update: the new pod's init container installs v2 (same source, node SEA back-end)
        installed = await runInitContainerAsync(node, image('v2').ref);
        installMs = Date.now() - t0;
        await waitCycles(cycles + 4);
      } finally {
        stop = true;
        await Promise.all(workers);
      }

      assert.deepEqual(failures, []);
      assert.match(node.execOk(exe, ['--version']), /back-end: node .*\(SEA\)/);
      const log = readFileSync(serveLog, 'utf8');
      assert.match(log, /re-executing .* was replaced/, 'the service moved to v2');
      const exits = log.split('\n').filter((l) => l.includes(' → exit '));
      assert.deepEqual(
        exits.filter((l) => !l.includes(' → exit 0')),
        [],
        'every call the service answered succeeded',
      );
      const links = JSON.parse(node.execOk('ip', ['-json', 'link', 'show'])) as { ifname: string }[];
      assert.deepEqual(links.map((l) => l.ifname).sort(), ['cni0', 'eth0', 'lo']);
      assert.deepEqual(readdirSync(join(node.paths.varLibCni, 'networks', NET)).sort(), [
        'last_reserved_ip.0',
        'lock',
      ]);
      // containerd runs the DEL chain on StopPodSandbox and again on RemovePodSandbox: 15 plugin calls per cycle; a
      // call arriving while the service re-executes may be run cold by its client (not counted in the service's log)
      const cniCalls = cycles * 15;
      assert.ok(exits.length > 0 && exits.length <= cniCalls, `${exits.length} served of ${cniCalls}`);
      t.diagnostic(
        `upgrade: ${cycles} pod cycles, CRI calls ${JSON.stringify(counts)}, ${cniCalls} CNI calls (${exits.length} served warm), ` +
          `0 failed; install-cni v2 took ${installMs} ms: ${installed.trim().split('\n').length} lines`,
      );
    } finally {
      await node.stop();
    }
  });

  test('cold and warm leave identical node state', () => {
    assert.ok(outcomes.cold && outcomes.warm, 'both scenarios ran');
    assert.deepEqual(outcomes.warm.afterAdd.split('\n'), outcomes.cold.afterAdd.split('\n'));
    assert.deepEqual(outcomes.warm.afterDel.split('\n'), outcomes.cold.afterDel.split('\n'));
  });
});
