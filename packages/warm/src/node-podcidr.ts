/**
 * The node's own pod subnet for `cnikit install-cni`: when the template refers to `${POD_CIDR}` or `${POD_CIDRS}`
 * and the environment does not set it, read `spec.podCIDR` / `spec.podCIDRs` of the Node `$NODE_NAME` from the
 * Kubernetes API server (in-cluster: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the pod's
 * service-account token, TLS verified against the service-account CA; never insecure).
 *
 * - `POD_CIDR`: `spec.podCIDR` (the first subnet); `POD_CIDR_V4` / `POD_CIDR_V6`: the node's IPv4 / IPv6 subnet
 *   from `spec.podCIDRs` (dual stack: one host-local range each; a family the node lacks is an error);
 *   `POD_CIDRS`: `spec.podCIDRs` joined with `,`.
 * - A node whose subnet is not allocated yet is asked again (bounded attempts and wait), then the install stops
 *   with an error naming the node, before anything is written.
 */
import { readFileSync } from 'node:fs';
import { InstallCniError } from './install-cni-error.ts';
import { getJson, SERVICE_ACCOUNT_DIR, TLS_ERRORS } from './kube-client.ts';

export { SERVICE_ACCOUNT_DIR };

export interface NodePodCidrOptions {
  /** Service-account token file (default `${SERVICE_ACCOUNT_DIR}/token`; env CNIKIT_SA_TOKEN_FILE). */
  tokenFile?: string;
  /** CA bundle the API server's certificate must chain to (default `${SERVICE_ACCOUNT_DIR}/ca.crt`; env CNIKIT_SA_CA_FILE). */
  caFile?: string;
  /** Attempts while the node has no pod subnet or the request fails transiently (default 5). */
  attempts?: number;
  /** Wait between attempts in ms (default 2000). */
  retryDelayMs?: number;
  /** Per-request timeout in ms (default 10000). */
  timeoutMs?: number;
  out?: (line: string) => void;
}

interface NodeSpec {
  podCIDR?: string;
  podCIDRs?: string[];
}

/** Not worth retrying (403, 404, bad answer). */
class Fatal extends Error {}

function refersTo(template: string, name: string): boolean {
  return new RegExp(`\\$\\{${name}(?::-[^}]*)?\\}`).test(template);
}

/**
 * `env` with POD_CIDR / POD_CIDRS filled from the Node object where `template` refers to them and env leaves them
 * unset or empty. Returns `env` itself when nothing is needed (no API call).
 */
export async function withNodePodCidr(
  env: Readonly<Record<string, string | undefined>>,
  template: string,
  o: NodePodCidrOptions = {},
): Promise<Readonly<Record<string, string | undefined>>> {
  const want = ['POD_CIDR', 'POD_CIDRS', 'POD_CIDR_V4', 'POD_CIDR_V6'].filter(
    (n) => refersTo(template, n) && !env[n],
  );
  if (want.length === 0) return env;
  const node = env.NODE_NAME;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  const needs = want.join(' and ');
  if (!node)
    throw new InstallCniError(
      `${needs} not set and NODE_NAME is not set: cannot ask for the node's pod subnet; nothing was written`,
    );
  if (!host)
    throw new InstallCniError(
      `${needs} not set and KUBERNETES_SERVICE_HOST is not set (not in a cluster?): cannot read node ${node}'s pod subnet; nothing was written`,
    );
  const tokenFile = o.tokenFile ?? env.CNIKIT_SA_TOKEN_FILE ?? `${SERVICE_ACCOUNT_DIR}/token`;
  const caFile = o.caFile ?? env.CNIKIT_SA_CA_FILE ?? `${SERVICE_ACCOUNT_DIR}/ca.crt`;
  let token: string;
  let ca: Buffer;
  try {
    token = readFileSync(tokenFile, 'utf8').trim();
    ca = readFileSync(caFile);
  } catch (e) {
    throw new InstallCniError(
      `cannot read the service-account credentials: ${(e as Error).message}; nothing was written`,
    );
  }
  const url = new URL(
    `https://${host.includes(':') ? `[${host}]` : host}:${port}/api/v1/nodes/${encodeURIComponent(node)}`,
  );
  const attempts = Math.max(1, o.attempts ?? 5);
  const delay = o.retryDelayMs ?? 2000;
  let last = '';
  for (let i = 1; i <= attempts; i++) {
    try {
      const r = await getJson(url, token, ca, o.timeoutMs ?? 10_000);
      if (r.status === 401 || r.status === 403)
        throw new Fatal(
          `GET ${url.pathname}: HTTP ${r.status} (${r.status === 403 ? 'forbidden: the service account needs "get" on nodes (ClusterRole cnikit)' : 'unauthorized: token rejected'})`,
        );
      if (r.status === 404) throw new Fatal(`node ${node} not found (GET ${url.pathname}: HTTP 404)`);
      if (r.status !== 200) {
        last = `GET ${url.pathname}: HTTP ${r.status}`;
      } else {
        let spec: NodeSpec;
        try {
          spec = ((JSON.parse(r.body) as { spec?: NodeSpec }).spec ?? {}) as NodeSpec;
        } catch {
          throw new Fatal(`GET ${url.pathname}: the answer is not JSON`);
        }
        const cidrs = (spec.podCIDRs?.length ? spec.podCIDRs : spec.podCIDR ? [spec.podCIDR] : []).filter(
          (c) => typeof c === 'string' && c !== '',
        );
        if (cidrs.length > 0) {
          const filled: Record<string, string | undefined> = { ...env };
          if (want.includes('POD_CIDR')) filled.POD_CIDR = spec.podCIDR || cidrs[0];
          if (want.includes('POD_CIDRS')) filled.POD_CIDRS = cidrs.join(',');
          for (const [name, v6] of [
            ['POD_CIDR_V4', false],
            ['POD_CIDR_V6', true],
          ] as const) {
            if (!want.includes(name)) continue;
            const c = cidrs.find((x) => x.includes(':') === v6);
            if (c === undefined)
              throw new InstallCniError(
                `\${${name}}: node ${node} has no IPv${v6 ? 6 : 4} pod subnet (spec.podCIDRs: ${cidrs.join(', ')}); nothing was written`,
              );
            filled[name] = c;
          }
          o.out?.(`node ${node}: pod subnet ${cidrs.join(', ')} (spec.podCIDRs)`);
          return filled;
        }
        last = `node ${node} has no pod subnet yet (spec.podCIDR is empty: is the controller manager's --allocate-node-cidrs on?)`;
      }
    } catch (e) {
      if (e instanceof Fatal) throw new InstallCniError(`${e.message}; nothing was written`);
      const msg = (e as Error).message;
      if (TLS_ERRORS.test(`${(e as { code?: string }).code ?? ''} ${msg}`))
        throw new InstallCniError(
          `${url.origin}: TLS verification against ${caFile} failed (${msg}); nothing was written`,
        );
      last = `${url.origin}: ${msg}`;
    }
    if (i < attempts) {
      o.out?.(`${last}; retrying in ${delay} ms (${i}/${attempts})`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  throw new InstallCniError(
    `${needs} for node ${node}: ${last} after ${attempts} attempts; nothing was written`,
  );
}
