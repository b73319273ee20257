// The plugin's verbs in-process over an in-memory Store (the Kubernetes backend has its own *.k8s.test.ts):
// result shape, DEL idempotence, CHECK, GC scope, STATUS 50 on exhaustion, and the codes of store failures.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { dispatch, type Recording } from '@cnikit/skel';
import { cniRunner, expectCniError, expectOk } from '@cnikit/testing';
import { registerStore } from './backend.ts';
import { plugin } from './index.ts';
import { StoreConfigError } from './kubernetes.ts';
import { StoreUnavailableError } from './store.ts';
import { MemoryStore } from './testdata/memory-store.ts';
import { dropWarmState, isResident } from './warm.ts';

let store = new MemoryStore();
const use = (s: MemoryStore) => {
  store = s;
  registerStore('kubernetes', () => store);
};
use(store);
afterEach(() => use(new MemoryStore()));

const run = cniRunner(plugin, {
  containerId: 'c1',
  ifName: 'net1',
  netns: '/var/run/netns/x',
  env: { NODENAME: 'node-a', CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod;K8S_POD_UID=uid-1' },
});
const conf = (ipam: Record<string, unknown> = {}) => ({
  cniVersion: '1.1.0',
  name: 'macvlan-net',
  type: 'macvlan',
  ipam: {
    type: 'cluster-ipam',
    range: '192.168.2.224/29',
    gateway: '192.168.2.225',
    routes: [{ dst: '0.0.0.0/0' }],
    kubernetes: { kubeconfig: '/unused' },
    ...ipam,
  },
});

describe('cluster-ipam verbs', () => {
  test('ADD answers an address of the range with the gateway; the record names pod, node, attachment', async () => {
    const r = expectOk(await run.add(conf()));
    assert.equal(r.ips!.length, 1);
    assert.match(r.ips![0]!.address, /^192\.168\.2\.22[6-9]\/29$|^192\.168\.2\.230\/29$/);
    assert.equal(r.ips![0]!.gateway, '192.168.2.225');
    assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }]);
    const [rec] = await store.list<Record<string, unknown>>('allocations');
    assert.equal(rec!.spec.containerID, 'c1');
    assert.equal(rec!.spec.ifName, 'net1');
    assert.equal(rec!.spec.podNamespace, 'ns');
    assert.equal(rec!.spec.podName, 'pod');
    assert.equal(rec!.spec.podUID, 'uid-1');
    assert.equal(rec!.spec.node, 'node-a');
    // CHECK with the prevResult passes; without the record it fails
    expectOk(await run.check({ ...conf(), prevResult: r }));
    expectOk(await run.del(conf()));
    assert.equal((await store.list('allocations')).length, 0);
    expectOk(await run.del(conf()));
    expectCniError(
      await run.check({ ...conf(), prevResult: r }),
      999,
      /no address of container c1 interface net1 in pool 192\.168\.2\.224\/29/,
    );
  });

  test('CHECK fails when the record holds another address than prevResult', async () => {
    const r = expectOk(await run.add(conf()));
    const other = {
      ...r,
      ips: [{ address: '192.168.2.230/29' === r.ips![0]!.address ? '192.168.2.229/29' : '192.168.2.230/29' }],
    };
    expectCniError(await run.check({ ...conf(), prevResult: other }), 999, /is not in prevResult/);
  });

  test('exhaustion: ADD fails with 11 naming the pool and its size; STATUS 50; a DEL makes room again', async () => {
    // 6 usable, the gateway excluded: 5
    for (let i = 0; i < 5; i++) expectOk(await run.add(conf(), { containerId: `c${i}` }));
    expectCniError(
      await run.add(conf(), { containerId: 'c9' }),
      11,
      /pool 192\.168\.2\.224\/29 \(192\.168\.2\.225-192\.168\.2\.230, 5 addresses\) is exhausted/,
    );
    expectCniError(
      await run.status(conf()),
      50,
      /pool 192\.168\.2\.224\/29 .*5 addresses.* is exhausted: 5 addresses allocated/,
    );
    expectOk(await run.del(conf(), { containerId: 'c2' }));
    expectOk(await run.status(conf()));
    expectOk(await run.add(conf(), { containerId: 'c9' }));
  });

  test('GC removes this node’s invalid attachments only', async () => {
    expectOk(await run.add(conf(), { containerId: 'keep' }));
    expectOk(await run.add(conf(), { containerId: 'drop' }));
    expectOk(await run.add(conf(), { containerId: 'elsewhere', env: { NODENAME: 'node-b' } }));
    expectOk(
      await run.gc({
        ...conf(),
        'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'net1' }],
      }),
    );
    const left = (await store.list<{ containerID: string }>('allocations'))
      .map((r) => r.spec.containerID)
      .sort();
    assert.deepEqual(left, ['elsewhere', 'keep']);
  });

  test('store unreachable → 11; no rights / no CRD → 7; STATUS → 50 with the reason', async () => {
    const failing = (e: Error) => {
      const s = new MemoryStore();
      s.list = async () => {
        throw e;
      };
      return s;
    };
    use(failing(new StoreUnavailableError('Kubernetes API unreachable (connect ECONNREFUSED)')));
    expectCniError(await run.add(conf()), 11, /cluster-ipam ADD: Kubernetes API unreachable/);
    expectCniError(await run.del(conf()), 11, /cluster-ipam DEL/);
    expectCniError(await run.status(conf()), 50, /unreachable/);
    use(
      failing(
        new StoreConfigError('the CustomResourceDefinition ipamblocks.ipam.cnikit.dev is not installed'),
      ),
    );
    expectCniError(await run.add(conf()), 7, /ipamblocks\.ipam\.cnikit\.dev is not installed/);
  });

  test('static addresses only (no range): no store call', async () => {
    const r = expectOk(
      await run.add({
        ...conf(),
        ipam: { type: 'cluster-ipam', addresses: [{ address: '10.9.9.9/24', gateway: '10.9.9.1' }] },
      }),
    );
    assert.deepEqual(r.ips, [{ address: '10.9.9.9/24', gateway: '10.9.9.1' }]);
    assert.equal(store.calls.list, 0);
  });
});

describe('cluster-ipam in the warm service (its process marked resident)', () => {
  const RESIDENT = Symbol.for('cnikit.resident');
  const mark = (on: boolean) => {
    (globalThis as Record<symbol, unknown>)[RESIDENT] = on;
  };
  afterEach(async () => {
    mark(false);
    await dropWarmState();
  });

  // blocks of 16: the calls below stay in the node's first block
  const wide = conf({ range: '192.168.3.0/24', gateway: '192.168.3.1' });

  test('a traced warm ADD: its phases are spans of the call (lock wait, view read, block claim, durable write)', async () => {
    use(new MemoryStore());
    mark(true);
    const recordings: Recording[] = [];
    const add = (c: string) =>
      dispatch(plugin, {
        env: {
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: c,
          CNI_NETNS: '/var/run/netns/x',
          CNI_IFNAME: 'net1',
          CNI_PATH: '/opt/cni/bin',
          NODENAME: 'node-a',
          // a call is traced with a trace context (the runtime's)
          TRACEPARENT: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        },
        stdin: () => new TextEncoder().encode(JSON.stringify(wide)),
        stdout: { write: () => true },
        stderr: { write: () => true },
        mode: 'warm',
        traceEndpoint: 'http://127.0.0.1:9/v1/traces',
        traceExporter: (r) => {
          recordings.push(r);
        },
      });
    // two first ADDs at once on a new view: one reads the view and claims, the other waits for the lock
    assert.deepEqual(await Promise.all([add('t1'), add('t2')]), [0, 0]);
    assert.equal(recordings.length, 2);
    const names = recordings.flatMap((r) => r.spans.map((x) => x.name));
    for (const n of [
      'cluster-ipam lock wait',
      'cluster-ipam view read',
      'cluster-ipam block claim',
      'cluster-ipam durable write',
    ])
      assert.ok(names.includes(n), `${n} in ${names.join(', ')}`);
    for (const r of recordings) {
      const [call, ...inner] = r.spans;
      assert.equal(call!.name, 'cluster-ipam ADD');
      assert.equal(r.spans.filter((x) => x.name === 'cluster-ipam durable write').length, 1);
      for (const x of inner) {
        assert.equal(x.traceId, call!.traceId);
        assert.ok(x.endNs !== undefined && x.startNs >= call!.startNs && x.endNs <= call!.endNs!, x.name);
      }
    }
    // a later ADD of the warm view: only its durable write
    recordings.length = 0;
    assert.equal(await add('t3'), 0);
    assert.deepEqual(
      recordings[0]!.spans.map((x) => x.name),
      ['cluster-ipam ADD', 'cluster-ipam durable write'],
    );
  });

  test('the view stays between calls: an ADD is one create, a DEL one delete; cold again without the mark', async () => {
    const s = new MemoryStore();
    use(s);
    mark(true);
    assert.equal(isResident(), true);
    expectOk(await run.add(wide, { containerId: 'w0' }));
    const before = { ...s.calls };
    const a1 = expectOk(await run.add(wide, { containerId: 'w1' }));
    const a2 = expectOk(await run.add(wide, { containerId: 'w2' }));
    assert.notEqual(a1.ips![0]!.address, a2.ips![0]!.address);
    assert.deepEqual(
      {
        list: s.calls.list - before.list,
        get: s.calls.get - before.get,
        create: s.calls.create - before.create,
      },
      { list: 0, get: 0, create: 2 },
    );
    const del0 = { ...s.calls };
    expectOk(await run.del(wide, { containerId: 'w1' }));
    assert.deepEqual(
      { list: s.calls.list - del0.list, get: s.calls.get - del0.get, delete: s.calls.delete - del0.delete },
      { list: 0, get: 0, delete: 1 },
    );
    const ips = (await s.list<{ ip: string; containerID: string }>('allocations')).map(
      (r) => r.spec.containerID,
    );
    assert.deepEqual(ips.sort(), ['w0', 'w2']);
    // a cold call (no mark) reads the store itself and sees what the warm calls wrote
    mark(false);
    const cold0 = s.calls.list;
    const again = expectOk(await run.add(wide, { containerId: 'w2' }));
    assert.equal(again.ips![0]!.address, a2.ips![0]!.address);
    assert.ok(s.calls.list > cold0);
  });
});
