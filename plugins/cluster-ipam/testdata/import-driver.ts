/**
 * Runs inside the lab control plane's network namespace for whereabouts-import.k8s.test.ts: the import of
 * whereabouts' objects into an etcd store, then every record of the store, as one JSON line on stdout.
 *   BENCH-free: argv = kubeconfig etcd-host prefix [--dry-run] [--seed name=json]
 */
import { KubeClient } from '../../../bench/lib/kube-client.ts';
import { EtcdStore } from '../src/etcd-store.ts';
import { importWhereabouts } from '../src/whereabouts-import.ts';

const [kubeconfig, etcdHost, prefix, ...rest] = process.argv.slice(2);
const kube = new KubeClient(kubeconfig);
const store = new EtcdStore({ endpoints: etcdHost, prefix });
try {
  for (const a of rest.filter((x) => x.startsWith('--seed='))) {
    const [name, json] = a.slice('--seed='.length).split(/=(.*)/s);
    await store.create('allocations', name, JSON.parse(json));
  }
  const report = await importWhereabouts((p) => kube.request('GET', p), store, {
    dryRun: rest.includes('--dry-run'),
    fallbackNode: 'unknown-node',
  });
  const records = await store.list('allocations');
  process.stdout.write(`${JSON.stringify({ report, records })}\n`);
} finally {
  kube.close();
  await store.close();
}
