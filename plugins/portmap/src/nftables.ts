/**
 * portmap's nftables backend (tables `ip`/`ip6 cni_hostport`, ONE `nft -f -` per call): chains hostports,
 * hostip_hostports, hostports_all, base chains prerouting/output (nat, -100, `fib daddr type local jump
 * hostports_all`) and masquerading (nat postrouting 100); one dnat rule per mapping and the masquerade rules,
 * comment = container ID. Unlike the reference, a re-ADD replaces the container's rules and teardown needs no
 * mappings (rules are found by comment). ADD records the handles of the container's rules and DEL deletes them by
 * handle (@cnikit/firewall's commitRecorded / deleteRecorded): neither lists the table unless the record is missing
 * or does not hold.
 */

import {
  commitRecorded,
  deleteRecorded,
  earlierRules,
  forgetNftRecordAt,
  forgetNftRules,
  goQuote,
  handleNumber,
  type IPFamily,
  NftBatch,
  type NftRule,
  nftList,
  nftRulesRecords,
  parseCidr,
  probeKernel,
  rememberNoNftRules,
  supportsNFTables,
  ToolNotFoundError,
  type ToolOptions,
} from '@cnikit/firewall';
import { nftExists } from '@cnikit/netlink';
import { hostPortText, type PortMapArgs, type PortMapBackend, sameFamily, unspecified } from './mapping.ts';

export const HOSTPORT_NFT_TABLE = 'cni_hostport';
const NFT_TABLE_COMMENT = 'CNI portmap plugin';

const nftFamily = (f: IPFamily) => (f === 6 ? 'ip6' : 'ip');

/** The container's rules in the nft table (one `nft -j list table` when the table exists). */
function nftOwnRules(family: IPFamily, containerID: string, opts: ToolOptions): NftRule[] {
  const fam = nftFamily(family);
  if (probeKernel(opts, () => nftExists(fam, HOSTPORT_NFT_TABLE), undefined) === false) return [];
  return nftList(['table', fam, HOSTPORT_NFT_TABLE], opts).rules.filter((r) => r.comment === containerID);
}

function setupNftables(a: PortMapArgs, family: IPFamily): void {
  const ip = parseCidr(a.containerIP);
  const fam = nftFamily(family);
  const T = HOSTPORT_NFT_TABLE;
  const own = (c: string | undefined) => c === a.containerID;
  const known = earlierRules(fam, T, a.containerID, own, a);
  const stale = known
    ? known.map((r) => ({ chain: r.chain, handle: handleNumber(r.handle) }))
    : nftOwnRules(family, a.containerID, a);
  const tx = new NftBatch(a);
  tx.addTable(fam, T, { comment: NFT_TABLE_COMMENT });
  tx.addChain({ family: fam, table: T, name: 'hostports' });
  tx.addChain({ family: fam, table: T, name: 'hostip_hostports' });
  tx.addChain({ family: fam, table: T, name: 'hostports_all' });
  tx.flushChain(fam, T, 'hostports_all');
  tx.addRule(fam, T, 'hostports_all', 'jump hostip_hostports');
  tx.addRule(fam, T, 'hostports_all', 'jump hostports');
  const cond = (a.conditions ?? []).join(' ');
  for (const [name, hook] of [
    ['prerouting', 'prerouting'],
    ['output', 'output'],
  ] as const) {
    tx.addChain({ family: fam, table: T, name, type: 'nat', hook, priority: -100 });
    tx.flushChain(fam, T, name);
    tx.addRule(fam, T, name, `${cond ? `${cond} ` : ''}fib daddr type local jump hostports_all`);
  }
  if (a.snat)
    tx.addChain({
      family: fam,
      table: T,
      name: 'masquerading',
      type: 'nat',
      hook: 'postrouting',
      priority: 100,
    });
  for (const r of stale) tx.deleteRule(fam, T, r.chain, r.handle);
  const comment = { comment: a.containerID };
  let created = 0;
  for (const m of a.mappings) {
    if (!sameFamily(m, family)) continue;
    created++;
    const dst = unspecified(m.hostIP) ? '' : `${fam} daddr ${m.hostIP} `;
    tx.addRule(
      fam,
      T,
      'hostports',
      `${dst}${m.protocol} dport ${m.hostPort} dnat to ${hostPortText(ip, m.containerPort)}`,
      comment,
    );
  }
  if (a.snat) {
    const src = a.masqAll ? (family === 6 ? '::/0' : '0.0.0.0/0') : ip.ip;
    tx.addRule(fam, T, 'masquerading', `${fam} saddr ${src} ${fam} daddr ${ip.ip} masquerade`, comment);
    created++;
    if (family === 4 && !a.masqAll) {
      created++;
      tx.addRule(fam, T, 'masquerading', `${fam} saddr 127.0.0.1 ${fam} daddr ${ip.ip} masquerade`, comment);
    }
  }
  commitRecorded(tx, fam, T, a.containerID, created, { ...a, network: a.network });
}

/**
 * After an nftables ADD: the families of `done` it wrote nothing in get a record of no rules (rememberNoNftRules),
 * so that the DEL of a v4-only container does not list the ip6 table of the dual-stack ones (and vice versa).
 */
export function recordUnusedFamilies(
  a: { containerID: string; network: string },
  done: readonly IPFamily[],
): void {
  for (const f of [4, 6] as const)
    if (!done.includes(f)) rememberNoNftRules(nftFamily(f), HOSTPORT_NFT_TABLE, a.containerID, a);
}

/** CHECK of one container address with the reference's messages (throws Error). */
function check(a: PortMapArgs, family: IPFamily): void {
  const hostPorts = a.mappings.filter((m) => sameFamily(m, family)).length;
  const masq = a.snat ? (family === 4 && !a.masqAll ? 2 : 1) : 0;
  const rules = nftOwnRules(family, a.containerID, a);
  for (const [chain, need] of [
    ['hostports', hostPorts],
    ['masquerading', masq],
  ] as const) {
    if (need > 0 && rules.filter((r) => r.chain === chain).length < need)
      throw new Error(`missing hostport rules in ${goQuote(chain)} chain`);
  }
}

/**
 * Delete the container's rules from the table of each family where they may exist: by handle when the ADD recorded
 * them, else found by comment in a listing of the table.
 */
function teardown(_network: string, containerID: string, opts: ToolOptions): unknown[] {
  const errors: unknown[] = [];
  const own = (c: string | undefined) => c === containerID;
  const listed = ([4, 6] as const).filter(
    (f) => !deleteRecorded(nftFamily(f), HOSTPORT_NFT_TABLE, containerID, own, opts),
  );
  if (listed.length === 0) return errors;
  const may = probeKernel(
    opts,
    () => ({
      nft4: nftExists('ip', HOSTPORT_NFT_TABLE) !== false,
      nft6: nftExists('ip6', HOSTPORT_NFT_TABLE) !== false,
    }),
    { nft4: true, nft6: true },
  );
  const families = listed.filter((f) => (f === 4 ? may.nft4 : may.nft6));
  if (families.length) {
    try {
      const tx = new NftBatch(opts);
      for (const f of families) {
        for (const r of nftOwnRules(f, containerID, opts))
          tx.deleteRule(nftFamily(f), HOSTPORT_NFT_TABLE, r.chain, r.handle);
      }
      tx.commit();
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsNFTables(opts)) errors.push(e);
      return errors;
    }
  }
  for (const f of listed) forgetNftRules(nftFamily(f), HOSTPORT_NFT_TABLE, containerID, opts);
  return errors;
}

export const nftables: PortMapBackend = { setup: setupNftables, check, teardown };

/**
 * GC of the records (handles.ts) of this network's containers that are not valid any more: their recorded rules are
 * deleted by handle (each checked to still carry the container ID) and the record removed. Rules without a record
 * (the Go plugin's) cannot be attributed to a network (their comment is only the container ID) and are left to DEL.
 */
export function gcNftRecords(network: string, valid: ReadonlySet<string>, opts: ToolOptions = {}): void {
  for (const f of [4, 6] as const) {
    const fam = nftFamily(f);
    for (const rec of nftRulesRecords(fam, HOSTPORT_NFT_TABLE, opts)) {
      if (rec.network !== network || valid.has(rec.comment)) continue;
      const id = rec.comment;
      if (!deleteRecorded(fam, HOSTPORT_NFT_TABLE, id, (c) => c === id, opts)) forgetNftRecordAt(rec.path);
    }
  }
}
