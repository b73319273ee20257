/**
 * A Store in memory (one process): the contract's semantics without a backend, for the allocator's unit tests and
 * for benchmarks that want the allocator's own cost. Every call yields to the event loop first, so concurrent
 * callers interleave as they would against a server.
 */
import { randomUUID } from 'node:crypto';
import type { ListOptions, Store, StoredObject, StoreKind } from '../store.ts';

export class MemoryStore implements Store {
  private readonly kinds = new Map<StoreKind, Map<string, StoredObject<unknown>>>();
  private revision = 0;
  /** Calls per operation, for tests and measurements. */
  readonly calls = { list: 0, get: 0, create: 0, update: 0, delete: 0 };

  private of(kind: StoreKind): Map<string, StoredObject<unknown>> {
    let m = this.kinds.get(kind);
    if (!m) {
      m = new Map();
      this.kinds.set(kind, m);
    }
    return m;
  }

  private tick(): Promise<void> {
    return new Promise((r) => setImmediate(r));
  }

  private copy<T>(o: StoredObject<unknown>): StoredObject<T> {
    return {
      name: o.name,
      spec: structuredClone(o.spec) as T,
      version: o.version,
      ...(o.uid ? { uid: o.uid } : {}),
    };
  }

  /** Objects listed per call (the work a server would do for the answer), for tests of the allocator's cost. */
  listed = 0;

  async list<T>(kind: StoreKind, prefix = '', opts: ListOptions = {}): Promise<StoredObject<T>[]> {
    this.calls.list++;
    await this.tick();
    const out = [...this.of(kind).values()]
      .filter(
        (o) =>
          o.name.startsWith(prefix) &&
          (opts.node === undefined || (o.spec as { node?: unknown } | null)?.node === opts.node),
      )
      .map((o) => this.copy<T>(o));
    this.listed += out.length;
    return out;
  }

  async get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined> {
    this.calls.get++;
    await this.tick();
    const o = this.of(kind).get(name);
    return o ? this.copy<T>(o) : undefined;
  }

  async create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined> {
    this.calls.create++;
    await this.tick();
    const m = this.of(kind);
    if (m.has(name)) return undefined;
    const o = { name, spec: structuredClone(spec), version: String(++this.revision), uid: randomUUID() };
    m.set(name, o);
    return this.copy<T>(o);
  }

  async update<T>(
    kind: StoreKind,
    name: string,
    spec: T,
    version: string,
  ): Promise<StoredObject<T> | undefined> {
    this.calls.update++;
    await this.tick();
    const m = this.of(kind);
    const o = m.get(name);
    if (!o || o.version !== version) return undefined;
    const n = { name, spec: structuredClone(spec), version: String(++this.revision), uid: o.uid };
    m.set(name, n);
    return this.copy<T>(n);
  }

  async delete(
    kind: StoreKind,
    name: string,
    version?: string,
    _spec?: unknown,
    uid?: string,
  ): Promise<boolean> {
    this.calls.delete++;
    await this.tick();
    const m = this.of(kind);
    const o = m.get(name);
    if (!o || (version !== undefined && o.version !== version) || (uid !== undefined && o.uid !== uid))
      return false;
    m.delete(name);
    return true;
  }

  async close(): Promise<void> {}
}
