// The allocator's logic over the in-memory Store: no duplicates under concurrent ADDs of several nodes, block
// claims, borrowing, exhaustion, idempotent DEL, node-scoped GC, STATUS figures, overlapping pools, 128-bit IPv6.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AllocationSpec,
  Allocator,
  type BlockSpec,
  NodeBlocks,
  NodeView,
  PoolExhaustedError,
  VIEW_MAX_AGE_MS,
} from './allocator.ts';
import { parseConf } from './config.ts';
import type { Pool } from './pool.ts';
import type { ListOptions, StoreKind } from './store.ts';
import { MemoryStore } from './testdata/memory-store.ts';

function pools(ipam: Record<string, unknown>): Pool[] {
  return parseConf(
    { name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam', ...ipam } },
    { args: '', command: 'ADD', env: { NODENAME: 'x' } },
    { flatFiles: [] },
  ).pools;
}

function alloc(
  store: MemoryStore,
  node: string,
  p: Pool[],
  overlapping = true,
  net = 'default',
  view?: NodeView,
): Allocator {
  return new Allocator(store, { net, overlapping, pools: p, node }, undefined, view);
}

async function records(store: MemoryStore) {
  return store.list<AllocationSpec>('allocations');
}

describe('allocation', () => {
  test('4 nodes × 25 concurrent ADDs on a 100-address pool: 100 distinct addresses, then exhaustion naming the pool', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.0.0.0/25', range_end: '10.0.0.100' });
    assert.equal(p[0]!.size, 100n);
    const nodes = ['n1', 'n2', 'n3', 'n4'];
    const all = await Promise.all(
      nodes.flatMap((n) =>
        Array.from({ length: 25 }, (_, i) =>
          alloc(store, n, p).allocate({ containerID: `${n}-c${i}`, ifName: 'net1' }),
        ),
      ),
    );
    const ips = all.map((a) => a[0]!.ip);
    assert.equal(new Set(ips).size, 100);
    const recs = await records(store);
    assert.equal(recs.length, 100);
    for (const r of recs) assert.equal(r.spec.containerID.split('-')[0], r.spec.node);
    await assert.rejects(
      alloc(store, 'n5', p).allocate({ containerID: 'late', ifName: 'net1' }),
      (e: unknown) => {
        assert.ok(e instanceof PoolExhaustedError);
        assert.match(
          e.message,
          /pool 10\.0\.0\.0\/25 \(10\.0\.0\.1-10\.0\.0\.100, 100 addresses\) is exhausted/,
        );
        return true;
      },
    );
    const st = await alloc(store, 'n5', p).status();
    assert.equal(st[0]!.freeOwn + st[0]!.freeUnclaimed + st[0]!.freeBorrowable, 0n);
  });

  test('a node claims a block, takes from it, and reads only its own blocks and records per ADD', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.1.0.0/16' });
    const a = alloc(store, 'n1', p);
    const first = await a.allocate({ containerID: 'c1', ifName: 'eth0' });
    const blocks = await store.list<BlockSpec>('blocks');
    assert.equal(blocks.length, 1);
    assert.equal(blocks[0]!.spec.node, 'n1');
    assert.equal(blocks[0]!.spec.size, 32);
    const listsBefore = store.calls.list;
    const listedBefore = store.listed;
    await a.allocate({ containerID: 'c2', ifName: 'eth0' });
    // one list of this node's blocks (1), one of the records it holds (1), one create
    assert.equal(store.calls.list - listsBefore, 2);
    assert.equal(store.listed - listedBefore, 2);
    assert.equal((await store.list('blocks')).length, 1);
    assert.equal(first[0]!.record.spec.block, blocks[0]!.name);
  });

  test('a cold ADD reads the same whatever the pool holds: not the other nodes’ blocks and records', async () => {
    // per ADD: objects the store sends back, for one node holding 5 addresses, beside 1 and then 60 other nodes
    const cost = async (others: number, range: string) => {
      const store = new MemoryStore();
      const p = pools({ range, block_size: 8 });
      for (let n = 0; n < others; n++)
        for (let i = 0; i < 6; i++)
          await alloc(store, `o${n}`, p).allocate({ containerID: `o${n}-${i}`, ifName: 'e' });
      const a = alloc(store, 'me', p);
      for (let i = 0; i < 5; i++) await a.allocate({ containerID: `m${i}`, ifName: 'e' });
      const before = { listed: store.listed, lists: store.calls.list, creates: store.calls.create };
      await a.allocate({ containerID: 'last', ifName: 'e' });
      return {
        listed: store.listed - before.listed,
        lists: store.calls.list - before.lists,
        creates: store.calls.create - before.creates,
      };
    };
    const small = await cost(1, '10.20.0.0/22');
    const big = await cost(60, '10.21.0.0/18');
    assert.deepEqual(small, { listed: 6, lists: 2, creates: 1 });
    assert.deepEqual(big, small);
  });

  test('a repeated ADD of a borrowed address answers that address, not a second one', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.2.1.0/29' }); // 6 addresses, one per block
    const a = alloc(store, 'n1', p);
    for (let i = 0; i < 6; i++) await a.allocate({ containerID: `a${i}`, ifName: 'eth0' });
    await a.release('a3', 'eth0');
    const b = alloc(store, 'n2', p);
    const first = await b.allocate({ containerID: 'b0', ifName: 'eth0' });
    assert.equal(first[0]!.record.spec.borrowed, true);
    // a free address again, which a second allocation would take
    await a.release('a4', 'eth0');
    const again = await b.allocate({ containerID: 'b0', ifName: 'eth0' });
    assert.equal(again[0]!.ip, first[0]!.ip);
    assert.equal(again[0]!.existing, true);
    const mine = (await records(store)).filter((r) => r.spec.containerID === 'b0');
    assert.deepEqual(
      mine.map((r) => r.spec.ip),
      [first[0]!.ip],
    );
  });

  test('enable_overlapping_ranges false: two configurations of one range never hand out one address twice', async () => {
    // whereabouts keeps one IPPool per network_name and range CIDR, whatever range_start/range_end/exclude say
    const store = new MemoryStore();
    const one = pools({ range: '10.9.0.0/24', range_start: '10.9.0.10', range_end: '10.9.0.10' });
    const other = pools({
      range: '10.9.0.0/24',
      range_start: '10.9.0.9',
      range_end: '10.9.0.10',
      exclude: ['10.9.0.9/32'],
    });
    const x = await alloc(store, 'n1', one, false).allocate({ containerID: 'a', ifName: 'e' });
    assert.equal(x[0]!.ip, '10.9.0.10');
    await assert.rejects(
      alloc(store, 'n2', other, false).allocate({ containerID: 'b', ifName: 'e' }),
      PoolExhaustedError,
    );
    assert.deepEqual(
      (await records(store)).map((r) => r.spec.ip),
      ['10.9.0.10'],
    );
    // another network_name is another pool: the address may be handed out there
    const y = await alloc(store, 'n2', other, false, 'blue').allocate({ containerID: 'b', ifName: 'e' });
    assert.equal(y[0]!.ip, '10.9.0.10');
  });

  test('a repeated ADD of one attachment answers the same address', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.1.0.0/24' });
    const a = alloc(store, 'n1', p);
    const x = await a.allocate({ containerID: 'c1', ifName: 'eth0' });
    const y = await a.allocate({ containerID: 'c1', ifName: 'eth0' });
    assert.equal(x[0]!.ip, y[0]!.ip);
    assert.equal(y[0]!.existing, true);
    assert.equal((await records(store)).length, 1);
  });

  test('borrowing: when every block is claimed, a node takes a free address in another node’s block', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.2.0.0/29' }); // 6 addresses, one per block
    assert.equal(p[0]!.blockBits, 0);
    const a = alloc(store, 'n1', p);
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await a.allocate({ containerID: `a${i}`, ifName: 'eth0' }));
    await a.release('a3', 'eth0');
    const b = alloc(store, 'n2', p);
    const borrowed = await b.allocate({ containerID: 'b0', ifName: 'eth0' });
    assert.equal(borrowed[0]!.ip, got[3]![0]!.ip);
    assert.equal(borrowed[0]!.record.spec.borrowed, true);
    assert.equal(borrowed[0]!.record.spec.node, 'n2');
    // DEL finds the borrowed record (it is not in n2's blocks)
    assert.deepEqual(await b.release('b0', 'eth0'), [borrowed[0]!.ip]);
  });

  test('two pools: one address each; a failure in the second gives the first back', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.3.0.0/30', ipRanges: [{ range: 'fd00:3::/126' }] });
    const a = alloc(store, 'n1', p);
    const both = await a.allocate({ containerID: 'c1', ifName: 'eth0' });
    assert.deepEqual(
      both.map((x) => x.pool.family),
      [4, 6],
    );
    await a.allocate({ containerID: 'c2', ifName: 'eth0' });
    // v6 /126 has 2 usable addresses, v4 /30 has 2: the third fails on v4 first; use a v6-only fill to fail the 2nd
    const store2 = new MemoryStore();
    const q = pools({ range: '10.4.0.0/24', ipRanges: [{ range: 'fd00:4::/127' }] });
    const b = alloc(store2, 'n1', q);
    await b.allocate({ containerID: 'c1', ifName: 'eth0' });
    await b.allocate({ containerID: 'c2', ifName: 'eth0' });
    await assert.rejects(b.allocate({ containerID: 'c3', ifName: 'eth0' }), PoolExhaustedError);
    assert.equal((await records(store2)).filter((r) => r.spec.containerID === 'c3').length, 0);
  });

  test('overlapping pools of one network never hand out one address twice (records are named by address)', async () => {
    const store = new MemoryStore();
    const wide = pools({ range: '10.5.0.0/28' });
    const narrow = pools({ range: '10.5.0.0/29' });
    const ips = new Set<string>();
    for (let i = 0; i < 6; i++)
      ips.add((await alloc(store, 'n1', narrow).allocate({ containerID: `n${i}`, ifName: 'e' }))[0]!.ip);
    for (let i = 0; i < 8; i++)
      ips.add((await alloc(store, 'n2', wide).allocate({ containerID: `w${i}`, ifName: 'e' }))[0]!.ip);
    assert.equal(ips.size, 14);
    // without overlapping ranges (whereabouts' enable_overlapping_ranges false) each pool is on its own
    const s2 = new MemoryStore();
    const x = await alloc(s2, 'n1', narrow, false).allocate({ containerID: 'a', ifName: 'e' });
    const y = await alloc(s2, 'n1', wide, false).allocate({ containerID: 'b', ifName: 'e' });
    assert.notEqual(x[0]!.record.name, y[0]!.record.name);
  });

  test('128-bit IPv6: a range at the top of the address space', async () => {
    const store = new MemoryStore();
    const p = pools({ range: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120' });
    const a = alloc(store, 'n1', p);
    const got = await a.allocate({ containerID: 'c', ifName: 'e' });
    assert.match(got[0]!.ip, /^ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff[0-9a-f]{2}$/);
    assert.ok(got[0]!.record.name.length <= 253);
    const big = pools({ range: 'fd00::/8' });
    const r = await alloc(store, 'n1', big).allocate({ containerID: 'c', ifName: 'e' });
    assert.match(r[0]!.ip, /^fd/);
  });
});

describe('the warm view (the node service keeps it between calls)', () => {
  test('after the first ADD: an ADD is one create and nothing else, a DEL one delete', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.30.0.0/20' });
    const view = new NodeView();
    const a = alloc(store, 'n1', p, true, 'default', view);
    await a.allocate({ containerID: 'c0', ifName: 'e' });
    const before = { ...store.calls };
    const got = [];
    for (let i = 1; i <= 20; i++) got.push((await a.allocate({ containerID: `c${i}`, ifName: 'e' }))[0]!);
    // 20 more ADDs in the node's block of 32
    assert.equal(store.calls.create - before.create, 20);
    assert.equal(store.calls.list - before.list, 0);
    assert.equal(store.calls.get - before.get, 0);
    assert.equal(new Set(got.map((g) => g.ip)).size, 20);
    const del0 = { ...store.calls };
    assert.deepEqual(await a.release('c5', 'e'), [got[4]!.ip]);
    assert.equal(store.calls.delete - del0.delete, 1);
    assert.equal(store.calls.list - del0.list + store.calls.get - del0.get, 0);
    // a repeat ADD is answered from memory
    const again = await a.allocate({ containerID: 'c7', ifName: 'e' });
    assert.equal(again[0]!.ip, got[6]!.ip);
    assert.equal(store.calls.create - del0.create, 0);
  });

  test('concurrent ADDs through one view: distinct addresses; a view that runs dry is read again', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.31.0.0/28' }); // 14 addresses, one per block
    const view = new NodeView();
    const a = alloc(store, 'n1', p, true, 'default', view);
    const other = alloc(store, 'n2', p);
    const got = await Promise.all(
      Array.from({ length: 8 }, (_, i) => a.allocate({ containerID: `c${i}`, ifName: 'e' })),
    );
    assert.equal(new Set(got.map((g) => g[0]!.ip)).size, 8);
    for (let i = 0; i < 6; i++) await other.allocate({ containerID: `o${i}`, ifName: 'e' });
    // n1 gives one back, n2 borrows it (n1's view does not know)
    await a.release('c3', 'e');
    const borrowed = await other.allocate({ containerID: 'o-b', ifName: 'e' });
    assert.equal(borrowed[0]!.ip, got[3]![0]!.ip);
    assert.equal(borrowed[0]!.record.spec.borrowed, true);
    await assert.rejects(a.allocate({ containerID: 'x', ifName: 'e' }), PoolExhaustedError);
    // another process (a cold DEL) frees it: the view read again finds it
    await other.release('o-b', 'e');
    const loads = view.loads;
    const late = await a.allocate({ containerID: 'x', ifName: 'e' });
    assert.equal(late[0]!.ip, got[3]![0]!.ip);
    assert.equal(view.loads, loads + 1);
    const ips = (await records(store)).map((r) => r.spec.ip);
    assert.equal(ips.length, 14);
    assert.equal(new Set(ips).size, 14);
  });

  test('ADDs behind a block claim create their records beside each other, not one at a time in the lock', async () => {
    // a store whose creates of records take a while: how many run at once
    class SlowStore extends MemoryStore {
      now = 0;
      most = 0;
      override async create<T>(kind: Parameters<MemoryStore['create']>[0], name: string, spec: T) {
        if (kind !== 'allocations') return super.create(kind, name, spec);
        this.most = Math.max(this.most, ++this.now);
        try {
          await new Promise((r) => setTimeout(r, 20));
          return await super.create(kind, name, spec);
        } finally {
          this.now--;
        }
      }
    }
    const store = new SlowStore();
    const p = pools({ range: '10.33.0.0/24', block_size: 16 });
    const view = new NodeView();
    const a = alloc(store, 'n1', p, true, 'default', view);
    // a new view: no block yet, so every call waits for the lock; the first claims a block of 16
    const got = await Promise.all(
      Array.from({ length: 8 }, (_, i) => a.allocate({ containerID: `c${i}`, ifName: 'e' })),
    );
    assert.equal(new Set(got.map((g) => g[0]!.ip)).size, 8);
    assert.ok(store.most >= 4, `at most ${store.most} creates at once`);
  });

  test('a view is read exactly when new, and again once it is older than a minute', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.32.0.0/24' });
    const view = new NodeView();
    const a = alloc(store, 'n1', p, true, 'default', view);
    await a.allocate({ containerID: 'c0', ifName: 'e' });
    assert.equal(view.loads, 1);
    // a record written by a previous image of the service (or a cold call) for this node
    const cold = alloc(store, 'n1', p);
    const c1 = await cold.allocate({ containerID: 'c1', ifName: 'e' });
    view.loadedAt = Date.now() - VIEW_MAX_AGE_MS - 1;
    const again = await a.allocate({ containerID: 'c1', ifName: 'e' });
    assert.equal(view.loads, 2);
    assert.equal(again[0]!.ip, c1[0]!.ip);
    assert.equal(again[0]!.existing, true);
  });
});

describe('DEL, GC, STATUS', () => {
  test('DEL releases and is idempotent; it releases only the attachment', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.6.0.0/24' });
    const a = alloc(store, 'n1', p);
    const x = await a.allocate({ containerID: 'c1', ifName: 'eth0' });
    await a.allocate({ containerID: 'c1', ifName: 'eth1' });
    assert.deepEqual(await a.release('c1', 'eth0'), [x[0]!.ip]);
    assert.deepEqual(await a.release('c1', 'eth0'), []);
    const left = await records(store);
    assert.deepEqual(
      left.map((r) => r.spec.ifName),
      ['eth1'],
    );
  });

  test('GC deletes only this node’s records whose attachment is not valid', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.7.0.0/24' });
    const a = alloc(store, 'n1', p);
    const b = alloc(store, 'n2', p);
    await a.allocate({ containerID: 'keep', ifName: 'eth0' });
    const gone = await a.allocate({ containerID: 'gone', ifName: 'eth0' });
    await b.allocate({ containerID: 'other-node', ifName: 'eth0' });
    assert.deepEqual(await a.gc([{ containerID: 'keep', ifname: 'eth0' }]), [gone[0]!.ip]);
    const left = (await records(store)).map((r) => r.spec.containerID).sort();
    assert.deepEqual(left, ['keep', 'other-node']);
  });

  test('STATUS counts what an ADD on this node can still get', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.8.0.0/22', block_size: 16 });
    assert.equal(p[0]!.blockBits, 4);
    const a = alloc(store, 'n1', p);
    await a.allocate({ containerID: 'c', ifName: 'e' });
    const [s] = await a.status();
    assert.equal(s!.ownBlocks, 1);
    assert.equal(s!.used, 1);
    // the block holds 16 addresses (15 when it starts at the network address)
    assert.ok([15n, 16n].includes(s!.freeOwn + 1n), String(s!.freeOwn));
    assert.equal(s!.freeOwn + s!.freeUnclaimed, 1021n);
    assert.equal(s!.freeBorrowable, 0n);
  });
});

describe('contention and the number of store calls', () => {
  test('concurrent cold ADDs of one node that find no block share the one block a call claims', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.40.0.0/20' }); // 128 blocks of 32
    const got = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        alloc(store, 'n1', p).allocate({ containerID: `c${i}`, ifName: 'e' }),
      ),
    );
    assert.equal(new Set(got.map((g) => g[0]!.ip)).size, 10);
    const blocks = await store.list<BlockSpec>('blocks');
    assert.equal(blocks.length, 1, blocks.map((b) => b.name).join(' '));
    for (const g of got) {
      assert.equal(g[0]!.record.spec.borrowed, false);
      assert.equal(g[0]!.record.spec.block, blocks[0]!.name);
    }
  });

  test('a warm view borrows from what its last borrowing read: one create per ADD, no list, until it runs dry', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.41.0.0/28' }); // 14 addresses, blocks of one
    const n1 = alloc(store, 'n1', p);
    for (let i = 0; i < 14; i++) await n1.allocate({ containerID: `a${i}`, ifName: 'e' });
    // n1 keeps every block, 7 of its addresses are free again
    for (let i = 0; i < 7; i++) await n1.release(`a${i}`, 'e');
    const view = new NodeView();
    const n2 = alloc(store, 'n2', p, true, 'default', view);
    const first = await n2.allocate({ containerID: 'b0', ifName: 'e' });
    assert.equal(first[0]!.record.spec.borrowed, true);
    const before = { ...store.calls };
    const ips = [first[0]!.ip];
    for (let i = 1; i < 7; i++) ips.push((await n2.allocate({ containerID: `b${i}`, ifName: 'e' }))[0]!.ip);
    assert.equal(new Set(ips).size, 7);
    assert.equal(store.calls.list - before.list, 0);
    assert.equal(store.calls.create - before.create, 6);
    // dry: read again, nothing left
    await assert.rejects(n2.allocate({ containerID: 'b7', ifName: 'e' }), PoolExhaustedError);
    assert.ok(store.calls.list > before.list);
    // an address freed meanwhile is found once the view reads again
    await n1.release('a7', 'e');
    const late = await n2.allocate({ containerID: 'b8', ifName: 'e' });
    assert.equal(late[0]!.record.spec.borrowed, true);
  });

  test('a view reads from the cache; once, after its first create, the node’s records not older than it; then the cache', async () => {
    const { spy, seen } = spyLists(new MemoryStore());
    const p = pools({ range: '10.42.0.0/24' });
    const view = new NodeView();
    const a = new Allocator(
      spy,
      { net: 'default', overlapping: true, pools: p, node: 'n1' },
      undefined,
      view,
    );
    const c0 = await a.allocate({ containerID: 'c0', ifName: 'e' });
    assert.ok(seen.length >= 3);
    assert.deepEqual(
      seen.filter((c) => c.mode !== 'cached'),
      [{ mode: 'fresh', atLeast: c0[0]!.record.version }],
      JSON.stringify(seen),
    );
    assert.equal(view.exactTried, true);
    seen.length = 0;
    view.loadedAt = 0; // what the warm service does after a failed call
    await a.allocate({ containerID: 'c1', ifName: 'e' });
    assert.ok(seen.length >= 2);
    assert.ok(
      seen.every((c) => c.mode === 'cached'),
      JSON.stringify(seen),
    );
  });
});

type Seen = { mode: 'cached' | 'fresh' | 'exact'; atLeast?: string };

/**
 * The store with its list calls recorded: `seen` gets each call's kind of read; a `fresh` list throws while
 * `failFresh()` is true; a cached list does not show the records `hidden()` names (the watch cache lagging).
 */
function spyLists(
  store: MemoryStore,
  failFresh: () => boolean = () => false,
  hidden: () => ReadonlySet<string> = () => new Set(),
): { spy: MemoryStore; seen: Seen[] } {
  const seen: Seen[] = [];
  const spy = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'list')
        return async (
          kind: 'blocks' | 'allocations',
          prefix?: string,
          opts?: { cached?: boolean; fresh?: boolean; atLeast?: string },
        ) => {
          const mode = opts?.cached ? 'cached' : opts?.fresh ? 'fresh' : 'exact';
          seen.push(opts?.atLeast ? { mode, atLeast: opts.atLeast } : { mode });
          if (failFresh() && mode === 'fresh') throw new Error('no answer within 10000 ms');
          const got = await target.list(kind, prefix, opts);
          return mode === 'cached' ? got.filter((o) => !hidden().has(o.name)) : got;
        };
      return Reflect.get(target, prop, receiver);
    },
  });
  return { spy, seen };
}

describe('the exact read of a new view', () => {
  test('when it fails, the ADD is answered from the cached view, and the next create tries it again', async () => {
    let failFresh = true;
    const { spy, seen } = spyLists(new MemoryStore(), () => failFresh);
    const p = pools({ range: '10.43.0.0/24' });
    const view = new NodeView();
    const a = new Allocator(
      spy,
      { net: 'default', overlapping: true, pools: p, node: 'n1' },
      undefined,
      view,
    );
    const c0 = await a.allocate({ containerID: 'c0', ifName: 'e' });
    assert.ok(c0[0]!.ip.startsWith('10.43.0.'));
    assert.equal(seen.filter((c) => c.mode === 'fresh').length, 1);
    assert.equal(view.exactTried, false);
    failFresh = false;
    seen.length = 0;
    await a.allocate({ containerID: 'c1', ifName: 'e' });
    assert.equal(seen.filter((c) => c.mode === 'fresh').length, 1);
    assert.equal(view.exactTried, true);
    seen.length = 0;
    await a.allocate({ containerID: 'c2', ifName: 'e' });
    assert.deepEqual(seen, []); // the view is read: no list at all
  });

  test('a record a killed image of the service wrote, which the cache does not show yet: the ADD answers it', async () => {
    const store = new MemoryStore();
    const p = pools({ range: '10.45.0.0/24' });
    // the previous image: its ADD of c1 landed, then it died before answering
    const killed = await alloc(store, 'n1', p).allocate({ containerID: 'c1', ifName: 'e' });
    const lagging = new Set([killed[0]!.record.name]);
    const { spy } = spyLists(store, undefined, () => lagging);
    const view = new NodeView();
    const a = new Allocator(
      spy,
      { net: 'default', overlapping: true, pools: p, node: 'n1' },
      undefined,
      view,
    );
    // the runtime asks again: the cached view misses the record, the exact read after the create finds it
    const again = await a.allocate({ containerID: 'c1', ifName: 'e' });
    assert.equal(again[0]!.ip, killed[0]!.ip);
    assert.equal(again[0]!.existing, true);
    const stored = (await records(store)).filter((r) => r.spec.containerID === 'c1');
    assert.deepEqual(
      stored.map((r) => r.spec.ip),
      [killed[0]!.ip],
    );
    assert.equal([...view.held.values()].filter((r) => r.spec.containerID === 'c1').length, 1);
  });
});

describe('a warm view read while other calls change it (calls beside each other in the warm service)', () => {
  test('a DEL answered while the view is read again is not undone by the read (its answer predates the DEL)', async () => {
    const store = new MemoryStore();
    let gate: Promise<void> | undefined;
    // lists answer what the store held when they were asked, but only once the gate opens
    const slow = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'list')
          return async (kind: 'blocks' | 'allocations', prefix?: string, opts?: object) => {
            const got = await target.list(kind, prefix, opts);
            if (gate) await gate;
            return got;
          };
        return Reflect.get(target, prop, receiver);
      },
    });
    const p = pools({ range: '10.44.0.0/24' });
    const view = new NodeView();
    const a = new Allocator(
      slow,
      { net: 'default', overlapping: true, pools: p, node: 'n1' },
      undefined,
      view,
    );
    const c0 = await a.allocate({ containerID: 'c0', ifName: 'e' });
    let open = () => {};
    gate = new Promise<void>((r) => {
      open = r;
    });
    view.loadedAt = Date.now() - VIEW_MAX_AGE_MS - 1; // the next ADD reads the view again
    const c1 = a.allocate({ containerID: 'c1', ifName: 'e' });
    await new Promise((r) => setTimeout(r, 20)); // its lists are asked: c0's record is in their answer
    assert.deepEqual(await a.release('c0', 'e'), [c0[0]!.ip]);
    open();
    gate = undefined;
    await c1;
    assert.equal(
      [...view.held.values()].some((r) => r.spec.containerID === 'c0'),
      false,
      'the released record is back in the view',
    );
    // a new ADD of c0 (the container again) gets a record that exists, not the deleted one
    const again = await a.allocate({ containerID: 'c0', ifName: 'e' });
    assert.equal(again[0]!.existing, false);
    const stored = (await records(store)).map((r) => r.spec.containerID).sort();
    assert.deepEqual(stored, ['c0', 'c1']);
  });
});

describe('N concurrent first ADDs of one node: the blocks claimed', () => {
  /**
   * A store whose cached lists lag (the API server's watch cache): objects created in the last `lagMs` are not in
   * them; creates and gets counted per kind, and the creates that found the name taken.
   */
  class LaggingStore extends MemoryStore {
    readonly born = new Map<string, number>();
    readonly made = { blocks: 0, allocations: 0 };
    readonly lost = { blocks: 0, allocations: 0 };
    readonly gets = { blocks: 0, allocations: 0 };
    constructor(readonly lagMs: number) {
      super();
    }
    override async list<T>(kind: StoreKind, prefix = '', opts: ListOptions = {}) {
      const all = await super.list<T>(kind, prefix, opts);
      if (!opts.cached) return all;
      const now = Date.now();
      return all.filter((o) => !((this.born.get(o.name) ?? 0) > now - this.lagMs));
    }
    override async create<T>(kind: StoreKind, name: string, spec: T) {
      await new Promise((r) => setTimeout(r, 2));
      const r = await super.create(kind, name, spec);
      if (r) {
        this.born.set(name, Date.now());
        this.made[kind]++;
      } else this.lost[kind]++;
      return r;
    }
    override async get<T>(kind: StoreKind, name: string) {
      this.gets[kind]++;
      return super.get<T>(kind, name);
    }
  }
  const N = 12;
  const adds = (mk: (i: number) => Allocator, tag: string) =>
    Promise.all(
      Array.from({ length: N }, (_, i) => mk(i).allocate({ containerID: `${tag}${i}`, ifName: 'e' })),
    );

  test('cold (a store and view per ADD, the cache lagging): one block; a lost claim costs one GET', async () => {
    const store = new LaggingStore(50);
    const p = pools({ range: '10.43.0.0/20' });
    const got = await adds(() => alloc(store, 'n1', p), 'c');
    assert.equal(new Set(got.map((g) => g[0]!.ip)).size, N);
    const blocks = await store.list<BlockSpec>('blocks');
    assert.equal(blocks.length, 1, blocks.map((b) => b.name).join(' '));
    for (const g of got) assert.equal(g[0]!.record.spec.block, blocks[0]!.name);
    // the re-read after a lost create race is the one block it lost to, nothing more
    assert.ok(store.gets.blocks <= store.lost.blocks, `${store.gets.blocks} GETs, ${store.lost.blocks} lost`);
  });

  test('warm (one view): one block, claimed by one create', async () => {
    const store = new LaggingStore(50);
    const p = pools({ range: '10.44.0.0/20' });
    const view = new NodeView();
    const got = await adds(() => alloc(store, 'n1', p, true, 'default', view), 'w');
    assert.equal(new Set(got.map((g) => g[0]!.ip)).size, N);
    assert.equal((await store.list<BlockSpec>('blocks')).length, 1);
    assert.deepEqual([store.made.blocks, store.lost.blocks, store.gets.blocks], [1, 0, 0]);
  });

  test('warm, two configurations sharing a pool on one node (their views share NodeBlocks): one block of it, one create', async () => {
    const store = new LaggingStore(50);
    const a = pools({ range: '10.45.0.0/20' });
    const ab = pools({ ipRanges: [{ range: '10.45.0.0/20' }, { range: '10.46.0.0/20' }] });
    assert.equal(a[0]!.key, ab[0]!.key, 'the same pool');
    const shared = new NodeBlocks();
    const v1 = new NodeView(shared);
    const v2 = new NodeView(shared);
    const [g1, g2] = await Promise.all([
      adds(() => alloc(store, 'n1', a, true, 'default', v1), 'x'),
      adds(() => alloc(store, 'n1', ab, true, 'default', v2), 'y'),
    ]);
    const ips = [...g1, ...g2].map((g) => g[0]!.ip);
    assert.equal(new Set(ips).size, 2 * N, 'no duplicate');
    const blocks = await store.list<BlockSpec>('blocks');
    const ofA = blocks.filter((b) => b.spec.pool === a[0]!.key);
    assert.equal(ofA.length, 1, ofA.map((b) => b.name).join(' '));
    assert.equal(blocks.length, 2, 'one block per pool');
    // each pool's block claimed by one create: no view lost a race to the other for it
    assert.deepEqual([store.made.blocks, store.lost.blocks, store.gets.blocks], [2, 0, 0]);
  });
});
