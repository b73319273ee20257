/**
 * Objects written by versions before the node label (`ipam.cnikit.dev/node`), against a real kube-apiserver
 * (scripts/k8s/control-plane.ts, a private network namespace): records and a block whose node is only in the spec.
 * An exact list by node still finds them (the cached hint of an ADD may not), so DEL and the node-scoped GC release
 * them, an ADD on their node uses its unlabelled block, and the reclaimer's leader labels what is left.
 * Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { enterNetns } from '@cnikit/testing';
import { type ControlPlane, startControlPlane } from '../../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../../scripts/k8s-build.mjs';
import { type AllocationSpec, Allocator, type BlockSpec } from './allocator.ts';
import { parseConf } from './config.ts';
import { KubernetesStore, NODE_LABEL } from './kubernetes.ts';
import { Reclaimer } from './reclaimer.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const netns = `ipamlab-legacy-${process.pid}`;
const dir = mkdtempSync(join(tmpdir(), 'ipamlab-legacy-'));
let cp: ControlPlane | undefined;
let inNs: { restore(): void } | undefined;
let store: KubernetesStore;

after(async () => {
  await store?.close();
  inNs?.restore();
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
  rmSync(dir, { recursive: true, force: true });
});

function ok(r: { status: number | null; stderr: string }): void {
  assert.equal(r.status, 0, r.stderr);
}

interface Obj {
  metadata: { name: string; labels?: Record<string, string> };
}
function items(what: string): Obj[] {
  const r = (cp as ControlPlane).kubectl(['get', what, '-o', 'json']);
  ok(r);
  return JSON.parse(r.stdout).items as Obj[];
}
const ALLOC = 'ipamallocations.ipam.cnikit.dev';
const BLOCK = 'ipamblocks.ipam.cnikit.dev';

/** The object as an older version wrote it: the node label removed. */
function unlabel(what: string, name: string): void {
  ok((cp as ControlPlane).kubectl(['label', what, name, `${NODE_LABEL}-`]));
}

before(async () => {
  const { dir: cacheDir } = await k8sBinaries();
  cp = await startControlPlane({ binDir: join(cacheDir, 'bin'), dir: join(dir, 'cp'), netns });
  ok(
    cp.kubectl(
      ['apply', '-f', '-'],
      readFileSync(join(ROOT, 'deploy/kubernetes/cluster-ipam-crds.yaml'), 'utf8'),
    ),
  );
  ok(cp.kubectl(['wait', '--for', 'condition=established', '--timeout=60s', `crd/${BLOCK}`, `crd/${ALLOC}`]));
  // this process's connections to https://127.0.0.1:6443 are made in the control plane's namespace
  inNs = enterNetns(`/run/netns/${netns}`);
  store = new KubernetesStore({ kubeconfig: cp.kubeconfig, deadlineMs: 600_000 });
});

test('records and blocks without the node label: found by node, DEL and GC release them, ADD uses the block, the reclaimer labels them', async () => {
  const pools = parseConf(
    { name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam', range: '10.31.0.0/24', block_size: 8 } },
    { args: '', command: 'ADD', env: { NODENAME: 'x' } },
    { flatFiles: [] },
  ).pools;
  const on = (node: string) => new Allocator(store, { net: 'default', overlapping: true, pools, node });
  for (let i = 0; i < 4; i++) await on('old-node').allocate({ containerID: `old${i}`, ifName: 'net1' });
  await on('new-node').allocate({ containerID: 'new0', ifName: 'net1' });
  const old = (await store.list<AllocationSpec>('allocations')).filter((r) => r.spec.node === 'old-node');
  assert.equal(old.length, 4);
  const oldBlocks = (await store.list<BlockSpec>('blocks')).filter((b) => b.spec.node === 'old-node');
  assert.equal(oldBlocks.length, 1);
  for (const r of old) unlabel(ALLOC, r.name);
  unlabel(BLOCK, oldBlocks[0]?.name as string);
  const labelled = (what: string) =>
    items(what)
      .filter((o) => o.metadata.labels?.[NODE_LABEL] !== undefined)
      .map((o) => o.metadata.name);
  assert.equal(labelled(ALLOC).length, 1, 'only new-node’s record keeps its label');
  assert.equal(labelled(BLOCK).length, 1);

  // an exact list by node finds them; the label-selected list alone (the cached hint) does not
  const exact = await store.list<AllocationSpec>('allocations', '', { node: 'old-node' });
  assert.deepEqual(exact.map((r) => r.name).sort(), old.map((r) => r.name).sort());
  assert.deepEqual(
    (await store.list<BlockSpec>('blocks', '', { node: 'old-node' })).map((b) => b.name),
    [oldBlocks[0]?.name],
  );
  const hint = await store.list<AllocationSpec>('allocations', '', { node: 'old-node', cached: true });
  assert.deepEqual(hint, [], 'the label-selected list misses them: what the fallback is for');
  assert.equal((await store.list('allocations', '', { node: 'new-node' })).length, 1);

  // DEL of an old attachment
  assert.deepEqual(await on('old-node').release('old0', 'net1'), [
    old.find((r) => r.spec.containerID === 'old0')?.spec.ip,
  ]);
  // GC on old-node keeps old1 only: old2, old3 go; new-node's record is not old-node's business
  const gced = await on('old-node').gc([{ containerID: 'old1', ifname: 'net1' }]);
  assert.equal(gced.length, 2);
  const left = (await store.list<AllocationSpec>('allocations')).map((r) => r.spec.containerID).sort();
  assert.deepEqual(left, ['new0', 'old1']);
  // a repeated ADD of old1 answers its record; a new ADD on old-node takes an address of its unlabelled block
  const again = await on('old-node').allocate({ containerID: 'old1', ifName: 'net1' });
  assert.equal(again[0]?.existing, true);
  const fresh = await on('old-node').allocate({ containerID: 'old9', ifName: 'net1' });
  assert.equal(fresh[0]?.record.spec.block, oldBlocks[0]?.name, 'no new block claimed');
  assert.equal((await store.list<BlockSpec>('blocks')).filter((b) => b.spec.node === 'old-node').length, 1);

  // the reclaimer's leader labels what is left (records within the grace: nothing is released)
  const rc = new Reclaimer(
    {
      kubeconfig: cp?.kubeconfig as string,
      leaseNamespace: 'kube-system',
      leaseName: 'ipamlab-legacy',
      leaseSeconds: 15,
      graceMs: 3_600_000,
      intervalMs: 60_000,
      identity: 'legacy-test',
    },
    Reclaimer.connect({ kubeconfig: cp?.kubeconfig } as Parameters<typeof Reclaimer.connect>[0], {}),
    () => {},
  );
  assert.equal(await rc.elect(), true);
  const report = await rc.reclaim(store);
  assert.deepEqual(report.released, []);
  assert.equal(report.relabelled, 2, 'old1 and the block');
  assert.equal(labelled(ALLOC).length, 3);
  assert.equal(labelled(BLOCK).length, 2);
  const byLabel = await store.list<AllocationSpec>('allocations', '', { node: 'old-node' });
  assert.deepEqual(byLabel.map((r) => r.spec.containerID).sort(), ['old1', 'old9']);
  assert.equal((await rc.reclaim(store)).relabelled, 0, 'nothing left to label');
  await rc.release();
});
