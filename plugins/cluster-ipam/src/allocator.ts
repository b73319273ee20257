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
 * - the records of one block are one prefix listing (≤ 256 names): an ADD reads its blocks and their records, not
 *   the pool;
 * - DEL deletes the records of the attachment (container ID + ifname) with their version as precondition, and is
 *   idempotent; GC deletes this node's records whose attachment is not valid.
 */
import {
  allocatable,
  blockAt,
  blockBase,
  blockName,
  blockPrefix,
  blockSpan,
  countFree,
  describePool,
  hexWidth,
  ipText,
  type Pool,
  recordGroupPrefix,
  recordName,
} from './pool.ts';
import type { Store, StoredObject } from './store.ts';

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

export class Allocator {
  constructor(
    readonly store: Store,
    readonly conf: AllocatorConf,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The record name prefix of a pool's addresses (without the trailing dot). */
  recordPrefix(p: Pool): string {
    return this.conf.overlapping ? this.conf.net : `${this.conf.net}.${p.key}`;
  }

  private async blocksOf(p: Pool): Promise<StoredObject<BlockSpec>[]> {
    return this.store.list<BlockSpec>('blocks', blockPrefix(this.conf.net, p));
  }

  private baseOf(p: Pool, b: StoredObject<BlockSpec>): bigint | undefined {
    const prefix = blockPrefix(this.conf.net, p);
    if (!b.name.startsWith(prefix)) return undefined;
    const [hex, bits] = b.name.slice(prefix.length).split('-');
    if (hex === undefined || Number(bits) !== p.blockBits || hex.length !== hexWidth(p.family))
      return undefined;
    return BigInt(`0x${hex}`);
  }

  /** Every allocation record of one address group (cached for one operation). */
  private groupReader(): (p: Pool, v: bigint) => Promise<Map<string, StoredObject<AllocationSpec>>> {
    const cache = new Map<string, Promise<Map<string, StoredObject<AllocationSpec>>>>();
    return (p, v) => {
      const prefix = recordGroupPrefix(this.recordPrefix(p), p.family, v);
      let got = cache.get(prefix);
      if (!got) {
        got = this.store
          .list<AllocationSpec>('allocations', prefix)
          .then((list) => new Map(list.map((r) => [r.name, r])));
        cache.set(prefix, got);
      }
      return got;
    };
  }

  private matches(r: StoredObject<AllocationSpec>, containerID: string, ifName: string): boolean {
    return r.spec.containerID === containerID && r.spec.ifName === ifName && r.spec.network === this.conf.net;
  }

  /** One address per pool; on a failure the records this call created are deleted again. */
  async allocate(owner: Owner): Promise<Allocated[]> {
    const out: Allocated[] = [];
    try {
      for (const p of this.conf.pools) out.push(await this.allocateIn(p, owner));
    } catch (err) {
      for (const a of out) {
        if (!a.existing)
          await this.store.delete('allocations', a.record.name, a.record.version).catch(() => {});
      }
      throw err;
    }
    return out;
  }

  private async allocateIn(p: Pool, owner: Owner): Promise<Allocated> {
    const { node } = this.conf;
    const group = this.groupReader();
    const blocks = await this.blocksOf(p);
    const claimed = new Set<bigint>();
    const own: Array<{ base: bigint; name: string }> = [];
    const others: Array<{ base: bigint; name: string }> = [];
    for (const b of blocks) {
      const base = this.baseOf(p, b);
      if (base === undefined) continue;
      claimed.add(base);
      (b.spec.node === node ? own : others).push({ base, name: b.name });
    }
    // a repeated ADD of the same attachment answers its record
    for (const b of own) {
      for (const r of (await group(p, b.base)).values()) {
        if (this.matches(r, owner.containerID, owner.ifName) && r.spec.pool === p.key)
          return { pool: p, ip: r.spec.ip, record: r, existing: true };
      }
    }
    for (const b of own) {
      const got = await this.takeIn(p, b.base, b.name, owner, false, group);
      if (got) return got;
    }
    // claim a block nobody holds, starting at a place of our own
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
        others.push({ base, name });
        continue;
      }
      const got = await this.takeIn(p, base, name, owner, false, group);
      if (got) return got;
    }
    // borrow from the other nodes' blocks
    for (const b of others) {
      const got = await this.takeIn(p, b.base, b.name, owner, true, group);
      if (got) return got;
    }
    throw new PoolExhaustedError(p);
  }

  /** A free address of one block, by creating its record; undefined when the block has none left. */
  private async takeIn(
    p: Pool,
    base: bigint,
    block: string,
    owner: Owner,
    borrowed: boolean,
    group: (p: Pool, v: bigint) => Promise<Map<string, StoredObject<AllocationSpec>>>,
  ): Promise<Allocated | undefined> {
    const ref = blockAt(p, base);
    if (countFree(p, ref.first, ref.last) === 0n) return undefined;
    const used = await group(p, base);
    const prefix = this.recordPrefix(p);
    const span = ref.last - ref.first + 1n;
    // concurrent ADDs on one node start at different places of the block
    const offset = BigInt(fnv(`${owner.containerID}/${owner.ifName}`)) % span;
    for (let i = 0n; i < span; i++) {
      const v = ref.first + ((offset + i) % span);
      if (!allocatable(p, v)) continue;
      const name = recordName(prefix, p.family, v);
      if (used.has(name)) continue;
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
      const made = await this.store.create<AllocationSpec>('allocations', name, spec);
      if (made) {
        used.set(name, made);
        return { pool: p, ip, record: made, existing: false };
      }
      // someone else took it meanwhile: mark it and go on
      used.set(name, { name, spec, version: '' });
    }
    return undefined;
  }

  /** Every record of the network (or of the pools, without overlapping ranges). */
  async listAll(): Promise<StoredObject<AllocationSpec>[]> {
    const prefixes = new Set(this.conf.pools.map((p) => `${this.recordPrefix(p)}.`));
    if (prefixes.size === 0) prefixes.add(`${this.conf.net}.`);
    const out: StoredObject<AllocationSpec>[] = [];
    for (const prefix of prefixes)
      out.push(...(await this.store.list<AllocationSpec>('allocations', prefix)));
    return out.filter((r) => r.spec?.network === this.conf.net);
  }

  /** The records of one attachment: first in this node's blocks, else in the whole network. */
  async find(containerID: string, ifName: string): Promise<StoredObject<AllocationSpec>[]> {
    const group = this.groupReader();
    const found = new Map<string, StoredObject<AllocationSpec>>();
    for (const p of this.conf.pools) {
      for (const b of await this.blocksOf(p)) {
        if (b.spec.node !== this.conf.node) continue;
        const base = this.baseOf(p, b);
        if (base === undefined) continue;
        for (const r of (await group(p, base)).values())
          if (this.matches(r, containerID, ifName)) found.set(r.name, r);
      }
    }
    const pools = new Set([...found.values()].map((r) => r.spec.pool));
    if (this.conf.pools.every((p) => pools.has(p.key))) return [...found.values()];
    // borrowed addresses, or the node's blocks changed: the whole network
    for (const r of await this.listAll()) if (this.matches(r, containerID, ifName)) found.set(r.name, r);
    return [...found.values()];
  }

  /** DEL: remove the attachment's records; idempotent (none is success). Returns the addresses released. */
  async release(containerID: string, ifName: string): Promise<string[]> {
    const out: string[] = [];
    for (const r of await this.find(containerID, ifName)) {
      if (await this.store.delete('allocations', r.name, r.version)) out.push(r.spec.ip);
      else {
        // changed or gone meanwhile: delete it only if it is still ours
        const now = await this.store.get<AllocationSpec>('allocations', r.name);
        if (
          now &&
          this.matches(now, containerID, ifName) &&
          (await this.store.delete('allocations', now.name, now.version))
        )
          out.push(now.spec.ip);
      }
    }
    return out;
  }

  /** GC: delete this node's records whose attachment is not among the valid ones. Returns the addresses released. */
  async gc(valid: ReadonlyArray<{ containerID: string; ifname: string }>): Promise<string[]> {
    const keep = new Set(valid.map((a) => `${a.containerID}\n${a.ifname}`));
    const out: string[] = [];
    for (const r of await this.listAll()) {
      if (r.spec.node !== this.conf.node) continue;
      if (keep.has(`${r.spec.containerID}\n${r.spec.ifName}`)) continue;
      if (await this.store.delete('allocations', r.name, r.version)) out.push(r.spec.ip);
    }
    return out;
  }

  /** What an ADD on this node could still get, per pool. */
  async status(): Promise<PoolStatus[]> {
    const out: PoolStatus[] = [];
    const group = this.groupReader();
    for (const p of this.conf.pools) {
      const blocks = await this.blocksOf(p);
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
      for (const b of blocks) {
        const base = this.baseOf(p, b);
        if (base === undefined || claimed.has(base)) continue;
        claimed.add(base);
        const ref = blockAt(p, base);
        const cap = countFree(p, ref.first, ref.last);
        claimedFree += cap;
        const mine = b.spec.node === this.conf.node;
        if (mine) st.ownBlocks++;
        // other nodes' blocks are read only when the node has nothing left of its own and no block to claim
        if (!mine) continue;
        const used = await this.usedIn(p, ref.first, ref.last, group);
        st.used += used;
        st.freeOwn += cap - BigInt(used);
      }
      st.freeUnclaimed = p.size - claimedFree;
      if (st.freeOwn === 0n && st.freeUnclaimed === 0n) {
        for (const b of blocks) {
          if (b.spec.node === this.conf.node) continue;
          const base = this.baseOf(p, b);
          if (base === undefined) continue;
          const ref = blockAt(p, base);
          const used = await this.usedIn(p, ref.first, ref.last, group);
          st.used += used;
          st.freeBorrowable += countFree(p, ref.first, ref.last) - BigInt(used);
        }
      }
      out.push(st);
    }
    return out;
  }

  private async usedIn(
    p: Pool,
    first: bigint,
    last: bigint,
    group: (p: Pool, v: bigint) => Promise<Map<string, StoredObject<AllocationSpec>>>,
  ): Promise<number> {
    let n = 0;
    for (const r of (await group(p, blockBase(p, first))).values()) {
      const name = r.name;
      const low = BigInt(`0x${name.slice(name.lastIndexOf('.') + 1)}`);
      const v = ((first >> 8n) << 8n) | low;
      if (v >= first && v <= last && allocatable(p, v)) n++;
    }
    return n;
  }
}

/** `ip/prefix` of a record as a result carries it. */
export function addressOf(r: AllocationSpec): string {
  return `${r.ip}/${r.prefix}`;
}
