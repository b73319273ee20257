// cnikit-kernel-features: macvlan
/**
 * cluster-ipam as the IPAM of a Multus-style secondary network on one L2 segment, against the real kernel (in the
 * kernel lab: this machine's kernel has no macvlan) and a real etcd. Two "nodes" (named namespaces), each with a
 * master link `eth0` (a veth into a bridge of the sandbox's host namespace, which plays the switch and runs etcd on
 * the segment): containers get bridge-mode macvlan links of their node's master from cnikit's compiled macvlan,
 * addresses from cluster-ipam (`"datastore": "etcd"`, NODENAME per node). Every address is distinct and from the
 * pool, every record names its node, containers of different nodes talk TCP over macvlan, GC is node-scoped and DEL
 * releases. Then the Multus-like delegation through libcni (cnitool): eth0 by bridge + host-local, net1 by
 * macvlan + cluster-ipam in the same pod.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { contains, parseCIDR, parseIP } from '@cnikit/ip';
import {
  cniCall,
  createNamedNetns,
  deleteNamedNetns,
  expectOk,
  type NamedNetns,
  requireKernelFeatures,
  sandboxForFile,
  scaled,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { reach, server } from '../../../test-netns/traffic.ts';
import type { AllocationSpec, BlockSpec } from './allocator.ts';
import { EtcdStore } from './etcd-store.ts';
import { startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

const env = sandboxForFile({ enterHost: true, prefix: 'ipam-lab' });
const SWITCH_IP = '10.88.0.1';
const POOL = '10.88.0.64/26';
const PER_NODE = 3;
const NODES = ['lab-node-a', 'lab-node-b'] as const;

let etcd: TestEtcd;
let store: EtcdStore;
let dist = '';
const nodes = new Map<string, NamedNetns>();
const pods: Array<{ node: string; ns: NamedNetns; id: string; ip?: string }> = [];

const macvlan = () => ({
  cniVersion: '1.1.0',
  name: 'l2net',
  type: 'macvlan',
  master: 'eth0',
  mode: 'bridge',
  ipam: {
    type: 'cluster-ipam',
    datastore: 'etcd',
    etcd_host: etcd.host,
    range: POOL,
    network_name: 'l2net',
    block_size: 4,
  },
});

function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: scaled(30_000) });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const plugin = (name: string) => ({ binary: join(dist, name) });
const onNode = (node: string) => ({
  inNetns: (nodes.get(node) as NamedNetns).name,
  path: dist,
  // the plugin's own bound on its store work, stretched like every bound of the lab (TCG)
  env: { NODENAME: node, CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: String(scaled(30_000)) },
});
const records = async () => (await store.list<AllocationSpec>('allocations')).map((r) => r.spec);

before(async () => {
  requireKernelFeatures('macvlan');
  dist = distBin();
  assert.ok(existsSync(join(dist, 'cluster-ipam')), 'dist-bin/cluster-ipam not built (npm run build)');
  // the switch: a bridge in the sandbox's host namespace, etcd listening on it
  env.sb.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
  env.sb.exec('ip', ['link', 'set', 'br0', 'up']);
  env.sb.exec('ip', ['addr', 'add', `${SWITCH_IP}/24`, 'dev', 'br0']);
  etcd = await startTestEtcd({ ip: SWITCH_IP });
  store = new EtcdStore({ ...etcd.clientOptions });
  NODES.forEach((node, i) => {
    const ns = createNamedNetns('ipam-lab-node');
    nodes.set(node, ns);
    const port = `sw${i}`;
    env.sb.exec('ip', ['link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.name]);
    env.sb.exec('ip', ['link', 'set', port, 'master', 'br0', 'up']);
    sh('ip', ['-n', ns.name, 'link', 'set', 'eth0', 'up']);
    sh('ip', ['-n', ns.name, 'addr', 'add', `10.88.0.${11 + i}/24`, 'dev', 'eth0']);
    for (let k = 0; k < PER_NODE; k++)
      pods.push({ node, ns: createNamedNetns('ipam-lab-pod'), id: `mv-${node.slice(-1)}${k}` });
  });
});

after(async () => {
  for (const p of pods) deleteNamedNetns(p.ns);
  for (const ns of nodes.values()) deleteNamedNetns(ns);
  await store?.close();
  await etcd?.stop();
});

test('macvlan pods on two nodes of one L2 segment: cluster-unique addresses, records of their node, TCP across nodes, GC node-scoped, DEL releases', {
  timeout: scaled(240_000),
}, async () => {
  const t0 = Date.now();
  const pool = parseCIDR(POOL);
  assert.ok(pool);
  // the nodes ADD at the same time, each node its pods one after the other (as a kubelet starts them)
  const outcomes = new Array<Awaited<ReturnType<typeof cniCall>>>(pods.length);
  await Promise.all(
    NODES.map(async (node) => {
      for (const [i, p] of pods.entries())
        if (p.node === node)
          outcomes[i] = await cniCall(plugin('macvlan'), 'ADD', macvlan(), {
            ...onNode(p.node),
            netns: p.ns.path,
            containerId: p.id,
          });
    }),
  );
  outcomes.forEach((o, i) => {
    const res = expectOk(o, `ADD ${pods[i]?.id}`);
    const addr = res.ips?.[0]?.address ?? '';
    const ip = parseIP(addr.split('/')[0] ?? '');
    assert.ok(ip && contains(pool, ip), `${addr} lies in ${POOL}`);
    assert.equal(addr.split('/')[1], '26');
    (pods[i] as (typeof pods)[number]).ip = addr.split('/')[0];
  });
  const ips = pods.map((p) => p.ip);
  assert.equal(new Set(ips).size, pods.length, `distinct: ${ips.join(' ')}`);
  const addTime = Date.now() - t0;

  // one record per pod, naming the node whose ADD made it; each node's blocks are its own
  const recs = await records();
  assert.equal(recs.length, pods.length);
  for (const p of pods) {
    const r = recs.find((x) => x.containerID === p.id);
    assert.ok(r, `record of ${p.id}`);
    assert.equal(r.ip, p.ip);
    assert.equal(r.node, p.node);
    assert.equal(r.ifName, 'eth0');
    assert.equal(r.borrowed, false);
  }
  const blocks = new Map((await store.list<BlockSpec>('blocks')).map((b) => [b.name, b.spec]));
  for (const node of NODES)
    assert.ok(
      [...blocks.values()].some((b) => b.node === node),
      `a block of ${node}`,
    );
  for (const r of recs)
    assert.equal(blocks.get(r.block)?.node, r.node, `${r.ip} lies in a block of ${r.node}`);
  // the kernel state: a macvlan of the node's master carrying the address
  for (const p of pods) {
    const [l] = JSON.parse(sh('ip', ['-n', p.ns.name, '-j', '-d', 'addr', 'show', 'eth0']));
    assert.equal(l.linkinfo.info_kind, 'macvlan');
    assert.ok(
      l.addr_info.some((a: { local: string }) => a.local === p.ip),
      `${p.ip} on ${p.id}`,
    );
  }

  // TCP over macvlan between the nodes, both ways
  const [a0, a1, , b0, b1] = pods as Array<(typeof pods)[number]>;
  assert.ok(a0 && a1 && b0 && b1);
  const t1 = Date.now();
  const servers = await Promise.all([server(a0.ns.name, 8080, a0.id), server(b0.ns.name, 8080, b0.id)]);
  try {
    assert.deepEqual(reach(a1.ns.name, [b0.ip as string, a0.ip as string], 8080), [b0.id, a0.id]);
    assert.deepEqual(reach(b1.ns.name, [a0.ip as string], 8080), [a0.id]);
  } finally {
    for (const s of servers) s.kill();
  }
  const trafficTime = Date.now() - t1;

  // GC on node a with only a0 valid: a's other records go, node b's stay
  const gcConf = {
    ...macvlan(),
    'cni.dev/valid-attachments': [{ containerID: a0.id, ifname: 'eth0' }],
  };
  expectOk(await cniCall(plugin('macvlan'), 'GC', gcConf, onNode('lab-node-a')), 'GC on node a');
  const afterGc = await records();
  assert.deepEqual(
    afterGc.map((r) => r.containerID).sort(),
    [a0.id, ...pods.filter((p) => p.node === 'lab-node-b').map((p) => p.id)].sort(),
  );

  // DEL releases (twice: idempotent, also for the records GC took)
  for (let round = 0; round < 2; round++)
    for (const p of pods)
      expectOk(
        await cniCall(plugin('macvlan'), 'DEL', macvlan(), {
          ...onNode(p.node),
          netns: p.ns.path,
          containerId: p.id,
        }),
        `DEL ${p.id} (${round})`,
      );
  assert.deepEqual(await records(), []);
  for (const p of pods) assert.equal(spawnSync('ip', ['-n', p.ns.name, 'link', 'show', 'eth0']).status, 1);
  process.stderr.write(
    `# ${pods.length} ADDs (two nodes at once) ${addTime} ms, TCP checks ${trafficTime} ms, whole test ${Date.now() - t0} ms\n`,
  );
});

test('Multus-like delegation through libcni: eth0 from bridge + host-local, net1 from macvlan + cluster-ipam', {
  timeout: scaled(180_000),
}, async () => {
  const dir = join(env.dir, 'multus');
  const netDir = join(dir, 'net.d');
  mkdirSync(netDir, { recursive: true });
  writeFileSync(
    join(netDir, '10-podnet.conflist'),
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'podnet',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipam: { type: 'host-local', subnet: '10.244.1.0/24', dataDir: join(dir, 'host-local') },
        },
      ],
    }),
  );
  writeFileSync(
    join(netDir, '20-l2net.conflist'),
    JSON.stringify({ cniVersion: '1.1.0', name: 'l2net', plugins: [macvlan()] }),
  );
  const node = nodes.get('lab-node-a') as NamedNetns;
  const pod = createNamedNetns('ipam-lab-pod');
  const cnitool = (...args: string[]) =>
    spawnSync(
      'ip',
      ['netns', 'exec', node.name, join(dist, 'cnitool'), '--cache-dir', join(dir, 'cache'), ...args],
      {
        encoding: 'utf8',
        timeout: scaled(60_000),
        env: {
          PATH: process.env.PATH,
          NETCONFPATH: netDir,
          CNI_PATH: dist,
          NODENAME: 'lab-node-a',
          CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: String(scaled(30_000)),
        },
      },
    );
  try {
    const t0 = Date.now();
    const add0 = cnitool('-i', 'eth0', 'add', 'podnet', pod.path);
    assert.equal(add0.status, 0, add0.stderr);
    const add1 = cnitool('-i', 'net1', 'add', 'l2net', pod.path);
    assert.equal(add1.status, 0, add1.stderr);
    const r0 = JSON.parse(add0.stdout);
    const r1 = JSON.parse(add1.stdout);
    assert.match(r0.ips[0].address, /^10\.244\.1\.\d+\/24$/);
    const ip1 = parseIP(String(r1.ips[0].address).split('/')[0] ?? '');
    const cidr = parseCIDR(POOL);
    assert.ok(ip1 && cidr && contains(cidr, ip1), r1.ips[0].address);
    const links = JSON.parse(sh('ip', ['-n', pod.name, '-j', '-d', 'link', 'show']));
    const kind = (n: string) => links.find((l: { ifname: string }) => l.ifname === n)?.linkinfo?.info_kind;
    assert.equal(kind('eth0'), 'veth');
    assert.equal(kind('net1'), 'macvlan');
    const recs = await records();
    assert.equal(recs.length, 1);
    assert.equal(recs[0]?.ifName, 'net1');
    assert.equal(recs[0]?.node, 'lab-node-a');
    assert.equal(`${recs[0]?.ip}/26`, r1.ips[0].address);
    const del1 = cnitool('-i', 'net1', 'del', 'l2net', pod.path);
    assert.equal(del1.status, 0, del1.stderr);
    const del0 = cnitool('-i', 'eth0', 'del', 'podnet', pod.path);
    assert.equal(del0.status, 0, del0.stderr);
    assert.deepEqual(await records(), []);
    process.stderr.write(`# cnitool add+add+del+del ${Date.now() - t0} ms\n`);
  } finally {
    deleteNamedNetns(pod);
  }
});
