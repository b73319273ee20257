/**
 * An in-process iptables-restore for iptables-nft 1.8.9: the restore scripts IptablesBatch renders (`:CHAIN`, `-A`,
 * `-I CHAIN 1`, `-F`, `-X` lines of the `nat`/`filter` tables) applied as ONE nf_tables transaction over nfnetlink,
 * producing the objects iptables-nft 1.8.9 makes for the same input, byte for byte (proved by
 * iptnft.kernel.test.ts against iptables-restore itself): the `ip`/`ip6` tables, the built-in chains with
 * iptables-nft's types/hooks/priorities/policy (created when a rule first needs them, as iptables-nft does), and
 * each rule's expressions — `payload`/`cmp`/`bitwise`/`meta` where iptables-nft translates a match natively
 * (`-s`, `-d`, `-p`, tcp/udp `--dport`, `-m mark`), `match`/`target` compat expressions with the xtables info
 * structs for the rest (comment, multiport, addrtype, MASQUERADE, DNAT, MARK), a `counter` before the verdict
 * (iptables-nft 1.8.9 stores no rule userdata).
 *
 * Anything this writer does not reproduce exactly (another iptables version or the legacy backend, an option it
 * does not know, a rule position other than 1, `-D` of a rule spec) answers `false` before anything is sent: the
 * caller then runs iptables-restore as before. A transaction the kernel refuses (a chain created meanwhile …)
 * changes nothing and also answers `false`. `CNIKIT_IPTABLES_RESTORE=exec` forces iptables-restore every time.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { closeAfterTask, nftExists, traceSection, withNetns, xtablesTableLoaded } from '@cnikit/netlink';
import {
  NLM_F_ACK,
  NLM_F_APPEND,
  NLM_F_CREATE,
  NLM_F_ECHO,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NLMSG_ERROR,
  NlBuilder,
  parseAttrs,
  parseMessages,
} from '@cnikit/netlink/wire';
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';
import { parseCidr } from './cidr.ts';
import { runTool, type ToolOptions } from './exec.ts';

type Family = 4 | 6;

// --- nf_tables netlink constants (linux/netfilter/nf_tables.h) -------------------------------------------------
const NFT = 10 << 8; // NFNL_SUBSYS_NFTABLES
const MSG = { newtable: 0, newchain: 3, delchain: 5, newrule: 6, delrule: 8 } as const;
const BATCH_BEGIN = 16;
const BATCH_END = 17;
const TABLE_NAME = 1;
const TABLE_FLAGS = 2;
const CHAIN_TABLE = 1;
const CHAIN_NAME = 3;
const CHAIN_HOOK = 4;
const CHAIN_POLICY = 5;
const CHAIN_TYPE = 7;
const HOOK_NUM = 1;
const HOOK_PRIORITY = 2;
const RULE_TABLE = 1;
const RULE_CHAIN = 2;
const RULE_HANDLE = 3;
const RULE_EXPRESSIONS = 4;
const RULE_COMPAT = 5;
const RULE_COMPAT_PROTO = 1;
const RULE_COMPAT_FLAGS = 2;
const LIST_ELEM = 1;
const EXPR_NAME = 1;
const EXPR_DATA = 2;
const DATA_VALUE = 1;
const DATA_VERDICT = 2;
const VERDICT_CODE = 1;
const VERDICT_CHAIN = 2;
const REG_VERDICT = 0;
const REG_1 = 1;
const PAYLOAD_NETWORK = 1;
const PAYLOAD_TRANSPORT = 2;
const META_MARK = 3;
const META_L4PROTO = 16;
const CMP_EQ = 0;
const CMP_NEQ = 1;
const VERDICT = { ACCEPT: 1, DROP: 0, RETURN: -5, jump: -3, goto: -4 } as const;
const NFPROTO = { 4: 2, 6: 10 } as const;

/** iptables-nft's built-in chains: hook number, priority, chain type, per table. */
const BUILTIN: Record<string, Record<string, [hook: number, priority: number]>> = {
  nat: { PREROUTING: [0, -100], INPUT: [1, 100], OUTPUT: [3, -100], POSTROUTING: [4, 100] },
  filter: { INPUT: [1, 0], FORWARD: [2, 0], OUTPUT: [3, 0] },
};

const be32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
};
const be64zero = () => Buffer.alloc(8);

/** One expression: its name and a filler for its NFTA_EXPR_DATA attributes. */
interface Expr {
  name: string;
  fill: (b: NlBuilder) => void;
}

/** The iptables option is not reproduced by this writer: the caller falls back to iptables-restore. */
class Unsupported extends Error {}
const no = (why: string): never => {
  throw new Unsupported(why);
};

const payload = (base: number, offset: number, len: number): Expr => ({
  name: 'payload',
  fill: (b) => {
    b.attr(1, be32(REG_1)).attr(2, be32(base)).attr(3, be32(offset)).attr(4, be32(len));
  },
});
const meta = (key: number): Expr => ({
  name: 'meta',
  fill: (b) => {
    b.attr(2, be32(key)).attr(1, be32(REG_1)); // NFTA_META_KEY, NFTA_META_DREG
  },
});
const dataValue = (b: NlBuilder, type: number, v: Uint8Array) => {
  b.begin(type, true).attr(DATA_VALUE, v).end();
};
const cmp = (op: number, v: Uint8Array): Expr => ({
  name: 'cmp',
  fill: (b) => {
    b.attr(1, be32(REG_1)).attr(2, be32(op));
    dataValue(b, 3, v);
  },
});
const bitwise = (mask: Uint8Array): Expr => ({
  name: 'bitwise',
  fill: (b) => {
    b.attr(1, be32(REG_1)).attr(2, be32(REG_1)).attr(3, be32(mask.length));
    dataValue(b, 4, mask);
    dataValue(b, 5, Buffer.alloc(mask.length));
  },
});
const counter: Expr = {
  name: 'counter',
  fill: (b) => {
    b.attr(1, be64zero()).attr(2, be64zero());
  },
};
const verdict = (code: number, chain?: string): Expr => ({
  name: 'immediate',
  fill: (b) => {
    b.attr(1, be32(REG_VERDICT));
    b.begin(2, true).begin(DATA_VERDICT, true).attr(VERDICT_CODE, be32(code));
    if (chain !== undefined) b.attrStr(VERDICT_CHAIN, chain);
    b.end().end();
  },
});
const compat = (kind: 'match' | 'target', name: string, rev: number, info: Uint8Array): Expr => ({
  name: kind,
  fill: (b) => {
    b.attrStr(1, name).attr(2, be32(rev)).attr(3, info);
  },
});

/** Address bytes of a family (IPv4: 4, IPv6: 16). */
function addrBytes(family: Family, ip: string): Buffer {
  const c = parseCidr(ip.includes('/') ? ip : `${ip}/${family === 4 ? 32 : 128}`);
  if (c.family !== family) no(`address ${ip} is not IPv${family}`);
  if (family === 4) return Buffer.from(c.ip.split('.').map(Number));
  return ipv6Bytes(c.ip);
}

function ipv6Bytes(ip: string): Buffer {
  const out = Buffer.alloc(16);
  let head = ip;
  let tail = '';
  const dbl = ip.indexOf('::');
  if (dbl >= 0) {
    head = ip.slice(0, dbl);
    tail = ip.slice(dbl + 2);
  }
  const parse = (s: string) => (s === '' ? [] : s.split(':'));
  let h = parse(head);
  let t = parse(tail);
  const v4 = (arr: string[]) => {
    const last = arr[arr.length - 1];
    if (last?.includes('.')) {
      const p = last.split('.').map(Number);
      arr.splice(arr.length - 1, 1, ((p[0]! << 8) | p[1]!).toString(16), ((p[2]! << 8) | p[3]!).toString(16));
    }
    return arr;
  };
  if (t.length) t = v4(t);
  else h = v4(h);
  h.forEach((g, i) => {
    out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  });
  t.forEach((g, i) => {
    out.writeUInt16BE(Number.parseInt(g, 16), 16 - (t.length - i) * 2);
  });
  return out;
}

/** `-s`/`-d` as iptables-nft 1.8.9 writes it: whole bytes of a byte-aligned prefix, else the address masked. */
function addrMatch(family: Family, which: 's' | 'd', value: string, invert: boolean): Expr[] {
  let ip = value;
  let prefix = family === 4 ? 32 : 128;
  const slash = value.indexOf('/');
  if (slash >= 0) {
    ip = value.slice(0, slash);
    const p = value.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) no(`mask ${p}`);
    prefix = Number(p);
    if (prefix > (family === 4 ? 32 : 128)) no(`prefix ${p}`);
  }
  if (prefix === 0) {
    if (invert) no('inverted /0');
    return []; // iptables drops a match-all address
  }
  const full = addrBytes(family, ip);
  const masked = Buffer.alloc(full.length);
  for (let i = 0; i < full.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    masked[i] = full[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  const offset = family === 4 ? (which === 's' ? 12 : 16) : which === 's' ? 8 : 24;
  const op = invert ? CMP_NEQ : CMP_EQ;
  if (prefix % 8 === 0) {
    const n = prefix / 8;
    return [payload(PAYLOAD_NETWORK, offset, n), cmp(op, masked.subarray(0, n))];
  }
  const mask = Buffer.alloc(full.length);
  for (let i = 0; i < full.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    mask[i] = (0xff << (8 - bits)) & 0xff;
  }
  return [payload(PAYLOAD_NETWORK, offset, full.length), bitwise(mask), cmp(op, masked)];
}

const PROTO: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };

function u32Value(s: string): number {
  if (!/^(0x[0-9a-fA-F]{1,8}|\d{1,10})$/.test(s)) no(`number ${s}`);
  const v = Number(s);
  if (v > 0xffffffff) no(`number ${s}`);
  return v;
}

function port(s: string): number {
  if (!/^\d{1,5}$/.test(s) || Number(s) > 65535) no(`port ${s}`);
  return Number(s);
}

/** struct xt_comment_info { char comment[256]; } */
function commentInfo(text: string): Buffer {
  const b = Buffer.alloc(256);
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > 255) no('comment longer than 255 bytes');
  bytes.copy(b);
  return b;
}

/** struct xt_multiport_v1 { u8 flags, count; u16 ports[15]; u8 pflags[15]; u8 invert; } (48 bytes) */
function multiportInfo(list: string): Buffer {
  const b = Buffer.alloc(48);
  const items = list.split(',');
  const ports: number[] = [];
  const pflags: number[] = [];
  for (const it of items) {
    const [lo, hi] = it.split(':');
    if (lo === undefined || it.split(':').length > 2) no(`port ${it}`);
    ports.push(port(lo!));
    pflags.push(0);
    if (hi !== undefined) {
      pflags[pflags.length - 1] = 1;
      ports.push(port(hi));
      pflags.push(0);
    }
  }
  if (ports.length > 15) no('more than 15 ports');
  b[0] = 1; // XT_MULTIPORT_DESTINATION
  b[1] = ports.length;
  ports.forEach((p, i) => {
    b.writeUInt16LE(p, 2 + i * 2);
  });
  pflags.forEach((f, i) => {
    b[32 + i] = f;
  });
  return b;
}

/** struct xt_addrtype_info_v1 { u16 source, dest; u32 flags; } */
const ADDRTYPE: Record<string, number> = {
  UNSPEC: 1 << 0,
  UNICAST: 1 << 1,
  LOCAL: 1 << 2,
  BROADCAST: 1 << 3,
  ANYCAST: 1 << 4,
  MULTICAST: 1 << 5,
  BLACKHOLE: 1 << 6,
  UNREACHABLE: 1 << 7,
  PROHIBIT: 1 << 8,
  THROW: 1 << 9,
  NAT: 1 << 10,
  XRESOLVE: 1 << 11,
};

/** struct nf_nat_range2 (44 bytes, 48 as iptables sends it) for DNAT rev 2: `ip`, `ip:port`, `[ip6]:port`. */
function dnatInfo(family: Family, to: string): Buffer {
  let ip = to;
  let p: number | undefined;
  if (family === 6) {
    const m = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(to) ?? /^([0-9a-fA-F:.]+)$/.exec(to);
    if (!m) no(`--to-destination ${to}`);
    ip = m![1]!;
    if (m![2] !== undefined) p = port(m![2]);
  } else {
    const m = /^([0-9.]+)(?::(\d+))?$/.exec(to);
    if (!m) no(`--to-destination ${to}`);
    ip = m![1]!;
    if (m![2] !== undefined) p = port(m![2]);
  }
  const a = addrBytes(family, ip);
  const b = Buffer.alloc(48);
  b.writeUInt32LE(p === undefined ? 1 : 3); // NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED
  a.copy(b, 4);
  a.copy(b, 20);
  if (p !== undefined) {
    b.writeUInt16BE(p, 36);
    b.writeUInt16BE(p, 38);
  }
  return b;
}

/** struct xt_sctp_info (292 bytes, 296 as iptables sends it): destination port(s) only. */
function sctpInfo(lo: number, hi: number): Buffer {
  const b = Buffer.alloc(296);
  b.writeUInt16LE(lo, 0);
  b.writeUInt16LE(hi, 2);
  for (const off of [268, 271, 274, 277]) b[off] = 0xff; // flag_info[].chunktype unset
  b.writeUInt32LE(0x02, 284); // XT_SCTP_DEST_PORTS
  return b;
}

/** A match in iptables' match list: its place is where `-m` (or the implicit protocol match) appeared. */
interface Slot {
  module: string;
  exprs?: Expr[];
}

/** The expressions and compat protocol of one rule specification (iptables-nft 1.8.9's encoding). */
export function encodeRule(family: Family, args: readonly string[]): { exprs: Expr[]; proto?: number } {
  let s: Expr[] = [];
  let d: Expr[] = [];
  let proto: number | undefined;
  let protoName = '';
  const slots: Slot[] = [];
  let target: Expr | undefined;
  let neg = false;
  let i = 0;
  const next = () => {
    const v = args[++i];
    if (v === undefined) no('missing value');
    return v!;
  };
  const noNeg = () => {
    if (neg) no('negation');
  };
  /** The slot of a loaded module that has not got its option yet (each module here takes exactly one). */
  const slot = (module: string, implicit = false): Slot => {
    const found = slots.find((x) => x.module === module);
    if (found) {
      if (found.exprs) no(`a second option for -m ${module}`);
      return found;
    }
    if (!implicit) no(`option of -m ${module} without -m ${module}`);
    const x: Slot = { module };
    slots.push(x);
    return x;
  };
  const seen = new Set<string>();
  for (; i < args.length; i++) {
    const t = args[i]!;
    if (t === '!') {
      if (neg) no('double negation');
      neg = true;
      continue;
    }
    switch (t) {
      case '-s':
      case '-d': {
        if (seen.has(t)) no(`${t} twice`);
        seen.add(t);
        const e = addrMatch(family, t === '-s' ? 's' : 'd', next(), neg);
        if (t === '-s') s = e;
        else d = e;
        neg = false;
        continue;
      }
      case '-p': {
        noNeg();
        if (proto !== undefined) no('-p twice');
        protoName = next().toLowerCase();
        proto = PROTO[protoName];
        if (proto === undefined) no(`protocol ${protoName}`);
        continue;
      }
      case '-m': {
        noNeg();
        const m = next();
        if (!['comment', 'multiport', 'mark', 'addrtype', 'tcp', 'udp', 'sctp'].includes(m)) no(`-m ${m}`);
        if (slots.some((x) => x.module === m)) no(`-m ${m} twice`);
        slots.push({ module: m });
        continue;
      }
      case '-j':
      case '-g': {
        noNeg();
        if (target) no('two targets');
        const name = next();
        if (t === '-g') {
          target = verdict(VERDICT.goto, name);
          continue;
        }
        if (name === 'ACCEPT' || name === 'DROP' || name === 'RETURN') target = verdict(VERDICT[name]);
        else if (name === 'MASQUERADE') target = compat('target', 'MASQUERADE', 0, masqInfo(family));
        else if (name === 'DNAT' && args[i + 1] === '--to-destination') {
          i++;
          target = compat('target', 'DNAT', 2, dnatInfo(family, next()));
        } else if (name === 'MARK' && args[i + 1] === '--set-xmark') {
          i++;
          const [v, m] = next().split('/');
          const info = Buffer.alloc(8);
          info.writeUInt32LE(u32Value(v!));
          info.writeUInt32LE(m === undefined ? 0xffffffff : u32Value(m), 4);
          target = compat('target', 'MARK', 2, info);
        } else if (/^[A-Z]+$/.test(name)) no(`-j ${name}`);
        else target = verdict(VERDICT.jump, name);
        continue;
      }
    }
    if (t === '--dport' || t === '--destination-port') {
      noNeg();
      const v = next();
      if (protoName === 'tcp' || protoName === 'udp') {
        // iptables-nft 1.8.9 writes a tcp/udp destination port natively
        const b = Buffer.alloc(2);
        b.writeUInt16BE(port(v));
        slot(protoName, true).exprs = [payload(PAYLOAD_TRANSPORT, 2, 2), cmp(CMP_EQ, b)];
      } else if (protoName === 'sctp') {
        const p = port(v);
        slot('sctp', true).exprs = [compat('match', 'sctp', 0, sctpInfo(p, p))];
      } else no(`${t} without -p tcp/udp/sctp`);
      continue;
    }
    if (t === '--comment') {
      noNeg();
      slot('comment').exprs = [compat('match', 'comment', 0, commentInfo(next()))];
      continue;
    }
    if (t === '--destination-ports' || t === '--dports') {
      noNeg();
      if (protoName !== 'tcp' && protoName !== 'udp' && protoName !== 'sctp') no('multiport without -p');
      slot('multiport').exprs = [compat('match', 'multiport', 1, multiportInfo(next()))];
      continue;
    }
    if (t === '--mark') {
      noNeg();
      const [v, m] = next().split('/');
      const val = Buffer.alloc(4);
      val.writeUInt32LE(u32Value(v!));
      const ex: Expr[] = [meta(META_MARK)];
      if (m !== undefined) {
        const mask = Buffer.alloc(4);
        mask.writeUInt32LE(u32Value(m));
        if (mask.readUInt32LE() !== 0xffffffff) ex.push(bitwise(mask));
      }
      slot('mark').exprs = [...ex, cmp(CMP_EQ, val)];
      continue;
    }
    if (t === '--dst-type') {
      noNeg();
      let mask = 0;
      for (const n of next().split(',')) {
        const v = ADDRTYPE[n.toUpperCase()];
        if (v === undefined) no(`address type ${n}`);
        mask |= v!;
      }
      const info = Buffer.alloc(8);
      info.writeUInt16LE(mask, 2);
      slot('addrtype').exprs = [compat('match', 'addrtype', 1, info)];
      continue;
    }
    no(`option ${t}`);
  }
  if (neg) no('dangling !');
  const exprs: Expr[] = [];
  if (proto !== undefined) exprs.push(meta(META_L4PROTO), cmp(CMP_EQ, Buffer.from([proto])));
  exprs.push(...s, ...d);
  for (const x of slots) {
    if (!x.exprs) no(`-m ${x.module} without its option`);
    if ((x.module === 'tcp' || x.module === 'udp' || x.module === 'sctp') && x.module !== protoName)
      no(`-m ${x.module} without -p ${x.module}`);
    exprs.push(...x.exprs!);
  }
  exprs.push(counter);
  if (target) exprs.push(target);
  return proto === undefined ? { exprs } : { exprs, proto };
}

/** MASQUERADE rev 0: IPv4 nf_nat_ipv4_multi_range_compat with rangesize 1 (24 bytes), IPv6 nf_nat_range (40). */
function masqInfo(family: Family): Buffer {
  if (family === 6) return Buffer.alloc(40);
  const b = Buffer.alloc(24);
  b.writeUInt32LE(1);
  return b;
}

/** iptables-restore argument splitting: blanks separate, "…" quotes with \" and \\ escapes. */
function splitLine(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (i >= text.length) break;
    let tok = '';
    while (i < text.length && text[i] !== ' ' && text[i] !== '\t') {
      if (text[i] === '"') {
        i++;
        while (i < text.length && text[i] !== '"') {
          if (text[i] === '\\') {
            // iptables-restore takes the character after any backslash; we only write \" and \\
            if (text[i + 1] !== '"' && text[i + 1] !== '\\') no('backslash escape');
            i++;
          }
          tok += text[i++];
        }
        if (text[i] !== '"') no('unterminated quote');
        i++;
      } else if (text[i] === '\\') no('backslash outside quotes');
      else tok += text[i++];
    }
    out.push(tok);
  }
  return out;
}

type Fill = {
  type: number;
  flags: number;
  fill: (b: NlBuilder) => void;
  /** A rule this message creates: where, and the chain it jumps to (`-j CHAIN`, `-g CHAIN`), if any. */
  rule?: { table: string; chain: string; target?: string };
};

/** A rule the kernel created for an in-process restore, with the handle it assigned (echoed back, NLM_F_ECHO). */
export interface CreatedRule {
  table: string;
  chain: string;
  /** The chain the rule jumps or goes to, if any. */
  target?: string;
  /** NFTA_RULE_HANDLE as the kernel sent it: 16 hex digits (a big-endian u64). */
  handle: string;
}

/** The chain a rule specification jumps or goes to, if any (not a built-in verdict or target extension). */
function jumpOf(spec: readonly string[]): string | undefined {
  for (let i = 0; i < spec.length - 1; i++)
    if ((spec[i] === '-j' || spec[i] === '-g') && !/^[A-Z]+$/.test(spec[i + 1]!)) return spec[i + 1];
  return undefined;
}

/** The transaction's messages for a restore script, or Unsupported. Exported for tests. */
export function planScript(
  family: Family,
  script: string,
  exists: (table: string, chain?: string) => boolean | undefined,
): Fill[] {
  const out: Fill[] = [];
  const known = new Map<string, boolean>(); // "table" / "table chain" → exists (as this batch leaves it)
  const has = (table: string, chain?: string) => {
    const k = chain === undefined ? table : `${table} ${chain}`;
    let v = known.get(k);
    if (v === undefined) {
      const e = exists(table, chain);
      if (e === undefined) no('the kernel did not say whether a chain exists');
      v = e!;
      known.set(k, v);
    }
    return v;
  };
  const ensureTable = (table: string) => {
    if (has(table)) return;
    out.push({
      type: MSG.newtable,
      flags: NLM_F_CREATE,
      fill: (b) => {
        b.attrStr(TABLE_NAME, table).attr(TABLE_FLAGS, be32(0));
      },
    });
    known.set(table, true);
  };
  const ensureBuiltin = (table: string, chain: string) => {
    const hook = BUILTIN[table]?.[chain];
    if (!hook) return;
    ensureTable(table);
    if (has(table, chain)) return;
    out.push({
      type: MSG.newchain,
      flags: NLM_F_CREATE,
      fill: (b) => {
        b.attrStr(CHAIN_TABLE, table).attrStr(CHAIN_NAME, chain);
        b.begin(CHAIN_HOOK, true).attr(HOOK_NUM, be32(hook[0])).attr(HOOK_PRIORITY, be32(hook[1])).end();
        b.attr(CHAIN_POLICY, be32(1)).attrStr(CHAIN_TYPE, table);
      },
    });
    known.set(`${table} ${chain}`, true);
  };
  const userChain = (table: string, chain: string) => {
    if (BUILTIN[table]?.[chain]) no(`built-in chain ${chain} used as a user chain`);
    if (!/^[^\s"'\\!-][^\s"'\\]{0,27}$/.test(chain)) no(`chain name ${chain}`);
  };
  let table: string | undefined;
  for (const raw of script.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      if (table !== undefined) no('table without COMMIT');
      table = line.slice(1);
      if (!BUILTIN[table]) no(`table ${table}`);
      continue;
    }
    if (table === undefined) no(`line outside a table: ${line}`);
    const t = table!;
    if (line === 'COMMIT') {
      table = undefined;
      continue;
    }
    if (line.startsWith(':')) {
      const m = /^:(\S+) - \[0:0\]$/.exec(line);
      if (!m) no(`chain line ${line}`);
      const chain = m![1]!;
      userChain(t, chain);
      ensureTable(t);
      if (has(t, chain)) no(`chain ${chain} exists (restore would flush it)`);
      out.push({
        type: MSG.newchain,
        flags: NLM_F_CREATE | NLM_F_EXCL,
        fill: (b) => {
          b.attrStr(CHAIN_TABLE, t).attrStr(CHAIN_NAME, chain);
        },
      });
      known.set(`${t} ${chain}`, true);
      continue;
    }
    const args = splitLine(line);
    const [cmd, chain] = args;
    if (chain === undefined) no(`line ${line}`);
    const c = chain!;
    if (cmd === '-A' || cmd === '-I') {
      let spec = args.slice(2);
      if (cmd === '-I') {
        if (spec[0] !== '1') no('insert at a position other than 1');
        spec = spec.slice(1);
      }
      // iptables refuses DROP in the nat table ("not intended for filtering"): let it say so
      if (t === 'nat' && /(^| )-j DROP( |$)/.test(spec.join(' '))) no('DROP in the nat table');
      const { exprs, proto } = encodeRule(family, spec);
      if (BUILTIN[t]![c]) ensureBuiltin(t, c);
      else if (!has(t, c)) no(`chain ${c} does not exist`);
      const target = jumpOf(spec);
      out.push({
        type: MSG.newrule,
        flags: NLM_F_CREATE | (cmd === '-A' ? NLM_F_APPEND : 0),
        rule: target === undefined ? { table: t, chain: c } : { table: t, chain: c, target },
        fill: (b) => {
          b.attrStr(RULE_TABLE, t).attrStr(RULE_CHAIN, c);
          b.begin(RULE_EXPRESSIONS, true);
          for (const e of exprs) {
            b.begin(LIST_ELEM, true).attrStr(EXPR_NAME, e.name).begin(EXPR_DATA, true);
            e.fill(b);
            b.end().end();
          }
          b.end();
          if (proto !== undefined)
            b.begin(RULE_COMPAT, true)
              .attr(RULE_COMPAT_PROTO, be32(proto))
              .attr(RULE_COMPAT_FLAGS, be32(0))
              .end();
        },
      });
      continue;
    }
    if ((cmd === '-F' || cmd === '-X') && args.length === 2) {
      if (BUILTIN[t]![c]) no(`${cmd} of a built-in chain`);
      if (!has(t, c)) no(`chain ${c} does not exist`);
      out.push({
        type: MSG.delrule,
        flags: 0,
        fill: (b) => {
          b.attrStr(RULE_TABLE, t).attrStr(RULE_CHAIN, c);
        },
      });
      if (cmd === '-X') {
        out.push({
          type: MSG.delchain,
          flags: 0,
          fill: (b) => {
            b.attrStr(CHAIN_TABLE, t).attrStr(CHAIN_NAME, c);
          },
        });
        known.set(`${t} ${c}`, false);
      }
      continue;
    }
    no(`command ${cmd}`);
  }
  if (table !== undefined) no('missing COMMIT');
  return out;
}

let seq = (Date.now() ^ (process.pid << 10)) >>> 0;
const nextSeq = () => {
  seq = (seq + 1) >>> 0 || 1;
  return seq;
};

/**
 * Send the messages as ONE transaction: 0 when every message was acknowledged, else the errno of the first error
 * (-1: no answer) — nothing changed then. With `created`, each new rule is sent with NLM_F_ECHO: the kernel sends
 * the rule back as it committed it (the notification, unicast to this socket before the acknowledgements), and the
 * handle it assigned is pushed to `created` with the rule's place and jump target.
 */
function transact(family: Family, msgs: readonly Fill[], created?: CreatedRule[]): number {
  const sock = NetlinkSocket.open(NETLINK_NETFILTER, { receiveBufferSize: 0 });
  try {
    const nfgen = (b: NlBuilder, fam: number, resId: number) =>
      b
        .u8(fam)
        .u8(0)
        .u8(resId >> 8)
        .u8(resId & 0xff);
    const bufs: Buffer[] = [nfgen(new NlBuilder(BATCH_BEGIN, NLM_F_REQUEST, 32), 0, 10).finish(nextSeq())];
    const seqs = new Set<number>();
    const echoed = new Map<number, NonNullable<Fill['rule']>>();
    for (const m of msgs) {
      const s = nextSeq();
      seqs.add(s);
      const echo = created !== undefined && m.rule !== undefined;
      if (echo) echoed.set(s, m.rule!);
      const b = nfgen(
        new NlBuilder(NFT | m.type, NLM_F_REQUEST | NLM_F_ACK | m.flags | (echo ? NLM_F_ECHO : 0), 512),
        NFPROTO[family],
        0,
      );
      m.fill(b);
      bufs.push(b.finish(s));
    }
    bufs.push(nfgen(new NlBuilder(BATCH_END, NLM_F_REQUEST, 32), 0, 10).finish(nextSeq()));
    sock.send(Buffer.concat(bufs));
    // every message is acknowledged (or the first error aborts the batch and is reported)
    const got: CreatedRule[] = [];
    while (seqs.size > 0) {
      const buf = sock.recv(5000);
      if (!buf) return -1;
      for (const m of parseMessages(buf)) {
        const where = echoed.get(m.seq);
        if (where && m.type === (NFT | MSG.newrule)) {
          const h = parseAttrs(m.payload, 4).get(RULE_HANDLE);
          if (h?.length === 8) got.push({ ...where, handle: h.toString('hex') });
          continue;
        }
        if (m.type !== NLMSG_ERROR || !seqs.has(m.seq)) continue;
        const err = -m.payload.readInt32LE(0);
        if (err !== 0) return err;
        seqs.delete(m.seq);
      }
    }
    created?.push(...got);
    return 0;
  } finally {
    closeAfterTask(sock);
  }
}

/** Counter of in-process applications: a test/bench seam. */
export const iptnftStats = { applied: 0, declined: 0, lastReason: '' };

const restoreTool = (f: Family) => (f === 6 ? 'ip6tables-restore' : 'iptables-restore');
const versionCache = new Map<string, boolean>();

/**
 * True when `iptables-restore` (ip6tables-restore) on PATH is iptables 1.8.9 with the nf_tables backend — the
 * encoding this writer reproduces: it resolves to xtables-nft-multi, whose version string says 1.8.9 (read from the
 * binary, or asked with `--version` when the binary does not tell). The binary's real path, size and mtime key a
 * cache of the answer for the life of this process.
 */
export function restoreIsNft189(family: Family, opts: ToolOptions = {}): boolean {
  const tool = restoreTool(family);
  let real: string | undefined;
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(delimiter)) {
    if (!dir) continue;
    try {
      real = realpathSync(join(dir, tool));
      break;
    } catch {}
  }
  if (!real) return false;
  if (!/xtables-nft-multi$/.test(real)) return false;
  let key: string;
  try {
    const st = statSync(real);
    key = `${real} ${st.size} ${st.mtimeMs}`;
  } catch {
    return false;
  }
  let ok = versionCache.get(key);
  if (ok === undefined) {
    // the version it prints is a string in the binary (`1.8.9 (nf_tables)`): read without starting it, which
    // matters for a cold call (one process per call); asked with --version when the binary does not tell
    const inBinary = versionInBinary(real);
    if (inBinary !== undefined) ok = inBinary === '1.8.9';
    else
      try {
        const r = runTool(tool, ['--version'], opts);
        ok = r.status === 0 && /\bv1\.8\.9 \(nf_tables\)/.test(r.stdout);
      } catch {
        ok = false;
      }
    versionCache.set(key, ok);
  }
  return ok;
}

/** The version string `<x.y.z> (nf_tables)` compiled into an xtables-nft-multi binary (one only), else undefined. */
export function versionInBinary(file: string): string | undefined {
  let bin: Buffer;
  try {
    if (statSync(file).size > 16 << 20) return undefined;
    bin = readFileSync(file);
  } catch {
    return undefined;
  }
  const found = new Set<string>();
  const tail = Buffer.from(' (nf_tables)\0', 'latin1');
  for (let at = bin.indexOf(tail); at >= 0; at = bin.indexOf(tail, at + 1)) {
    const start = bin.lastIndexOf(0, at) + 1;
    const v = bin.toString('latin1', start, at);
    if (/^\d+\.\d+\.\d+$/.test(v)) found.add(v);
  }
  return found.size === 1 ? [...found][0] : undefined;
}

/** The switch: `CNIKIT_IPTABLES_RESTORE=exec` always runs iptables-restore. */
export function inProcessEnabled(): boolean {
  return process.env.CNIKIT_IPTABLES_RESTORE !== 'exec';
}

/**
 * Apply an iptables-restore `--noflush` script of `family` in process (in `opts.netns` when given): true when done,
 * false when not attempted or refused by the kernel — nothing was changed then and the caller runs iptables-restore.
 * `created` (when given) receives the rules the kernel created, with their handles (echoed, see transact).
 * The caller has made sure the tables are not legacy x_tables tables (renderBlind's probe).
 */
export function applyRestoreInProcess(
  family: Family,
  script: string,
  opts: ToolOptions = {},
  created?: CreatedRule[],
): boolean {
  if (!inProcessEnabled() || !restoreIsNft189(family, opts)) return false;
  const nfam = family === 4 ? 'ip' : 'ip6';
  const run = () => {
    // a legacy x_tables table of that name is in use: its rules are not in nf_tables
    for (const m of script.matchAll(/^\*(\S+)$/gm))
      if (xtablesTableLoaded(family, m[1]!) !== false) no(`legacy x_tables table ${m[1]} is loaded`);
    const plan = planScript(family, script, (table, chain) => nftExists(nfam, table, chain));
    if (plan.length === 0) return 0;
    return transact(family, plan, created);
  };
  try {
    // traced like the tool it stands for (exec.ts's `exec iptables-restore`), marked in-process
    const err = traceSection(
      'iptables-restore (in-process)',
      { 'cnikit.in_process': true, 'cnikit.iptables.family': family },
      (span) => {
        const e = opts.netns !== undefined ? withNetns(opts.netns, run) : run();
        span?.setAttributes({ 'cnikit.nf_tables.errno': e });
        return e;
      },
    );
    if (err === 0) {
      iptnftStats.applied++;
      return true;
    }
    iptnftStats.declined++;
    iptnftStats.lastReason = `the kernel refused the transaction (errno ${err})`;
    return false;
  } catch (e) {
    iptnftStats.declined++;
    iptnftStats.lastReason = e instanceof Error ? e.message : String(e);
    return false;
  }
}
