/**
 * MAC spoof checking on a bridge port (bridge plugin `macspoofchk`), with the same nftables
 * objects as the reference's pkg/link SpoofChecker (plugins.md §9.5):
 *   table bridge nat; base chain PREROUTING (filter, prerouting, priority -300, policy accept);
 *   PREROUTING:            iifname "<iface>" jump cni-br-iface-<refID>
 *   cni-br-iface-<refID>:  jump cni-br-iface-<refID>-mac
 *   …-mac:                 ether saddr <mac> return; drop
 * every rule commented `macspoofchk-<refID>`. The bridge plugin uses refID `<containerID>-<ifName>`.
 *
 * Neither setup nor teardown reads the table (which holds every port's chains, so a listing grows with the pods):
 * setup records the handles of the rules it creates (handles.ts, through nftcommit.ts), and teardown fetches the
 * PREROUTING jump by handle, checks its comment, and deletes it with both per-port chains in one nf_tables
 * transaction. Without a usable record (a setup by the Go plugin or an older cnikit, a pending record, a handle now
 * held by another rule, a jump to the chain nobody recorded: the kernel refuses the chain's deletion) both list the
 * table as before.
 */
import { formatMac, getLink, parseMac, withNetns } from '@cnikit/netlink';
import { SysError } from '@cnikit/sys';
import type { ToolOptions } from './exec.ts';
import { forgetNftRules } from './handles.ts';
import { NftBatch, nftList } from './nftables.ts';
import { commitRecorded, deleteRecorded, earlierRules, handleNumber } from './nftcommit.ts';

const TABLE = 'nat';
const BASE = 'PREROUTING';
/** The rules one setup creates, all with the refID's comment (recorded with their handles: handles.ts). */
const RULES = 4;

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
 * the per-port chains flushed and refilled, and the PREROUTING jump of an earlier setup of this refID replaced
 * (so repeating setup does not duplicate rules, unlike the reference). That jump is known from the earlier setup's
 * record; no record at all: no earlier cnikit setup, nothing listed (a jump the Go plugin left stays beside the new
 * one, as the reference's own repeated setup does, and teardown removes both).
 */
export function setupSpoofCheck(args: SpoofCheckArgs): void {
  const macBytes = parseMac(args.mac);
  if (!macBytes) throw new TypeError(`invalid MAC address for spoof check: ${JSON.stringify(args.mac)}`);
  const mac = formatMac(macBytes);
  const { ifaceChain, macChain, comment } = spoofCheckNames(args.refID);
  // an earlier ADD's PREROUTING jump: from its record (checked by handle), listed only when that does not hold
  const earlier = earlierRules('bridge', TABLE, comment, (c) => c === comment, args);
  const old =
    earlier === undefined
      ? preroutingRulesOf(args.refID, args).rules.map((r) => r.handle)
      : earlier.filter((r) => r.chain === BASE).map((r) => handleNumber(r.handle));
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
  for (const h of old) tx.deleteRule('bridge', TABLE, BASE, h);
  tx.addRule('bridge', TABLE, BASE, `iifname ${quoteIface(args.iface)} jump ${ifaceChain}`, { comment });
  tx.addRule('bridge', TABLE, ifaceChain, `jump ${macChain}`, { comment });
  tx.addRule('bridge', TABLE, macChain, `ether saddr ${mac} return`, { comment });
  tx.addRule('bridge', TABLE, macChain, 'drop', { comment });
  try {
    commitRecorded(tx, 'bridge', TABLE, comment, RULES, args);
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
  const { ifaceChain, macChain, comment } = spoofCheckNames(refID);
  const accept = (c: string | undefined) => c === comment;
  // recorded at ADD: the jump deleted by handle, both chains by name, one transaction, nothing listed
  if (
    deleteRecorded('bridge', TABLE, comment, accept, opts, {
      chains: [ifaceChain, macChain],
      pick: (r) => r.chain === BASE,
    })
  )
    return;
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
  forgetNftRules('bridge', TABLE, comment, opts);
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
