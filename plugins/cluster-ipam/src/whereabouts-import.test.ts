// The whereabouts import names its records as the allocator will look for them: per network_name (overlapping
// ranges, whereabouts' default), or per network_name and range CIDR for a network whose configurations set
// enable_overlapping_ranges false — otherwise the switch would hand out an address a running pod holds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Allocator, PoolExhaustedError } from './allocator.ts';
import { parseConf } from './config.ts';
import { MemoryStore } from './testdata/memory-store.ts';
import { importWhereabouts, type KubeGet } from './whereabouts-import.ts';

/** whereabouts' objects as the API server lists them: one IPPool of 10.30.0.0/29 holding .1 (offset 1) and .2. */
const api: KubeGet = async (path) => {
  if (path.includes('/ippools'))
    return {
      status: 200,
      body: {
        items: [
          {
            metadata: { name: '10.30.0.0-29', namespace: 'kube-system' },
            spec: {
              range: '10.30.0.0/29',
              allocations: {
                '1': { id: 'c1', podref: 'default/p1', ifname: 'net1' },
                '2': { id: 'c2', podref: 'default/p2', ifname: 'net1' },
              },
            },
          },
        ],
      },
    };
  if (path.includes('/overlappingrangeipreservations')) return { status: 200, body: { items: [] } };
  return { status: 404, body: {} }; // the pods: gone, the fallback node is recorded
};

/** Every address a fresh node gets from the pool until it is exhausted. */
async function handedOut(store: MemoryStore, overlapping: boolean): Promise<string[]> {
  const { pools } = parseConf(
    { name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam', range: '10.30.0.0/29' } },
    { args: '', command: 'ADD', env: { NODENAME: 'n1' } },
    { flatFiles: [] },
  );
  const a = new Allocator(store, { net: 'default', overlapping, pools, node: 'n1' });
  const ips: string[] = [];
  for (let i = 0; i < 10; i++) {
    try {
      const [got] = await a.allocate({ containerID: `new${i}`, ifName: 'eth0' });
      ips.push(got?.ip ?? '');
    } catch (e) {
      assert.ok(e instanceof PoolExhaustedError, String(e));
      return ips.sort();
    }
  }
  throw new Error(`the /29 handed out more than 6 addresses: ${ips.join(' ')}`);
}

test('imported addresses are never handed out again: overlapping ranges (the default)', async () => {
  const store = new MemoryStore();
  const r = await importWhereabouts(api, store, { fallbackNode: 'n9' });
  assert.equal(r.created.length, 2);
  assert.deepEqual(await handedOut(store, true), ['10.30.0.3', '10.30.0.4', '10.30.0.5', '10.30.0.6']);
});

test('imported addresses are never handed out again: a network with enable_overlapping_ranges false', async () => {
  const store = new MemoryStore();
  const r = await importWhereabouts(api, store, { fallbackNode: 'n9', perRangeNetworks: ['default'] });
  assert.equal(r.created.length, 2);
  assert.deepEqual(await handedOut(store, false), ['10.30.0.3', '10.30.0.4', '10.30.0.5', '10.30.0.6']);
});
