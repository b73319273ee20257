/**
 * cluster-ipam's storage on etcd v3 (`"datastore": "etcd"`, whereabouts' keys): one key per object,
 * `<prefix><kind>/<name>`, its value the spec as JSON, its version the key's mod_revision; beside it, for an object
 * whose spec names a node, a per-node index entry `<prefix>by-node/<node>/<kind>/<name>` (the spec again, written and
 * deleted in the same transaction as the object, so it has the object's mod_revision), which a node's view reads
 * with one range over that node's own keys:
 *   create  = txn [create_revision(key) == 0] put key, put index entry   (exactly one of many concurrent creates wins)
 *   update  = txn [mod_revision(key) == version] put key, put index entry (the old node's entry deleted)
 *   delete  = txn [mod_revision(key) == version] delete key, delete index entry
 *   list    = range over the prefix, paged, every page read at the revision of the first one; with a node: the
 *             range over that node's index entries
 * The index came after the first layout (objects without index entries). `<prefix>layout` says that every object
 * has its entry: a node's list that finds it absent first indexes what has none (migrate(), in batches; an object
 * indexed by it keeps its version: the entry carries the object's mod_revision), then writes it. Until then, and
 * whenever the migration cannot finish, a node's list reads the whole prefix and filters, as the first layout did.
 * The etcd reclaimer runs migrate() at every pass too: an object written by an older cnikit after the marker (a
 * rolling upgrade) gets its entry within an interval, and an entry whose object an older cnikit deleted goes.
 * No lease, no lock. Every etcd failure of the "cannot serve now" class is a StoreUnavailableError.
 */
import { readFileSync } from 'node:fs';
import {
  type Compare,
  EtcdClient,
  type EtcdClientOptions,
  EtcdError,
  EtcdUnavailableError,
  type KeyValue,
  type Op,
  prefixEnd,
} from './etcd.ts';
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
/** The layout with per-node index entries (the value of `<prefix>layout`'s "layout"). */
export const ETCD_LAYOUT = 2;
const KINDS: readonly StoreKind[] = ['blocks', 'allocations'];
/** Objects per migration transaction: 2 compares and 1 put each (etcd's default --max-txn-ops is 128). */
const MIGRATE_BATCH = 32;

/** The node a spec names (an index entry is kept for it), if any. */
function nodeOf(spec: unknown): string | undefined {
  const n = (spec as { node?: unknown } | null)?.node;
  return typeof n === 'string' && n !== '' ? n : undefined;
}

export interface MigrateReport {
  /** Index entries written for objects that had none (or a stale one). */
  indexed: number;
  /** Index entries removed: their object is gone or names another node. */
  removed: number;
  /** Objects that changed while this ran (left for the next run). */
  skipped: number;
}

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

/** The layout a `<prefix>layout` value says (0: none, or not one this build knows). */
function layoutOf(kv: KeyValue): number {
  try {
    const n = (JSON.parse(kv.value.toString('utf8')) as { layout?: unknown }).layout;
    return typeof n === 'number' ? n : 0;
  } catch {
    return 0;
  }
}

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

  /** Where a node's index entries begin (node names are URI-encoded: a '/' cannot split the key). */
  nodeIndexBase(node: string, kind?: StoreKind): string {
    return `${this.prefix}by-node/${encodeURIComponent(node)}/${kind === undefined ? '' : `${kind}/`}`;
  }

  indexKey(node: string, kind: StoreKind, name: string): string {
    return `${this.nodeIndexBase(node, kind)}${name}`;
  }

  get layoutKey(): string {
    return `${this.prefix}layout`;
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

  /** An index entry: `{"spec": …}` (written with its object: same mod_revision) or with `"version"` (migrated). */
  #decodeIndex<T>(base: string, kv: KeyValue): StoredObject<T> {
    const name = kv.key.toString('utf8').slice(base.length);
    let v: { spec: T; version?: string };
    try {
      v = JSON.parse(kv.value.toString('utf8')) as { spec: T; version?: string };
    } catch {
      throw new Error(`etcd: ${kv.key.toString('utf8')} does not hold JSON`);
    }
    return { name, spec: v.spec, version: typeof v.version === 'string' ? v.version : kv.modRevision };
  }

  /** Every key of a range, paged, every page at the revision of the first (the first page may be given). */
  async #rangeAll(
    start: string,
    first?: { kvs: KeyValue[]; more: boolean; revision: string },
  ): Promise<{ kvs: KeyValue[]; revision: string }> {
    const end = prefixEnd(start);
    for (let attempt = 0; ; attempt++) {
      const kvs: KeyValue[] = [];
      let key: Buffer = Buffer.from(start);
      let revision: string | undefined;
      let page = attempt === 0 ? first : undefined;
      try {
        for (;;) {
          page ??= await this.client.range({ key, rangeEnd: end, limit: this.#pageSize, revision });
          revision ??= page.revision;
          kvs.push(...page.kvs);
          if (!page.more || page.kvs.length === 0) break;
          // the next page starts just after the last key of this one
          const last = page.kvs[page.kvs.length - 1] as KeyValue;
          key = Buffer.concat([last.key, Buffer.from([0])]);
          page = undefined;
        }
        return { kvs, revision: revision ?? '0' };
      } catch (e) {
        // compacted away while we were paging: start again at a newer revision
        if (e instanceof EtcdError && /compacted/i.test(e.message) && attempt < 3) continue;
        throw e;
      }
    }
  }

  /** list() with the revision it was read at. */
  async listAt<T>(kind: StoreKind, prefix = ''): Promise<{ items: StoredObject<T>[]; revision: string }> {
    return unavailable(
      (async () => {
        const { kvs, revision } = await this.#rangeAll(this.key(kind, prefix));
        return { items: kvs.map((kv) => this.#decode<T>(kind, kv)), revision };
      })(),
    );
  }

  /** The layout marker was seen (or written) by this store: a node's list reads its index entries only. */
  #indexed = false;

  /**
   * `node`: the node's index entries only (one range over `<prefix>by-node/<node>/<kind>/<prefix>`, the layout
   * marker read in the same request); without the marker the objects are indexed first (migrate()), and when that
   * fails short of etcd being down, the whole prefix is read and filtered (the first layout's read).
   */
  async list<T>(kind: StoreKind, prefix = '', opts: ListOptions = {}): Promise<StoredObject<T>[]> {
    const node = opts.node;
    if (node === undefined) return (await this.listAt<T>(kind, prefix)).items;
    const base = this.nodeIndexBase(node, kind);
    const start = `${base}${prefix}`;
    return unavailable(
      (async () => {
        let first: { kvs: KeyValue[]; more: boolean; revision: string } | undefined;
        if (!this.#indexed) {
          const r = await this.client.txn(
            [],
            [
              { range: { key: this.layoutKey } },
              { range: { key: start, rangeEnd: prefixEnd(start), limit: this.#pageSize } },
            ],
          );
          const marker = r.responses[0]?.kvs?.[0];
          if (marker && layoutOf(marker) >= ETCD_LAYOUT) {
            this.#indexed = true;
            const page = r.responses[1];
            first = { kvs: page?.kvs ?? [], more: page?.more ?? false, revision: r.revision };
          } else {
            try {
              await this.migrate();
            } catch (e) {
              if (e instanceof EtcdUnavailableError) throw e;
              // cannot index now (no rights on the index keys, a value that is not JSON): the first layout's read
              const items = (await this.listAt<T>(kind, prefix)).items;
              return items.filter((o) => nodeOf(o.spec) === node);
            }
          }
        }
        const { kvs } = await this.#rangeAll(start, first);
        return kvs.map((kv) => this.#decodeIndex<T>(base, kv)).filter((o) => nodeOf(o.spec) === node);
      })(),
    );
  }

  /**
   * Gives every object that names a node its index entry, removes the entries whose object is gone or names
   * another node, then writes the layout marker. Each change is a transaction that compares the object's
   * mod_revision (and the entry's): an object written meanwhile is left alone (its writer indexed it, or the
   * next run does). Idempotent; safe beside writers and other migrations.
   */
  async migrate(): Promise<MigrateReport> {
    const report: MigrateReport = { indexed: 0, removed: 0, skipped: 0 };
    const indexRoot = `${this.prefix}by-node/`;
    const entries = new Map<string, KeyValue>();
    for (const kv of (await this.#rangeAll(indexRoot)).kvs) entries.set(kv.key.toString('utf8'), kv);
    const pending: Array<{ compare: Compare[]; op: Op; what: 'indexed' | 'removed' }> = [];
    for (const kind of KINDS) {
      const objects = new Map<string, KeyValue>();
      for (const kv of (await this.#rangeAll(this.key(kind, ''))).kvs)
        objects.set(kv.key.toString('utf8').slice(this.key(kind, '').length), kv);
      const wanted = new Set<string>();
      for (const [name, kv] of objects) {
        const o = this.#decode<unknown>(kind, kv);
        const node = nodeOf(o.spec);
        if (node === undefined) continue;
        const ikey = this.indexKey(node, kind, name);
        wanted.add(ikey);
        const have = entries.get(ikey);
        if (have && this.#decodeIndex(this.nodeIndexBase(node, kind), have).version === kv.modRevision)
          continue;
        pending.push({
          what: 'indexed',
          compare: [
            { key: this.key(kind, name), target: 'MOD', modRevision: kv.modRevision },
            have
              ? { key: ikey, target: 'MOD', modRevision: have.modRevision }
              : { key: ikey, target: 'CREATE', createRevision: 0 },
          ],
          op: {
            put: { key: ikey, value: JSON.stringify({ spec: o.spec, version: kv.modRevision }) },
          },
        });
      }
      // entries of this kind whose object is gone, changed node, or was rewritten without its entry
      for (const [ikey, kv] of entries) {
        // <encoded node>/<kind>/<name>: the encoded node has no '/'
        const rest = ikey.slice(indexRoot.length);
        const afterNode = rest.slice(rest.indexOf('/') + 1);
        if (!afterNode.startsWith(`${kind}/`) || wanted.has(ikey)) continue;
        const name = afterNode.slice(kind.length + 1);
        const obj = objects.get(name);
        pending.push({
          what: 'removed',
          compare: [
            { key: ikey, target: 'MOD', modRevision: kv.modRevision },
            { key: this.key(kind, name), target: 'MOD', modRevision: obj?.modRevision ?? 0 },
          ],
          op: { deleteRange: { key: ikey } },
        });
      }
    }
    for (let i = 0; i < pending.length; i += MIGRATE_BATCH) {
      const batch = pending.slice(i, i + MIGRATE_BATCH);
      const r = await this.client.txn(
        batch.flatMap((b) => b.compare),
        batch.map((b) => b.op),
      );
      if (r.succeeded) {
        for (const b of batch) report[b.what]++;
        continue;
      }
      // one of them changed meanwhile: each on its own
      for (const b of batch) {
        const one = await this.client.txn(b.compare, [b.op]);
        if (one.succeeded) report[b.what]++;
        else report.skipped++;
      }
    }
    await this.client.put(
      this.layoutKey,
      JSON.stringify({ layout: ETCD_LAYOUT, index: 'by-node', migrated: new Date().toISOString() }),
    );
    this.#indexed = true;
    return report;
  }

  rebound(ms: number): void {
    this.client.setDeadline(Date.now() + ms);
  }

  async get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined> {
    checkName(name);
    const { kv } = await unavailable(this.client.get(this.key(kind, name)));
    return kv ? this.#decode<T>(kind, kv) : undefined;
  }

  #indexPut(kind: StoreKind, name: string, spec: unknown): Op[] {
    const node = nodeOf(spec);
    return node === undefined
      ? []
      : [{ put: { key: this.indexKey(node, kind, name), value: JSON.stringify({ spec }) } }];
  }

  async create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    checkName(name);
    const key = this.key(kind, name);
    const r = await unavailable(
      this.client.txn(
        [{ key, target: 'CREATE', createRevision: 0 }],
        [{ put: { key, value: JSON.stringify(spec) } }, ...this.#indexPut(kind, name, spec)],
      ),
    );
    return r.succeeded ? { name, spec, version: r.revision } : undefined;
  }

  /** The object as stored now (its node: which index entry it has). */
  async #current(kind: StoreKind, name: string): Promise<StoredObject<unknown> | undefined> {
    const { kv } = await this.client.get(this.key(kind, name));
    return kv ? this.#decode<unknown>(kind, kv) : undefined;
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
    return unavailable(
      (async () => {
        // the node it names now: a change of node moves its index entry
        const now = await this.#current(kind, name);
        if (!now || now.version !== version) return undefined;
        const was = nodeOf(now.spec);
        const ops: Op[] = [
          { put: { key, value: JSON.stringify(spec) } },
          ...this.#indexPut(kind, name, spec),
        ];
        if (was !== undefined && was !== nodeOf(spec))
          ops.push({ deleteRange: { key: this.indexKey(was, kind, name) } });
        const r = await this.client.txn([{ key, target: 'MOD', modRevision: version }], ops);
        return r.succeeded ? { name, spec, version: r.revision } : undefined;
      })(),
    );
  }

  /**
   * `spec`: the object's spec as read with `version` (the allocator and the reclaimers pass what they listed):
   * its node says which index entry goes with it, without a read first. The version compare makes it exact.
   */
  async delete(kind: StoreKind, name: string, version?: string, spec?: unknown): Promise<boolean> {
    checkName(name);
    const key = this.key(kind, name);
    if (version !== undefined && !/^[1-9][0-9]*$/.test(version)) return false;
    return unavailable(
      (async () => {
        for (let attempt = 0; attempt < 5; attempt++) {
          let v = version;
          let s = spec;
          if (v === undefined || s === undefined) {
            const now = await this.#current(kind, name);
            if (!now || (v !== undefined && now.version !== v)) return false;
            v = now.version;
            s = now.spec;
          }
          const node = nodeOf(s);
          const r = await this.client.txn(
            [{ key, target: 'MOD', modRevision: v }],
            [
              { deleteRange: { key } },
              ...(node === undefined ? [] : [{ deleteRange: { key: this.indexKey(node, kind, name) } }]),
            ],
            [{ range: { key } }],
          );
          if (r.succeeded) return (r.responses[0]?.deleted ?? 0) > 0;
          if (node !== undefined && (r.responses[0]?.kvs?.length ?? 0) === 0)
            // the object is gone but its entry was listed: an older cnikit deleted it without the entry. The entry
            // goes now (only while the object is still absent), so the node's DEL or GC heals its view
            await this.client.txn(
              [{ key, target: 'CREATE', createRevision: 0 }],
              [{ deleteRange: { key: this.indexKey(node, kind, name) } }],
            );
          // a plain delete (no version) goes on with what is there now; a conditional one is a conflict
          if (version !== undefined) return false;
        }
        return false;
      })(),
    );
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
