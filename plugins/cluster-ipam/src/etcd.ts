/**
 * A small etcd v3 client on the JSON gateway every etcd server ≥ 3.4 serves next to gRPC (POST /v3/kv/range,
 * /v3/kv/put, /v3/kv/txn, /v3/kv/deleterange, /v3/lease/grant|keepalive|revoke, /v3/auth/authenticate; keys and values base64, 64-bit integers as
 * decimal strings). node:http/node:https only: no gRPC stack, no protobuf, nothing to load at start-up but the
 * modules Node already has (docs/plugins/cluster-ipam.md, "etcd backend", has the measured comparison with
 * @grpc/grpc-js).
 *
 * Every request has a deadline; a refused connection, a timeout, a 5xx answer or an etcd error of the
 * "unavailable" class is an EtcdUnavailableError, so callers can map it to CNI error 11 (try again later).
 * With a user name and password the client authenticates once, sends the token on every request and
 * authenticates again when etcd says the token is no longer valid (simple tokens expire when idle).
 */
import http from 'node:http';
import https from 'node:https';

export interface EtcdClientOptions {
  /** host:port, or a URL (http:// or https://); several separated by commas, tried in turn. */
  endpoints: string | string[];
  username?: string;
  password?: string;
  /** PEM contents: client certificate and key (mutual TLS) and the CA that signs the server's certificate. */
  cert?: string | Buffer;
  key?: string | Buffer;
  ca?: string | Buffer;
  /** Force TLS for host:port endpoints (it is on when any of cert/key/ca is given). */
  tls?: boolean;
  /** The bound on one request, connection included (default 5000 ms). */
  timeoutMs?: number;
  /** An absolute end (epoch ms) for every request of this client: each gets min(timeoutMs, time left). */
  deadline?: number;
}

export interface KeyValue {
  key: Buffer;
  value: Buffer;
  createRevision: string;
  modRevision: string;
  version: string;
  lease?: string;
}

export interface RangeResult {
  kvs: KeyValue[];
  more: boolean;
  count: number;
  /** The store's revision the answer was read at. */
  revision: string;
}

export type Compare =
  | {
      key: Buffer | string;
      target: 'CREATE';
      createRevision: string | number;
      result?: 'EQUAL' | 'NOT_EQUAL';
    }
  | { key: Buffer | string; target: 'MOD'; modRevision: string | number; result?: 'EQUAL' | 'NOT_EQUAL' }
  | { key: Buffer | string; target: 'VERSION'; version: string | number; result?: 'EQUAL' | 'NOT_EQUAL' };

export type Op =
  | { put: { key: Buffer | string; value: Buffer | string; lease?: string } }
  | { deleteRange: { key: Buffer | string; rangeEnd?: Buffer | string } }
  | { range: { key: Buffer | string; rangeEnd?: Buffer | string; limit?: number } };

export interface TxnResult {
  succeeded: boolean;
  revision: string;
  /** Per operation: for a delete, how many keys it removed; for a range, its key-values (more: a limit cut it). */
  responses: Array<{ deleted?: number; kvs?: KeyValue[]; more?: boolean }>;
}

/** etcd cannot be reached, timed out, or answered that it cannot serve now (no leader, stopping, overloaded). */
export class EtcdUnavailableError extends Error {
  override name = 'EtcdUnavailableError';
}

/** etcd answered with an error that retrying will not cure (bad credentials, permission denied, bad request). */
export class EtcdError extends Error {
  override name = 'EtcdError';
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

// gRPC status codes etcd's gateway returns in its error body.
const UNAVAILABLE_CODES = new Set([1, 4, 8, 10, 13, 14]); // canceled, deadline, exhausted, aborted, internal, unavailable
const b64 = (v: Buffer | string) => (typeof v === 'string' ? Buffer.from(v) : v).toString('base64');
const unb64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : '', 'base64');
const int = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '0');

/** The key just after every key that starts with prefix: etcd's range_end for a prefix scan. */
export function prefixEnd(prefix: Buffer | string): Buffer {
  const p = Buffer.from(typeof prefix === 'string' ? Buffer.from(prefix) : prefix);
  for (let i = p.length - 1; i >= 0; i--) {
    const b = p[i] as number;
    if (b < 0xff) {
      p[i] = b + 1;
      return p.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // every key
}

function toKv(o: Record<string, unknown>): KeyValue {
  return {
    key: unb64(o.key),
    value: unb64(o.value),
    createRevision: int(o.create_revision),
    modRevision: int(o.mod_revision),
    version: int(o.version),
    ...(o.lease !== undefined ? { lease: int(o.lease) } : {}),
  };
}

function compareJson(c: Compare): Record<string, unknown> {
  const o: Record<string, unknown> = { key: b64(c.key), target: c.target, result: c.result ?? 'EQUAL' };
  if (c.target === 'CREATE') o.create_revision = String(c.createRevision);
  else if (c.target === 'MOD') o.mod_revision = String(c.modRevision);
  else o.version = String(c.version);
  return o;
}

function opJson(op: Op): Record<string, unknown> {
  if ('put' in op) {
    const p: Record<string, unknown> = { key: b64(op.put.key), value: b64(op.put.value) };
    if (op.put.lease) p.lease = op.put.lease;
    return { request_put: p };
  }
  if ('deleteRange' in op) {
    const d: Record<string, unknown> = { key: b64(op.deleteRange.key) };
    if (op.deleteRange.rangeEnd !== undefined) d.range_end = b64(op.deleteRange.rangeEnd);
    return { request_delete_range: d };
  }
  const r: Record<string, unknown> = { key: b64(op.range.key) };
  if (op.range.rangeEnd !== undefined) r.range_end = b64(op.range.rangeEnd);
  if (op.range.limit) r.limit = String(op.range.limit);
  return { request_range: r };
}

interface Endpoint {
  url: URL;
  secure: boolean;
}

function parseEndpoints(e: string | string[], tls: boolean): Endpoint[] {
  const list = (Array.isArray(e) ? e : e.split(',')).map((s) => s.trim()).filter(Boolean);
  if (list.length === 0) throw new Error('etcd: no endpoint given (etcd_host is host:port)');
  return list.map((s) => {
    const withScheme = /^[a-z]+:\/\//i.test(s) ? s : `${tls ? 'https' : 'http'}://${s}`;
    let url: URL;
    try {
      url = new URL(withScheme);
    } catch {
      throw new Error(`etcd: endpoint "${s}" is not host:port or a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error(`etcd: endpoint "${s}": scheme must be http or https`);
    if (!url.port) url.port = '2379';
    return { url, secure: url.protocol === 'https:' };
  });
}

export class EtcdClient {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  #deadline?: number;
  readonly #httpAgent: http.Agent;
  readonly #httpsAgent: https.Agent;
  readonly #username?: string;
  readonly #password?: string;
  #token?: Promise<string>;
  #current = 0;
  #closed = false;

  constructor(opts: EtcdClientOptions) {
    const tls = opts.tls ?? (opts.cert !== undefined || opts.key !== undefined || opts.ca !== undefined);
    this.#endpoints = parseEndpoints(opts.endpoints, tls);
    this.#timeoutMs = opts.timeoutMs ?? 5000;
    if (opts.deadline !== undefined) this.#deadline = opts.deadline;
    this.#username = opts.username;
    this.#password = opts.password;
    if ((opts.username === undefined) !== (opts.password === undefined))
      throw new Error('etcd: etcd_username and etcd_password go together');
    this.#httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    this.#httpsAgent = new https.Agent({
      keepAlive: true,
      maxSockets: 64,
      cert: opts.cert,
      key: opts.key,
      ca: opts.ca,
    });
  }

  /** One POST to one endpoint; resolves with the parsed body of a 2xx answer. */
  #post(ep: Endpoint, path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
    const data = Buffer.from(JSON.stringify(body));
    const mod = ep.secure ? https : http;
    const left = this.#deadline === undefined ? this.#timeoutMs : this.#deadline - Date.now();
    const timeoutMs = Math.min(this.#timeoutMs, left);
    if (timeoutMs <= 0)
      return Promise.reject(new EtcdUnavailableError(`etcd ${ep.url.host}: out of time before ${path}`));
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (e: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        reject(e);
      };
      const headers: Record<string, string | number> = {
        'content-type': 'application/json',
        'content-length': data.length,
      };
      if (token) headers.authorization = token;
      const req = mod.request(
        new URL(path, ep.url),
        {
          method: 'POST',
          headers,
          agent: ep.secure ? this.#httpsAgent : this.#httpAgent,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (e) => fail(new EtcdUnavailableError(`etcd ${ep.url.host}: ${e.message}`)));
          res.on('end', () => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: Record<string, unknown> = {};
            try {
              parsed = text ? JSON.parse(text) : {};
            } catch {
              parsed = { error: text.slice(0, 200) };
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300 && parsed.error === undefined) return resolve(parsed);
            const code = typeof parsed.code === 'number' ? parsed.code : 0;
            let msg = String(parsed.message ?? parsed.error ?? `HTTP ${status}`);
            if (/CommonName of client sending a request against gateway/i.test(msg))
              msg =
                'etcd refuses a client certificate with a Common Name on its JSON gateway when authentication is ' +
                'on: use a client certificate without CN (etcd_cert_file) and etcd_username/etcd_password';
            if (status >= 500 && code === 0) reject(new EtcdUnavailableError(`etcd ${ep.url.host}: ${msg}`));
            else if (UNAVAILABLE_CODES.has(code))
              reject(new EtcdUnavailableError(`etcd ${ep.url.host}: ${msg}`));
            else reject(new EtcdError(`etcd ${ep.url.host}: ${msg}`, code));
          });
        },
      );
      const timer = setTimeout(
        () => fail(new EtcdUnavailableError(`etcd ${ep.url.host}: no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      req.on('error', (e: NodeJS.ErrnoException) => {
        // a certificate etcd or we refuse is a configuration to fix, not an outage to wait out
        const tls =
          /CERT|SELF_SIGNED|ERR_SSL|ERR_TLS|HOSTNAME_MISMATCH/.test(e.code ?? '') ||
          /certificate|alert/i.test(e.message);
        fail(
          tls
            ? new EtcdError(
                `etcd ${ep.url.host}: TLS: ${e.message} (etcd_ca_cert_file, etcd_cert_file, etcd_key_file)`,
                0,
              )
            : new EtcdUnavailableError(`etcd ${ep.url.host}: ${e.message}`),
        );
      });
      req.end(data);
    });
  }

  /** POST to the current endpoint, moving on to the next ones when it is unavailable. */
  async #postAny(path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
    if (this.#closed) throw new EtcdUnavailableError('etcd: client closed');
    let last: Error | undefined;
    for (let i = 0; i < this.#endpoints.length; i++) {
      const idx = (this.#current + i) % this.#endpoints.length;
      try {
        const r = await this.#post(this.#endpoints[idx] as Endpoint, path, body, token);
        this.#current = idx;
        return r;
      } catch (e) {
        if (!(e instanceof EtcdUnavailableError)) throw e;
        last = e;
      }
    }
    throw last ?? new EtcdUnavailableError('etcd: no endpoint');
  }

  #authenticate(): Promise<string> {
    this.#token ??= this.#postAny('/v3/auth/authenticate', {
      name: this.#username,
      password: this.#password,
    }).then(
      (r) => {
        if (typeof r.token !== 'string' || !r.token)
          throw new EtcdError('etcd: authenticate gave no token', 0);
        return r.token;
      },
      (e) => {
        this.#token = undefined;
        throw e;
      },
    );
    return this.#token;
  }

  /** A request, authenticated when credentials were given (once more with a fresh token if the old one expired). */
  async call(path: string, body: unknown): Promise<Record<string, unknown>> {
    if (this.#username === undefined) return this.#postAny(path, body);
    for (let attempt = 0; ; attempt++) {
      const pending = this.#authenticate();
      const token = await pending;
      try {
        return await this.#postAny(path, body, token);
      } catch (e) {
        const stale =
          e instanceof EtcdError && /invalid auth token|token is expired|user name is empty/i.test(e.message);
        if (!stale || attempt > 0) throw e;
        if (this.#token === pending) this.#token = undefined;
      }
    }
  }

  async range(opts: {
    key: Buffer | string;
    rangeEnd?: Buffer | string;
    limit?: number;
    revision?: string;
    serializable?: boolean;
  }): Promise<RangeResult> {
    const body: Record<string, unknown> = { key: b64(opts.key) };
    if (opts.rangeEnd !== undefined) body.range_end = b64(opts.rangeEnd);
    if (opts.limit) body.limit = String(opts.limit);
    if (opts.revision) body.revision = opts.revision;
    if (opts.serializable) body.serializable = true;
    const r = await this.call('/v3/kv/range', body);
    const kvs = Array.isArray(r.kvs) ? (r.kvs as Record<string, unknown>[]).map(toKv) : [];
    const header = (r.header ?? {}) as Record<string, unknown>;
    return { kvs, more: r.more === true, count: Number(int(r.count)), revision: int(header.revision) };
  }

  async get(key: Buffer | string): Promise<{ kv?: KeyValue; revision: string }> {
    const r = await this.range({ key });
    return { kv: r.kvs[0], revision: r.revision };
  }

  async put(key: Buffer | string, value: Buffer | string): Promise<string> {
    const r = await this.call('/v3/kv/put', { key: b64(key), value: b64(value) });
    return int((r.header as Record<string, unknown> | undefined)?.revision);
  }

  async deleteRange(key: Buffer | string, rangeEnd?: Buffer | string): Promise<number> {
    const body: Record<string, unknown> = { key: b64(key) };
    if (rangeEnd !== undefined) body.range_end = b64(rangeEnd);
    const r = await this.call('/v3/kv/deleterange', body);
    return Number(int(r.deleted));
  }

  async txn(compare: Compare[], success: Op[], failure: Op[] = []): Promise<TxnResult> {
    const r = await this.call('/v3/kv/txn', {
      compare: compare.map(compareJson),
      success: success.map(opJson),
      failure: failure.map(opJson),
    });
    const responses = (Array.isArray(r.responses) ? r.responses : []).map((x: Record<string, unknown>) => {
      const del = x.response_delete_range as Record<string, unknown> | undefined;
      const rng = x.response_range as Record<string, unknown> | undefined;
      return {
        ...(del ? { deleted: Number(int(del.deleted)) } : {}),
        ...(rng ? { kvs: (Array.isArray(rng.kvs) ? rng.kvs : []).map(toKv), more: rng.more === true } : {}),
      };
    });
    return {
      succeeded: r.succeeded === true,
      revision: int((r.header as Record<string, unknown> | undefined)?.revision),
      responses,
    };
  }

  /** A lease of `ttlSeconds` (etcd may round it up to its minimum): its ID and granted TTL. */
  async leaseGrant(ttlSeconds: number): Promise<{ id: string; ttl: number }> {
    const r = await this.call('/v3/lease/grant', { TTL: String(ttlSeconds) });
    const id = int(r.ID);
    if (id === '0') throw new EtcdError(`etcd: lease grant gave no ID (${String(r.error ?? '')})`, 0);
    return { id, ttl: Number(int(r.TTL)) };
  }

  /**
   * One keep-alive of a lease (the gateway's stream endpoint with a single request): the TTL it has again, 0 when
   * the lease is gone (expired or revoked: its keys are deleted).
   */
  async leaseKeepAlive(id: string): Promise<number> {
    const r = await this.call('/v3/lease/keepalive', { ID: id });
    const res = (r.result ?? {}) as Record<string, unknown>;
    const ttl = Number(int(res.TTL));
    return Number.isFinite(ttl) && ttl > 0 ? ttl : 0;
  }

  /** Revokes a lease (its keys are deleted at once); a lease that is gone already is not an error. */
  async leaseRevoke(id: string): Promise<void> {
    try {
      await this.call('/v3/lease/revoke', { ID: id });
    } catch (e) {
      if (e instanceof EtcdError && /lease not found/i.test(e.message)) return;
      throw e;
    }
  }

  /** Bound the requests from now on by this absolute time (ms since the epoch). */
  setDeadline(deadline: number): void {
    this.#deadline = deadline;
  }

  close(): void {
    this.#closed = true;
    this.#httpAgent.destroy();
    this.#httpsAgent.destroy();
  }
}
