// Request/response plumbing over a NETLINK_ROUTE socket: sequence numbers, ACKs, dumps (with NLM_F_DUMP_INTR
// retries), errors decoded into NetlinkError (a SysError with errno/code and a message naming the operation).
//
// A socket belongs to the namespace the calling thread is in when it is opened. Every public operation opens
// its own socket in the current thread's namespace and closes it before returning (opening one is a few
// syscalls, no process start), so a socket can never be reused across namespaces, and no socket keeps a deleted
// namespace alive. Nested calls made while an operation is running share that operation's socket.
import { NETLINK_EXT_ACK, NETLINK_ROUTE, NetlinkSocket, SysError } from '@cnikit/sys';
import {
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_DUMP_INTR,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_NOOP,
  NLMSG_OVERRUN,
  NLMSGERR_ATTR_MSG,
  type NlBuilder,
  type NlMessage,
  parseAttrs,
  parseMessages,
} from './nl.ts';
import { type NetlinkTransport, rtnlSeams } from './rtnl-seams.ts';

export type { NetlinkTransport, TransportFactory } from './rtnl-seams.ts';

const EINTR = 4;
const EIO = 5;
const ETIMEDOUT = 110;
const EINVAL = 22;

/**
 * An rtnetlink failure: `errno`/`code` ('EEXIST', 'ENODEV', …), `reason` (Go errno text, 'file exists'), `op`
 * (what was attempted, e.g. 'failed to add address 10.1.2.3/24 to eth0'); message = `${op}: ${reason}`.
 * `kernelMessage` carries the kernel's extended-ACK text when it sent one (e.g. 'Unknown device type').
 */
export class NetlinkError extends SysError {
  readonly op: string;
  readonly kernelMessage: string | undefined;

  constructor(
    errno: number,
    op: string,
    opts: { kernelMessage?: string; reason?: string; cause?: unknown } = {},
  ) {
    super(errno, 'netlink', undefined, opts.cause === undefined ? undefined : { cause: opts.cause });
    const reason = opts.reason ?? this.reason; // this.reason: @cnikit/sys errnoMessage (Go errno text)
    this.message = op ? `${op}: ${reason}` : reason;
    this.name = 'NetlinkError';
    this.op = op;
    this.kernelMessage = opts.kernelMessage;
    if (reason !== this.reason) Object.defineProperty(this, 'reason', { value: reason });
  }
}

/** True for the "no such link/address/route" family of errors (ENODEV, ENOENT, ESRCH, EADDRNOTAVAIL). */
export function isNotFoundError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENODEV' || code === 'ENOENT' || code === 'ESRCH' || code === 'EADDRNOTAVAIL';
}

export function isExistsError(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'EEXIST';
}

/** Bad input detected before anything reached the kernel (errno EINVAL). */
export function invalidArgument(op: string, reason: string): NetlinkError {
  return new NetlinkError(EINVAL, op, { reason });
}

function defaultFactory(): NetlinkTransport {
  // Kernel default buffers: dumps are paced by our reads (the kernel fills the next chunk when we read), and
  // requests/answers are small, so no SO_RCVBUFFORCE/SO_SNDBUFFORCE syscalls are needed.
  const s = NetlinkSocket.open(NETLINK_ROUTE, { receiveBufferSize: 0 });
  try {
    s.setOption(NETLINK_EXT_ACK, 1);
  } catch {
    // older kernels: plain errno only
  }
  return s;
}

let active: NetlinkTransport | undefined;
let seqCounter = (Math.floor(Math.random() * 0x3fffffff) + 1) >>> 0;

function nextSeq(): number {
  seqCounter = (seqCounter + 1) >>> 0;
  if (seqCounter === 0) seqCounter = 1;
  return seqCounter;
}

/**
 * Runs `fn` with a socket open in the calling thread's current namespace (or the socket of the operation
 * already running, for nested calls). `fn` must not switch namespaces.
 */
export function withSocket<T>(fn: (t: NetlinkTransport) => T, op = 'netlink'): T {
  if (active) return fn(active);
  let t: NetlinkTransport;
  try {
    t = (rtnlSeams.factory ?? defaultFactory)();
  } catch (err) {
    const e = err as { errno?: number; message?: string };
    if (typeof e.errno === 'number')
      throw new NetlinkError(e.errno, `${op}: cannot open netlink socket`, { cause: err });
    // e.g. the native addon is missing: say so instead of a bare errno text
    throw new NetlinkError(EIO, op, {
      reason: `cannot open netlink socket: ${e.message ?? String(err)}`,
      cause: err,
    });
  }
  active = t;
  try {
    return fn(t);
  } finally {
    active = undefined;
    t.close();
  }
}

function errorFromAck(m: NlMessage, op: string): NetlinkError | undefined {
  if (m.payload.length < 4) return new NetlinkError(EIO, op, { reason: 'truncated netlink error message' });
  const code = m.payload.readInt32LE(0);
  if (code === 0) return undefined;
  let kernelMessage: string | undefined;
  if (m.flags & NLM_F_ACK_TLVS && m.payload.length >= 20) {
    const origLen = m.payload.readUInt32LE(4);
    const off = 4 + (m.flags & NLM_F_CAPPED ? 16 : (origLen + 3) & ~3);
    if (off < m.payload.length) {
      const msg = parseAttrs(m.payload, off).get(NLMSGERR_ATTR_MSG);
      if (msg) kernelMessage = msg.toString('utf8').replace(/\0.*$/s, '');
    }
  }
  return new NetlinkError(-code, op, { kernelMessage });
}

function sendAndCollect(
  t: NetlinkTransport,
  b: NlBuilder,
  op: string,
  onMessage: (m: NlMessage) => boolean,
): void {
  const seq = nextSeq();
  const msg = b.finish(seq);
  try {
    t.send(msg);
  } catch (err) {
    const e = err as { errno?: number };
    throw new NetlinkError(typeof e.errno === 'number' ? e.errno : EIO, op, { cause: err });
  }
  const deadline = Date.now() + rtnlSeams.timeoutMs;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new NetlinkError(ETIMEDOUT, op, { reason: 'no answer from the kernel (timed out)' });
    let buf: Buffer | null;
    try {
      buf = t.recv(left);
    } catch (err) {
      const e = err as { errno?: number };
      throw new NetlinkError(typeof e.errno === 'number' ? e.errno : EIO, op, { cause: err });
    }
    if (buf === null)
      throw new NetlinkError(ETIMEDOUT, op, { reason: 'no answer from the kernel (timed out)' });
    let msgs: NlMessage[];
    try {
      msgs = parseMessages(buf);
    } catch (err) {
      throw new NetlinkError(EIO, op, { reason: (err as Error).message });
    }
    for (const m of msgs) {
      if (m.seq !== seq) continue; // a stale answer to an earlier request
      if (m.type === NLMSG_NOOP) continue;
      if (m.type === NLMSG_OVERRUN) throw new NetlinkError(EIO, op, { reason: 'netlink overrun' });
      if (onMessage(m)) return;
    }
  }
}

/** Sends a request that was built with NLM_F_ACK and waits for the kernel's acknowledgement. */
export function rtRequest(b: NlBuilder, op: string): void {
  withSocket((t) => {
    sendAndCollect(t, b, op, (m) => {
      if (m.type !== NLMSG_ERROR) return false;
      const err = errorFromAck(m, op);
      if (err) throw err;
      return true;
    });
  }, op);
}

/** Sends a non-dump GET and returns the single reply message. */
export function rtGet(b: NlBuilder, op: string): NlMessage {
  return withSocket((t) => {
    let reply: NlMessage | undefined;
    sendAndCollect(t, b, op, (m) => {
      if (m.type === NLMSG_ERROR) {
        const err = errorFromAck(m, op);
        if (err) throw err;
        return reply !== undefined;
      }
      reply = m;
      return true;
    });
    if (!reply) throw new NetlinkError(EIO, op, { reason: 'the kernel sent no reply' });
    return reply;
  }, op);
}

/** Dump attempts before an interrupted dump (NLM_F_DUMP_INTR) is reported as an error. */
export const DUMP_ATTEMPTS = 5;

/**
 * Sends a dump request (built with NLM_F_DUMP) and returns every reply message. When the kernel marks the dump
 * as interrupted (the table changed while it was being read) the dump is repeated, up to DUMP_ATTEMPTS times,
 * then an EINTR NetlinkError is thrown.
 */
export function rtDump(b: NlBuilder, op: string, attempts = DUMP_ATTEMPTS): NlMessage[] {
  return withSocket((t) => {
    for (let attempt = 1; ; attempt++) {
      const out: NlMessage[] = [];
      let interrupted = false;
      sendAndCollect(t, b, op, (m) => {
        if (m.flags & NLM_F_DUMP_INTR) interrupted = true;
        if (m.type === NLMSG_DONE) {
          if (m.payload.length >= 4) {
            const code = m.payload.readInt32LE(0);
            if (code < 0) throw new NetlinkError(-code, op);
          }
          return true;
        }
        if (m.type === NLMSG_ERROR) {
          const err = errorFromAck(m, op);
          if (err) throw err;
          return true;
        }
        out.push(m);
        return false;
      });
      if (!interrupted) return out;
      if (attempt >= attempts)
        throw new NetlinkError(EINTR, op, {
          reason: `dump interrupted ${attempts} times in a row (NLM_F_DUMP_INTR: the kernel state kept changing); giving up`,
        });
    }
  }, op);
}
