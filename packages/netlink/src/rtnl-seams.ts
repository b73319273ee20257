// Test seams of rtnl.ts: a replacement socket factory (fake kernel transports) and the request timeout.
// Deliberately NOT exported from the package index, so no dependency of @cnikit/netlink can swap the kernel
// transport; tests (and benchmarks) import this file directly.

/** What rtnl needs from a socket (NetlinkSocket from @cnikit/sys; tests inject fakes). */
export interface NetlinkTransport {
  readonly portId: number;
  send(msg: Uint8Array): void;
  /** One datagram, or null on timeout. */
  recv(timeoutMs: number): Buffer | null;
  close(): void;
}

export type TransportFactory = () => NetlinkTransport;

/** Read by rtnl.ts on every request: `factory` undefined = real NETLINK_ROUTE sockets. */
export const rtnlSeams: { factory: TransportFactory | undefined; timeoutMs: number } = {
  factory: undefined,
  timeoutMs: 10_000,
};

/** Replaces how sockets are opened; returns the previous override. No argument restores real sockets. */
export function setTransportFactory(f?: TransportFactory): TransportFactory | undefined {
  const prev = rtnlSeams.factory;
  rtnlSeams.factory = f;
  return prev;
}

/** How long one request waits for the kernel's answer (default 10 s); returns the previous value. */
export function setRequestTimeout(ms: number): number {
  const prev = rtnlSeams.timeoutMs;
  rtnlSeams.timeoutMs = ms;
  return prev;
}
