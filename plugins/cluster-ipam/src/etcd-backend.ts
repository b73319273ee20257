/**
 * `"datastore": "etcd"`: the etcd store (etcd-store.ts) for a configuration, opened by backend.ts. The configuration's files
 * (etcd_cert_file, etcd_key_file, etcd_ca_cert_file) are read here: one that cannot be read is a configuration
 * error (code 7); the whole call is bounded by the plugin's deadline (CNIKIT_CLUSTER_IPAM_TIMEOUT_MS), each
 * request by 5 s, so an etcd that is down or hung fails the call with code 11 in time.
 */
import type { ClusterIPAMConf } from './config.ts';
import { EtcdStore, etcdOptionsFromConfig } from './etcd-store.ts';
import { StoreConfigError } from './kubernetes.ts';

export function openEtcdStore(conf: ClusterIPAMConf, deadlineMs: number): EtcdStore {
  const e = conf.etcd;
  if (!e) throw new StoreConfigError('datastore "etcd" needs etcd_host (host:port)');
  try {
    const opts = etcdOptionsFromConfig({
      etcd_host: e.host,
      ...(e.username !== undefined ? { etcd_username: e.username } : {}),
      ...(e.password !== undefined ? { etcd_password: e.password } : {}),
      ...(e.certFile !== undefined ? { etcd_cert_file: e.certFile } : {}),
      ...(e.keyFile !== undefined ? { etcd_key_file: e.keyFile } : {}),
      ...(e.caCertFile !== undefined ? { etcd_ca_cert_file: e.caCertFile } : {}),
    });
    // the endpoints are parsed here too: a malformed etcd_host is the configuration's error, naming the key
    return new EtcdStore({ ...opts, timeoutMs: 5000, deadline: Date.now() + deadlineMs });
  } catch (err) {
    const msg = (err as Error).message;
    throw new StoreConfigError(/endpoint/.test(msg) ? `etcd_host ${JSON.stringify(e.host)}: ${msg}` : msg);
  }
}
