/**
 * Import of whereabouts' objects against a real kube-apiserver (scripts/k8s/control-plane.ts, private network
 * namespace): whereabouts' CRDs applied (src/testdata/whereabouts-crds.yaml, from their schema), IPPools and
 * OverlappingRangeIPReservations and the pods they name created with kubectl, the import run in the namespace
 * (src/testdata/import-driver.ts) into an etcd store (the control plane's own etcd, under a prefix of its own).
 * Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type ControlPlane, startControlPlane } from '../../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../../scripts/k8s-build.mjs';
import { distBin } from '../../../test-netns/dist.ts';
import { networkOfPool, parseReservationName, recordNameFor } from './whereabouts-import.ts';

const netns = `cnikit-wbimport-${process.pid}`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-wb-import-test-'));
const here = import.meta.dirname;
const ROOT = join(here, '..', '..', '..');
let cp: ControlPlane;

before(async () => {
  const { dir: cacheDir } = await k8sBinaries();
  cp = await startControlPlane({ binDir: join(cacheDir, 'bin'), dir, netns });
  const ok = (r: { status: number | null; stderr: string }) => assert.equal(r.status, 0, r.stderr);
  ok(cp.kubectl(['apply', '-f', '-'], readFileSync(join(here, 'testdata', 'whereabouts-crds.yaml'), 'utf8')));
  for (const c of ['ippools', 'overlappingrangeipreservations'])
    ok(
      cp.kubectl([
        'wait',
        '--for=condition=Established',
        `crd/${c}.whereabouts.cni.cncf.io`,
        '--timeout=60s',
      ]),
    );
  // no controller-manager runs: the service account pods need is made by hand
  ok(cp.kubectl(['-n', 'default', 'create', 'serviceaccount', 'default']));
});
after(async () => {
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
});

const pod = (name: string, node: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  // no token controller runs: a pod that mounts no service-account token needs none
  spec: {
    nodeName: node,
    automountServiceAccountToken: false,
    containers: [{ name: 'c', image: 'registry.invalid/none:1' }],
  },
});

function apply(objs: unknown[]): void {
  const r = cp.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }));
  assert.equal(r.status, 0, r.stderr);
}

interface DriverOut {
  report: {
    created: Array<{ name: string; ip: string }>;
    existing: Array<{ name: string; ip: string }>;
    conflicts: Array<{ name: string; ip: string; holder: string }>;
    skipped: Array<{ source: string; reason: string }>;
  };
  records: Array<{ name: string; spec: Record<string, unknown> }>;
  allocated: string[];
}

function runImport(args: string[] = []): DriverOut {
  const r = spawnSync(
    'ip',
    [
      'netns',
      'exec',
      netns,
      process.execPath,
      ...process.execArgv,
      join(here, 'testdata', 'import-driver.ts'),
      cp.kubeconfig,
      '127.0.0.1:2379',
      '/cnikit-import-test/',
      ...args,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop() as string);
}

test('names: whereabouts pool and reservation names, the record name per address', () => {
  assert.equal(networkOfPool('10.20.0.0-24', '10.20.0.0/24'), '');
  assert.equal(networkOfPool('mynet-fd00---120', 'fd00::/120'), 'mynet');
  assert.equal(networkOfPool('other', '10.0.0.0/8'), undefined);
  assert.deepEqual(parseReservationName('10.20.0.77', []), {
    network: '',
    ip: { family: 4, value: 0x0a14004dn },
  });
  assert.deepEqual(parseReservationName('mynet-fd00--11', ['mynet']), {
    network: 'mynet',
    ip: { family: 6, value: (0xfd00n << 112n) | 0x11n },
  });
  assert.equal(parseReservationName('net-a-10.1.2.3', [])?.network, 'net-a');
  assert.equal(recordNameFor('', { family: 4, value: 0x0a140005n }), 'default.4-0a1400.05');
  assert.equal(
    recordNameFor('mynet', { family: 6, value: (0xfd00n << 112n) | 0x11n }),
    `mynet.6-fd00${'0'.repeat(26)}.11`,
  );
});

test('IPPools and OverlappingRangeIPReservations made with kubectl become records; twice is harmless; a conflict is kept', () => {
  apply([
    pod('pod-a', 'node-a'),
    pod('pod-b', 'node-b'),
    pod('pod-c', 'node-c'),
    pod('pod-d', 'node-a'),
    {
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'IPPool',
      metadata: { name: '10.20.0.0-24', namespace: 'kube-system' },
      spec: {
        range: '10.20.0.0/24',
        allocations: {
          '5': { id: 'ctr-a', podref: 'default/pod-a', ifname: 'net1' },
          '6': { id: 'ctr-b', podref: 'default/pod-b', ifname: 'net1' },
          '200': { id: 'ctr-gone', podref: 'default/pod-gone' },
        },
      },
    },
    {
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'IPPool',
      metadata: { name: 'mynet-fd00---120', namespace: 'kube-system' },
      spec: {
        range: 'fd00::/120',
        allocations: { '17': { id: 'ctr-d', podref: 'default/pod-d', ifname: 'net2' } },
      },
    },
    // the same address as the pool's offset 5: imported once
    {
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'OverlappingRangeIPReservation',
      metadata: { name: '10.20.0.5', namespace: 'kube-system' },
      spec: { containerid: 'ctr-a', podref: 'default/pod-a', ifname: 'net1' },
    },
    // only a reservation (its pool object gone): still an address a pod holds
    {
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'OverlappingRangeIPReservation',
      metadata: { name: '10.20.0.77', namespace: 'kube-system' },
      spec: { containerid: 'ctr-c', podref: 'default/pod-c', ifname: 'net1' },
    },
    {
      apiVersion: 'whereabouts.cni.cncf.io/v1alpha1',
      kind: 'OverlappingRangeIPReservation',
      metadata: { name: 'mynet-fd00--11', namespace: 'kube-system' },
      spec: { containerid: 'ctr-d', podref: 'default/pod-d', ifname: 'net2' },
    },
  ]);
  const uid = (name: string) => {
    const r = cp.kubectl(['-n', 'default', 'get', 'pod', name, '-o', 'jsonpath={.metadata.uid}']);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  // 10.20.0.6 is already cnikit's, for another container: the import must not take it over
  const held = recordNameFor('', { family: 4, value: 0x0a140006n });
  const first = runImport([
    `--seed=${held}=${JSON.stringify({ ip: '10.20.0.6', containerID: 'ctr-new', ifName: 'eth0' })}`,
  ]);
  const byIp = new Map(first.records.map((r) => [r.spec.ip, r]));
  assert.deepEqual(first.report.created.map((r) => r.ip).sort(), [
    '10.20.0.200',
    '10.20.0.5',
    '10.20.0.77',
    'fd00::11',
  ]);
  assert.deepEqual(
    first.report.conflicts.map((r) => [r.ip, r.holder]),
    [['10.20.0.6', 'ctr-new/eth0']],
  );
  assert.deepEqual(first.report.skipped, []);
  assert.equal(byIp.get('10.20.0.6')?.spec.containerID, 'ctr-new', 'the conflicting record is unchanged');

  const a = byIp.get('10.20.0.5');
  assert.equal(a?.name, recordNameFor('', { family: 4, value: 0x0a140005n }));
  assert.deepEqual(
    {
      containerID: a?.spec.containerID,
      ifName: a?.spec.ifName,
      podNamespace: a?.spec.podNamespace,
      podName: a?.spec.podName,
      podUID: a?.spec.podUID,
      node: a?.spec.node,
      prefix: a?.spec.prefix,
      pool: a?.spec.pool,
      imported: a?.spec.imported,
    },
    {
      containerID: 'ctr-a',
      ifName: 'net1',
      podNamespace: 'default',
      podName: 'pod-a',
      podUID: uid('pod-a'),
      node: 'node-a',
      prefix: 24,
      pool: '10.20.0.0/24',
      imported: 'whereabouts',
    },
  );
  const c = byIp.get('10.20.0.77');
  assert.equal(c?.spec.podUID, uid('pod-c'));
  assert.equal(c?.spec.node, 'node-c');
  const d = byIp.get('fd00::11');
  assert.equal(d?.name, recordNameFor('mynet', { family: 6, value: (0xfd00n << 112n) | 0x11n }));
  assert.equal(d?.spec.network, 'mynet');
  assert.equal(d?.spec.ifName, 'net2');
  assert.equal(d?.spec.podUID, uid('pod-d'));
  // a pod that no longer exists: imported all the same (the reclaimer decides), no UID, the fallback node
  const gone = byIp.get('10.20.0.200');
  assert.equal(gone?.spec.podUID, '');
  assert.equal(gone?.spec.node, 'unknown-node');

  const again = runImport();
  assert.deepEqual(again.report.created, []);
  assert.deepEqual(again.report.existing.map((r) => r.ip).sort(), [
    '10.20.0.200',
    '10.20.0.5',
    '10.20.0.77',
    'fd00::11',
  ]);
  assert.equal(again.report.conflicts.length, 1);
  assert.deepEqual(
    again.records.map((r) => r.name).sort(),
    first.records.map((r) => r.name).sort(),
    'nothing new written',
  );
  // dry run: reports, writes nothing
  const dry = runImport(['--dry-run']);
  assert.equal(dry.report.existing.length, 4);
  assert.equal(dry.records.length, first.records.length);

  // after the switch: cluster-ipam on 10.20.0.1-10.20.0.8 hands out every free address but the imported ones
  const after = runImport(['--allocate=10.20.0.1-10.20.0.8/24']);
  const handed = after.allocated.filter((x) => !x.startsWith('error'));
  assert.deepEqual([...handed].sort(), [
    '10.20.0.1',
    '10.20.0.2',
    '10.20.0.3',
    '10.20.0.4',
    '10.20.0.7',
    '10.20.0.8',
  ]);
  assert.match(after.allocated[after.allocated.length - 1] ?? '', /^error: .*exhausted/);
});

test('`cluster-ipam import` (the compiled command) into the Kubernetes store: --dry-run writes nothing, then records, then nothing new', () => {
  const bin = join(distBin(), 'cluster-ipam');
  assert.ok(existsSync(bin), `${bin} is missing: npm run build`);
  const ok = (r: { status: number | null; stderr: string }) => assert.equal(r.status, 0, r.stderr);
  ok(
    cp.kubectl(
      ['apply', '-f', '-'],
      readFileSync(join(ROOT, 'deploy/kubernetes/cluster-ipam-crds.yaml'), 'utf8'),
    ),
  );
  ok(
    cp.kubectl([
      'wait',
      '--for=condition=Established',
      'crd/ipamallocations.ipam.cnikit.dev',
      '--timeout=60s',
    ]),
  );
  const cmd = (args: string[]) =>
    spawnSync('ip', ['netns', 'exec', netns, bin, 'import', '--kubeconfig', cp.kubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
    });
  const records = () =>
    JSON.parse(cp.kubectl(['get', 'ipamallocations.ipam.cnikit.dev', '-o', 'json']).stdout).items as Array<{
      metadata: { name: string };
      spec: Record<string, unknown>;
    }>;
  const all = ['10.20.0.200', '10.20.0.5', '10.20.0.6', '10.20.0.77', 'fd00::11'];
  const dry = cmd(['--dry-run', '--json']);
  assert.equal(dry.status, 0, dry.stderr);
  const d = JSON.parse(dry.stdout);
  assert.equal(d.dryRun, true);
  assert.deepEqual(d.created.map((r: { ip: string }) => r.ip).sort(), all);
  assert.deepEqual(records(), [], 'a dry run writes nothing');

  const real = cmd(['--fallback-node', 'lost-node']);
  assert.equal(real.status, 0, real.stderr);
  assert.match(real.stdout, /^imported 5, already recorded 0, conflicts 0, skipped 0\n/);
  assert.match(real.stdout, /imported 10\.20\.0\.5 \(default\) default\/pod-a ctr-a\/net1 from /);
  const recs = records();
  assert.deepEqual(recs.map((r) => r.spec.ip).sort(), all);
  const a = recs.find((r) => r.spec.ip === '10.20.0.5')!;
  assert.equal(a.metadata.name, recordNameFor('', { family: 4, value: 0x0a140005n }));
  const uid = cp.kubectl(['-n', 'default', 'get', 'pod', 'pod-a', '-o', 'jsonpath={.metadata.uid}']).stdout;
  assert.deepEqual(
    [a.spec.containerID, a.spec.ifName, a.spec.podUID, a.spec.node, a.spec.imported],
    ['ctr-a', 'net1', uid, 'node-a', 'whereabouts'],
  );
  // the entry whose pod is gone: the fallback node, no pod UID (an empty field is absent on the API)
  const gone = recs.find((r) => r.spec.ip === '10.20.0.200')!;
  assert.equal(gone.spec.node, 'lost-node');
  // the network key the allocator uses for a network without network_name (its DEL and GC find the record by it)
  assert.equal(a.spec.network, 'default');
  assert.equal(gone.spec.podUID ?? '', '');

  const again = cmd(['--json']);
  assert.equal(again.status, 0, again.stderr);
  const g = JSON.parse(again.stdout);
  assert.deepEqual(g.created, []);
  assert.equal(g.existing.length, 5);
  assert.equal(records().length, 5, 'nothing new written');
  // usage errors: exit 2 and the usage text
  const bad = cmd(['--bogus']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /usage: cluster-ipam import/);
});
