/**
 * The operator's life-cycle of cnikit on the 2-node lab cluster (scripts/k8s/cluster.ts, docs/lab-cluster.md), each
 * step done as docs/kubernetes.md writes it, while a loop creates and deletes pods on every node:
 *   - switching to the Go reference plugins (Debian's containernetworking-plugins in /usr/lib/cni) and back;
 *   - a rolling update of the DaemonSet to an image with another cnikit executable (and a ConfigMap change), then
 *     `kubectl rollout undo`: each node's /opt/cni/bin/cnikit and its warm service are the new executable, then the
 *     first one again;
 *   - a node "reboot" (every process killed, the namespaces and the tmpfs gone) and the serve container's periodic
 *     CRI GC releasing what the pods' old sandboxes held in host-local's store.
 * Counted: pods created, `FailedCreatePodSandBox` events (0), pods Running without an address (0). One cluster for
 * all the cases. Run with `node scripts/run-tests.mjs --k8s test-netns/k8s/cluster-lifecycle.k8s.test.ts`.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { buildExecutable } from '@cnikit/build';
import { discoverPlugins, extras } from '../../scripts/build.ts';
import { buildImage } from '../../scripts/image.ts';
import { type Cluster, type LabNode, startCluster } from '../../scripts/k8s/cluster.ts';
import { BUSYBOX_IMAGE } from '../../scripts/k8s/images.ts';
import { CONTAINERD_SOCKET, nodeTree, type RunResult } from '../../scripts/k8s/lab-node.ts';
import { DIST, ensureBuilt, GO_CNI, ROOT } from '../dist.ts';
import { runGuideBlock } from './guide.ts';
import { CGROUP_PARENT } from './node.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (m: string) => process.stderr.write(`lifecycle: ${m}\n`);
const KUSTOMIZATION = join(ROOT, 'deploy', 'kubernetes');

let started: Promise<Cluster> | undefined;
let cluster: Cluster | undefined;
/** The one cluster of this file, started by the first case that needs it. */
function getCluster(): Promise<Cluster> {
  started ??= (async () => {
    ensureBuilt();
    const c = await startCluster({ nodes: 2, name: `lc${process.pid}`.slice(0, 12), cni: 'daemonset', log });
    cluster = c;
    log(`cluster up in ${c.upSeconds?.toFixed(1)} s`);
    await dsReady(c);
    // the cluster applied the DaemonSet's three files; from here on it is the kustomization, as the guide installs it
    kubectl(c, ['apply', '-k', KUSTOMIZATION]);
    await dsReady(c);
    await startResidents(c);
    return c;
  })();
  return started;
}
after(async () => {
  const t0 = Date.now();
  await cluster?.stop();
  if (cluster) log(`cluster down in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

function kubectl(c: Cluster, args: string[], input?: string): string {
  const r = c.kubectl(args, { input, timeout: 180_000 });
  assert.equal(r.status, 0, `kubectl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** kubectl without blocking the event loop (the pod loop runs beside the steps). */
function kubectlAsync(c: Cluster, args: string[], input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const p = spawn('ip', [
      'netns',
      'exec',
      c.controlPlane.netns,
      join(c.binDir, 'kubectl'),
      '--kubeconfig',
      c.controlPlane.kubeconfig,
      ...args,
    ]);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d));
    p.stderr.on('data', (d: Buffer) => (stderr += d));
    p.on('error', reject);
    p.on('close', (status) => resolve({ status, stdout, stderr }));
    p.stdin.end(input ?? '');
  });
}

function must(n: LabNode, cmd: string, args: string[]): string {
  const r = n.exec(cmd, args, { timeout: 120_000 });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} on ${n.name}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

interface Pod {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string; uid: string };
  spec: { nodeName: string };
  status: {
    phase: string;
    podIP?: string;
    containerStatuses?: { restartCount: number; state: { running?: { startedAt: string } } }[];
  };
}

function podSpec(name: string, node: string, script: string, labels: Record<string, string>) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels },
    spec: {
      nodeName: node,
      dnsPolicy: 'Default',
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', script] },
      ],
    },
  };
}

function inCidr(ip: string, cidr: string): boolean {
  const [net, len] = cidr.split('/');
  const n = (a: string) => a.split('.').reduce((x, o) => x * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(len));
  return Math.floor(n(ip) / size) === Math.floor(n(net ?? '') / size);
}

async function dsReady(c: Cluster, timeoutMs = 300_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const r = await kubectlAsync(c, ['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json']);
    if (r.status === 0) {
      const ds = JSON.parse(r.stdout);
      const st = ds.status;
      if (
        st.observedGeneration === ds.metadata.generation &&
        st.desiredNumberScheduled === c.nodes.length &&
        st.updatedNumberScheduled === c.nodes.length &&
        st.numberReady === c.nodes.length &&
        st.numberAvailable === c.nodes.length
      )
        return;
      assert.ok(Date.now() < end, `the DaemonSet is not rolled out: ${JSON.stringify(st)}`);
    } else assert.ok(Date.now() < end, `no DaemonSet: ${r.stderr}`);
    await sleep(1000);
  }
}

async function listPods(c: Cluster, selector: string, namespace = 'default'): Promise<Pod[]> {
  for (let i = 0; ; i++) {
    const r = await kubectlAsync(c, ['-n', namespace, 'get', 'pods', '-l', selector, '-o', 'json']);
    if (r.status === 0) return JSON.parse(r.stdout).items as Pod[];
    assert.ok(i < 20, `kubectl get pods: ${r.stderr}`);
    await sleep(1000);
  }
}

async function waitRunning(
  c: Cluster,
  selector: string,
  count: number,
  opts: { since?: number; node?: string; timeoutMs?: number } = {},
) {
  const since = opts.since ?? 0;
  const end = Date.now() + (opts.timeoutMs ?? 240_000);
  for (;;) {
    const pods = (await listPods(c, selector)).filter((p) => !opts.node || p.spec.nodeName === opts.node);
    const ok = pods.filter(
      (p) =>
        p.status.phase === 'Running' &&
        p.status.podIP &&
        (p.status.containerStatuses ?? []).every(
          (s) => s.state.running && Date.parse(s.state.running.startedAt) >= since,
        ),
    );
    if (pods.length === count && ok.length === count) return pods;
    assert.ok(
      Date.now() < end,
      `pods ${selector} not Running: ${JSON.stringify(pods.map((p) => [p.metadata.name, p.status]))}`,
    );
    await sleep(1000);
  }
}

/** Long-running pods on every node, created before the first step and checked after each: web-nI and cli-nI. */
async function startResidents(c: Cluster): Promise<void> {
  kubectl(
    c,
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: c.nodes.flatMap((n) => [
        podSpec(
          `web-${n.name}`,
          n.name,
          `mkdir -p /www && echo hello-from-${n.name} > /www/index.html && exec httpd -f -p 8080 -h /www`,
          { app: 'resident' },
        ),
        podSpec(`cli-${n.name}`, n.name, 'exec sleep 36000', { app: 'resident' }),
      ]),
    }),
  );
  await waitRunning(c, 'app=resident', 2 * c.nodes.length);
}

/** Each node's cli pod fetches from its web pod (same node) and from the other node's web pod. */
async function checkTraffic(c: Cluster, what: string, webs = 'web'): Promise<void> {
  const pods = await listPods(c, 'app in (resident,goresident)');
  const ip = (name: string) => pods.find((p) => p.metadata.name === name)?.status.podIP ?? '';
  for (const n of c.nodes) {
    for (const o of c.nodes) {
      const target = `${webs}-${o.name}`;
      const r = await kubectlAsync(c, [
        'exec',
        `cli-${n.name}`,
        '--',
        'timeout',
        '10',
        'wget',
        '-qO-',
        `http://${ip(target)}:8080/`,
      ]);
      assert.equal(
        r.status,
        0,
        `${what}: cli-${n.name} → ${target} (${ip(target)}) failed: ${r.stderr}${r.stdout}`,
      );
      assert.equal(r.stdout.trim(), `hello-from-${o.name}`, `${what}: cli-${n.name} → ${target}`);
    }
  }
}

/**
 * The pod loop: keeps `perNode` pods of its own on every node, deleting each once it is Running with an address
 * and creating the next; counts what it made and what went wrong.
 */
class PodLoop {
  created = 0;
  completed = 0;
  /** Pods seen in phase Running without a podIP. */
  readonly noAddress = new Set<string>();
  /** Pods whose address is outside their node's podCIDR. */
  readonly badAddress: string[] = [];
  readonly errors: string[] = [];
  readonly #c: Cluster;
  readonly #tag: string;
  readonly #perNode: number;
  #stop = false;
  #seq = 0;
  #done: Promise<void>;
  readonly #firstSeen = new Map<string, number>();
  readonly #deleting = new Set<string>();

  constructor(c: Cluster, tag: string, perNode = 2) {
    this.#c = c;
    this.#tag = tag;
    this.#perNode = perNode;
    this.#done = this.#run();
  }

  async #run(): Promise<void> {
    const c = this.#c;
    while (!this.#stop) {
      let pods: Pod[];
      try {
        pods = await listPods(c, `churn=${this.#tag}`);
      } catch (e) {
        this.errors.push((e as Error).message);
        await sleep(1000);
        continue;
      }
      const now = Date.now();
      const creating: Promise<unknown>[] = [];
      for (const n of c.nodes) {
        const mine = pods.filter((p) => p.spec.nodeName === n.name);
        let live = 0;
        for (const p of mine) {
          const name = p.metadata.name;
          if (!this.#firstSeen.has(name)) this.#firstSeen.set(name, now);
          // a pod being deleted (this loop deletes a pod once it was Running with an address) loses its podIP when
          // kubelet has torn its sandbox down, while its phase can still say Running: not a pod without an address
          if (p.metadata.deletionTimestamp || this.#deleting.has(name)) continue;
          if (p.status.phase === 'Running' && !p.status.podIP) this.noAddress.add(name);
          if (p.status.phase === 'Running' && p.status.podIP) {
            if (!inCidr(p.status.podIP, n.podCIDR)) this.badAddress.push(`${name} ${p.status.podIP}`);
            this.#deleting.add(name);
            this.completed++;
            creating.push(
              kubectlAsync(c, ['delete', 'pod', name, '--wait=false', '--grace-period=1']).then((r) => {
                if (r.status !== 0 && !/NotFound/.test(r.stderr))
                  this.errors.push(`delete ${name}: ${r.stderr}`);
              }),
            );
            continue;
          }
          live++;
          if (now - (this.#firstSeen.get(name) ?? now) > 180_000)
            this.errors.push(`${name} not Running after 180 s: ${JSON.stringify(p.status)}`);
        }
        for (let i = live; i < this.#perNode; i++) {
          const name = `churn-${this.#tag}-${n.name}-${++this.#seq}`;
          this.created++;
          creating.push(
            kubectlAsync(
              c,
              ['create', '-f', '-'],
              JSON.stringify(podSpec(name, n.name, 'exec sleep 3600', { churn: this.#tag })),
            ).then((r) => {
              if (r.status !== 0) this.errors.push(`create ${name}: ${r.stderr}`);
            }),
          );
        }
      }
      await Promise.all(creating);
      await sleep(500);
    }
  }

  /** Stops making pods, waits until every pod it made was Running with an address, deletes the rest. */
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
    const c = this.#c;
    const end = Date.now() + 240_000;
    for (;;) {
      const pods = await listPods(c, `churn=${this.#tag}`);
      for (const p of pods) {
        if (
          p.status.phase === 'Running' &&
          !p.status.podIP &&
          !p.metadata.deletionTimestamp &&
          !this.#deleting.has(p.metadata.name)
        )
          this.noAddress.add(p.metadata.name);
        if (
          !this.#deleting.has(p.metadata.name) &&
          p.status.phase === 'Running' &&
          p.status.podIP &&
          !p.metadata.deletionTimestamp
        ) {
          if (!inCidr(p.status.podIP, c.nodes.find((n) => n.name === p.spec.nodeName)?.podCIDR ?? ''))
            this.badAddress.push(`${p.metadata.name} ${p.status.podIP}`);
          this.#deleting.add(p.metadata.name);
          this.completed++;
        }
      }
      if (pods.every((p) => this.#deleting.has(p.metadata.name))) break;
      assert.ok(
        Date.now() < end,
        `pods of the loop not Running: ${JSON.stringify(pods.filter((p) => !this.#deleting.has(p.metadata.name)).map((p) => [p.metadata.name, p.status]))}`,
      );
      await sleep(1000);
    }
    kubectl(c, ['delete', 'pods', '-l', `churn=${this.#tag}`, '--wait=true', '--timeout=180s']);
  }
}

/** FailedCreatePodSandBox events of pods whose name starts with prefix (the pod loop's or every pod's). */
function failedSandboxes(c: Cluster, prefix = ''): string[] {
  const events = JSON.parse(
    kubectl(c, ['get', 'events', '--field-selector', 'reason=FailedCreatePodSandBox', '-o', 'json']),
  ).items as { involvedObject: { name: string }; message: string; count?: number }[];
  return events
    .filter((e) => e.involvedObject.name.startsWith(prefix))
    .map((e) => `${e.involvedObject.name} ×${e.count ?? 1}: ${e.message}`);
}

/** host-local's reservations (addresses) on a node, from its disk tree. */
function reservations(n: LabNode): string[] {
  const store = join(nodeTree(n.dir).varLibCni, 'networks', 'cnikit');
  if (!existsSync(store)) return [];
  return readdirSync(store)
    .filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f))
    .sort();
}

/** The warm service's metrics on a node (serve --metrics :9743), or undefined when no service answers. */
function metrics(n: LabNode): string | undefined {
  const r = n.exec('curl', ['-sf', '--max-time', '10', 'http://127.0.0.1:9743/metrics'], { timeout: 30_000 });
  return r.status === 0 ? r.stdout : undefined;
}

function metricSum(text: string | undefined, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of (text ?? '').split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');

function report(what: string, loop: PodLoop, seconds: number, failed: string[]): void {
  log(
    `${what}: ${loop.created} pods created, ${loop.completed} Running with an address, ` +
      `${failed.length} FailedCreatePodSandBox, ${loop.noAddress.size} Running without an address, ${seconds.toFixed(1)} s`,
  );
}

function assertLoop(what: string, loop: PodLoop, failed: string[], min = 4): void {
  assert.deepEqual(failed, [], `${what}: FailedCreatePodSandBox`);
  assert.deepEqual([...loop.noAddress], [], `${what}: pods Running without an address`);
  assert.deepEqual(loop.badAddress, [], `${what}: addresses outside the node's podCIDR`);
  assert.deepEqual(loop.errors, [], `${what}: the pod loop`);
  assert.ok(loop.created >= min, `${what}: the loop made pods on both nodes (${loop.created})`);
  assert.equal(loop.completed, loop.created, `${what}: every pod of the loop was Running with an address`);
}

test('two test runs put their CRI sandboxes under different cgroup parents (one run never kills the other’s pods)', () => {
  const child = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(join(ROOT, 'test-netns', 'k8s', 'node.ts'))}); process.stdout.write(m.CGROUP_PARENT);`,
    ],
    { encoding: 'utf8', cwd: ROOT },
  );
  assert.equal(child.status, 0, child.stderr);
  assert.match(CGROUP_PARENT, /^\/cnikit-k8s-e2e-/);
  assert.match(child.stdout, /^\/cnikit-k8s-e2e-/);
  assert.notEqual(child.stdout, CGROUP_PARENT);
});

test('switching to the Go reference plugins and back, as docs/kubernetes.md says, under a pod loop', async () => {
  const c = await getCluster();
  assert.ok(existsSync(join(GO_CNI, 'bridge')), `Debian's containernetworking-plugins in ${GO_CNI}`);
  await checkTraffic(c, 'before the switch');
  const before = Object.fromEntries(
    c.nodes.map((n) => [n.name, metricSum(metrics(n), 'cnikit_serve_requests_total', { command: 'ADD' })]),
  );
  for (const n of c.nodes) assert.ok((before[n.name] ?? 0) > 0, `the warm service on ${n.name} served ADDs`);
  const t0 = Date.now();
  const loop = new PodLoop(c, 'go');
  await sleep(5000);

  // to the Go plugins: the DaemonSet goes, then on each node the Go binaries replace cnikit's files (by rename), a
  // conflist of the same network that install-cni did not write, and install-cni --uninstall
  log('kubectl delete -k deploy/kubernetes/');
  kubectl(c, ['delete', '-k', KUSTOMIZATION, '--wait=true']);
  // docs/kubernetes.md's block as written, on every node
  runGuideBlock(c, 'to-go-node', tmpdir());
  for (const n of c.nodes) {
    const t = nodeTree(n.dir);
    assert.equal(existsSync(join(t.cniBin, 'cnikit')), false, `cnikit removed from ${n.name}`);
    assert.equal(existsSync(join(t.confDir, '10-cnikit.conflist')), false);
    for (const p of ['bridge', 'host-local', 'loopback', 'portmap', 'bandwidth', 'tuning'])
      assert.equal(sha(join(t.cniBin, p)), sha(join(GO_CNI, p)), `${p} on ${n.name} is the Go plugin`);
  }
  await sleep(5000);
  // pods made now are the Go plugins' (no cnikit executable is left on the nodes, no service runs)
  kubectl(
    c,
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: c.nodes.map((n) =>
        podSpec(
          `goweb-${n.name}`,
          n.name,
          `mkdir -p /www && echo hello-from-${n.name} > /www/index.html && exec httpd -f -p 8080 -h /www`,
          { app: 'goresident' },
        ),
      ),
    }),
  );
  await waitRunning(c, 'app=goresident', c.nodes.length);
  for (const n of c.nodes) {
    for (let i = 0; metrics(n) !== undefined; i++) {
      assert.ok(i < 120, `the warm service on ${n.name} still answers after the DaemonSet's deletion`);
      await sleep(1000);
    }
    assert.doesNotMatch(
      must(n, 'ps', ['-eo', 'args']),
      /\/opt\/cni\/bin\/cnikit|cnikit-hostns/,
      `no cnikit process on ${n.name}`,
    );
  }
  await checkTraffic(c, 'on the Go plugins (pods made by cnikit)');
  await checkTraffic(c, 'on the Go plugins (pods made by Go)', 'goweb');
  await sleep(5000);

  // back: the same kubectl apply -k as an install; install-cni replaces the Go files; the operator's conflist goes
  log('kubectl apply -k deploy/kubernetes/');
  kubectl(c, ['apply', '-k', KUSTOMIZATION]);
  await dsReady(c);
  runGuideBlock(c, 'from-go-node', tmpdir());
  await sleep(5000);
  const failed = failedSandboxes(c);
  await loop.stop();
  const seconds = (Date.now() - t0) / 1000;
  report('Go plugins and back', loop, seconds, failed);
  assertLoop('Go plugins and back', loop, failed);

  // cnikit again: its files, its service, and new pods served by it
  for (const n of c.nodes) {
    const t = nodeTree(n.dir);
    assert.notEqual(
      sha(join(t.cniBin, 'bridge')),
      sha(join(GO_CNI, 'bridge')),
      `cnikit's bridge on ${n.name}`,
    );
    assert.deepEqual(
      readdirSync(t.confDir).filter((f) => !f.startsWith('.')),
      ['10-cnikit.conflist'],
    );
  }
  const mark = Object.fromEntries(
    c.nodes.map((n) => [
      n.name,
      metricSum(metrics(n), 'cnikit_serve_requests_total', { plugin: 'bridge', command: 'ADD' }),
    ]),
  );
  const back = new PodLoop(c, 'back', 1);
  await sleep(3000);
  await back.stop();
  assertLoop('after the switch back', back, failedSandboxes(c, 'churn-back'), 2);
  for (const n of c.nodes) {
    const now = metricSum(metrics(n), 'cnikit_serve_requests_total', { plugin: 'bridge', command: 'ADD' });
    assert.ok(
      now > (mark[n.name] ?? 0),
      `the warm service on ${n.name} served the new pods (${mark[n.name]} → ${now})`,
    );
  }
  await checkTraffic(c, 'back on cnikit (pods made by cnikit)');
  await checkTraffic(c, 'back on cnikit (pods made by Go)', 'goweb');
  // a pod the Go plugins set up is deleted by cnikit's: its address goes
  const goIps = (await listPods(c, 'app=goresident')).map((p) => p.status.podIP);
  kubectl(c, ['delete', 'pods', '-l', 'app=goresident', '--wait=true', '--timeout=120s']);
  for (const n of c.nodes) {
    const left = reservations(n).filter((ip) => goIps.includes(ip));
    assert.deepEqual(left, [], `cnikit released the Go-made pods' addresses on ${n.name}`);
  }
});

/** The periodic GC every 5 s with a 5 s grace, set in cnikit's ConfigMap as an operator would (read at serve's start). */
function fastGc(c: Parameters<typeof kubectl>[0]): void {
  kubectl(c, [
    '-n',
    'kube-system',
    'patch',
    'configmap',
    'cnikit-config',
    '--type=merge',
    '-p',
    JSON.stringify({ data: { 'gc-interval': '5s', 'gc-grace': '5' } }),
  ]);
}

/**
 * The image of the rolling update: the same sources compiled again with another version stamp, so the executable
 * differs (its digest, its `--version`) as a release's would. Built into the cluster's scratch directory and
 * imported on every node as the guide's `ctr import` does.
 */
async function nextImage(c: Cluster): Promise<{ ref: string; exe: string; sha: string; version: string }> {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const next = `${version}-roll`;
  const work = join(c.dir, 'images', 'cnikit-next');
  mkdirSync(work, { recursive: true });
  const exe = join(work, 'cnikit');
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  const t0 = Date.now();
  // the plugins' modules are evaluated from a directory inside the repository (they resolve its node_modules)
  const buildDir = join(ROOT, 'build', `k8s-lifecycle-${process.pid}`);
  await buildExecutable({
    plugins: discoverPlugins().map((p) => ({ name: p.dir, entry: p.index })),
    out: exe,
    backend: 'bun',
    links: false,
    extras: extras(),
    workDir: buildDir,
    resolveDir: ROOT,
    conditions: ['cnikit-source'],
    addon: join(ROOT, 'packages', 'sys', 'build', 'Release', 'cnikit_sys.node'),
    stamp: {
      version: next,
      commit: head.status === 0 ? head.stdout.trim() : 'unknown',
      date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    },
    log: () => {},
  }).finally(() => rmSync(buildDir, { recursive: true, force: true }));
  const image = buildImage({
    arch: { name: 'amd64', cc: 'cc', objdump: 'objdump' },
    exe,
    client: join(DIST, 'warm', 'cnikit-client'),
    license: join(ROOT, 'LICENSE'),
    version: next,
    epoch: 1_764_115_200,
    work,
    out: work,
    level: 1,
  });
  for (const n of c.nodes)
    must(n, 'ctr', ['--address', CONTAINERD_SOCKET, '-n', 'k8s.io', 'images', 'import', image.file]);
  log(
    `image ${image.ref} (a new executable, ${sha(exe).slice(0, 12)}) built and imported in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  return { ref: image.ref, exe, sha: sha(exe), version: next };
}

/** The warm service of a node: its pid (in the node's PID namespace) and the SHA-256 of the executable it runs. */
function serveProcess(n: LabNode): { pid: string; sha: string } {
  const pids = must(n, 'pgrep', ['-f', '^/opt/cni/bin/cnikit serve']).trim().split('\n');
  assert.equal(pids.length, 1, `one warm service on ${n.name}: ${pids.join(' ')}`);
  const pid = pids[0] as string;
  return { pid, sha: must(n, 'sha256sum', [`/proc/${pid}/exe`]).split(' ')[0] as string };
}

/**
 * What runs on a node after a rollout step: the installed /opt/cni/bin/cnikit is `want` (digest and `--version`),
 * and the warm service is a new process (not one of `oldPids`) running that executable. Waits for the service
 * (the serve container starts after install-cni).
 */
async function assertInstalled(
  c: Cluster,
  what: string,
  want: { sha: string; version: string },
  oldPids: Record<string, string>,
): Promise<Record<string, string>> {
  const pids: Record<string, string> = {};
  for (const n of c.nodes) {
    const installed = join(nodeTree(n.dir).cniBin, 'cnikit');
    assert.equal(sha(installed), want.sha, `${what}: /opt/cni/bin/cnikit on ${n.name}`);
    assert.equal(
      must(n, '/opt/cni/bin/cnikit', ['--version']).split('\n')[0],
      `cnikit ${want.version}`,
      `${what}: cnikit --version on ${n.name}`,
    );
    let p = serveProcess(n);
    for (let i = 0; p.pid === oldPids[n.name] || p.sha !== want.sha; i++) {
      assert.ok(i < 60, `${what}: the warm service on ${n.name} (pid ${p.pid}, ${p.sha}) runs ${want.sha}`);
      await sleep(1000);
      p = serveProcess(n);
    }
    pids[n.name] = p.pid;
  }
  return pids;
}

test('a rolling update of the DaemonSet to a new executable (new image, ConfigMap change) and its rollback, under a pod loop', async () => {
  const c = await getCluster();
  const ds = JSON.parse(kubectl(c, ['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json']));
  const image: string = ds.spec.template.spec.containers[0].image;
  // before: every node runs dist-bin/cnikit (the cluster's image), installed and serving
  const v1 = { sha: sha(join(DIST, 'cnikit')), version: 'unknown' };
  v1.version = (
    spawnSync(join(DIST, 'cnikit'), ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0] ?? ''
  ).replace(/^cnikit /, '');
  const pids0 = await assertInstalled(c, 'before the update', v1, {});
  const v2 = await nextImage(c);
  assert.notEqual(v2.sha, v1.sha, 'the new image carries another executable');
  assert.notEqual(v2.version, v1.version);
  const next = v2.ref;
  const uids = new Set(
    (await listPods(c, 'app.kubernetes.io/name=cnikit', 'kube-system')).map((p) => p.metadata.uid),
  );
  const t0 = Date.now();
  const loop = new PodLoop(c, 'roll');
  await sleep(5000);
  // the periodic GC every 5 s with a 5 s grace (what the reboot case below needs): ConfigMap keys, then the new tag
  fastGc(c);
  kubectl(c, [
    '-n',
    'kube-system',
    'set',
    'image',
    'daemonset/cnikit',
    `install-cni=${next}`,
    `serve=${next}`,
    `conf-watch=${next}`,
  ]);
  await dsReady(c);
  const rolled = (Date.now() - t0) / 1000;
  const pods = await listPods(c, 'app.kubernetes.io/name=cnikit', 'kube-system');
  assert.equal(pods.length, c.nodes.length);
  for (const p of pods) assert.equal(uids.has(p.metadata.uid), false, `${p.metadata.name} is a new pod`);
  const images = () =>
    JSON.parse(
      kubectl(c, ['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json']),
    ).spec.template.spec.containers.map((x: { image: string }) => x.image);
  assert.deepEqual(images(), [next, next]);
  const pids1 = await assertInstalled(c, 'after the rolling update', v2, pids0);
  await checkTraffic(c, 'after the rolling update');
  await sleep(5000);
  const failedRoll = failedSandboxes(c, 'churn-roll');
  const rollCounts = { created: loop.created, completed: loop.completed, noAddress: loop.noAddress.size };
  // the rollback of the guide, under the same loop: the first executable again
  const t1 = Date.now();
  kubectl(c, ['-n', 'kube-system', 'rollout', 'undo', 'daemonset/cnikit']);
  await dsReady(c);
  const undone = (Date.now() - t1) / 1000;
  assert.deepEqual(images(), [image, image]);
  const pids2 = await assertInstalled(c, 'after the rollback', v1, pids1);
  await sleep(5000);
  const failed = failedSandboxes(c, 'churn-roll');
  await loop.stop();
  log(
    `rolling update to ${v2.version} (rollout ${rolled.toFixed(1)} s): ${rollCounts.created} pods created, ` +
      `${rollCounts.completed} Running with an address, ${failedRoll.length} FailedCreatePodSandBox, ` +
      `${rollCounts.noAddress} without an address; warm service pids ${JSON.stringify(pids0)} → ${JSON.stringify(pids1)} → ${JSON.stringify(pids2)}`,
  );
  report(
    `rolling update (rollout ${rolled.toFixed(1)} s) and rollout undo (${undone.toFixed(1)} s)`,
    loop,
    (Date.now() - t0) / 1000,
    failed,
  );
  assert.deepEqual(failedRoll, [], 'rolling update: FailedCreatePodSandBox');
  assertLoop('rolling update and rollback', loop, failed);
  await checkTraffic(c, 'after the rollback');
});

test('a node reboot: pods come back with networking; no address stays reserved (the runtime’s DEL, the periodic CRI GC)', async () => {
  const c = await getCluster();
  const n = c.nodes[1] as LabNode;
  // the GC every 5 s with a 5 s grace, set through the ConfigMap as an operator would (the rolling update above
  // did; the serve container reads the keys at its start)
  const cm = JSON.parse(kubectl(c, ['-n', 'kube-system', 'get', 'configmap', 'cnikit-config', '-o', 'json']));
  if (cm.data['gc-interval'] !== '5s' || cm.data['gc-grace'] !== '5') {
    fastGc(c);
    kubectl(c, ['-n', 'kube-system', 'rollout', 'restart', 'daemonset/cnikit']);
    await dsReady(c);
  }
  const podIps = async () =>
    (await listPods(c, 'app in (resident,goresident)'))
      .filter((p) => p.spec.nodeName === n.name)
      .map((p) => p.status.podIP as string)
      .sort();

  for (const loseRuntimeState of [false, true]) {
    const what = loseRuntimeState ? 'reboot losing the runtime’s records' : 'reboot';
    const beforeIps = await podIps();
    assert.deepEqual(reservations(n), beforeIps, `${what}: host-local's store on ${n.name} = its live pods`);
    await sleep(6000); // the reservations are older than the GC's grace
    const t0 = Date.now();
    const { downSeconds, upSeconds } = await c.rebootNode(n.name, { log, loseRuntimeState });
    assert.deepEqual(reservations(n), beforeIps, `${what}: the reservations are on disk, they survive it`);
    // the pods come back: new containers in new sandboxes, with addresses of the node's podCIDR
    await waitRunning(c, 'app=resident', 2, { since: t0, node: n.name, timeoutMs: 300_000 });
    await dsReady(c);
    const back = (Date.now() - t0) / 1000;
    const afterIps = await podIps();
    for (const ip of afterIps) assert.ok(inCidr(ip, n.podCIDR), `${ip} in ${n.podCIDR}`);
    await checkTraffic(c, `after the ${what}`);
    // no address leaked: once the old sandboxes are gone, host-local's store holds exactly the live pods' addresses
    const end = Date.now() + 240_000;
    let store = reservations(n);
    while (JSON.stringify(store) !== JSON.stringify(afterIps)) {
      assert.ok(
        Date.now() < end,
        `${what}: ${n.name} reservations ${store.join(' ')} ≠ live pods ${afterIps.join(' ')}\n${metrics(n) ?? ''}`,
      );
      await sleep(2000);
      store = reservations(n);
    }
    const m = metrics(n);
    const released = metricSum(m, 'cnikit_serve_gc_released_total', { kind: 'host-local' });
    const stale = beforeIps.filter((ip) => !afterIps.includes(ip));
    log(
      `${what} of ${n.name}: down ${downSeconds.toFixed(1)} s, up ${upSeconds.toFixed(1)} s, pods back in ${back.toFixed(1)} s, ` +
        `store clean ${((Date.now() - t0) / 1000).toFixed(1)} s after; reservations before ${beforeIps.length}, ` +
        `after ${store.length} = live pods; ${stale.length} stale, the GC released ${released} addresses ` +
        `(cache ${metricSum(m, 'cnikit_serve_gc_released_total', { kind: 'cache' })}) in ` +
        `${metricSum(m, 'cnikit_serve_gc_runs_total', { result: 'ok' })} runs`,
    );
    assert.equal(metricSum(m, 'cnikit_serve_gc_runs_total', { result: 'error' }), 0, `${what}: GC errors`);
    // the runtime that kept its records runs the old sandboxes' DEL itself; one that lost them cannot: the GC does
    if (loseRuntimeState) assert.equal(released, stale.length, `${what}: the GC released the old addresses`);
    assert.deepEqual(failedSandboxes(c, 'web-').concat(failedSandboxes(c, 'cli-')), [], what);
  }
});
