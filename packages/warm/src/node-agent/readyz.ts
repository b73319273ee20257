/**
 * The node agent's part of the serve container's readiness probe (`install-cni --check --socket …`, daemonset.yaml):
 * when the probe's environment (the container's) turns the agent on, the pod is ready only while the agent's
 * /readyz answers 200 — a bad ConfigMap value (the agent programs nothing) shows as a not-ready pod, and the 503's
 * line, which names the key, is the probe's output (`kubectl describe pod`).
 */
import { request } from 'node:http';
import { nodeAgentEnabled, parseNodeAgentConfig } from './config.ts';

const TIMEOUT_MS = 5000;

/** The /readyz address of the agent configured by `env` (an unspecified host is asked on loopback). */
export function readyzTarget(
  env: Readonly<Record<string, string | undefined>>,
): { host: string; port: number } | undefined {
  const raw = env.CNIKIT_NODE_AGENT_HEALTH?.trim() || '127.0.0.1:9809';
  if (raw === 'off') return undefined;
  // the listener's own parse (the rest of the configuration may be bad: that is what /readyz reports)
  const h = parseNodeAgentConfig({
    NODE_NAME: 'probe',
    CNIKIT_MASQUERADE: 'off',
    CNIKIT_NODE_AGENT_HEALTH: raw,
  }).health as { host: string; port: number };
  const host = h.host === '0.0.0.0' ? '127.0.0.1' : h.host === '::' ? '::1' : h.host;
  return { host, port: h.port };
}

/** 0 when the agent is off, its health listener is off, or /readyz answers 200; else 1 with a line saying why. */
export async function checkNodeAgentReady(
  env: Readonly<Record<string, string | undefined>>,
  out: (line: string) => void,
): Promise<number> {
  if (!nodeAgentEnabled(env)) return 0;
  let t: { host: string; port: number } | undefined;
  try {
    t = readyzTarget(env);
  } catch (e) {
    out(`not ready: node agent: ${(e as Error).message}`);
    return 1;
  }
  if (!t) {
    out('ok: node agent on, its /readyz is off (node-agent-health: "off")');
    return 0;
  }
  const where = `http://${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}/readyz`;
  const r = await new Promise<{ status: number; body: string } | Error>((resolve) => {
    const req = request(
      { host: t.host, port: t.port, path: '/readyz', method: 'GET', timeout: TIMEOUT_MS, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (body.length < 4096) body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', resolve);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    req.on('error', resolve);
    req.end();
  });
  if (r instanceof Error) {
    out(`not ready: node agent ${where}: ${r.message}`);
    return 1;
  }
  if (r.status !== 200) {
    out(`not ready: node agent ${where}: HTTP ${r.status}: ${r.body.trim()}`);
    return 1;
  }
  out(`ok: node agent ready (${where})`);
  return 0;
}
