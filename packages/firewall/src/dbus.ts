/**
 * A minimal pure-TypeScript D-Bus client: a unix socket (node:net), SASL EXTERNAL, `Hello`, then method calls
 * marshalled and unmarshalled here (the wire format of the D-Bus specification, both byte orders, every basic type
 * plus arrays, structs, dict entries and variants in replies). No process is started and no library is bundled:
 * one connection per plugin call, ≈ 1 ms to set up, then one round trip per call (figures in
 * plugins/firewall/README.md). firewalld.ts is its one user.
 *
 * The bus is `DBUS_SYSTEM_BUS_ADDRESS` (default `unix:path=/run/dbus/system_bus_socket`); `unix:path=` and
 * `unix:abstract=` addresses are supported. When no `unix:path=` socket of the address exists, `busMayExist()`
 * says so with one `stat`.
 */
import { existsSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';

export const DEFAULT_SYSTEM_BUS_ADDRESS = 'unix:path=/run/dbus/system_bus_socket';

export const DBUS_NAME = 'org.freedesktop.DBus';
export const DBUS_PATH = '/org/freedesktop/DBus';

export interface DBusOptions {
  /** Bus address (default: `env.DBUS_SYSTEM_BUS_ADDRESS`, else the standard system bus socket). */
  address?: string;
  /** Environment to take DBUS_SYSTEM_BUS_ADDRESS from (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Milliseconds to wait for the connection and for each reply (default 10 s). */
  timeoutMs?: number;
}

/** A D-Bus error reply (`dbusName` such as `org.fedoraproject.FirewallD1.Exception`) or a failure to reach the bus. */
export class DBusError extends Error {
  /** The D-Bus error name, or '' when the bus could not be reached or answered nonsense. */
  readonly dbusName: string;
  /** The error text as godbus prints it: the first string of the error body (else the name). */
  readonly text: string;
  constructor(dbusName: string, text: string) {
    super(text || dbusName);
    this.name = 'DBusError';
    this.dbusName = dbusName;
    this.text = text || dbusName;
  }
}

export function systemBusAddress(opts: DBusOptions = {}): string {
  if (opts.address) return opts.address;
  const env = opts.env ?? process.env;
  return env.DBUS_SYSTEM_BUS_ADDRESS || DEFAULT_SYSTEM_BUS_ADDRESS;
}

function unescapeAddressValue(v: string): string {
  return v.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
}

/** The socket paths of an address (`\0name` for abstract sockets), in order; other transports are skipped. */
export function addressSockets(address: string): string[] {
  const out: string[] = [];
  for (const alt of address.split(';')) {
    const m = /^unix:(.*)$/.exec(alt);
    if (!m) continue;
    const kv = new Map<string, string>();
    for (const p of (m[1] ?? '').split(',')) {
      const i = p.indexOf('=');
      if (i > 0) kv.set(p.slice(0, i), unescapeAddressValue(p.slice(i + 1)));
    }
    const path = kv.get('path');
    const abstract = kv.get('abstract');
    if (path !== undefined) out.push(path);
    else if (abstract !== undefined) out.push(`\0${abstract}`);
  }
  return out;
}

/** False when the address has only `unix:path=` sockets and none of them exists (or nothing usable at all). */
export function busMayExist(address: string): boolean {
  return addressSockets(address).some((s) => s.startsWith('\0') || existsSync(s));
}

// ---------------------------------------------------------------------------------------------
// Wire format

/** Basic types usable as method arguments here. */
export type DBusArg = string | number | boolean | string[];

const ALIGN: Record<string, number> = {
  y: 1,
  b: 4,
  n: 2,
  q: 2,
  i: 4,
  u: 4,
  x: 8,
  t: 8,
  d: 8,
  h: 4,
  s: 4,
  o: 4,
  g: 1,
  a: 4,
  '(': 8,
  '{': 8,
  v: 1,
};

/** Split a signature into its complete types (`sas(ib)` → `s`, `as`, `(ib)`). */
export function splitSignature(sig: string): string[] {
  const out: string[] = [];
  let i = 0;
  const one = (): void => {
    const c = sig[i];
    if (c === undefined) throw new DBusError('', `truncated D-Bus signature ${JSON.stringify(sig)}`);
    i++;
    if (c === 'a') one();
    else if (c === '(' || c === '{') {
      const close = c === '(' ? ')' : '}';
      while (sig[i] !== close) {
        if (i >= sig.length) throw new DBusError('', `unbalanced D-Bus signature ${JSON.stringify(sig)}`);
        one();
      }
      i++;
    } else if (!(c in ALIGN)) throw new DBusError('', `unsupported D-Bus type ${JSON.stringify(c)}`);
  };
  while (i < sig.length) {
    const start = i;
    one();
    out.push(sig.slice(start, i));
  }
  return out;
}

class Writer {
  private buf = Buffer.alloc(256);
  len = 0;

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const b = Buffer.alloc(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(b, 0, 0, this.len);
    this.buf = b;
  }
  align(n: number): void {
    const pad = (n - (this.len % n)) % n;
    this.room(pad);
    this.buf.fill(0, this.len, this.len + pad);
    this.len += pad;
  }
  u8(v: number): void {
    this.room(1);
    this.buf[this.len++] = v;
  }
  u32(v: number): void {
    this.align(4);
    this.room(4);
    this.buf.writeUInt32LE(v >>> 0, this.len);
    this.len += 4;
  }
  i32(v: number): void {
    this.align(4);
    this.room(4);
    this.buf.writeInt32LE(v | 0, this.len);
    this.len += 4;
  }
  setU32(at: number, v: number): void {
    this.buf.writeUInt32LE(v >>> 0, at);
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    if (b.includes(0)) throw new DBusError('', 'D-Bus strings cannot contain NUL');
    this.u32(b.length);
    this.room(b.length + 1);
    b.copy(this.buf, this.len);
    this.len += b.length;
    this.buf[this.len++] = 0;
  }
  signature(s: string): void {
    const b = Buffer.from(s, 'ascii');
    if (b.length > 255) throw new DBusError('', 'D-Bus signature too long');
    this.u8(b.length);
    this.room(b.length + 1);
    b.copy(this.buf, this.len);
    this.len += b.length;
    this.buf[this.len++] = 0;
  }
  /** One value of a complete type (method arguments: basic types and arrays of them). */
  value(type: string, v: unknown): void {
    switch (type[0]) {
      case 's':
      case 'o':
        this.string(String(v));
        return;
      case 'g':
        this.signature(String(v));
        return;
      case 'b':
        this.u32(v ? 1 : 0);
        return;
      case 'y':
        this.u8(Number(v) & 0xff);
        return;
      case 'u':
        this.u32(Number(v));
        return;
      case 'i':
        this.i32(Number(v));
        return;
      case 'a': {
        const elem = type.slice(1);
        this.u32(0);
        const lenAt = this.len - 4;
        this.align(ALIGN[elem[0]!] ?? 1);
        const start = this.len;
        for (const e of v as unknown[]) this.value(elem, e);
        this.setU32(lenAt, this.len - start);
        return;
      }
      default:
        throw new DBusError('', `cannot send D-Bus type ${JSON.stringify(type)}`);
    }
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.len);
  }
}

class Reader {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly le: boolean,
    /** Offset that alignment is relative to (the start of the message). */
    private readonly base = 0,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new DBusError('', 'truncated D-Bus message');
  }
  align(n: number): void {
    this.pos += (n - ((this.pos - this.base) % n)) % n;
  }
  u8(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }
  u32(): number {
    this.align(4);
    this.need(4);
    const v = this.le ? this.buf.readUInt32LE(this.pos) : this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  string(): string {
    const n = this.u32();
    this.need(n + 1);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n + 1;
    return s;
  }
  signature(): string {
    const n = this.u8();
    this.need(n + 1);
    const s = this.buf.toString('ascii', this.pos, this.pos + n);
    this.pos += n + 1;
    return s;
  }
  value(type: string): unknown {
    const c = type[0]!;
    this.align(ALIGN[c] ?? 1);
    switch (c) {
      case 'y':
        return this.u8();
      case 'b':
        return this.u32() !== 0;
      case 'n':
      case 'q': {
        this.need(2);
        const v =
          c === 'n'
            ? this.le
              ? this.buf.readInt16LE(this.pos)
              : this.buf.readInt16BE(this.pos)
            : this.le
              ? this.buf.readUInt16LE(this.pos)
              : this.buf.readUInt16BE(this.pos);
        this.pos += 2;
        return v;
      }
      case 'i':
      case 'h': {
        this.need(4);
        const v = this.le ? this.buf.readInt32LE(this.pos) : this.buf.readInt32BE(this.pos);
        this.pos += 4;
        return v;
      }
      case 'u':
        return this.u32();
      case 'x':
      case 't':
      case 'd': {
        this.need(8);
        const b = this.buf;
        const p = this.pos;
        this.pos += 8;
        if (c === 'd') return this.le ? b.readDoubleLE(p) : b.readDoubleBE(p);
        if (c === 'x') return Number(this.le ? b.readBigInt64LE(p) : b.readBigInt64BE(p));
        return Number(this.le ? b.readBigUInt64LE(p) : b.readBigUInt64BE(p));
      }
      case 's':
      case 'o':
        return this.string();
      case 'g':
        return this.signature();
      case 'v': {
        const sig = this.signature();
        const types = splitSignature(sig);
        if (types.length !== 1) throw new DBusError('', `bad variant signature ${JSON.stringify(sig)}`);
        return this.value(types[0]!);
      }
      case 'a': {
        const n = this.u32();
        const elem = type.slice(1);
        this.align(ALIGN[elem[0]!] ?? 1);
        const end = this.pos + n;
        this.need(n);
        if (elem[0] === '{') {
          const [k, v] = splitSignature(elem.slice(1, -1)) as [string, string];
          const out = new Map<unknown, unknown>();
          while (this.pos < end) {
            this.align(8);
            out.set(this.value(k), this.value(v));
          }
          return out;
        }
        const out: unknown[] = [];
        while (this.pos < end) out.push(this.value(elem));
        return out;
      }
      case '(':
        return splitSignature(type.slice(1, -1)).map((t) => this.value(t));
      default:
        throw new DBusError('', `unsupported D-Bus type ${JSON.stringify(type)}`);
    }
  }
}

const MESSAGE_TYPE = { methodCall: 1, methodReturn: 2, error: 3, signal: 4 } as const;
const FIELD = {
  path: 1,
  interface: 2,
  member: 3,
  errorName: 4,
  replySerial: 5,
  destination: 6,
  sender: 7,
  signature: 8,
};

export interface MethodCall {
  serial: number;
  destination: string;
  path: string;
  interface: string;
  member: string;
  signature?: string;
  args?: readonly DBusArg[];
}

/** Marshal a METHOD_CALL (little endian). */
export function marshalCall(m: MethodCall): Buffer {
  const body = new Writer();
  const types = splitSignature(m.signature ?? '');
  const args = m.args ?? [];
  if (types.length !== args.length)
    throw new DBusError(
      '',
      `signature ${JSON.stringify(m.signature ?? '')} does not match ${args.length} arguments`,
    );
  types.forEach((t, i) => {
    body.value(t, args[i]);
  });
  const w = new Writer();
  w.u8(0x6c); // 'l'
  w.u8(MESSAGE_TYPE.methodCall);
  w.u8(0);
  w.u8(1);
  w.u32(body.len);
  w.u32(m.serial);
  w.u32(0);
  const lenAt = w.len - 4;
  w.align(8);
  const start = w.len;
  const field = (code: number, sig: string, v: string) => {
    w.align(8);
    w.u8(code);
    w.signature(sig);
    w.value(sig, v);
  };
  field(FIELD.path, 'o', m.path);
  field(FIELD.interface, 's', m.interface);
  field(FIELD.member, 's', m.member);
  field(FIELD.destination, 's', m.destination);
  if (m.signature) field(FIELD.signature, 'g', m.signature);
  w.setU32(lenAt, w.len - start);
  w.align(8);
  return Buffer.concat([w.bytes(), body.bytes()]);
}

export interface Message {
  type: number;
  serial: number;
  replySerial?: number;
  errorName?: string;
  signature: string;
  /** The body values (decoded per signature). */
  body: unknown[];
}

/** Length of the first complete message in `buf`, or 0 when more bytes are needed. */
export function messageLength(buf: Buffer): number {
  if (buf.length < 16) return 0;
  const le = buf[0] === 0x6c;
  if (!le && buf[0] !== 0x42) throw new DBusError('', `bad D-Bus byte order mark ${buf[0]}`);
  const bodyLen = le ? buf.readUInt32LE(4) : buf.readUInt32BE(4);
  const fieldsLen = le ? buf.readUInt32LE(12) : buf.readUInt32BE(12);
  const header = 16 + fieldsLen + ((8 - ((16 + fieldsLen) % 8)) % 8);
  const total = header + bodyLen;
  if (total > 128 * 1024 * 1024) throw new DBusError('', 'D-Bus message too long');
  return buf.length >= total ? total : 0;
}

/** Parse one complete message (see messageLength). */
export function parseMessage(buf: Buffer): Message {
  const le = buf[0] === 0x6c;
  const r = new Reader(buf, le);
  r.pos = 1;
  const type = r.u8();
  r.u8();
  r.u8();
  const bodyLen = r.u32();
  const serial = r.u32();
  const fieldsLen = r.u32();
  const end = r.pos + fieldsLen;
  const msg: Message = { type, serial, signature: '', body: [] };
  while (r.pos < end) {
    r.align(8);
    const code = r.u8();
    const v = r.value('v');
    if (code === FIELD.replySerial) msg.replySerial = v as number;
    else if (code === FIELD.errorName) msg.errorName = v as string;
    else if (code === FIELD.signature) msg.signature = v as string;
  }
  r.align(8);
  const bodyStart = r.pos;
  const br = new Reader(buf.subarray(0, bodyStart + bodyLen), le, bodyStart);
  br.pos = bodyStart;
  msg.body = splitSignature(msg.signature).map((t) => br.value(t));
  return msg;
}

// ---------------------------------------------------------------------------------------------
// Connection

interface Pending {
  resolve(m: Message): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

/** One authenticated connection to a message bus. */
export class DBusConnection {
  private serial = 0;
  private rx: Buffer = Buffer.alloc(0);
  private pending = new Map<number, Pending>();
  private closed = false;
  private failure: Error | undefined;
  /** The unique name the bus gave us (`:1.42`). */
  uniqueName = '';

  private constructor(
    private readonly sock: Socket,
    readonly address: string,
    private readonly timeoutMs: number,
  ) {
    sock.on('data', (d: Buffer) => this.onData(d));
    const fail = (e: Error) => {
      this.failure ??= e;
      this.closed = true;
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.reject(e);
      }
      this.pending.clear();
    };
    sock.on('error', (e) => fail(new DBusError('', `D-Bus connection to ${address} failed: ${e.message}`)));
    sock.on('close', () => fail(new DBusError('', `D-Bus connection to ${address} closed`)));
  }

  /** Connect, authenticate (SASL EXTERNAL with our uid) and say Hello. Throws DBusError. */
  static async connect(opts: DBusOptions = {}): Promise<DBusConnection> {
    const address = systemBusAddress(opts);
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const sockets = addressSockets(address);
    if (sockets.length === 0) throw new DBusError('', `unsupported D-Bus address ${JSON.stringify(address)}`);
    let last: Error | undefined;
    for (const path of sockets) {
      try {
        const sock = await DBusConnection.authenticate(path, timeoutMs);
        const c = new DBusConnection(sock.sock, address, timeoutMs);
        if (sock.rest.length) c.onData(sock.rest);
        try {
          const hello = await c.call(DBUS_NAME, DBUS_PATH, DBUS_NAME, 'Hello');
          c.uniqueName = String(hello[0] ?? '');
        } catch (e) {
          c.close();
          throw e;
        }
        return c;
      } catch (e) {
        last = e as Error;
      }
    }
    throw last instanceof DBusError
      ? last
      : new DBusError('', `failed to connect to the D-Bus at ${address}: ${(last as Error).message}`);
  }

  private static authenticate(path: string, timeoutMs: number): Promise<{ sock: Socket; rest: Buffer }> {
    return new Promise((resolve, reject) => {
      const sock = createConnection({ path });
      let buf = Buffer.alloc(0);
      const done = (err?: Error) => {
        clearTimeout(timer);
        sock.removeAllListeners('data');
        sock.removeAllListeners('error');
        sock.removeAllListeners('connect');
        if (err) {
          sock.destroy();
          reject(err);
        }
      };
      const display = path.startsWith('\0') ? `@${path.slice(1)}` : path;
      const timer = setTimeout(
        () => done(new DBusError('', `no answer from the D-Bus at ${display} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      sock.once('error', (e) =>
        done(new DBusError('', `failed to connect to the D-Bus at ${display}: ${e.message}`)),
      );
      sock.once('connect', () => {
        const uid = String(typeof process.getuid === 'function' ? process.getuid() : 0);
        sock.write(`\0AUTH EXTERNAL ${Buffer.from(uid, 'ascii').toString('hex')}\r\n`);
      });
      sock.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        const eol = buf.indexOf('\r\n');
        if (eol < 0) return;
        const line = buf.toString('ascii', 0, eol);
        if (!line.startsWith('OK ')) {
          done(new DBusError('', `D-Bus authentication refused at ${display}: ${line}`));
          return;
        }
        sock.write('BEGIN\r\n');
        done();
        resolve({ sock, rest: buf.subarray(eol + 2) });
      });
    });
  }

  private onData(d: Buffer): void {
    this.rx = this.rx.length ? Buffer.concat([this.rx, d]) : d;
    for (;;) {
      let n: number;
      let msg: Message;
      try {
        n = messageLength(this.rx);
        if (n === 0) return;
        msg = parseMessage(this.rx.subarray(0, n));
      } catch (e) {
        this.sock.destroy(e as Error);
        return;
      }
      this.rx = this.rx.subarray(n);
      if (msg.replySerial === undefined) continue; // signals (NameAcquired …) and calls to us are ignored
      const p = this.pending.get(msg.replySerial);
      if (!p) continue;
      this.pending.delete(msg.replySerial);
      clearTimeout(p.timer);
      p.resolve(msg);
    }
  }

  /** Call a method; resolves with the reply body, rejects with DBusError for an error reply. */
  async call(
    destination: string,
    path: string,
    iface: string,
    member: string,
    signature = '',
    args: readonly DBusArg[] = [],
  ): Promise<unknown[]> {
    if (this.closed) throw this.failure ?? new DBusError('', `D-Bus connection to ${this.address} closed`);
    const serial = ++this.serial;
    const data = marshalCall({ serial, destination, path, interface: iface, member, signature, args });
    const reply = await new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(serial);
        reject(
          new DBusError('', `no reply to ${iface}.${member} from ${destination} within ${this.timeoutMs} ms`),
        );
      }, this.timeoutMs);
      this.pending.set(serial, { resolve, reject, timer });
      this.sock.write(data);
    });
    if (reply.type === MESSAGE_TYPE.error) {
      const text = typeof reply.body[0] === 'string' ? reply.body[0] : '';
      throw new DBusError(reply.errorName ?? '', text);
    }
    return reply.body;
  }

  close(): void {
    this.closed = true;
    this.sock.destroy();
  }
}
