/**
 * Leases held by the daemon: acquisition, renewal at T1 (unicast to the server), rebinding at T2 (broadcast),
 * expiry (the interface goes down, as in the reference), release, and persistence — every change of a lease is
 * written atomically to the state directory, and a restarted daemon resumes the leases it finds there.
 * A lease whose namespace or interface is gone is dropped (and its file removed) the next time it is looked at.
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants, statSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setLinkDown, withNetns } from '@cnikit/netlink';
import { StateDir } from '@cnikit/sys';
import {
  backoffDelays,
  type ClientSettings,
  DhcpError,
  DhcpNak,
  DhcpSocket,
  extendLease,
  hasAddress,
  type Identity,
  LinkGoneError,
  leaseTimes,
  linkExists,
  prepareLink,
  releaseLease,
  requestLease,
  sleep,
} from './client.ts';
import { type DhcpMessage, decodeMessage, encodeMessage, Opt, optIp } from './packet.ts';

export type LeaseState = 'bound' | 'renewing' | 'rebinding' | 'expired';

/** One lease as persisted (state-dir/<sha256(clientId)[:32]>.json) and shown by `dhcp status`. */
export interface LeaseRecord {
  version: 1;
  clientId: string;
  containerId: string;
  netName: string;
  ifName: string;
  /** The namespace path the daemon uses (hostprefix included). */
  netns: string;
  mac: string;
  provide: Array<[number, string]>;
  request: number[];
  priority: number;
  address: string;
  server: string;
  /** The latest DHCPACK, base64 (the result is rebuilt from it). */
  ack: string;
  acquiredAt: string;
  boundAt: string;
  renewAt: string;
  rebindAt: string;
  expiresAt: string;
  state: LeaseState;
  renewals: number;
  lastError?: string;
}

export type Log = (msg: string) => void;

let pidNs: string | undefined;
/** This process's pid namespace (the inode of /proc/self/ns/pid), as StateDir names its writers. */
function pidNamespace(): string {
  if (pidNs === undefined) {
    try {
      pidNs = String(statSync('/proc/self/ns/pid').ino);
    } catch {
      pidNs = '0';
    }
  }
  return pidNs;
}

export function leaseFileName(clientId: string): string {
  return `${createHash('sha256').update(clientId).digest('hex').slice(0, 32)}.json`;
}

/**
 * The lease files of a state directory. Reading (at start) is synchronous through StateDir (no symlink is
 * followed); writes are asynchronous — the fsyncs run on libuv's thread pool, never on the event loop that a burst
 * of ADDs needs — and coalesced per lease: while one write of a lease is in flight, only its newest state waits. Each
 * write is atomic (temporary file created O_EXCL|O_NOFOLLOW, fsync, rename, fsync of the directory).
 */
export class LeaseStore {
  readonly #path: string;
  readonly #dir: StateDir;
  readonly #log: Log;
  /** Newest state per file name not written yet (null: remove the file). */
  readonly #next = new Map<string, string | null>();
  readonly #running = new Map<string, Promise<void>>();

  constructor(path: string, log: Log = () => {}) {
    this.#dir = StateDir.open(path, { create: true, mode: 0o700 });
    this.#path = path;
    this.#log = log;
  }

  save(r: LeaseRecord): void {
    this.#queue(leaseFileName(r.clientId), `${JSON.stringify(r, null, 2)}\n`);
  }

  remove(clientId: string): void {
    this.#queue(leaseFileName(clientId), null);
  }

  #queue(name: string, data: string | null): void {
    this.#next.set(name, data);
    if (this.#running.has(name)) return;
    const run = (async () => {
      while (this.#next.has(name)) {
        const value = this.#next.get(name) as string | null;
        this.#next.delete(name);
        try {
          if (value === null) await this.#unlink(name);
          else await this.#write(name, value);
        } catch (err) {
          this.#log(
            `cannot ${value === null ? 'remove' : 'write'} ${join(this.#path, name)}: ${(err as Error).message}`,
          );
        }
      }
      this.#running.delete(name);
    })();
    this.#running.set(name, run);
  }

  /**
   * `name` reached through the directory's descriptor (openat semantics, like StateDir): a symlink put in place of
   * the state directory after the daemon opened it is never followed.
   */
  #at(name: string): string {
    return `/proc/self/fd/${this.#dir.fd}/${name}`;
  }

  async #write(name: string, data: string): Promise<void> {
    // StateDir's temp name form (`.<name>.<pidns>-<pid>.<hex>.tmp`): removeStaleTemps knows whose it is
    const tmp = this.#at(`.${name}.${pidNamespace()}-${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
    const fh = await open(
      tmp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await rename(tmp, this.#at(name));
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
    await this.#syncDir();
  }

  async #unlink(name: string): Promise<void> {
    try {
      await unlink(this.#at(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    await this.#syncDir();
  }

  async #syncDir(): Promise<void> {
    const d = await open(this.#at('.'), constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  /** Resolves when every queued write has reached the disk. */
  async flush(): Promise<void> {
    while (this.#running.size) await Promise.all(this.#running.values());
  }

  /**
   * Every readable record; unreadable files are reported and left alone. The temp files of writes that can never
   * finish (a daemon killed before its rename) are removed first.
   */
  load(log: Log): LeaseRecord[] {
    for (const t of this.#dir.removeStaleTemps())
      log(`removed ${this.#dir.display(t)} (a write that never finished)`);
    const out: LeaseRecord[] = [];
    for (const name of this.#dir.list()) {
      if (!/^[0-9a-f]{32}\.json$/.test(name)) continue;
      try {
        const r = JSON.parse(String(this.#dir.read(name))) as LeaseRecord;
        if (r.version !== 1 || typeof r.clientId !== 'string' || leaseFileName(r.clientId) !== name)
          throw new Error('not a lease record');
        out.push(r);
      } catch (err) {
        log(`ignoring ${this.#dir.display(name)}: ${(err as Error).message}`);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await this.flush();
    this.#dir.close();
  }
}

function macText(mac: Uint8Array): string {
  return [...mac].map((b) => b.toString(16).padStart(2, '0')).join(':');
}

function macBytes(text: string): Uint8Array {
  return Uint8Array.from(text.split(':').map((h) => Number.parseInt(h, 16)));
}

export interface LeaseRequest {
  clientId: string;
  containerId: string;
  netName: string;
  ifName: string;
  netns: string;
  provide: Array<[number, string]>;
  request: number[];
  priority: number;
}

interface Hooks {
  settings: ClientSettings;
  log: Log;
  persist(r: LeaseRecord): void;
  /** The lease ended without a release (namespace or interface gone): forget it. */
  gone(l: Lease): void;
}

export class Lease {
  record: LeaseRecord;
  readonly #hooks: Hooks;
  readonly #stop = new AbortController();
  #loop: Promise<void> | undefined;

  private constructor(record: LeaseRecord, hooks: Hooks) {
    this.record = record;
    this.#hooks = hooks;
  }

  get ack(): DhcpMessage {
    return decodeMessage(Buffer.from(this.record.ack, 'base64'));
  }

  get identity(): Identity {
    const r = this.record;
    return { clientId: r.clientId, mac: macBytes(r.mac), provide: r.provide, request: r.request };
  }

  /** Acquires a new lease (retrying with the reference's backoff until -resendtimeout). */
  static async acquire(req: LeaseRequest, hooks: Hooks, signal: AbortSignal): Promise<Lease> {
    const s = hooks.settings;
    const mac = prepareLink(req.netns, req.ifName, true);
    const id: Identity = { clientId: req.clientId, mac, provide: req.provide, request: req.request };
    hooks.log(`${req.clientId}: acquiring lease`);
    const sock = await DhcpSocket.open(req.netns, req.ifName, mac);
    const deadline = Date.now() + s.resendTimeoutMs;
    const delay = backoffDelays(s.resendMaxMs);
    let lastErr: unknown;
    try {
      for (;;) {
        try {
          const ack = await requestLease(sock, id, s, signal);
          const now = Date.now();
          const record: LeaseRecord = {
            version: 1,
            ...req,
            mac: macText(mac),
            address: ack.yiaddr,
            server: optIp(ack, Opt.SERVER_ID) ?? '',
            ack: '',
            acquiredAt: new Date(now).toISOString(),
            boundAt: '',
            renewAt: '',
            rebindAt: '',
            expiresAt: '',
            state: 'bound',
            renewals: 0,
          };
          const lease = new Lease(record, hooks);
          lease.#commit(ack, now);
          hooks.log(`${req.clientId}: lease acquired (${ack.yiaddr}), expiration is ${record.expiresAt}`);
          return lease;
        } catch (err) {
          lastErr = err;
          if (signal.aborted) throw err;
          hooks.log(`${req.clientId}: ${(err as Error).message}`);
        }
        // a NAK in SELECTING (the offered address went to another client meanwhile) restarts at once (RFC 2131 3.1)
        const wait = lastErr instanceof DhcpNak ? Math.random() * 200 : delay();
        if (Date.now() + wait >= deadline) break;
        await sleep(wait, signal);
        if (signal.aborted) throw new Error('lease acquisition cancelled');
      }
    } finally {
      sock.close();
    }
    throw new Error(`no more tries: ${(lastErr as Error)?.message ?? 'no reply'}`);
  }

  /** A lease read back from the state directory. */
  static resume(record: LeaseRecord, hooks: Hooks): Lease {
    return new Lease(record, hooks);
  }

  #commit(ack: DhcpMessage, now: number): void {
    const t = leaseTimes(ack);
    const r = this.record;
    r.ack = encodeMessage(ack).toString('base64');
    r.address = ack.yiaddr;
    r.server = optIp(ack, Opt.SERVER_ID) ?? r.server;
    r.boundAt = new Date(now).toISOString();
    r.renewAt = new Date(now + t.t1Ms).toISOString();
    r.rebindAt = new Date(now + t.t2Ms).toISOString();
    r.expiresAt = new Date(now + t.leaseMs).toISOString();
    r.state = 'bound';
    delete r.lastError;
  }

  #save(): void {
    try {
      this.#hooks.persist(this.record);
    } catch (err) {
      this.#hooks.log(`${this.record.clientId}: cannot persist the lease: ${(err as Error).message}`);
    }
  }

  /** Starts maintenance (renew at T1, rebind at T2, expiry). */
  start(): void {
    this.#save();
    this.#loop ??= this.#maintain().catch((err) =>
      this.#hooks.log(`${this.record.clientId}: lease maintenance failed: ${(err as Error).message}`),
    );
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  async #maintain(): Promise<void> {
    const r = this.record;
    const log = this.#hooks.log;
    const signal = this.#stop.signal;
    const s = this.#hooks.settings;
    let delay = backoffDelays(s.resendMaxMs);
    // resumed after its end (no daemon ran meanwhile): the server may have forgotten it too, so a REBINDING
    // request can go unanswered; the address is asked for again in a fresh DISCOVER instead (RFC 2131 4.4.5: INIT)
    if (r.state !== 'expired' && Date.now() >= Date.parse(r.expiresAt) && !(await this.#reacquire())) return;
    while (!signal.aborted && r.state !== 'expired') {
      if (r.state === 'bound') {
        await sleep(Date.parse(r.renewAt) - Date.now(), signal);
        if (signal.aborted) return;
        r.state = 'renewing';
        delay = backoffDelays(s.resendMaxMs);
        log(`${r.clientId}: renewing lease`);
        this.#save();
      }
      if (!linkExists(r.netns, r.ifName)) {
        log(
          `${r.clientId}: interface ${r.ifName} in ${r.netns} no longer exists, terminating lease maintenance`,
        );
        this.#stop.abort();
        this.#hooks.gone(this);
        return;
      }
      const rebinding = r.state === 'rebinding' || Date.now() >= Date.parse(r.rebindAt);
      if (rebinding && r.state !== 'rebinding') {
        log(`${r.clientId}: renewal time expired, rebinding`);
        r.state = 'rebinding';
        this.#save();
      }
      let sock: DhcpSocket | undefined;
      try {
        sock = await DhcpSocket.open(r.netns, r.ifName, macBytes(r.mac));
        const unicast = !rebinding && hasAddress(r.netns, r.ifName, r.address);
        const ack = await extendLease(
          sock,
          this.identity,
          s,
          r.address,
          unicast ? r.server : undefined,
          signal,
        );
        if (ack.yiaddr !== r.address) throw new Error(`server offered ${ack.yiaddr} instead of ${r.address}`);
        this.#commit(ack, Date.now());
        r.renewals++;
        log(`${r.clientId}: lease ${rebinding ? 'rebound' : 'renewed'}, expiration is ${r.expiresAt}`);
        this.#save();
        continue;
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof LinkGoneError) continue;
        r.lastError = (err as Error).message;
        log(`${r.clientId}: ${r.lastError}`);
        if (err instanceof DhcpNak) {
          this.#expire('the server refused the address (DHCPNAK)');
          return;
        }
      } finally {
        sock?.close();
      }
      if (Date.now() >= Date.parse(r.expiresAt)) {
        this.#expire('lease expired');
        return;
      }
      const limit = Date.parse(r.state === 'renewing' ? r.rebindAt : r.expiresAt) - Date.now();
      this.#save();
      await sleep(Math.max(0, Math.min(delay(), limit)), signal);
    }
  }

  /**
   * A new lease for the address held, through DISCOVER (asking for it) → OFFER → REQUEST → ACK, retried with the
   * reference's back-off until -resendtimeout. False when maintenance ends: stopped, the link gone, or no server
   * gave the address back in time (the lease expires: the interface is set down, as at any expiry).
   */
  async #reacquire(): Promise<boolean> {
    const r = this.record;
    const signal = this.#stop.signal;
    const s = this.#hooks.settings;
    const log = this.#hooks.log;
    log(`${r.clientId}: the lease ended while no daemon maintained it, requesting ${r.address} again`);
    const deadline = Date.now() + s.resendTimeoutMs;
    const delay = backoffDelays(s.resendMaxMs);
    for (;;) {
      if (!linkExists(r.netns, r.ifName)) {
        log(
          `${r.clientId}: interface ${r.ifName} in ${r.netns} no longer exists, terminating lease maintenance`,
        );
        this.#stop.abort();
        this.#hooks.gone(this);
        return false;
      }
      let sock: DhcpSocket | undefined;
      try {
        sock = await DhcpSocket.open(r.netns, r.ifName, macBytes(r.mac));
        const ack = await requestLease(sock, this.identity, s, signal, r.address);
        if (ack.yiaddr !== r.address)
          throw new DhcpError(`server acknowledged ${ack.yiaddr} instead of ${r.address}`);
        this.#commit(ack, Date.now());
        log(`${r.clientId}: lease acquired again (${r.address}), expiration is ${r.expiresAt}`);
        this.#save();
        return true;
      } catch (err) {
        if (signal.aborted) return false;
        if (!(err instanceof LinkGoneError)) {
          r.lastError = (err as Error).message;
          log(`${r.clientId}: ${r.lastError}`);
        }
      } finally {
        sock?.close();
      }
      const wait = delay();
      if (Date.now() + wait >= deadline) {
        this.#expire('lease expired');
        return false;
      }
      await sleep(wait, signal);
      if (signal.aborted) return false;
    }
  }

  #expire(why: string): void {
    const r = this.record;
    r.state = 'expired';
    this.#hooks.log(`${r.clientId}: ${why}, bringing interface DOWN`);
    try {
      withNetns(r.netns, () => setLinkDown(r.ifName));
    } catch (err) {
      this.#hooks.log(`${r.clientId}: failed to bring ${r.ifName} interface DOWN: ${(err as Error).message}`);
    }
    this.#save();
  }

  /** Stops maintenance (daemon shutdown: the lease stays on disk and is resumed by the next daemon). */
  async halt(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  /** Stops maintenance and sends DHCPRELEASE (best effort: a gone namespace cannot be reached). */
  async release(): Promise<void> {
    await this.halt();
    const r = this.record;
    if (r.state === 'expired') return;
    this.#hooks.log(`${r.clientId}: releasing lease`);
    let sock: DhcpSocket | undefined;
    try {
      sock = await DhcpSocket.open(r.netns, r.ifName, macBytes(r.mac));
      await releaseLease(sock, this.identity, r.address, r.server, hasAddress(r.netns, r.ifName, r.address));
    } catch (err) {
      this.#hooks.log(`${r.clientId}: failed to release DHCP lease: ${(err as Error).message}`);
    } finally {
      sock?.close();
    }
  }
}
