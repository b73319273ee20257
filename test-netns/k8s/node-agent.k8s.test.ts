/**
 * The node agent (`cnikit serve --node-agent`, packages/warm/src/node-agent/) against a real kube-apiserver
 * (scripts/k8s/control-plane.ts) with "nodes" that are network namespaces (./node-agent-lab.ts): host-gw and VXLAN
 * routes between pod namespaces of different nodes, IPv4 and IPv6, node add/delete, reconcile, restarts, an API
 * server outage, masquerading and bad configuration. Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type ControlPlane, startControlPlane } from '../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../scripts/k8s-build.mjs';
import { ensureBuilt } from '../dist.ts';
import {
  askSource,
  ECHO_PORT,
  ipn,
  Lab,
  type LabNode,
  OUTSIDE_IP,
  sh,
  udpStream,
  whoami,
} from './node-agent-lab.ts';

const tag = `cnna${process.pid % 100000}`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-node-agent-test-'));
let cp: ControlPlane | undefined;
let lab: Lab;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, what: string, ms = 15_000, step = 50): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    if (cond()) return performance.now() - t0;
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(step);
  }
}

const node = (name: string) => lab.nodes.get(name) as LabNode;
const hostGw = (peer: LabNode) => [
  `${peer.podCidrs[0]} via ${peer.ip4} dev eth0`,
  `${peer.podCidrs[1]} via ${peer.ip6} dev eth0`,
];

before(async () => {
  ensureBuilt();
  const { dir: cacheDir } = await k8sBinaries();
  cp = await startControlPlane({
    binDir: join(cacheDir, 'bin'),
    dir: join(dir, 'cp'),
    netns: `${tag}-cp`,
    apiserverArgs: ['--feature-gates=IPv6DualStack=true'],
  });
  lab = new Lab(cp, tag, dir);
  lab.setupHub();
  lab.serviceAccount();
});

after(async () => {
  await lab?.destroy();
  await cp?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('host-gw: every node routes the peers’ pod CIDRs via their InternalIP; pods reach each other both ways (UDP and TCP), IPv4 and IPv6', async () => {
  const [a, b, c] = [lab.addNode('a', 1), lab.addNode('b', 2), lab.addNode('c', 3)];
  for (const n of [a, b, c]) lab.createNodeObject(n);
  for (const n of [a, b, c]) lab.startAgent(n, { CNIKIT_NODE_AGENT_MODE: 'host-gw' });
  await lab.startEchoes();
  for (const [n, peers] of [
    [a, [b, c]],
    [b, [a, c]],
    [c, [a, b]],
  ] as const)
    await until(
      () => JSON.stringify(lab.routes(n)) === JSON.stringify(peers.flatMap(hostGw).sort()),
      `node ${n.name}'s routes (${lab.routes(n).join('; ')})\n${lab.log(n)}`,
    );
  for (const [x, y] of [
    [a, b],
    [b, a],
    [a, c],
    [c, b],
  ] as const) {
    assert.ok(lab.reaches(x, y.pod4), `pod ${x.name} → pod ${y.name} ${y.pod4}`);
    assert.ok(lab.reaches(x, y.pod6), `pod ${x.name} → pod ${y.name} ${y.pod6}`);
  }
  // no VXLAN device in host-gw mode, readiness and metrics
  assert.equal(spawnSync('ip', ['-n', a.ns, 'link', 'show', 'cnikit.1']).status, 1);
  assert.deepEqual(lab.http(a, 9809, '/readyz'), [200, 'ok\n']);
  const [st, metrics] = lab.http(a, 9808, '/metrics');
  assert.equal(st, 200);
  assert.match(metrics, /^cnikit_node_agent_ready 1$/m);
  assert.match(metrics, /^cnikit_node_agent_nodes_known 3$/m);
  assert.match(metrics, /^cnikit_node_agent_routes_programmed 4$/m);
  assert.match(metrics, /^cnikit_node_agent_last_sync_timestamp_seconds \d/m);
});

test('a route deleted by hand comes back at the next reconcile; a foreign route is never touched', async () => {
  const a = node('a');
  const b = node('b');
  ipn(a.ns, 'route', 'add', '10.250.0.0/24', 'via', b.ip4, 'proto', 'static');
  ipn(a.ns, 'route', 'add', 'fd00:250::/64', 'via', b.ip6);
  ipn(a.ns, 'route', 'del', b.podCidrs[0]);
  const back = await until(
    () => lab.routes(a).includes(hostGw(b)[0] as string),
    'the deleted route back',
    10_000,
  );
  assert.ok(back < 5000, `back after ${Math.round(back)} ms (resync every 2 s)`);
  await sleep(4500); // two more resyncs
  const all = sh('ip', ['-n', a.ns, 'route', 'show']) + sh('ip', ['-n', a.ns, '-6', 'route', 'show']);
  assert.match(all, /^10\.250\.0\.0\/24 via 192\.168\.50\.12 dev eth0 proto static $/m);
  assert.match(all, /^fd00:250::\/64 via fd00:50::12 dev eth0 metric 1024 /m);
  ipn(a.ns, 'route', 'del', '10.250.0.0/24');
  ipn(a.ns, 'route', 'del', 'fd00:250::/64');
});

test('masquerade: pod → outside arrives with the node address, pod → pod keeps the pod address', async () => {
  const a = node('a');
  const b = node('b');
  const out = await whoami(`${tag}-out`, 7070);
  const atB = await whoami(b.podNs, 7070);
  try {
    assert.equal(askSource(a.podNs, OUTSIDE_IP, 7070), a.ip4);
    assert.equal(askSource(a.podNs, b.pod4, 7070), a.pod4);
    assert.equal(askSource(a.podNs, b.pod6, 7070), a.pod6);
    // the node's own traffic is not the chain's business (only the pod CIDRs jump to it)
    assert.equal(askSource(a.ns, OUTSIDE_IP, 7070), a.ip4);
  } finally {
    out.kill();
    atB.kill();
  }
  const nat = sh('ip', ['netns', 'exec', a.ns, 'iptables-save', '-t', 'nat']);
  assert.match(
    nat,
    /^-A POSTROUTING -s 10\.244\.1\.0\/24 -m addrtype ! --dst-type LOCAL .*-j CNIKIT-NODE-MASQ$/m,
  );
  assert.match(nat, /^-A CNIKIT-NODE-MASQ -d 10\.244\.0\.0\/16 .*-j RETURN$/m);
  assert.match(nat, /^-A CNIKIT-NODE-MASQ .*-j MASQUERADE$/m);
});

test('node added: its route is on every other node within 2 s; node deleted: its routes are gone', async () => {
  const [a, b, c] = [node('a'), node('b'), node('c')];
  const d = lab.addNode('d', 4);
  lab.startAgent(d, { CNIKIT_NODE_AGENT_MODE: 'host-gw' });
  // kubectl (a process started through `ip netns exec`) takes seconds on a loaded machine: the 2 s are counted from
  // its return (the object is stored), the whole time including kubectl is reported beside it
  const t0 = performance.now();
  lab.createNodeObject(d);
  const created = performance.now() - t0;
  // every node polled in each round, in-process through netlink (a process start per poll would dominate)
  const tAdd = performance.now();
  const onEach = new Map<string, number>();
  while (onEach.size < 3 && performance.now() - tAdd < 10_000) {
    for (const n of [a, b, c])
      if (!onEach.has(n.name) && lab.routeDsts(n).has(d.podCidrs[0]))
        onEach.set(n.name, performance.now() - tAdd);
    await sleep(5);
  }
  if (onEach.size < 3) lab.kubectl(['delete', 'node', 'd']);
  assert.equal(onEach.size, 3, `d's route on every node (${[...onEach.keys()].join(', ')})`);
  const worst = Math.max(...onEach.values());
  console.log(
    `node added → route on every node after kubectl returned: ${[...onEach.values()].map((t) => `${Math.round(t)} ms`).join(', ')} (kubectl create itself ${Math.round(created)} ms)`,
  );
  if (worst >= 2000) lab.kubectl(['delete', 'node', 'd']);
  assert.ok(worst < 2000, `route on every node within 2 s (worst ${Math.round(worst)} ms)`);
  await until(() => lab.routes(d).length === 6, "d's own routes");
  await lab.startEchoes();
  assert.ok(lab.reaches(a, d.pod4) && lab.reaches(d, a.pod6), 'pod a ↔ pod d');

  const t1 = performance.now();
  lab.kubectl(['delete', 'node', 'd']);
  for (const n of [a, b, c])
    await until(
      () => !lab.routes(n).some((r) => r.startsWith('10.244.4.') || r.startsWith('fd00:10:244:4:')),
      `d's routes gone on ${n.name}`,
      10_000,
      10,
    );
  console.log(`node deleted → routes gone on every node after ${Math.round(performance.now() - t1)} ms`);
  await lab.stopAgent(d);
  assert.deepEqual(lab.routes(a), [...hostGw(b), ...hostGw(c)].sort());
});

test('agent SIGKILLed and restarted: its routes stay in place throughout, no datagram lost', async () => {
  const [a, b, c] = [node('a'), node('b'), node('c')];
  const want = JSON.stringify([...hostGw(b), ...hostGw(c)].sort());
  // 80 datagrams pod b → pod a, one every 50 ms, while agent a is killed and started again
  const stream = udpStream(b.podNs, a.pod4, ECHO_PORT, 80, 50);
  let checks = 0;
  await lab.stopAgent(a, 'SIGKILL');
  const t0 = performance.now();
  while (performance.now() - t0 < 1000) {
    assert.equal(JSON.stringify(lab.routes(a)), want, 'routes while the agent is dead');
    checks++;
    await sleep(50);
  }
  lab.startAgent(a, { CNIKIT_NODE_AGENT_MODE: 'host-gw' });
  await until(() => {
    assert.equal(JSON.stringify(lab.routes(a)), want, 'routes while the agent starts');
    checks++;
    return lab.http(a, 9809, '/readyz')[0] === 200;
  }, 'agent a ready again');
  assert.equal(await stream, 80, 'every datagram answered');
  assert.ok(checks >= 3, `${checks} checks`);
  assert.match(lab.log(a), /0 change\(s\)/, 'the restarted agent changed nothing');
});

test('API server unreachable: routes stay; the agents converge once it is back', async () => {
  const [a, b, c] = [node('a'), node('b'), node('c')];
  const hub = lab.cp.netns;
  // both directions: the events flow from the apiserver to the agents
  const blocks = [
    ['INPUT', '-p', 'tcp', '--dport', '6443', '!', '-i', 'lo', '-j', 'DROP'],
    ['OUTPUT', '-p', 'tcp', '--sport', '6443', '!', '-o', 'lo', '-j', 'DROP'],
  ];
  for (const b of blocks) sh('ip', ['netns', 'exec', hub, 'iptables', '-w', '-I', ...b]);
  try {
    // a change the agents cannot see while the API server is unreachable
    lab.kubectl(['delete', 'node', 'c']);
    const t0 = performance.now();
    while (performance.now() - t0 < 12_000) {
      assert.deepEqual(lab.routes(a), [...hostGw(b), ...hostGw(c)].sort());
      await sleep(500);
    }
    assert.ok(lab.reaches(a, b.pod4));
  } finally {
    for (const b of blocks) sh('ip', ['netns', 'exec', hub, 'iptables', '-w', '-D', ...b]);
  }
  for (const n of [a, b])
    await until(
      () => !lab.routes(n).some((r) => r.startsWith('10.244.3.')),
      `c's routes gone on ${n.name}`,
      60_000,
      100,
    );
  lab.createNodeObject(c);
  for (const n of [a, b])
    await until(() => lab.routes(n).includes(hostGw(c)[0] as string), `c back on ${n.name}`);
});

test('auto mode: a node on another subnet (routed by the hub) is reached through VXLAN, the others by host-gw', async () => {
  const [a, b] = [node('a'), node('b')];
  const e = lab.addNode('e', 5, 'br61');
  for (const n of [a, b]) {
    await lab.stopAgent(n);
    lab.startAgent(n, { CNIKIT_NODE_AGENT_MODE: 'auto' });
  }
  lab.createNodeObject(e);
  lab.startAgent(e, { CNIKIT_NODE_AGENT_MODE: 'auto' });
  await lab.startEchoes();
  const viaVxlan = [
    `10.244.5.0/24 via 10.244.5.0 dev cnikit.1`,
    `fd00:10:244:5::/64 via fd00:10:244:5:: dev cnikit.1`,
  ];
  await until(
    () => viaVxlan.every((r) => lab.routes(a).includes(r)),
    `a's VXLAN routes to e (${lab.routes(a).join('; ')})\n${lab.log(a)}`,
  );
  assert.ok(
    hostGw(b).every((r) => lab.routes(a).includes(r)),
    'a → b stays host-gw',
  );
  await until(
    () => lab.routes(e).includes('10.244.1.0/24 via 10.244.1.0 dev cnikit.1'),
    `e's routes\n${lab.log(e)}`,
  );
  const ann = JSON.parse(lab.kubectl(['get', 'node', 'e', '-o', 'json'])).metadata.annotations as Record<
    string,
    string
  >;
  const mac = ann['node-agent.cnikit.io/vtep-mac'] as string;
  assert.match(mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
  const fdb = JSON.parse(sh('bridge', ['-n', a.ns, '-json', 'fdb', 'show', 'dev', 'cnikit.1'])) as Array<{
    mac: string;
    dst?: string;
  }>;
  assert.ok(
    fdb.some((f) => f.mac === mac && f.dst === e.ip4),
    JSON.stringify(fdb),
  );
  const link = JSON.parse(sh('ip', ['-n', a.ns, '-json', '-d', 'link', 'show', 'cnikit.1']))[0];
  assert.equal(link.mtu, 1450);
  assert.equal(link.linkinfo.info_data.id, 1);
  assert.equal(link.linkinfo.info_data.port, 8472);
  for (const [x, y] of [
    [a, e],
    [e, a],
    [e, b],
  ] as const) {
    assert.ok(lab.reaches(x, y.pod4), `pod ${x.name} → pod ${y.name} ${y.pod4} through the VXLAN`);
    assert.ok(lab.reaches(x, y.pod6), `pod ${x.name} → pod ${y.name} ${y.pod6} through the VXLAN`);
  }
});

test('vxlan mode: every peer through the VXLAN device, pods reach each other', async () => {
  const [a, e] = [node('a'), node('e')];
  const b = node('b');
  await lab.stopAgent(a);
  lab.startAgent(a, { CNIKIT_NODE_AGENT_MODE: 'vxlan' });
  await until(
    () => lab.routes(a).includes('10.244.2.0/24 via 10.244.2.0 dev cnikit.1'),
    `a → b through the VXLAN (${lab.routes(a).join('; ')})`,
  );
  assert.ok(!lab.routes(a).some((r) => r.includes('dev eth0')), lab.routes(a).join('; '));
  assert.ok(
    lab.reaches(a, b.pod4) && lab.reaches(a, e.pod4) && lab.reaches(a, e.pod6) && lab.reaches(e, a.pod6),
  );
});

test('bad configuration: not ready, the error names the key, nothing programmed', async () => {
  const f = lab.addNode('f', 6);
  lab.createNodeObject(f);
  for (const [env, key] of [
    [{ CNIKIT_NODE_AGENT_MODE: 'bgp' }, 'node-agent-mode'],
    [{ CNIKIT_VXLAN_ID: '16777216' }, 'vxlan-id'],
    [{ CNIKIT_VXLAN_PORT: 'x' }, 'vxlan-port'],
    [{ CNIKIT_CLUSTER_CIDR: '10.244.0.0/33' }, 'cluster-cidr'],
    [{ CNIKIT_NON_MASQUERADE_CIDRS: '10.0.0.0/8,nope' }, 'non-masquerade-cidrs'],
  ] as const) {
    lab.startAgent(f, env);
    await until(() => lab.http(f, 9809, '/readyz')[0] !== 0, 'the readiness listener');
    const [st, body] = lab.http(f, 9809, '/readyz');
    assert.equal(st, 503);
    assert.match(body, new RegExp(`ConfigMap key ${key} `));
    assert.match(lab.log(f), new RegExp(`node agent: ConfigMap key ${key} .*nothing is programmed`));
    assert.match(lab.http(f, 9808, '/metrics')[1], /^cnikit_node_agent_ready 0$/m);
    await sleep(1000);
    assert.deepEqual(lab.routes(f), []);
    assert.equal(spawnSync('ip', ['-n', f.ns, 'link', 'show', 'cnikit.1']).status, 1);
    assert.doesNotMatch(sh('ip', ['netns', 'exec', f.ns, 'iptables-save', '-t', 'nat']), /CNIKIT-NODE-MASQ/);
    await lab.stopAgent(f);
  }
});
