/**
 * The etcd store's per-node index against a real etcd (Debian's /usr/bin/etcd, etcd-testenv.ts): a node's view is
 * one range over that node's own keys (counted with a spy on the client: every key etcd sent back), records of the
 * first layout (no index entries, no `<prefix>layout`) are found and released by the plugin's DEL, GC and CHECK
 * (the first node list migrates them, keeping their versions), an unindexed record written after the migration (an
 * older cnikit in a rolling upgrade) is indexed by the next migrate() (the reclaimer's pass), and the index follows
 * create/update/delete with no duplicate under concurrent creates.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cniRunner, expectCniError, expectOk } from '@cnikit/testing';
import { type AllocationSpec, Allocator, NodeView } from './allocator.ts';
import { parseConf } from './config.ts';
import type { KeyValue } from './etcd.ts';
import { EtcdStore } from './etcd-store.ts';
import { plugin } from './index.ts';
import { startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

/** Counts the keys and bytes etcd answers to this store's reads (range, and the ranges inside a txn). */
function spyReads(store: EtcdStore): { keys: string[]; bytes: number; reset(): void } {
  const seen = { keys: [] as string[], bytes: 0, reset: () => {} };
  seen.reset = () => {
    seen.keys = [];
    seen.bytes = 0;
  };
  const c = store.client;
  const note = (kvs: KeyValue[] | undefined) => {
    for (const kv of kvs ?? []) {
      seen.keys.push(kv.key.toString());
      seen.bytes += kv.key.length + kv.value.length;
    }
  };
  const range = c.range.bind(c);
  c.range = async (o) => {
    const r = await range(o);
    note(r.kvs);
    return r;
  };
  const txn = c.txn.bind(c);
  c.txn = async (cmp, ok, fail) => {
    const r = await txn(cmp, ok, fail);
    for (const x of r.responses) note(x.kvs);
    return r;
  };
  return seen;
}

describe('etcd per-node index', () => {
  let etcd: TestEtcd;
  before(async () => {
    etcd = await startTestEtcd();
  });
  after(async () => {
    await etcd?.stop();
  });

  const confFor = (ipam: Record<string, unknown>, node: string) =>
    parseConf(
      { name: 'n', cniVersion: '1.1.0', ipam: { type: 'cluster-ipam', datastore: 'etcd', ...ipam } },
      { args: '', command: 'ADD', env: { NODENAME: node } },
      { flatFiles: [] },
    );
  const allocatorOn = (store: EtcdStore, ipam: Record<string, unknown>, node: string) => {
    const c = confFor(ipam, node);
    return new Allocator(store, { net: c.net, overlapping: c.overlapping, pools: c.pools, node });
  };

  test("a node's view reads that node's index entries only, whatever the other nodes hold", async () => {
    const prefix = '/view-test/';
    const ipam = { etcd_host: etcd.host, range: '10.40.0.0/22' };
    const store = new EtcdStore({ ...etcd.clientOptions, prefix, pageSize: 50 });
    try {
      const nodes = ['node-a', 'node-b', 'node-c', 'node-d'];
      const per = { 'node-a': 5, 'node-b': 60, 'node-c': 60, 'node-d': 60 } as Record<string, number>;
      for (const n of nodes) {
        const a = allocatorOn(store, ipam, n);
        // 5 at a time (the view is what is measured here, not cold siblings' conflicts)
        for (let j = 0; j < (per[n] as number); j += 5)
          await Promise.all(
            Array.from({ length: Math.min(5, (per[n] as number) - j) }, (_, k) =>
              a.allocate({ containerID: `c-${n}-${j + k}`, ifName: 'eth0' }),
            ),
          );
      }
      const all = await store.list<AllocationSpec>('allocations');
      assert.equal(all.length, 185);
      const blocksOfA = (await store.list<{ node: string }>('blocks')).filter(
        (b) => b.spec.node === 'node-a',
      );
      // a cold call's view, on a new store (as a cold plugin call opens one)
      const cold = new EtcdStore({ ...etcd.clientOptions, prefix });
      const spy = spyReads(cold);
      try {
        const view = new NodeView();
        await allocatorOn(cold, ipam, 'node-a').load(view);
        assert.equal(view.held.size, 5, 'the records node-a holds');
        assert.equal(
          [...view.blocks.values()].reduce((n, m) => n + m.size, 0),
          blocksOfA.length,
        );
        const own = cold.nodeIndexBase('node-a');
        const foreign = spy.keys.filter((k) => !k.startsWith(own) && k !== cold.layoutKey);
        assert.deepEqual(foreign, [], 'no key outside node-a index entries (and the layout marker) was read');
        assert.equal(spy.keys.length, 5 + blocksOfA.length + 1, 'its records, its blocks and the marker');
        const viewBytes = spy.bytes;
        // the first layout's read for the same view: the whole pool's records and blocks
        spy.reset();
        await cold.listAt('allocations');
        await cold.listAt('blocks', '');
        console.log(
          `# node view read: ${5 + blocksOfA.length + 1} keys, ${viewBytes} bytes; whole-pool read: ${spy.keys.length} keys, ${spy.bytes} bytes`,
        );
        assert.ok(spy.keys.length > 185);
      } finally {
        await cold.close();
      }
    } finally {
      await store.close();
    }
  });

  test('records of the first layout (no index, no marker) are found by CHECK, released by DEL and GC', async () => {
    // the plugin's own store: the default prefix
    const ipam = { etcd_host: etcd.host, range: '10.41.0.0/24', network_name: 'oldnet' };
    const run = cniRunner(plugin, {
      containerId: 'c0',
      ifName: 'net1',
      netns: '/var/run/netns/x',
      env: { NODENAME: 'old-node', CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u' },
    });
    const netconf = {
      cniVersion: '1.1.0',
      name: 'oldnet',
      type: 'macvlan',
      ipam: { type: 'cluster-ipam', datastore: 'etcd', ...ipam },
    };
    const raw = new EtcdStore({ ...etcd.clientOptions });
    try {
      // three ADDs by this build, then the index and the marker removed: exactly what the first layout left
      const results = [];
      for (const id of ['c0', 'c1', 'c2'])
        results.push(expectOk(await run.add(netconf, { containerId: id })));
      assert.ok(
        (await raw.client.deleteRange(`${raw.prefix}by-node/`, Buffer.from(`${raw.prefix}by-node0`))) >= 3,
      );
      assert.equal(await raw.client.deleteRange(raw.layoutKey), 1);
      const before = await raw.list<AllocationSpec>('allocations', 'oldnet.');
      assert.equal(before.length, 3);
      // CHECK finds the record of c0 (the first node list indexes the old records first)
      expectOk(await run.check({ ...netconf, prevResult: results[0] }, { containerId: 'c0' }));
      const marker = await raw.client.get(raw.layoutKey);
      assert.match(marker.kv?.value.toString() ?? '', /"layout":2/, 'the migration wrote the marker');
      // migrated entries keep the records' versions: a holder of the old version can still delete
      const idx = await raw.list<AllocationSpec>('allocations', 'oldnet.', { node: 'old-node' });
      assert.deepEqual(
        idx.map((o) => `${o.name}@${o.version}`).sort(),
        before.map((o) => `${o.name}@${o.version}`).sort(),
      );
      // DEL releases c1's; GC with only c0 valid releases c2's
      expectOk(await run.del(netconf, { containerId: 'c1' }));
      const afterDel = await raw.list<AllocationSpec>('allocations', 'oldnet.');
      assert.deepEqual(afterDel.map((r) => r.spec.containerID).sort(), ['c0', 'c2']);
      expectOk(
        await run.gc({ ...netconf, 'cni.dev/valid-attachments': [{ containerID: 'c0', ifname: 'net1' }] }),
      );
      const afterGc = await raw.list<AllocationSpec>('allocations', 'oldnet.');
      assert.deepEqual(
        afterGc.map((r) => r.spec.containerID),
        ['c0'],
      );
      expectOk(await run.del(netconf, { containerId: 'c0' }));
      assert.equal((await raw.list('allocations', 'oldnet.')).length, 0);
      assert.equal(
        (
          await raw.client.range({ key: `${raw.prefix}by-node/`, rangeEnd: `${raw.prefix}by-node0` })
        ).kvs.filter((kv) => kv.key.toString().includes('/allocations/oldnet.')).length,
        0,
        'no index entry left behind',
      );
      // CHECK of a released attachment still fails
      expectCniError(await run.check({ ...netconf, prevResult: results[0] }, { containerId: 'c0' }), 999);
    } finally {
      await raw.close();
    }
  });

  test('after the marker: an unindexed record (an older cnikit) and a dangling entry are put right by migrate()', async () => {
    const store = new EtcdStore({ ...etcd.clientOptions, prefix: '/straggler/' });
    try {
      assert.ok(await store.create('allocations', 'n.4-0a2a00.05', { node: 'n1', ip: '10.42.0.5' }));
      const m0 = await store.migrate();
      assert.deepEqual(m0, { indexed: 0, removed: 0, skipped: 0 }, 'written by this build: indexed already');
      // an older cnikit writes a record without its entry, and deletes one whose entry stays
      await store.client.put(
        store.key('allocations', 'n.4-0a2a00.06'),
        JSON.stringify({ node: 'n1', ip: '10.42.0.6' }),
      );
      await store.client.deleteRange(store.key('allocations', 'n.4-0a2a00.05'));
      const stale = await store.list('allocations', '', { node: 'n1' });
      assert.deepEqual(
        stale.map((o) => o.name),
        ['n.4-0a2a00.05'],
        'what the index says before the pass',
      );
      // a DEL or GC of this build that meets such an entry removes it (the object stays absent)
      const ghost = await store.create('allocations', 'n.4-0a2a00.07', { node: 'n1', ip: '10.42.0.7' });
      assert.ok(ghost);
      await store.client.deleteRange(store.key('allocations', 'n.4-0a2a00.07'));
      assert.equal(await store.delete('allocations', ghost.name, ghost.version, ghost.spec), false);
      assert.equal(
        (await store.client.get(store.indexKey('n1', 'allocations', 'n.4-0a2a00.07'))).kv,
        undefined,
        'the dangling entry went with the failed delete',
      );
      const m = await store.migrate();
      assert.deepEqual(m, { indexed: 1, removed: 1, skipped: 0 });
      const now = await store.list('allocations', '', { node: 'n1' });
      assert.deepEqual(
        now.map((o) => o.name),
        ['n.4-0a2a00.06'],
      );
      const main = await store.get('allocations', 'n.4-0a2a00.06');
      assert.equal(now[0]?.version, main?.version, "the entry carries the record's own version");
      assert.ok(await store.delete('allocations', 'n.4-0a2a00.06', now[0]?.version, now[0]?.spec));
      assert.deepEqual(await store.list('allocations', '', { node: 'n1' }), []);
      // 70 of them (more than two migration transactions of 32), for two nodes
      for (let i = 0; i < 70; i++)
        await store.client.put(
          store.key('allocations', `n.4-0a2a01.${i.toString(16).padStart(2, '0')}`),
          JSON.stringify({ node: `n${i % 2}`, ip: `10.42.1.${i}` }),
        );
      assert.deepEqual(await store.migrate(), { indexed: 70, removed: 0, skipped: 0 });
      assert.equal((await store.list('allocations', '', { node: 'n0' })).length, 35);
      assert.equal((await store.list('allocations', '', { node: 'n1' })).length, 35);
      assert.deepEqual(
        await store.migrate(),
        { indexed: 0, removed: 0, skipped: 0 },
        'a second pass: nothing',
      );
    } finally {
      await store.client.deleteRange('/straggler/', '/straggler0');
      await store.close();
    }
  });

  test('the index follows create, update (a change of node) and delete; 24 concurrent creates: one winner, one entry', async () => {
    const store = new EtcdStore({ ...etcd.clientOptions, prefix: '/follow/' });
    try {
      const racers = Array.from({ length: 24 }, (_, i) =>
        store.create('allocations', 'race', { node: `n${i % 6}`, i }),
      );
      const won = (await Promise.all(racers)).filter((x) => x !== undefined);
      assert.equal(won.length, 1);
      const winner = won[0] as { spec: { node: string }; version: string };
      const entries = await store.client.range({ key: '/follow/by-node/', rangeEnd: '/follow/by-node0' });
      assert.deepEqual(
        entries.kvs.map((kv) => kv.key.toString()),
        [store.indexKey(winner.spec.node, 'allocations', 'race')],
      );
      const moved = await store.update('allocations', 'race', { node: 'elsewhere', i: -1 }, winner.version);
      assert.ok(moved);
      assert.deepEqual(await store.list('allocations', '', { node: winner.spec.node }), []);
      const there = await store.list('allocations', '', { node: 'elsewhere' });
      assert.deepEqual(
        there.map((o) => [o.name, o.version]),
        [['race', moved.version]],
      );
      assert.equal(
        await store.update('allocations', 'race', { node: 'x' }, winner.version),
        undefined,
        'a stale version is refused',
      );
      // a plain delete (no version) removes the entry too
      assert.equal(await store.delete('allocations', 'race'), true);
      const left = await store.client.range({ key: '/follow/', rangeEnd: '/follow0' });
      assert.deepEqual(
        left.kvs.map((kv) => kv.key.toString()).filter((k) => k !== store.layoutKey),
        [],
      );
    } finally {
      await store.client.deleteRange('/follow/', '/follow0');
      await store.close();
    }
  });
});
