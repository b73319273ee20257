/**
 * ptp network configuration: decoding with the reference's messages, and the ADD-time checks. Pure.
 */
import { IPAM_KEYS, type LinkConfBase, linkConfBase, NETCONF_KEYS } from '@cnikit/link';
import { CniError, decodeNetconf, ErrorCode, type Request, s } from '@cnikit/skel';

export const ptpSchema = s.object({
  ...NETCONF_KEYS,
  ipMasq: s.bool().default(false),
  ipMasqBackend: s.string().optional(),
  mtu: s.int().default(0),
  ...IPAM_KEYS,
});

export interface PtpConf extends LinkConfBase {
  ipMasq: boolean;
  /** As configured: undefined = detect; checked by `masqBackend` (the reference has no "auto" here). */
  ipMasqBackend: string | undefined;
  /** Container and host veth MTU; 0 = kernel default (the reference ignores values ≤ 0). */
  mtu: number;
  // ipamType '' (no IPAM in the config): every verb but GC then fails like the reference
}

/** Decode; errors read "failed to load netconf: …" like the reference (code 6 unless more specific). */
export function parseConf(raw: unknown, _req?: Pick<Request, 'args'>): PtpConf {
  const c = decodeNetconf(ptpSchema, raw);
  return {
    ...linkConfBase(c),
    ipMasq: c.ipMasq,
    ipMasqBackend: c.ipMasqBackend,
    mtu: Math.max(c.mtu, 0),
  };
}

/**
 * The masquerade backend of an ADD, checked before anything changes (the reference finds an unknown backend
 * only after the veth pair exists and leaves it behind). Same message as the reference.
 */
export function masqBackend(conf: PtpConf): 'iptables' | 'nftables' | undefined {
  const b = conf.ipMasqBackend;
  if (!conf.ipMasq || b === undefined) return undefined;
  if (b === 'iptables' || b === 'nftables') return b;
  throw new CniError(
    ErrorCode.InvalidNetworkConfig,
    `unknown ipmasq backend ${JSON.stringify(b)}`,
    'use "iptables" or "nftables", or leave ipMasqBackend out to detect',
  );
}
