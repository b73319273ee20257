/**
 * nftables through the `nft` CLI: changes are accumulated in a batch and applied as ONE `nft -f -`
 * transaction (all-or-nothing); state is read with `nft -j list …` and parsed from JSON.
 *
 * The batch uses nft's text syntax (like knftables does), which is what the reference produces,
 * including table and chain comments (nft 1.0.6's JSON input silently drops those). Names used as
 * identifiers (tables, chains) must therefore be valid nft identifiers; they are checked.
 */
import { NFPROTO, type NftFamily } from '@cnikit/netlink';
import { runTool, StdinBatch, ToolError, type ToolOptions } from './exec.ts';

export type { NftFamily };

const FAMILIES = new Set<string>(Object.keys(NFPROTO));

/** A rule as listed by `nft -j`. `expr` is nft's JSON expression array (not interpreted here). */
export interface NftRule {
  family: NftFamily;
  table: string;
  chain: string;
  handle: number;
  comment?: string;
  expr: unknown[];
}

export interface NftChain {
  family: NftFamily;
  table: string;
  name: string;
  handle: number;
  type?: string;
  hook?: string;
  prio?: number;
  policy?: string;
}

export interface NftTable {
  family: NftFamily;
  name: string;
  handle: number;
}

/** Parsed `nft -j list …` output. */
export interface NftListing {
  tables: NftTable[];
  chains: NftChain[];
  rules: NftRule[];
  /** Every object of the `nftables` array except metainfo (sets, maps, elements…), raw. */
  objects: Record<string, unknown>[];
}

/**
 * Valid nft identifier (table/chain/set names in the text syntax). Note that nft keywords (`dnat`,
 * `map`, `counter`, …) are not accepted as names by nft's parser either; nft reports that at commit.
 */
const IDENT = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

export function checkNftIdentifier(what: string, name: string): void {
  if (!IDENT.test(name) || name.length > 255) {
    throw new TypeError(`invalid nftables ${what} name ${JSON.stringify(name)}: must match ${IDENT.source}`);
  }
}

function checkFamily(f: string): void {
  if (!FAMILIES.has(f)) throw new TypeError(`invalid nftables family ${JSON.stringify(f)}`);
}

/** Quote a string for the nft text syntax (no escapes exist: `"`, newline and NUL are rejected). */
export function nftQuote(s: string): string {
  if (/["\r\n\0\\]/.test(s))
    throw new TypeError(`string cannot be used in an nftables statement: ${JSON.stringify(s)}`);
  return `"${s}"`;
}

/** Parse the JSON printed by `nft -j list …`. */
export function parseNftJson(text: string): NftListing {
  const out: NftListing = { tables: [], chains: [], rules: [], objects: [] };
  if (text.trim() === '') return out;
  const doc = JSON.parse(text) as { nftables?: Record<string, unknown>[] };
  for (const obj of doc.nftables ?? []) {
    if ('metainfo' in obj) continue;
    out.objects.push(obj);
    if ('table' in obj) out.tables.push(obj.table as NftTable);
    else if ('chain' in obj) out.chains.push(obj.chain as NftChain);
    else if ('rule' in obj) {
      const r = obj.rule as NftRule;
      out.rules.push({ ...r, expr: r.expr ?? [] });
    }
  }
  return out;
}

const NOT_FOUND = /No such file or directory|does not exist/;

/**
 * `nft -j list <what…>` parsed, e.g. `nftList(['table', 'inet', 'x'])`, `nftList(['ruleset'])`,
 * `nftList(['chain', 'bridge', 'nat', 'PREROUTING'])`. A missing table/chain yields an empty
 * listing (not an error).
 */
export function nftList(what: readonly string[] = ['ruleset'], opts: ToolOptions = {}): NftListing {
  const args = ['-j', 'list', ...what];
  const r = runTool('nft', args, opts);
  if (r.status !== 0) {
    if (NOT_FOUND.test(r.stderr)) return { tables: [], chains: [], rules: [], objects: [] };
    throw new ToolError('nft', args, r);
  }
  return parseNftJson(r.stdout);
}

/** Rules of one chain (empty when the table or chain does not exist). */
export function nftListRules(
  family: NftFamily,
  table: string,
  chain: string,
  opts: ToolOptions = {},
): NftRule[] {
  return nftList(['chain', family, table, chain], opts).rules;
}

export interface ChainSpec {
  family: NftFamily;
  table: string;
  name: string;
  /** Base chain: type/hook/priority (and optional policy). */
  type?: 'filter' | 'nat' | 'route';
  hook?: string;
  priority?: number;
  policy?: 'accept' | 'drop';
  comment?: string;
}

/**
 * One nft transaction. Statements are emitted in call order; `commit()` runs `nft -f -` once.
 * `add` is create-if-missing for tables and chains (so `addTable`/`addChain` are idempotent);
 * `addRule` always appends (callers delete stale rules by handle in the same transaction).
 */
export class NftBatch extends StdinBatch {
  constructor(opts: ToolOptions = {}) {
    super('nft', ['-f', '-'], opts);
  }

  addTable(family: NftFamily, name: string, opts: { comment?: string } = {}): this {
    checkFamily(family);
    checkNftIdentifier('table', name);
    const body = opts.comment !== undefined ? ` { comment ${nftQuote(opts.comment)} ; }` : '';
    this.lines.push(`add table ${family} ${name}${body}`);
    return this;
  }

  deleteTable(family: NftFamily, name: string): this {
    checkFamily(family);
    checkNftIdentifier('table', name);
    this.lines.push(`delete table ${family} ${name}`);
    return this;
  }

  addChain(spec: ChainSpec): this {
    checkFamily(spec.family);
    checkNftIdentifier('table', spec.table);
    checkNftIdentifier('chain', spec.name);
    const parts: string[] = [];
    if (spec.type !== undefined || spec.hook !== undefined) {
      if (!spec.type || !spec.hook || spec.priority === undefined || !/^[a-z]+$/.test(spec.hook)) {
        throw new TypeError('a base chain needs type, hook and priority');
      }
      parts.push(`type ${spec.type} hook ${spec.hook} priority ${Math.trunc(spec.priority)} ;`);
      if (spec.policy) parts.push(`policy ${spec.policy} ;`);
    }
    if (spec.comment !== undefined) parts.push(`comment ${nftQuote(spec.comment)} ;`);
    const body = parts.length ? ` { ${parts.join(' ')} }` : '';
    this.lines.push(`add chain ${spec.family} ${spec.table} ${spec.name}${body}`);
    return this;
  }

  flushChain(family: NftFamily, table: string, chain: string): this {
    this.ref('flush chain', family, table, chain);
    return this;
  }

  deleteChain(family: NftFamily, table: string, chain: string): this {
    this.ref('delete chain', family, table, chain);
    return this;
  }

  /**
   * Append a rule. `rule` is nft rule text (e.g. `ip saddr == 10.0.0.2 masquerade`); it must not
   * contain line breaks or `;`. `comment` is added as `comment "<text>"`.
   */
  addRule(
    family: NftFamily,
    table: string,
    chain: string,
    rule: string,
    opts: { comment?: string } = {},
  ): this {
    return this.ruleStatement('add rule', family, table, chain, rule, opts);
  }

  /** Insert a rule at the top of the chain (same rules as addRule). */
  insertRule(
    family: NftFamily,
    table: string,
    chain: string,
    rule: string,
    opts: { comment?: string } = {},
  ): this {
    return this.ruleStatement('insert rule', family, table, chain, rule, opts);
  }

  private ruleStatement(
    verb: 'add rule' | 'insert rule',
    family: NftFamily,
    table: string,
    chain: string,
    rule: string,
    opts: { comment?: string },
  ): this {
    if (/[\r\n;#]/.test(rule)) throw new TypeError(`invalid nftables rule text: ${JSON.stringify(rule)}`);
    const comment = opts.comment !== undefined ? ` comment ${nftQuote(opts.comment)}` : '';
    this.ref(verb, family, table, chain, ` ${rule}${comment}`);
    return this;
  }

  deleteRule(family: NftFamily, table: string, chain: string, handle: number): this {
    if (!Number.isInteger(handle) || handle <= 0) throw new TypeError(`invalid rule handle ${handle}`);
    this.ref('delete rule', family, table, chain, ` handle ${handle}`);
    return this;
  }

  /**
   * A named set (`type` e.g. `ipv4_addr`, `inet_proto . inet_service`; `flags` e.g. `['interval']`).
   * Sets and maps let one rule match many entries: prefer them over a rule per entry.
   */
  addSet(
    family: NftFamily,
    table: string,
    name: string,
    opts: { type: string; flags?: string[]; comment?: string },
  ): this {
    return this.setOrMap('set', family, table, name, opts.type, opts.flags, opts.comment);
  }

  /** A named map (`type` e.g. `ipv4_addr . inet_service : ipv4_addr . inet_service`). */
  addMap(
    family: NftFamily,
    table: string,
    name: string,
    opts: { type: string; flags?: string[]; comment?: string },
  ): this {
    return this.setOrMap('map', family, table, name, opts.type, opts.flags, opts.comment);
  }

  /** Add elements (nft element syntax, e.g. `10.0.0.1`, `tcp . 80 : 10.0.0.2 . 8080`) to a set or map. */
  addElements(family: NftFamily, table: string, setName: string, elements: readonly string[]): this {
    return this.elements('add', family, table, setName, elements);
  }

  /** Delete elements (keys only for maps); deleting a missing element fails the transaction. */
  deleteElements(family: NftFamily, table: string, setName: string, elements: readonly string[]): this {
    return this.elements('delete', family, table, setName, elements);
  }

  /** Any other single nft statement (no line breaks, `;` or `#`). */
  raw(statement: string): this {
    if (statement.trim() === '' || /[\r\n;#]/.test(statement)) {
      throw new TypeError(`invalid nftables statement: ${JSON.stringify(statement)}`);
    }
    this.lines.push(statement);
    return this;
  }

  private setOrMap(
    kind: 'set' | 'map',
    family: NftFamily,
    table: string,
    name: string,
    type: string,
    flags: string[] | undefined,
    comment: string | undefined,
  ): this {
    checkFamily(family);
    checkNftIdentifier('table', table);
    checkNftIdentifier(kind, name);
    if (!/^[a-z0-9_]+( [.:] [a-z0-9_]+)*$/.test(type))
      throw new TypeError(`invalid nftables ${kind} type: ${JSON.stringify(type)}`);
    const parts = [`type ${type} ;`];
    if (flags?.length) {
      for (const f of flags)
        if (!/^[a-z]+$/.test(f)) throw new TypeError(`invalid nftables ${kind} flag: ${JSON.stringify(f)}`);
      parts.push(`flags ${flags.join(',')} ;`);
    }
    if (comment !== undefined) parts.push(`comment ${nftQuote(comment)} ;`);
    this.lines.push(`add ${kind} ${family} ${table} ${name} { ${parts.join(' ')} }`);
    return this;
  }

  private elements(
    verb: 'add' | 'delete',
    family: NftFamily,
    table: string,
    setName: string,
    elements: readonly string[],
  ): this {
    checkFamily(family);
    checkNftIdentifier('table', table);
    checkNftIdentifier('set', setName);
    if (elements.length === 0) return this;
    for (const e of elements) {
      if (e.trim() === '' || /[\r\n;#{},"]/.test(e))
        throw new TypeError(`invalid nftables element: ${JSON.stringify(e)}`);
    }
    this.lines.push(`${verb} element ${family} ${table} ${setName} { ${elements.join(', ')} }`);
    return this;
  }

  private ref(verb: string, family: NftFamily, table: string, chain: string, rest = ''): void {
    checkFamily(family);
    checkNftIdentifier('table', table);
    checkNftIdentifier('chain', chain);
    this.lines.push(`${verb} ${family} ${table} ${chain}${rest}`);
  }

  /** The transaction text that commit() feeds to `nft -f -`. */
}

/** Start an nft transaction (contract name). */
export function nftBatch(opts: ToolOptions = {}): NftBatch {
  return new NftBatch(opts);
}

/**
 * True when nftables is usable through `nft` (the binary runs and accepts a table declaration
 * in check mode; nothing is changed), like the reference's SupportsNFTables.
 */
export function supportsNFTables(opts: ToolOptions = {}): boolean {
  try {
    return (
      runTool('nft', ['--check', '-f', '-'], { ...opts, input: 'add table ip supports_nftables_test\n' })
        .status === 0
    );
  } catch {
    return false;
  }
}
