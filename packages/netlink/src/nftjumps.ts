// iptables-nft teardown without a process: remove the rules of a chain that jump to a per-container chain, then
// flush and delete that chain — `iptables -t nat -D FROM … -j TARGET; -F TARGET; -X TARGET` — as ONE nf_tables
// transaction over nfnetlink. iptables-nft keeps its rules in ordinary nf_tables tables (`ip nat`, `ip6 nat`) and
// encodes `-j CHAIN` as an `immediate` verdict expression, so the jumps are found in a rule dump and deleted by
// handle. Anything unexpected answers `undefined`: the caller then uses iptables-save/iptables-restore as before.
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';
import { closeAfterTask } from './nfclose.ts';
import { nftExists } from './nftexists.ts';
import {
  type Attrs,
  forEachAttr,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  parseMessages,
} from './nl.ts';

const NFNL_SUBSYS_NFTABLES = 10;
const NFNL_MSG_BATCH_BEGIN = 16;
const NFNL_MSG_BATCH_END = 17;
const NFT_MSG_DELCHAIN = 5;
const NFT_MSG_NEWRULE = 6;
const NFT_MSG_GETRULE = 7;
const NFT_MSG_DELRULE = 8;
const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const NFTA_RULE_TABLE = 1;
const NFTA_RULE_CHAIN = 2;
const NFTA_RULE_HANDLE = 3;
const NFTA_RULE_EXPRESSIONS = 4;
const NFTA_EXPR_NAME = 1;
const NFTA_EXPR_DATA = 2;
const NFTA_IMMEDIATE_DREG = 1;
const NFTA_IMMEDIATE_DATA = 2;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NFTA_VERDICT_CHAIN = 2;
const NFT_REG_VERDICT = 0;
const NFT_JUMP = -3;
const NFT_GOTO = -4;
const NFPROTO_IPV4 = 2;
const NFPROTO_IPV6 = 10;
const ENOENT = 2;

function nftType(msg: number): number {
  return (NFNL_SUBSYS_NFTABLES << 8) | msg;
}

/** struct nfgenmsg { u8 family; u8 version; be16 res_id }. */
function nfgen(b: NlBuilder, family: number, resId = 0): NlBuilder {
  return b
    .u8(family)
    .u8(0)
    .u8(resId >> 8)
    .u8(resId & 0xff);
}

function str(a: Attrs, type: number): string | undefined {
  const b = a.get(type);
  if (!b) return undefined;
  const nul = b.indexOf(0);
  return b.toString('utf8', 0, nul < 0 ? b.length : nul);
}

interface Exchange {
  send(msgs: Buffer[]): void;
  /**
   * The messages of dump `seq` until NLMSG_DONE; an error throws. `enough`, asked after each datagram with the
   * messages so far: true ends the reading there (the rest of the dump is dropped with the socket).
   */
  dump(seq: number, enough?: (sofar: readonly NlMessage[]) => boolean): NlMessage[];
  /** Wait for the ACK (NLMSG_ERROR 0) of every sequence number in `seqs`; an error throws. */
  acks(seqs: readonly number[]): void;
  /** The answer to the GET `seq` (sent with NLM_F_ACK): its message, or undefined for ENOENT; other errors throw. */
  get(seq: number): NlMessage | undefined;
}

class NftError extends Error {}

/**
 * Test/bench seam (exported by @cnikit/netlink/testing): the nfnetlink rule requests this module sent — `ruleDumps`
 * (NFT_MSG_GETRULE with NLM_F_DUMP: a chain listed) and `ruleGets` (one rule asked for by handle).
 */
export const nftRuleRequests = { ruleDumps: 0, ruleGets: 0 };

function open(): { sock: NetlinkSocket; x: Exchange } {
  const sock = NetlinkSocket.open(NETLINK_NETFILTER, { receiveBufferSize: 0 });
  const receive = (): NlMessage[] => {
    const buf = sock.recv(2000);
    if (!buf) throw new NftError('no answer from nf_tables');
    return parseMessages(buf);
  };
  const x: Exchange = {
    send(msgs) {
      sock.send(Buffer.concat(msgs));
    },
    dump(seq, enough) {
      const out: NlMessage[] = [];
      for (;;) {
        for (const m of receive()) {
          if (m.seq !== seq) continue;
          if (m.type === NLMSG_ERROR) {
            const err = -m.payload.readInt32LE(0);
            if (err === ENOENT) return out; // no such table/chain: no rules
            throw new NftError(`nf_tables error ${err}`);
          }
          if (m.type === NLMSG_DONE) return out;
          out.push(m);
        }
        if (enough?.(out)) return out;
      }
    },
    get(seq) {
      let found: NlMessage | undefined;
      for (;;) {
        for (const m of receive()) {
          if (m.seq !== seq) continue;
          if (m.type !== NLMSG_ERROR) {
            found = m;
            continue;
          }
          const err = -m.payload.readInt32LE(0);
          if (err === 0) return found;
          if (err === ENOENT) return undefined;
          throw new NftError(`nf_tables error ${err}`);
        }
      }
    },
    acks(seqs) {
      const waiting = new Set(seqs);
      while (waiting.size > 0) {
        for (const m of receive()) {
          if (m.type !== NLMSG_ERROR || !waiting.has(m.seq)) continue;
          const err = -m.payload.readInt32LE(0);
          if (err !== 0) throw new NftError(`nf_tables error ${err}`);
          waiting.delete(m.seq);
        }
      }
    },
  };
  return { sock, x };
}

/**
 * `fn` over one nfnetlink socket, closed after; undefined when the socket cannot be opened or anything fails (the
 * kernel did not go along: an aborted transaction changed nothing, the caller falls back to its tools).
 */
function withNft<T>(fn: (x: Exchange) => T): T | undefined {
  let conn: ReturnType<typeof open>;
  try {
    conn = open();
  } catch {
    return undefined;
  }
  try {
    return fn(conn.x);
  } catch {
    return undefined;
  } finally {
    closeAfterTask(conn.sock);
  }
}

let seqCounter = (Date.now() ^ (process.pid << 8)) >>> 0;
const nextSeq = () => {
  seqCounter = (seqCounter + 1) >>> 0 || 1;
  return seqCounter;
};

/** Handles (the raw 8-byte attribute) of the rules of `table` `chain` that jump to `target`. */
function jumpHandles(x: Exchange, family: number, table: string, chain: string, target: string): Buffer[] {
  // a rule jumping to `target` carries its name: the others (every other container's jump in a chain like
  // POSTROUTING) are skipped without parsing their attributes
  return listRules(x, family, table, chain, Buffer.from(target))
    .filter((r) => ruleJumpTarget(r.attrs) === target)
    .map((r) => r.handle);
}

/** One expression of a rule as the kernel dumps it: its name (`payload`, `cmp`, `immediate`, `match`, …) and attributes. */
export interface NftExpr {
  name: string;
  attrs: Attrs;
}

/** The expressions of a dumped rule, in order. */
export function ruleExprs(rule: Attrs): NftExpr[] {
  const out: NftExpr[] = [];
  const exprs = rule.get(NFTA_RULE_EXPRESSIONS);
  if (!exprs) return out;
  forEachAttr(exprs, 0, (_t, elem) => {
    const e = parseAttrs(elem);
    const data = e.get(NFTA_EXPR_DATA);
    out.push({ name: str(e, NFTA_EXPR_NAME) ?? '', attrs: data ? parseAttrs(data) : new Map() });
  });
  return out;
}

/** The chain a rule jumps or goes to through an `immediate` verdict (the last such expression), or undefined. */
export function ruleJumpTarget(rule: Attrs): string | undefined {
  let target: string | undefined;
  for (const e of ruleExprs(rule)) {
    if (e.name !== 'immediate') continue;
    const dreg = e.attrs.get(NFTA_IMMEDIATE_DREG);
    if (!dreg || dreg.length < 4 || dreg.readUInt32BE(0) !== NFT_REG_VERDICT) continue;
    const value = e.attrs.get(NFTA_IMMEDIATE_DATA);
    const verdict = value ? parseAttrs(value).get(NFTA_DATA_VERDICT) : undefined;
    if (!verdict) continue;
    const v = parseAttrs(verdict);
    const code = v.get(NFTA_VERDICT_CODE);
    if (!code || code.length < 4) continue;
    const c = code.readInt32BE(0);
    if (c === NFT_JUMP || c === NFT_GOTO) target = str(v, NFTA_VERDICT_CHAIN);
  }
  return target;
}

/**
 * The rules of `table` `chain`: handle (raw attribute) and attributes. ENOENT (no such chain) = none. `mustContain`:
 * only the rules whose message holds these bytes (a cheap filter before the attributes are parsed).
 */
function listRules(
  x: Exchange,
  family: number,
  table: string,
  chain: string,
  mustContain?: Buffer,
  enough?: (sofar: readonly NlMessage[]) => boolean,
): Array<{ handle: Buffer; attrs: Attrs }> {
  const seq = nextSeq();
  nftRuleRequests.ruleDumps++;
  const req = nfgen(new NlBuilder(nftType(NFT_MSG_GETRULE), NLM_F_REQUEST | NLM_F_DUMP, 128), family)
    .attrStr(NFTA_RULE_TABLE, table)
    .attrStr(NFTA_RULE_CHAIN, chain)
    .finish(seq);
  x.send([req]);
  const out: Array<{ handle: Buffer; attrs: Attrs }> = [];
  for (const m of x.dump(seq, enough)) {
    if ((m.type & 0xff) !== NFT_MSG_NEWRULE) continue;
    if (mustContain && !m.payload.includes(mustContain)) continue;
    const a = parseAttrs(m.payload, 4);
    if (str(a, NFTA_RULE_CHAIN) !== chain) continue; // older kernels may ignore the chain filter
    const h = a.get(NFTA_RULE_HANDLE);
    if (h) out.push({ handle: Buffer.from(h), attrs: a });
  }
  return out;
}

/** One nf_tables transaction: BATCH_BEGIN, the messages (each acknowledged), BATCH_END. An error aborts it all. */
function transaction(
  x: Exchange,
  build: Array<(b: NlBuilder) => NlBuilder>,
  nfproto: number,
  types: number[],
): void {
  const msgs: Buffer[] = [];
  const seqs: number[] = [];
  msgs.push(
    nfgen(new NlBuilder(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 32), 0, NFNL_SUBSYS_NFTABLES).finish(nextSeq()),
  );
  build.forEach((fill, i) => {
    const s = nextSeq();
    seqs.push(s);
    msgs.push(
      fill(nfgen(new NlBuilder(nftType(types[i] as number), NLM_F_REQUEST | NLM_F_ACK, 96), nfproto)).finish(
        s,
      ),
    );
  });
  msgs.push(
    nfgen(new NlBuilder(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 32), 0, NFNL_SUBSYS_NFTABLES).finish(nextSeq()),
  );
  x.send(msgs);
  x.acks(seqs);
}

/**
 * In the calling thread's network namespace: delete, in ONE nf_tables transaction, the rules of `family` `table`
 * `chain` (an iptables-nft chain, e.g. ip filter CNI-FORWARD) that `select` picks from their expression lists.
 * Returns how many were deleted (0: none matched; the chain may not exist), or undefined when the kernel did not
 * go along (nothing changed then: the caller falls back to its tools).
 */
export function nftRemoveRulesWhere(
  family: 4 | 6,
  table: string,
  chain: string,
  select: (exprs: NftExpr[]) => boolean,
): number | undefined {
  const nfproto = family === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
  return withNft((x) => {
    const picked = listRules(x, nfproto, table, chain).filter((r) => select(ruleExprs(r.attrs)));
    if (picked.length === 0) return 0;
    transaction(
      x,
      picked.map(
        (r) => (b: NlBuilder) =>
          b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, chain).attr(NFTA_RULE_HANDLE, r.handle),
      ),
      nfproto,
      picked.map(() => NFT_MSG_DELRULE),
    );
    return picked.length;
  });
}

export interface JumpChain {
  /** The chain holding the jumps (e.g. POSTROUTING, CNI-HOSTPORT-DNAT). */
  from: string;
  /** The per-container chain the jumps lead to; flushed and deleted. */
  target: string;
}

/**
 * In the calling thread's network namespace, for the iptables-nft table `family` `table` (e.g. ip nat): delete every
 * rule of `from` that jumps to `target`, flush and delete `target`, for each pair, in ONE nf_tables transaction.
 * Returns true when that is done (or nothing was there), undefined when the kernel did not go along (no nf_tables,
 * a concurrent change, an unexpected answer): nothing was changed then, and the caller falls back to its tools.
 * Only for rulesets made by iptables-nft: a legacy x_tables table is not seen here (check xtablesTableLoaded).
 */
export function nftRemoveJumpChains(
  family: 4 | 6,
  table: string,
  pairs: readonly JumpChain[],
): true | undefined {
  const exists = pairs.map((p) => nftExists(family === 4 ? 'ip' : 'ip6', table, p.target));
  if (exists.includes(undefined)) return undefined;
  const present = pairs.filter((_p, i) => exists[i]);
  if (present.length === 0) return true;
  const nfproto = family === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
  return withNft((x): true => {
    const fills: Array<(b: NlBuilder) => NlBuilder> = [];
    const types: number[] = [];
    for (const p of present) {
      for (const h of jumpHandles(x, nfproto, table, p.from, p.target)) {
        fills.push((b) =>
          b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, p.from).attr(NFTA_RULE_HANDLE, h),
        );
        types.push(NFT_MSG_DELRULE);
      }
      // no handle: every rule of the chain (a flush), then the empty chain itself
      fills.push((b) => b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, p.target));
      types.push(NFT_MSG_DELRULE);
      fills.push((b) => b.attrStr(NFTA_CHAIN_TABLE, table).attrStr(NFTA_CHAIN_NAME, p.target));
      types.push(NFT_MSG_DELCHAIN);
    }
    transaction(x, fills, nfproto, types);
    return true;
  });
}

/** What nftChainJumps tells of one iptables-nft chain. */
export interface ChainJumps {
  /** Number of rules in the chain (0 when it does not exist; with `until`, of the part read). */
  rules: number;
  /** The chains its rules jump or go to, in rule order (one entry per such rule). */
  jumps: string[];
}

/**
 * In the calling thread's network namespace: how many rules the iptables-nft chain `family` `table` `chain` holds
 * and which chains they jump to — one nfnetlink dump of that chain only (never the whole table), no tool process.
 * Undefined when the kernel does not answer; a missing chain has no rules.
 */
export function nftChainJumps(
  family: 4 | 6,
  table: string,
  chain: string,
  opts: { until?: readonly string[] } = {},
): ChainJumps | undefined {
  const nfproto = family === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
  return withNft((x) => {
    // `until`: the reading stops at the first datagram after which a rule jumping to each of these chains was seen
    // (a chain like POSTROUTING holds one jump per container; the shared jump looked for is inserted at its top)
    const until = opts.until?.map((t) => Buffer.from(t));
    const enough = until
      ? (sofar: readonly NlMessage[]) =>
          until.every((t) =>
            sofar.some(
              (m) => m.payload.includes(t) && ruleJumpTarget(parseAttrs(m.payload, 4)) === t.toString(),
            ),
          )
      : undefined;
    const rules = listRules(x, nfproto, table, chain, undefined, enough);
    const jumps: string[] = [];
    for (const r of rules) {
      const t = ruleJumpTarget(r.attrs);
      if (t !== undefined) jumps.push(t);
    }
    return { rules: rules.length, jumps };
  });
}

/** A per-container chain and the rules of other chains known (by handle) to jump to it. */
export interface KnownJumps {
  /** The per-container chain; flushed and deleted. */
  target: string;
  /** The rules jumping to it: the chain holding each and its NFTA_RULE_HANDLE (8 bytes, big-endian). */
  jumps: ReadonlyArray<{ from: string; handle: Buffer }>;
}

/** The rule `handle` of `table` `chain` — one NFT_MSG_GETRULE without NLM_F_DUMP — or undefined when it is gone. */
function getRule(
  x: Exchange,
  family: number,
  table: string,
  chain: string,
  handle: Buffer,
): Attrs | undefined {
  nftRuleRequests.ruleGets++;
  const seq = nextSeq();
  x.send([
    nfgen(new NlBuilder(nftType(NFT_MSG_GETRULE), NLM_F_REQUEST | NLM_F_ACK, 96), family)
      .attrStr(NFTA_RULE_TABLE, table)
      .attrStr(NFTA_RULE_CHAIN, chain)
      .attr(NFTA_RULE_HANDLE, handle)
      .finish(seq),
  ]);
  const m = x.get(seq);
  if (!m || (m.type & 0xff) !== NFT_MSG_NEWRULE) return undefined;
  return parseAttrs(m.payload, 4);
}

/**
 * nftRemoveJumpChains when the jumps are known by handle (learnt when they were created), without listing any chain:
 * each rule is fetched by its handle (NFT_MSG_GETRULE with table, chain and handle, no dump) and must still be in
 * its chain and jump to the container's chain; then, in ONE transaction, those rules are deleted and the chain is
 * flushed and deleted. The kernel refuses to delete a chain that is still the target of a jump (EBUSY), so a jump
 * that was not known (made by another writer) aborts the transaction: nothing changes, never another container's
 * rule. `absent`: chains of `table` that must not exist (checked with one GET each). True when done; undefined when
 * a rule is gone or is not what was recorded, a chain of `absent` exists, or the kernel did not go along — the
 * caller then takes nftRemoveJumpChains (or its tools).
 */
export function nftRemoveKnownJumpChains(
  family: 4 | 6,
  table: string,
  known: readonly KnownJumps[],
  absent: readonly string[] = [],
): true | undefined {
  if (absent.some((c) => nftExists(family === 4 ? 'ip' : 'ip6', table, c) !== false)) return undefined;
  const nfproto = family === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
  return withNft((x): true => {
    const fills: Array<(b: NlBuilder) => NlBuilder> = [];
    const types: number[] = [];
    for (const k of known) {
      for (const j of k.jumps) {
        const r = getRule(x, nfproto, table, j.from, j.handle);
        if (!r || str(r, NFTA_RULE_CHAIN) !== j.from || ruleJumpTarget(r) !== k.target)
          throw new NftError(`rule ${j.handle.toString('hex')} of ${j.from} is not a jump to ${k.target}`);
        fills.push((b) =>
          b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, j.from).attr(NFTA_RULE_HANDLE, j.handle),
        );
        types.push(NFT_MSG_DELRULE);
      }
      fills.push((b) => b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, k.target));
      types.push(NFT_MSG_DELRULE);
      fills.push((b) => b.attrStr(NFTA_CHAIN_TABLE, table).attrStr(NFTA_CHAIN_NAME, k.target));
      types.push(NFT_MSG_DELCHAIN);
    }
    if (fills.length) transaction(x, fills, nfproto, types);
    return true;
  });
}

// ---- rules of nft-written tables (nftables backends: `nft -f -` writes, nfnetlink reads and deletes by handle) ----

const NFTA_RULE_USERDATA = 7;
const NFTNL_UDATA_RULE_COMMENT = 0;
const NETLINK_ADD_MEMBERSHIP = 1;
const NFNLGRP_NFTABLES = 7;
const NFPROTO_OF: Record<string, number> = { inet: 1, ip: 2, arp: 3, netdev: 5, bridge: 7, ip6: 10 };

/** The comment `nft` stored with a rule (NFTA_RULE_USERDATA, libnftnl's TLV NFTNL_UDATA_RULE_COMMENT), if any. */
export function nftRuleComment(rule: Attrs): string | undefined {
  const u = rule.get(NFTA_RULE_USERDATA);
  if (!u) return undefined;
  for (let off = 0; off + 2 <= u.length; ) {
    const type = u[off] as number;
    const len = u[off + 1] as number;
    if (off + 2 + len > u.length) return undefined;
    if (type === NFTNL_UDATA_RULE_COMMENT) {
      const v = u.subarray(off + 2, off + 2 + len);
      const nul = v.indexOf(0);
      return v.toString('utf8', 0, nul < 0 ? v.length : nul);
    }
    off += 2 + len;
  }
  return undefined;
}

/** A rule known by its chain and NFTA_RULE_HANDLE (8 bytes, big-endian). */
export interface NftRuleRef {
  chain: string;
  handle: Buffer;
}

/** What nftWatchRules hands back: the rules created since it was opened, and its closing. */
export interface NftRuleWatch {
  /**
   * The rules of `family` `table` whose comment `comment` picks that the kernel announced as created since the
   * watch was opened (its NFT_MSG_NEWRULE notifications, already queued once the writer's commit returned), or
   * undefined when some notifications were lost (a full receive buffer) or could not be read.
   */
  created(
    family: string,
    table: string,
    comment: (c: string | undefined) => boolean,
  ): NftRuleRef[] | undefined;
  close(): void;
}

/**
 * In the calling thread's network namespace: a socket that listens to nf_tables' change notifications
 * (NFNLGRP_NFTABLES), opened before a `nft -f -` commit so that the handles of the rules it created are learnt
 * from the kernel without listing anything (`nft --echo` reads the whole table to print them). Undefined when it
 * cannot be opened.
 */
export function nftWatchRules(): NftRuleWatch | undefined {
  let sock: NetlinkSocket | undefined;
  try {
    sock = NetlinkSocket.open(NETLINK_NETFILTER);
    sock.setOption(NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTABLES);
  } catch {
    sock?.close();
    return undefined;
  }
  const s = sock;
  return {
    created(family, table, comment) {
      const nfproto = NFPROTO_OF[family];
      const out: NftRuleRef[] = [];
      try {
        for (;;) {
          const buf = s.recv(0);
          if (!buf) return out;
          for (const m of parseMessages(buf)) {
            if (m.type !== nftType(NFT_MSG_NEWRULE) || m.payload[0] !== nfproto) continue;
            const a = parseAttrs(m.payload, 4);
            if (str(a, NFTA_RULE_TABLE) !== table || !comment(nftRuleComment(a))) continue;
            const chain = str(a, NFTA_RULE_CHAIN);
            const h = a.get(NFTA_RULE_HANDLE);
            if (chain !== undefined && h?.length === 8) out.push({ chain, handle: Buffer.from(h) });
          }
        }
      } catch {
        return undefined;
      }
    },
    close() {
      closeAfterTask(s);
    },
  };
}

/** Each rule fetched by handle (no dump): it must be in its chain and carry a comment that `comment` accepts. */
function holding(
  x: Exchange,
  nfproto: number,
  table: string,
  rules: readonly NftRuleRef[],
  comment: (c: string | undefined) => boolean,
): void {
  for (const r of rules) {
    const a = getRule(x, nfproto, table, r.chain, r.handle);
    if (!a || str(a, NFTA_RULE_CHAIN) !== r.chain || !comment(nftRuleComment(a)))
      throw new NftError(`rule ${r.handle.toString('hex')} of ${r.chain} is not the one recorded`);
  }
}

/**
 * In the calling thread's network namespace: true when every rule of `rules` still exists in `family` `table` (any
 * nftables family) with a comment that `comment` accepts — one NFT_MSG_GETRULE by handle each, no listing;
 * undefined when one is gone or different, or the kernel did not answer.
 */
export function nftKnownRulesHold(
  family: string,
  table: string,
  rules: readonly NftRuleRef[],
  comment: (c: string | undefined) => boolean,
): true | undefined {
  const nfproto = NFPROTO_OF[family];
  if (nfproto === undefined) return undefined;
  return withNft((x): true => {
    holding(x, nfproto, table, rules, comment);
    return true;
  });
}

/**
 * nftKnownRulesHold, then those rules deleted in ONE nf_tables transaction (no `nft` process, no listing); with
 * `chains` (per-container chains of `table`, named by the caller), each of them flushed and deleted in the same
 * transaction, after the rules. The kernel refuses to delete a chain that is still the target of a jump (EBUSY) or
 * that does not exist (ENOENT): the whole transaction is then aborted. True when done (also for an empty list);
 * undefined when a rule does not hold or the kernel did not go along: nothing was changed then, and the caller lists
 * the chains as before.
 */
export function nftDeleteKnownRules(
  family: string,
  table: string,
  rules: readonly NftRuleRef[],
  comment: (c: string | undefined) => boolean,
  chains: readonly string[] = [],
): true | undefined {
  const nfproto = NFPROTO_OF[family];
  if (nfproto === undefined) return undefined;
  if (rules.length === 0 && chains.length === 0) return true;
  return withNft((x): true => {
    holding(x, nfproto, table, rules, comment);
    const fills: Array<(b: NlBuilder) => NlBuilder> = rules.map(
      (r) => (b: NlBuilder) =>
        b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, r.chain).attr(NFTA_RULE_HANDLE, r.handle),
    );
    const types: number[] = rules.map(() => NFT_MSG_DELRULE);
    for (const c of chains) {
      // no handle: every rule of the chain (a flush, releasing the chains it jumps to), then the empty chain
      fills.push((b) => b.attrStr(NFTA_RULE_TABLE, table).attrStr(NFTA_RULE_CHAIN, c));
      types.push(NFT_MSG_DELRULE);
      fills.push((b) => b.attrStr(NFTA_CHAIN_TABLE, table).attrStr(NFTA_CHAIN_NAME, c));
      types.push(NFT_MSG_DELCHAIN);
    }
    transaction(x, fills, nfproto, types);
    return true;
  });
}
