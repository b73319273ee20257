/**
 * cnikit as the whole cluster network on the lab cluster (scripts/k8s/cluster.ts, docs/lab-cluster.md): the
 * DaemonSet of deploy/kubernetes/ with its node agent on (ConfigMap node-agent "on") and no other provider. Three
 * clusters, all dual stack: 2 nodes on one underlay subnet in host-gw mode; 3 nodes each on a subnet of its own
 * (routed by the underlay's router namespace) in vxlan mode; 3 nodes in auto mode on a mixed underlay (n1 and n2
 * share a subnet and use host-gw between them, n3 is on another and is reached through VXLAN; the conflist's MTU is
 * the VXLAN one on every node). On each: the agents' routes to every peer's
 * podCIDRs; pods of different nodes exchange TCP, UDP and ICMP both ways over IPv4 and IPv6, and the receiver sees
 * the sending pod's address; a pod reaches a ClusterIP Service (TCP, UDP, both families) whose endpoint is on
 * another node, again with its own address as source; a NodePort answers from every node's address (from a pod,
 * from another node, from a host outside the cluster); a pod reaches the "outside" host with its node's address
 * as source (the agent's masquerade), IPv4 and IPv6.
 * The servers are test-netns/k8s/netecho.c (busybox's nc has no UDP), built here with cc -static and given to the
 * pods through a hostPath volume. Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Cluster, type ClusterOptions, startCluster } from '../../scripts/k8s/cluster.ts';
import { BUSYBOX_IMAGE } from '../../scripts/k8s/images.ts';
import { nodeTree } from '../../scripts/k8s/lab-node.ts';
import { ensureBuilt } from '../dist.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const PORT = 7000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const tools = mkdtempSync(join(tmpdir(), 'cnikit-netecho-'));
const NETECHO = join(tools, 'netecho');
let cluster: Cluster | undefined;
let outsideServer: ChildProcess | undefined;
after(async () => {
  outsideServer?.kill('SIGKILL');
  await cluster?.stop();
  rmSync(tools, { recursive: true, force: true });
});

function buildNetecho(): void {
  const r = spawnSync('cc', ['-static', '-Os', '-o', NETECHO, join(HERE, 'netecho.c')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `cc netecho.c: ${r.stderr}`);
}

type Pod = {
  metadata: { name: string };
  spec: { nodeName: string };
  status: { phase: string; podIPs?: { ip: string }[] };
};

const v6 = (ip: string) => ip.includes(':');

/** What a server pod on node `node` runs: netecho on TCP and UDP PORT. */
function serverPod(node: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `srv-${node}`, labels: { app: 'netsrv', node } },
    spec: {
      nodeName: node,
      dnsPolicy: 'Default',
      terminationGracePeriodSeconds: 1,
      volumes: [{ name: 'tools', hostPath: { path: tools, type: 'Directory' } }],
      containers: [
        {
          name: 'c',
          image: BUSYBOX_IMAGE,
          imagePullPolicy: 'Never',
          command: ['/tools/netecho', 'serve', String(PORT)],
          volumeMounts: [{ name: 'tools', mountPath: '/tools', readOnly: true }],
        },
      ],
    },
  };
}

/** One line per probe: `PROTO ADDR RESULT`; ping's summary for icmp. */
function probeScript(probes: { proto: 'tcp' | 'udp' | 'icmp'; ip: string; port?: number }[], msg: string) {
  return probes
    .map(({ proto, ip, port }) =>
      proto === 'icmp'
        ? `echo "icmp ${ip} $(ping -c 2 -W 5 ${ip} 2>&1 | tail -2 | tr '\\n' ' ')"`
        : `echo "${proto} ${ip} $(/tools/netecho ${proto} ${ip} ${port ?? PORT} ${msg} 2>&1)"`,
    )
    .join('\n');
}

function parseProbes(out: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const line of out.trim().split('\n')) {
    const [proto, ip, ...rest] = line.split(' ');
    m.set(`${proto} ${ip}`, rest.join(' ').trim());
  }
  return m;
}

interface Expect {
  mode: 'host-gw' | 'vxlan' | 'auto';
  nodes: number;
}

type Node = Cluster['nodes'][number];
/** The nodes' IPv4 underlay subnet (all the lab's underlays are /24s). */
const subnetOf = (n: Node) => n.ip.split('.').slice(0, 3).join('.');
/** How a node's agent reaches a peer: auto picks host-gw for a peer on its own subnet, VXLAN for the others. */
function pathTo(mode: Expect['mode'], n: Node, p: Node): 'host-gw' | 'vxlan' {
  if (mode !== 'auto') return mode;
  return subnetOf(n) === subnetOf(p) ? 'host-gw' : 'vxlan';
}

/** Every check of the file on one cluster; returns timings. */
async function checkNetwork(c: Cluster, e: Expect): Promise<Record<string, number>> {
  const times: Record<string, number> = {};
  const kubectl = (args: string[], input?: string) => {
    const r = c.kubectl(args, { input, timeout: 120_000 });
    assert.equal(r.status, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const exec = (pod: string, script: string) => kubectl(['exec', pod, '--', 'sh', '-c', script]);
  assert.equal(c.nodes.length, e.nodes);
  for (const n of c.nodes) assert.equal(n.podCIDRs.length, 2, `${n.name} has a v4 and a v6 podCIDR`);

  // the DaemonSet's pods run on every node
  for (let t0 = Date.now(); ; ) {
    const st = JSON.parse(kubectl(['-n', 'kube-system', 'get', 'daemonset', 'cnikit', '-o', 'json'])).status;
    if (st.numberReady === e.nodes) break;
    assert.ok(Date.now() - t0 < 180_000, `the DaemonSet is not ready on every node: ${JSON.stringify(st)}`);
    await sleep(1000);
  }

  // every node's agent routes every peer's podCIDRs (protocol 157): host-gw via the peer's underlay address on
  // eth0, vxlan onlink through cnikit.1 (the nodes share no subnet)
  const r0 = Date.now();
  const routesOk = (n: Cluster['nodes'][number]) => {
    const problems: string[] = [];
    for (const fam of ['-4', '-6']) {
      const routes = JSON.parse(n.exec('ip', ['-json', fam, 'route', 'show', 'proto', '157']).stdout) as {
        dst: string;
        gateway?: string;
        dev: string;
        flags?: string[];
      }[];
      for (const p of c.nodes) {
        if (p === n) continue;
        const cidr = p.podCIDRs.find((x) => v6(x) === (fam === '-6')) as string;
        const r = routes.find((x) => x.dst === cidr);
        const path = pathTo(e.mode, n, p);
        if (!r) problems.push(`${n.name}: no route to ${p.name}'s ${cidr}`);
        else if (path === 'host-gw' && (r.dev !== 'eth0' || r.gateway !== (fam === '-6' ? p.ip6 : p.ip)))
          problems.push(`${n.name}: ${cidr} ${JSON.stringify(r)} is not via ${p.name}'s underlay address`);
        else if (path === 'vxlan' && (r.dev !== 'cnikit.1' || !r.flags?.includes('onlink')))
          problems.push(`${n.name}: ${cidr} ${JSON.stringify(r)} is not onlink via cnikit.1`);
      }
      const extra = routes.filter((r) => !c.nodes.some((p) => p !== n && p.podCIDRs.includes(r.dst)));
      if (extra.length) problems.push(`${n.name}: routes of no peer ${JSON.stringify(extra)}`);
    }
    return problems;
  };
  for (;;) {
    const problems = c.nodes.flatMap(routesOk);
    if (problems.length === 0) break;
    assert.ok(Date.now() - r0 < 120_000, `the node agents did not route the peers:\n${problems.join('\n')}`);
    await sleep(500);
  }
  times.routes = (Date.now() - r0) / 1000;
  // the agent is ready on every node (its /readyz on the node's loopback) and counts its peers and routes
  for (const n of c.nodes) {
    const ready = n.exec('curl', ['-sS', '-m', '10', 'http://127.0.0.1:9809/readyz']);
    assert.equal(ready.stdout, 'ok\n', `${n.name}'s agent is ready: ${ready.stdout}${ready.stderr}`);
    const metrics = n.exec('curl', ['-sS', '-m', '10', 'http://127.0.0.1:9743/metrics']).stdout;
    assert.match(
      metrics,
      new RegExp(`^cnikit_node_agent_nodes_known ${e.nodes}$`, 'm'),
      `${n.name}: nodes known`,
    );
    assert.match(
      metrics,
      new RegExp(`^cnikit_node_agent_routes_programmed ${2 * (e.nodes - 1)}$`, 'm'),
      `${n.name}: a route per peer and family`,
    );
    assert.match(metrics, /^cnikit_node_agent_ready 1$/m, `${n.name}: ready`);
    const last = Number(metrics.match(/^cnikit_node_agent_last_sync_timestamp_seconds (\S+)$/m)?.[1]);
    // the default resync is 30 s: the last sync is at most that old (a minute of slack for the load)
    assert.ok(Date.now() / 1000 - last < 90, `${n.name}: last sync ${last} is recent`);
    // no sync failed and no destination was held by someone else's route (API errors at start may be there)
    for (const kind of ['sync', 'conflict', 'nodes'])
      assert.doesNotMatch(
        metrics,
        new RegExp(`^cnikit_node_agent_errors_total\\{kind="${kind}"\\} [1-9]`, 'm'),
        `${n.name}: no ${kind} error`,
      );
  }
  if (e.mode === 'auto') {
    // the lab's mixed underlay: both kinds of pair are there
    const paths = c.nodes.flatMap((n) => c.nodes.filter((p) => p !== n).map((p) => pathTo(e.mode, n, p)));
    assert.ok(paths.includes('host-gw') && paths.includes('vxlan'), `pairs of both kinds: ${paths}`);
  }
  if (e.mode !== 'host-gw') {
    // vxlan and auto: the VXLAN device on every node, and the conflist's MTU leaves room for its header on every
    // node, also where auto has only host-gw peers so far (a pod's MTU is fixed at its creation; a peer on another
    // subnet may join later)
    for (const n of c.nodes) {
      const [link] = JSON.parse(n.exec('ip', ['-json', '-d', 'link', 'show', 'cnikit.1']).stdout);
      assert.equal(link.linkinfo.info_kind, 'vxlan');
      assert.equal(link.linkinfo.info_data.id, 1);
      assert.equal(link.mtu, 1450);
      const conflist = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist'), 'utf8'));
      assert.equal(conflist.plugins[0].mtu, 1450, "the conflist's MTU leaves room for VXLAN");
    }
  }
  for (const n of c.nodes) {
    const conflist = JSON.parse(readFileSync(join(nodeTree(n.dir).confDir, '10-cnikit.conflist'), 'utf8'));
    assert.deepEqual(
      conflist.plugins[0].ipam.ranges,
      n.podCIDRs.map((subnet) => [{ subnet }]),
      `install-cni wrote both of ${n.name}'s podCIDRs as host-local ranges`,
    );
    assert.equal(conflist.plugins[0].ipMasq, false, 'the agent masquerades, not the bridge plugin');
    if (e.mode === 'host-gw') assert.equal(conflist.plugins[0].mtu, 1500, "host-gw: the underlay's MTU");
  }

  // a server pod on every node
  kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: c.nodes.map((n) => serverPod(n.name)) }),
  );
  const p0 = Date.now();
  let pods: Pod[] = [];
  for (;;) {
    pods = JSON.parse(kubectl(['get', 'pods', '-l', 'app=netsrv', '-o', 'json'])).items;
    if (
      pods.length === e.nodes &&
      pods.every((p) => p.status.phase === 'Running' && p.status.podIPs?.length === 2)
    )
      break;
    assert.ok(Date.now() - p0 < 120_000, `pods not Running:\n${kubectl(['get', 'pods', '-o', 'wide'])}`);
    await sleep(500);
  }
  times.pods = (Date.now() - p0) / 1000;
  const ips = (node: string) =>
    (pods.find((p) => p.metadata.name === `srv-${node}`)?.status.podIPs ?? []).map((x) => x.ip);
  for (const n of c.nodes) {
    const [a4, a6] = ips(n.name);
    assert.ok(a4 && !v6(a4) && a6 && v6(a6), `srv-${n.name} has an IPv4 and an IPv6 address: ${ips(n.name)}`);
  }

  // pod to pod across nodes, every ordered pair: TCP, UDP, ICMP over both families; the receiver saw the sender
  const t0 = Date.now();
  for (const a of c.nodes) {
    for (const b of c.nodes) {
      if (a === b) continue;
      const to = ips(b.name);
      const out = parseProbes(
        exec(
          `srv-${a.name}`,
          probeScript(
            to.flatMap((ip) => [
              { proto: 'tcp', ip },
              { proto: 'udp', ip },
              { proto: 'icmp', ip },
            ]),
            `from-${a.name}`,
          ),
        ),
      );
      for (const ip of to) {
        const src = ips(a.name).find((x) => v6(x) === v6(ip));
        for (const proto of ['tcp', 'udp'])
          assert.equal(
            out.get(`${proto} ${ip}`),
            `PEER ${src} from-${a.name}`,
            `${proto} ${a.name} → ${b.name} ${ip}`,
          );
        assert.match(
          out.get(`icmp ${ip}`) ?? '',
          /2 packets transmitted, 2 packets received, 0% packet loss/,
          `ping ${a.name} → ${b.name} ${ip}`,
        );
      }
    }
  }
  // the servers' own log: what each received, from whom
  for (const b of c.nodes) {
    const log = kubectl(['logs', `srv-${b.name}`]);
    for (const a of c.nodes) {
      if (a === b) continue;
      for (const src of ips(a.name)) {
        for (const proto of ['tcp', 'udp'])
          assert.ok(
            log.includes(`${proto} from ${src}: from-${a.name}`),
            `srv-${b.name} logged ${proto} from ${src}`,
          );
      }
    }
  }
  times.podToPod = (Date.now() - t0) / 1000;

  // a ClusterIP Service (both families) and a NodePort whose only endpoint is the last node's pod
  const last = c.nodes[c.nodes.length - 1] as Cluster['nodes'][number];
  const first = c.nodes[0] as Cluster['nodes'][number];
  const svc = (name: string, type: string) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name },
    spec: {
      type,
      ipFamilyPolicy: 'PreferDualStack',
      selector: { app: 'netsrv', node: last.name },
      ports: [
        { name: 'tcp', protocol: 'TCP', port: PORT, targetPort: PORT },
        { name: 'udp', protocol: 'UDP', port: PORT, targetPort: PORT },
      ],
    },
  });
  kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [svc('echo', 'ClusterIP'), svc('echo-np', 'NodePort')],
    }),
  );
  const s0 = Date.now();
  const echo = JSON.parse(kubectl(['get', 'service', 'echo', '-o', 'json'])).spec as { clusterIPs: string[] };
  assert.equal(echo.clusterIPs.length, 2, `a ClusterIP per family: ${echo.clusterIPs}`);
  const np = JSON.parse(kubectl(['get', 'service', 'echo-np', '-o', 'json'])).spec as {
    ports: { protocol: string; nodePort: number }[];
  };
  const nodePort = (proto: string) => np.ports.find((p) => p.protocol === proto)?.nodePort as number;
  // kube-proxy programs the Service once the endpoint is known: wait for it to answer, then check strictly
  for (;;) {
    const ok = echo.clusterIPs.every(
      (ip) =>
        c.kubectl(['exec', `srv-${first.name}`, '--', '/tools/netecho', 'tcp', ip, String(PORT), 'w'])
          .status === 0,
    );
    if (ok) break;
    assert.ok(Date.now() - s0 < 90_000, `the Service ${echo.clusterIPs} does not answer`);
    await sleep(1000);
  }
  times.service = (Date.now() - s0) / 1000;
  for (const a of c.nodes.filter((n) => n !== last)) {
    const out = parseProbes(
      exec(
        `srv-${a.name}`,
        probeScript(
          echo.clusterIPs.flatMap((ip) => [
            { proto: 'tcp', ip },
            { proto: 'udp', ip },
          ]),
          `svc-${a.name}`,
        ),
      ),
    );
    for (const ip of echo.clusterIPs) {
      const src = ips(a.name).find((x) => v6(x) === v6(ip));
      for (const proto of ['tcp', 'udp'])
        assert.equal(
          out.get(`${proto} ${ip}`),
          `PEER ${src} svc-${a.name}`,
          `${proto} ${a.name} → ClusterIP ${ip} (endpoint on ${last.name}), not masqueraded`,
        );
    }
  }
  // the NodePort on every node's address, from a pod of the first node (kube-proxy masquerades NodePort traffic:
  // the answer is what counts), then from the first node itself to the last node's port
  const npOut = parseProbes(
    exec(
      `srv-${first.name}`,
      probeScript(
        c.nodes.flatMap((n) => [
          { proto: 'tcp', ip: n.ip, port: nodePort('TCP') },
          { proto: 'udp', ip: n.ip, port: nodePort('UDP') },
        ]),
        'np',
      ),
    ),
  );
  for (const n of c.nodes)
    for (const proto of ['tcp', 'udp'])
      assert.match(
        npOut.get(`${proto} ${n.ip}`) ?? '',
        /^PEER \S+ np$/,
        `${proto} NodePort on ${n.name} (${n.ip})`,
      );
  for (const proto of ['tcp', 'udp']) {
    const r = first.exec(NETECHO, [proto, last.ip, String(nodePort(proto.toUpperCase())), 'node']);
    assert.equal(r.status, 0, `${proto} from node ${first.name} to ${last.name}'s NodePort: ${r.stderr}`);
    assert.match(r.stdout, /^PEER \S+ node\n$/);
  }

  // the outside host: the pod's traffic leaves with its node's address (the agent's masquerade), both families;
  // a NodePort answers it too
  const out = c.outside as NonNullable<Cluster['outside']>;
  const outLog = join(tools, 'outside.log');
  outsideServer = spawn('ip', ['netns', 'exec', out.netns, NETECHO, 'serve', String(PORT)], {
    stdio: ['ignore', openSync(outLog, 'w'), 'inherit'],
  });
  for (let i = 0; !readFileSync(outLog, 'utf8').includes('listening'); i++) {
    assert.ok(i < 100, 'the outside server did not start');
    await sleep(100);
  }
  // the first packets to the outside host cross the router for the first time: wait for an answer (bounded), then
  // check strictly
  const o0 = Date.now();
  for (;;) {
    const r = c.kubectl([
      'exec',
      `srv-${first.name}`,
      '--',
      '/tools/netecho',
      'tcp',
      out.ip,
      String(PORT),
      'w',
    ]);
    if (r.status === 0) break;
    assert.ok(Date.now() - o0 < 60_000, `the outside host does not answer: ${r.stdout}${r.stderr}`);
    await sleep(1000);
  }
  times.outside = (Date.now() - o0) / 1000;
  for (const a of c.nodes) {
    const res = parseProbes(
      exec(
        `srv-${a.name}`,
        probeScript(
          [out.ip, out.ip6].flatMap((ip) => [
            { proto: 'tcp', ip },
            { proto: 'udp', ip },
            { proto: 'icmp', ip },
          ]),
          `out-${a.name}`,
        ),
      ),
    );
    for (const ip of [out.ip, out.ip6]) {
      const node = v6(ip) ? a.ip6 : a.ip;
      for (const proto of ['tcp', 'udp'])
        assert.equal(
          res.get(`${proto} ${ip}`),
          `PEER ${node} out-${a.name}`,
          `${proto} ${a.name}'s pod → outside ${ip}`,
        );
      assert.match(res.get(`icmp ${ip}`) ?? '', /2 packets received/, `ping ${a.name}'s pod → outside ${ip}`);
    }
  }
  const seen = readFileSync(outLog, 'utf8');
  for (const a of c.nodes) {
    assert.ok(seen.includes(`tcp from ${a.ip}: out-${a.name}`), `the outside host saw ${a.name}'s address`);
    for (const p of ips(a.name))
      assert.ok(!seen.includes(`from ${p}:`), `the outside host never saw pod ${p}`);
  }
  outsideServer.kill('SIGKILL');
  outsideServer = undefined;
  for (const proto of ['tcp', 'udp']) {
    const r = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        out.netns,
        NETECHO,
        proto,
        first.ip,
        String(nodePort(proto.toUpperCase())),
        'outside',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    assert.equal(r.status, 0, `${proto} outside → ${first.name}'s NodePort: ${r.stderr}`);
    assert.match(r.stdout, /^PEER \S+ outside\n$/);
  }
  return times;
}

async function run(name: string, opts: ClusterOptions, e: Expect) {
  const t0 = Date.now();
  cluster = await startCluster({
    name: `agent${name}${process.pid % 100_000}`,
    cni: 'daemonset',
    outside: true,
    dualStack: true,
    // up took 225–310 s at load 25–60 (2 and 3 nodes): twice the default wait for Ready
    readyTimeoutMs: 480_000,
    ...opts,
  });
  const up = (Date.now() - t0) / 1000;
  try {
    const times = await checkNetwork(cluster, e);
    process.stderr.write(
      `cluster network ${e.mode}, ${e.nodes} nodes: up ${up.toFixed(1)} s, agent routes ${times.routes?.toFixed(1)} s after up, ` +
        `pods Running ${times.pods?.toFixed(1)} s, pod-to-pod checks ${times.podToPod?.toFixed(1)} s, Service answering ${times.service?.toFixed(1)} s, outside answering ${times.outside?.toFixed(1)} s\n`,
    );
  } finally {
    outsideServer?.kill('SIGKILL');
    outsideServer = undefined;
    await cluster.stop();
    cluster = undefined;
  }
}

test('host-gw, dual stack, 2 nodes on one subnet: pod to pod (TCP, UDP, ICMP; v4, v6), Services, NodePort, masquerade to the outside', async () => {
  ensureBuilt();
  buildNetecho();
  await run('h', { nodes: 2, nodeAgent: 'host-gw' }, { mode: 'host-gw', nodes: 2 });
});

test('vxlan, dual stack, 3 nodes each on its own routed subnet: pod to pod (TCP, UDP, ICMP; v4, v6), Services, NodePort, masquerade to the outside', async () => {
  ensureBuilt();
  buildNetecho();
  await run('v', { nodes: 3, nodeAgent: 'vxlan', underlay: 'routed' }, { mode: 'vxlan', nodes: 3 });
});

test('auto, dual stack, 3 nodes: n1 and n2 on one subnet (host-gw between them), n3 on a routed subnet of its own (VXLAN to it): pod to pod over both kinds of pair, Services, NodePort, masquerade', async () => {
  ensureBuilt();
  buildNetecho();
  await run('a', { nodes: 3, nodeAgent: 'auto', underlay: 'mixed' }, { mode: 'auto', nodes: 3 });
});
