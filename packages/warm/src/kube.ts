/**
 * A small Kubernetes API client on node:https, shared by `cnikit install-cni` (the node's pod subnet) and the
 * cluster-ipam plugin's Kubernetes store: where to connect and with which credentials (a kubeconfig file, or the
 * pod's service account in-cluster), and one request with a bounded time. TLS is always verified (against the
 * kubeconfig's or the service account's CA) unless a kubeconfig asks for insecure-skip-tls-verify.
 *
 * Kubeconfig files are YAML (kubectl, kubeadm, whereabouts' installer write YAML) or JSON; the YAML read here is
 * the part kubeconfigs use: block mappings and sequences, plain and quoted scalars, comments, `{}` / `[]`.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { dirname, isAbsolute, join } from 'node:path';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConnection {
  /** The API server's base URL (no trailing slash). */
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  token?: string;
  /** A token file read again at every request (the service account's projected token rotates); wins over token. */
  tokenFile?: string;
  insecure?: boolean;
  /** Where the connection came from, for messages (`kubeconfig /etc/…`, `service account`). */
  source: string;
  /** User name from the kubeconfig, for messages. */
  user?: string;
  /** Requests in flight at once on the connection's keep-alive agent (default 8; a load generator wants more). */
  maxSockets?: number;
}

/** A kubeconfig or the service account cannot be used: a configuration problem, with what to fix. */
export class KubeConfigError extends Error {
  override name = 'KubeConfigError';
}

/** The pod's service account (`KUBERNETES_SERVICE_HOST` / `_PORT`, token and CA files). */
export function inClusterConnection(
  env: Readonly<Record<string, string | undefined>>,
  o: { tokenFile?: string; caFile?: string } = {},
): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  if (!host) throw new KubeConfigError('KUBERNETES_SERVICE_HOST is not set (not in a cluster?)');
  const tokenFile = o.tokenFile ?? env.CNIKIT_SA_TOKEN_FILE ?? `${SERVICE_ACCOUNT_DIR}/token`;
  const caFile = o.caFile ?? env.CNIKIT_SA_CA_FILE ?? `${SERVICE_ACCOUNT_DIR}/ca.crt`;
  let token: string;
  let ca: Buffer;
  try {
    token = readFileSync(tokenFile, 'utf8').trim();
    ca = readFileSync(caFile);
  } catch (e) {
    throw new KubeConfigError(`cannot read the service-account credentials: ${(e as Error).message}`);
  }
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    token,
    tokenFile,
    ca,
    source: `service account (${caFile})`,
  };
}

// ------------------------------------------------------------------------------------------------
// YAML, the kubeconfig subset

type Y = string | number | boolean | null | Y[] | { [k: string]: Y };

function scalar(text: string): Y {
  const t = text.trim();
  if (t === '' || t === '~' || t === 'null') return null;
  if (t === '{}') return {};
  if (t === '[]') return [];
  if (t.startsWith('"')) return JSON.parse(t) as string;
  if (t.startsWith("'")) return t.slice(1, -1).replace(/''/g, "'");
  if (t === 'true') return true;
  if (t === 'false') return false;
  return t;
}

function stripComment(line: string): string {
  let q: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) {
      if (c === q) q = undefined;
    } else if (c === '"' || c === "'") q = c;
    else if (c === '#' && (i === 0 || line[i - 1] === ' ')) return line.slice(0, i);
  }
  return line;
}

/** Parse the YAML of a kubeconfig (see the module comment for the subset). */
export function parseKubeYaml(text: string): unknown {
  const lines = text
    .split(/\r?\n/)
    .map(stripComment)
    .filter((l) => l.trim() !== '' && l.trim() !== '---');
  let i = 0;
  const indentOf = (l: string) => l.length - l.trimStart().length;
  const keyValue = (s: string): [string, string] | undefined => {
    const m = /^("[^"]*"|'[^']*'|[^:'"]+?):(?:\s+(.*)|$)/.exec(s);
    if (!m) return undefined;
    return [String(scalar(m[1]!)), m[2] ?? ''];
  };
  const block = (indent: number): Y => {
    if (i >= lines.length) return null;
    const first = lines[i]!;
    if (first.trimStart().startsWith('- ') || first.trim() === '-') {
      const arr: Y[] = [];
      while (i < lines.length && indentOf(lines[i]!) === indent && lines[i]!.trimStart().startsWith('-')) {
        const rest = lines[i]!.trimStart().slice(1);
        const inner = indent + 1 + (rest.length - rest.trimStart().length);
        if (rest.trim() === '') {
          i++;
          arr.push(i < lines.length && indentOf(lines[i]!) > indent ? block(indentOf(lines[i]!)) : null);
        } else if (keyValue(rest.trim())) {
          // a mapping whose first key is on the dash line
          lines[i] = `${' '.repeat(inner)}${rest.trim()}`;
          arr.push(block(inner));
        } else {
          arr.push(scalar(rest));
          i++;
        }
      }
      return arr;
    }
    const obj: { [k: string]: Y } = {};
    while (i < lines.length && indentOf(lines[i]!) === indent) {
      const kv = keyValue(lines[i]!.trim());
      if (!kv) throw new Error(`cannot read line ${JSON.stringify(lines[i]!.trim())}`);
      i++;
      const [k, v] = kv;
      if (v.trim() !== '') obj[k] = scalar(v);
      else if (i < lines.length && indentOf(lines[i]!) > indent) obj[k] = block(indentOf(lines[i]!));
      else if (i < lines.length && indentOf(lines[i]!) === indent && lines[i]!.trimStart().startsWith('-'))
        obj[k] = block(indent);
      else obj[k] = null;
    }
    return obj;
  };
  const out = block(lines.length > 0 ? indentOf(lines[0]!) : 0);
  if (i < lines.length) throw new Error(`cannot read line ${JSON.stringify(lines[i]!.trim())}`);
  return out;
}

// ------------------------------------------------------------------------------------------------
// kubeconfig

type Named = { name?: string; [k: string]: unknown };

function pick(list: unknown, name: unknown, what: string, path: string): Record<string, unknown> {
  const found = Array.isArray(list) ? (list as Named[]).find((e) => e?.name === name) : undefined;
  if (!found) throw new KubeConfigError(`kubeconfig ${path}: no ${what} named ${JSON.stringify(name)}`);
  return (found[what] ?? {}) as Record<string, unknown>;
}

/** The connection a kubeconfig describes (its current context); `apiRoot` replaces its server. */
export function kubeconfigConnection(
  path: string,
  o: { apiRoot?: string; context?: string } = {},
): KubeConnection {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new KubeConfigError(
      code === 'ENOENT' ? `kubeconfig ${path} does not exist` : `kubeconfig ${path}: ${(e as Error).message}`,
    );
  }
  let doc: Record<string, unknown>;
  try {
    doc = (text.trimStart().startsWith('{') ? JSON.parse(text) : parseKubeYaml(text)) as Record<
      string,
      unknown
    >;
  } catch (e) {
    throw new KubeConfigError(`kubeconfig ${path} is not valid YAML or JSON: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== 'object') throw new KubeConfigError(`kubeconfig ${path} is empty`);
  const ctxName = o.context ?? doc['current-context'];
  const contexts = doc.contexts as Named[] | undefined;
  const ctx =
    ctxName !== undefined && ctxName !== null && ctxName !== ''
      ? pick(contexts, ctxName, 'context', path)
      : (((contexts ?? [])[0]?.context ?? {}) as Record<string, unknown>);
  const cluster = ctx.cluster !== undefined ? pick(doc.clusters, ctx.cluster, 'cluster', path) : {};
  const user = ctx.user !== undefined ? pick(doc.users, ctx.user, 'user', path) : {};
  const base = dirname(path);
  const file = (f: unknown, what: string): Buffer => {
    const p = String(f);
    const abs = isAbsolute(p) ? p : join(base, p);
    try {
      return readFileSync(abs);
    } catch (e) {
      throw new KubeConfigError(`kubeconfig ${path}: cannot read ${what} ${abs}: ${(e as Error).message}`);
    }
  };
  const data = (d: unknown): Buffer => Buffer.from(String(d), 'base64');
  const server = String(o.apiRoot || cluster.server || '');
  if (!server) throw new KubeConfigError(`kubeconfig ${path}: the cluster has no server`);
  const conn: KubeConnection = { server: server.replace(/\/+$/, ''), source: `kubeconfig ${path}` };
  if (cluster['certificate-authority-data']) conn.ca = data(cluster['certificate-authority-data']);
  else if (cluster['certificate-authority'])
    conn.ca = file(cluster['certificate-authority'], 'certificate-authority');
  if (cluster['insecure-skip-tls-verify'] === true) conn.insecure = true;
  if (user['client-certificate-data']) conn.cert = data(user['client-certificate-data']);
  else if (user['client-certificate']) conn.cert = file(user['client-certificate'], 'client-certificate');
  if (user['client-key-data']) conn.key = data(user['client-key-data']);
  else if (user['client-key']) conn.key = file(user['client-key'], 'client-key');
  if (user.token) conn.token = String(user.token);
  else if (user.tokenFile) conn.token = file(user.tokenFile, 'tokenFile').toString('utf8').trim();
  if (typeof ctx.user === 'string') conn.user = ctx.user;
  return conn;
}

// ------------------------------------------------------------------------------------------------
// requests

export const TLS_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|altnames/i;

/** The server could not be reached or did not answer in time (never an HTTP status). */
export class KubeUnreachableError extends Error {
  override name = 'KubeUnreachableError';
}

export interface KubeResponse {
  status: number;
  body: string;
}

const agents = new WeakMap<KubeConnection, Agent>();

/** The keep-alive agent of a connection (one TLS handshake for the calls of one plugin run). */
function agentOf(c: KubeConnection): Agent {
  let a = agents.get(c);
  if (!a) {
    a = new Agent({ keepAlive: true, maxSockets: c.maxSockets ?? 8 });
    agents.set(c, a);
  }
  return a;
}

/** Close the connection's idle sockets (so that a process can end). */
export function closeConnection(c: KubeConnection): void {
  agents.get(c)?.destroy();
  agents.delete(c);
}

/** The Authorization header of a connection (its token file read now, when it has one). */
export function authHeaders(c: KubeConnection): Record<string, string> {
  const token = c.tokenFile ? readFileSync(c.tokenFile, 'utf8').trim() : c.token;
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** The TLS options of a connection (node:https): its CA, client certificate and key; verified unless insecure. */
export function tlsOptions(c: KubeConnection): {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
} {
  return {
    ...(c.ca ? { ca: c.ca } : {}),
    ...(c.cert ? { cert: c.cert } : {}),
    ...(c.key ? { key: c.key } : {}),
    rejectUnauthorized: !c.insecure,
  };
}

/**
 * One request: `path` is below the server (`/api/v1/nodes/x`), `body` is sent as JSON. Resolves with the status
 * and body of any HTTP answer; rejects with KubeUnreachableError when there is none within timeoutMs (connection
 * refused, TLS failure, timeout).
 */
export function kubeRequest(
  c: KubeConnection,
  method: string,
  path: string,
  body: unknown,
  timeoutMs: number,
  o: { contentType?: string } = {},
): Promise<KubeResponse> {
  return new Promise((resolvePromise, reject) => {
    let url: URL;
    try {
      url = new URL(`${c.server}${path}`);
    } catch {
      reject(new KubeConfigError(`${c.source}: the server ${JSON.stringify(c.server)} is not a URL`));
      return;
    }
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    let headers: Record<string, string>;
    try {
      headers = { accept: 'application/json', ...authHeaders(c) };
    } catch (e) {
      reject(new KubeConfigError(`${c.source}: cannot read the token: ${(e as Error).message}`));
      return;
    }
    if (payload) {
      headers['content-type'] = o.contentType ?? 'application/json';
      headers['content-length'] = String(payload.length);
    }
    let done = false;
    const fail = (e: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const code = (e as NodeJS.ErrnoException).code ?? '';
      if (TLS_ERRORS.test(`${code} ${e.message}`))
        reject(new KubeUnreachableError(`${url.origin}: TLS verification failed (${e.message})`));
      else reject(new KubeUnreachableError(`${url.origin}: ${e.message}`));
    };
    const req = request(
      url,
      {
        method,
        headers,
        agent: agentOf(c),
        ...tlsOptions(c),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          resolvePromise({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      },
    );
    // one bound for the whole exchange (connect, TLS, answer), not per socket inactivity
    const timer = setTimeout(() => {
      fail(new Error(`no answer within ${timeoutMs} ms`));
      req.destroy();
    }, timeoutMs);
    req.on('error', fail);
    req.end(payload);
  });
}
