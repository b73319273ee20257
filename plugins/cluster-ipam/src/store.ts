/**
 * The storage contract of cluster-ipam: a backend keeps named JSON objects of a few kinds with a version for
 * optimistic concurrency (Kubernetes: one custom resource per object, version = metadata.resourceVersion; etcd v3:
 * one key per object under a prefix, version = the key's mod_revision). No backend holds a global lock.
 */
export type StoreKind = 'blocks' | 'allocations';

export interface StoredObject<T> {
  /** Unique within its kind and pool; a DNS-1123 subdomain (lower-case alphanumerics, '-', '.'; ≤ 253). */
  name: string;
  spec: T;
  /** Opaque; pass back to update/delete as the precondition. */
  version: string;
  /**
   * The object's identity where the backend has one (Kubernetes: metadata.uid): a delete that passes it never
   * removes an object of the same name created again meanwhile. etcd has none (a key created again has a new mod
   * revision, which the version compare already refuses).
   */
  uid?: string;
}

/** The backend cannot be reached or answered with a server error: the CNI call fails with code 11 (try again). */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

/**
 * A narrower list: `node` keeps the objects whose spec.node is that node (the Kubernetes store selects them by a
 * label, so the API server sends only those); `cached` lets the store answer from a cache that may lag by a moment
 * (the API server's watch cache: `resourceVersion=0`, no read of etcd). A cached answer is only ever a hint:
 * the create-if-absent of a record stays the arbiter of who holds an address.
 */
export interface ListOptions {
  node?: string;
  cached?: boolean;
  /**
   * With `atLeast` (the version of a write of this kind just made, a create's): exact for every write before that
   * one (as without `cached`), but the store may answer from its cache once that has seen the write (Kubernetes:
   * the label-selected list at resourceVersion NotOlderThan it, from the watch cache; a quorum list when the cache
   * does not catch up in time). The warm view's one exact read. Without `atLeast`: an exact list.
   */
  fresh?: boolean;
  /** See `fresh`. */
  atLeast?: string;
}

export interface Store {
  /** Every object of the kind whose name starts with prefix ('' for all), consistently (one revision). */
  list<T>(kind: StoreKind, prefix?: string, opts?: ListOptions): Promise<StoredObject<T>[]>;
  get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined>;
  /** Create when absent; undefined when an object of that name already exists. */
  create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined>;
  /** Replace when the stored version is still `version`; undefined on a conflict or when it is gone. */
  update<T>(kind: StoreKind, name: string, spec: T, version: string): Promise<StoredObject<T> | undefined>;
  /**
   * Remove (only when the version still matches, if given); false when absent or on a conflict. `spec`: the
   * object's spec as read with that version, when the caller has it (the etcd store finds the object's per-node
   * index entry by it instead of reading the object first). `uid`: the object's uid as read (Kubernetes: sent as a
   * precondition beside the version).
   */
  delete(kind: StoreKind, name: string, version?: string, spec?: unknown, uid?: string): Promise<boolean>;
  close(): Promise<void>;
  /** A long-lived store (the warm service keeps one): bound the next operation's work to ms from now. */
  rebound?(ms: number): void;
  /** The same store (its connection) bounded to ms from now for one call, beside other calls; its close() is a no-op. */
  withBound?(ms: number): Store;
}
