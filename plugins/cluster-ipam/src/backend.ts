/**
 * The Store a configuration asks for: `datastore` "kubernetes" (default; kubernetes.kubeconfig or the service
 * account) or "etcd" (etcd_host and its TLS/credential keys).
 */
import { configError } from '@cnikit/ipam';
import type { ClusterIPAMConf } from './config.ts';
import { openEtcdStore } from './etcd-backend.ts';
import { KubernetesStore } from './kubernetes.ts';
import type { Store } from './store.ts';

/** Bound of one CNI call's store work in ms: an unreachable backend fails the call with code 11 within it. */
export const DEFAULT_DEADLINE_MS = 30_000;

export type StoreFactory = (
  conf: ClusterIPAMConf,
  env: Readonly<Record<string, string | undefined>>,
) => Store;

const factories: Record<ClusterIPAMConf['datastore'], StoreFactory | undefined> = {
  kubernetes: (conf, env) =>
    new KubernetesStore({
      ...conf.kubernetes,
      env,
      deadlineMs: deadlineOf(env),
    }),
  etcd: (conf, env) => openEtcdStore(conf, deadlineOf(env)),
};

/** Replaces a backend (tests: an in-memory store). */
export function registerStore(datastore: ClusterIPAMConf['datastore'], f: StoreFactory): void {
  factories[datastore] = f;
}

export function deadlineOf(env: Readonly<Record<string, string | undefined>>): number {
  const v = Number(env.CNIKIT_CLUSTER_IPAM_TIMEOUT_MS);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_DEADLINE_MS;
}

export function openStore(conf: ClusterIPAMConf, env: Readonly<Record<string, string | undefined>>): Store {
  const f = factories[conf.datastore];
  if (!f) throw configError(`datastore ${JSON.stringify(conf.datastore)} is not built into this plugin`);
  return f(conf, env);
}
