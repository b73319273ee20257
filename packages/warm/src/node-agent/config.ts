/**
 * The node agent's configuration: ConfigMap keys (deploy/kubernetes/configmap.yaml) that the DaemonSet hands to the
 * serve container as environment variables. Every value is checked before anything is programmed; a bad one is an
 * error naming the ConfigMap key (and its variable), the agent stays not ready and touches nothing.
 */
import { canonicalCIDR, type Family, familyOf, formatCIDR, networkCIDR, parseCIDR } from '@cnikit/ip';

export type Mode = 'host-gw' | 'vxlan' | 'auto';
export const MODES: readonly Mode[] = ['host-gw', 'vxlan', 'auto'];

export interface NodeAgentConfig {
  nodeName: string;
  mode: Mode;
  vxlan: { id: number; port: number; mtu: number | undefined };
  /** The cluster's pod CIDRs (cluster-cidr); may be empty when masquerading is off. */
  clusterCidrs: string[];
  /** Destinations that keep the pod's source address (default: clusterCidrs). */
  nonMasqueradeCidrs: string[];
  masquerade: boolean;
  resyncMs: number;
  /** host:port of the /readyz and /healthz listener; undefined: none. */
  health: { host: string; port: number } | undefined;
  /** A JSON kubeconfig instead of the in-cluster service account (tests, or an agent outside a pod). */
  kubeconfig: string | undefined;
}

/** ConfigMap key → environment variable of the serve container (daemonset.yaml). */
export const KEYS = {
  'node-agent': 'CNIKIT_NODE_AGENT',
  'node-agent-mode': 'CNIKIT_NODE_AGENT_MODE',
  'vxlan-id': 'CNIKIT_VXLAN_ID',
  'vxlan-port': 'CNIKIT_VXLAN_PORT',
  'vxlan-mtu': 'CNIKIT_VXLAN_MTU',
  'cluster-cidr': 'CNIKIT_CLUSTER_CIDR',
  'non-masquerade-cidrs': 'CNIKIT_NON_MASQUERADE_CIDRS',
  masquerade: 'CNIKIT_MASQUERADE',
  'node-agent-resync-seconds': 'CNIKIT_NODE_AGENT_RESYNC_SECONDS',
  'node-agent-health': 'CNIKIT_NODE_AGENT_HEALTH',
} as const;
export type Key = keyof typeof KEYS;

/** A bad value: `key` is the ConfigMap key. */
export class ConfigError extends Error {
  readonly key: string;
  constructor(key: string, message: string) {
    const env = (KEYS as Record<string, string>)[key];
    super(`ConfigMap key ${key}${env ? ` (${env})` : ''}: ${message}`);
    this.name = 'ConfigError';
    this.key = key;
  }
}

/** True when the environment asks for the agent (`node-agent: "on"`). */
export function nodeAgentEnabled(env: Readonly<Record<string, string | undefined>>): boolean {
  const v = (env[KEYS['node-agent']] ?? '').trim().toLowerCase();
  return v === 'on' || v === 'true' || v === '1';
}

function intIn(key: Key, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw.trim()))
    throw new ConfigError(key, `${JSON.stringify(raw)} is not an integer (${min}..${max})`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(key, `${n} is out of range (${min}..${max})`);
  return n;
}

function cidrList(key: Key, raw: string): string[] {
  const out: string[] = [];
  for (const part of raw.split(/[\s,]+/).filter((p) => p !== '')) {
    const c = parseCIDR(part);
    if (!c)
      throw new ConfigError(
        key,
        `${JSON.stringify(part)} is not a CIDR (e.g. 10.244.0.0/16, fd00:10:244::/56)`,
      );
    out.push(formatCIDR(networkCIDR(c)));
  }
  return out;
}

function onOff(key: Key, raw: string | undefined, dflt: boolean): boolean {
  if (raw === undefined || raw.trim() === '') return dflt;
  const v = raw.trim().toLowerCase();
  if (['on', 'true', '1', 'yes'].includes(v)) return true;
  if (['off', 'false', '0', 'no'].includes(v)) return false;
  throw new ConfigError(key, `${JSON.stringify(raw)} is neither "on" nor "off"`);
}

/** The configuration from the environment; throws a ConfigError naming the first bad key. */
export function parseNodeAgentConfig(env: Readonly<Record<string, string | undefined>>): NodeAgentConfig {
  const get = (k: Key) => {
    const v = env[KEYS[k]];
    return v === undefined || v.trim() === '' ? undefined : v;
  };
  const nodeName = env.NODE_NAME?.trim();
  if (!nodeName)
    throw new ConfigError('NODE_NAME', 'the node agent needs NODE_NAME (the downward API spec.nodeName)');
  const modeRaw = (get('node-agent-mode') ?? 'auto').trim();
  if (!(MODES as readonly string[]).includes(modeRaw))
    throw new ConfigError(
      'node-agent-mode',
      `unknown mode ${JSON.stringify(modeRaw)} (host-gw, vxlan or auto)`,
    );
  const id = intIn('vxlan-id', get('vxlan-id') ?? '1', 1, 16_777_215);
  const port = intIn('vxlan-port', get('vxlan-port') ?? '8472', 1, 65_535);
  const mtuRaw = get('vxlan-mtu');
  const mtu = mtuRaw === undefined ? undefined : intIn('vxlan-mtu', mtuRaw, 1280, 65_485);
  const clusterCidrs = cidrList('cluster-cidr', get('cluster-cidr') ?? '');
  const nmRaw = get('non-masquerade-cidrs');
  const nonMasqueradeCidrs = nmRaw === undefined ? clusterCidrs : cidrList('non-masquerade-cidrs', nmRaw);
  const masquerade = onOff('masquerade', get('masquerade'), true);
  if (masquerade && nonMasqueradeCidrs.length === 0)
    throw new ConfigError(
      'cluster-cidr',
      'masquerading needs the cluster pod CIDR(s) (cluster-cidr, or non-masquerade-cidrs), or masquerade: "off"',
    );
  const resync = intIn('node-agent-resync-seconds', get('node-agent-resync-seconds') ?? '30', 1, 3600);
  let health: NodeAgentConfig['health'];
  const h = get('node-agent-health') ?? '127.0.0.1:9809';
  if (h !== 'off') {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d+)$/.exec(h.trim());
    const host = m ? (m[1] ?? m[2] ?? '') : '';
    if (!m || (host !== '' && familyOf(host) === undefined))
      throw new ConfigError('node-agent-health', `${JSON.stringify(h)} is not HOST:PORT, :PORT or "off"`);
    health = { host: host || '0.0.0.0', port: intIn('node-agent-health', m[3] as string, 1, 65_535) };
  }
  return {
    nodeName,
    mode: modeRaw as Mode,
    vxlan: { id, port, mtu },
    clusterCidrs,
    nonMasqueradeCidrs,
    masquerade,
    resyncMs: resync * 1000,
    health,
    kubeconfig: env.CNIKIT_KUBECONFIG?.trim() || undefined,
  };
}

export function familyOfCidr(c: string): Family | undefined {
  const canon = canonicalCIDR(c);
  return canon ? familyOf(canon.split('/')[0] as string) : undefined;
}
