/**
 * The node agent on the lab cluster (scripts/k8s/cluster.ts): 3 nodes with cnikit from the DaemonSet, the agent
 * turned on the way an operator does it (the ConfigMap patched, `kubectl rollout restart daemonset`), mode host-gw,
 * after the lab's own static pod routes are removed. On that one cluster:
 * - the conflist's MTU is the agent mode's, pods on different nodes talk (TCP);
 * - a node deleted → its routes gone on every other node; its kubelet restarted → it registers again with another
 *   podCIDR, the route to it is on every other node and an address of its new range answers their TCP connects within 2 s,
 *   its new cnikit pod's install-cni removes the old gateway from its bridge, and a pod on it answers from every
 *   other node;
 * - the kube-apiserver stopped for 60 s and started again: an established TCP flow between pods on two nodes keeps
 *   flowing (a line every 200 ms, none lost or late), the routes never change, new pods work afterwards;
 * - the serve process SIGKILLed in the middle of a sync of 1000 simulated peers (Node objects without a kubelet):
 *   frozen with SIGSTOP at the kernel's first route event of that sync, the kernel then holds part of the set, the
 *   kill comes there; after the kubelet's restart the set is complete (the restarted agent changes exactly the
 *   missing routes), the routes of the running pods never changed (polls and route events), foreign routes untouched;
 * - bad ConfigMap values (unknown mode, VXLAN id out of range, malformed CIDR): the restarted pod is not ready (its
 *   readiness probe reports /readyz's 503), the serve log names the key, the node's routes are untouched.
 * Run with `node scripts/run-tests.mjs --k8s test-netns/k8s/cluster-agent.k8s.test.ts`.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type Cluster, type LabNode, startCluster } from '../../scripts/k8s/cluster.ts';
import { BUSYBOX_IMAGE } from '../../scripts/k8s/images.ts';
import { nodeTree } from '../../scripts/k8s/lab-node.ts';
import { ensureBuilt, ROOT } from '../dist.ts';
import { runGuideBlock } from './guide.ts';

let cluster: Cluster | undefined;
after(async () => {
  await cluster?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const AGENT = {
  'node-agent': 'on',
  'node-agent-mode': 'host-gw',
  'cluster-cidr': '10.244.0.0/16',
};

function c(): Cluster {
  assert.ok(cluster, 'the cluster is up');
  return cluster;
}

function kubectl(args: string[], input?: string): string {
  const r = c().kubectl(args, { input, timeout: 120_000 });
  assert.equal(r.status, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const node = (name: string) => c().nodes.find((n) => n.name === name) as LabNode;

/** The agent's routes (protocol 157) on a node: destination → "via GW dev DEV". */
function agentRoutes(n: LabNode): Map<string, string> {
  const r = spawnSync('ip', ['-n', n.netns, '-json', '-4', 'route', 'show', 'proto', '157'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const out = new Map<string, string>();
  for (const x of JSON.parse(r.stdout || '[]') as { dst: string; gateway?: string; dev: string }[])
    out.set(x.dst, `via ${x.gateway} dev ${x.dev}`);
  return out;
}

async function until<T>(what: string, ms: number, f: () => T | undefined | false): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined && v !== false) return v;
    assert.ok(Date.now() < end, `${what}: not within ${ms / 1000} s`);
    await sleep(200);
  }
}

interface PodJson {
  metadata: { name: string };
  spec: { nodeName?: string };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      started?: boolean;
      state?: { running?: unknown };
    }[];
  };
}

const getPod = (name: string, ns = 'default') =>
  JSON.parse(kubectl(['-n', ns, 'get', 'pod', name, '-o', 'json'])) as PodJson;

function podSpec(name: string, nodeName: string, script: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'agent-test' } },
    spec: {
      nodeName,
      dnsPolicy: 'Default',
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', script] },
      ],
    },
  };
}

/** A pod serving `hello-NAME` on TCP 8080 (busybox httpd) and idling; resolves with its IP once Running. */
async function webPod(name: string, nodeName: string): Promise<string> {
  kubectl(
    ['apply', '-f', '-'],
    JSON.stringify(
      podSpec(
        name,
        nodeName,
        `mkdir -p /www && echo hello-${name} > /www/index.html && httpd -p 8080 -h /www && exec sleep 3600`,
      ),
    ),
  );
  return await until(`pod ${name} Running`, 120_000, () => {
    const p = getPod(name);
    return p.status.phase === 'Running' && p.status.podIP ? p.status.podIP : undefined;
  });
}

function fetchFrom(pod: string, ip: string): string {
  const r = c().kubectl(['exec', pod, '--', 'timeout', '10', 'wget', '-qO-', `http://${ip}:8080/`], {
    timeout: 60_000,
  });
  return r.status === 0 ? r.stdout.trim() : `(failed: ${r.stderr.trim()})`;
}

/** The cnikit pod of a node. */
function cnikitPod(nodeName: string): PodJson | undefined {
  const items = JSON.parse(
    kubectl(['-n', 'kube-system', 'get', 'pods', '-l', 'app.kubernetes.io/name=cnikit', '-o', 'json']),
  ).items as (PodJson & { metadata: { deletionTimestamp?: string } })[];
  return items.find((p) => p.spec.nodeName === nodeName && !p.metadata.deletionTimestamp);
}

function podReady(p: PodJson | undefined): boolean {
  return p?.status.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false;
}

/** The log of a container of the cnikit pod on a node (it must exist). */
function cnikitLog(nodeName: string, container: string): string {
  return kubectl([
    '-n',
    'kube-system',
    'logs',
    (cnikitPod(nodeName) as PodJson).metadata.name,
    '-c',
    container,
  ]);
}

/** GET on the node's loopback (its network namespace) by a node process: [status, body]. */
function nodeHttp(n: LabNode, port: number, path: string): [number, string] {
  const script = `fetch('http://127.0.0.1:${port}${path}').then(async (r) => { process.stdout.write(r.status + '\\n' + (await r.text())); }, (e) => { process.stdout.write('0\\n' + e.message); })`;
  const r = spawnSync('ip', ['netns', 'exec', n.netns, process.execPath, '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  const [status = '0', ...rest] = r.stdout.split('\n');
  return [Number(status), rest.join('\n')];
}

/** The serve process of a node's cnikit pod (`/opt/cni/bin/cnikit serve …` in that node's network namespace). */
function servePid(n: LabNode): number | undefined {
  const want = readlinkSync(`/proc/${n.pid}/ns/net`);
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (argv[0] !== '/opt/cni/bin/cnikit' || argv[1] !== 'serve') continue;
      if (readlinkSync(`/proc/${e}/ns/net`) === want) return Number(e);
    } catch {
      // gone
    }
  }
  return undefined;
}

/** A node process: reads an address on stdin, then TCP-connects to it every 20 ms until the host answers. */
const PROBER = `
const net = require('node:net');
let done = false;
const win = () => { if (!done) { done = true; process.stdout.write('answered\\n'); setTimeout(() => process.exit(0), 10); } };
process.stdin.once('data', (d) => {
  const host = d.toString().trim();
  const tick = () => {
    if (done) return;
    const s = net.connect({ host, port: 9 });
    s.setTimeout(1000, () => s.destroy());
    s.on('connect', () => { win(); s.destroy(); });
    s.on('error', (e) => { if (e.code === 'ECONNREFUSED') win(); s.destroy(); });
    setTimeout(tick, 20);
  };
  tick();
});
`;

function patchConfig(data: Record<string, string | null>): void {
  kubectl([
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
}

/** Every node has a route of the agent to every other node's podCIDR, via that node's InternalIP. */
function converged(podCidrs: Map<string, string>): boolean {
  for (const n of c().nodes) {
    const r = agentRoutes(n);
    for (const [name, cidr] of podCidrs) {
      if (name === n.name) continue;
      if (r.get(cidr) !== `via ${node(name).ip} dev eth0`) return false;
    }
  }
  return true;
}

const podCidrs = new Map<string, string>();

before(async () => {
  ensureBuilt();
  cluster = await startCluster({ nodes: 3, name: `agent${process.pid % 10_000_000}`, cni: 'daemonset' });
  for (const n of c().nodes) podCidrs.set(n.name, n.podCIDR);
  // the lab's own scaffolding: static routes between the nodes' pod CIDRs (the agent leaves routes it did not
  // make alone, so they go first)
  for (const n of c().nodes)
    for (const o of c().nodes)
      if (o !== n) {
        const r = spawnSync('ip', ['-n', n.netns, 'route', 'del', o.podCIDR, 'via', o.ip]);
        assert.equal(r.status, 0, String(r.stderr));
      }
  // the simulated peers of the SIGKILL test are Node objects without a kubelet: no cnikit pod for them (the
  // DaemonSet tolerates every taint); this template change rolls out with the guide's restart below
  kubectl([
    '-n',
    'kube-system',
    'patch',
    'daemonset',
    'cnikit',
    '--type',
    'merge',
    '-p',
    JSON.stringify({
      spec: {
        template: {
          spec: {
            affinity: {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [
                    { matchExpressions: [{ key: 'cnikit-test', operator: 'DoesNotExist' }] },
                  ],
                },
              },
            },
          },
        },
      },
    }),
  ]);
  // docs/kubernetes.md's block as written: the keys in the ConfigMap (the values of AGENT), then the pods restarted
  // to read them
  runGuideBlock(c(), 'agent-on', ROOT);
  const data = JSON.parse(
    kubectl(['-n', 'kube-system', 'get', 'configmap', 'cnikit-config', '-o', 'json']),
  ).data;
  for (const [k, v] of Object.entries(AGENT)) assert.equal(data[k], v, `the guide's patch sets ${k}`);
  await until('the agent’s routes on every node', 120_000, () => converged(podCidrs));
});

test('agent on: conflist MTU from the mode (host-gw: the underlay’s), the serve pods ready through /readyz, pods on different nodes talk', async () => {
  for (const n of c().nodes) {
    const conf = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist'), 'utf8'));
    const link = JSON.parse(
      spawnSync('ip', ['-n', n.netns, '-json', 'link', 'show', 'eth0'], { encoding: 'utf8' }).stdout,
    )[0] as { mtu: number };
    assert.equal(conf.plugins[0].mtu, link.mtu, `${n.name}: the conflist's MTU is the underlay's`);
    const pod = cnikitPod(n.name) as PodJson;
    const logs = kubectl(['-n', 'kube-system', 'logs', pod.metadata.name, '-c', 'install-cni']);
    assert.match(
      logs,
      new RegExp(`MTU ${link.mtu}: node agent mode host-gw, the underlay eth0 \\(${n.ip}\\)`),
    );
    assert.equal(nodeHttp(n, 9809, '/readyz')[0], 200);
    assert.ok(podReady(pod));
  }
  const ips = new Map<string, string>();
  for (const n of c().nodes) ips.set(n.name, await webPod(`web-${n.name}`, n.name));
  for (const a of c().nodes)
    for (const b of c().nodes)
      if (a !== b)
        assert.equal(
          fetchFrom(`web-${a.name}`, ips.get(b.name) as string),
          `hello-web-${b.name}`,
          `${a.name} → ${b.name}`,
        );
});

test('the kube-apiserver stopped 60 s: an established TCP flow between pods on two nodes survives, routes unchanged, new pods work', async () => {
  const sinkIp = await webPod('sink-wait', 'n2'); // a pod of n2 up first: the node is ready for pods
  assert.ok(sinkIp);
  kubectl(
    ['apply', '-f', '-'],
    JSON.stringify(
      podSpec(
        'sink',
        'n2',
        'sleep 100000 | nc -l -p 9000 | while read l; do echo "$(date +%s) $l"; done; echo closed; sleep 3600',
      ),
    ),
  );
  // busybox nc ends the connection at the end of its stdin (a pod's is /dev/null): the sink's is a pipe kept open
  const sink = await until('sink Running', 120_000, () => {
    const p = getPod('sink');
    return p.status.phase === 'Running' && p.status.podIP ? p.status.podIP : undefined;
  });
  await sleep(1000);
  kubectl(
    ['apply', '-f', '-'],
    JSON.stringify(
      podSpec(
        'source',
        'n1',
        `i=0; while true; do echo $i; i=$((i+1)); sleep 0.2; done | nc ${sink} 9000; sleep 3600`,
      ),
    ),
  );
  await until('lines flowing from source (n1) to sink (n2)', 120_000, () => {
    const r = c().kubectl(['logs', 'sink'], { timeout: 30_000 });
    return r.status === 0 && r.stdout.trim().split('\n').length >= 10;
  });
  const routesBefore = c().nodes.map((n) => [...agentRoutes(n)].sort().join('\n'));
  const t0 = Date.now() / 1000;
  await c().apiserver.stop();
  const stoppedAt = Date.now() / 1000;
  assert.notEqual(
    c().kubectl(['get', '--raw', '/readyz', '--request-timeout=3s']).status,
    0,
    'the API is down',
  );
  let polls = 0;
  while (Date.now() / 1000 < stoppedAt + 60) {
    c().nodes.forEach((n, i) => {
      assert.equal(
        [...agentRoutes(n)].sort().join('\n'),
        routesBefore[i],
        `${n.name}'s routes while the API is down`,
      );
    });
    polls++;
    await sleep(1000);
  }
  await c().apiserver.start();
  const startedAt = Date.now() / 1000;
  await until('the API answers again', 180_000, () => {
    const r = c().kubectl(['get', '--raw', '/readyz', '--request-timeout=5s']);
    return r.status === 0 && r.stdout.trim() === 'ok';
  });
  await sleep(5000);
  const lines = kubectl(['logs', 'sink'])
    .trim()
    .split('\n')
    .map((l) => l.split(' ').map(Number) as [number, number]);
  // every line arrived, in order, and none waited: no gap of more than 3 s between arrivals through the outage
  for (const [i, [, seq]] of lines.entries()) assert.equal(seq, i, `line ${i} of the flow`);
  for (let i = 1; i < lines.length; i++) {
    const [ts = 0] = lines[i] as [number, number];
    const [prev = 0] = lines[i - 1] as [number, number];
    assert.ok(ts - prev <= 3, `a ${ts - prev} s gap in the flow at line ${i}`);
  }
  const first = (lines[0] as [number, number])[0];
  const last = (lines.at(-1) as [number, number])[0];
  assert.ok(
    first <= t0 && last >= startedAt + 3,
    `the flow spans the outage (${first}..${last}, API down ${stoppedAt}..${startedAt})`,
  );
  for (const p of ['sink', 'source'])
    assert.equal(getPod(p).status.containerStatuses?.[0]?.restartCount, 0, p);
  for (const [i, n] of c().nodes.entries())
    assert.equal([...agentRoutes(n)].sort().join('\n'), routesBefore[i]);
  console.log(
    `# API down ${(startedAt - stoppedAt).toFixed(1)} s: ${lines.length} lines through the flow, routes checked ${polls}× unchanged`,
  );
  // afterwards: the nodes Ready again, a new pod on n3 answers from n1
  await until('every node Ready after the outage', 240_000, () => {
    const items = JSON.parse(kubectl(['get', 'nodes', '-o', 'json'])).items as {
      status: { conditions: { type: string; status: string }[] };
    }[];
    return items.every((x) => x.status.conditions.some((k) => k.type === 'Ready' && k.status === 'True'));
  });
  const fresh = await webPod('after-outage', 'n3');
  assert.equal(fetchFrom('web-n1', fresh), 'hello-after-outage');
  kubectl(['delete', 'pod', 'sink', 'source', 'sink-wait', 'after-outage', '--wait=false']);
});

test('node deleted → its routes gone on every other node; re-registered → route within 2 s of its podCIDR, its pod reachable from every node', async () => {
  const gone = node('n3');
  const oldCidr = podCidrs.get('n3') as string;
  const others = c().nodes.filter((n) => n !== gone);
  const kubelet = c().kubelet('n3');
  await kubelet.stop();
  const t0 = performance.now();
  kubectl(['delete', 'node', 'n3']);
  const deleted = performance.now();
  await until('n3’s route gone from n1 and n2', 60_000, () =>
    others.every((n) => !agentRoutes(n).has(oldCidr)),
  );
  const goneMs = performance.now() - deleted;
  podCidrs.delete('n3');
  // gone long enough for the pod GC to delete the pods bound to it (what a node away for a while comes back to):
  // the DaemonSet then gives it a fresh cnikit pod, whose install-cni renders the new podCIDR
  await until('the pods of n3 deleted by the pod GC', 300_000, () => {
    const items = JSON.parse(
      kubectl(['get', 'pods', '--all-namespaces', '--field-selector', 'spec.nodeName=n3', '-o', 'json']),
    ).items as unknown[];
    return items.length === 0;
  });
  // the node comes back with another podCIDR: its bridge still holds the old gateway address, which the bridge
  // plugin (like the reference's) refuses to replace; the install-cni of its new cnikit pod removes it
  const oldGateway = oldCidr.replace(/\.0\/24$/, '.1/24');
  assert.match(
    spawnSync('ip', ['-n', gone.netns, '-o', 'addr', 'show', 'dev', 'cni0'], { encoding: 'utf8' }).stdout,
    new RegExp(` ${oldGateway.replace(/\./g, '\\.')} `),
    'n3’s bridge has the old gateway',
  );
  // reachability from the other nodes, measured from the moment the podCIDR is assigned: an address of the new
  // range on n3 (on its loopback, put there at that moment; no pod can run yet), probed from n1 and n2 with a TCP
  // connect every 20 ms (a refusal is n3's kernel answering; before the route, the SYN is lost at the underlay)
  const replies = new Map<string, number>();
  const probers = others.map((n) => {
    const p = spawn('ip', ['netns', 'exec', n.netns, process.execPath, '-e', PROBER], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    p.stdout.on('data', () => {
      if (assigned && !replies.has(n.name)) replies.set(n.name, performance.now() - assigned.at);
    });
    return p;
  });
  let probe = '';
  const startProbes = (cidr: string) => {
    probe = cidr.replace(/\.0\/24$/, '.254');
    spawn('ip', ['-n', gone.netns, 'addr', 'add', `${probe}/32`, 'dev', 'lo']);
    for (const p of probers) p.stdin.write(`${probe}\n`);
  };
  // its kubelet again: it registers, the controller-manager assigns a podCIDR; watch for that moment
  const watch = spawn('ip', [
    'netns',
    'exec',
    c().controlPlane.netns,
    join(c().binDir, 'kubectl'),
    '--kubeconfig',
    c().controlPlane.kubeconfig,
    'get',
    'nodes',
    '--watch',
    '-o',
    'jsonpath={.metadata.name} {.spec.podCIDR}{"\\n"}',
  ]);
  let assigned: { at: number; cidr: string } | undefined;
  let buf = '';
  watch.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const [name, cidr] = buf.slice(0, i).trim().split(' ');
      buf = buf.slice(i + 1);
      if (name === 'n3' && cidr && !assigned) {
        assigned = { at: performance.now(), cidr };
        startProbes(cidr);
      }
    }
  });
  try {
    await kubelet.start();
    const seen = new Map<string, number>();
    const end = Date.now() + 180_000;
    while (seen.size < others.length) {
      assert.ok(Date.now() < end, `n3 not routed from every node: assigned ${JSON.stringify(assigned)}`);
      if (assigned) {
        for (const n of others)
          if (!seen.has(n.name) && agentRoutes(n).get(assigned.cidr) === `via ${gone.ip} dev eth0`)
            seen.set(n.name, performance.now() - assigned.at);
      }
      await sleep(20);
    }
    const cidr = (assigned as { cidr: string }).cidr;
    assert.notEqual(cidr, oldCidr, 'n3 registered again with another podCIDR');
    podCidrs.set('n3', cidr);
    await until('an answer from n3’s new range on n1 and n2', 30_000, () => replies.size === others.length);
    for (const p of probers) p.kill();
    spawnSync('ip', ['-n', gone.netns, 'addr', 'del', `${probe}/32`, 'dev', 'lo']);
    const worstReply = Math.max(...replies.values());
    console.log(
      `# ${probe} (n3's new range) answered a TCP connect from ${[...replies].map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')} after the podCIDR was seen assigned`,
    );
    const worst = Math.max(...seen.values());
    console.log(
      `# n3 deleted: routes gone from n1, n2 ${goneMs.toFixed(0)} ms after kubectl delete returned (${(deleted - t0).toFixed(0)} ms for kubectl); ` +
        `re-registered with ${cidr}: route on ${[...seen].map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')} after the podCIDR was seen assigned`,
    );
    assert.ok(worst < 2000, `route to n3 on every node within 2 s of its podCIDR: ${worst.toFixed(0)} ms`);
    assert.ok(
      worstReply < 2000,
      `n3's range reachable from every node within 2 s: ${worstReply.toFixed(0)} ms`,
    );
    // a pod on the re-registered node (once its cnikit pod has installed the conflist with the new podCIDR)
    await until('the cnikit pod of n3 ready', 300_000, () => {
      return podReady(cnikitPod('n3'));
    });
    const conf = JSON.parse(readFileSync(join(nodeTree(gone.dir).confDir, '10-cnikit.conflist'), 'utf8'));
    assert.deepEqual(conf.plugins[0].ipam.ranges, [[{ subnet: cidr }]], 'n3’s conflist has its new podCIDR');
    const install = cnikitLog('n3', 'install-cni');
    assert.ok(
      install.includes(
        `cni0: address ${oldGateway} is outside the node's pod CIDRs (${cidr}): removed (the node's podCIDR changed)`,
      ),
      install,
    );
    const ip = await webPod('rejoined', 'n3');
    const bridge = spawnSync('ip', ['-n', gone.netns, '-o', '-4', 'addr', 'show', 'dev', 'cni0'], {
      encoding: 'utf8',
    }).stdout;
    assert.ok(
      bridge.includes(` ${cidr.replace(/\.0\/24$/, '.1/24')} `) && !bridge.includes(` ${oldGateway} `),
      `n3's bridge has the new gateway only: ${bridge}`,
    );
    const reachable = performance.now();
    for (const n of others) assert.equal(fetchFrom(`web-${n.name}`, ip), 'hello-rejoined', `${n.name} → n3`);
    console.log(
      `# a pod on n3 (${ip}) answers from n1 and n2 ${((reachable - (assigned as { at: number }).at) / 1000).toFixed(1)} s after the podCIDR (pod start included)`,
    );
    await until('every node routes every other after the rejoin', 60_000, () => converged(podCidrs));
  } finally {
    watch.kill();
    for (const p of probers) p.kill();
  }
});

/** `kubectl ARGS` on the control plane, not waiting (several at once). */
function kubectlAsync(args: string[], input: string): Promise<{ status: number | null; stderr: string }> {
  const cp = c().controlPlane;
  // stdout ignored: unread, its line per object would fill the pipe and stop kubectl
  const p = spawn(
    'ip',
    ['netns', 'exec', cp.netns, join(c().binDir, 'kubectl'), '--kubeconfig', cp.kubeconfig, ...args],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let stderr = '';
  p.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  p.stdin.end(input);
  return new Promise((resolve) => p.on('close', (status) => resolve({ status, stderr })));
}

/** The node's IPv4 routes of protocol 157 under `root` (`ip route show root`), as "DST via GW dev DEV" lines. */
function agentRoutesUnder(n: LabNode, root: string): string[] {
  const r = spawnSync('ip', ['-n', n.netns, '-4', 'route', 'show', 'proto', '157', 'root', root], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** agentRoutesUnder() without blocking the event loop (the route monitor's handler must run at once). */
function agentRoutesUnderAsync(n: LabNode, root: string): Promise<string[]> {
  const p = spawn('ip', ['-n', n.netns, '-4', 'route', 'show', 'proto', '157', 'root', root]);
  let out = '';
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve, reject) =>
    p.on('close', (st) =>
      st === 0
        ? resolve(
            out
              .trim()
              .split('\n')
              .map((l) => l.trim())
              .filter((l) => l !== ''),
          )
        : reject(new Error(`ip route show: exit ${st}`)),
    ),
  );
}

const FAKE_ROOT = '10.244.128.0/17';
const FAKES = 1000;

test(`serve SIGKILLed in the middle of a sync of ${FAKES} routes (kernel shows the partial set): the running pods' routes at every poll, the set completed after the restart, foreign routes untouched`, async () => {
  const n1 = node('n1');
  const real = [...podCidrs].filter(([k]) => k !== 'n1').map(([, v]) => v);
  const realBefore = agentRoutes(n1);
  const restarts = () =>
    cnikitPod('n1')?.status.containerStatuses?.find((x) => x.name === 'serve')?.restartCount ?? -1;
  const restartsBefore = restarts();
  // simulated peers (Node objects through the API, no kubelet): a /28 each in 10.244.128.0/17; fake-7's pod CIDR is
  // already held by a route of another protocol (the agent must leave it alone), and a second foreign route sits
  // in the same range
  const fake = (i: number) => ({
    cidr: `10.244.${128 + (i >> 4)}.${(i & 15) << 4}/28`,
    gw: `192.168.240.${100 + (i % 100)}`,
  });
  const CONFLICT = fake(7);
  const FOREIGN = '10.244.250.0/28';
  spawnSync('ip', [
    '-n',
    n1.netns,
    'route',
    'add',
    CONFLICT.cidr,
    'via',
    '192.168.240.99',
    'proto',
    'static',
  ]);
  spawnSync('ip', ['-n', n1.netns, 'route', 'add', FOREIGN, 'via', '192.168.240.98', 'proto', 'static']);
  const foreignBefore = spawnSync('ip', ['-n', n1.netns, 'route', 'show', 'proto', 'static'], {
    encoding: 'utf8',
  }).stdout;
  assert.match(foreignBefore, /^10\.244\.128\.112\/28 via 192\.168\.240\.99 dev eth0 $/m);
  const wanted = Array.from({ length: FAKES }, (_, i) => fake(i)).filter((f) => f.cidr !== CONFLICT.cidr);
  const items = Array.from({ length: FAKES }, (_, i) => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: `fake-${i}`, labels: { 'cnikit-test': 'fake' } },
    spec: { podCIDR: fake(i).cidr, podCIDRs: [fake(i).cidr] },
    status: { addresses: [{ type: 'InternalIP', address: fake(i).gw }] },
  }));
  // the running pods' routes (the real nodes') polled all along, and the kernel's route events: a deletion or change
  // of one of them shows there even between two polls
  let polls = 0;
  let lost = '';
  let stop = false;
  const poller = (async () => {
    while (!stop) {
      const r = await agentRoutesUnderAsync(n1, '10.244.0.0/17');
      for (const d of real) {
        const line = r.find((l) => l.startsWith(`${d} `));
        const want = `${d} ${realBefore.get(d)}`;
        if (line !== want) lost ||= `${d}: ${line} (want ${want}) at poll ${polls}`;
      }
      polls++;
      await sleep(20);
    }
  })();
  const monitor = spawn('ip', ['-n', n1.netns, 'monitor', 'route']);
  const monitorClosed = new Promise((r) => monitor.on('close', r));
  const events: string[] = [];
  let armed = false;
  let pid2: number | undefined;
  let stoppedAt: { pid: number; routes: number; ms: number } | undefined;
  let firstAdd = 0;
  let mbuf = '';
  const isFakeAdd = (l: string) =>
    !l.startsWith('Deleted') && /^10\.244\.(1[2-9]\d|2[0-4]\d)\.\d+\/28 .*proto 157/.test(l);
  monitor.stdout.on('data', (d: Buffer) => {
    mbuf += d.toString();
    for (let i = mbuf.indexOf('\n'); i >= 0; i = mbuf.indexOf('\n')) {
      const line = mbuf.slice(0, i);
      mbuf = mbuf.slice(i + 1);
      events.push(line);
      if (armed && !stoppedAt && isFakeAdd(line)) {
        // the restarted agent's first sync has programmed its first route of the set: freeze it there
        firstAdd = performance.now();
        const pid = pid2 ?? servePid(n1);
        if (pid === undefined) continue;
        process.kill(pid, 'SIGSTOP');
        stoppedAt = { pid, routes: -1, ms: performance.now() - firstAdd };
      }
    }
  });
  try {
    const t0 = performance.now();
    // kubectl 1.20 sends at most 5 requests a second: 8 of them at once
    const res = await Promise.all(
      Array.from({ length: 8 }, (_, p) =>
        kubectlAsync(
          ['create', '-f', '-'],
          JSON.stringify({ apiVersion: 'v1', kind: 'List', items: items.filter((_, i) => i % 8 === p) }),
        ),
      ),
    );
    for (const r of res) assert.equal(r.status, 0, r.stderr);
    const created = performance.now() - t0;
    await until(`n1 routes the ${FAKES - 1} simulated peers`, 300_000, () => {
      const r = new Set(agentRoutesUnder(n1, FAKE_ROOT).map((l) => l.split(' ')[0]));
      return wanted.every((f) => r.has(f.cidr));
    });
    console.log(
      `# ${FAKES} Node objects created in ${(created / 1000).toFixed(1)} s (8 kubectl create in parallel), routed on n1 ${((performance.now() - t0 - created) / 1000).toFixed(1)} s later`,
    );
    // serve killed; while it is down its routes to the simulated peers are removed (what a node whose routes were
    // lost looks like), so the first sync of the restarted agent has FAKES - 1 routes to program
    const pid1 = servePid(n1);
    assert.ok(pid1, 'the serve process of n1');
    process.kill(pid1, 'SIGKILL');
    const fl = spawnSync('ip', ['-n', n1.netns, 'route', 'flush', 'root', FAKE_ROOT, 'proto', '157'], {
      encoding: 'utf8',
    });
    assert.equal(fl.status, 0, fl.stderr);
    assert.equal(agentRoutesUnder(n1, FAKE_ROOT).length, 0);
    armed = true;
    // the kubelet starts serve again: note its pid as soon as it appears (the freeze needs it at once)
    await until('a new serve process on n1 (the kubelet restarts the container)', 180_000, () => {
      if (stoppedAt) return true;
      const p = servePid(n1);
      if (p !== undefined && p !== pid1) pid2 = p;
      return pid2 !== undefined;
    });
    await until('the restarted agent programming the set (its first route, then SIGSTOP)', 120_000, () =>
      stoppedAt ? true : undefined,
    );
    const frozen = stoppedAt as { pid: number; routes: number; ms: number };
    await until('the serve process stopped', 10_000, () => {
      try {
        return /^State:\s+T/m.test(readFileSync(`/proc/${frozen.pid}/status`, 'utf8'));
      } catch {
        return false;
      }
    });
    // the kernel's view with the agent frozen: part of the set is there, part is not
    frozen.routes = agentRoutesUnder(n1, FAKE_ROOT).length;
    process.kill(frozen.pid, 'SIGKILL');
    assert.ok(
      frozen.routes > 0 && frozen.routes < wanted.length,
      `the agent was stopped mid-sync: ${frozen.routes} of ${wanted.length} routes in the kernel`,
    );
    await until('serve started again after the kill mid-sync', 180_000, () => {
      const p = servePid(n1);
      return p !== undefined && p !== frozen.pid && p !== pid1;
    });
    await until(`all ${wanted.length} routes after the restart`, 120_000, () => {
      const r = new Map(agentRoutesUnder(n1, FAKE_ROOT).map((l) => [l.split(' ')[0], l]));
      return wanted.every((f) => r.get(f.cidr) === `${f.cidr} via ${f.gw} dev eth0`);
    });
    await until('n1’s cnikit pod ready again', 120_000, () => podReady(cnikitPod('n1')));
    // the restarted agent programmed exactly the routes the killed one had not (nothing twice), none over the
    // foreign one; each destination has one route
    const log = cnikitLog('n1', 'serve');
    const done = new RegExp(
      `node agent: ${wanted.length + real.length} route\\(s\\) to ${FAKES + real.length} peer\\(s\\), ${wanted.length - frozen.routes} change\\(s\\)`,
    );
    assert.match(
      log,
      done,
      `the restarted agent completed the ${wanted.length - frozen.routes} missing routes`,
    );
    assert.match(
      log,
      new RegExp(`${CONFLICT.cidr.replace(/\./g, '\\.')}: a route of protocol 4 is there \\(left alone\\)`),
    );
    const all = spawnSync('ip', ['-n', n1.netns, '-4', 'route', 'show', 'root', FAKE_ROOT], {
      encoding: 'utf8',
    })
      .stdout.trim()
      .split('\n');
    const dsts = all.map((l) => l.split(' ')[0]);
    assert.equal(new Set(dsts).size, dsts.length, 'one route per destination');
    assert.equal(dsts.length, FAKES + 1, 'the simulated peers’ routes and the foreign one');
    assert.equal(
      spawnSync('ip', ['-n', n1.netns, 'route', 'show', 'proto', 'static'], { encoding: 'utf8' }).stdout,
      foreignBefore,
      'the foreign routes untouched',
    );
    const m = nodeHttp(n1, 9743, '/metrics')[1];
    console.log(
      `# serve frozen at the first route event of its first sync: ${frozen.routes}/${wanted.length} routes in the kernel, then SIGKILL; ` +
        `the restarted agent's sync ${Number(m.match(/^cnikit_node_agent_last_sync_duration_seconds (\S+)$/m)?.[1]).toFixed(2)} s; ` +
        `real routes checked at ${polls} polls and by ${events.length} route events`,
    );
  } finally {
    stop = true;
    await poller;
    monitor.kill();
    await monitorClosed;
    spawnSync('ip', ['-n', n1.netns, 'route', 'del', CONFLICT.cidr, 'proto', 'static']);
    spawnSync('ip', ['-n', n1.netns, 'route', 'del', FOREIGN, 'proto', 'static']);
    // one DELETE of the collection (kubectl delete -l sends one request per object, 5 a second); on a loaded
    // machine the request can time out with part of the collection left: sent again until none is left
    for (let i = 0; ; i++) {
      const del = await kubectlAsync(
        ['delete', '--raw', '/api/v1/nodes?labelSelector=cnikit-test%3Dfake'],
        '',
      );
      const left = c().kubectl([
        'get',
        'nodes',
        '-l',
        'cnikit-test=fake',
        '-o',
        'name',
        '--request-timeout=30s',
      ]);
      if (left.status === 0 && left.stdout.trim() === '') break;
      assert.ok(
        i < 5,
        `the simulated Node objects not deleted after ${i + 1} tries: ${del.stderr}${left.stderr}`,
      );
      console.log(`# DELETE of the simulated nodes: ${del.status} ${del.stderr.trim()}; sent again`);
    }
  }
  const touched = events.filter(
    (l) =>
      real.some((d) => l.includes(`${d} `)) || l.includes(`${FOREIGN} `) || l.includes(`via 192.168.240.99`),
  );
  assert.equal(lost, '', 'a route of a running pod changed');
  assert.deepEqual(
    touched,
    [],
    'no route to a real node nor a foreign route deleted or changed, even between polls',
  );
  assert.ok(polls >= 10, `${polls} polls`);
  assert.equal(restarts(), restartsBefore + 2, 'the kubelet restarted serve twice');
  await until(
    'the simulated peers’ routes gone',
    300_000,
    () => agentRoutesUnder(n1, FAKE_ROOT).length === 0,
  );
  assert.equal(fetchFrom('web-n2', getPod('web-n1').status.podIP as string), 'hello-web-n1');
});

test('bad ConfigMap values: the pod is not ready (/readyz 503 in its probe), the log names the key, routes untouched', async () => {
  const n2 = node('n2');
  await until('n2 routes the real nodes only', 120_000, () => agentRoutes(n2).size === podCidrs.size - 1);
  const before = [...agentRoutes(n2)].sort().join('\n');
  assert.ok(before.split('\n').length >= 2);
  for (const [key, value] of [
    ['node-agent-mode', 'bgp'],
    ['vxlan-id', '16777216'],
    ['cluster-cidr', '10.244.0.0/33'],
  ] as const) {
    // a merge patch: the good values (and no vxlan-id) first, so only this one key is bad
    patchConfig({ ...AGENT, 'vxlan-id': null, [key]: value });
    const old = cnikitPod('n2') as PodJson;
    kubectl(['-n', 'kube-system', 'delete', 'pod', old.metadata.name, '--wait=true', '--timeout=120s']);
    const pod = await until(
      `a new cnikit pod on n2 with its serve container started (${key})`,
      180_000,
      () => {
        const p = cnikitPod('n2');
        return p &&
          p.metadata.name !== old.metadata.name &&
          p.status.containerStatuses?.find((x) => x.name === 'serve')?.state?.running
          ? p
          : undefined;
      },
    );
    const name = pod.metadata.name;
    const [status, body] = await until(`/readyz 503 on n2 (${key})`, 120_000, () => {
      const r = nodeHttp(n2, 9809, '/readyz');
      return r[0] === 503 ? r : undefined;
    });
    assert.equal(status, 503);
    assert.match(body, new RegExp(`ConfigMap key ${key} `));
    // the readiness probe failed with that line (an event of the pod), and the pod is not ready
    await until(`the probe of ${name} fails naming ${key}`, 120_000, () => {
      const ev = kubectl([
        '-n',
        'kube-system',
        'get',
        'events',
        '--field-selector',
        `involvedObject.name=${name}`,
        '-o',
        'json',
      ]);
      return (JSON.parse(ev).items as { reason: string; message: string }[]).some(
        (e) =>
          e.reason === 'Unhealthy' &&
          e.message.includes('Readiness probe failed') &&
          e.message.includes(`ConfigMap key ${key}`),
      );
    });
    const now = getPod(name, 'kube-system');
    assert.equal(
      now.status.conditions?.find((x) => x.type === 'Ready')?.status,
      'False',
      `${key}: not ready`,
    );
    assert.match(
      kubectl(['-n', 'kube-system', 'logs', name, '-c', 'serve']),
      new RegExp(`node agent: ConfigMap key ${key} .*nothing is programmed`),
    );
    assert.equal([...agentRoutes(n2)].sort().join('\n'), before, `${key}: n2's routes untouched`);
  }
  // the good values back: ready again, same routes
  patchConfig({ ...AGENT, 'vxlan-id': null });
  const old = cnikitPod('n2') as PodJson;
  kubectl(['-n', 'kube-system', 'delete', 'pod', old.metadata.name, '--wait=true', '--timeout=120s']);
  await until('n2’s cnikit pod ready with the good values', 240_000, () => {
    const p = cnikitPod('n2');
    return p !== undefined && p.metadata.name !== old.metadata.name && podReady(p);
  });
  assert.equal([...agentRoutes(n2)].sort().join('\n'), before);
});
