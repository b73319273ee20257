/**
 * Round-robin allocation exactly like the reference (`backend/allocator/allocator.go`): start after
 * `last_reserved_ip.<rangeID>` when it lies in the set (else at the first range's rangeStart), walk to
 * rangeEnd, continue with the next range of the set (wrapping), skip each range's gateway, and stop when
 * back at the first candidate. The walk is arithmetic on one address at a time — never materialised —
 * and a candidate costs one in-memory lookup in the directory listing unless it is free; so an ADD
 * costs O(files in the directory) for the (format-imposed) scan plus O(taken candidates visited).
 */
import { equal, formatIP, type IP, next } from '@cnikit/ip';
import { type Range, type RangeSet, rangeContains, rangeFor, rangeSetSize, rangeSetString } from './range.ts';
import { byName, type Entry, entryIP, reservationKey, type Store } from './store.ts';

export class RangeIter {
  readonly #set: RangeSet;
  #rangeIdx = 0;
  #cur: IP | undefined;
  #startIP: IP | undefined;

  constructor(set: RangeSet, lastReserved?: IP) {
    this.#set = set;
    const idx = lastReserved ? set.findIndex((r) => rangeContains(r, lastReserved)) : -1;
    if (lastReserved && idx >= 0) {
      this.#rangeIdx = idx;
      this.#cur = lastReserved; // the first next() answers lastReserved + 1
    } else {
      this.#rangeIdx = 0;
      this.#startIP = set[0]!.rangeStart;
    }
  }

  /** The candidate address and its range, or undefined once the walk is back at its start. */
  next(): { ip: IP; range: Range } | undefined {
    for (;;) {
      let r = this.#set[this.#rangeIdx]!;
      if (this.#cur === undefined) {
        this.#cur = r.rangeStart;
        this.#startIP = this.#cur;
        if (equal(this.#cur, r.gateway)) continue;
        return { ip: this.#cur, range: r };
      }
      if (equal(this.#cur, r.rangeEnd)) {
        this.#rangeIdx = (this.#rangeIdx + 1) % this.#set.length;
        r = this.#set[this.#rangeIdx]!;
        this.#cur = r.rangeStart;
      } else {
        const n = next(this.#cur);
        if (!n) return undefined; // cannot happen for canonical ranges (rangeEnd ≤ last address)
        this.#cur = n;
      }
      if (this.#startIP === undefined) this.#startIP = this.#cur;
      else if (equal(this.#cur, this.#startIP)) return undefined;
      if (equal(this.#cur, r.gateway)) continue;
      return { ip: this.#cur, range: r };
    }
  }
}

export class AllocError extends Error {
  /** Extra text for the CNI error's `details` (the reference's message stays as it is). */
  constructor(
    message: string,
    readonly details = '',
  ) {
    super(message);
  }
}

export interface Allocation {
  ip: IP;
  range: Range;
}

/**
 * State of one ADD under the store lock: the directory scan (done once), the temp file with this
 * attachment's content (written once, linked to each reserved name) and what this ADD reserved.
 */
/** One last_reserved_ip.<rangeID> an ADD wrote, and what it held before (undefined: no file). */
export interface CursorChange {
  rangeID: number;
  ip: IP;
  previous: IP | undefined;
}

/**
 * Put back the cursors of a rolled-back ADD (called with the store locked): each one that still holds what that
 * ADD wrote gets its previous value again (or is removed); one another ADD has moved since is left alone.
 */
export function restoreCursors(store: Store, changes: readonly CursorChange[]): void {
  for (const c of changes) {
    const cur = store.lastReservedIP(c.rangeID).ip;
    if (!cur || !equal(cur, c.ip)) continue;
    if (c.previous) store.setLastReservedIP(c.rangeID, c.previous);
    else store.removeLastReservedIP(c.rangeID);
  }
}

export class AddSession {
  readonly store: Store;
  readonly containerID: string;
  readonly ifName: string;
  readonly entries: Entry[];
  readonly taken: Set<string>;
  readonly reserved: string[] = [];
  /** last_reserved_ip.<rangeID> values, written only by commit(): a failed ADD leaves them unchanged. */
  readonly #lastReserved = new Map<number, IP>();
  #tmp: string | undefined;
  readonly log: (msg: string) => void;

  constructor(store: Store, containerID: string, ifName: string, log: (msg: string) => void) {
    this.store = store;
    this.containerID = containerID;
    this.ifName = ifName;
    this.log = log;
    const { entries, names } = store.scan();
    this.entries = entries;
    this.taken = names;
  }

  #tempFile(): string {
    this.#tmp ??= this.store.writeTemp(reservationKey(this.containerID, this.ifName));
    return this.#tmp;
  }

  /** Reserve `ip` exclusively; false when taken. Records last_reserved_ip like the reference (at commit). */
  reserve(ip: IP, rangeID: number): boolean {
    const name = formatIP(ip);
    if (this.taken.has(name)) return false;
    const ok = this.store.tryLink(this.#tempFile(), ip);
    this.taken.add(name);
    if (!ok) return false;
    this.reserved.push(name);
    this.#lastReserved.set(rangeID, ip);
    return true;
  }

  /** Go `IPAllocator.Get` for range set `rangeID`. */
  get(set: RangeSet, rangeID: number, requested: IP | undefined): Allocation {
    if (requested) {
      const r = rangeFor(set, requested);
      if (!r) throw new AllocError(`${formatIP(requested)} not in range set ${rangeSetString(set)}`);
      if (equal(requested, r.gateway))
        throw new AllocError(`requested ip ${formatIP(requested)} is subnet's gateway`);
      if (!this.reserve(requested, rangeID)) {
        throw new AllocError(
          `requested IP address ${formatIP(requested)} is not available in range set ${rangeSetString(set)}`,
        );
      }
      return { ip: requested, range: r };
    }

    // duplicate allocation for this container+interface (or a legacy ID-only file) in this set
    const key = reservationKey(this.containerID, this.ifName);
    const legacy = this.containerID.trim();
    const mine = this.entries.filter((e) => e.key === key || e.key === legacy).sort(byName);
    for (const e of mine) {
      const ip = entryIP(e);
      if (ip && rangeFor(set, ip)) {
        throw new AllocError(
          `${formatIP(ip)} has been allocated to ${this.containerID}, duplicate allocation is not allowed`,
        );
      }
    }

    const pending = this.#lastReserved.get(rangeID);
    const last = pending ? { ip: pending } : this.store.lastReservedIP(rangeID);
    if (last.error) this.log(`Error retrieving last reserved ip: ${(last.error as Error).message}`);
    const iter = new RangeIter(set, last.ip); // an address outside the set starts at the first range
    for (let c = iter.next(); c; c = iter.next()) {
      if (this.reserve(c.ip, rangeID)) return c;
    }
    throw new AllocError(
      `no IP addresses available in range set: ${rangeSetString(set)}`,
      `range set ${rangeSetString(set)} has ${rangeSetSize(set)} addresses, all allocated`,
    );
  }

  /**
   * The ADD succeeded: record last_reserved_ip of every range set it allocated from (the reference writes it at
   * each reservation, so its failed ADDs still move the allocator on; cnikit's change nothing).
   */
  commit(): CursorChange[] {
    const changes: CursorChange[] = [];
    for (const [rangeID, ip] of this.#lastReserved) {
      changes.push({ rangeID, ip, previous: this.store.lastReservedIP(rangeID).ip });
      this.store.setLastReservedIP(rangeID, ip);
    }
    this.#lastReserved.clear();
    return changes;
  }

  /** Remove what this ADD reserved (rollback). */
  rollback(): void {
    this.#lastReserved.clear();
    for (const name of this.reserved.splice(0)) {
      try {
        this.store.remove(name);
      } catch (err) {
        this.log(`failed to release ${name}: ${(err as Error).message}`);
      }
    }
  }

  finish(): void {
    if (this.#tmp) this.store.dropTemp(this.#tmp);
    this.#tmp = undefined;
  }
}
