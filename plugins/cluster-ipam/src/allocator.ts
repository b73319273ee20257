/**
 * The cluster allocator over a Store (store.ts), with no lock anywhere:
 *
 * - a node claims a block of a pool by creating the block object (create-if-absent: two nodes asking for the same
 *   block, one wins, the other takes the next free one); a node starts looking at a position hashed from its name,
 *   so nodes rarely meet;
 * - an address is taken by creating its allocation record, named after the address (pool.ts): the store refuses a
 *   second object of that name, which is what makes a duplicate impossible, whatever the blocks say;
 * - an ADD takes an address in one of the node's blocks, else claims a new block, else borrows a free address in
 *   another node's block (the record carries the node that holds it), else the pool is exhausted;
 * - what an ADD reads is the node's view (NodeView): this node's blocks and the records this node holds, two lists
 *   selected by node (Kubernetes: a label, answered from the API server's watch cache), whatever the size of the
 *   pool; the view may lag a moment behind the store, which costs at most a failed create (someone holds that
 *   name: another address is tried), never a duplicate. Only claiming a block reads the pool's blocks, and only
 *   borrowing (every block claimed) reads the pool's records;
 * - in the warm service (warm.ts) the view lives in memory from call to call, kept in sync by the service's own
 *   writes and read again from the store when it runs dry or is older than a minute: an ADD is then one durable
 *   write (the record's create), a DEL one delete;
 * - a repeated ADD of an attachment (container ID + ifname) answers the record it already holds, borrowed or not;
 * - DEL deletes the records of the attachment with their version as precondition, and is idempotent; GC deletes
 *   this node's records whose attachment is not valid.
 */
import { startSpan, traced } from '@cnikit/skel';
import {
  allocatable,
  blockAt,
  blockName,
  blockPrefix,
  blockSpan,
  countFree,
  describePool,
  hexWidth,
  ipText,
  type Pool,
  recordName,
} from './pool.ts';
import type { ListOptions, Store, StoredObject } from './store.ts';

export interface BlockSpec {
  network: string;
  pool: string;
  /** The pool's range (CIDR text). */
  cidr: string;
  /** First address of the block (aligned) and its number of addresses. */
  base: string;
  size: number;
  node: string;
  created: string;
}

export interface AllocationSpec {
  network: string;
  pool: string;
  ip: string;
  /** The pool's prefix length: the result's `address` is `ip/prefix`. */
  prefix: number;
  containerID: string;
  ifName: string;
  podNamespace: string;
  podName: string;
  podUID: string;
  /** The node that holds the address (its ADD created the record). */
  node: string;
  /** The block the address lies in, and whether it was borrowed from another node's block. */
  block: string;
  borrowed: boolean;
  created: string;
}

export interface AllocatorConf {
  /** The network's name part (config.ts `net`). */
  net: string;
  /** enable_overlapping_ranges (whereabouts' default true): records are named per network, not per pool. */
  overlapping: boolean;
  pools: Pool[];
  /** This node's name. */
  node: string;
}

export interface Owner {
  containerID: string;
  ifName: string;
  podNamespace?: string;
  podName?: string;
  podUID?: string;
}

export interface Allocated {
  pool: Pool;
  ip: string;
  record: StoredObject<AllocationSpec>;
  /** An existing record of this attachment (a repeated ADD), not a new one. */
  existing: boolean;
}

export interface PoolStatus {
  pool: Pool;
  /** Free addresses in this node's blocks, in blocks nobody claimed yet, and in other nodes' blocks. */
  freeOwn: bigint;
  freeUnclaimed: bigint;
  freeBorrowable: bigint;
  used: number;
  blocks: number;
  ownBlocks: number;
}

/** The pool has no address left for this ADD: its message names the pool and its size. */
export class PoolExhaustedError extends Error {
  override name = 'PoolExhaustedError';
  constructor(readonly pool: Pool) {
    super(
      `pool ${describePool(pool)} is exhausted: every address is allocated (no free address in this node's blocks, no unclaimed block, none to borrow)`,
    );
  }
}

function fnv(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** How many candidate blocks one ADD looks at before it calls the pool exhausted of unclaimed blocks. */
const MAX_BLOCK_PROBES = 1 << 16;
/** How many times a cold ADD that lost a create reads this node's records again before it picks blind. */
const MAX_SIBLING_REFRESHES = 3;
/** A warm view older than this is read again from the store before the next ADD. */
export const VIEW_MAX_AGE_MS = 60_000;
/**
 * How long a warm view keeps what its last borrowing read (the other nodes' blocks, the records in them): ADDs of a
 * node whose blocks are full and that finds no block to claim borrow from that, instead of reading the pool's
 * blocks and records again for every ADD (a failed create only marks the name taken).
 */
export const LENDERS_MAX_AGE_MS = 10_000;
/** How many creates a borrow from that kept read may find taken before the pool's records are read again. */
export const BORROW_CONFLICTS = 4;
/** How often a call whose node's blocks ran dry leaves the lock to take a free address a claim meanwhile made. */
const FREE_OWN_ROUNDS = 3;

/**
 * What this node knows of the store: its blocks per pool and the records it holds. Cold: read for one call. Warm:
 * kept by the service (warm.ts) and updated by its own writes.
 */
/**
 * What every view of one node and network in one process shares (the warm service: one per store, network and node,
 * whatever configuration a call brings, warm.ts): the node's blocks per pool, and the lock of the views' reads and
 * block claims. Two configurations that share a pool (another `ipRanges` list or kubeconfig spelling for the same
 * network) then claim its blocks one at a time and each sees the other's claim at once: concurrent first ADDs
 * through both claim one block, without a lost create race.
 */
export class NodeBlocks {
  /** Pool key → block base → block name. */
  readonly blocks = new Map<string, Map<bigint, string>>();
  lock: Promise<unknown> = Promise.resolve();
}

export class NodeView {
  /** Pool key → block base → block name (shared with the node's other views: NodeBlocks). */
  readonly blocks: Map<string, Map<bigint, string>>;
  readonly #shared: NodeBlocks;
  /** The records this node holds (every pool of the network), by name. */
  readonly held = new Map<string, StoredObject<AllocationSpec>>();
  /** Names a create found taken by someone else (another node borrowed it, or the view lagged). */
  readonly taken = new Set<string>();
  /** Names a call in flight is creating (calls of one process never race each other for a name). */
  readonly pending = new Set<string>();
  /** Per pool key: the other nodes' blocks and the records in them at the last borrowing (LENDERS_MAX_AGE_MS). */
  readonly lenders = new Map<string, { at: number; blocks: Lender[]; used: Set<string> }>();
  /** When it was read (Date.now()); 0: never. */
  loadedAt = 0;
  /** Reads from the store since it was made (the warm service's figure). */
  loads = 0;
  /** The one exact read of this view (confirm, after its first create) is done; every other read is cached. */
  exactTried = false;
  /** That read while it runs. */
  confirming: Promise<void> | undefined;
  /** Counts this view's own changes of `held`; `changed`: name → the count at its last change, while a read runs. */
  #rev = 0;
  #reading = 0;
  readonly #changed = new Map<string, number>();

  constructor(shared = new NodeBlocks()) {
    this.#shared = shared;
    this.blocks = shared.blocks;
  }

  /** A record this node now holds (its create succeeded, or a read found it). */
  hold(r: StoredObject<AllocationSpec>): void {
    this.held.set(r.name, r);
    this.#note(r.name);
  }

  /** A record this node no longer holds (deleted, or found changed). */
  drop(name: string): void {
    this.held.delete(name);
    this.#note(name);
  }

  #note(name: string): void {
    this.#rev++;
    if (this.#reading > 0) this.#changed.set(name, this.#rev);
  }

  /**
   * Reads into `held` what `read` answers, beside calls that create and delete records meanwhile (concurrent calls
   * of the warm service): a name this view changed after the read began keeps the view's own state, whatever the
   * answer says (the answer may predate the change). `replace`: names the answer lacks are forgotten (a full read of
   * the node's records); else only added (a merge).
   */
  async readHeld(
    read: () => Promise<StoredObject<AllocationSpec>[]>,
    replace: boolean,
  ): Promise<StoredObject<AllocationSpec>[]> {
    const since = this.#rev;
    this.#reading++;
    try {
      const got = await read();
      const mine = (name: string) => (this.#changed.get(name) ?? 0) > since;
      if (replace) for (const name of [...this.held.keys()]) if (!mine(name)) this.held.delete(name);
      for (const r of got) if (!mine(r.name)) this.held.set(r.name, r);
      return got;
    } finally {
      if (--this.#reading === 0) this.#changed.clear();
    }
  }

  /**
   * Runs f when no other exclusive work of this view, or of a view sharing its NodeBlocks, runs (one read, one
   * block claim at a time per node and network). Not reentrant: f never calls exclusive.
   */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    // traced calls: the wait for the lock is a span of its own (ends when f starts)
    const wait = startSpan('cluster-ipam lock wait');
    const g = () => {
      wait?.end();
      return f();
    };
    const run = this.#shared.lock.then(g, g);
    this.#shared.lock = run.catch(() => {});
    return run;
  }

  ownBlocks(p: Pool): Map<bigint, string> {
    let m = this.blocks.get(p.key);
    if (!m) {
      m = new Map();
      this.blocks.set(p.key, m);
    }
    return m;
  }
}

interface Lender {
  base: bigint;
  name: string;
}

export class Allocator {
  /**
   * `view`: the warm service's NodeView of this network and node (kept between calls); without it every call
   * reads its own.
   */
  constructor(
    readonly store: Store,
    readonly conf: AllocatorConf,
    private readonly now: () => Date = () => new Date(),
    readonly view?: NodeView,
  ) {}

  /** The record name prefix of a pool's addresses (without the trailing dot). */
  recordPrefix(p: Pool): string {
    return this.conf.overlapping ? this.conf.net : `${this.conf.net}.${p.rangeKey}`;
  }

  private recordPrefixes(): string[] {
    const out = new Set(this.conf.pools.map((p) => `${this.recordPrefix(p)}.`));
    if (out.size === 0) out.add(`${this.conf.net}.`);
    return [...out];
  }

  private baseOf(p: Pool, name: string): bigint | undefined {
    const prefix = blockPrefix(this.conf.net, p);
    if (!name.startsWith(prefix)) return undefined;
    const [hex, bits] = name.slice(prefix.length).split('-');
    if (hex === undefined || Number(bits) !== p.blockBits || hex.length !== hexWidth(p.family))
      return undefined;
    return BigInt(`0x${hex}`);
  }

  /** The records this node holds, from the store (`cached`: the watch cache may answer). */
  private async heldRecords(opts: ListOptions): Promise<StoredObject<AllocationSpec>[]> {
    const out: StoredObject<AllocationSpec>[] = [];
    for (const prefix of this.recordPrefixes())
      out.push(
        ...(await this.store.list<AllocationSpec>('allocations', prefix, { ...opts, node: this.conf.node })),
      );
    return out.filter((r) => r.spec?.network === this.conf.net);
  }

  /** Reads this node's blocks and records into the view (replacing what it had). */
  load(view: NodeView, quorum = false): Promise<void> {
    return traced('cluster-ipam view read', { 'cnikit.cluster_ipam.node': this.conf.node }, () =>
      this.#load(view, quorum),
    );
  }

  async #load(view: NodeView, quorum: boolean): Promise<void> {
    const opts: ListOptions = quorum ? {} : { cached: true };
    // the node's blocks of every pool and the records it holds: independent reads. A warm view sends them at once
    // (its connection is open); a cold call one after the other, on the one connection it opened (a request sent
    // beside another opens a second connection: one more TLS handshake for the API server)
    const blockList = (p: Pool) =>
      this.store.list<BlockSpec>('blocks', blockPrefix(this.conf.net, p), { ...opts, node: this.conf.node });
    let lists: StoredObject<BlockSpec>[][];
    if (this.view)
      [lists] = await Promise.all([
        Promise.all(this.conf.pools.map(blockList)),
        view.readHeld(() => this.heldRecords(opts), true),
      ]);
    else {
      lists = [];
      for (const p of this.conf.pools) lists.push(await blockList(p));
      await view.readHeld(() => this.heldRecords(opts), true);
    }
    const blocks = new Map<string, Map<bigint, string>>();
    this.conf.pools.forEach((p, i) => {
      const m = new Map<bigint, string>();
      for (const b of lists[i] ?? []) {
        const base = this.baseOf(p, b.name);
        if (base !== undefined && b.spec.node === this.conf.node) m.set(base, b.name);
      }
      blocks.set(p.key, m);
    });
    // blocks only come (claims of this node), never go while the node lives: what a claim meanwhile added stays
    for (const [k, m] of blocks) {
      const had = view.blocks.get(k);
      if (had) for (const [base, name] of had) if (!m.has(base) && !quorum) m.set(base, name);
      view.blocks.set(k, m);
    }
    view.taken.clear();
    view.loadedAt = Date.now();
    view.loads++;
  }

  /** The view of this call: the warm one (read when new or old), else a fresh one. */
  private async viewOf(): Promise<{ view: NodeView; fresh: boolean }> {
    const view = this.view;
    if (view) {
      const stale = () => view.loadedAt === 0 || Date.now() - view.loadedAt > VIEW_MAX_AGE_MS;
      if (!stale()) return { view, fresh: false };
      // every read of the view comes from the watch cache: an exact label-selected list reads and decodes every
      // record of the resource from etcd (a loaded API server did not answer one within 10 s at 2 700 records);
      // what a previous image of the service wrote just before it died, which the cache may not show yet, is
      // read once after this view's first create (confirm)
      return view.exclusive(async () => {
        if (!stale()) return { view, fresh: true };
        await this.load(view);
        return { view, fresh: true };
      });
    }
    const once = new NodeView();
    await this.load(once);
    return { view: once, fresh: true };
  }

  private matches(r: StoredObject<AllocationSpec>, containerID: string, ifName: string): boolean {
    return r.spec.containerID === containerID && r.spec.ifName === ifName && r.spec.network === this.conf.net;
  }

  /** One address per pool; on a failure the records this call created are deleted again. */
  async allocate(owner: Owner): Promise<Allocated[]> {
    const out: Allocated[] = [];
    const { view, fresh } = await this.viewOf();
    try {
      for (const p of this.conf.pools) out.push(await this.allocateIn(p, owner, view, fresh));
      const made = out.filter((a) => !a.existing);
      const last = made[made.length - 1];
      if (this.view && !view.exactTried && last) await this.confirm(view, last.record.version, owner, out);
    } catch (err) {
      for (const a of out) {
        if (a.existing) continue;
        view.drop(a.record.name);
        await this.store
          .delete('allocations', a.record.name, a.record.version, a.record.spec, a.record.uid)
          .catch(() => {});
      }
      throw err;
    }
    return out;
  }

  /**
   * The exact read of a new warm view, once, cheaply: the records this node holds listed not older than this
   * call's own create (Kubernetes: from the watch cache once it has seen that create, so every earlier write too
   * — what a killed image of the service wrote; not a quorum list), merged into the view. The calls that created
   * a record meanwhile wait for it; a call whose attachment turns out to hold a record already (the killed
   * image's ADD of it landed) answers that one and deletes its own, as a repeated ADD would have. When the read
   * fails, the calls go on with the cached view, and the next create tries again.
   */
  private async confirm(view: NodeView, version: string, owner: Owner, out: Allocated[]): Promise<void> {
    view.confirming ??= view
      .readHeld(() => this.heldRecords({ fresh: true, atLeast: version }), false)
      .then(
        () => {
          view.exactTried = true;
        },
        () => {
          view.confirming = undefined;
        },
      );
    await view.confirming;
    if (!view.exactTried) return;
    for (let i = 0; i < out.length; i++) {
      const a = out[i] as Allocated;
      if (a.existing) continue;
      const before = this.existingBesides(a.pool, owner, view, a.record.name);
      if (!before) continue;
      if (
        await this.store.delete('allocations', a.record.name, a.record.version, a.record.spec, a.record.uid)
      )
        view.drop(a.record.name);
      out[i] = before;
    }
  }

  private existingBesides(p: Pool, owner: Owner, view: NodeView, name: string): Allocated | undefined {
    for (const r of view.held.values()) {
      if (r.name !== name && this.matches(r, owner.containerID, owner.ifName) && r.spec.pool === p.key)
        return { pool: p, ip: r.spec.ip, record: r, existing: true };
    }
    return undefined;
  }

  private existing(p: Pool, owner: Owner, view: NodeView): Allocated | undefined {
    for (const r of view.held.values()) {
      if (this.matches(r, owner.containerID, owner.ifName) && r.spec.pool === p.key)
        return { pool: p, ip: r.spec.ip, record: r, existing: true };
    }
    return undefined;
  }

  private async takeOwn(p: Pool, owner: Owner, view: NodeView): Promise<Allocated | undefined> {
    for (const [base, name] of [...view.ownBlocks(p)]) {
      const got = await this.takeIn(p, base, name, owner, false, view);
      if (got) return got;
    }
    return undefined;
  }

  private async allocateIn(p: Pool, owner: Owner, view: NodeView, fresh: boolean): Promise<Allocated> {
    // a repeated ADD of the same attachment answers its record, wherever it lies (a borrowed one too)
    const had = this.existing(p, owner, view);
    if (had) return had;
    const got = await this.takeOwn(p, owner, view);
    if (got) return got;
    // the node's blocks are full and there was no block to claim a moment ago: borrow from what that read found,
    // beside the node's other calls (pending keeps them apart), not one at a time
    const lent = fresh ? undefined : view.lenders.get(p.key);
    if (lent && Date.now() - lent.at < LENDERS_MAX_AGE_MS) {
      const got = await this.borrow(p, owner, view, lent.blocks, lent.used, BORROW_CONFLICTS);
      if (got) return got;
      if (view.lenders.get(p.key) === lent) view.lenders.delete(p.key);
    }
    // the node's blocks are full: one call of this process at a time reads again and claims. A call that finds
    // free addresses in the node's blocks once it holds the lock (a claim meanwhile) takes one after it, beside
    // the node's other calls: its create is not one more in a queue behind the lock (a few times; then inside)
    for (let round = 0; ; round++) {
      const got = await view.exclusive(async () => {
        const had = this.existing(p, owner, view);
        if (had) return had;
        if (round < FREE_OWN_ROUNDS && this.#hasFreeOwn(p, view)) return undefined;
        return this.claimLocked(p, owner, view, fresh);
      });
      if (got) return got;
      const own = await this.takeOwn(p, owner, view);
      if (own) return own;
    }
  }

  /** Some address of the node's blocks that no record of the view holds and no call of it is creating. */
  #hasFreeOwn(p: Pool, view: NodeView): boolean {
    const prefix = this.recordPrefix(p);
    for (const base of view.ownBlocks(p).keys()) {
      const ref = blockAt(p, base);
      for (let v = ref.first; v <= ref.last; v++)
        if (allocatable(p, v) && !this.#known(view, recordName(prefix, p.family, v))) return true;
    }
    return false;
  }

  /** Under the view's lock: the node's blocks again, then a claim (or a borrow). */
  private claimLocked(p: Pool, owner: Owner, view: NodeView, fresh: boolean): Promise<Allocated> {
    return (async () => {
      const meanwhile = (await this.takeOwn(p, owner, view)) ?? this.existing(p, owner, view);
      if (meanwhile) return meanwhile;
      if (!fresh) {
        // the warm view ran dry: borrow from what the last borrowing read, when it is recent
        const lent = view.lenders.get(p.key);
        if (lent && Date.now() - lent.at < LENDERS_MAX_AGE_MS) {
          // (read again meanwhile by the call before this one, typically)
          const got = await this.borrow(p, owner, view, lent.blocks, lent.used, BORROW_CONFLICTS);
          if (got) return got;
          view.lenders.delete(p.key);
        }
        // else read it again (records released elsewhere, blocks claimed meanwhile), retry
        await this.load(view);
        const now = this.existing(p, owner, view) ?? (await this.takeOwn(p, owner, view));
        if (now) return now;
      }
      return traced('cluster-ipam block claim', { 'cnikit.cluster_ipam.pool': p.cidr }, async (span) => {
        const got = await this.claimOrBorrow(p, owner, view);
        span?.setAttributes({ 'cnikit.cluster_ipam.borrowed': got.record.spec.borrowed });
        return got;
      });
    })();
  }

  private async claimOrBorrow(p: Pool, owner: Owner, view: NodeView): Promise<Allocated> {
    const { node } = this.conf;
    // claim a block nobody holds, starting at a place of our own: the one read of the pool's blocks
    const claimed = new Set<bigint>();
    const others: Array<{ base: bigint; name: string }> = [];
    let reread = false;
    for (const b of await this.store.list<BlockSpec>('blocks', blockPrefix(this.conf.net, p), {
      cached: true,
    })) {
      const base = this.baseOf(p, b.name);
      if (base === undefined) continue;
      claimed.add(base);
      if (b.spec.node !== node) others.push({ base, name: b.name });
      else if (!view.ownBlocks(p).has(base)) {
        // ours, but the view did not have it yet (a lagging cache, or a block written before the node label, as
        // its records were): read this node's records exactly first, so a repeated ADD answers the one it holds
        if (!reread) {
          reread = true;
          await view.readHeld(() => this.heldRecords({}), false);
          const had = this.existing(p, owner, view);
          if (had) return had;
        }
        view.ownBlocks(p).set(base, b.name);
        const got = await this.takeIn(p, base, b.name, owner, false, view);
        if (got) return got;
      }
    }
    const { first, count } = blockSpan(p);
    const probes = count < BigInt(MAX_BLOCK_PROBES) ? count : BigInt(MAX_BLOCK_PROBES);
    const startAt = BigInt(fnv(node)) % count;
    const bits = BigInt(p.blockBits);
    for (let i = 0n; i < probes; i++) {
      const base = first + (((startAt + i) % count) << bits);
      if (claimed.has(base)) continue;
      const ref = blockAt(p, base);
      if (countFree(p, ref.first, ref.last) === 0n) continue;
      const name = blockName(this.conf.net, p, base);
      const made = await this.store.create<BlockSpec>('blocks', name, {
        network: this.conf.net,
        pool: p.key,
        cidr: p.cidr,
        base: ipText(p.family, base),
        size: 1 << p.blockBits,
        node,
        created: this.now().toISOString(),
      });
      claimed.add(base);
      if (!made) {
        // taken meanwhile: by another call on this node (a cold ADD beside this one)? then it is this node's block
        const now = await this.store.get<BlockSpec>('blocks', name);
        if (now?.spec.node === node) {
          view.ownBlocks(p).set(base, name);
          const got = await this.takeIn(p, base, name, owner, false, view);
          if (got) return got;
        } else others.push({ base, name });
        continue;
      }
      view.ownBlocks(p).set(base, name);
      const got = await this.takeIn(p, base, name, owner, false, view);
      if (got) return got;
    }
    // borrow from the other nodes' blocks: the one read of the pool's records
    const used = new Set<string>();
    for (const r of await this.store.list<AllocationSpec>('allocations', `${this.recordPrefix(p)}.`, {
      cached: true,
    }))
      used.add(r.name);
    if (this.view) this.view.lenders.set(p.key, { at: Date.now(), blocks: others, used });
    const got = await this.borrow(p, owner, view, others, used);
    if (got) return got;
    throw new PoolExhaustedError(p);
  }

  /**
   * A free address in another node's block. The candidates are every address the lenders' read saw free (and this
   * view knows nothing of), tried in an order of this attachment's own: borrowers of every node hunt for the last
   * free addresses of a full pool at once, and a scan from an offset would send them all to the same next free one.
   */
  private async borrow(
    p: Pool,
    owner: Owner,
    view: NodeView,
    blocks: Lender[],
    used: ReadonlySet<string>,
    maxConflicts = Number.POSITIVE_INFINITY,
  ): Promise<Allocated | undefined> {
    const prefix = this.recordPrefix(p);
    const free: Array<{ v: bigint; block: string }> = [];
    for (const b of blocks) {
      const ref = blockAt(p, b.base);
      for (let v = ref.first; v <= ref.last; v++) {
        if (!allocatable(p, v)) continue;
        const name = recordName(prefix, p.family, v);
        if (!used.has(name) && !this.#known(view, name)) free.push({ v, block: b.name });
      }
    }
    // a shuffle seeded by the attachment (xorshift32): reproducible, different per ADD
    let seed = fnv(`${owner.containerID}/${owner.ifName}`) || 1;
    for (let i = free.length - 1; i > 0; i--) {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      const j = (seed >>> 0) % (i + 1);
      [free[i], free[j]] = [free[j] as (typeof free)[number], free[i] as (typeof free)[number]];
    }
    let conflicts = 0;
    for (const c of free) {
      if (this.#known(view, recordName(prefix, p.family, c.v))) continue;
      const got = await this.tryTake(p, c.v, c.block, owner, true, view);
      if (got) return got;
      // taken since the read: past a few, the read is too old to be worth more creates (the caller reads again)
      if (++conflicts >= maxConflicts) return undefined;
    }
    return undefined;
  }

  #known(view: NodeView, name: string): boolean {
    return view.held.has(name) || view.taken.has(name) || view.pending.has(name);
  }

  /** A free address of one block, by creating its record; undefined when the block has none left. */
  private async takeIn(
    p: Pool,
    base: bigint,
    block: string,
    owner: Owner,
    borrowed: boolean,
    view: NodeView,
    used?: ReadonlySet<string>,
  ): Promise<Allocated | undefined> {
    const ref = blockAt(p, base);
    if (countFree(p, ref.first, ref.last) === 0n) return undefined;
    const prefix = this.recordPrefix(p);
    // the block's free addresses as this call sees them (at most 2^MAX_BLOCK_BITS)
    const free: bigint[] = [];
    for (let v = ref.first; v <= ref.last; v++) {
      if (!allocatable(p, v)) continue;
      const name = recordName(prefix, p.family, v);
      if (this.#known(view, name) || used?.has(name)) continue;
      free.push(v);
    }
    // concurrent ADDs on one node (cold siblings: each read the same view) try the free addresses in an order of
    // their own, hashed from the attachment: a pick is an index into what is still free, so two siblings meet only
    // when their hashes agree modulo the free count, and one that lost a create picks again by a new hash (never
    // the address after it, where the winner's siblings are heading too)
    const who = `${owner.containerID}/${owner.ifName}`;
    let refreshes = 0;
    for (let attempt = 0; free.length > 0; attempt++) {
      const at = fnv(attempt === 0 ? who : `${who}#${attempt}`) % free.length;
      const v = free[at] as bigint;
      free[at] = free[free.length - 1] as bigint;
      free.pop();
      const got = await this.tryTake(p, v, block, owner, borrowed, view);
      if (got) return got;
      if (!this.view && !borrowed && refreshes < MAX_SIBLING_REFRESHES) {
        // cold: most likely a sibling ADD on this node took it, and took others since this call read its view.
        // This node's records again (one read of its own keys, the watch cache on Kubernetes: no write, unlike a
        // failed create), and what they hold leaves the free list
        refreshes++;
        for (const r of await this.heldRecords({ cached: true })) view.hold(r);
        let n = 0;
        for (const f of free) if (!view.held.has(recordName(prefix, p.family, f))) free[n++] = f;
        free.length = n;
      }
    }
    return undefined;
  }

  /** Creates the record of address v (undefined: someone holds it, or a call of this view is creating it). */
  private async tryTake(
    p: Pool,
    v: bigint,
    block: string,
    owner: Owner,
    borrowed: boolean,
    view: NodeView,
  ): Promise<Allocated | undefined> {
    const name = recordName(this.recordPrefix(p), p.family, v);
    if (this.#known(view, name)) return undefined;
    const ip = ipText(p.family, v);
    const spec: AllocationSpec = {
      network: this.conf.net,
      pool: p.key,
      ip,
      prefix: p.prefix,
      containerID: owner.containerID,
      ifName: owner.ifName,
      podNamespace: owner.podNamespace ?? '',
      podName: owner.podName ?? '',
      podUID: owner.podUID ?? '',
      node: this.conf.node,
      block,
      borrowed,
      created: this.now().toISOString(),
    };
    view.pending.add(name);
    let made: StoredObject<AllocationSpec> | undefined;
    try {
      // the durable write of an ADD (the record's create), a span of its own in a traced call
      made = await traced(
        'cluster-ipam durable write',
        { 'cnikit.cluster_ipam.record': name },
        async (span) => {
          const r = await this.store.create<AllocationSpec>('allocations', name, spec);
          span?.setAttributes({ 'cnikit.cluster_ipam.taken': r === undefined });
          return r;
        },
      );
    } finally {
      view.pending.delete(name);
    }
    if (made) {
      view.hold(made);
      return { pool: p, ip, record: made, existing: false };
    }
    // someone else holds it: mark it
    view.taken.add(name);
    return undefined;
  }

  /** Every record of the network (or of the pools' ranges, without overlapping ranges). */
  async listAll(opts: ListOptions = {}): Promise<StoredObject<AllocationSpec>[]> {
    const out: StoredObject<AllocationSpec>[] = [];
    for (const prefix of this.recordPrefixes())
      out.push(...(await this.store.list<AllocationSpec>('allocations', prefix, opts)));
    return out.filter((r) => r.spec?.network === this.conf.net);
  }

  /**
   * The records of one attachment. They are held by this node (an ADD's record names the node it ran on): the
   * warm view, else the node's records from the watch cache; when that misses a pool, the node's records read
   * exactly (a record created a moment ago is never missed).
   */
  async find(containerID: string, ifName: string): Promise<StoredObject<AllocationSpec>[]> {
    const found = new Map<string, StoredObject<AllocationSpec>>();
    const complete = () => {
      const pools = new Set([...found.values()].map((r) => r.spec.pool));
      return this.conf.pools.every((p) => pools.has(p.key));
    };
    const fromView = this.view && this.view.loadedAt > 0 ? [...this.view.held.values()] : undefined;
    for (const r of fromView ?? (await this.heldRecords({ cached: true })))
      if (this.matches(r, containerID, ifName)) found.set(r.name, r);
    if (complete()) return [...found.values()];
    for (const r of await this.heldRecords({}))
      if (this.matches(r, containerID, ifName)) found.set(r.name, r);
    return [...found.values()];
  }

  /** DEL: remove the attachment's records; idempotent (none is success). Returns the addresses released. */
  async release(containerID: string, ifName: string): Promise<string[]> {
    const out: string[] = [];
    for (const r of await this.find(containerID, ifName)) {
      if (await this.store.delete('allocations', r.name, r.version, r.spec, r.uid)) {
        this.view?.drop(r.name);
        out.push(r.spec.ip);
        continue;
      }
      // changed or gone meanwhile: delete it only if it is still ours
      this.view?.drop(r.name);
      const now = await this.store.get<AllocationSpec>('allocations', r.name);
      if (
        now &&
        this.matches(now, containerID, ifName) &&
        (await this.store.delete('allocations', now.name, now.version, now.spec, now.uid))
      )
        out.push(now.spec.ip);
    }
    return out;
  }

  /** GC: delete this node's records whose attachment is not among the valid ones. Returns the addresses released. */
  async gc(valid: ReadonlyArray<{ containerID: string; ifname: string }>): Promise<string[]> {
    const keep = new Set(valid.map((a) => `${a.containerID}\n${a.ifname}`));
    const out: string[] = [];
    for (const r of await this.heldRecords({})) {
      if (r.spec.node !== this.conf.node) continue;
      if (keep.has(`${r.spec.containerID}\n${r.spec.ifName}`)) continue;
      if (await this.store.delete('allocations', r.name, r.version, r.spec, r.uid)) {
        this.view?.drop(r.name);
        out.push(r.spec.ip);
      }
    }
    return out;
  }

  /** What an ADD on this node could still get, per pool (reads the pool's blocks and records, from the cache). */
  async status(): Promise<PoolStatus[]> {
    const out: PoolStatus[] = [];
    for (const p of this.conf.pools) {
      const blocks = await this.store.list<BlockSpec>('blocks', blockPrefix(this.conf.net, p), {
        cached: true,
      });
      const values = new Set<bigint>();
      for (const r of await this.store.list<AllocationSpec>('allocations', `${this.recordPrefix(p)}.`, {
        cached: true,
      })) {
        const v = recordValue(r.name);
        if (v !== undefined) values.add(v);
      }
      const st: PoolStatus = {
        pool: p,
        freeOwn: 0n,
        freeUnclaimed: 0n,
        freeBorrowable: 0n,
        used: 0,
        blocks: blocks.length,
        ownBlocks: 0,
      };
      const claimed = new Set<bigint>();
      let claimedFree = 0n;
      let otherFree = 0n;
      let otherUsed = 0;
      for (const b of blocks) {
        const base = this.baseOf(p, b.name);
        if (base === undefined || claimed.has(base)) continue;
        claimed.add(base);
        const ref = blockAt(p, base);
        const cap = countFree(p, ref.first, ref.last);
        claimedFree += cap;
        let used = 0;
        for (let v = ref.first; v <= ref.last; v++) if (values.has(v) && allocatable(p, v)) used++;
        if (b.spec.node === this.conf.node) {
          st.ownBlocks++;
          st.used += used;
          st.freeOwn += cap - BigInt(used);
        } else {
          otherUsed += used;
          otherFree += cap - BigInt(used);
        }
      }
      st.freeUnclaimed = p.size - claimedFree;
      // other nodes' blocks count only when the node has nothing left of its own and no block to claim
      if (st.freeOwn === 0n && st.freeUnclaimed === 0n) {
        st.used += otherUsed;
        st.freeBorrowable = otherFree;
      }
      out.push(st);
    }
    return out;
  }
}

/** The address a record's name stands for (`…<fam>-<group>.<low>`), or undefined for a name of another shape. */
export function recordValue(name: string): bigint | undefined {
  const m = /\.[46]-([0-9a-f]+)\.([0-9a-f]{2})$/.exec(name);
  if (!m) return undefined;
  return (BigInt(`0x${m[1]}`) << 8n) | BigInt(`0x${m[2]}`);
}

/** `ip/prefix` of a record as a result carries it. */
export function addressOf(r: AllocationSpec): string {
  return `${r.ip}/${r.prefix}`;
}
