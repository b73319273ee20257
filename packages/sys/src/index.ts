// @cnikit/sys — the only native code: setns, flock, gettid and a synchronous netlink transport.
// Everything here is synchronous and acts on the calling thread. Nothing is loaded at import time.
import { SysError } from './errors.ts';
import { loadNative, type PeerCred } from './native.ts';

export { errnoMessage, errnoName, isSysError, SysError } from './errors.ts';
export {
  ADDON_FILE,
  loadNative,
  type NativeAddon,
  nativeCandidates,
  type PeerCred,
  tryLoadNative,
} from './native.ts';
export { StateDir, type StateDirOptions } from './statedir.ts';

/** clone(2) flag of a network namespace, as returned by nsType(). */
export const CLONE_NEWNET = 0x40000000;
/** statfs f_type of the nsfs filesystem (bind-mounted namespaces, /proc/<pid>/ns/* targets). */
export const NSFS_MAGIC = 0x6e736673;
/** statfs f_type of procfs. */
export const PROC_SUPER_MAGIC = 0x9fa0;

/** Netlink protocol numbers (socket(AF_NETLINK, SOCK_RAW, protocol)). */
export const NETLINK_ROUTE = 0;
export const NETLINK_NETFILTER = 12;
export const NETLINK_GENERIC = 16;
/** SOL_NETLINK socket options for NetlinkSocket.setOption. */
export const NETLINK_ADD_MEMBERSHIP = 1;
export const NETLINK_DROP_MEMBERSHIP = 2;
export const NETLINK_CAP_ACK = 10;
export const NETLINK_EXT_ACK = 11;
export const NETLINK_GET_STRICT_CHK = 12;

function call<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw SysError.fromNative(err);
  }
}

/** setns(fd, CLONE_NEWNET): moves the calling thread into the network namespace open on `fd`. */
export function setns(fd: number): void {
  const n = loadNative();
  call(() => n.setns(fd, CLONE_NEWNET));
}

/** The namespace type of an nsfs file descriptor (ioctl NS_GET_NSTYPE), e.g. CLONE_NEWNET. Throws ENOTTY/EINVAL for other files. */
export function nsType(fd: number): number {
  const n = loadNative();
  return call(() => n.nsType(fd));
}

/** fstatfs(fd).f_type — the filesystem magic number of an open file. */
export function fsMagic(fd: number): number {
  const n = loadNative();
  return call(() => n.fsMagic(fd));
}

const FLOCK_OPS = { sh: 0, ex: 1, un: 2 } as const;

/**
 * flock(2) on `fd`: 'sh' shared, 'ex' exclusive, 'un' unlock. Blocks (retrying on EINTR) unless `nonBlocking`,
 * in which case it returns false when another open file description holds a conflicting lock.
 */
export function flock(fd: number, op: 'sh' | 'ex' | 'un', nonBlocking = false): boolean {
  const code = FLOCK_OPS[op];
  if (code === undefined)
    throw new TypeError(`flock: unknown operation ${JSON.stringify(op)} (expected sh, ex or un)`);
  const n = loadNative();
  return call(() => n.flock(fd, code, nonBlocking));
}

/** The kernel thread id of the calling thread (equals process.pid on the main thread). */
export function gettid(): number {
  return loadNative().gettid();
}

/** close(2) a raw descriptor (EINTR is treated as closed, as Linux always releases it). */
export function closeFd(fd: number): void {
  const n = loadNative();
  call(() => n.closeFd(fd));
}

export interface NetlinkSocketOptions {
  /** Receive buffer size in bytes (SO_RCVBUFFORCE, falling back to SO_RCVBUF). Default 4 MiB. */
  receiveBufferSize?: number;
}

/**
 * A synchronous AF_NETLINK socket. It belongs to the network namespace the calling thread is in when `open`
 * runs (open it inside withNetns to talk to another namespace; it can be used from anywhere afterwards).
 */
export class NetlinkSocket {
  readonly protocol: number;
  #fd: number;
  readonly portId: number;

  private constructor(protocol: number, fd: number, portId: number) {
    this.protocol = protocol;
    this.#fd = fd;
    this.portId = portId;
  }

  static open(protocol: number, options: NetlinkSocketOptions = {}): NetlinkSocket {
    const n = loadNative();
    const [fd, portId] = call(() => n.nlOpen(protocol, options.receiveBufferSize ?? 4 << 20));
    return new NetlinkSocket(protocol, fd, portId);
  }

  /** The descriptor, or -1 once closed. */
  get fd(): number {
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  #live(): number {
    if (this.#fd < 0) throw new SysError(9, 'netlink', 'netlink socket is closed');
    return this.#fd;
  }

  /** Sends one datagram (one or more netlink messages) to the kernel, or to another socket's `portId`. */
  send(msg: Uint8Array, portId = 0): void {
    const fd = this.#live();
    const n = loadNative();
    call(() => n.nlSend(fd, msg, portId));
  }

  /**
   * Receives one datagram (it may hold several netlink messages), waiting at most `timeoutMs`
   * (negative: forever). Returns null on timeout. Never truncates: large datagrams get a large buffer.
   */
  recv(timeoutMs: number): Buffer | null {
    const fd = this.#live();
    const n = loadNative();
    return call(() => n.nlRecv(fd, timeoutMs));
  }

  /** setsockopt(SOL_NETLINK, option, value), e.g. NETLINK_EXT_ACK 1, NETLINK_ADD_MEMBERSHIP group. */
  setOption(option: number, value: number): void {
    const fd = this.#live();
    const n = loadNative();
    call(() => n.nlSetOpt(fd, option, value));
  }

  /** Closes the socket; closing twice is a no-op. */
  close(): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    closeFd(fd);
  }

  /**
   * Closes the socket on a background thread (the descriptor is this object's no more): for a release that may wait
   * in the kernel, such as the first one after an nf_tables commit (an RCU grace period). `afterGracePeriod`: the
   * thread first waits for a grace period of its own (a long-lived process; one about to exit would wait for it at
   * its exit). Closing twice is a no-op.
   */
  closeInBackground(afterGracePeriod = false): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    const n = loadNative();
    if (n.closeFdLater) call(() => n.closeFdLater?.(fd, afterGracePeriod));
    else closeFd(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// Unix stream sockets with peer credentials and descriptor passing (the warm-mode service, @cnikit/warm).
// Every descriptor is created close-on-exec; accepted and connected sockets are non-blocking, and every wait
// has a timeout (negative: forever).

/** socket(AF_UNIX, SOCK_STREAM) bound to `path` and listening. The path must not exist (unlink a stale one first). */
export function listenUnix(path: string, backlog = 128): number {
  const n = loadNative();
  return call(() => n.listenUnix(path, backlog));
}

/**
 * Waits up to `timeoutMs` for a connection on listening socket `fd`; returns the accepted descriptor with the
 * peer's credentials as the kernel recorded them at connect time (SO_PEERCRED), or null on timeout.
 */
export function acceptUnix(fd: number, timeoutMs: number): (PeerCred & { fd: number }) | null {
  const n = loadNative();
  return call(() => n.acceptUnix(fd, timeoutMs));
}

/** Connects to the Unix stream socket at `path`; the returned descriptor is non-blocking. */
export function connectUnix(path: string): number {
  const n = loadNative();
  return call(() => n.connectUnix(path));
}

/** SO_PEERCRED of a connected Unix socket. */
export function peerCred(fd: number): PeerCred {
  const n = loadNative();
  return call(() => n.peerCred(fd));
}

/**
 * One recvmsg(2) of at most `maxLen` bytes, waiting up to `timeoutMs`; null on timeout, empty `data` at end of
 * stream. Descriptors passed with SCM_RIGHTS come back in `fds` (close-on-exec; the caller owns and closes them).
 */
export function recvMsg(
  fd: number,
  maxLen: number,
  timeoutMs: number,
): { data: Buffer; fds: number[] } | null {
  const n = loadNative();
  return call(() => n.recvMsg(fd, maxLen, timeoutMs));
}

/**
 * Sends every byte of `data` (MSG_NOSIGNAL: a gone peer is EPIPE, never a signal), waiting for buffer space at
 * most `timeoutMs` in total (ETIMEDOUT after). `fds` travel with the first sendmsg as SCM_RIGHTS.
 */
export function sendAll(fd: number, data: Uint8Array, timeoutMs: number, fds: number[] = []): void {
  const n = loadNative();
  call(() => n.sendAll(fd, data, timeoutMs, fds));
}

/** Sets (or clears) close-on-exec on `fd`. */
export function setCloexec(fd: number, on = true): void {
  const n = loadNative();
  call(() => n.setCloexec(fd, on));
}

/**
 * A watchdog thread for a main thread that may get stuck in synchronous code: `watchdogSet` stores what to exec
 * (and starts the thread, once), `watchdogArm(ms)` starts a countdown, `watchdogDisarm()` stops it. When a countdown
 * runs out, the watchdog thread replaces the process image like `execReplace(path, argv, envp, keepFd)` (same pid;
 * `keepFd` becomes descriptor 3); if the exec fails the process exits with status 70.
 */
export function watchdogSet(path: string, argv: string[], envp: string[], keepFd = -1): void {
  const n = loadNative();
  call(() => n.watchdogSet(path, argv, envp, keepFd));
}

export function watchdogArm(timeoutMs: number): void {
  const n = loadNative();
  call(() => n.watchdogArm(Math.max(0, Math.min(2 ** 31 - 1, Math.round(timeoutMs)))));
}

export function watchdogDisarm(): void {
  const n = loadNative();
  call(() => n.watchdogDisarm());
}

/**
 * From now on a SIGTERM or SIGINT (still passed on to the handlers installed before, e.g. `process.on`) makes a
 * watchdog exec add `entry` ("NAME=value") to its environment: a stop signal that a main thread stuck in synchronous
 * code never saw survives the exec. Call it after the JavaScript handlers are installed.
 */
export function watchdogOnStopSignal(entry: string): void {
  const n = loadNative();
  call(() => n.watchdogOnStopSignal(entry));
}

/**
 * Replaces the process image: execve(path, argv, envp), with `keepFd` (if >= 0) moved to descriptor 3 and left
 * open across the exec (the systemd LISTEN_FDS convention). Returns only by throwing.
 */
export function execReplace(path: string, argv: string[], envp: string[], keepFd = -1): never {
  const n = loadNative();
  return call(() => n.execReplace(path, argv, envp, keepFd));
}

/**
 * A UDP/IPv4 socket for a DHCP client: created in the network namespace the calling thread is in (call it inside
 * withNetns for a container's namespace; it stays there afterwards), with SO_REUSEADDR, SO_BROADCAST and
 * SO_BINDTODEVICE `ifName` (so a limited broadcast leaves through that interface even when it has no address and
 * the namespace no route), bound to 0.0.0.0:`port`, non-blocking and close-on-exec. Hand it to node:dgram with
 * `socket.bind({ fd })`, which then owns it. With `chaddr` (6 bytes), a socket filter keeps only datagrams whose
 * BOOTP client hardware address is `chaddr`: replies broadcast to the other clients of a segment never reach it.
 */
export function udpOpenDevice(ifName: string, port: number, chaddr?: Uint8Array): number {
  const n = loadNative();
  return call(() => n.udpOpenDevice(ifName, port, chaddr));
}

/**
 * A new, anonymous network namespace (unshare(CLONE_NEWNET) on the calling thread, which is switched back at once):
 * returns an fd open on it; the namespace lives until the fd is closed and nothing else holds it. A temporary
 * place to rename and prepare a device without clashing with names in the host or the container.
 */
export function netnsNew(): number {
  const n = loadNative();
  return call(() => n.netnsNew());
}

/** IFF_* flags of TUNSETIFF (linux/if_tun.h). */
export const IFF_TUN = 0x0001;
export const IFF_TAP = 0x0002;
export const IFF_NO_PI = 0x1000;
export const IFF_VNET_HDR = 0x4000;
export const IFF_MULTI_QUEUE = 0x0100;

/**
 * Creates a persistent tun/tap device `name` in the calling thread's network namespace (open /dev/net/tun,
 * TUNSETIFF with `flags`, TUNSETOWNER/TUNSETGROUP when ≥ 0, TUNSETPERSIST). Returns the kernel's name for it
 * ('' asks the kernel to pick one). EEXIST/EBUSY when the name is taken.
 */
export function tunCreate(name: string, flags: number, owner = -1, group = -1): string {
  const n = loadNative();
  return call(() => n.tunCreate(name, flags, owner, group));
}
