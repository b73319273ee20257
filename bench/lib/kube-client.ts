/**
 * The benchmark's (and the whereabouts import driver's) Kubernetes calls: the project's one client
 * (@cnikit/warm/kube: the kubeconfig's connection, TLS verified, one bound per request), with the body parsed as JSON.
 */
import { closeConnection, kubeconfigConnection, kubeRequest } from '@cnikit/warm/kube';

// biome-ignore lint/suspicious/noExplicitAny: API objects of many shapes
type ApiObject = any;

/** The benchmark's API calls over the project's client: JSON in and out, `maxSockets` at once (default 8). */
export class KubeClient {
  readonly #conn;
  constructor(kubeconfig: string, o: { maxSockets?: number } = {}) {
    this.#conn = { ...kubeconfigConnection(kubeconfig), maxSockets: o.maxSockets };
  }
  async request(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<{ status: number; body: ApiObject }> {
    const r = await kubeRequest(this.#conn, method, path, body, 10_000, { contentType });
    let parsed: unknown = r.body;
    try {
      parsed = r.body ? JSON.parse(r.body) : undefined;
    } catch {}
    return { status: r.status, body: parsed };
  }
  close(): void {
    closeConnection(this.#conn);
  }
}
