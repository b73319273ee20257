/**
 * The warm-mode wire protocol between cnikit-client (packages/warm/client/cnikit-client.c) and `cnikit serve`.
 * All integers are unsigned 32-bit little-endian unless noted. Specified in packages/warm/README.md.
 *
 *   hello   (service → client, right after accept, 16 bytes):
 *           "CNKW" | u8 version (1) | u8 0 | u16 0 | u32 service pid | u32 per-request deadline in ms
 *   frame   u8 type | 3 bytes 0 | u32 body length | body
 *     1 REQUEST    (client → service; carries the client's /proc/self/ns/net as SCM_RIGHTS):
 *                  u32 flags (bit 0: the client's stdout is closed) | u32 n | n bytes argv0 basename |
 *                  u32 count | count × (u32 n | n bytes "NAME=value")
 *     2 NEED_STDIN (service → client, empty): the dispatcher needs the configuration
 *     3 STDIN      (client → service): u32 errno of reading stdin (0: read to end of file) | the bytes
 *     4 REPLY      (service → client): i32 exit code | u32 n | n bytes stdout | u32 m | m bytes stderr
 */
export const MAGIC = 'CNKW';
export const PROTOCOL_VERSION = 1;
export const HELLO_LENGTH = 16;
export const FRAME_HEADER = 8;
export const MAX_FRAME = 64 << 20;

export const T_REQUEST = 1;
export const T_NEED_STDIN = 2;
export const T_STDIN = 3;
export const T_REPLY = 4;

export const FLAG_STDOUT_CLOSED = 1;

export const DEFAULT_SOCKET = '/run/cnikit/cnikit.sock';
/** Default per-request deadline of the service (ms). */
export const DEFAULT_DEADLINE_MS = 120_000;

/** Which environment variables a client forwards (CNI_*, CNIKIT_*, TRACEPARENT, TRACESTATE). */
export function isForwarded(name: string): boolean {
  return (
    name.startsWith('CNI_') || name.startsWith('CNIKIT_') || name === 'TRACEPARENT' || name === 'TRACESTATE'
  );
}

export class ProtocolError extends Error {
  override name = 'ProtocolError';
}

export interface Hello {
  version: number;
  pid: number;
  deadlineMs: number;
}

export function encodeHello(h: Hello): Buffer {
  const b = Buffer.alloc(HELLO_LENGTH);
  b.write(MAGIC, 0, 'latin1');
  b[4] = h.version;
  b.writeUInt32LE(h.pid, 8);
  b.writeUInt32LE(h.deadlineMs, 12);
  return b;
}

/** Parses a hello; throws ProtocolError on a wrong magic or length (the version is returned, not checked). */
export function decodeHello(b: Uint8Array): Hello {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length !== HELLO_LENGTH || buf.toString('latin1', 0, 4) !== MAGIC) {
    throw new ProtocolError('not a cnikit service (bad magic)');
  }
  return { version: buf[4] as number, pid: buf.readUInt32LE(8), deadlineMs: buf.readUInt32LE(12) };
}

export function encodeFrame(type: number, body: Uint8Array = new Uint8Array(0)): Buffer {
  const b = Buffer.alloc(FRAME_HEADER + body.length);
  b[0] = type;
  b.writeUInt32LE(body.length, 4);
  b.set(body, FRAME_HEADER);
  return b;
}

export interface Request {
  flags: number;
  name: string;
  /** The forwarded environment, in the client's order. */
  env: Record<string, string>;
}

export function encodeRequest(r: Request): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number) => {
    const x = Buffer.alloc(4);
    x.writeUInt32LE(v);
    parts.push(x);
  };
  const str = (s: string) => {
    const x = Buffer.from(s, 'utf8');
    u32(x.length);
    parts.push(x);
  };
  u32(r.flags);
  str(r.name);
  const entries = Object.entries(r.env);
  u32(entries.length);
  for (const [k, v] of entries) str(`${k}=${v}`);
  return encodeFrame(T_REQUEST, Buffer.concat(parts));
}

class Reader {
  off = 0;
  constructor(readonly buf: Buffer) {}
  u32(what: string): number {
    if (this.off + 4 > this.buf.length) throw new ProtocolError(`truncated ${what}`);
    const v = this.buf.readUInt32LE(this.off);
    this.off += 4;
    return v;
  }
  bytes(what: string): Buffer {
    const n = this.u32(what);
    if (this.off + n > this.buf.length) throw new ProtocolError(`truncated ${what}`);
    const v = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return v;
  }
  end(what: string): void {
    if (this.off !== this.buf.length)
      throw new ProtocolError(`${this.buf.length - this.off} trailing bytes in ${what}`);
  }
}

export function decodeRequest(body: Buffer): Request {
  const r = new Reader(body);
  const flags = r.u32('request flags');
  const name = r.bytes('plugin name').toString('utf8');
  const count = r.u32('environment count');
  const env: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    const kv = r.bytes('environment entry').toString('utf8');
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new ProtocolError(`malformed environment entry ${JSON.stringify(kv)}`);
    const k = kv.slice(0, eq);
    // only what a client forwards is taken (a PATH or LD_PRELOAD sent by a modified client is ignored)
    if (isForwarded(k)) env[k] = kv.slice(eq + 1);
  }
  r.end('request');
  return { flags, name, env };
}

export function encodeStdin(errno: number, data: Uint8Array = new Uint8Array(0)): Buffer {
  const b = Buffer.alloc(4 + data.length);
  b.writeUInt32LE(errno);
  b.set(data, 4);
  return encodeFrame(T_STDIN, b);
}

export function decodeStdin(body: Buffer): { errno: number; data: Buffer } {
  if (body.length < 4) throw new ProtocolError('truncated stdin frame');
  return { errno: body.readUInt32LE(0), data: body.subarray(4) };
}

export interface Reply {
  code: number;
  stdout: Uint8Array;
  stderr: Uint8Array;
}

export function encodeReply(r: Reply): Buffer {
  const b = Buffer.alloc(12 + r.stdout.length + r.stderr.length);
  b.writeInt32LE(r.code, 0);
  b.writeUInt32LE(r.stdout.length, 4);
  b.set(r.stdout, 8);
  b.writeUInt32LE(r.stderr.length, 8 + r.stdout.length);
  b.set(r.stderr, 12 + r.stdout.length);
  return encodeFrame(T_REPLY, b);
}

export function decodeReply(body: Buffer): Reply {
  const r = new Reader(body);
  if (body.length < 4) throw new ProtocolError('truncated reply');
  const code = body.readInt32LE(0);
  r.off = 4;
  const stdout = r.bytes('reply stdout');
  const stderr = r.bytes('reply stderr');
  r.end('reply');
  return { code, stdout, stderr };
}

/**
 * Accumulates bytes read from a stream socket and yields complete frames. `push` returns the frames completed by
 * the new bytes (a frame larger than MAX_FRAME is a ProtocolError).
 */
export class FrameReader {
  #buf: Buffer = Buffer.alloc(0);

  push(data: Uint8Array): Array<{ type: number; body: Buffer }> {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, data]) : Buffer.from(data);
    const out: Array<{ type: number; body: Buffer }> = [];
    while (this.#buf.length >= FRAME_HEADER) {
      const len = this.#buf.readUInt32LE(4);
      if (len > MAX_FRAME) throw new ProtocolError(`frame of ${len} bytes exceeds the limit of ${MAX_FRAME}`);
      if (this.#buf.length < FRAME_HEADER + len) break;
      out.push({ type: this.#buf[0] as number, body: this.#buf.subarray(FRAME_HEADER, FRAME_HEADER + len) });
      this.#buf = this.#buf.subarray(FRAME_HEADER + len);
    }
    return out;
  }

  /** Bytes received that do not form a complete frame yet. */
  get pending(): number {
    return this.#buf.length;
  }
}

/** The text a CNI error object has on stdout (Go's json.MarshalIndent with 4 spaces, no trailing newline). */
export function cniErrorText(code: number, msg: string, details?: string): string {
  const obj: Record<string, unknown> = { code, msg };
  if (details) obj.details = details;
  return JSON.stringify(obj, null, 4).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
