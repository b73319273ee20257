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
}

/** The backend cannot be reached or answered with a server error: the CNI call fails with code 11 (try again). */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

export interface Store {
  /** Every object of the kind whose name starts with prefix ('' for all), consistently (one revision). */
  list<T>(kind: StoreKind, prefix?: string): Promise<StoredObject<T>[]>;
  get<T>(kind: StoreKind, name: string): Promise<StoredObject<T> | undefined>;
  /** Create when absent; undefined when an object of that name already exists. */
  create<T>(kind: StoreKind, name: string, spec: T): Promise<StoredObject<T> | undefined>;
  /** Replace when the stored version is still `version`; undefined on a conflict or when it is gone. */
  update<T>(kind: StoreKind, name: string, spec: T, version: string): Promise<StoredObject<T> | undefined>;
  /** Remove (only when the version still matches, if given); false when absent or on a conflict. */
  delete(kind: StoreKind, name: string, version?: string): Promise<boolean>;
  close(): Promise<void>;
}
