/**
 * MAC spoof checking on a bridge port (bridge plugin `macspoofchk`), with the same nftables
 * objects as the reference's pkg/link SpoofChecker (plugins.md §9.5):
 *   table bridge nat; base chain PREROUTING (filter, prerouting, priority -300, policy accept);
 *   PREROUTING:            iifname "<iface>" jump cni-br-iface-<refID>
 *   cni-br-iface-<refID>:  jump cni-br-iface-<refID>-mac
 *   …-mac:                 ether saddr <mac> return; drop
 * every rule commented `macspoofchk-<refID>`. The bridge plugin uses refID `<containerID>-<ifName>`.
 */
import { formatMac, getLink, parseMac, withNetns } from '@cnikit/netlink';
import { SysError } from '@cnikit/sys';
import type { ToolOptions } from './exec.ts';
import { NftBatch, nftList } from './nftables.ts';

const TABLE = 'nat';
const BASE = 'PREROUTING';

export interface SpoofCheckArgs extends ToolOptions {
  /** Host-side interface (bridge port) the container's frames arrive on. */
  iface: string;
  /** The only source MAC allowed from that interface. */
  mac: string;
  refID: string;
}

export const spoofCheckNames = (refID: string) => ({
  ifaceChain: `cni-br-iface-${refID}`,
  macChain: `cni-br-iface-${refID}-mac`,
  comment: `macspoofchk-${refID}`,
});

function preroutingRulesOf(refID: string, opts: ToolOptions) {
  const { comment } = spoofCheckNames(refID);
  const listing = nftList(['table', 'bridge', TABLE], opts);
  return {
    rules: listing.rules.filter((r) => r.chain === BASE && r.comment === comment),
    chains: new Set(listing.chains.map((c) => c.name)),
  };
}

/**
 * Install (or re-install) the spoof check in ONE nft transaction: table and chains are declared,
 * the per-port chains flushed and refilled, and any earlier PREROUTING jump of this refID replaced
 * (so repeating setup does not duplicate rules, unlike the reference).
 */
export function setupSpoofCheck(args: SpoofCheckArgs): void {
  const macBytes = parseMac(args.mac);
  if (!macBytes) throw new TypeError(`invalid MAC address for spoof check: ${JSON.stringify(args.mac)}`);
  const mac = formatMac(macBytes);
  const { ifaceChain, macChain, comment } = spoofCheckNames(args.refID);
  const old = preroutingRulesOf(args.refID, args).rules;
  const tx = new NftBatch(args);
  tx.addTable('bridge', TABLE);
  tx.addChain({
    family: 'bridge',
    table: TABLE,
    name: BASE,
    type: 'filter',
    hook: 'prerouting',
    priority: -300,
    policy: 'accept',
  });
  tx.addChain({ family: 'bridge', table: TABLE, name: ifaceChain });
  tx.addChain({ family: 'bridge', table: TABLE, name: macChain });
  tx.flushChain('bridge', TABLE, ifaceChain);
  tx.flushChain('bridge', TABLE, macChain);
  for (const r of old) tx.deleteRule('bridge', TABLE, BASE, r.handle);
  tx.addRule('bridge', TABLE, BASE, `iifname ${quoteIface(args.iface)} jump ${ifaceChain}`, { comment });
  tx.addRule('bridge', TABLE, ifaceChain, `jump ${macChain}`, { comment });
  tx.addRule('bridge', TABLE, macChain, `ether saddr ${mac} return`, { comment });
  tx.addRule('bridge', TABLE, macChain, 'drop', { comment });
  try {
    tx.commit();
  } catch (e) {
    throw new Error(`failed to setup spoof-check: ${(e as Error).message}`, { cause: e });
  }
}

function quoteIface(name: string): string {
  if (!/^[^\s"/\\;#]{1,15}$/.test(name))
    throw new TypeError(`invalid interface name for spoof check: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/**
 * Remove the spoof check of `refID` in ONE nft transaction: the PREROUTING jump(s) carrying its
 * comment and both per-port chains. Table and base chain stay (shared). Anything already gone is
 * fine.
 */
export function teardownSpoofCheck(refID: string, opts: ToolOptions = {}): void {
  const { ifaceChain, macChain } = spoofCheckNames(refID);
  try {
    const { rules, chains } = preroutingRulesOf(refID, opts);
    const tx = new NftBatch(opts);
    for (const r of rules) tx.deleteRule('bridge', TABLE, BASE, r.handle);
    for (const c of [ifaceChain, macChain]) if (chains.has(c)) tx.flushChain('bridge', TABLE, c);
    for (const c of [ifaceChain, macChain]) if (chains.has(c)) tx.deleteChain('bridge', TABLE, c);
    tx.commit();
  } catch (e) {
    throw new Error(`failed to teardown spoof-check: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * GC of spoof checks: a PREROUTING jump whose refID (after `macspoofchk-`) is not in `validRefIDs`
 * AND whose input interface no longer exists (looked up in `opts.netns`, else the calling thread's
 * namespace) is stale,
 * whatever network it belonged to (the bridge refID `<containerID>-<ifName>` carries no network name,
 * so rules whose interface still exists are left alone). Every stale refID is torn down; failures are
 * collected and thrown together at the end (one line each).
 */
export function gcSpoofCheck(validRefIDs: ReadonlySet<string>, opts: ToolOptions = {}): void {
  const linkExists = (name: string) =>
    opts.netns ? withNetns(opts.netns, () => getLink(name) !== undefined) : getLink(name) !== undefined;
  const listing = nftList(['chain', 'bridge', TABLE, BASE], opts);
  const stale = new Set<string>();
  for (const r of listing.rules) {
    if (!r.comment?.startsWith('macspoofchk-')) continue;
    const refID = r.comment.slice('macspoofchk-'.length);
    if (validRefIDs.has(refID)) continue;
    const iface = iifnameOf(r.expr);
    if (iface !== undefined && linkExists(iface)) continue;
    stale.add(refID);
  }
  const errors: string[] = [];
  for (const refID of stale) {
    try {
      teardownSpoofCheck(refID, opts);
    } catch (err) {
      errors.push(SysError.reasonOf(err));
    }
  }
  if (errors.length) throw new Error(errors.join('\n'));
}

/** The interface name an nft JSON rule matches with `iifname "<name>"`, if any. */
export function iifnameOf(expr: readonly unknown[]): string | undefined {
  for (const e of expr) {
    const m = (e as { match?: { left?: { meta?: { key?: string } }; right?: unknown } }).match;
    if (m?.left?.meta?.key === 'iifname' && typeof m.right === 'string') return m.right;
  }
  return undefined;
}
