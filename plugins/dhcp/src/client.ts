/**
 * The DHCP client: one UDP socket per exchange, created inside the container's network namespace and bound to the
 * container interface (SO_BINDTODEVICE through @cnikit/sys udpOpenDevice), driven by node:dgram so hundreds of
 * exchanges run at once on one thread. The socket cannot receive unicast for an address the interface does not
 * carry yet, so DISCOVER/REQUEST in the INIT state always set the broadcast flag (the reference's -broadcast only
 * matters for its packet socket).
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { getLink, type Link, listAddrs, setLinkUp, withNetns } from '@cnikit/netlink';
import { CniError, ErrorCode } from '@cnikit/skel';
import { udpOpenDevice } from '@cnikit/sys';
import {
  BOOTREQUEST,
  type DhcpMessage,
  decodeMessage,
  encodeMessage,
  FLAG_BROADCAST,
  MESSAGE_TYPE_NAMES,
  MessageType,
  messageType,
  Opt,
  optIp,
  optString,
  optU32,
} from './packet.ts';

export const CLIENT_PORT = 68;
export const SERVER_PORT = 67;
const BROADCAST = '255.255.255.255';

export interface ClientSettings {
  /** How long one request waits for its reply (the reference's -timeout, default 10s). */
  timeoutMs: number;
  /** Longest delay between two attempts (-resendmax, default 62s). */
  resendMaxMs: number;
  /** Give up retrying after this long (-resendtimeout, default 208s). */
  resendTimeoutMs: number;
  /** Ask the server to broadcast replies in every state (-broadcast). */
  broadcast: boolean;
}

export const DEFAULT_SETTINGS: ClientSettings = {
  timeoutMs: 10_000,
  resendMaxMs: 62_000,
  resendTimeoutMs: 208_000,
  broadcast: false,
};

/** What identifies the client in every message. */
export interface Identity {
  clientId: string;
  mac: Uint8Array;
  /** Provided options (code, value), applied after the client ID: a provided option 61 replaces it, like the reference. */
  provide: Array<[number, string]>;
  request: number[];
}

export class DhcpError extends Error {}

/** Thrown when the namespace or the interface is gone: the lease cannot be maintained any more. */
export class LinkGoneError extends DhcpError {}

function isGone(err: unknown): boolean {
  const e = err as { code?: string; name?: string; errno?: number };
  return (
    e?.name === 'NetnsNotFoundError' ||
    e?.code === 'ENOENT' ||
    e?.code === 'ENODEV' ||
    e?.errno === 19 ||
    e?.errno === 2 ||
    /no such (device|file)|not found/i.test(String((err as Error)?.message))
  );
}

const IFF_BROADCAST = 0x2;
const IFF_LOOPBACK = 0x8;
const ARPHRD_LOOPBACK = 772;

/**
 * Why DHCP cannot run on `link`, or undefined when it can: DISCOVER is a broadcast from a client known by its
 * hardware address (RFC 2131 4.1), so a loopback, a link without broadcast (point-to-point, tun, ipip, wireguard …)
 * or without a 1–16 byte hardware address can never get an answer — failing at once, not at -resendtimeout.
 */
export function dhcpUnfit(link: Link): string | undefined {
  if ((link.flags & IFF_LOOPBACK) !== 0 || link.hwType === ARPHRD_LOOPBACK)
    return `${link.name} is a loopback interface`;
  if ((link.flags & IFF_BROADCAST) !== 0 && link.mac) {
    const len = link.mac.split(':').length;
    if (len >= 1 && len <= 16) return undefined;
    return `${link.name}'s hardware address (${len} bytes) does not fit a DHCP message (at most 16)`;
  }
  if ((link.flags & IFF_BROADCAST) === 0)
    return `${link.name} cannot broadcast (no IFF_BROADCAST: a point-to-point or layer-3 link${link.kind ? `, kind ${link.kind}` : ''})`;
  return `${link.name} has no hardware address`;
}

/**
 * Looks up the interface in the namespace (sets it up when down, like the reference) and returns its MAC. An
 * interface DHCP cannot work on is a configuration error (code 7), found before anything is sent or changed.
 */
export function prepareLink(netns: string, ifName: string, setUp: boolean): Uint8Array {
  try {
    return withNetns(netns, () => {
      const link = getLink(ifName);
      if (!link) throw new LinkGoneError(`error looking up ${JSON.stringify(ifName)}: Link not found`);
      const unfit = dhcpUnfit(link);
      if (unfit)
        throw new CniError(
          ErrorCode.InvalidNetworkConfig,
          `cannot run DHCP on ${JSON.stringify(ifName)}: ${unfit}`,
          "DHCP needs an Ethernet-like interface that can broadcast (CNI_IFNAME, the main plugin's interface)",
        );
      if (setUp && !link.up) setLinkUp(ifName);
      return Uint8Array.from(link.mac.split(':').map((h) => Number.parseInt(h, 16)));
    });
  } catch (err) {
    if (err instanceof LinkGoneError || err instanceof CniError) throw err;
    if (isGone(err)) throw new LinkGoneError(`${netns}: ${(err as Error).message}`);
    throw err;
  }
}

/** True when the namespace exists and has the interface. */
export function linkExists(netns: string, ifName: string): boolean {
  try {
    return withNetns(netns, () => getLink(ifName) !== undefined);
  } catch (err) {
    if (isGone(err)) return false;
    throw err;
  }
}

/**
 * True when `ifName` in `netns` carries `address` (the main plugin configured the lease). Without it a unicast to
 * the server would leave from 0.0.0.0, which servers ignore: renewals and releases are broadcast then.
 */
export function hasAddress(netns: string, ifName: string, address: string): boolean {
  try {
    return withNetns(netns, () => listAddrs({ link: ifName, family: 4 }).some((a) => a.ip === address));
  } catch {
    return false;
  }
}

/** A UDP socket on port 68 of `ifName` inside `netns`. */
export class DhcpSocket {
  readonly #sock: dgram.Socket;
  /** Waiters by transaction ID: on a shared segment every client sees every broadcast reply, most not its own. */
  #waiters = new Map<number, Set<(m: DhcpMessage) => boolean>>();
  #closed = false;

  private constructor(sock: dgram.Socket) {
    this.#sock = sock;
    sock.on('message', (buf) => {
      if (buf.length < 8) return;
      const waiting = this.#waiters.get(buf.readUInt32BE(4));
      if (!waiting) return;
      let m: DhcpMessage;
      try {
        m = decodeMessage(buf);
      } catch {
        return;
      }
      for (const w of waiting) if (w(m)) return;
    });
    sock.on('error', () => {});
  }

  /** `mac`: receive only messages for this client hardware address (a socket filter in the kernel). */
  static async open(netns: string, ifName: string, mac?: Uint8Array): Promise<DhcpSocket> {
    let fd: number;
    try {
      fd = withNetns(netns, () => udpOpenDevice(ifName, CLIENT_PORT, mac?.length === 6 ? mac : undefined));
    } catch (err) {
      if (isGone(err)) throw new LinkGoneError(`${netns} ${ifName}: ${(err as Error).message}`);
      throw err;
    }
    const sock = dgram.createSocket({ type: 'udp4' });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.bind({ fd }, () => {
        sock.off('error', reject);
        resolve();
      });
    });
    sock.setBroadcast(true);
    return new DhcpSocket(sock);
  }

  send(msg: DhcpMessage, dest: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#sock.send(encodeMessage(msg), SERVER_PORT, dest, (err) => (err ? reject(err) : resolve()));
    });
  }

  /**
   * Sends `msg` and waits up to `timeoutMs` for a reply that `accept` takes; undefined on timeout. Within that time
   * the message is retransmitted (same xid) after 1 s, 2 s, 4 s …: a first message lost while a link that was
   * just set up comes up costs a second, not the whole timeout.
   */
  async exchange(
    msg: DhcpMessage,
    dest: string,
    accept: (m: DhcpMessage) => boolean,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<DhcpMessage | undefined> {
    return new Promise<DhcpMessage | undefined>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let resend: NodeJS.Timeout | undefined;
      const done = (v: DhcpMessage | undefined, err?: unknown) => {
        if (resend) clearTimeout(resend);
        const set = this.#waiters.get(msg.xid);
        set?.delete(waiter);
        if (set?.size === 0) this.#waiters.delete(msg.xid);
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(v);
      };
      const waiter = (m: DhcpMessage) => {
        if (m.xid !== msg.xid || !accept(m)) return false;
        done(m);
        return true;
      };
      const onAbort = () => done(undefined, new DhcpError('aborted'));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort);
      const set = this.#waiters.get(msg.xid) ?? new Set();
      set.add(waiter);
      this.#waiters.set(msg.xid, set);
      timer = setTimeout(() => done(undefined), timeoutMs);
      let interval = 1000;
      const transmit = (first: boolean) => {
        this.send(msg, dest).catch((err) => {
          // a retransmission that cannot leave is not fatal: the first send's error is
          if (first) done(undefined, err);
        });
        resend = setTimeout(() => transmit(false), interval);
        interval *= 2;
      };
      transmit(true);
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#sock.close();
    } catch {
      // already closed
    }
  }
}

function baseMessage(
  id: Identity,
  type: number,
  xid: number,
  flags: number,
  ciaddr = '0.0.0.0',
): DhcpMessage {
  const options = new Map<number, Uint8Array>();
  options.set(Opt.MESSAGE_TYPE, Uint8Array.of(type));
  options.set(Opt.CLIENT_ID, Buffer.concat([Buffer.of(0), Buffer.from(id.clientId)]));
  return {
    op: BOOTREQUEST,
    htype: 1,
    hlen: id.mac.length,
    hops: 0,
    xid,
    secs: 0,
    flags,
    ciaddr,
    yiaddr: '0.0.0.0',
    siaddr: '0.0.0.0',
    giaddr: '0.0.0.0',
    chaddr: id.mac,
    options,
  };
}

function withIdentityOptions(m: DhcpMessage, id: Identity): DhcpMessage {
  for (const [code, value] of id.provide) m.options.set(code, Buffer.from(value));
  if (id.request.length) m.options.set(Opt.PARAMETER_REQUEST_LIST, Uint8Array.from(id.request));
  m.options.set(Opt.MAX_MESSAGE_SIZE, Uint8Array.of(0x05, 0xdc));
  return m;
}

function sameChaddr(m: DhcpMessage, id: Identity): boolean {
  return Buffer.compare(Buffer.from(m.chaddr), Buffer.from(id.mac)) === 0;
}

function newXid(): number {
  return randomInt(0, 2 ** 32 - 1);
}

function describe(m: DhcpMessage): string {
  return MESSAGE_TYPE_NAMES[messageType(m) ?? 0] ?? `message type ${messageType(m)}`;
}

/**
 * One INIT cycle: DISCOVER → OFFER → REQUEST → ACK. Throws on NAK or timeout. `want`: the address to ask for
 * (option 50 in the DISCOVER); an offer of another address is then refused (DhcpError) before anything is requested.
 */
export async function requestLease(
  sock: DhcpSocket,
  id: Identity,
  s: ClientSettings,
  signal?: AbortSignal,
  want?: string,
): Promise<DhcpMessage> {
  const xid = newXid();
  const flags = FLAG_BROADCAST;
  const discover = withIdentityOptions(baseMessage(id, MessageType.DISCOVER, xid, flags), id);
  if (want) discover.options.set(Opt.REQUESTED_IP, Buffer.from(want.split('.').map(Number)));
  const offer = await sock.exchange(
    discover,
    BROADCAST,
    (m) => messageType(m) === MessageType.OFFER && sameChaddr(m, id),
    s.timeoutMs,
    signal,
  );
  if (!offer) throw new DhcpError(`no DHCPOFFER within ${s.timeoutMs / 1000}s`);
  if (want && offer.yiaddr !== want) throw new DhcpError(`server offered ${offer.yiaddr} instead of ${want}`);
  const serverId = optIp(offer, Opt.SERVER_ID);
  if (!serverId) throw new DhcpError('DHCPOFFER without a server identifier');
  const req = withIdentityOptions(baseMessage(id, MessageType.REQUEST, xid, flags), id);
  req.options.set(Opt.REQUESTED_IP, Buffer.from(offer.yiaddr.split('.').map(Number)));
  req.options.set(Opt.SERVER_ID, Buffer.from(serverId.split('.').map(Number)));
  const reply = await sock.exchange(
    req,
    BROADCAST,
    (m) => {
      const t = messageType(m);
      return (t === MessageType.ACK || t === MessageType.NAK) && sameChaddr(m, id);
    },
    s.timeoutMs,
    signal,
  );
  if (!reply) throw new DhcpError(`no DHCPACK within ${s.timeoutMs / 1000}s`);
  if (messageType(reply) === MessageType.NAK)
    throw new DhcpNak(`DHCPNAK from ${serverId}: ${optString(reply, Opt.MESSAGE) ?? 'no message'}`);
  return reply;
}

/**
 * A REQUEST for the address held (RENEWING: unicast to the server; REBINDING: broadcast to any server). Resolves
 * to the ACK; throws on NAK or timeout.
 */
export async function extendLease(
  sock: DhcpSocket,
  id: Identity,
  s: ClientSettings,
  address: string,
  server: string | undefined,
  signal?: AbortSignal,
): Promise<DhcpMessage> {
  const xid = newXid();
  const req = withIdentityOptions(
    baseMessage(id, MessageType.REQUEST, xid, s.broadcast ? FLAG_BROADCAST : 0, address),
    id,
  );
  const accept = (m: DhcpMessage) => {
    const t = messageType(m);
    return (t === MessageType.ACK || t === MessageType.NAK) && sameChaddr(m, id);
  };
  const reply = await sock.exchange(req, server ?? BROADCAST, accept, s.timeoutMs, signal);
  if (!reply)
    throw new DhcpError(
      `no reply to DHCPREQUEST (${server ? 'renew' : 'rebind'}) within ${s.timeoutMs / 1000}s`,
    );
  if (messageType(reply) === MessageType.NAK)
    throw new DhcpNak(`DHCPNAK: ${optString(reply, Opt.MESSAGE) ?? 'no message'}`);
  if (messageType(reply) !== MessageType.ACK) throw new DhcpError(`unexpected ${describe(reply)}`);
  return reply;
}

/** The server refused the address: the lease is over. */
export class DhcpNak extends DhcpError {}

/** DHCPRELEASE for `address`: unicast to the server when the interface carries the address, else broadcast. */
export async function releaseLease(
  sock: DhcpSocket,
  id: Identity,
  address: string,
  server: string,
  unicast: boolean,
): Promise<void> {
  const m = baseMessage(id, MessageType.RELEASE, newXid(), 0, address);
  m.options.set(Opt.SERVER_ID, Buffer.from(server.split('.').map(Number)));
  await sock.send(m, unicast ? server : BROADCAST);
}

/** Lease times of an ACK in milliseconds (the reference's defaults: 1h lease, T1 = 1/2, T2 = 85%). */
export function leaseTimes(ack: DhcpMessage): { leaseMs: number; t1Ms: number; t2Ms: number } {
  const lease = optU32(ack, Opt.LEASE_TIME) ?? 3600;
  const t1 = optU32(ack, Opt.RENEWAL_TIME) ?? Math.floor(lease / 2);
  const t2 = optU32(ack, Opt.REBINDING_TIME) ?? Math.floor((lease * 85) / 100);
  return { leaseMs: lease * 1000, t1Ms: t1 * 1000, t2Ms: t2 * 1000 };
}

/** The reference's backoff: four fast retries 2s±1s apart, then 4s doubling up to resendMax, each ±1s. */
export function backoffDelays(resendMaxMs: number): () => number {
  let fast = 4;
  let base = 4000;
  return () => {
    const jitter = (Math.random() * 2 - 1) * 1000;
    if (fast > 0) {
      fast--;
      return 2000 + jitter;
    }
    const d = base + jitter;
    if (base < resendMaxMs) base *= 2;
    return Math.min(d, Math.max(resendMaxMs, 1000));
  };
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
