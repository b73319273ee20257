/**
 * The behaviour every cluster-ipam Store backend must have (store.ts), as one reusable test suite:
 *
 *   import { test } from 'node:test';
 *   test('etcd store: the contract', (t) => storeContract(t, store));
 *
 * Each case is a subtest; names it creates start with a per-run prefix, so it can run against a store that
 * already holds objects (and leaves only what it could not delete on failure).
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Store, StoreKind } from '../store.ts';

export interface StoreContractOptions {
  /** How many concurrent creates race for one name, and concurrent writers increment one counter (default 24). */
  concurrency?: number;
  /** Objects listed in the list case (default 120: more than one page of a small page size). */
  listSize?: number;
  /** Prefix of every name the suite creates (default "contract-<time>-<pid>-"). */
  namePrefix?: string;
}

interface Counter {
  n: number;
}

export async function storeContract(
  t: TestContext,
  store: Store,
  opts: StoreContractOptions = {},
): Promise<void> {
  const conc = opts.concurrency ?? 24;
  const listSize = opts.listSize ?? 120;
  const pre = opts.namePrefix ?? `contract-${Date.now().toString(36)}-${process.pid}-`;
  const kinds: StoreKind[] = ['blocks', 'allocations'];

  await t.test(
    'get of an absent name is undefined; create then get returns the spec and the same version',
    async () => {
      for (const kind of kinds) {
        const name = `${pre}basic-${kind}`;
        assert.equal(await store.get(kind, name), undefined);
        const made = await store.create(kind, name, { kind, list: [1, 2], nested: { a: 'b' } });
        assert.ok(made, 'create of an absent name succeeds');
        assert.equal(made.name, name);
        assert.equal(typeof made.version, 'string');
        assert.ok(made.version.length > 0);
        const got = await store.get(kind, name);
        assert.deepEqual(got, {
          name,
          spec: { kind, list: [1, 2], nested: { a: 'b' } },
          version: made.version,
        });
        assert.equal(
          await store.create(kind, name, { other: true }),
          undefined,
          'a second create is refused',
        );
        assert.deepEqual((await store.get(kind, name))?.spec, { kind, list: [1, 2], nested: { a: 'b' } });
      }
      // the kinds are separate name spaces
      assert.ok(await store.delete('blocks', `${pre}basic-blocks`));
      assert.ok(await store.get('allocations', `${pre}basic-allocations`));
      assert.equal(await store.get('allocations', `${pre}basic-blocks`), undefined);
      assert.ok(await store.delete('allocations', `${pre}basic-allocations`));
    },
  );

  await t.test(`${conc} concurrent creates of one name: exactly one wins, its spec is stored`, async () => {
    const name = `${pre}race`;
    const results = await Promise.all(
      Array.from({ length: conc }, (_, i) => store.create('allocations', name, { winner: i })),
    );
    const winners = results.filter((r) => r !== undefined);
    assert.equal(winners.length, 1, `winners: ${JSON.stringify(winners)}`);
    const stored = await store.get<{ winner: number }>('allocations', name);
    assert.deepEqual(stored?.spec, winners[0]?.spec);
    assert.equal(stored?.version, winners[0]?.version);
    assert.ok(await store.delete('allocations', name, stored?.version));
  });

  await t.test(
    'update: the current version wins and moves the version; a stale one, or a gone object, is refused',
    async () => {
      const name = `${pre}cas`;
      const v1 = await store.create('blocks', name, { n: 1 });
      assert.ok(v1);
      const v2 = await store.update('blocks', name, { n: 2 }, v1.version);
      assert.ok(v2, 'update with the current version');
      assert.notEqual(v2.version, v1.version);
      assert.deepEqual(await store.get('blocks', name), { name, spec: { n: 2 }, version: v2.version });
      assert.equal(
        await store.update('blocks', name, { n: 3 }, v1.version),
        undefined,
        'stale version refused',
      );
      assert.deepEqual((await store.get('blocks', name))?.spec, { n: 2 });
      assert.ok(await store.delete('blocks', name, v2.version));
      assert.equal(await store.update('blocks', name, { n: 4 }, v2.version), undefined, 'gone: refused');
      assert.equal(await store.get('blocks', name), undefined, 'update never re-creates');
      assert.equal(await store.update('blocks', `${pre}never`, { n: 5 }, v2.version), undefined);
    },
  );

  await t.test(
    `${conc} writers increment one counter with read-modify-write: no update is lost`,
    async () => {
      const name = `${pre}counter`;
      assert.ok(await store.create<Counter>('blocks', name, { n: 0 }));
      let conflicts = 0;
      await Promise.all(
        Array.from({ length: conc }, async () => {
          for (;;) {
            const cur = await store.get<Counter>('blocks', name);
            assert.ok(cur);
            if (await store.update<Counter>('blocks', name, { n: cur.spec.n + 1 }, cur.version)) return;
            conflicts++;
          }
        }),
      );
      const end = await store.get<Counter>('blocks', name);
      assert.equal(end?.spec.n, conc, `final count (after ${conflicts} conflicts)`);
      assert.ok(await store.delete('blocks', name));
    },
  );

  await t.test(
    'delete: a stale version is refused and keeps the object; the current one removes it; then false',
    async () => {
      const name = `${pre}del`;
      const v1 = await store.create('allocations', name, { a: 1 });
      assert.ok(v1);
      const v2 = await store.update('allocations', name, { a: 2 }, v1.version);
      assert.ok(v2);
      assert.equal(await store.delete('allocations', name, v1.version), false, 'stale version refused');
      assert.deepEqual((await store.get('allocations', name))?.spec, { a: 2 });
      assert.equal(await store.delete('allocations', name, v2.version), true);
      assert.equal(await store.get('allocations', name), undefined);
      assert.equal(await store.delete('allocations', name, v2.version), false, 'already gone');
      assert.equal(await store.delete('allocations', name), false, 'already gone, no version');
      // without a version: removes whatever is there
      assert.ok(await store.create('allocations', name, { a: 3 }));
      assert.equal(await store.delete('allocations', name), true);
      assert.equal(await store.get('allocations', name), undefined);
      // the name can be created again after a delete
      assert.ok(await store.create('allocations', name, { a: 4 }));
      assert.ok(await store.delete('allocations', name));
    },
  );

  await t.test(
    `list: ${listSize} objects by prefix, every one with its spec and version, other prefixes and kinds apart`,
    async () => {
      const made = new Map<string, string>();
      const names = Array.from({ length: listSize }, (_, i) => `${pre}list-a-${String(i).padStart(4, '0')}`);
      for (let i = 0; i < names.length; i += 16) {
        const batch = await Promise.all(names.slice(i, i + 16).map((n) => store.create('blocks', n, { n })));
        for (const o of batch) {
          assert.ok(o);
          made.set(o.name, o.version);
        }
      }
      const others = [`${pre}list-b-1`, `${pre}list-b-2`];
      for (const n of others) assert.ok(await store.create('blocks', n, { n }));
      assert.ok(await store.create('allocations', `${pre}list-a-alloc`, { n: 'alloc' }));

      const listed = await store.list<{ n: string }>('blocks', `${pre}list-a-`);
      assert.deepEqual(listed.map((o) => o.name).sort(), [...names].sort());
      for (const o of listed) {
        assert.equal(o.spec.n, o.name);
        assert.equal(o.version, made.get(o.name), `version of ${o.name} as create returned it`);
      }
      const all = await store.list('blocks', `${pre}list-`);
      assert.equal(all.length, listSize + others.length);
      assert.deepEqual(
        (await store.list('allocations', `${pre}list-`)).map((o) => o.name),
        [`${pre}list-a-alloc`],
      );
      assert.deepEqual(await store.list('blocks', `${pre}list-none-`), []);

      for (const n of [...names, ...others]) assert.ok(await store.delete('blocks', n));
      assert.ok(await store.delete('allocations', `${pre}list-a-alloc`));
      assert.deepEqual(await store.list('blocks', `${pre}list-`), []);
    },
  );

  await t.test('names that are no DNS-1123 subdomain are refused before anything is written', async () => {
    for (const bad of ['UPPER', 'a/b', '', '-lead', 'trail-', 'x'.repeat(254)]) {
      await assert.rejects(store.create('blocks', bad, {}), Error, `create "${bad.slice(0, 20)}"`);
    }
  });
}
