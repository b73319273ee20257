/**
 * The lab cluster (scripts/k8s/cluster.ts, docs/lab-cluster.md): a control plane and two nodes, each with its own
 * network, mount, PID and cgroup namespaces, a private containerd, a kubelet and a kube-proxy; cnikit comes from
 * the DaemonSet of deploy/kubernetes/ (image built from dist-bin, imported on each node), whose install-cni renders
 * the bridge + host-local conflist on the node's podCIDR and whose serve container runs warm mode. Driven through kubectl: both nodes Ready, a pod pinned to each node gets
 * an address of that node's podCIDR, reaches another pod of its node and the API server through the `kubernetes`
 * Service (kube-proxy's DNAT); deleting the pods leaves no veth, reservation or cached result; stopping the cluster
 * leaves the machine's network namespace, its sysctls, its cgroup trees and the scratch space as they were.
 * Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { diffHostState, hostState } from '../../scripts/host-state.mjs';
import { hierarchies } from '../../scripts/k8s/cgroups.ts';
import { CLUSTER_CIDR, type Cluster, startCluster } from '../../scripts/k8s/cluster.ts';
import { SERVICE_IP } from '../../scripts/k8s/control-plane.ts';
import { BUSYBOX_IMAGE } from '../../scripts/k8s/images.ts';
import { KERNEL_DEFAULTS, nodeTree } from '../../scripts/k8s/lab-node.ts';
import { ensureBuilt } from '../dist.ts';

let cluster: Cluster | undefined;
after(async () => {
  await cluster?.stop();
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

function pod(name: string, node: string, script: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'lab-test' } },
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

test('a 2-node lab cluster: the DaemonSet on both nodes, Ready nodes, pods on each node with podCIDR addresses, pod-to-pod and the kubernetes Service, clean delete and down', async () => {
  ensureBuilt();
  const netBefore = hostState();
  const knobsBefore = kernelKnobs();
  const top = `cnikit-t${process.pid}`;

  const t0 = Date.now();
  cluster = await startCluster({ nodes: 2, name: `t${process.pid}`, cni: 'daemonset' });
  const upSeconds = (Date.now() - t0) / 1000;
  const c = cluster;
  const kubectl = (args: string[], input?: string) => {
    const r = c.kubectl(args, { input, timeout: 120_000 });
    assert.equal(r.status, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };

  // both nodes Ready, each with its own /24 of the cluster CIDR
  const nodes = JSON.parse(kubectl(['get', 'nodes', '-o', 'json'])).items as {
    metadata: { name: string };
    spec: { podCIDR: string };
    status: {
      conditions: { type: string; status: string }[];
      addresses: { type: string; address: string }[];
    };
  }[];
  assert.deepEqual(nodes.map((n) => n.metadata.name).sort(), ['n1', 'n2']);
  for (const n of nodes) {
    assert.ok(
      n.status.conditions.some((x) => x.type === 'Ready' && x.status === 'True'),
      `${n.metadata.name} Ready`,
    );
    assert.match(n.spec.podCIDR, /^10\.244\.\d+\.0\/24$/);
    assert.ok(inCidr(n.spec.podCIDR.split('/')[0] ?? '', CLUSTER_CIDR));
    const lab = c.nodes.find((x) => x.name === n.metadata.name);
    assert.equal(lab?.podCIDR, n.spec.podCIDR);
    assert.deepEqual(
      n.status.addresses.find((a) => a.type === 'InternalIP')?.address,
      lab?.ip,
      'the node registered its underlay address',
    );
  }
  assert.notEqual(nodes[0]?.spec.podCIDR, nodes[1]?.spec.podCIDR);

  // the DaemonSet rolled out on both nodes; its install-cni wrote each node's conflist with that node's podCIDR
  const ds = JSON.parse(kubectl(['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json']));
  assert.equal(ds.status.desiredNumberScheduled, 2);
  for (const n of c.nodes) {
    const conflist = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist'), 'utf8'));
    assert.deepEqual(conflist.plugins[0].ipam.ranges, [[{ subnet: n.podCIDR }]]);
  }
  for (let i = 0; ; i++) {
    const st = JSON.parse(kubectl(['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json'])).status;
    if (st.numberReady === 2) break;
    assert.ok(i < 120, `the DaemonSet is not ready on both nodes: ${JSON.stringify(st)}`);
    await sleep(1000);
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
    for (const [k, v] of Object.entries(KERNEL_DEFAULTS)) {
      assert.equal(
        n.exec('cat', [`/proc/sys/${k}`]).stdout.trim(),
        v,
        `${k} as kubelet wants it on ${n.name}`,
      );
    }
  }
  assert.deepEqual(
    kernelKnobs(),
    knobsBefore,
    "the machine's kernel knobs are untouched while the cluster runs",
  );

  // a server and a client pod on each node
  for (const n of c.nodes) {
    kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          pod(
            `web-${n.name}`,
            n.name,
            `mkdir -p /www && echo hello-from-${n.name} > /www/index.html && exec httpd -f -v -p 8080 -h /www`,
          ),
          pod(`cli-${n.name}`, n.name, 'exec sleep 3600'),
        ],
      }),
    );
  }
  const podsT0 = Date.now();
  type Pod = {
    metadata: { name: string };
    spec: { nodeName: string };
    status: { phase: string; podIP?: string };
  };
  let pods: Pod[] = [];
  for (;;) {
    pods = JSON.parse(kubectl(['get', 'pods', '-l', 'app=lab-test', '-o', 'json'])).items;
    if (pods.length === 4 && pods.every((p) => p.status.phase === 'Running' && p.status.podIP)) break;
    assert.ok(Date.now() - podsT0 < 120_000, `pods not Running:\n${kubectl(['get', 'pods', '-o', 'wide'])}`);
    await sleep(500);
  }
  const podsSeconds = (Date.now() - podsT0) / 1000;
  const ipOf = (name: string) => pods.find((p) => p.metadata.name === name)?.status.podIP ?? '';
  for (const n of c.nodes) {
    for (const p of [`web-${n.name}`, `cli-${n.name}`]) {
      assert.ok(inCidr(ipOf(p), n.podCIDR), `${p} ${ipOf(p)} is in ${n.name}'s podCIDR ${n.podCIDR}`);
      assert.equal(pods.find((x) => x.metadata.name === p)?.spec.nodeName, n.name);
    }
    // another pod of the same node, over the node's bridge
    const web = kubectl([
      'exec',
      `cli-${n.name}`,
      '--',
      'timeout',
      '10',
      'wget',
      '-qO-',
      `http://${ipOf(`web-${n.name}`)}:8080/`,
    ]);
    assert.equal(web.trim(), `hello-from-${n.name}`);
    // the API server through the kubernetes Service's ClusterIP: kube-proxy's DNAT in the node's namespace
    const version = kubectl([
      'exec',
      `cli-${n.name}`,
      '--',
      'timeout',
      '10',
      'wget',
      '-qO-',
      '--no-check-certificate',
      `https://${SERVICE_IP}/version`,
    ]);
    assert.equal(JSON.parse(version).gitVersion, 'v1.20.2');
    const nat = n.exec('iptables', ['-t', 'nat', '-S', 'KUBE-SERVICES']).stdout;
    assert.match(nat, new RegExp(`-d ${SERVICE_IP.replaceAll('.', '\\.')}/32 .*default/kubernetes:https`));
    // the server logged the client's request (kubectl logs through the kubelet)
    const logs = kubectl(['logs', `web-${n.name}`]);
    assert.match(logs, new RegExp(ipOf(`cli-${n.name}`).replaceAll('.', '\\.')));
  }

  // the cluster's cgroups are under this process's own cgroup in every hierarchy (a root child only where this
  // process is at the root), one subtree per node, and the containers' cgroups are inside the nodes' subtrees
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
      const children = readdirSync(sub).filter((e) => statSync(join(sub, e)).isDirectory());
      assert.ok(children.length > 0, `runc made the pods' cgroups under ${sub}`);
    }
  }

  // deleting the pods leaves nothing of them on the nodes
  kubectl(['delete', 'pods', '-l', 'app=lab-test', '--wait=true', '--timeout=90s']);
  for (const n of c.nodes) {
    const links = JSON.parse(n.exec('ip', ['-json', 'link', 'show']).stdout) as {
      ifname: string;
      linkinfo?: { info_kind?: string };
    }[];
    const veths = links.filter((l) => l.linkinfo?.info_kind === 'veth' || /^veth/.test(l.ifname));
    // eth0 is the node's own underlay veth
    assert.deepEqual(
      veths.map((l) => l.ifname).filter((x) => x !== 'eth0'),
      [],
      `no pod veth left on ${n.name}`,
    );
    const t = nodeTree(n.dir);
    const store = join(t.varLibCni, 'networks', 'cnikit');
    const left = readdirSync(store).filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'));
    assert.deepEqual(left, [], `no host-local reservation left on ${n.name}`);
    const results = join(t.varLibCni, 'results');
    assert.deepEqual(
      existsSync(results) ? readdirSync(results) : [],
      [],
      `no cached result left on ${n.name}`,
    );
  }

  const d0 = Date.now();
  await c.stop();
  cluster = undefined;
  const downSeconds = (Date.now() - d0) / 1000;
  process.stderr.write(
    `lab cluster: up ${upSeconds.toFixed(1)} s (2 nodes), 4 pods Running in ${podsSeconds.toFixed(1)} s, down ${downSeconds.toFixed(1)} s\n`,
  );

  // nothing is left: the machine's network namespace, its kernel knobs, its cgroups, namespaces, processes, files
  assert.deepEqual(diffHostState(netBefore, hostState()).problems, []);
  assert.deepEqual(kernelKnobs(), knobsBefore);
  assert.deepEqual(clusterCgroups(top), [], 'no cgroup of the cluster is left');
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
