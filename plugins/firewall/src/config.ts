/**
 * firewall configuration and rule texts (reference: plugins/meta/firewall, plugins.md §7): decoding, defaults,
 * validation of the admin chain name and the ingress policy, the host-route form of the prevResult addresses,
 * and the exact iptables rules of the reference at HEAD. Pure: no system access.
 */
import { formatIP, parseCIDR } from '@cnikit/ip';
import { CniError, decode, ErrorCode, goQuote, type Infer, type Result, s } from '@cnikit/skel';
import { goList } from '@cnikit/skel/go';

export const DEFAULT_ADMIN_CHAIN = 'CNI-ADMIN';
export const DEFAULT_ZONE = 'trusted';
export const DEFAULT_DATA_DIR = '/var/lib/cni/firewall';
export const PRIV_CHAIN = 'CNI-FORWARD';
export const STAGE1_CHAIN = 'CNI-ISOLATION-STAGE-1';
export const STAGE2_CHAIN = 'CNI-ISOLATION-STAGE-2';

export type Backend = 'iptables' | 'firewalld';
export type IngressPolicy = 'open' | 'same-bridge' | 'isolated';

const confSchema = s.object({
  name: s.string().default(''),
  backend: s.string().default(''),
  iptablesAdminChainName: s.string().default(''),
  firewalldZone: s.string().default(''),
  ingressPolicy: s.string().default(''),
  dataDir: s.string().default(''),
});

export type RawConf = Infer<typeof confSchema>;

export interface FirewallConf {
  name: string;
  /** The configured backend; undefined = auto (firewalld when it owns its D-Bus name, else iptables). */
  backend: Backend | undefined;
  adminChain: string;
  zone: string;
  /** The validated policy, or undefined with `ingressError` set (DEL reports it only after its cleanup). */
  ingressPolicy: IngressPolicy | undefined;
  ingressError?: CniError;
  dataDir: string;
}

/** Chain names that a user chain may not take: built-in chains, our own chains, the standard targets. */
const RESERVED = new Set([
  'INPUT',
  'OUTPUT',
  'FORWARD',
  'PREROUTING',
  'POSTROUTING',
  PRIV_CHAIN,
  STAGE1_CHAIN,
  STAGE2_CHAIN,
]);
/** Target names iptables refuses as chain names ("chain name may not clash with target name"). */
const TARGETS = new Set(
  (
    'ACCEPT DROP RETURN QUEUE AUDIT CHECKSUM CLASSIFY CLUSTERIP CONNMARK CONNSECMARK CT DNAT DNPT DSCP ECN HL HMARK ' +
    'IDLETIMER LED LOG MARK MASQUERADE MIRROR NETMAP NFLOG NFQUEUE NOTRACK RATEEST REDIRECT REJECT SAME SECMARK SET ' +
    'SNAT SNPT STANDARD ERROR SYNPROXY TCPMSS TCPOPTSTRIP TEE TOS TPROXY TRACE TTL ULOG'
  ).split(' '),
);

/**
 * Why `name` cannot be the admin chain, or undefined when it can: iptables takes 1–28 bytes, not starting with
 * `-` or `!`, no blanks, not a target name; cnikit also refuses quotes, backslashes and non-ASCII (they would need
 * quoting in every tool), the built-in chains and the plugin's own chains (a jump to them loops).
 */
export function adminChainProblem(name: string): string | undefined {
  if (name.length > 28) return 'is longer than 28 characters';
  if (!/^[\x21-\x7e]+$/.test(name)) return 'may only contain printable ASCII characters without blanks';
  if (/["'\\]/.test(name)) return 'may not contain quotes or backslashes';
  if (name.startsWith('-') || name.startsWith('!')) return 'may not start with "-" or "!"';
  if (RESERVED.has(name)) return 'is a built-in chain or a chain of the plugin itself';
  if (TARGETS.has(name)) return 'is the name of an iptables target';
  return undefined;
}

function invalid(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

/** The reference's parseConf (prevResult is parsed by skel), with cnikit's validation of the admin chain name. */
export function parseConf(config: Record<string, unknown>): FirewallConf {
  let raw: RawConf;
  try {
    raw = decode(confSchema, config);
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(e.code, `failed to load netconf: ${e.msg}`, e.details, { cause: err });
  }
  const adminChain = raw.iptablesAdminChainName || DEFAULT_ADMIN_CHAIN;
  const problem = adminChainProblem(adminChain);
  if (problem) {
    throw invalid(`invalid iptablesAdminChainName ${goQuote(adminChain)}: an iptables chain name ${problem}`);
  }
  const conf: FirewallConf = {
    name: raw.name,
    backend: raw.backend === 'iptables' || raw.backend === 'firewalld' ? raw.backend : undefined,
    adminChain,
    zone: raw.firewalldZone || DEFAULT_ZONE,
    ingressPolicy: undefined,
    dataDir: raw.dataDir || DEFAULT_DATA_DIR,
  };
  switch (raw.ingressPolicy) {
    case '':
    case 'open':
      conf.ingressPolicy = 'open';
      break;
    case 'same-bridge':
    case 'isolated':
      conf.ingressPolicy = raw.ingressPolicy;
      break;
    default:
      conf.ingressError = invalid(`unknown ingress policy: ${goQuote(raw.ingressPolicy)}`);
  }
  return conf;
}

/** The policy, or the unknown-policy error (code 7). */
export function ingressPolicyOf(conf: FirewallConf): IngressPolicy {
  if (conf.ingressError || !conf.ingressPolicy) throw conf.ingressError;
  return conf.ingressPolicy;
}

export interface HostIP {
  family: 4 | 6;
  /** `<ip>/32` or `<ip>/128` (the reference's ipString). */
  ip: string;
}

/** The reference's ipString of one prevResult address: the address as a host route; undefined if unparsable. */
export function hostRoute(address: string): HostIP | undefined {
  const c = parseCIDR(address);
  if (!c) return undefined;
  return { family: c.ip.family, ip: `${formatIP(c.ip)}/${c.ip.family === 4 ? 32 : 128}` };
}

/** Every prevResult address as a host route, in result order, without repeats. */
export function resultIPs(result: Result | undefined): HostIP[] {
  const out: HostIP[] = [];
  for (const ipc of result?.ips ?? []) {
    const h = hostRoute(ipc.address);
    if (h && !out.some((o) => o.ip === h.ip)) out.push(h);
  }
  return out;
}

export { goList };

// ---------------------------------------------------------------------------------------------
// The reference's rules (iptables.go, ingresspolicy.go at HEAD)

export const forwardJumpRule = (): string[] => [
  '-m',
  'comment',
  '--comment',
  'CNI firewall plugin rules',
  '-j',
  PRIV_CHAIN,
];

export const adminJumpRule = (admin: string): string[] => [
  '-m',
  'comment',
  '--comment',
  'CNI firewall plugin admin overrides',
  '-j',
  admin,
];

/** The two per-address rules of CNI-FORWARD. */
export const ipRules = (ip: string): string[][] => [
  ['-d', ip, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
  ['-s', ip, '-j', 'ACCEPT'],
];

const DEFAULT_COMMENT = 'CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)';
const withComment = (rule: string[], comment: string) => [...rule, '-m', 'comment', '--comment', comment];
const policyComment = (policy: 'same-bridge' | 'isolated') =>
  `CNI firewall plugin rules (ingressPolicy: ${policy})`;

/** One isolation step: insert at position 1 (when `first`) or append, only when missing. */
export interface IsolationStep {
  chain: string;
  rule: string[];
  first: boolean;
}

/** The reference's setupIsolationChains, in its order (chains CNI-ISOLATION-STAGE-1/2 are ensured first). */
export function isolationSteps(bridge: string, policy: 'same-bridge' | 'isolated'): IsolationStep[] {
  const steps: IsolationStep[] = [
    { chain: 'FORWARD', rule: withComment(['-j', STAGE1_CHAIN], DEFAULT_COMMENT), first: true },
    {
      chain: STAGE1_CHAIN,
      rule: withComment(['-i', bridge, '!', '-o', bridge, '-j', STAGE2_CHAIN], policyComment(policy)),
      first: true,
    },
  ];
  if (policy === 'isolated') {
    steps.push({
      chain: STAGE1_CHAIN,
      rule: withComment(['-i', bridge, '-o', bridge, '-j', 'DROP'], policyComment(policy)),
      first: true,
    });
  }
  steps.push(
    { chain: STAGE1_CHAIN, rule: withComment(['-j', 'RETURN'], DEFAULT_COMMENT), first: false },
    { chain: STAGE2_CHAIN, rule: withComment(['-o', bridge, '-j', 'DROP'], DEFAULT_COMMENT), first: true },
    { chain: STAGE2_CHAIN, rule: withComment(['-j', 'RETURN'], DEFAULT_COMMENT), first: false },
  );
  return steps;
}

/** The bridge name for an ingress policy: prevResult.interfaces[0].name, with the reference's errors. */
export function bridgeName(result: Result, policy: IngressPolicy): string {
  const ifaces = result.interfaces ?? [];
  if (ifaces.length === 0) {
    throw new CniError(
      ErrorCode.Internal,
      `interface needs to be set for ingress policy ${goQuote(policy)}, make sure to chain "firewall" plugin with "bridge"`,
    );
  }
  const intf = ifaces[0];
  if (!intf) throw new CniError(ErrorCode.Internal, 'got nil interface');
  if (!intf.name) throw new CniError(ErrorCode.Internal, 'got empty bridge name');
  if (!/^[^\s"'\\!/:][^\s"'\\/:]{0,14}$/.test(intf.name)) {
    throw new CniError(
      ErrorCode.Internal,
      `invalid bridge name ${goQuote(intf.name)} in prevResult.interfaces[0] for ingress policy ${goQuote(policy)}`,
    );
  }
  return intf.name;
}
