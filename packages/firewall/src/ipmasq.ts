/**
 * IP masquerading for plugins (bridge `ipMasq`), identical in kernel state to the reference's
 * SetupIPMasqForNetworks / TeardownIPMasqForNetworks / GCIPMasqForNetwork (plugins.md §9.2 item 4).
 *
 * iptables (nat table, per family, ONE iptables-restore per family per call):
 *   chain CNI-<24 hex>   -d <ip/prefix> -m comment --comment 'name: "<net>" id: "<id>"' -j ACCEPT
 *                        ! -d 224.0.0.0/4 (ff00::/8) -m comment --comment … -j MASQUERADE
 *   POSTROUTING          -s <ip> -m comment --comment … -j CNI-<24 hex>
 * nftables (table inet cni_plugins_masquerade, ONE nft transaction per call):
 *   postrouting (nat/postrouting/100): ip daddr == 224.0.0.0/4 return; ip6 daddr == ff00::/8 return; goto masq_checks
 *   masq_checks: ip saddr == <ip> ip daddr != <net/prefix> masquerade comment "<hash>, net: …, if: …, id: …"
 */
import { nftExists } from '@cnikit/netlink';
import { detectBackend, resolveBackend } from './backend.ts';
import { type ParsedCidr, parseCidr } from './cidr.ts';
import { ToolNotFoundError, type ToolOptions } from './exec.ts';
import { forgetJumps, forgetNftRecordAt, forgetNftRules, nftRulesRecords, rememberJumps } from './handles.ts';
import {
  type IPFamily,
  IptablesBatch,
  readTable,
  ruleComment,
  ruleTarget,
  supportsIPTables,
} from './iptables.ts';
import {
  formatChainName,
  formatComment,
  nftInstanceComment,
  nftInstanceHash,
  nftNetworkHash,
  parseComment,
} from './names.ts';
import { NftBatch, nftListRules, supportsNFTables } from './nftables.ts';
import { commitRecorded, deleteRecorded, earlierRules, handleNumber } from './nftcommit.ts';
import { natChainsMayExist, probeKernel, removeJumpChainsFast } from './probe.ts';

export const IPMASQ_NFT_TABLE = 'cni_plugins_masquerade';
export const IPMASQ_NFT_CHAIN = 'masq_checks';
const NFT_TABLE_COMMENT = 'Masquerading for plugins from github.com/containernetworking/plugins';
const NFT_CHAIN_COMMENT =
  'Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet';

export interface IPMasqSetupArgs extends ToolOptions {
  /** "iptables" | "nftables" | undefined (detect). Anything else → `unknown ipmasq backend "x"`. */
  backend?: string | null;
  /** Container addresses with their prefix, e.g. `10.1.2.2/24`, `fd00::2/64`. */
  ips: readonly string[];
  network: string;
  ifName: string;
  containerID: string;
}

export interface IPMasqTeardownArgs extends ToolOptions {
  /** May be empty: the iptables chain is found by name and removed anyway. */
  ips: readonly string[];
  network: string;
  ifName: string;
  containerID: string;
}

export interface GCAttachment {
  containerID: string;
  ifName: string;
}

function parseAll(ips: readonly string[]): ParsedCidr[] {
  return ips.map((s) => {
    try {
      return parseCidr(s);
    } catch {
      throw new TypeError(`invalid IP address for masquerading: ${JSON.stringify(s)}`);
    }
  });
}

/** Install masquerading for the container's addresses with the chosen (or detected) backend. */
export function setupIPMasq(args: IPMasqSetupArgs): void {
  const cidrs = parseAll(args.ips);
  if (args.backend === undefined || args.backend === null) {
    // auto (detectBackend: iptables unless it is unusable and nftables works). iptables is tried directly,
    // which saves the detection probe (one `iptables -S INPUT` exec) in the common case; it fails at its first
    // iptables-save, before changing anything, when iptables is unusable — then the same detection decides.
    try {
      setupIPTables(cidrs, args);
    } catch (err) {
      if (detectBackend(args) === 'iptables') throw err;
      setupNFTables(cidrs, args);
    }
    return;
  }
  const backend = resolveBackend(args.backend, args);
  if (backend === 'iptables') setupIPTables(cidrs, args);
  else setupNFTables(cidrs, args);
}

function setupIPTables(cidrs: ParsedCidr[], args: IPMasqSetupArgs): void {
  // Note: for compatibility with the reference, the iptables implementation ignores ifName.
  const chain = formatChainName(args.network, args.containerID);
  const comment = formatComment(args.network, args.containerID);
  for (const family of [4, 6] as const) {
    const mine = cidrs.filter((c) => c.family === family);
    if (mine.length === 0) continue;
    const multicast = family === 4 ? '224.0.0.0/4' : 'ff00::/8';
    const b = new IptablesBatch(family, args);
    b.ensureChain('nat', chain);
    for (const c of mine) {
      const cm = ['-m', 'comment', '--comment', comment];
      b.appendUnique('nat', chain, ['-d', `${c.ip}/${c.prefix}`, '-j', 'ACCEPT', ...cm]);
      b.appendUnique('nat', chain, ['!', '-d', multicast, '-j', 'MASQUERADE', ...cm]);
      b.appendUnique('nat', 'POSTROUTING', ['-s', c.ip, '-j', chain, ...cm]);
    }
    // the handles of the POSTROUTING jumps, when nf_tables told them: DEL deletes them without listing POSTROUTING
    rememberJumps(family, 'nat', chain, b.commit().created, args);
  }
}

function findNftRules(prefix: string, opts: ToolOptions) {
  return nftListRules('inet', IPMASQ_NFT_TABLE, IPMASQ_NFT_CHAIN, opts).filter(
    (r) => r.comment?.startsWith(prefix) === true,
  );
}

function setupNFTables(cidrs: ParsedCidr[], args: IPMasqSetupArgs): void {
  const T = IPMASQ_NFT_TABLE;
  const hash = nftInstanceHash(args.network, args.ifName, args.containerID);
  const comment = nftInstanceComment(args.network, args.ifName, args.containerID);
  // the rules of an earlier ADD of this attachment: by handle from its record, else found in a listing
  const known = earlierRules('inet', T, comment, (c) => c?.startsWith(hash) === true, args);
  const stale = known?.map((r) => ({ handle: handleNumber(r.handle) })) ?? findNftRules(hash, args);
  const tx = new NftBatch(args);
  tx.addTable('inet', T, { comment: NFT_TABLE_COMMENT });
  tx.addChain({ family: 'inet', table: T, name: IPMASQ_NFT_CHAIN, comment: NFT_CHAIN_COMMENT });
  tx.addChain({
    family: 'inet',
    table: T,
    name: 'postrouting',
    type: 'nat',
    hook: 'postrouting',
    priority: 100,
  });
  tx.flushChain('inet', T, 'postrouting');
  tx.addRule('inet', T, 'postrouting', 'ip daddr == 224.0.0.0/4  return');
  tx.addRule('inet', T, 'postrouting', 'ip6 daddr == ff00::/8  return');
  tx.addRule('inet', T, 'postrouting', `goto ${IPMASQ_NFT_CHAIN}`);
  for (const r of stale) tx.deleteRule('inet', T, IPMASQ_NFT_CHAIN, r.handle);
  for (const c of cidrs) {
    const p = c.family === 4 ? 'ip' : 'ip6';
    tx.addRule(
      'inet',
      T,
      IPMASQ_NFT_CHAIN,
      `${p} saddr == ${c.ip} ${p} daddr != ${c.network}/${c.prefix} masquerade`,
      {
        comment,
      },
    );
  }
  commitRecorded(tx, 'inet', T, comment, cidrs.length, { ...args, network: args.network });
}

/** Errors of a teardown/GC, reported together after every step was attempted. */
export class IPMasqError extends Error {
  readonly errors: unknown[];
  constructor(errors: unknown[]) {
    super(errors.map((e) => (e instanceof Error ? e.message : String(e))).join('\n'));
    this.name = 'IPMasqError';
    this.errors = errors;
  }
}

/**
 * What teardown may find, from the kernel directly (a /proc read and one nfnetlink GET each, no tool process):
 * per family, false only when the chain cannot exist — no legacy x_tables table `nat` is loaded and
 * iptables-nft's `ip`/`ip6 nat` table has no such chain (a POSTROUTING jump to it cannot exist either); nft: false only when
 * the masquerade table is absent. Anything unclear counts as "may exist" and takes the full path.
 */
function teardownCandidates(chain: string, opts: ToolOptions): { 4: boolean; 6: boolean; nft: boolean } {
  return probeKernel(
    opts,
    () => ({
      4: natChainsMayExist(4, [chain]),
      6: natChainsMayExist(6, [chain]),
      nft: nftExists('inet', IPMASQ_NFT_TABLE) !== false,
    }),
    { 4: true, 6: true, nft: true },
  );
}

/**
 * Remove masquerading for a container, from BOTH backends (the container may have been set up by
 * another version or configuration). iptables: every POSTROUTING rule jumping to the container's
 * chain is deleted (found by chain name, so this works with `ips` empty — the reference leaks the
 * chain then) and the chain is flushed and deleted; one iptables-save + at most one
 * iptables-restore per family. nftables: rules whose comment starts with the instance hash are
 * deleted in one transaction. Missing rules/chains/tables are fine. Errors are reported only for
 * backends the host supports, joined with newlines.
 */
export function teardownIPMasq(args: IPMasqTeardownArgs): void {
  parseAll(args.ips); // validate only: iptables cleanup is by chain name, nftables by comment hash
  const errors: unknown[] = [];
  const chain = formatChainName(args.network, args.containerID);
  const may = teardownCandidates(chain, args);
  for (const family of [4, 6] as const) {
    if (!may[family]) {
      forgetJumps(family, 'nat', chain, args); // left by a DEL killed after its transaction
      continue;
    }
    if (removeJumpChainsFast(family, 'nat', [{ from: 'POSTROUTING', target: chain }], args)) continue;
    try {
      const b = new IptablesBatch(family, args);
      b.deleteRulesWhere('nat', 'POSTROUTING', (r) => ruleTarget(r) === chain);
      b.deleteChain('nat', chain);
      b.commit();
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsIPTables(family, args)) errors.push(e);
    }
  }
  const hash = nftInstanceHash(args.network, args.ifName, args.containerID);
  const comment = nftInstanceComment(args.network, args.ifName, args.containerID);
  if (!may.nft) {
    forgetNftRules('inet', IPMASQ_NFT_TABLE, comment, args); // left by a DEL killed after its transaction
    if (errors.length) throw new IPMasqError(errors);
    return;
  }
  // by handle when the ADD recorded the rules (no listing, no nft process), else found by comment in a listing
  if (deleteRecorded('inet', IPMASQ_NFT_TABLE, comment, (c) => c?.startsWith(hash) === true, args)) {
    if (errors.length) throw new IPMasqError(errors);
    return;
  }
  try {
    const rules = findNftRules(hash, args);
    const tx = new NftBatch(args);
    for (const r of rules) tx.deleteRule('inet', IPMASQ_NFT_TABLE, IPMASQ_NFT_CHAIN, r.handle);
    tx.commit();
    forgetNftRules('inet', IPMASQ_NFT_TABLE, comment, args);
  } catch (e) {
    if (!(e instanceof ToolNotFoundError) && supportsNFTables(args)) errors.push(e);
  }
  if (errors.length) throw new IPMasqError(errors);
}

/**
 * Garbage-collect masquerading of one network, keeping exactly the valid attachments.
 *
 * nftables: as the reference — rules of this network (comment starts with the network hash) whose
 * comment is not that of a valid (ifName, containerID) are deleted.
 *
 * iptables (the reference does nothing here): chains named `CNI-<24 hex>` in the nat table are
 * attributed to a (network, containerID) through the `name: "<net>" id: "<id>"` comment on the
 * POSTROUTING jumps to them or on their own rules, checked against the chain-name hash; those of
 * this network whose containerID is not among the valid attachments are removed together with
 * their POSTROUTING jumps. Limits: the iptables rules carry no interface name, so a container is
 * kept if ANY of its attachments on this network is valid; a chain whose comments were removed
 * by hand (or carry a different comment) cannot be attributed and is left alone; chains of the
 * portmap plugin (CNI-DN-…) and other prefixes are never touched.
 */
export function gcIPMasq(
  network: string,
  validAttachments: readonly GCAttachment[],
  opts: ToolOptions = {},
): void {
  const errors: unknown[] = [];
  const validIDs = new Set(validAttachments.map((a) => a.containerID));
  for (const family of [4, 6] as const) {
    try {
      gcIPTablesFamily(family, network, validIDs, opts);
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsIPTables(family, opts)) errors.push(e);
    }
  }
  try {
    const valid = new Set(validAttachments.map((a) => nftInstanceComment(network, a.ifName, a.containerID)));
    const rules = findNftRules(nftNetworkHash(network), opts);
    const tx = new NftBatch(opts);
    for (const r of rules)
      if (!valid.has(r.comment!)) tx.deleteRule('inet', IPMASQ_NFT_TABLE, IPMASQ_NFT_CHAIN, r.handle);
    tx.commit();
    // the records of this network's attachments that are not valid any more (their rules were just deleted)
    const netHash = nftNetworkHash(network);
    for (const rec of nftRulesRecords('inet', IPMASQ_NFT_TABLE, opts))
      if (rec.comment.startsWith(netHash) && !valid.has(rec.comment)) forgetNftRecordAt(rec.path);
  } catch (e) {
    if (!(e instanceof ToolNotFoundError) && supportsNFTables(opts)) errors.push(e);
  }
  if (errors.length) throw new IPMasqError(errors);
}

const MASQ_CHAIN = /^CNI-[0-9a-f]{24}$/;

function gcIPTablesFamily(family: IPFamily, network: string, validIDs: Set<string>, opts: ToolOptions): void {
  const nat = readTable(family, 'nat', opts);
  const owner = new Map<string, string>(); // chain -> containerID (of this network)
  for (const r of nat.rules) {
    const target = ruleTarget(r);
    const chain = r.chain === 'POSTROUTING' ? target : r.chain;
    if (!chain || !MASQ_CHAIN.test(chain) || owner.has(chain)) continue;
    const c = ruleComment(r);
    const parsed = c === undefined ? undefined : parseComment(c);
    if (!parsed || parsed.network !== network) continue;
    if (formatChainName(parsed.network, parsed.containerID) !== chain) continue;
    owner.set(chain, parsed.containerID);
  }
  const stale = [...owner].filter(([, id]) => !validIDs.has(id)).map(([chain]) => chain);
  if (stale.length === 0) return;
  const set = new Set(stale);
  const b = new IptablesBatch(family, opts);
  b.deleteRulesWhere('nat', 'POSTROUTING', (r) => set.has(ruleTarget(r) ?? ''));
  for (const chain of stale) b.deleteChain('nat', chain);
  b.commit();
  for (const chain of stale) forgetJumps(family, 'nat', chain, opts);
}
