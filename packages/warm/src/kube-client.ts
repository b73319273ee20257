/**
 * A small Kubernetes API client shared by `cnikit install-cni` (the node's pod subnet, ./node-podcidr.ts) and the
 * node agent (./node-agent/): HTTPS with TLS verified against the cluster's CA (never insecure), authenticated by
 * the pod's service-account token (in-cluster: re-read at every request, projected tokens rotate) or by the client
 * certificate or token of a kubeconfig (tests, or an agent run outside a pod).
 *
 * Requests: one JSON answer (`request`) or a stream of newline-delimited JSON (`stream`, for watches), with a bounded
 * line length so a misbehaving server cannot grow the process without bound.
 */
import { readFileSync } from 'node:fs';
import { request as httpsRequest, type RequestOptions } from 'node:https';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** The longest watch event accepted (a Node object is a few KiB; the API server's own limit is 1.5 MiB per object). */
export const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export interface KubeCredentials {
  /** https://host:port */
  server: string;
  ca: Buffer;
  /** Bearer token, or a file it is read from at every request. */
  token?: string;
  tokenFile?: string;
  cert?: Buffer;
  key?: Buffer;
}

export interface KubeResponse {
  status: number;
  body: string;
}

/** Errors worth no retry (the TLS verification failed). */
export const TLS_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|altnames/i;

/** One HTTPS GET with a bearer token and a CA (the form install-cni has always used). */
export function getJson(url: URL, token: string, ca: Buffer, timeoutMs: number): Promise<KubeResponse> {
  return new KubeClient({ server: url.origin, ca, token }).request('GET', `${url.pathname}${url.search}`, {
    timeoutMs,
  });
}

export class KubeClient {
  readonly creds: KubeCredentials;

  constructor(creds: KubeCredentials) {
    this.creds = creds;
  }

  get server(): string {
    return this.creds.server;
  }

  #options(method: string, headers: Record<string, string>, timeoutMs: number): RequestOptions {
    const c = this.creds;
    const token = c.tokenFile ? readFileSync(c.tokenFile, 'utf8').trim() : c.token;
    return {
      method,
      ca: c.ca,
      cert: c.cert,
      key: c.key,
      rejectUnauthorized: true,
      headers: {
        accept: 'application/json',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      timeout: timeoutMs,
    };
  }

  /** One request; resolves with the status and the whole body. */
  request(
    method: string,
    path: string,
    o: { body?: string; contentType?: string; timeoutMs?: number } = {},
  ): Promise<KubeResponse> {
    const timeoutMs = o.timeoutMs ?? 10_000;
    return new Promise((resolvePromise, reject) => {
      const headers: Record<string, string> = {};
      if (o.body !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
      let opts: RequestOptions;
      try {
        opts = this.#options(method, headers, timeoutMs);
      } catch (e) {
        reject(e);
        return;
      }
      const req = httpsRequest(new URL(path, this.creds.server), opts, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolvePromise({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(o.body);
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
        opts = this.#options('GET', {}, idleMs);
      } catch (e) {
        reject(e);
        return;
      }
      const req = httpsRequest(new URL(path, this.creds.server), { ...opts, signal: o.signal }, (res) => {
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

/** The pod's own credentials: $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the service-account token and CA. */
export function inClusterCredentials(
  env: Readonly<Record<string, string | undefined>>,
  o: { tokenFile?: string; caFile?: string } = {},
): KubeCredentials {
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host)
    throw new Error('KUBERNETES_SERVICE_HOST is not set (not in a cluster?) and no kubeconfig was given');
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  const tokenFile = o.tokenFile ?? env.CNIKIT_SA_TOKEN_FILE ?? `${SERVICE_ACCOUNT_DIR}/token`;
  const caFile = o.caFile ?? env.CNIKIT_SA_CA_FILE ?? `${SERVICE_ACCOUNT_DIR}/ca.crt`;
  let ca: Buffer;
  try {
    readFileSync(tokenFile);
    ca = readFileSync(caFile);
  } catch (e) {
    throw new Error(`cannot read the service-account credentials: ${(e as Error).message}`);
  }
  return { server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`, ca, tokenFile };
}

interface Kubeconfig {
  clusters?: Array<{ name: string; cluster: Record<string, string> }>;
  users?: Array<{ name: string; user: Record<string, string> }>;
  contexts?: Array<{ name: string; context: { cluster: string; user: string } }>;
  'current-context'?: string;
}

/**
 * The current context of a kubeconfig in JSON (what the lab control plane writes; `kubectl config view --raw -o
 * json` converts any other). CA and client certificate inline (`*-data`) or as files.
 */
export function kubeconfigCredentials(path: string): KubeCredentials {
  let k: Kubeconfig;
  try {
    k = JSON.parse(readFileSync(path, 'utf8')) as Kubeconfig;
  } catch (e) {
    throw new Error(`kubeconfig ${path}: ${(e as Error).message} (a JSON kubeconfig is expected)`);
  }
  const ctx = k.contexts?.find((c) => c.name === k['current-context']) ?? k.contexts?.[0];
  const cluster = k.clusters?.find((c) => c.name === ctx?.context.cluster)?.cluster;
  const user = k.users?.find((u) => u.name === ctx?.context.user)?.user ?? {};
  if (!cluster?.server) throw new Error(`kubeconfig ${path}: no cluster server in the current context`);
  const data = (inline: string | undefined, file: string | undefined) =>
    inline ? Buffer.from(inline, 'base64') : file ? readFileSync(file) : undefined;
  const ca = data(cluster['certificate-authority-data'], cluster['certificate-authority']);
  if (!ca) throw new Error(`kubeconfig ${path}: no certificate authority (TLS is always verified)`);
  return {
    server: cluster.server,
    ca,
    token: user.token,
    tokenFile: user.tokenFile,
    cert: data(user['client-certificate-data'], user['client-certificate']),
    key: data(user['client-key-data'], user['client-key']),
  };
}
