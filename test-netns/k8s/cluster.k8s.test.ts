/**
 * The lab cluster (scripts/k8s/cluster.ts, docs/lab-cluster.md): a control plane and two nodes, each with its own
 * network, mount, PID and cgroup namespaces, a private containerd, a kubelet and a kube-proxy. The cluster comes up
 * without a network and cnikit is installed by the operator's guide itself: every ```sh block of docs/kubernetes.md
 * is run here (test-netns/k8s/guide.ts reads them; the image archive the guide names is built from dist-bin as a
 * two-platform index), in an operator's order — import the image with ctr, `kubectl apply -k deploy/kubernetes/`,
 * the metrics and GC commands, upgrade, rollback, back to the Go plugins, from the Go plugins, uninstall — each step
 * checked by the state it leaves. With cnikit installed: both nodes Ready through its conflist, pods pinned to each
 * node get addresses of that node's podCIDR, reach another pod of their node and the API server through the
 * `kubernetes` Service, a hostPort answers on the node's address from the other node and the underlay, the
 * bandwidth annotations become tbf qdiscs, the serve container's metrics count one bridge ADD per pod created and
 * one DEL per pod deleted; after every step each node holds exactly one veth, reservation and cached result per
 * live pod of its own (none once they are deleted); stopping the cluster leaves the machine's network namespace, its
 * sysctls, its cgroup trees and the scratch space as they were. Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
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
import { after, test } from 'node:test';
import { diffHostState, hostState } from '../../scripts/host-state.mjs';
import { buildImage, buildImageIndex, imageIndexName, imageRef } from '../../scripts/image.ts';
import { hierarchies } from '../../scripts/k8s/cgroups.ts';
import { CLUSTER_CIDR, type Cluster, type LabNode, startCluster } from '../../scripts/k8s/cluster.ts';
import { SERVICE_IP } from '../../scripts/k8s/control-plane.ts';
import { BUSYBOX_IMAGE } from '../../scripts/k8s/images.ts';
import { KERNEL_DEFAULTS, nodeTree } from '../../scripts/k8s/lab-node.ts';
import { DIST, ensureBuilt, GO_CNI, ROOT } from '../dist.ts';
import { type GuideBlock, guideBlocks, guideCoverage, runGuideCommand, runnable } from './guide.ts';

let cluster: Cluster | undefined;
const work = mkdtempSync(join(tmpdir(), 'cnikit-guide-'));
after(async () => {
  await cluster?.stop();
  rmSync(work, { recursive: true, force: true });
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The cgroup directories of the cluster: wherever they are, they carry its name. */
function clusterCgroups(top: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, depth: number) => {
    for (const e of readdirSync(dir)) {
      const sub = join(dir, e);
      if (!statSync(sub).isDirectory()) continue;
      if (e === top) out.push(sub);
      else if (depth < 3) walk(sub, depth + 1);
    }
  };
  for (const h of hierarchies()) walk(h.mount, 0);
  return out.sort();
}

const kernelKnobs = () =>
  Object.fromEntries(
    Object.keys(KERNEL_DEFAULTS).map((k) => [k, readFileSync(`/proc/sys/${k}`, 'utf8').trim()]),
  );
const netnsList = () =>
  spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter(Boolean)
    .sort();

function inCidr(ip: string, cidr: string): boolean {
  const [net, len] = cidr.split('/');
  const n = (a: string) => a.split('.').reduce((x, o) => x * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(len));
  return Math.floor(n(ip) / size) === Math.floor(n(net ?? '') / size);
}

const HTTPD = (text: string) =>
  `mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -v -p 8080 -h /www`;

function pod(
  name: string,
  node: string,
  script: string,
  extra: { hostPort?: number; annotations?: Record<string, string> } = {},
) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: { app: 'lab-test' },
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
    },
    spec: {
      nodeName: node,
      dnsPolicy: 'Default',
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'c',
          image: BUSYBOX_IMAGE,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', script],
          ...(extra.hostPort
            ? { ports: [{ containerPort: 8080, hostPort: extra.hostPort, protocol: 'TCP' }] }
            : {}),
        },
      ],
    },
  };
}

type Pod = {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: { nodeName: string; containers: { image: string }[] };
  status: { phase: string; podIP?: string; containerStatuses?: { ready: boolean; restartCount: number }[] };
};

const { version: VERSION } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
};
const blocks = guideBlocks();
const ran = new Map<string, Set<string>>();
const block = (id: string): GuideBlock => {
  const b = blocks.find((x) => x.id === id);
  assert.ok(b, `docs/kubernetes.md has no block ${id}`);
  return b;
};
const HOST_PORT = 18080;
const SHAPED = { 'kubernetes.io/ingress-bandwidth': '10M', 'kubernetes.io/egress-bandwidth': '20M' };
const netBefore = hostState();
const knobsBefore = kernelKnobs();

function getCluster(): Cluster {
  assert.ok(cluster, 'the cluster is up');
  return cluster;
}

function kubectl(args: string[], input?: string): string {
  const r = getCluster().kubectl(args, { input, timeout: 180_000 });
  assert.equal(r.status, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Runs a guide block's commands where the guide says, in order; every command must succeed. */
function runBlock(id: string): { command: string; node?: string; stdout: string; stderr: string }[] {
  const c = getCluster();
  const b = block(id);
  const done = ran.get(id) ?? new Set<string>();
  ran.set(id, done);
  const outs: { command: string; node?: string; stdout: string; stderr: string }[] = [];
  for (const command of b.commands) {
    const cmd = runnable(command);
    if (cmd === undefined) continue;
    for (const n of b.place === 'node' ? c.nodes : [undefined]) {
      const r = runGuideCommand(c, n, cmd, work);
      assert.equal(
        r.status,
        0,
        `guide block ${id}${n ? ` on ${n.name}` : ''}: ${cmd}\n${r.stdout}${r.stderr}`,
      );
      outs.push({ command, node: n?.name, stdout: r.stdout, stderr: r.stderr });
    }
    done.add(command);
  }
  return outs;
}

const testPods = (): Pod[] => JSON.parse(kubectl(['get', 'pods', '-l', 'app=lab-test', '-o', 'json'])).items;
const cnikitPods = (): Pod[] =>
  JSON.parse(
    kubectl(['-n', 'kube-system', 'get', 'pods', '-l', 'app.kubernetes.io/name=cnikit', '-o', 'json']),
  ).items;

async function createPods(items: ReturnType<typeof pod>[]): Promise<Map<string, Pod>> {
  kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const names = items.map((i) => i.metadata.name);
  const t0 = Date.now();
  for (;;) {
    const pods = testPods().filter((p) => names.includes(p.metadata.name));
    if (pods.length === names.length && pods.every((p) => p.status.phase === 'Running' && p.status.podIP))
      return new Map(pods.map((p) => [p.metadata.name, p]));
    assert.ok(
      Date.now() - t0 < 180_000,
      `pods not Running:\n${kubectl(['get', 'pods', '-o', 'wide'])}\n${kubectl(['get', 'events'])}`,
    );
    await sleep(500);
  }
}

function deletePods(names: string[]): void {
  kubectl(['delete', 'pod', ...names, '--wait=true', '--timeout=120s']);
}

async function waitCnikitGone(): Promise<void> {
  const t0 = Date.now();
  while (cnikitPods().length > 0) {
    assert.ok(Date.now() - t0 < 120_000, 'the DaemonSet pods are not gone');
    await sleep(500);
  }
}

/** The DaemonSet rolled out on both nodes, every pod of it running `image`. */
async function waitDaemonSet(image: string): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const pods = cnikitPods();
    const ok =
      pods.length === 2 &&
      pods.every(
        (p) =>
          p.status.phase === 'Running' &&
          p.spec.containers.every((x) => x.image === image) &&
          (p.status.containerStatuses ?? []).every((s) => s.ready),
      );
    if (ok) return;
    assert.ok(
      Date.now() - t0 < 180_000,
      `the DaemonSet is not on ${image} and ready on both nodes: ${JSON.stringify(pods.map((p) => [p.spec.nodeName, p.status.phase, p.spec.containers.map((x) => x.image)]))}`,
    );
    await sleep(1000);
  }
}

const hostVeths = (n: LabNode) =>
  (
    JSON.parse(n.exec('ip', ['-json', 'link', 'show']).stdout) as {
      ifname: string;
      linkinfo?: { info_kind?: string };
    }[]
  )
    .map((l) => l.ifname)
    .filter((x) => x !== 'eth0' && x.startsWith('veth'));
const ifbs = (n: LabNode) =>
  (JSON.parse(n.exec('ip', ['-json', 'link', 'show']).stdout) as { ifname: string }[])
    .map((l) => l.ifname)
    .filter((x) => x.startsWith('bwp'));
const reservations = (n: LabNode) => {
  const store = join(nodeTree(n.dir).varLibCni, 'networks', 'cnikit');
  return existsSync(store)
    ? readdirSync(store)
        .filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'))
        .sort()
    : [];
};
const cachedResults = (n: LabNode) => {
  const dir = join(nodeTree(n.dir).varLibCni, 'results');
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};

/**
 * On every node exactly what its live pods hold: one host veth, one host-local reservation (the pod's address) and
 * one cached result of the cnikit network per pod, an IFB per shaped pod, no per-pod hostPort chain but theirs.
 */
async function assertNodesMatchPods(when: string): Promise<void> {
  const c = getCluster();
  const t0 = Date.now();
  for (;;) {
    const pods = testPods();
    const problems: string[] = [];
    for (const n of c.nodes) {
      const mine = pods.filter((p) => p.spec.nodeName === n.name);
      const ips = mine.map((p) => p.status.podIP ?? '?').sort();
      const st = {
        veths: hostVeths(n).length,
        reservations: reservations(n),
        results: cachedResults(n).filter((f) => f.startsWith('cnikit-')).length,
        ifbs: ifbs(n).length,
      };
      const want = {
        veths: mine.length,
        reservations: ips,
        results: mine.length,
        ifbs: mine.filter((p) => p.metadata.annotations?.['kubernetes.io/ingress-bandwidth']).length,
      };
      if (JSON.stringify(st) !== JSON.stringify(want))
        problems.push(`${n.name}: ${JSON.stringify(st)}, want ${JSON.stringify(want)}`);
      if (mine.length === 0) {
        if (cachedResults(n).length) problems.push(`${n.name}: cached results ${cachedResults(n).join(' ')}`);
        const nat = n.exec('iptables-save', ['-t', 'nat']).stdout;
        if (/^:CNI-DN-/m.test(nat)) problems.push(`${n.name}: a per-pod hostPort chain is left`);
      }
    }
    if (problems.length === 0) return;
    assert.ok(
      Date.now() - t0 < 30_000,
      `${when}: the nodes do not hold what their pods hold:\n${problems.join('\n')}`,
    );
    await sleep(500);
  }
}

/** `cnikit_serve_requests_total` of a node's serve container, scraped on its address: {plugin command code} → n. */
function requests(n: LabNode): Map<string, number> {
  const r = n.exec('curl', ['-sS', '--max-time', '10', `http://${n.ip}:9743/metrics`]);
  assert.equal(r.status, 0, `metrics of ${n.name}: ${r.stderr}`);
  const m = new Map<string, number>();
  for (const l of r.stdout.split('\n')) {
    const x = /^cnikit_serve_requests_total\{(.*)\} (\S+)$/.exec(l);
    if (!x) continue;
    const labels = Object.fromEntries(
      [...(x[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((y) => [y[1], y[2]]),
    );
    m.set(`${labels.plugin} ${labels.command} ${labels.result_code}`, Number(x[2]));
  }
  return m;
}
const delta = (a: Map<string, number>, b: Map<string, number>, key: string) =>
  (b.get(key) ?? 0) - (a.get(key) ?? 0);
const failures = (m: Map<string, number>) =>
  [...m].filter(([k]) => !k.endsWith(' 0')).reduce((s, [, v]) => s + v, 0);

/** What a node's pod answers on port 8080, asked from the node itself. */
const fetchFromNode = (n: LabNode, ip: string) =>
  n.exec('curl', ['-sS', '--max-time', '10', `http://${ip}:8080/`]).stdout.trim();

test('the guide installs cnikit on a 2-node lab cluster: the image imported with ctr, kubectl apply -k deploy/kubernetes/, nodes Ready through its conflist', async () => {
  ensureBuilt();
  // the archives the guide names: one index of two platforms (amd64 is dist-bin's cnikit; arm64 a static stand-in,
  // as scripts/image-index.test.ts has it: the real one needs a release build)
  const img = block('image').commands[0] ?? '';
  assert.ok(img.includes(imageIndexName(VERSION)), `the guide imports ${imageIndexName(VERSION)}: ${img}`);
  const next = /cnikit-image-v(\S+)\.oci\.tar/.exec(block('upgrade-image').commands[0] ?? '')?.[1];
  assert.ok(next && next !== VERSION, 'the upgrade names another version');
  const t0 = Date.now();
  const archives: string[] = [];
  for (const arch of [
    { name: 'amd64' as const, cc: 'cc', objdump: 'objdump' },
    { name: 'arm64' as const, cc: 'aarch64-linux-gnu-gcc', objdump: 'aarch64-linux-gnu-objdump' },
  ]) {
    const w = join(work, 'build', arch.name);
    mkdirSync(w, { recursive: true });
    let exe = join(DIST, 'cnikit');
    let client = join(DIST, 'warm', 'cnikit-client');
    if (arch.name === 'arm64') {
      writeFileSync(join(w, 'stand-in.c'), 'int main(void) { return 0; }\n');
      exe = join(w, 'stand-in');
      client = exe;
      const r = spawnSync(arch.cc, ['-O1', '-o', exe, join(w, 'stand-in.c')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
    }
    archives.push(
      buildImage({
        arch,
        exe,
        client,
        license: join(ROOT, 'LICENSE'),
        version: VERSION,
        epoch: 1_764_115_200,
        work: w,
        out: w,
        level: 1,
      }).file,
    );
  }
  for (const v of [VERSION, next])
    buildImageIndex({ archives, version: v, epoch: 1_764_115_200, work: join(work, 'build'), out: work });
  rmSync(join(work, 'build'), { recursive: true, force: true });
  cpSync(join(ROOT, 'deploy', 'kubernetes'), join(work, 'deploy', 'kubernetes'), { recursive: true });
  const imagesSeconds = (Date.now() - t0) / 1000;

  const t1 = Date.now();
  cluster = await startCluster({ nodes: 2, name: `t${process.pid}`, cni: 'none' });
  const upSeconds = (Date.now() - t1) / 1000;
  const c = cluster;

  // the nodes have their podCIDRs and no network yet
  type Node = {
    metadata: { name: string };
    spec: { podCIDR: string };
    status: {
      conditions: { type: string; status: string }[];
      addresses: { type: string; address: string }[];
    };
  };
  const nodeItems = (): Node[] => JSON.parse(kubectl(['get', 'nodes', '-o', 'json'])).items;
  const ready = (n: Node) => n.status.conditions.some((x) => x.type === 'Ready' && x.status === 'True');
  assert.deepEqual(
    nodeItems()
      .filter(ready)
      .map((n) => n.metadata.name),
    [],
    'no node is Ready before cnikit is installed',
  );

  // Install, step 1: the image on every node
  const t2 = Date.now();
  for (const o of runBlock('image').filter((x) => x.command.includes('images ls')))
    assert.match(o.stdout, /linux\/amd64,linux\/arm64/, `${o.node}: one image of both platforms`);
  // podman / skopeo: the archive holds an index of both platforms; copy --all carries every manifest
  const other = runBlock('image-other');
  const raw = JSON.parse(other.find((o) => o.command.startsWith('skopeo inspect'))?.stdout ?? '{}') as {
    manifests: { digest: string; platform: { architecture: string } }[];
  };
  assert.deepEqual(
    raw.manifests.map((m) => m.platform.architecture),
    ['amd64', 'arm64'],
  );
  const mirror = join(work, 'mirror');
  const top = JSON.parse(readFileSync(join(mirror, 'index.json'), 'utf8')) as {
    manifests: { digest: string; annotations?: Record<string, string> }[];
  };
  const blob = (d: string) =>
    readFileSync(join(mirror, 'blobs', 'sha256', d.replace(/^sha256:/, '')), 'utf8');
  const idx = JSON.parse(blob(top.manifests[0]?.digest ?? '')) as typeof raw;
  assert.deepEqual(
    idx.manifests.map((m) => [m.platform.architecture, m.digest]),
    raw.manifests.map((m) => [m.platform.architecture, m.digest]),
    'the copy lists the same two manifests',
  );
  for (const m of idx.manifests) {
    const man = JSON.parse(blob(m.digest)) as { config: { digest: string }; layers: { digest: string }[] };
    for (const d of [man.config.digest, ...man.layers.map((l) => l.digest)])
      assert.ok(existsSync(join(mirror, 'blobs', 'sha256', d.slice(7))), `${m.platform.architecture}: ${d}`);
  }

  // Install, step 3: kubectl apply -k as the guide writes it
  runBlock('install');
  for (let i = 0; !nodeItems().every(ready); i++) {
    assert.ok(i < 240, `nodes not Ready:\n${kubectl(['get', 'nodes', '-o', 'wide'])}`);
    await sleep(500);
  }
  await waitDaemonSet(imageRef(VERSION));
  const installSeconds = (Date.now() - t2) / 1000;
  const nodes = nodeItems();
  assert.deepEqual(nodes.map((n) => n.metadata.name).sort(), ['n1', 'n2']);
  for (const n of nodes) {
    assert.match(n.spec.podCIDR, /^10\.244\.\d+\.0\/24$/);
    assert.ok(inCidr(n.spec.podCIDR.split('/')[0] ?? '', CLUSTER_CIDR));
    const lab = c.nodes.find((x) => x.name === n.metadata.name);
    assert.equal(lab?.podCIDR, n.spec.podCIDR);
    assert.deepEqual(n.status.addresses.find((a) => a.type === 'InternalIP')?.address, lab?.ip);
  }
  assert.notEqual(nodes[0]?.spec.podCIDR, nodes[1]?.spec.podCIDR);
  // each node's conflist, written by its install-cni: that node's podCIDR, and the plugins the kubelet's
  // capabilities need (portmap for hostPort, bandwidth for the annotations)
  for (const n of c.nodes) {
    const conflist = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist'), 'utf8'));
    assert.deepEqual(conflist.plugins[0].ipam.ranges, [[{ subnet: n.podCIDR }]]);
    const caps = Object.fromEntries(
      (conflist.plugins as { type: string; capabilities?: object }[]).map((p) => [p.type, p.capabilities]),
    );
    assert.deepEqual(caps.portmap, { portMappings: true });
    assert.deepEqual(caps.bandwidth, { bandwidth: true });
  }

  // a node is namespaced: its own hostname, its cgroup subtree as root, the kernel knobs kubelet wants as files
  const rootNet = spawnSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).stdout.trim();
  for (const n of c.nodes) {
    assert.equal(n.exec('hostname', []).stdout.trim(), n.name);
    assert.notEqual(n.exec('readlink', ['/proc/self/ns/net']).stdout.trim(), rootNet);
    const cg = n.exec('cat', ['/proc/self/cgroup']).stdout.trim().split('\n');
    assert.ok(
      cg.every((l) => l.endsWith(':/')),
      `a node's processes see their cgroup subtree as the root:\n${cg.join('\n')}`,
    );
    const ps = n.exec('ps', ['-eo', 'pid,comm']).stdout;
    assert.match(ps, /^\s*1 sleep$/m, 'the node has a PID namespace of its own');
    for (const name of ['containerd', 'kubelet', 'kube-proxy'])
      assert.match(ps, new RegExp(` ${name}$`, 'm'));
    for (const [k, v] of Object.entries(KERNEL_DEFAULTS))
      assert.equal(
        n.exec('cat', [`/proc/sys/${k}`]).stdout.trim(),
        v,
        `${k} as kubelet wants it on ${n.name}`,
      );
  }
  assert.deepEqual(
    kernelKnobs(),
    knobsBefore,
    "the machine's kernel knobs are untouched while the cluster runs",
  );
  process.stderr.write(
    `lab cluster: images ${imagesSeconds.toFixed(1)} s, up ${upSeconds.toFixed(1)} s (2 nodes, no CNI), guide install to Ready ${installSeconds.toFixed(1)} s\n`,
  );
});

test('through the kubelet: podCIDR addresses, pod to pod and the kubernetes Service, a hostPort on the node address, the bandwidth annotations, warm calls counted, the GC keeping live pods, deletion leaving nothing', async () => {
  const c = getCluster();
  const [n1, n2] = c.nodes;
  assert.ok(n1 && n2);
  const before = new Map(c.nodes.map((n) => [n.name, requests(n)]));
  const items = c.nodes.flatMap((n) => [
    pod(`web-${n.name}`, n.name, HTTPD(`hello-from-${n.name}`)),
    pod(`cli-${n.name}`, n.name, 'exec sleep 3600'),
  ]);
  items.push(pod('hp-n1', 'n1', HTTPD('hello-from-hostport'), { hostPort: HOST_PORT }));
  items.push(pod('bw-n2', 'n2', 'exec sleep 3600', { annotations: SHAPED }));
  const t0 = Date.now();
  const pods = await createPods(items);
  const podsSeconds = (Date.now() - t0) / 1000;
  const ipOf = (name: string) => pods.get(name)?.status.podIP ?? '';
  for (const p of pods.values()) {
    const n = c.nodes.find((x) => x.name === p.spec.nodeName);
    assert.ok(
      n && inCidr(p.status.podIP ?? '', n.podCIDR),
      `${p.metadata.name} ${p.status.podIP} in ${n?.podCIDR}`,
    );
  }
  for (const n of c.nodes) {
    const exec = (args: string[]) => kubectl(['exec', `cli-${n.name}`, '--', 'timeout', '10', ...args]);
    // another pod of the same node, over the node's bridge
    assert.equal(
      exec(['wget', '-qO-', `http://${ipOf(`web-${n.name}`)}:8080/`]).trim(),
      `hello-from-${n.name}`,
    );
    // the API server through the kubernetes Service's ClusterIP: kube-proxy's DNAT in the node's namespace
    const version = exec(['wget', '-qO-', '--no-check-certificate', `https://${SERVICE_IP}/version`]);
    assert.equal(JSON.parse(version).gitVersion, 'v1.20.2');
    const nat = n.exec('iptables', ['-t', 'nat', '-S', 'KUBE-SERVICES']).stdout;
    assert.match(nat, new RegExp(`-d ${SERVICE_IP.replaceAll('.', '\\.')}/32 .*default/kubernetes:https`));
    // the server logged the client's request (kubectl logs through the kubelet)
    assert.match(
      kubectl(['logs', `web-${n.name}`]),
      new RegExp(ipOf(`cli-${n.name}`).replaceAll('.', '\\.')),
    );
  }

  // hostPort: the kubelet's port mapping reaches portmap; the pod answers on n1's address from n2 and from the
  // underlay, and not on n2's address
  const curl = (netns: string, url: string) =>
    spawnSync('ip', ['netns', 'exec', netns, 'curl', '-sS', '--max-time', '10', url], { encoding: 'utf8' });
  for (const netns of [n2.netns, `cnikit-${c.name}-ul`]) {
    const r = curl(netns, `http://${n1.ip}:${HOST_PORT}/`);
    assert.equal(r.stdout.trim(), 'hello-from-hostport', `hostPort from ${netns}: ${r.stderr}`);
  }
  assert.notEqual(curl(n1.netns, `http://${n2.ip}:${HOST_PORT}/`).status, 0, 'no hostPort on n2');
  assert.match(n1.exec('iptables-save', ['-t', 'nat']).stdout, new RegExp(`--dport ${HOST_PORT}\\b`));

  // the bandwidth annotations: tbf at 10 Mbit/s towards the pod (its host veth), 20 Mbit/s from it (the IFB)
  const qdiscs = JSON.parse(
    spawnSync('ip', ['netns', 'exec', n2.netns, 'tc', '-json', 'qdisc', 'show'], { encoding: 'utf8' }).stdout,
  ) as { kind: string; dev: string; root?: boolean; options?: { rate?: number } }[];
  const tbf = qdiscs.filter((q) => q.kind === 'tbf');
  const [ifb] = ifbs(n2);
  assert.ok(ifb, 'the shaped pod has an IFB');
  assert.deepEqual(
    tbf
      .map((q) => [
        q.dev.startsWith('bwp') ? 'ifb' : q.dev.startsWith('veth') ? 'veth' : q.dev,
        q.options?.rate,
      ])
      .sort(),
    [
      ['ifb', 20_000_000 / 8],
      ['veth', 10_000_000 / 8],
    ],
  );
  const shapedVeth = tbf.find((q) => q.dev.startsWith('veth'))?.dev;
  assert.ok(
    qdiscs.some((q) => q.dev === shapedVeth && q.kind === 'ingress'),
    'ingress qdisc redirecting to the IFB',
  );
  assert.deepEqual(ifbs(n1), [], 'no IFB for the pods without annotations');
  await assertNodesMatchPods('after creating the pods');

  // warm mode served the calls: one bridge ADD per pod of the node, none failed (and the guide's scrape shows them)
  const created = (n: LabNode) => items.filter((p) => p.spec.nodeName === n.name).length;
  const after1 = new Map(c.nodes.map((n) => [n.name, requests(n)]));
  for (const n of c.nodes) {
    const a = before.get(n.name) ?? new Map();
    const b = after1.get(n.name) ?? new Map();
    assert.equal(
      delta(a, b, 'bridge ADD 0'),
      created(n),
      `${n.name}: bridge ADDs served ${JSON.stringify([...b])}`,
    );
    assert.equal(delta(a, b, 'portmap ADD 0'), created(n), `${n.name}: portmap ADDs served`);
    assert.equal(failures(b), failures(a), `${n.name}: no failed call`);
  }
  for (const o of runBlock('metrics'))
    assert.match(
      o.stdout,
      /^cnikit_serve_requests_total\{plugin="bridge",command="ADD",result_code="0"\} \d+$/m,
    );

  // the GC by hand (the guide's lines) keeps every address of a live pod
  const held = new Map(c.nodes.map((n) => [n.name, reservations(n)]));
  runBlock('gc');
  for (const n of c.nodes)
    assert.deepEqual(reservations(n), held.get(n.name), `${n.name}: the GC kept the live pods`);

  // the cluster's cgroups are under this process's own cgroup in every hierarchy, one subtree per node, and the
  // containers' cgroups are inside the nodes' subtrees
  const top = `cnikit-t${process.pid}`;
  const hs = hierarchies();
  const ours = clusterCgroups(top);
  assert.deepEqual(ours, hs.map((h) => join(h.mount, h.own, top)).sort());
  for (const d of ours)
    assert.deepEqual(
      readdirSync(d)
        .filter((e) => statSync(join(d, e)).isDirectory())
        .sort(),
      ['n1', 'n2'],
    );
  const memory = hs.find((h) => h.options === 'memory');
  if (memory) {
    for (const n of c.nodes) {
      const sub = join(memory.mount, memory.own, top, n.name);
      assert.ok(
        readdirSync(sub).some((e) => statSync(join(sub, e)).isDirectory()),
        `pods' cgroups under ${sub}`,
      );
    }
  }

  // deleting the pods leaves nothing of them on the nodes, and the DELs were warm calls
  const delsPerPod: string[] = [];
  deletePods([...pods.keys()]);
  await assertNodesMatchPods('after deleting the pods');
  for (const n of c.nodes) {
    assert.deepEqual(hostVeths(n), [], `no pod veth left on ${n.name}`);
    assert.deepEqual(reservations(n), [], `no host-local reservation left on ${n.name}`);
    assert.deepEqual(cachedResults(n), [], `no cached result left on ${n.name}`);
    const a = after1.get(n.name) ?? new Map();
    const b = requests(n);
    // containerd 1.6 tears the network down at every StopPodSandbox, and the kubelet stops a sandbox more than
    // once (DEL is idempotent): at least one DEL per pod, each one through the whole chain and loopback
    const dels = delta(a, b, 'bridge DEL 0');
    assert.ok(dels >= created(n), `${n.name}: ${dels} bridge DELs served for ${created(n)} pods`);
    for (const p of ['portmap', 'bandwidth', 'tuning', 'loopback'])
      assert.equal(delta(a, b, `${p} DEL 0`), dels, `${n.name}: ${p} DELs ${JSON.stringify([...b])}`);
    assert.equal(failures(b), failures(a), `${n.name}: no failed call`);
    delsPerPod.push(`${n.name} ${dels}/${created(n)}`);
  }
  process.stderr.write(
    `lab cluster: ${items.length} pods Running in ${podsSeconds.toFixed(1)} s; warm DELs per pods deleted: ${delsPerPod.join(', ')}\n`,
  );
});

test('the guide upgrades and rolls back: the DaemonSet on the new image and back, running pods untouched', async () => {
  const c = getCluster();
  const keep = await createPods(c.nodes.map((n) => pod(`keep-${n.name}`, n.name, HTTPD(`kept-${n.name}`))));
  const t0 = Date.now();
  runBlock('upgrade-image');
  runBlock('upgrade');
  const next = /newTag: v(\S+)/.exec(
    readFileSync(join(work, 'deploy', 'kubernetes', 'kustomization.yaml'), 'utf8'),
  )?.[1];
  assert.ok(next && next !== VERSION);
  await waitDaemonSet(imageRef(next));
  const upgradeSeconds = (Date.now() - t0) / 1000;
  const same = () => {
    for (const n of c.nodes) {
      const p = testPods().find((x) => x.metadata.name === `keep-${n.name}`);
      assert.equal(p?.status.podIP, keep.get(`keep-${n.name}`)?.status.podIP, 'the pod keeps its address');
      assert.equal(p?.status.containerStatuses?.[0]?.restartCount, 0, 'and is not restarted');
      assert.equal(fetchFromNode(n, p?.status.podIP ?? ''), `kept-${n.name}`);
    }
  };
  same();
  const t1 = Date.now();
  runBlock('rollback');
  await waitDaemonSet(imageRef(VERSION));
  const rollbackSeconds = (Date.now() - t1) / 1000;
  assert.match(
    readFileSync(join(work, 'deploy', 'kubernetes', 'kustomization.yaml'), 'utf8'),
    new RegExp(`newTag: v${VERSION.replaceAll('.', '\\.')}\\n`),
  );
  same();
  await assertNodesMatchPods('after the upgrade and the rollback');
  process.stderr.write(
    `lab cluster: upgrade ${upgradeSeconds.toFixed(1)} s, rollback ${rollbackSeconds.toFixed(1)} s\n`,
  );
});

test("the guide switches back to the Go plugins and from them: running pods keep working, each side deletes the other's pods, new pods get networking from whichever is installed", async () => {
  const c = getCluster();
  // back to the Go plugins
  runBlock('to-go');
  await waitCnikitGone();
  runBlock('to-go-node');
  for (const n of c.nodes) {
    const bin = nodeTree(n.dir).cniBin;
    for (const f of readdirSync(GO_CNI))
      assert.ok(
        readFileSync(join(bin, f)).equals(readFileSync(join(GO_CNI, f))),
        `${n.name}: ${f} is the Go plugin`,
      );
    for (const f of ['cnikit', 'cnikit-client', 'cnitool', '.cnikit-install-cni.json'])
      assert.equal(existsSync(join(bin, f)), false, `${n.name}: ${f} is removed`);
    // the operator's conflist of the same network; install-cni's went with the uninstall
    assert.equal(existsSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist')), false);
    const conflist = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '05-go.conflist'), 'utf8'));
    assert.deepEqual(conflist.plugins[0].ipam.ranges, [[{ subnet: n.podCIDR }]]);
    assert.equal(
      fetchFromNode(n, testPods().find((p) => p.metadata.name === `keep-${n.name}`)?.status.podIP ?? ''),
      `kept-${n.name}`,
    );
  }
  const go = await createPods(c.nodes.map((n) => pod(`go-${n.name}`, n.name, HTTPD(`go-${n.name}`))));
  for (const n of c.nodes) {
    const p = go.get(`go-${n.name}`);
    assert.ok(inCidr(p?.status.podIP ?? '', n.podCIDR));
    assert.equal(fetchFromNode(n, p?.status.podIP ?? ''), `go-${n.name}`);
  }
  await assertNodesMatchPods('pods of cnikit and of the Go plugins');
  deletePods(['keep-n1']); // made by cnikit, deleted by the Go plugins
  await assertNodesMatchPods('a pod of cnikit deleted by the Go plugins');

  // from the Go plugins
  const out = runBlock('from-go');
  assert.match(out.map((o) => o.stdout).join('\n'), /replaces a file install-cni did not write/);
  await waitDaemonSet(imageRef(VERSION));
  runBlock('from-go-node');
  for (const n of c.nodes) {
    const conf = nodeTree(n.dir).confDir;
    assert.deepEqual(
      readdirSync(conf).filter((f) => f.endsWith('.conflist')),
      ['10-cnikit.conflist'],
    );
    const bin = nodeTree(n.dir).cniBin;
    assert.equal(
      statSync(join(bin, 'bridge')).ino,
      statSync(join(bin, 'cnikit-client')).ino,
      `${n.name}: bridge is cnikit's`,
    );
  }
  deletePods(['go-n1', 'go-n2']); // made by the Go plugins, deleted by cnikit
  await assertNodesMatchPods("the Go plugins' pods deleted by cnikit");
  const fresh = await createPods(c.nodes.map((n) => pod(`new-${n.name}`, n.name, HTTPD(`new-${n.name}`))));
  for (const n of c.nodes)
    assert.equal(fetchFromNode(n, fresh.get(`new-${n.name}`)?.status.podIP ?? ''), `new-${n.name}`);
  assert.equal(
    fetchFromNode(
      c.nodes[1] as LabNode,
      testPods().find((p) => p.metadata.name === 'keep-n2')?.status.podIP ?? '',
    ),
    'kept-n2',
  );
  deletePods(['new-n1', 'new-n2', 'keep-n2']);
  await assertNodesMatchPods('every pod deleted');
});

test('the guide uninstalls: the DaemonSet and its files go, the conflist goes, cni0, the shared chains and an empty /var/lib/cni stay', async () => {
  const c = getCluster();
  runBlock('uninstall');
  await waitCnikitGone();
  const out = runBlock('uninstall-node');
  assert.match(out.find((o) => o.command.includes('--dry-run'))?.stdout ?? '', /remove/);
  for (const n of c.nodes) {
    const t = nodeTree(n.dir);
    assert.equal(
      existsSync(join(t.confDir, '10-cnikit.conflist')),
      false,
      `${n.name}: the conflist is removed`,
    );
    const left = readdirSync(t.cniBin);
    for (const f of ['cnikit', 'cnikit-client', 'cnitool', 'bridge', '.cnikit-install-cni.json'])
      assert.equal(left.includes(f), false, `${n.name}: ${f} is removed`);
    for (const f of left)
      assert.ok(
        readFileSync(join(t.cniBin, f)).equals(readFileSync(join(GO_CNI, f))),
        `${n.name}: ${f} is a Go plugin cnikit did not replace`,
      );
    assert.equal(n.exec('ip', ['link', 'show', 'cni0']).status, 0, `${n.name}: cni0 stays`);
    // n1 had the hostPort pod: portmap's shared chains stay there (empty), as the Go plugins leave them
    if (n.name === 'n1') assert.match(n.exec('iptables-save', ['-t', 'nat']).stdout, /^:CNI-HOSTPORT-DNAT /m);
    assert.deepEqual(reservations(n), []);
    assert.deepEqual(cachedResults(n), []);
  }
});

test('every command of docs/kubernetes.md ran on the lab cluster, or is listed with the reason', () => {
  assert.deepEqual(guideCoverage(blocks, ran), []);
});

test('stopping the cluster leaves the machine as it was', async () => {
  const c = getCluster();
  const d0 = Date.now();
  await c.stop();
  cluster = undefined;
  process.stderr.write(`lab cluster: down ${((Date.now() - d0) / 1000).toFixed(1)} s\n`);
  // nothing is left: the machine's network namespace, its kernel knobs, its cgroups, namespaces, processes, files
  assert.deepEqual(diffHostState(netBefore, hostState()).problems, []);
  assert.deepEqual(kernelKnobs(), knobsBefore);
  assert.deepEqual(clusterCgroups(`cnikit-t${process.pid}`), [], 'no cgroup of the cluster is left');
  assert.deepEqual(
    netnsList().filter((n) => n.startsWith(`cnikit-t${process.pid}-`)),
    [],
    'no namespace of the cluster is left',
  );
  assert.equal(existsSync(c.dir), false, 'the scratch directory is removed');
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
  assert.equal(ps.includes(c.dir), false, 'no process of the cluster is left');
});

test('a failed up removes everything it made: processes, namespaces, cgroups, files', async () => {
  ensureBuilt();
  const netBefore = hostState();
  const name = `f${process.pid}`;
  const dir = join(tmpdir(), `cnikit-lab-test-${name}`);
  // every node is up (containerd, kubelet, kube-proxy running) when the first wait for the nodes times out
  await assert.rejects(startCluster({ nodes: 1, name, dir, readyTimeoutMs: 1 }), /not Ready after 1 ms/);
  assert.equal(existsSync(dir), false, 'the scratch directory is removed');
  assert.deepEqual(clusterCgroups(`cnikit-${name}`), [], 'no cgroup of the cluster is left');
  assert.deepEqual(
    netnsList().filter((n) => n.startsWith(`cnikit-${name}-`)),
    [],
    'no namespace of the cluster is left',
  );
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
  assert.equal(ps.includes(dir), false, 'no process of the cluster is left');
  assert.deepEqual(diffHostState(netBefore, hostState()).problems, []);
});
