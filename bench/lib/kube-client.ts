/**
 * The benchmark's Kubernetes API client: a kubeconfig with embedded client certificate (what
 * scripts/k8s/control-plane.ts writes), one keep-alive HTTPS agent, JSON in and out. Nothing else.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { parse } from 'yaml';

export interface KubeResponse {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: API objects of many shapes
  body: any;
}

export class KubeClient {
  readonly server: URL;
  readonly #agent: https.Agent;
  readonly #timeoutMs: number;

  constructor(kubeconfigPath: string, opts: { timeoutMs?: number; maxSockets?: number } = {}) {
    const kc = parse(readFileSync(kubeconfigPath, 'utf8'));
    const ctx = kc.contexts.find((c: { name: string }) => c.name === kc['current-context']).context;
    const cluster = kc.clusters.find((c: { name: string }) => c.name === ctx.cluster).cluster;
    const user = kc.users.find((u: { name: string }) => u.name === ctx.user).user;
    const data = (k: string) => Buffer.from(String(k), 'base64');
    this.server = new URL(cluster.server);
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#agent = new https.Agent({
      keepAlive: true,
      maxSockets: opts.maxSockets ?? 16,
      ca: data(cluster['certificate-authority-data']),
      cert: data(user['client-certificate-data']),
      key: data(user['client-key-data']),
    });
  }

  request(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<KubeResponse> {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = https.request(
        new URL(path, this.server),
        {
          method,
          agent: this.#agent,
          timeout: this.#timeoutMs,
          headers: {
            accept: 'application/json',
            ...(data ? { 'content-type': contentType, 'content-length': data.length } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = text ? JSON.parse(text) : undefined;
            } catch {}
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () =>
        req.destroy(new Error(`${method} ${path}: no answer within ${this.#timeoutMs} ms`)),
      );
      req.on('error', reject);
      req.end(data);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
