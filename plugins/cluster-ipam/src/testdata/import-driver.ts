/**
 * Runs inside the lab control plane's network namespace for whereabouts-import.k8s.test.ts: the import of
 * whereabouts' objects into an etcd store, then every record of the store, as one JSON line on stdout.
 *   BENCH-free: argv = kubeconfig etcd-host prefix [--dry-run] [--seed name=json]
 */
import { KubeClient } from '../../../../bench/lib/kube-client.ts';
import { Allocator } from '../allocator.ts';
import { parseConf } from '../config.ts';
import { EtcdStore } from '../etcd-store.ts';
import { importWhereabouts } from '../whereabouts-import.ts';

const [kubeconfig = '', etcdHost = '', prefix = '', ...rest] = process.argv.slice(2);
const kube = new KubeClient(kubeconfig);
const store = new EtcdStore({ endpoints: etcdHost, prefix });
try {
  for (const a of rest.filter((x) => x.startsWith('--seed='))) {
    const [name = '', json = ''] = a.slice('--seed='.length).split(/=(.*)/s);
    await store.create('allocations', name, JSON.parse(json));
  }
  const report = await importWhereabouts((p) => kube.request('GET', p), store, {
    dryRun: rest.includes('--dry-run'),
    fallbackNode: 'unknown-node',
  });
  // --allocate=<range>: ADDs through the allocator on that range until it is exhausted
  const allocated: string[] = [];
  const range = rest.find((x) => x.startsWith('--allocate='))?.slice('--allocate='.length);
  if (range) {
    const conf = parseConf(
      { name: 'n', cniVersion: '1.1.0', ipam: { type: 'cluster-ipam', range } },
      { args: '', command: 'ADD', env: { NODENAME: 'node-new' } },
      { flatFiles: [] },
    );
    const a = new Allocator(store, {
      net: conf.net,
      overlapping: conf.overlapping,
      pools: conf.pools,
      node: 'node-new',
    });
    for (let i = 0; i < 300; i++) {
      try {
        const [r] = await a.allocate({ containerID: `after-switch-${i}`, ifName: 'eth0' });
        if (r) allocated.push(r.ip);
      } catch (e) {
        allocated.push(`error: ${(e as Error).message}`);
        break;
      }
    }
  }
  const records = await store.list('allocations');
  process.stdout.write(`${JSON.stringify({ report, records, allocated })}\n`);
} finally {
  kube.close();
  await store.close();
}
