/** A framed connection over a connected Unix stream socket (synchronous reads and writes with deadlines). */
import { closeFd, recvMsg, sendAll } from '@cnikit/sys';
import { FrameReader, HELLO_LENGTH, ProtocolError } from './protocol.ts';

export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

export class Conn {
  readonly fd: number;
  #reader = new FrameReader();
  #frames: Array<{ type: number; body: Buffer }> = [];
  /** Descriptors received with SCM_RIGHTS and not yet taken. */
  #fds: number[] = [];
  #closed = false;

  constructor(fd: number) {
    this.fd = fd;
  }

  send(data: Uint8Array, timeoutMs: number, fds: number[] = []): void {
    sendAll(this.fd, data, timeoutMs, fds);
  }

  /** Reads exactly `n` raw bytes (the hello), before any frame. */
  readRaw(n: number, deadline: number): Buffer {
    const chunks: Buffer[] = [];
    let have = 0;
    while (have < n) {
      const left = Math.max(0, Math.ceil(deadline - performance.now()));
      const r = recvMsg(this.fd, n - have, left);
      if (r === null) throw new TimeoutError(`no data within the deadline (${have}/${n} bytes)`);
      this.#fds.push(...r.fds);
      if (r.data.length === 0) throw new ProtocolError(`connection closed (${have}/${n} bytes)`);
      chunks.push(r.data);
      have += r.data.length;
    }
    return Buffer.concat(chunks);
  }

  readHello(deadline: number): Buffer {
    return this.readRaw(HELLO_LENGTH, deadline);
  }

  /** The next frame; throws TimeoutError after `deadline` (performance.now() ms), ProtocolError at end of stream. */
  readFrame(deadline: number): { type: number; body: Buffer } {
    for (;;) {
      const f = this.#frames.shift();
      if (f) return f;
      const left = Math.max(0, Math.ceil(deadline - performance.now()));
      const r = recvMsg(this.fd, 256 << 10, left);
      if (r === null) throw new TimeoutError('no frame within the deadline');
      this.#fds.push(...r.fds);
      if (r.data.length === 0) {
        throw new ProtocolError(
          this.#reader.pending ? 'connection closed in the middle of a frame' : 'connection closed',
        );
      }
      this.#frames.push(...this.#reader.push(r.data));
    }
  }

  /**
   * readFrame without blocking the thread: polls every `pollMs` and lets the event loop run between (the service
   * while calls run beside each other: their I/O goes on while this client is slow to send).
   */
  async readFrameAsync(deadline: number, pollMs = 1): Promise<{ type: number; body: Buffer }> {
    for (;;) {
      const f = this.#frames.shift();
      if (f) return f;
      const r = recvMsg(this.fd, 256 << 10, 0);
      if (r === null) {
        if (performance.now() >= deadline) throw new TimeoutError('no frame within the deadline');
        await new Promise((resolve) => setTimeout(resolve, pollMs));
        continue;
      }
      this.#fds.push(...r.fds);
      if (r.data.length === 0) {
        throw new ProtocolError(
          this.#reader.pending ? 'connection closed in the middle of a frame' : 'connection closed',
        );
      }
      this.#frames.push(...this.#reader.push(r.data));
    }
  }

  /** Takes ownership of the descriptors received so far. */
  takeFds(): number[] {
    const out = this.#fds;
    this.#fds = [];
    return out;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const fd of this.takeFds()) closeFd(fd);
    closeFd(this.fd);
  }
}
