/**
 * cnikit's own record of the iptables-nft jumps an ADD created, so that DEL touches only this container's rules:
 * nf_tables deletes a rule only by its handle, and without a record the handle of the one jump to a container's
 * chain is found by listing the chain that holds every container's jump (POSTROUTING, CNI-HOSTPORT-DNAT), whose
 * cost grows with the number of containers.
 *
 * At ADD, the in-process iptables-nft writer (iptnft.ts) has the kernel echo each rule it creates (NLM_F_ECHO) with
 * its handle; the jumps to the container's chain are written here. At DEL each recorded rule is fetched by handle
 * (no dump), checked to be still a jump to this container's chain, and deleted with the chain in one transaction
 * (nftRemoveKnownJumpChains). No record, or one that does not hold (rule gone, another rule at that handle, a jump
 * nobody recorded — the kernel then refuses to delete the chain), and DEL lists the chain as before: a record is a
 * shortcut, never the truth. ADDs done by the Go plugins or by iptables-restore (CNIKIT_IPTABLES_RESTORE=exec)
 * leave no record.
 *
 * Where: `$CNIKIT_NFT_HANDLES_DIR`, default /run/cnikit/nft-handles (a tmpfs on systemd hosts, emptied at boot like
 * the ruleset; where /run persists, a record from before a reboot is stale and only costs the listing), one file per network namespace, family, table and container chain —
 * `<netns dev>-<netns inode>.<family>.<table>.<chain>` — holding JSON `{"v":1,"jumps":[{"from":…,"handle":…}]}`,
 * written atomically (a new temp file in the directory, renamed over the record: a reader sees the old or the new
 * record, never a partial one). Not fsynced, unlike cnikit's state: a record is checked against the kernel before
 * every use and a missing or unreadable one only costs the listing, while the fsync costs every ADD a journal commit
 * where /run is not a tmpfs (~9 ms wall measured on ext4). Nothing of the reference's directories or formats.
 */

import { createHash } from 'node:crypto';
import {
  constants as C,
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { tmpName } from '@cnikit/sys/atomic';
import type { ToolOptions } from './exec.ts';
import type { CreatedRule } from './iptnft.ts';

/** The directory of the records. */
export function handlesDir(): string {
  return process.env.CNIKIT_NFT_HANDLES_DIR || '/run/cnikit/nft-handles';
}

/** The network namespace the rules are in (opts.netns, else the calling thread's), as `<dev>-<inode>`. */
function netnsKey(opts: ToolOptions): string | undefined {
  try {
    const st = statSync(opts.netns ?? '/proc/thread-self/ns/net');
    return `${st.dev}-${st.ino}`;
  } catch {
    return undefined;
  }
}

const CHAIN = /^[A-Za-z0-9_.+-]{1,28}$/;

/** The record's path for the container chain `target` of `family` `table`, or undefined (namespace unknown). */
export function jumpRecordPath(
  family: 4 | 6,
  table: string,
  target: string,
  opts: ToolOptions = {},
): string | undefined {
  if (!CHAIN.test(target) || !CHAIN.test(table)) return undefined;
  const ns = netnsKey(opts);
  return ns === undefined ? undefined : join(handlesDir(), `${ns}.${family}.${table}.${target}`);
}

export interface RecordedJump {
  from: string;
  /** NFTA_RULE_HANDLE, 8 bytes big-endian. */
  handle: Buffer;
}

/**
 * After a commit that created the jumps to `target`: record them when their handles are known (`created`, from
 * CommitResult.created), else remove any earlier record (iptables-restore ran: the handles are not known). Never
 * throws: without a record DEL takes its listing path.
 */
export function rememberJumps(
  family: 4 | 6,
  table: string,
  target: string,
  created: readonly CreatedRule[] | undefined,
  opts: ToolOptions = {},
): void {
  const path = jumpRecordPath(family, table, target, opts);
  if (path === undefined) return;
  const jumps = (created ?? [])
    .filter((r) => r.table === table && r.target === target && r.chain !== target)
    .map((r) => ({ from: r.chain, handle: r.handle }));
  try {
    if (jumps.length === 0) {
      forgetPath(path);
      return;
    }
    mkdirSync(handlesDir(), { recursive: true, mode: 0o700 });
    replaceUnsynced(path, JSON.stringify({ v: 1, jumps }));
  } catch {
    forgetPath(path);
  }
}

/** The recorded jumps to `target`, or undefined when there is no (readable, well-formed) record. */
export function recalledJumps(
  family: 4 | 6,
  table: string,
  target: string,
  opts: ToolOptions = {},
): RecordedJump[] | undefined {
  const path = jumpRecordPath(family, table, target, opts);
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const rec = JSON.parse(text) as { v?: unknown; jumps?: unknown };
    if (rec.v !== 1 || !Array.isArray(rec.jumps) || rec.jumps.length === 0) return undefined;
    const out: RecordedJump[] = [];
    for (const j of rec.jumps as Array<{ from?: unknown; handle?: unknown }>) {
      if (typeof j.from !== 'string' || !CHAIN.test(j.from)) return undefined;
      if (typeof j.handle !== 'string' || !/^[0-9a-f]{16}$/.test(j.handle)) return undefined;
      out.push({ from: j.from, handle: Buffer.from(j.handle, 'hex') });
    }
    return out;
  } catch {
    return undefined;
  }
}

/** Remove the record of `target` (after its rules were deleted); a missing record is fine. */
export function forgetJumps(family: 4 | 6, table: string, target: string, opts: ToolOptions = {}): void {
  const path = jumpRecordPath(family, table, target, opts);
  if (path !== undefined) forgetPath(path);
}

/** Write `text` to a new temp file beside `path` and rename it over `path` (no fsync: see above). */
function replaceUnsynced(path: string, text: string): void {
  const tmp = tmpName(handlesDir(), 'jumps');
  const fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
  try {
    const buf = Buffer.from(text);
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
  } catch (err) {
    closeSync(fd);
    forgetPath(tmp);
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(tmp, path);
  } catch (err) {
    forgetPath(tmp);
    throw err;
  }
}

function forgetPath(path: string): void {
  try {
    unlinkSync(path);
  } catch {}
}

// ---- records of the nftables backends (tables written with `nft -f -`: portmap's cni_hostport, ipmasq's
// cni_plugins_masquerade): the rules one ADD created with one comment (a container's), learnt from the kernel's
// notifications (nftcommit.ts). One file per namespace, family, table and comment:
// `<netns dev>-<netns inode>.nft-<family>.<table>.<32 hex of sha256(comment)>` holding
// `{"v":1,"comment":…,"network":…,"rules":[{"chain":…,"handle":…}]}` — or `{"v":1,"comment":…,"pending":true}`
// while an ADD's transaction runs (an ADD killed then leaves it, and the next call lists the chains). No file at
// all means that no cnikit ADD committed rules with that comment in that namespace since the directory was made.

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const NFT_FAMILY = /^(ip|ip6|inet|bridge|arp|netdev)$/;
/** A chain name as nft's text syntax takes it (nftables.ts checkNftIdentifier): the spoof check's per-port chains
 * carry the refID `<containerID>-<ifName>`. */
const NFT_CHAIN = /^[A-Za-z_][A-Za-z0-9_./-]{0,254}$/;

function nftRecordPath(
  family: string,
  table: string,
  comment: string,
  opts: ToolOptions,
): string | undefined {
  if (!NFT_FAMILY.test(family) || !TABLE.test(table)) return undefined;
  const ns = netnsKey(opts);
  if (ns === undefined) return undefined;
  const h = createHash('sha256').update(comment).digest('hex').slice(0, 32);
  return join(handlesDir(), `${ns}.nft-${family}.${table}.${h}`);
}

/** The path of the record of `comment`'s rules in `family` `table` (tests), or undefined. */
export const nftRulesRecordPath = (family: string, table: string, comment: string, opts: ToolOptions = {}) =>
  nftRecordPath(family, table, comment, opts);

export interface NftRulesRecord {
  comment: string;
  network?: string;
  /** Undefined: pending or unreadable (the rules are not known: list them). */
  rules?: Array<{ chain: string; handle: Buffer }>;
}

function parseNftRecord(text: string): NftRulesRecord | undefined {
  try {
    const rec = JSON.parse(text) as { v?: unknown; comment?: unknown; network?: unknown; rules?: unknown };
    if (rec.v !== 1 || typeof rec.comment !== 'string') return undefined;
    const network = typeof rec.network === 'string' ? rec.network : undefined;
    if (!Array.isArray(rec.rules)) return { comment: rec.comment, network };
    const rules: Array<{ chain: string; handle: Buffer }> = [];
    for (const r of rec.rules as Array<{ chain?: unknown; handle?: unknown }>) {
      if (typeof r.chain !== 'string' || !NFT_CHAIN.test(r.chain)) return { comment: rec.comment, network };
      if (typeof r.handle !== 'string' || !/^[0-9a-f]{16}$/.test(r.handle))
        return { comment: rec.comment, network };
      rules.push({ chain: r.chain, handle: Buffer.from(r.handle, 'hex') });
    }
    return { comment: rec.comment, network, rules };
  } catch {
    return undefined;
  }
}

/**
 * The record of `comment` in `family` `table`: undefined when there is none (no cnikit ADD left rules with it),
 * `{ rules: undefined }` when it is pending or unreadable (rules may exist, unknown: list), else the rules.
 */
export function recallNftRules(
  family: string,
  table: string,
  comment: string,
  opts: ToolOptions = {},
): NftRulesRecord | undefined {
  const path = nftRecordPath(family, table, comment, opts);
  if (path === undefined) return { comment };
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? undefined : { comment };
  }
  const rec = parseNftRecord(text);
  return rec && rec.comment === comment ? rec : { comment };
}

/**
 * Before an ADD's transaction: the record says "pending" (rules may be created, their handles not yet known).
 * False when that could not be written: the caller must then not trust an absent record either (it lists).
 */
export function markNftRulesPending(
  family: string,
  table: string,
  comment: string,
  opts: ToolOptions = {},
): boolean {
  const path = nftRecordPath(family, table, comment, opts);
  if (path === undefined) return false;
  try {
    mkdirSync(handlesDir(), { recursive: true, mode: 0o700 });
    replaceUnsynced(path, JSON.stringify({ v: 1, comment, pending: true }));
    return true;
  } catch {
    return false;
  }
}

/** After the transaction: the rules created with `comment` (undefined: not known, the record stays pending). */
export function rememberNftRules(
  family: string,
  table: string,
  comment: string,
  rules: ReadonlyArray<{ chain: string; handle: Buffer }> | undefined,
  opts: ToolOptions & { network?: string } = {},
): void {
  if (rules === undefined) return;
  const path = nftRecordPath(family, table, comment, opts);
  if (path === undefined) return;
  const body = {
    v: 1,
    comment,
    network: opts.network,
    rules: rules.map((r) => ({ chain: r.chain, handle: r.handle.toString('hex') })),
  };
  try {
    replaceUnsynced(path, JSON.stringify(body));
  } catch {}
}

/**
 * After an ADD that wrote nothing in `family` `table` (a v4-only container's ip6 table): a record of no rules, so
 * that its DEL neither lists that table (which holds the other containers' rules) nor asks whether it exists. Only
 * where there is no record yet (a pending or earlier one stays: rules may exist). Never throws.
 */
export function rememberNoNftRules(
  family: string,
  table: string,
  comment: string,
  opts: ToolOptions & { network?: string } = {},
): void {
  const path = nftRecordPath(family, table, comment, opts);
  if (path === undefined) return;
  try {
    statSync(path);
    return;
  } catch {}
  try {
    mkdirSync(handlesDir(), { recursive: true, mode: 0o700 });
    replaceUnsynced(path, JSON.stringify({ v: 1, comment, network: opts.network, rules: [] }));
  } catch {}
}

/** Remove the record (after every rule with that comment was deleted); a missing record is fine. */
export function forgetNftRules(family: string, table: string, comment: string, opts: ToolOptions = {}): void {
  const path = nftRecordPath(family, table, comment, opts);
  if (path !== undefined) forgetPath(path);
}

/** The records of `family` `table` in the namespace (GC), each with its path. */
export function nftRulesRecords(
  family: string,
  table: string,
  opts: ToolOptions = {},
): Array<NftRulesRecord & { path: string }> {
  const ns = netnsKey(opts);
  if (ns === undefined || !NFT_FAMILY.test(family) || !TABLE.test(table)) return [];
  const prefix = `${ns}.nft-${family}.${table}.`;
  let names: string[];
  try {
    names = readdirSync(handlesDir());
  } catch {
    return [];
  }
  const out: Array<NftRulesRecord & { path: string }> = [];
  for (const n of names) {
    if (!n.startsWith(prefix)) continue;
    const path = join(handlesDir(), n);
    try {
      const rec = parseNftRecord(readFileSync(path, 'utf8'));
      if (rec) out.push({ ...rec, path });
    } catch {}
  }
  return out;
}

/** Remove a record found by nftRulesRecords. */
export const forgetNftRecordAt = (path: string): void => forgetPath(path);
