/**
 * cluster-ipam's storage on etcd v3 (`"datastore": "etcd"`, whereabouts' keys): one key per object,
 * `<prefix><kind>/<name>`, its value the spec as JSON, its version the key's mod_revision.
 *   create  = txn [create_revision(key) == 0] put        (exactly one of many concurrent creates wins)
 *   update  = txn [mod_revision(key) == version] put
 *   delete  = txn [mod_revision(key) == version] delete  (or a plain delete without a version)
 *   list    = range over the prefix, paged, every page read at the revision of the first one
 * No lease, no lock. Every etcd failure of the "cannot serve now" class is a StoreUnavailableError.
 */
import { readFileSync } from 'node:fs';
import { EtcdClient, type EtcdClientOptions, EtcdError, EtcdUnavailableError, prefixEnd } from './etcd.ts';
import { StoreConfigError } from './kubernetes.ts';
import {
  type ListOptions,
  type Store,
  type StoredObject,
  type StoreKind,
  StoreUnavailableError,
} from './store.ts';

/** Whereabouts' etcd keys, as they appear in the IPAM configuration. */
export interface EtcdIpamConfig {
  datastore?: string;
  etcd_host?: string;
  etcd_username?: string;
  etcd_password?: string;
  etcd_key_file?: string;
  etcd_cert_file?: string;
  etcd_ca_cert_file?: string;
}

export interface EtcdStoreOptions extends EtcdClientOptions {
  /** Every key of this store starts with it (default "/cnikit/cluster-ipam/"). */
  prefix?: string;
  /** Keys per page of a list (default 500). */
  pageSize?: number;
}

export const DEFAULT_ETCD_PREFIX = '/cnikit/cluster-ipam/';

/** Client options from whereabouts' keys; files are read here, so a missing one is a configuration error. */
export function etcdOptionsFromConfig(conf: EtcdIpamConfig): EtcdClientOptions {
  if (!conf.etcd_host) throw new Error('"datastore": "etcd" needs etcd_host (host:port)');
  const read = (key: keyof EtcdIpamConfig) => {
    const path = conf[key];
    if (path === undefined || path === '') return undefined;
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`${key}: cannot read ${path}: ${(e as Error).message}`);
    }
  };
  const cert = read('etcd_cert_file');
  const key = read('etcd_key_file');
  if ((cert === undefined) !== (key === undefined))
    throw new Error('etcd_cert_file and etcd_key_file go together (a client certificate and its key)');
  const ca = read('etcd_ca_cert_file');
  const opts: EtcdClientOptions = { endpoints: conf.etcd_host };
  if (cert) opts.cert = cert;
  if (key) opts.key = key;
  if (ca) opts.ca = ca;
  if (conf.etcd_username !== undefined || conf.etcd_password !== undefined) {
    if (!conf.etcd_username || conf.etcd_password === undefined)
      throw new Error('etcd_username and etcd_password go together');
    opts.username = conf.etcd_username;
    opts.password = conf.etcd_password;
  }
  return opts;
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function checkName(name: string): void {
  if (name.length > 253 || !NAME.test(name))
    throw new Error(`invalid object name "${name}" (a DNS-1123 subdomain)`);
}

/** etcd's failures as the contract's: unavailable → StoreUnavailableError (code 11), refused → StoreConfigError (7). */
function unavailable<T>(p: Promise<T>): Promise<T> {
  return p.catch((e) => {
    if (e instanceof EtcdUnavailableError) throw new StoreUnavailableError(e.message);
    if (e instanceof EtcdError) throw new StoreConfigError(e.message);
    throw e;
  });
}

export class EtcdStore implements Store {
  readonly client: EtcdClient;
  readonly prefix: string;
  readonly #pageSize: number;

  constructor(opts: EtcdStoreOptions) {
    this.client = new EtcdClient(opts);
    this.prefix = opts.prefix ?? DEFAULT_ETCD_PREFIX;
    this.#pageSize = Math.max(1, opts.pageSize ?? 500);
  }

  key(kind: StoreKind, name: string): string {
    return `${this.prefix}${kind}/${name}`;
  }

  #decode<T>(kind: StoreKind, kv: { key: Buffer; value: Buffer; modRevision: string }): StoredObject<T> {
    const name = kv.key.toString('utf8').slice(this.key(kind, '').length);
    let spec: T;
    try {
      spec = JSON.parse(kv.value.toString('utf8')) as T;
    } catch {
      throw new Error(`etcd: ${kv.key.toString('utf8')} does not hold JSON`);
    }
    return { name, spec, version: kv.modRevision };
  }

  /** list() with the revision it was read at. */
  async listAt<T>(kind: StoreKind, prefix = ''): Promise<{ items: StoredObject<T>[]; revision: string }> {
    const start = this.key(kind, prefix);
    const end = prefixEnd(start);
    return unavailable(
      (async () => {
        for (let attempt = 0; ; attempt++) {
          const items: StoredObject<T>[] = [];
          let key: Buffer = Buffer.from(start);
          let revision: string | undefined;
          try {
            for (;;) {
              const page = await this.client.range({ key, rangeEnd: end, limit: this.#pageSize, revision });
              revision ??= page.revision;
              for (const kv of page.kvs) items.push(this.#decode<T>(kind, kv));
              if (!page.more || page.kvs.length === 0) break;
              // the next page starts just after the last key of this one
              const last = page.kvs[page.kvs.length - 1] as (typeof page.kvs)[number];
              key = Buffer.concat([last.key, Buffer.from([0])]);
            }
            return { items, revision: revision ?? '0' };
          } catch (e) {
            // compacted away while we were paging: start again at a newer revision
            if (e instanceof EtcdError && /compacted/i.test(e.message) && attempt < 3) continue;
            throw e;
          }
        }
      })(),
    );
  }

  /** `node`: filtered here (etcd has no secondary index: the prefix range is read whole, from etcd's memory). */
  async list<T>(kind: StoreKind, prefix = '', opts: ListOptions = {}): Promise<StoredObject<T>[]> {
    const items = (await this.listAt<T>(kind, prefix)).items;
    const node = opts.node;
    if (node === undefined) return items;
    return items.filter((o) => (o.spec as { node?: unknown } | null)?.node === node);
  }

  rebound(ms: number): void {
    this.client.setDeadline(Date.now() + ms);
  }

  async get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined> {
    checkName(name);
    const { kv } = await unavailable(this.client.get(this.key(kind, name)));
    return kv ? this.#decode<T>(kind, kv) : undefined;
  }

  async create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    checkName(name);
    const key = this.key(kind, name);
    const r = await unavailable(
      this.client.txn(
        [{ key, target: 'CREATE', createRevision: 0 }],
        [{ put: { key, value: JSON.stringify(spec) } }],
      ),
    );
    return r.succeeded ? { name, spec, version: r.revision } : undefined;
  }

  async update<T>(
    kind: StoreKind,
    name: string,
    spec: T,
    version: string,
  ): Promise<StoredObject<T> | undefined> {
    checkName(name);
    if (!/^[1-9][0-9]*$/.test(version)) return undefined; // never a revision etcd gave: cannot match
    const key = this.key(kind, name);
    const r = await unavailable(
      this.client.txn(
        [{ key, target: 'MOD', modRevision: version }],
        [{ put: { key, value: JSON.stringify(spec) } }],
      ),
    );
    return r.succeeded ? { name, spec, version: r.revision } : undefined;
  }

  async delete(kind: StoreKind, name: string, version?: string): Promise<boolean> {
    checkName(name);
    const key = this.key(kind, name);
    if (version === undefined) return (await unavailable(this.client.deleteRange(key))) > 0;
    if (!/^[1-9][0-9]*$/.test(version)) return false;
    const r = await unavailable(
      this.client.txn([{ key, target: 'MOD', modRevision: version }], [{ deleteRange: { key } }]),
    );
    return r.succeeded && (r.responses[0]?.deleted ?? 0) > 0;
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

/** The store for an IPAM configuration with `"datastore": "etcd"`. */
export function etcdStoreFromConfig(
  conf: EtcdIpamConfig,
  extra: Omit<EtcdStoreOptions, 'endpoints'> = {},
): EtcdStore {
  return new EtcdStore({ ...etcdOptionsFromConfig(conf), ...extra });
}
