/**
 * The plugin ↔ daemon protocol (cnikit's own; not the reference's Go net/rpc + gob): newline-delimited JSON over the
 * daemon's Unix stream socket, one request per connection.
 *
 *   client → daemon   {"cnikitDhcp":1,"method":"allocate"|"release"|"check"|"gc"|"status"|"ping","args":{…}}\n
 *   daemon → client   {"cnikitDhcp":1,"accepted":true}\n                      at once, before any DHCP traffic
 *                     {"cnikitDhcp":1,"ok":true,"result":…}\n                  when done, or
 *                     {"cnikitDhcp":1,"ok":false,"error":{"code","msg","details"}}\n
 *
 * Meeting the other implementation fails at once: the reference daemon (Go net/http) answers the JSON line with an
 * `HTTP/1.1 400` response, which the client recognises; the reference plugin opens with `CONNECT /_goRPC_ HTTP/1.0`,
 * which the daemon answers with an HTTP error status naming the mismatch (Go's client prints it:
 * `unexpected HTTP response: 400 …`) before closing.
 */
import net from 'node:net';
import { CniError, ErrorCode } from '@cnikit/skel';

export const PROTOCOL_VERSION = 1;
export const METHODS = ['allocate', 'release', 'check', 'gc', 'status', 'ping'] as const;
export type Method = (typeof METHODS)[number];

/** How long a client waits for the daemon to accept a request (the daemon answers before any DHCP traffic). */
export const ACCEPT_TIMEOUT_MS = 15_000;
/** Longest request line the daemon reads (a network config with its prevResult). */
export const MAX_LINE = 1 << 20;

export const GO_RPC_REFUSAL =
  "HTTP/1.0 400 cnikit dhcp daemon: this socket speaks cnikit's JSON protocol, not Go net/rpc; use cnikit's dhcp plugin with it\n\n";

export interface DaemonError {
  code: number;
  msg: string;
  details?: string;
}

export class DaemonUnreachable extends CniError {}

/** Splits a stream into lines (at most MAX_LINE bytes each). */
export class LineReader {
  #buf = '';
  push(chunk: string): string[] {
    this.#buf += chunk;
    const lines = this.#buf.split('\n');
    this.#buf = lines.pop() ?? '';
    if (this.#buf.length > MAX_LINE) throw new Error('line too long');
    return lines;
  }
  get pending(): string {
    return this.#buf;
  }
}

/** Sends one request to the daemon at `socketPath` and resolves to its result. */
export function callDaemon(
  socketPath: string,
  method: Method,
  args: unknown,
  opts: { acceptTimeoutMs?: number } = {},
): Promise<unknown> {
  const acceptTimeout = opts.acceptTimeoutMs ?? ACCEPT_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path: socketPath });
    const reader = new LineReader();
    let accepted = false;
    let settled = false;
    let received = '';
    const finish = (err: Error | undefined, value?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    const timer = setTimeout(() => {
      finish(
        new CniError(
          ErrorCode.Internal,
          `error dialing DHCP daemon: ${socketPath} did not answer within ${acceptTimeout / 1000}s: not a cnikit dhcp daemon?`,
        ),
      );
    }, acceptTimeout);
    sock.setEncoding('utf8');
    sock.on('connect', () => {
      sock.write(`${JSON.stringify({ cnikitDhcp: PROTOCOL_VERSION, method, args })}\n`);
    });
    sock.on('error', (err: NodeJS.ErrnoException) => {
      finish(
        new DaemonUnreachable(
          ErrorCode.Internal,
          `error dialing DHCP daemon: dial unix ${socketPath}: ${err.code === 'ENOENT' ? 'connect: no such file or directory' : err.code === 'ECONNREFUSED' ? 'connect: connection refused' : err.message}`,
        ),
      );
    });
    sock.on('data', (chunk: string) => {
      if (!accepted && received.length < 64) received += chunk;
      if (!accepted && /^HTTP\/\d/.test(received)) {
        const status = received.split(/\r?\n/)[0] ?? '';
        finish(
          new CniError(
            ErrorCode.Internal,
            `error dialing DHCP daemon: ${socketPath} answered with HTTP (${status.trim()}): it is the reference (Go net/rpc) dhcp daemon, which cnikit's dhcp plugin cannot talk to; run cnikit's \`dhcp daemon\` on this socket instead`,
          ),
        );
        return;
      }
      let lines: string[];
      try {
        lines = reader.push(chunk);
      } catch (err) {
        finish(err as Error);
        return;
      }
      for (const line of lines) {
        let msg: Record<string, unknown>;
        try {
          msg = JSON.parse(line);
          if (msg?.cnikitDhcp !== PROTOCOL_VERSION) throw new Error('protocol version');
        } catch {
          finish(
            new CniError(
              ErrorCode.Internal,
              `error dialing DHCP daemon: ${socketPath} does not speak cnikit's dhcp protocol v${PROTOCOL_VERSION} (got ${JSON.stringify(line.slice(0, 60))})`,
            ),
          );
          return;
        }
        if (msg.accepted === true) {
          accepted = true;
          clearTimeout(timer);
          continue;
        }
        if (msg.ok === true) return finish(undefined, msg.result);
        const e = (msg.error ?? {}) as DaemonError;
        return finish(new CniError(e.code ?? ErrorCode.Internal, e.msg ?? 'daemon error', e.details ?? ''));
      }
    });
    sock.on('end', () => {
      if (!/^HTTP\/\d/.test(received))
        finish(
          new CniError(ErrorCode.Internal, `error calling ${method}: the DHCP daemon closed the connection`),
        );
    });
  });
}
