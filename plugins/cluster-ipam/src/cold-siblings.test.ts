/**
 * Cold sibling ADDs: concurrent plugin calls on one node with no warm service, each reading its own view of the
 * node at the same moment. Each call tries the block's free addresses in an order of its own, hashed from its
 * container ID (allocator.ts takeIn), so siblings rarely create the same record name; every failed create (a
 * conflict: the name is taken, a 409 on Kubernetes, a failed txn compare on etcd) is counted here, on the in-memory
 * store and on a real etcd, and printed. No duplicate in any case.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type AllocationSpec, Allocator } from './allocator.ts';
import { parseConf } from './config.ts';
import { EtcdStore } from './etcd-store.ts';
import type { Store, StoredObject, StoreKind } from './store.ts';
import { startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';
import { MemoryStore } from './testdata/memory-store.ts';

/** Failed creates per kind of a store (and the creates tried). */
function countConflicts(store: Store): { tried: number; records: number; blocks: number } {
  const n = { tried: 0, records: 0, blocks: 0 };
  const create = store.create.bind(store);
  store.create = async <T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> => {
    n.tried++;
    const r = await create(kind, name, spec);
    if (!r) n[kind === 'blocks' ? 'blocks' : 'records']++;
    return r;
  };
  return n;
}

const confFor = (ipam: Record<string, unknown>, node: string) =>
  parseConf(
    { name: 'n', cniVersion: '1.1.0', ipam: { type: 'cluster-ipam', ...ipam } },
    { args: '', command: 'ADD', env: { NODENAME: node } },
    { flatFiles: [] },
  );

async function siblings(
  store: Store,
  ipam: Record<string, unknown>,
  opts: { first: number; concurrent: number; tag: string },
): Promise<{ conflicts: { tried: number; records: number; blocks: number }; ms: number; ips: string[] }> {
  const c = confFor(ipam, 'node-s');
  const mk = () =>
    new Allocator(store, { net: c.net, overlapping: c.overlapping, pools: c.pools, node: 'node-s' });
  // a block partly used already (opts.first ADDs one after the other), then the siblings at once
  for (let i = 0; i < opts.first; i++)
    await mk().allocate({ containerID: `${opts.tag}-pre-${i}`, ifName: 'eth0' });
  const conflicts = countConflicts(store);
  const t0 = performance.now();
  const got = await Promise.all(
    Array.from({ length: opts.concurrent }, (_, i) =>
      mk().allocate({ containerID: `${opts.tag}-sib-${i}`, ifName: 'eth0' }),
    ),
  );
  const ms = performance.now() - t0;
  const ips = got.map((g) => g[0]?.ip as string);
  assert.equal(new Set(ips).size, opts.concurrent, 'no duplicate');
  const records = await store.list<AllocationSpec>('allocations');
  assert.equal(records.length, opts.first + opts.concurrent, 'one record per ADD');
  return { conflicts, ms, ips };
}

describe('cold sibling ADDs on one node: conflicts counted', () => {
  test('in memory: 24 siblings on an empty pool, and 12 on a block half full', async () => {
    const ipam = { range: '10.50.0.0/22', kubernetes: { kubeconfig: '/unused' } };
    const a = await siblings(new MemoryStore(), ipam, { first: 0, concurrent: 24, tag: 'a' });
    const b = await siblings(new MemoryStore(), ipam, { first: 16, concurrent: 12, tag: 'b' });
    console.log(
      `# memory: 24 siblings, empty pool: ${a.conflicts.records} record conflicts, ${a.conflicts.blocks} block conflicts (${a.conflicts.tried} creates); 12 siblings, block 16/32 used: ${b.conflicts.records} record conflicts, ${b.conflicts.blocks} block conflicts (${b.conflicts.tried} creates)`,
    );
    // deterministic here (the store interleaves the calls the same way every run): 4 and 2 with the hashed pick
    // and the re-read after a lost create; 16 and 13 with the earlier offset-then-next-address walk
    assert.ok(a.conflicts.records <= 8, `record conflicts ${a.conflicts.records}`);
    assert.ok(b.conflicts.records <= 6, `record conflicts ${b.conflicts.records}`);
  });

  describe('on a real etcd', () => {
    let etcd: TestEtcd;
    before(async () => {
      etcd = await startTestEtcd();
    });
    after(async () => {
      await etcd?.stop();
    });

    test('24 siblings on an empty pool, 12 on a block half full: conflicts (failed txns) and time', async () => {
      const ipam = { datastore: 'etcd', etcd_host: etcd.host, range: '10.51.0.0/22' };
      const s1 = new EtcdStore({ ...etcd.clientOptions, prefix: '/sib-a/' });
      const s2 = new EtcdStore({ ...etcd.clientOptions, prefix: '/sib-b/' });
      try {
        const a = await siblings(s1, ipam, { first: 0, concurrent: 24, tag: 'a' });
        const b = await siblings(s2, ipam, { first: 16, concurrent: 12, tag: 'b' });
        console.log(
          `# etcd: 24 siblings, empty pool: ${a.conflicts.records} record conflicts, ${a.conflicts.blocks} block conflicts, ${Math.round(a.ms)} ms; 12 siblings, block 16/32 used: ${b.conflicts.records} record conflicts, ${b.conflicts.blocks} block conflicts, ${Math.round(b.ms)} ms`,
        );
        assert.ok(a.conflicts.records <= 24, `record conflicts ${a.conflicts.records}`);
        assert.ok(b.conflicts.records <= 12, `record conflicts ${b.conflicts.records}`);
      } finally {
        await s1.close();
        await s2.close();
      }
    });
  });
});
