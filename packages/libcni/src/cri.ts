/**
 * A minimal CRI client: the RuntimeService's Version and ListPodSandbox over gRPC on the runtime's Unix socket, with
 * node:http2 and a hand-written protobuf codec for just those messages (the shipped executable carries no gRPC
 * library). runtime.v1 first; a runtime that answers UNIMPLEMENTED (containerd < 1.5 knows only v1alpha2) is asked
 * again with runtime.v1alpha2, whose messages have the same field numbers.
 *
 * Wire format: each gRPC message is a 5-byte prefix (0 = not compressed, 4-byte big-endian length) and the protobuf
 * bytes; the call's outcome is the `grpc-status` trailer (or header, for a trailers-only answer).
 */
import { connect } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { LibcniError } from './errors.ts';

export const CRI_SERVICES = ['runtime.v1.RuntimeService', 'runtime.v1alpha2.RuntimeService'] as const;
const GRPC_UNIMPLEMENTED = 12;

export type SandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';

export interface CriSandbox {
  id: string;
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
  state: SandboxState;
}

export interface CriVersion {
  version: string;
  runtimeName: string;
  runtimeVersion: string;
  runtimeApiVersion: string;
}

/** A failed CRI call: the socket cannot be reached, the runtime answered a gRPC error, or the answer is malformed. */
export class CriError extends LibcniError {
  constructor(
    message: string,
    readonly grpcStatus?: number,
  ) {
    super(message);
    this.name = 'CriError';
  }
}

// ---- protobuf: varints, length-delimited fields (strings, messages) and varint fields; nothing else is needed

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** Encode a message of string fields (field number → value); empty strings are left out, as proto3 does. */
export function encodeStrings(fields: Record<number, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [no, value] of Object.entries(fields)) {
    if (value === '') continue;
    const bytes = Buffer.from(value, 'utf8');
    parts.push(Buffer.from([...varint((Number(no) << 3) | 2), ...varint(bytes.length)]), bytes);
  }
  return Buffer.concat(parts);
}

/** One decoded field: a varint (as a number: CRI's enums and counters fit) or a length-delimited byte string. */
export type Field = { no: number; varint: number } | { no: number; bytes: Buffer };

/** Split a protobuf message into its fields (unknown wire types 1 and 5 are skipped by size; groups refused). */
export function decodeFields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let pos = 0;
  const readVarint = (): number => {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= buf.length) throw new CriError('protobuf: truncated varint');
      const b = buf[pos++]!;
      result += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) return result;
      mul *= 128;
    }
    throw new CriError('protobuf: varint too long');
  };
  while (pos < buf.length) {
    const key = readVarint();
    const no = Math.floor(key / 8);
    const wire = key & 7;
    if (no === 0) throw new CriError('protobuf: field number 0');
    if (wire === 0) out.push({ no, varint: readVarint() });
    else if (wire === 2) {
      const len = readVarint();
      if (pos + len > buf.length) throw new CriError('protobuf: truncated field');
      out.push({ no, bytes: buf.subarray(pos, pos + len) });
      pos += len;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new CriError(`protobuf: unsupported wire type ${wire}`);
    if (pos > buf.length) throw new CriError('protobuf: truncated field');
  }
  return out;
}

const str = (f: Field | undefined): string => (f && 'bytes' in f ? f.bytes.toString('utf8') : '');
const num = (f: Field | undefined): number => (f && 'varint' in f ? f.varint : 0);
const last = (fields: Field[], no: number): Field | undefined => fields.filter((f) => f.no === no).pop();

/** VersionResponse: version 1, runtime_name 2, runtime_version 3, runtime_api_version 4. */
export function decodeVersionResponse(buf: Buffer): CriVersion {
  const f = decodeFields(buf);
  return {
    version: str(last(f, 1)),
    runtimeName: str(last(f, 2)),
    runtimeVersion: str(last(f, 3)),
    runtimeApiVersion: str(last(f, 4)),
  };
}

/**
 * ListPodSandboxResponse: items 1 (repeated PodSandbox: id 1, metadata 2 {name 1, uid 2, namespace 3, attempt 4},
 * state 3 (0 READY, 1 NOTREADY)).
 */
export function decodeListPodSandboxResponse(buf: Buffer): CriSandbox[] {
  const out: CriSandbox[] = [];
  for (const item of decodeFields(buf)) {
    if (item.no !== 1 || !('bytes' in item)) continue;
    const f = decodeFields(item.bytes);
    const meta = last(f, 2);
    const m = meta && 'bytes' in meta ? decodeFields(meta.bytes) : [];
    const id = str(last(f, 1));
    if (id === '') throw new CriError('ListPodSandbox: a sandbox without an id');
    out.push({
      id,
      name: str(last(m, 1)),
      uid: str(last(m, 2)),
      namespace: str(last(m, 3)),
      attempt: num(last(m, 4)),
      state: num(last(f, 3)) === 0 ? 'SANDBOX_READY' : 'SANDBOX_NOTREADY',
    });
  }
  return out;
}

/** A gRPC message frame. */
export function grpcFrame(message: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** The single message of a unary answer's body. */
export function grpcUnframe(body: Buffer): Buffer {
  if (body.length < 5) throw new CriError(`gRPC: answer of ${body.length} bytes, no message`);
  if (body[0] !== 0) throw new CriError('gRPC: compressed answer (no compression was offered)');
  const len = body.readUInt32BE(1);
  if (body.length !== 5 + len)
    throw new CriError(`gRPC: message of ${len} bytes in a body of ${body.length}`);
  return body.subarray(5);
}

/** One unary call on `socket`; rejects with CriError (with the gRPC status when the runtime answered one). */
export function grpcCall(socket: string, path: string, request: Buffer, timeoutMs = 10_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let done = false;
    const session = connect('http://localhost', { createConnection: () => netConnect(socket) });
    const finish = (err: Error | undefined, value?: Buffer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session.destroy();
      if (err) reject(err);
      else resolve(value as Buffer);
    };
    const timer = setTimeout(
      () => finish(new CriError(`CRI ${path} on ${socket}: no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    session.on('error', (e: NodeJS.ErrnoException) =>
      finish(
        e.syscall === 'connect'
          ? new CriError(`cannot reach the CRI runtime at ${socket}: ${e.code ?? ''} ${e.message}`.trim())
          : new CriError(`CRI ${path} on ${socket}: ${e.message}`),
      ),
    );
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': `${timeoutMs}m`,
    });
    const chunks: Buffer[] = [];
    let headers: Record<string, unknown> = {};
    req.on('response', (h) => {
      headers = h;
    });
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('error', (e: Error & { cause?: NodeJS.ErrnoException }) => {
      const c = e.cause;
      if (c?.syscall === 'connect')
        finish(
          new CriError(`cannot reach the CRI runtime at ${socket}: ${c.code ?? ''} ${c.message}`.trim()),
        );
      else finish(new CriError(`CRI ${path} on ${socket}: ${e.message}`));
    });
    const settle = (trailers: Record<string, unknown>) => {
      const httpStatus = Number(headers[':status'] ?? 0);
      const statusText = trailers['grpc-status'] ?? headers['grpc-status'];
      if (statusText === undefined) {
        finish(
          new CriError(
            `CRI ${path} on ${socket}: HTTP ${httpStatus} without a gRPC status (not a CRI socket?)`,
          ),
        );
        return;
      }
      const status = Number(statusText);
      if (status !== 0) {
        const raw = String(trailers['grpc-message'] ?? headers['grpc-message'] ?? '');
        let message = raw;
        try {
          message = decodeURIComponent(raw);
        } catch {
          // keep it percent-encoded
        }
        finish(new CriError(`CRI ${path} on ${socket}: gRPC status ${status}: ${message}`, status));
        return;
      }
      try {
        finish(undefined, grpcUnframe(Buffer.concat(chunks)));
      } catch (e) {
        finish(e as Error);
      }
    };
    let trailers: Record<string, unknown> | undefined;
    req.on('trailers', (t) => {
      trailers = t;
    });
    req.on('end', () => settle(trailers ?? {}));
    req.on('close', () => {
      if (!done) settle(trailers ?? {});
    });
    req.end(grpcFrame(request));
  });
}

/** Call `method` on runtime.v1, falling back to runtime.v1alpha2 when v1 is UNIMPLEMENTED. */
async function criCall(socket: string, method: string, request: Buffer, timeoutMs?: number) {
  let lastErr: unknown;
  for (const service of CRI_SERVICES) {
    try {
      return { service, answer: await grpcCall(socket, `/${service}/${method}`, request, timeoutMs) };
    } catch (e) {
      if (!(e instanceof CriError) || e.grpcStatus !== GRPC_UNIMPLEMENTED) throw e;
      lastErr = e;
    }
  }
  throw lastErr;
}

/** The runtime's Version (VersionRequest.version = the API version asked for). */
export async function criVersion(
  socket: string,
  timeoutMs?: number,
): Promise<CriVersion & { service: string }> {
  const { service, answer } = await criCall(socket, 'Version', encodeStrings({ 1: 'v1' }), timeoutMs);
  return { service, ...decodeVersionResponse(answer) };
}

/** Every pod sandbox the runtime knows, READY and NOTREADY (ListPodSandbox without a filter). */
export async function listPodSandboxes(
  socket: string,
  timeoutMs?: number,
): Promise<{ service: string; sandboxes: CriSandbox[] }> {
  const { service, answer } = await criCall(socket, 'ListPodSandbox', Buffer.alloc(0), timeoutMs);
  return { service, sandboxes: decodeListPodSandboxResponse(answer) };
}
