/**
 * The firewall plugin's per-address FORWARD rules as iptables-nft stores them, so that DEL can remove them in one
 * nf_tables transaction over nfnetlink instead of iptables-save + iptables-restore. Only rules whose expression list
 * is EXACTLY what iptables-nft makes of the reference's two rules are picked:
 *
 *   -d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
 *       payload load 4b @ network header + 16 → reg 1; cmp eq reg 1 <ip>; match conntrack rev 3 (state RELATED|
 *       ESTABLISHED, nothing else); counter; immediate accept
 *   -s <ip>/32 -j ACCEPT
 *       payload load 4b @ network header + 12 → reg 1; cmp eq reg 1 <ip>; counter; immediate accept
 *
 * (IPv6: 16 bytes at + 24 / + 8.) Anything else — other states, other matches, a user's similar rule — is left alone.
 */

import { type IPFamily, probeKernel, type ToolOptions } from '@cnikit/firewall';
import { parseCIDR, toBytes } from '@cnikit/ip';
import { type NftExpr, nftRemoveRulesWhere, xtablesTableLoaded } from '@cnikit/netlink';

const NFT_PAYLOAD_NETWORK_HEADER = 1;
const NFT_CMP_EQ = 0;
/** NFTA_DATA_VERDICT { NFTA_VERDICT_CODE = NF_ACCEPT (1) } as the kernel dumps it. */
const ACCEPT_VERDICT = Buffer.from('0c0002000800010000000001', 'hex');
/** struct xt_conntrack_mtinfo3 as iptables fills it for `--ctstate RELATED,ESTABLISHED` (168 bytes, aligned). */
const CONNTRACK_INFO = (() => {
  const b = Buffer.alloc(168);
  b.writeUInt16LE(1, 146); // match_flags: XT_CONNTRACK_STATE
  b.writeUInt16LE(6, 150); // state_mask: ESTABLISHED (1 << 1) | RELATED (1 << 2)
  return b;
})();

const be32 = (e: NftExpr, type: number) => {
  const v = e.attrs.get(type);
  return v && v.length === 4 ? v.readUInt32BE(0) : undefined;
};

function isPayload(e: NftExpr | undefined, offset: number, len: number): boolean {
  return (
    e?.name === 'payload' &&
    be32(e, 1) === 1 && // dreg: register 1
    be32(e, 2) === NFT_PAYLOAD_NETWORK_HEADER &&
    be32(e, 3) === offset &&
    be32(e, 4) === len &&
    e.attrs.size === 4
  );
}

function isCmpEq(e: NftExpr | undefined, value: Uint8Array): boolean {
  if (e?.name !== 'cmp' || be32(e, 1) !== 1 || be32(e, 2) !== NFT_CMP_EQ) return false;
  const data = e.attrs.get(3); // NFTA_CMP_DATA { NFTA_DATA_VALUE }
  if (!data || data.length < 4 + value.length) return false;
  return (
    data.readUInt16LE(0) === 4 + value.length &&
    data.readUInt16LE(2) === 1 &&
    data.subarray(4, 4 + value.length).equals(value)
  );
}

function isConntrackEstablished(e: NftExpr | undefined): boolean {
  if (e?.name !== 'match') return false;
  const name = e.attrs.get(1);
  return (
    name?.toString('latin1').replace(/\0+$/, '') === 'conntrack' &&
    be32(e, 2) === 3 &&
    e.attrs.get(3)?.equals(CONNTRACK_INFO) === true
  );
}

function isAccept(e: NftExpr | undefined): boolean {
  if (e?.name !== 'immediate' || be32(e, 1) !== 0) return false;
  // NFTA_IMMEDIATE_DATA { NFTA_DATA_VERDICT { NFTA_VERDICT_CODE = NF_ACCEPT } }
  const d = e.attrs.get(2);
  return d?.equals(ACCEPT_VERDICT) === true;
}

/** Whether `exprs` is one of the two reference rules for the address `ip` (raw bytes). */
export function isPerIPForwardRule(exprs: readonly NftExpr[], ip: Uint8Array): boolean {
  const v4 = ip.length === 4;
  const [p, c, ...rest] = exprs;
  if (!isCmpEq(c, ip)) return false;
  const names = rest.map((e) => e.name).join(',');
  if (isPayload(p, v4 ? 12 : 8, ip.length)) return names === 'counter,immediate' && isAccept(rest[1]);
  if (isPayload(p, v4 ? 16 : 24, ip.length))
    return names === 'match,counter,immediate' && isConntrackEstablished(rest[0]) && isAccept(rest[2]);
  return false;
}

/**
 * Remove the per-address rules of `hostIPs` (`<ip>/32`, `<ip>/128` of `family`) from the filter chain `chain` over
 * nfnetlink, when no legacy x_tables filter table is loaded (iptables-nft). True when every expected rule (two per
 * address) was found and removed in one transaction; false when the caller must use the tools (legacy tables, a rule
 * not found — perhaps already gone — or the kernel did not go along); the tools then see what is left.
 */
export function removePerIPRulesFast(
  family: IPFamily,
  chain: string,
  hostIPs: readonly string[],
  opts: ToolOptions,
): boolean {
  const raw = hostIPs.map((h) => {
    const c = parseCIDR(h);
    return c ? toBytes(c.ip) : undefined;
  });
  if (raw.some((r) => r === undefined)) return false;
  const ips = raw as Uint8Array[];
  return probeKernel<boolean>(
    opts,
    () => {
      if (xtablesTableLoaded(family, 'filter') !== false) return false;
      const removed = nftRemoveRulesWhere(family, 'filter', chain, (exprs) =>
        ips.some((ip) => isPerIPForwardRule(exprs, ip)),
      );
      return removed === ips.length * 2;
    },
    false,
  );
}
