/**
 * Per-container work of the nftables backends that does not grow with the number of containers. Their tables
 * (portmap's `ip`/`ip6 cni_hostport`, ipmasq's `inet cni_plugins_masquerade`) hold one set of rules per container,
 * found by their comment; listing a chain to find them costs every call the size of the node.
 *
 * - ADD (commitRecorded): the record of the comment (handles.ts) is marked pending, `nft -f -` commits the
 *   transaction while a socket listens to nf_tables' notifications, and the handles of the rules created with the
 *   comment are recorded (`nft --echo` would read the whole table to print them). Rules of an earlier ADD of the
 *   same container are found through the record (earlierRules) and replaced in the same transaction.
 * - DEL (deleteRecorded): each recorded rule is fetched by handle and must still carry the comment; they are deleted
 *   in one nf_tables transaction over nfnetlink, without starting `nft`.
 * Anything that does not hold (no usable record, a rule gone or different, the kernel not answering) and the caller
 * lists the chains as before: a record is a shortcut, never the truth. Rules written by the Go plugins, by an older
 * cnikit or with another handles directory have no record: they are found by listing at DEL; a cnikit ADD of a
 * container that already has such rules adds its own beside them (as the reference does at every ADD).
 */
import { type NftRuleRef, nftDeleteKnownRules, nftKnownRulesHold, nftWatchRules } from '@cnikit/netlink';
import type { ToolOptions } from './exec.ts';
import { forgetNftRules, markNftRulesPending, recallNftRules, rememberNftRules } from './handles.ts';
import type { NftBatch } from './nftables.ts';
import { probeKernel } from './probe.ts';

/** A recorded handle as nft's text syntax takes it. */
export const handleNumber = (h: Buffer): number => Number(h.readBigUInt64BE(0));

/**
 * The rules an earlier cnikit ADD made with `comment` in `family` `table`, from its record, checked by handle:
 * [] when there is no record (none can exist), the rules when they all hold, undefined when they must be listed.
 */
export function earlierRules(
  family: string,
  table: string,
  comment: string,
  accept: (c: string | undefined) => boolean,
  opts: ToolOptions,
): NftRuleRef[] | undefined {
  const rec = recallNftRules(family, table, comment, opts);
  if (rec === undefined) return [];
  const rules = rec.rules;
  if (rules === undefined) return undefined;
  if (rules.length === 0) return rules;
  return probeKernel(opts, () => nftKnownRulesHold(family, table, rules, accept), undefined)
    ? rules
    : undefined;
}

/**
 * Commit `tx` and record the rules it created in `family` `table` with exactly `comment` (`expected` of them; any
 * other count leaves the record pending, so the next call lists). Throws what the commit throws (the record then
 * stays pending: the transaction changed nothing, but the earlier rules are listed next time).
 */
export function commitRecorded(
  tx: NftBatch,
  family: string,
  table: string,
  comment: string,
  expected: number,
  opts: ToolOptions & { network?: string },
): void {
  if (!markNftRulesPending(family, table, comment, opts)) {
    tx.commit();
    return;
  }
  const watch = probeKernel(opts, () => nftWatchRules(), undefined);
  try {
    tx.commit();
    const created = watch?.created(family, table, (c) => c === comment);
    if (created?.length === expected) rememberNftRules(family, table, comment, created, opts);
  } finally {
    watch?.close();
  }
}

/**
 * DEL through the record of `comment`: true when its rules were deleted by handle (or it records none) and the
 * record removed; false when there is no usable record or it does not hold — the caller lists (and then calls
 * forgetNftRules). `del.chains`: per-container chains flushed and deleted in the same transaction (their own rules
 * then need no handle: `del.pick` chooses the recorded rules deleted by handle, the jumps to them).
 */
export function deleteRecorded(
  family: string,
  table: string,
  comment: string,
  accept: (c: string | undefined) => boolean,
  opts: ToolOptions,
  del: { chains?: readonly string[]; pick?: (r: NftRuleRef) => boolean } = {},
): boolean {
  const recorded = recallNftRules(family, table, comment, opts)?.rules;
  if (recorded === undefined) return false;
  const rules = del.pick ? recorded.filter(del.pick) : recorded;
  const done = probeKernel(
    opts,
    () => nftDeleteKnownRules(family, table, rules, accept, del.chains) === true,
    false,
  );
  if (done) forgetNftRules(family, table, comment, opts);
  return done;
}
