/**
 * iptables through `iptables-save` (read) and ONE `iptables-restore --noflush --wait` per family
 * per commit (write). Changes are accumulated in a batch, compared against the current state (read
 * with one `iptables-save -t <table>` per table touched) so that "unique" and "tolerant" operations
 * only emit what is needed, and then applied atomically: iptables-restore is all-or-nothing.
 */
import { nftExists, withNetns, xtablesTableLoaded } from '@cnikit/netlink';
import { parseCidr } from './cidr.ts';
import { runTool, ToolError, type ToolOptions } from './exec.ts';
import { applyRestoreInProcess, type CreatedRule } from './iptnft.ts';

export type IPFamily = 4 | 6;

/** One rule as printed by iptables-save (`-A <chain> <text>`). */
export interface SavedRule {
  chain: string;
  /** The rule specification as printed, without `-A <chain>`. */
  text: string;
  /** `text` split into arguments (quotes removed). */
  args: string[];
  /** Normalised comparison key (see normalizeRule). */
  key: string;
}

/** One table of an iptables-save dump. */
export interface SavedTable {
  name: string;
  /** Chains in dump order (built-in chains included) with their policy (`-` for user chains). */
  chains: Map<string, string>;
  rules: SavedRule[];
}

const saveTool = (f: IPFamily) => (f === 6 ? 'ip6tables-save' : 'iptables-save');
const restoreTool = (f: IPFamily) => (f === 6 ? 'ip6tables-restore' : 'iptables-restore');
const mainTool = (f: IPFamily) => (f === 6 ? 'ip6tables' : 'iptables');

/** Split an iptables-save rule line into arguments (double quotes with backslash escapes). */
export function splitRuleText(text: string): string[] {
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
          if (text[i] === '\\' && i + 1 < text.length) i++;
          tok += text[i++];
        }
        i++;
      } else tok += text[i++];
    }
    out.push(tok);
  }
  return out;
}

/** Quote one argument for an iptables-restore line (restore understands "…" with \" and \\). */
export function quoteRuleArg(arg: string): string {
  if (/[\r\n\0]/.test(arg))
    throw new TypeError(`iptables argument contains a line break or NUL: ${JSON.stringify(arg)}`);
  if (arg !== '' && /^[A-Za-z0-9_.:/,=+!@%^-]+$/.test(arg)) return arg;
  return `"${arg.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

const OPTION_ALIASES: Record<string, string> = {
  '--destination-port': '--dport',
  '--source-port': '--sport',
  '--destination-ports': '--dports',
  '--source-ports': '--sports',
};
/** How iptables-save prints protocols given by number or alias. */
const PROTOCOL_NAMES: Record<string, string> = {
  '1': 'icmp',
  '6': 'tcp',
  '17': 'udp',
  '47': 'gre',
  '50': 'esp',
  '51': 'ah',
  '58': 'ipv6-icmp',
  icmpv6: 'ipv6-icmp',
  '132': 'sctp',
  '136': 'udplite',
};
/** Options of the implicit protocol matches (tcp, udp, sctp, icmp, icmp6). */
const PROTOCOL_OPTIONS = new Set([
  '--dport',
  '--sport',
  '--tcp-flags',
  '--syn',
  '--tcp-option',
  '--icmp-type',
  '--icmpv6-type',
  '--chunk-types',
]);
/** Options that always take exactly one value, even one that looks like an option. */
const ONE_VALUE = new Set([
  '--comment',
  '--log-prefix',
  '--to-destination',
  '--to-source',
  '--to-ports',
  '--set-xmark',
]);

function normAddr(v: string): string {
  try {
    const c = parseCidr(v);
    return `${c.network}/${c.prefix}`;
  } catch {
    return v;
  }
}

/**
 * Normalise a rule specification so that the form we write and the canonical form iptables-save
 * prints compare equal: addresses get their prefix and are masked (`-s 10.1.2.2` ≡ `-s 10.1.2.2/32`),
 * `-s/-d/-i/-o/-p` are put first in iptables' order, the implicit protocol match is made explicit
 * (`-p tcp --dport 80` ≡ `-p tcp -m tcp --dport 80`), long option aliases are folded, and the
 * target (`-j X …`) goes last. Matches keep their relative order, as iptables does.
 */
export function normalizeRule(args: readonly string[]): string {
  const basic: Record<string, string> = {};
  const blocks: string[][] = [];
  let target: string[] | undefined;
  let cur: string[] | undefined;
  let neg = false;
  for (let i = 0; i < args.length; i++) {
    const t = args[i]!;
    if (t === '!') {
      neg = true;
      continue;
    }
    const bang = neg ? '! ' : '';
    neg = false;
    const next = () => args[++i] ?? '';
    const setAddr = (k: 's' | 'd', b: string, v: string) => {
      const a = normAddr(v);
      // A /0 source or destination matches everything: iptables drops it.
      if (b === '' && a.endsWith('/0')) delete basic[k];
      else basic[k] = b + a;
    };
    switch (t) {
      case '-s':
      case '--source':
      case '--src':
        setAddr('s', bang, next());
        continue;
      case '-d':
      case '--destination':
      case '--dst':
        setAddr('d', bang, next());
        continue;
      case '-i':
      case '--in-interface':
        basic.i = bang + next();
        continue;
      case '-o':
      case '--out-interface':
        basic.o = bang + next();
        continue;
      case '-p':
      case '--protocol': {
        const p = next().toLowerCase();
        const name = PROTOCOL_NAMES[p] ?? p;
        // `-p all` (or 0) matches everything: iptables drops it.
        if (bang === '' && (name === 'all' || name === '0')) delete basic.p;
        else basic.p = bang + name;
        continue;
      }
      case '-f':
      case '--fragment':
        basic.f = `${bang}-f`;
        continue;
      case '-m':
      case '--match':
        cur = ['-m', next()];
        blocks.push(cur);
        continue;
      case '-j':
      case '--jump':
        cur = ['-j', next()];
        target = cur;
        continue;
      case '-g':
      case '--goto':
        cur = ['-g', next()];
        target = cur;
        continue;
    }
    if (t.startsWith('-')) {
      const opt = OPTION_ALIASES[t] ?? t;
      const proto = (basic.p ?? '').replace(/^! /, '');
      const inProto = cur !== undefined && cur[0] === '-m' && cur[1] === proto;
      if (!cur || (PROTOCOL_OPTIONS.has(opt) && !inProto)) {
        // An option before any -m, or a protocol option (--dport …) written after another match:
        // it belongs to the implicit protocol match iptables loads for -p, printed as `-m <proto>`.
        let dest = blocks.find((b) => b[0] === '-m' && b[1] === proto);
        if (!dest) {
          dest = ['-m', proto];
          blocks.push(dest);
        }
        cur = dest;
      }
      cur.push(bang + opt);
      if (ONE_VALUE.has(opt)) {
        cur.push(JSON.stringify(next()));
        continue;
      }
      while (
        i + 1 < args.length &&
        !(args[i + 1]!.startsWith('-') && args[i + 1]!.length > 1) &&
        args[i + 1] !== '!'
      ) {
        cur.push(JSON.stringify(args[++i]!));
      }
      continue;
    }
    // A bare value with no option: keep it where it is.
    if (!cur) cur = ['?'];
    cur.push(JSON.stringify(t));
    if (!blocks.includes(cur) && cur !== target) blocks.push(cur);
  }
  const parts: string[] = [];
  for (const k of ['s', 'd', 'i', 'o', 'p', 'f']) if (basic[k] !== undefined) parts.push(`-${k} ${basic[k]}`);
  for (const b of blocks) parts.push(b.join(' '));
  if (target) parts.push(target.join(' '));
  return parts.join(' ');
}

/**
 * A saved rule whose arguments and comparison key are computed on first use: a large nat table (hundreds of
 * portmap chains) is read on every call, but only the rules of the chains a batch touches are ever looked at.
 */
function savedRule(chain: string, text: string, parsed?: string[]): SavedRule {
  let key: string | undefined;
  let args = parsed;
  return {
    chain,
    text,
    get args() {
      args ??= splitRuleText(text);
      return args;
    },
    get key() {
      key ??= normalizeRule(this.args);
      return key;
    },
  };
}

/** Parse iptables-save output into tables. Counters (`[p:b]` prefixes) are ignored. */
export function parseSave(text: string): Map<string, SavedTable> {
  const tables = new Map<string, SavedTable>();
  let cur: SavedTable | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/^\[\d+:\d+\] /, '');
    if (line.startsWith('*')) {
      cur = { name: line.slice(1).trim(), chains: new Map(), rules: [] };
      tables.set(cur.name, cur);
    } else if (!cur || line === '' || line.startsWith('#')) {
    } else if (line.startsWith(':')) {
      const [name, policy] = line.slice(1).split(' ');
      cur.chains.set(name!, policy ?? '-');
    } else if (line.startsWith('-A ')) {
      // `-A <chain> <rule>`: chain names never contain blanks or quotes
      const sp = line.indexOf(' ', 3);
      const chain = sp < 0 ? line.slice(3) : line.slice(3, sp);
      cur.rules.push(savedRule(chain, sp < 0 ? '' : line.slice(sp + 1)));
    } else if (line === 'COMMIT') {
      cur = undefined;
    }
  }
  return tables;
}

/** Raw `iptables-save [-t table]` (or ip6tables-save) output. */
export function iptablesSave(family: IPFamily, table?: string, opts: ToolOptions = {}): string {
  const args = table ? ['-t', table] : [];
  const r = runTool(saveTool(family), args, opts);
  if (r.status !== 0) throw new ToolError(saveTool(family), args, r);
  return r.stdout;
}

/** Read one table (built-in chains are listed even when the table is not instantiated yet). */
export function readTable(family: IPFamily, table: string, opts: ToolOptions = {}): SavedTable {
  const parsed = parseSave(iptablesSave(family, table, opts));
  return parsed.get(table) ?? { name: table, chains: new Map(), rules: [] };
}

/** Names of all chains of a table (built-in first, as printed). */
export function listChains(family: IPFamily, table: string, opts: ToolOptions = {}): string[] {
  return [...readTable(family, table, opts).chains.keys()];
}

/** Rules of a table, optionally of one chain only, in order. */
export function listRules(
  family: IPFamily,
  table: string,
  chain?: string,
  opts: ToolOptions = {},
): SavedRule[] {
  const rules = readTable(family, table, opts).rules;
  return chain === undefined ? rules : rules.filter((r) => r.chain === chain);
}

/**
 * True when the saved table has a rule equal (normalizeRule) to `rule` in `chain` — for CHECK-style
 * verification of many rules against ONE read (`readTable`).
 */
export function hasRule(table: SavedTable, chain: string, rule: readonly string[]): boolean {
  const key = normalizeRule(rule);
  return table.rules.some((r) => r.chain === chain && r.key === key);
}

type Op =
  | { kind: 'ensureChain'; table: string; chain: string }
  | {
      kind: 'append' | 'insert';
      table: string;
      chain: string;
      rule: string[];
      unique: boolean;
      position: number;
    }
  | { kind: 'delete'; table: string; chain: string; rule: string[] }
  | {
      kind: 'deleteMatching';
      table: string;
      chain: string;
      match: (r: SavedRule) => boolean;
      /** The predicate only picks rules that jump (or go) to this chain. */
      jumpsTo?: string;
    }
  | { kind: 'flush'; table: string; chain: string; create: boolean }
  | { kind: 'deleteChain'; table: string; chain: string };

const BUILTIN = new Set(['INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING']);

function checkName(what: string, name: string): void {
  if (!/^[^\s"'\\!-][^\s"'\\]{0,27}$/.test(name)) {
    throw new TypeError(`invalid iptables ${what} name ${JSON.stringify(name)}`);
  }
}

/** Result of IptablesBatch.commit(). */
export interface CommitResult {
  /** The iptables-restore input that was applied ('' when nothing had to change). */
  script: string;
  /** Number of tool executions this commit needed (saves + restores). */
  execs: number;
  /**
   * The rules created, with the handles nf_tables assigned, when the script was applied in process (iptnft.ts);
   * undefined when iptables-restore ran (or nothing had to change): their handles are not known then.
   */
  created?: CreatedRule[];
}

/**
 * Accumulates iptables changes for ONE family; `commit()` reads the state of the tables touched
 * (one iptables-save per table), works out the lines that are actually needed, and applies them
 * with a single `iptables-restore --noflush --wait` (nothing is run when nothing must change).
 *
 * Semantics (all evaluated in order, against the state as modified by earlier operations):
 * - ensureChain: create when missing.
 * - appendUnique / insertUnique: add when no equal rule (normalizeRule) exists in the chain.
 * - append / insert: always add.
 * - deleteRule: delete the first equal rule; a missing rule or chain is tolerated.
 * - deleteRulesWhere: delete every rule of a chain matching a predicate over the saved form.
 * - flushChain: remove all rules (missing chain tolerated; `{ create: true }` creates it, like Go's ClearChain).
 * - deleteChain: delete a user chain (missing tolerated; it must be unreferenced, else the commit fails).
 */
export class IptablesBatch {
  readonly family: IPFamily;
  readonly opts: ToolOptions;
  private ops: Op[] = [];

  constructor(family: IPFamily, opts: ToolOptions = {}) {
    if (family !== 4 && family !== 6) throw new TypeError(`invalid IP family ${String(family)}`);
    this.family = family;
    this.opts = opts;
  }

  get size(): number {
    return this.ops.length;
  }

  ensureChain(table: string, chain: string): this {
    checkName('table', table);
    checkName('chain', chain);
    this.ops.push({ kind: 'ensureChain', table, chain });
    return this;
  }

  appendUnique(table: string, chain: string, rule: readonly string[]): this {
    return this.add('append', table, chain, rule, true, 0);
  }

  insertUnique(table: string, chain: string, rule: readonly string[], position = 1): this {
    return this.add('insert', table, chain, rule, true, position);
  }

  append(table: string, chain: string, rule: readonly string[]): this {
    return this.add('append', table, chain, rule, false, 0);
  }

  insert(table: string, chain: string, rule: readonly string[], position = 1): this {
    return this.add('insert', table, chain, rule, false, position);
  }

  deleteRule(table: string, chain: string, rule: readonly string[]): this {
    checkName('table', table);
    checkName('chain', chain);
    this.ops.push({ kind: 'delete', table, chain, rule: [...rule] });
    return this;
  }

  /**
   * `jumpsTo`: the predicate only ever picks rules jumping (or going) to that chain — a chain that does not exist
   * then means nothing to delete, without reading the table (see commit).
   */
  deleteRulesWhere(table: string, chain: string, match: (r: SavedRule) => boolean, jumpsTo?: string): this {
    checkName('table', table);
    checkName('chain', chain);
    if (jumpsTo !== undefined) checkName('chain', jumpsTo);
    this.ops.push({ kind: 'deleteMatching', table, chain, match, ...(jumpsTo ? { jumpsTo } : {}) });
    return this;
  }

  flushChain(table: string, chain: string, opts: { create?: boolean } = {}): this {
    checkName('table', table);
    checkName('chain', chain);
    this.ops.push({ kind: 'flush', table, chain, create: opts.create ?? false });
    return this;
  }

  deleteChain(table: string, chain: string): this {
    checkName('table', table);
    checkName('chain', chain);
    if (BUILTIN.has(chain)) throw new TypeError(`cannot delete built-in chain ${chain}`);
    this.ops.push({ kind: 'deleteChain', table, chain });
    return this;
  }

  private add(
    kind: 'append' | 'insert',
    table: string,
    chain: string,
    rule: readonly string[],
    unique: boolean,
    position: number,
  ): this {
    checkName('table', table);
    checkName('chain', chain);
    if (rule.length === 0) throw new TypeError('empty iptables rule');
    if (!Number.isInteger(position) || (kind === 'insert' && position < 1)) {
      throw new TypeError(`invalid rule position ${position}`);
    }
    for (const a of rule) quoteRuleArg(a); // validate now, not at commit time
    this.ops.push({ kind, table, chain, rule: [...rule], unique, position });
    return this;
  }

  /**
   * The restore script worked out from the existence of the chains alone (no table read), or undefined when the
   * batch needs the rules of an existing chain (see renderBlindOps). Empty when nothing must change.
   */
  renderBlind(): string | undefined {
    return renderBlindOps(this.ops, this.family, this.opts);
  }
  /** Tables touched by this batch, in first-use order. */
  tables(): string[] {
    return [...new Set(this.ops.map((o) => o.table))];
  }

  /**
   * Compute the iptables-restore input for the given current state (pure; used by commit and
   * handy for tests). `state` maps table name → parsed table.
   */
  render(state: Map<string, SavedTable>): string {
    const perTable = new Map<string, string[]>();
    // Working copy: chain -> rules (keys + texts).
    const model = new Map<
      string,
      { chains: Set<string>; rules: Map<string, { key: string; text: string }[]> }
    >();
    const tableModel = (t: string) => {
      let m = model.get(t);
      if (!m) {
        const saved = state.get(t);
        m = { chains: new Set(saved?.chains.keys() ?? []), rules: new Map() };
        for (const c of m.chains) m.rules.set(c, []);
        for (const r of saved?.rules ?? []) {
          if (!m.rules.has(r.chain)) m.rules.set(r.chain, []);
          m.chains.add(r.chain);
          m.rules.get(r.chain)!.push(r); // r.key stays lazy
        }
        // Built-in chains exist implicitly (iptables-nft creates them on first use).
        for (const b of builtinChains(t)) {
          m.chains.add(b);
          if (!m.rules.has(b)) m.rules.set(b, []);
        }
        model.set(t, m);
      }
      return m;
    };
    const emit = (t: string, line: string) => {
      let l = perTable.get(t);
      if (!l) {
        l = [];
        perTable.set(t, l);
      }
      l.push(line);
    };
    const fmt = (rule: readonly string[]) => rule.map(quoteRuleArg).join(' ');

    for (const op of this.ops) {
      const m = tableModel(op.table);
      const rules = m.rules.get(op.chain);
      switch (op.kind) {
        case 'ensureChain':
          if (!m.chains.has(op.chain)) {
            emit(op.table, `:${op.chain} - [0:0]`);
            m.chains.add(op.chain);
            m.rules.set(op.chain, []);
          }
          break;
        case 'append':
        case 'insert': {
          const key = normalizeRule(op.rule);
          if (op.unique && rules?.some((r) => r.key === key)) break;
          const text = fmt(op.rule);
          const list = rules ?? [];
          if (!rules) {
            // Chain not known: emit anyway and let iptables-restore report the error.
            m.rules.set(op.chain, list);
          }
          if (op.kind === 'append') {
            emit(op.table, `-A ${op.chain} ${text}`);
            list.push({ key, text });
          } else {
            emit(op.table, `-I ${op.chain} ${op.position} ${text}`);
            list.splice(op.position - 1, 0, { key, text });
          }
          break;
        }
        case 'delete': {
          if (!rules) break;
          const key = normalizeRule(op.rule);
          const idx = rules.findIndex((r) => r.key === key);
          if (idx < 0) break;
          emit(op.table, `-D ${op.chain} ${rules[idx]!.text}`);
          rules.splice(idx, 1);
          break;
        }
        case 'deleteMatching': {
          if (!rules) break;
          for (let i = 0; i < rules.length; ) {
            const r = rules[i]!;
            const saved = 'args' in r ? (r as SavedRule) : savedRule(op.chain, r.text);
            if (op.match(saved)) {
              emit(op.table, `-D ${op.chain} ${r.text}`);
              rules.splice(i, 1);
            } else i++;
          }
          break;
        }
        case 'flush':
          if (!m.chains.has(op.chain)) {
            if (op.create) {
              emit(op.table, `:${op.chain} - [0:0]`);
              m.chains.add(op.chain);
              m.rules.set(op.chain, []);
            }
            break;
          }
          if (rules && rules.length > 0) {
            emit(op.table, `-F ${op.chain}`);
            rules.length = 0;
          }
          break;
        case 'deleteChain':
          if (!m.chains.has(op.chain)) break;
          if (rules && rules.length > 0) emit(op.table, `-F ${op.chain}`);
          emit(op.table, `-X ${op.chain}`);
          m.chains.delete(op.chain);
          m.rules.delete(op.chain);
          break;
      }
    }
    let script = '';
    for (const [t, lines] of perTable) script += `*${t}\n${lines.join('\n')}\nCOMMIT\n`;
    return script;
  }

  /**
   * Apply the batch: one iptables-save per table touched, then (only if something must change)
   * one iptables-restore --noflush --wait. If restore fails and the tables changed meanwhile
   * (another process raced us), the batch is re-rendered against the new state and retried (up
   * to 3 attempts); if nothing changed, the error is genuine and thrown at once.
   */
  commit(): CommitResult {
    let execs = 0;
    const blind = this.renderBlind();
    if (blind === '') return { script: '', execs: 0 };
    if (blind !== undefined) {
      // iptables-nft 1.8.9: the same objects written over nfnetlink in one transaction, no process (iptnft.ts)
      const created: CreatedRule[] = [];
      if (applyRestoreInProcess(this.family, blind, this.opts, created)) {
        this.ops = [];
        return { script: blind, execs, created };
      }
      const args = ['--noflush', '--wait'];
      const r = runTool(restoreTool(this.family), args, { ...this.opts, input: blind });
      execs++;
      if (r.status === 0) {
        this.ops = [];
        return { script: blind, execs };
      }
      // the kernel changed under us (or the guess was wrong): nothing was applied; read and render below
    }
    const read = () => {
      const raw = new Map<string, string>();
      for (const t of this.tables()) {
        raw.set(t, iptablesSave(this.family, t, this.opts).replace(/^#.*\n/gm, ''));
        execs++;
      }
      return raw;
    };
    let raw = read();
    let lastErr: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const state = new Map<string, SavedTable>();
      for (const [t, text] of raw)
        state.set(t, parseSave(text).get(t) ?? { name: t, chains: new Map(), rules: [] });
      const script = this.render(state);
      if (script === '') return { script, execs };
      const created: CreatedRule[] = [];
      if (applyRestoreInProcess(this.family, script, this.opts, created)) {
        this.ops = [];
        return { script, execs, created };
      }
      const args = ['--noflush', '--wait'];
      const r = runTool(restoreTool(this.family), args, { ...this.opts, input: script });
      execs++;
      if (r.status === 0) {
        this.ops = [];
        return { script, execs };
      }
      lastErr = new ToolError(restoreTool(this.family), args, r, `${restoreTool(this.family)} --noflush`);
      const again = read();
      if ([...again].every(([t, text]) => raw.get(t) === text)) break;
      raw = again;
    }
    throw lastErr;
  }
}

/** The chain a rule specification jumps or goes to (`-j X` / `-g X`), if any. */
function specTarget(rule: readonly string[]): string | undefined {
  for (let i = 0; i < rule.length - 1; i++)
    if (rule[i] === '-j' || rule[i] === '-g' || rule[i] === '--jump' || rule[i] === '--goto')
      return rule[i + 1];
  return undefined;
}

/**
 * The restore script of a batch worked out WITHOUT reading any table (no iptables-save, whose cost grows with every
 * container's rules), or undefined when that cannot be decided. Only for tables held by nf_tables (iptables-nft:
 * no legacy x_tables table of that name is loaded), whose chains' existence one nfnetlink GET answers each. A
 * container's own chain that does not exist yet is known to be empty, and no rule anywhere can jump to it (the
 * kernel refuses a jump to a missing chain): so `appendUnique` into a new chain or of a jump to a new chain, a
 * `deleteRulesWhere` with `jumpsTo` a missing chain, `flushChain`/`deleteChain` of a missing chain are decided by
 * existence alone. Any other rule-level operation on an existing chain needs its rules: undefined.
 */
function renderBlindOps(ops: readonly Op[], family: IPFamily, opts: ToolOptions): string | undefined {
  const probe = (): Map<string, Map<string, boolean>> | undefined => {
    const out = new Map<string, Map<string, boolean>>();
    for (const op of ops) {
      if (!out.has(op.table)) {
        if (xtablesTableLoaded(family, op.table) !== false) return undefined;
        out.set(op.table, new Map());
      }
      const m = out.get(op.table)!;
      const names = [op.chain];
      if (op.kind === 'append' || op.kind === 'insert' || op.kind === 'delete') {
        const t = specTarget(op.rule);
        if (t) names.push(t);
      }
      if (op.kind === 'deleteMatching' && op.jumpsTo) names.push(op.jumpsTo);
      for (const c of names) {
        if (m.has(c) || BUILTIN.has(c)) continue;
        const e = nftExists(family === 6 ? 'ip6' : 'ip', op.table, c);
        if (e === undefined) return undefined;
        m.set(c, e);
      }
    }
    return out;
  };
  let before: Map<string, Map<string, boolean>> | undefined;
  try {
    before = opts.netns !== undefined ? withNetns(opts.netns, probe) : probe();
  } catch {
    return undefined;
  }
  if (!before) return undefined;
  const addedRules = new Map<string, { key: string; text: string }[]>();
  const perTable = new Map<string, string[]>();
  const emit = (t: string, line: string) => {
    const l = perTable.get(t) ?? [];
    l.push(line);
    perTable.set(t, l);
  };
  /** Chains that exist now (built-in chains always count), per table. */
  const exists = (t: string, c: string) => BUILTIN.has(c) || before.get(t)?.get(c) === true;
  const existed = (t: string, c: string) => before.get(t)?.get(c) === true;
  /** Chains known to hold exactly the rules added by this batch (created or flushed by it), with those rules. */
  const known = new Map<string, { key: string; text: string }[]>();
  const setExists = (t: string, c: string, v: boolean) => before.get(t)!.set(c, v);
  /** Chains this batch creates (they did not exist before it): no rule outside this batch jumps to them. */
  const created = new Set<string>();
  const fmt = (rule: readonly string[]) => rule.map(quoteRuleArg).join(' ');
  for (const op of ops) {
    const id = `${op.table} ${op.chain}`;
    const mine = known.get(id);
    switch (op.kind) {
      case 'ensureChain':
        if (!exists(op.table, op.chain)) {
          emit(op.table, `:${op.chain} - [0:0]`);
          setExists(op.table, op.chain, true);
          known.set(id, []);
          created.add(id);
        }
        break;
      case 'append':
      case 'insert': {
        const key = normalizeRule(op.rule);
        const target = specTarget(op.rule);
        if (op.unique) {
          if (mine) {
            if (mine.some((r) => r.key === key)) break;
          } else if (!(target && created.has(`${op.table} ${target}`))) return undefined;
          // a jump to a chain that did not exist before this batch: it can only be among this batch's own rules
          else if (added(op.table, op.chain, key)) break;
        }
        const text = fmt(op.rule);
        if (op.kind === 'append') emit(op.table, `-A ${op.chain} ${text}`);
        else emit(op.table, `-I ${op.chain} ${op.position} ${text}`);
        record(op.table, op.chain, key, text);
        if (mine) {
          if (op.kind === 'append') mine.push({ key, text });
          else mine.splice(op.position - 1, 0, { key, text });
        }
        break;
      }
      case 'delete': {
        if (!exists(op.table, op.chain)) break;
        const key = normalizeRule(op.rule);
        if (!mine) return undefined;
        const idx = mine.findIndex((r) => r.key === key);
        if (idx < 0) break;
        emit(op.table, `-D ${op.chain} ${mine[idx]!.text}`);
        mine.splice(idx, 1);
        break;
      }
      case 'deleteMatching': {
        if (!exists(op.table, op.chain)) break;
        if (mine) {
          for (let i = 0; i < mine.length; ) {
            const r = mine[i]!;
            if (op.match(savedRule(op.chain, r.text))) {
              emit(op.table, `-D ${op.chain} ${r.text}`);
              mine.splice(i, 1);
            } else i++;
          }
          break;
        }
        if (op.jumpsTo && !existed(op.table, op.jumpsTo) && !added(op.table, op.chain, undefined, op.jumpsTo))
          break;
        return undefined;
      }
      case 'flush':
        if (!exists(op.table, op.chain)) {
          if (op.create) {
            emit(op.table, `:${op.chain} - [0:0]`);
            setExists(op.table, op.chain, true);
            known.set(id, []);
            created.add(id);
          }
          break;
        }
        if (mine?.length === 0) break;
        emit(op.table, `-F ${op.chain}`);
        known.set(id, []);
        break;
      case 'deleteChain':
        if (!exists(op.table, op.chain)) break;
        if (mine?.length !== 0) emit(op.table, `-F ${op.chain}`);
        emit(op.table, `-X ${op.chain}`);
        setExists(op.table, op.chain, false);
        known.delete(id);
        break;
    }
  }
  let script = '';
  for (const [t, lines] of perTable) script += `*${t}\n${lines.join('\n')}\nCOMMIT\n`;
  return script;

  // rules this batch added so far, per chain (to keep "unique" right within one batch)
  function record(t: string, c: string, key: string, text: string): void {
    const id = `${t} ${c}`;
    const l = addedRules.get(id) ?? [];
    l.push({ key, text });
    addedRules.set(id, l);
  }
  function added(t: string, c: string, key?: string, jumpsTo?: string): boolean {
    const l = addedRules.get(`${t} ${c}`) ?? [];
    return l.some((r) => (key !== undefined ? r.key === key : specTarget(splitRuleText(r.text)) === jumpsTo));
  }
}
function builtinChains(table: string): string[] {
  switch (table) {
    case 'filter':
      return ['INPUT', 'FORWARD', 'OUTPUT'];
    case 'nat':
      return ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'];
    case 'mangle':
      return ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'];
    case 'raw':
      return ['PREROUTING', 'OUTPUT'];
    case 'security':
      return ['INPUT', 'FORWARD', 'OUTPUT'];
    default:
      return [];
  }
}

/** Start a batch for one family (contract name). */
export function iptablesBatch(family: IPFamily, opts: ToolOptions = {}): IptablesBatch {
  return new IptablesBatch(family, opts);
}

/**
 * True when the iptables API is usable for the family (the binary exists and can list
 * `filter INPUT`; like the reference's SupportsIPTables). Does not create any table.
 */
export function supportsIPTables(family: IPFamily = 4, opts: ToolOptions = {}): boolean {
  try {
    return runTool(mainTool(family), ['--wait', '-t', 'filter', '-S', 'INPUT'], opts).status === 0;
  } catch {
    return false;
  }
}

/** Target chain of a saved rule (`-j X` / `-g X`), if any. */
export function ruleTarget(r: SavedRule): string | undefined {
  for (let i = 0; i < r.args.length - 1; i++) {
    if (r.args[i] === '-j' || r.args[i] === '-g' || r.args[i] === '--jump' || r.args[i] === '--goto')
      return r.args[i + 1];
  }
  return undefined;
}

/** Value of `--comment` in a saved rule, if any. */
export function ruleComment(r: SavedRule): string | undefined {
  const i = r.args.indexOf('--comment');
  return i >= 0 ? r.args[i + 1] : undefined;
}
