/**
 * cluster-ipam's etcd backend against a real etcd (Debian's /usr/bin/etcd on free loopback ports, its own data
 * directory, stopped and removed after): the store contract (store-contract.ts), lists at one revision across
 * pages while others write, TLS with client certificates plus user/password authentication, and etcd killed,
 * frozen and restarted under the store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Allocator } from './allocator.ts';
import { openStore } from './backend.ts';
import { parseConf } from './config.ts';
import { EtcdClient, EtcdError, prefixEnd } from './etcd.ts';
import { EtcdStore, etcdOptionsFromConfig, etcdStoreFromConfig } from './etcd-store.ts';
import { StoreConfigError } from './kubernetes.ts';
import { StoreUnavailableError } from './store.ts';
import { startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';
import { storeContract } from './testdata/store-contract.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('etcd store on a plain etcd', () => {
  let etcd: TestEtcd;
  let store: EtcdStore;
  before(async () => {
    etcd = await startTestEtcd();
    store = new EtcdStore({ ...etcd.clientOptions, pageSize: 7 });
  });
  after(async () => {
    await store?.close();
    await etcd?.stop();
  });

  test('the store contract (page size 7)', (t) => storeContract(t, store));

  test('keys: <prefix><kind>/<name>, the value is the spec as JSON, the version is the mod_revision', async () => {
    const made = await store.create('allocations', 'keys-check', { ip: '10.0.0.1' });
    assert.ok(made);
    const raw = await store.client.get('/cnikit/cluster-ipam/allocations/keys-check');
    assert.equal(raw.kv?.value.toString(), '{"ip":"10.0.0.1"}');
    assert.equal(raw.kv?.modRevision, made.version);
    assert.equal(raw.kv?.createRevision, made.version);
    const other = new EtcdStore({ ...etcd.clientOptions, prefix: '/other/' });
    try {
      assert.equal(
        await other.get('allocations', 'keys-check'),
        undefined,
        'another prefix is another store',
      );
    } finally {
      await other.close();
    }
    assert.ok(await store.delete('allocations', 'keys-check', made.version));
  });

  test('a list spans pages at the revision of its first page while writers create and delete', async () => {
    const names = Array.from({ length: 60 }, (_, i) => `paged-${String(i).padStart(3, '0')}`);
    for (const n of names) assert.ok(await store.create('blocks', n, { n }));
    let stop = false;
    let writes = 0;
    const writer = (async () => {
      for (let i = 0; !stop; i++) {
        // rewrite one of the 60, or add / remove one of 20 more
        if (i % 2 === 0) {
          const n = names[i % 60] as string;
          await store.client.put(store.key('blocks', n), JSON.stringify({ n, i }));
        } else {
          const n = `paged-${String(60 + (i % 20)).padStart(3, '0')}`;
          if ((await store.delete('blocks', n)) === false) await store.create('blocks', n, { n, i });
        }
        writes++;
      }
    })();
    try {
      let checked = 0;
      while (checked < 15) {
        const { items, revision } = await store.listAt<{ n: string }>('blocks', 'paged-');
        // the same range in one request at that revision: the reference answer
        const ref = await store.client.range({
          key: store.key('blocks', 'paged-'),
          rangeEnd: prefixEnd(store.key('blocks', 'paged-')),
          revision,
        });
        assert.deepEqual(
          items.map((o) => [o.name, o.version]),
          ref.kvs.map((kv) => [kv.key.toString().slice(store.key('blocks', '').length), kv.modRevision]),
        );
        for (const o of items) assert.ok(BigInt(o.version) <= BigInt(revision));
        assert.ok(items.length > 7, 'more than one page');
        checked++;
      }
      assert.ok(writes > 15, `the writer ran during the lists (${writes} writes)`);
    } finally {
      stop = true;
      await writer;
    }
    for (const o of await store.list('blocks', 'paged-')) await store.delete('blocks', o.name);
  });

  test('a list restarts at a newer revision when its revision is compacted away mid-way', async () => {
    for (let i = 0; i < 20; i++) assert.ok(await store.create('blocks', `compact-${i}`, { i }));
    // a client whose second range compacts first: the page at the old revision fails as compacted
    const s = new EtcdStore({ ...etcd.clientOptions, pageSize: 5 });
    const orig = s.client.range.bind(s.client);
    let calls = 0;
    s.client.range = async (o) => {
      if (++calls === 2) {
        await s.create('blocks', 'compact-late', { late: true });
        const cur = await orig({ key: 'x' });
        await s.client.call('/v3/kv/compaction', { revision: cur.revision, physical: true });
      }
      return orig(o);
    };
    try {
      const names = (await s.list('blocks', 'compact-')).map((o) => o.name);
      assert.equal(names.length, 21, 'the restarted list sees the object created after the compaction');
      assert.ok(calls > 5);
    } finally {
      await s.close();
    }
    for (const o of await store.list('blocks', 'compact-')) await store.delete('blocks', o.name);
  });
});

describe('etcd store with TLS client certificates and user/password authentication', () => {
  let etcd: TestEtcd;
  before(async () => {
    etcd = await startTestEtcd({ tls: true, auth: true, prefix: '/cnikit/' });
  });
  after(async () => {
    await etcd?.stop();
  });

  test("whereabouts' keys: etcd_host, etcd_username/etcd_password, etcd_cert_file/etcd_key_file/etcd_ca_cert_file", async (t) => {
    assert.ok(etcd.tls && etcd.user);
    const store = etcdStoreFromConfig({
      datastore: 'etcd',
      etcd_host: etcd.host,
      etcd_username: etcd.user.name,
      etcd_password: etcd.user.password,
      etcd_cert_file: etcd.tls.cert,
      etcd_key_file: etcd.tls.key,
      etcd_ca_cert_file: etcd.tls.ca,
    });
    try {
      await storeContract(t, store, { concurrency: 12, listSize: 30 });
      // the restricted user is held to its prefix by etcd itself
      await assert.rejects(store.client.put('/elsewhere/x', 'y'), (e: Error) => {
        assert.ok(e instanceof EtcdError, `${e}`);
        assert.match(e.message, /permission denied/);
        return true;
      });
    } finally {
      await store.close();
    }
  });

  test('a wrong password is an authentication error, not "unavailable"', async () => {
    assert.ok(etcd.tls && etcd.user);
    const store = etcdStoreFromConfig({
      etcd_host: etcd.host,
      etcd_username: etcd.user.name,
      etcd_password: 'wrong',
      etcd_cert_file: etcd.tls.cert,
      etcd_key_file: etcd.tls.key,
      etcd_ca_cert_file: etcd.tls.ca,
    });
    try {
      await assert.rejects(store.get('blocks', 'x'), (e: Error) => {
        assert.ok(!(e instanceof StoreUnavailableError), `${e.name}: ${e.message}`);
        assert.match(e.message, /authentication failed/);
        return true;
      });
    } finally {
      await store.close();
    }
  });

  test('a client certificate with a Common Name: an error that says what to change', async () => {
    assert.ok(etcd.tls && etcd.user);
    const store = etcdStoreFromConfig({
      etcd_host: etcd.host,
      etcd_username: etcd.user.name,
      etcd_password: etcd.user.password,
      etcd_cert_file: etcd.tls.cert.replace('client.crt', 'client-cn.crt'),
      etcd_key_file: etcd.tls.key.replace('client.key', 'client-cn.key'),
      etcd_ca_cert_file: etcd.tls.ca,
    });
    try {
      await assert.rejects(store.get('blocks', 'x'), /client certificate without CN/);
    } finally {
      await store.close();
    }
  });

  test('a token etcd no longer knows is replaced by a new one, transparently', async () => {
    assert.ok(etcd.user);
    const c = new EtcdClient(etcd.clientOptions);
    try {
      await c.put('/cnikit/token-1', 'a');
      // restarting etcd forgets every simple token
      await etcd.kill();
      await etcd.start();
      await c.put('/cnikit/token-2', 'b');
      assert.equal((await c.get('/cnikit/token-2')).kv?.value.toString(), 'b');
    } finally {
      c.close();
    }
  });

  test('configuration errors name the key', () => {
    assert.throws(() => etcdOptionsFromConfig({ datastore: 'etcd' }), /etcd_host/);
    assert.throws(
      () =>
        etcdOptionsFromConfig({
          etcd_host: 'h:1',
          etcd_cert_file: '/nonexistent/c.pem',
          etcd_key_file: '/x',
        }),
      /etcd_cert_file: cannot read \/nonexistent\/c\.pem/,
    );
    assert.ok(etcd.tls);
    assert.throws(
      () => etcdOptionsFromConfig({ etcd_host: 'h:1', etcd_cert_file: etcd.tls?.cert }),
      /etcd_cert_file and etcd_key_file go together/,
    );
    assert.throws(() => etcdOptionsFromConfig({ etcd_host: 'h:1', etcd_username: 'u' }), /go together/);
    assert.throws(() => new EtcdStore({ endpoints: 'ftp://h:1' }), /scheme must be http or https/);
  });
});

describe('etcd stopped, frozen and restarted under the store', () => {
  let etcd: TestEtcd;
  before(async () => {
    etcd = await startTestEtcd();
  });
  after(async () => {
    etcd?.thaw();
    await etcd?.stop();
  });

  test('killed mid-run: StoreUnavailableError at once; restarted: the same store works and kept every record', async () => {
    const store = new EtcdStore({ ...etcd.clientOptions, timeoutMs: 1500 });
    try {
      const made: string[] = [];
      let failure: unknown;
      let failedAfterMs = 0;
      let killedAt = 0;
      const run = (async () => {
        for (let i = 0; ; i++) {
          const t0 = Date.now();
          try {
            assert.ok(await store.create('allocations', `run-${i}`, { i }));
            made.push(`run-${i}`);
          } catch (e) {
            failure = e;
            failedAfterMs = Date.now() - t0;
            return;
          }
        }
      })();
      // a few creates first, however loaded the machine is
      for (const t = Date.now(); made.length <= 5 && failure === undefined && Date.now() - t < 30_000; )
        await sleep(50);
      killedAt = Date.now();
      await etcd.kill();
      await run;
      assert.ok(failure instanceof StoreUnavailableError, `${failure}`);
      assert.ok(failedAfterMs < 1600, `the failing call took ${failedAfterMs} ms`);
      assert.ok(Date.now() - killedAt < 3000);
      assert.ok(made.length > 5, `${made.length} creates before the kill`);
      // still down: every call fails the same way, quickly
      for (const call of [
        () => store.get('allocations', 'run-0'),
        () => store.list('allocations'),
        () => store.update('allocations', 'run-0', {}, '1'),
        () => store.delete('allocations', 'run-0'),
      ]) {
        const t0 = Date.now();
        await assert.rejects(call(), StoreUnavailableError);
        assert.ok(Date.now() - t0 < 1600);
      }
      await etcd.start();
      const listed = (await store.list('allocations', 'run-')).map((o) => o.name).sort();
      for (const n of made) assert.ok(listed.includes(n), `${n} survived the restart`);
      assert.ok(await store.create('allocations', 'after-restart', { ok: true }));
      assert.deepEqual((await store.get('allocations', 'after-restart'))?.spec, { ok: true });
    } finally {
      await store.close();
    }
  });

  test('frozen (accepts, never answers): StoreUnavailableError within the request bound; thawed: works', async () => {
    const store = new EtcdStore({ ...etcd.clientOptions, timeoutMs: 800 });
    try {
      assert.ok(await store.create('blocks', 'before-freeze', {}));
      await etcd.freeze();
      const t0 = Date.now();
      await assert.rejects(store.get('blocks', 'before-freeze'), (e: Error) => {
        assert.ok(e instanceof StoreUnavailableError);
        assert.match(e.message, /no answer within 800 ms/);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took >= 750 && took < 1500, `${took} ms`);
      etcd.thaw();
      assert.ok(await store.get('blocks', 'before-freeze'));
    } finally {
      etcd.thaw();
      await store.close();
    }
  });

  test('nothing listens on the port: StoreUnavailableError naming the endpoint', async () => {
    const store = new EtcdStore({ endpoints: '127.0.0.1:1', timeoutMs: 1000 });
    const t0 = Date.now();
    await assert.rejects(store.get('blocks', 'x'), /StoreUnavailableError|127\.0\.0\.1:1.*ECONNREFUSED/);
    assert.ok(Date.now() - t0 < 1000);
    await store.close();
  });
});

describe('cluster-ipam on etcd: "datastore": "etcd" opens this store, the allocator runs on it', () => {
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

  test('4 nodes × 15 concurrent ADDs on a 60-address pool: 60 distinct addresses, one record each, then exhaustion', async () => {
    const ipam = { etcd_host: etcd.host, range: '10.30.0.0/26', range_end: '10.30.0.60' };
    const nodes = ['node-a', 'node-b', 'node-c', 'node-d'];
    const stores = nodes.map((n) => openStore(confFor(ipam, n), {}));
    try {
      assert.ok(stores.every((s) => s instanceof EtcdStore));
      const results = await Promise.all(
        nodes.flatMap((n, i) => {
          const conf = confFor(ipam, n);
          const a = new Allocator(stores[i] as EtcdStore, {
            net: conf.net,
            overlapping: conf.overlapping,
            pools: conf.pools,
            node: n,
          });
          return Array.from({ length: 15 }, (_, j) =>
            a.allocate({ containerID: `c-${n}-${j}`, ifName: 'eth0' }),
          );
        }),
      );
      const ips = results.map((r) => r[0]?.ip);
      assert.equal(new Set(ips).size, 60, 'every address once');
      const records = await (stores[0] as EtcdStore).list<{ ip: string; node: string }>('allocations');
      assert.deepEqual(records.map((r) => r.spec.ip).sort(), [...ips].sort());
      const conf = confFor(ipam, 'node-a');
      const a = new Allocator(stores[0] as EtcdStore, {
        net: conf.net,
        overlapping: conf.overlapping,
        pools: conf.pools,
        node: 'node-a',
      });
      await assert.rejects(a.allocate({ containerID: 'one-more', ifName: 'eth0' }), /exhausted/);
    } finally {
      for (const s of stores) await s.close();
    }
  });

  test('an unreadable etcd_ca_cert_file is a configuration error naming the key; no etcd is a StoreUnavailableError', async () => {
    assert.throws(
      () =>
        openStore(
          confFor(
            { etcd_host: etcd.host, range: '10.31.0.0/24', etcd_ca_cert_file: '/nonexistent/ca.pem' },
            'x',
          ),
          {},
        ),
      (e: Error) =>
        e instanceof StoreConfigError &&
        /etcd_ca_cert_file: cannot read \/nonexistent\/ca\.pem/.test(e.message),
    );
    const s = openStore(confFor({ etcd_host: '127.0.0.1:1', range: '10.31.0.0/24' }, 'x'), {
      CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: '2000',
    });
    try {
      await assert.rejects(s.list('blocks'), StoreUnavailableError);
    } finally {
      await s.close();
    }
  });
});
