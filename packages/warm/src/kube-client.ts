/**
 * The node agent's Kubernetes client: its requests go through ./kube.ts (the connection from a kubeconfig or the
 * pod's service account, TLS always verified, one bound per request), and it adds watches: a stream of
 * newline-delimited JSON with a bounded line length, so a misbehaving server cannot grow the process without bound.
 */
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { authHeaders, type KubeConnection, type KubeResponse, kubeRequest, tlsOptions } from './kube.ts';

/** The longest watch event accepted (a Node object is a few KiB; the API server's own limit is 1.5 MiB per object). */
export const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export class KubeClient {
  readonly conn: KubeConnection;

  constructor(conn: KubeConnection) {
    this.conn = conn;
  }

  get server(): string {
    return this.conn.server;
  }

  /** One request (`body` sent as JSON, of `contentType`); resolves with the status and the whole body. */
  request(
    method: string,
    path: string,
    o: { body?: unknown; contentType?: string; timeoutMs?: number } = {},
  ): Promise<KubeResponse> {
    return kubeRequest(this.conn, method, path, o.body, o.timeoutMs ?? 10_000, {
      contentType: o.contentType,
    });
  }

  /**
   * A streaming GET (a watch): `onLine` gets every newline-terminated line of a 200 answer as it arrives. Resolves
   * when the server ends the stream ({status, body: ''}) or, for another status, with the whole body; rejects on a
   * network error, a line longer than MAX_EVENT_BYTES, no data for `idleMs`, or `signal`.
   */
  stream(
    path: string,
    onLine: (line: string) => void,
    o: { idleMs?: number; signal?: AbortSignal } = {},
  ): Promise<KubeResponse> {
    const idleMs = o.idleMs ?? 120_000;
    return new Promise((resolvePromise, reject) => {
      let opts: RequestOptions;
      try {
        opts = {
          method: 'GET',
          ...tlsOptions(this.conn),
          headers: { accept: 'application/json', ...authHeaders(this.conn) },
          timeout: idleMs,
          signal: o.signal,
        };
      } catch (e) {
        reject(e);
        return;
      }
      const req = httpsRequest(new URL(`${this.conn.server}${path}`), opts, (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (status !== 200) {
            chunks.push(c);
            return;
          }
          let start = 0;
          for (let nl = c.indexOf(10); nl !== -1; nl = c.indexOf(10, start)) {
            chunks.push(c.subarray(start, nl));
            const line = Buffer.concat(chunks).toString('utf8');
            chunks.length = 0;
            size = 0;
            start = nl + 1;
            if (line.trim() === '') continue;
            try {
              onLine(line);
            } catch (e) {
              // the caller stops the watch (e.g. 410 Gone): the promise rejects with its error
              req.destroy(e as Error);
              return;
            }
          }
          if (start < c.length) {
            chunks.push(c.subarray(start));
            size += c.length - start;
            if (size > MAX_EVENT_BYTES)
              req.destroy(new Error(`a watch event longer than ${MAX_EVENT_BYTES} bytes`));
          }
        });
        res.on('end', () =>
          resolvePromise({ status, body: status === 200 ? '' : Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`no data within ${idleMs} ms`)));
      req.on('error', reject);
      req.end();
    });
  }
}
