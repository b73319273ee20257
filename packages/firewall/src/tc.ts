/**
 * Traffic control through `tc`: qdiscs and filters of one plugin call are applied with ONE
 * `tc -batch -`, and read back with `tc -j qdisc|filter show`.
 *
 * Note: unlike iptables-restore and nft, `tc -batch` is not transactional — it stops at the first
 * failing line and the lines before it stay applied. Callers that need all-or-nothing should undo
 * on error. The bandwidth plugin does not use this: it sends its qdiscs and filter as rtnetlink messages
 * (@cnikit/netlink tc.ts), which also lets it give the kernel the exact TBF buffer in ticks that the Go plugin
 * computes (tc's `burst` is converted with a different rounding).
 */
import { runTool, StdinBatch, ToolError, type ToolOptions } from './exec.ts';

/** Token usable on a tc batch line (tc splits lines on blanks; quotes and `#` are special). */
function tok(what: string, v: string | number): string {
  const s = String(v);
  if (s === '' || /[\s"'#\\]/.test(s)) throw new TypeError(`invalid tc ${what}: ${JSON.stringify(s)}`);
  return s;
}

function uint(what: string, v: number): string {
  if (!Number.isSafeInteger(v) || v < 0) throw new TypeError(`invalid tc ${what}: ${v}`);
  return String(v);
}

export interface TbfSpec {
  dev: string;
  /** `root` (default) or a class id such as `1:1`. */
  parent?: string;
  /** Default `1:`. */
  handle?: string;
  /** Rate in bytes per second (tc `bps` unit). */
  rateBytes: number;
  /** Bucket size in bytes. */
  burstBytes: number;
  /** Queue limit in bytes (either limitBytes or latencyUs is required). */
  limitBytes?: number;
  /** Maximum queueing latency in microseconds (alternative to limitBytes). */
  latencyUs?: number;
  /** Peak rate in bytes per second (needs mtu). */
  peakrateBytes?: number;
  mtu?: number;
}

export interface RedirectFilterSpec {
  /** Device whose traffic is redirected. */
  dev: string;
  /** Parent: `ffff:` for an ingress qdisc (default), `ingress` / `egress` for clsact. */
  parent?: string;
  /** Target device (typically an IFB). */
  to: string;
  /** `u32` match-all selector (default; what the reference's bandwidth plugin installs) or `matchall`. */
  kind?: 'u32' | 'matchall';
  /** Default 1. */
  prio?: number;
  /** Default `all`. */
  protocol?: string;
  /** u32 only: flow id, default `1:1` (as the reference). */
  classid?: string;
}

/** Accumulates tc commands for one `tc -batch -` run. */
export class TcBatch extends StdinBatch {
  constructor(opts: ToolOptions = {}) {
    super('tc', ['-batch', '-'], opts);
  }

  /** Any tc command as arguments (without the leading `tc`), e.g. `['qdisc','del','dev','x','root']`. */
  raw(args: readonly (string | number)[]): this {
    if (args.length === 0) throw new TypeError('empty tc command');
    this.lines.push(args.map((a) => tok('argument', a)).join(' '));
    return this;
  }

  private tbf(verb: 'add' | 'replace' | 'change', s: TbfSpec): this {
    if (s.limitBytes === undefined && s.latencyUs === undefined)
      throw new TypeError('tbf needs limitBytes or latencyUs');
    if (s.rateBytes <= 0) throw new TypeError(`invalid tc rate: ${s.rateBytes}`);
    const parent = s.parent ?? 'root';
    const args = ['qdisc', verb, 'dev', tok('device', s.dev)];
    args.push(...(parent === 'root' ? ['root'] : ['parent', tok('parent', parent)]));
    args.push('handle', tok('handle', s.handle ?? '1:'), 'tbf');
    args.push('rate', `${uint('rate', s.rateBytes)}bps`, 'burst', uint('burst', s.burstBytes));
    if (s.limitBytes !== undefined) args.push('limit', uint('limit', s.limitBytes));
    else args.push('latency', `${uint('latency', s.latencyUs!)}us`);
    if (s.peakrateBytes !== undefined) {
      args.push('peakrate', `${uint('peakrate', s.peakrateBytes)}bps`, 'mtu', uint('mtu', s.mtu ?? 0));
    }
    this.lines.push(args.join(' '));
    return this;
  }

  addTbf(s: TbfSpec): this {
    return this.tbf('add', s);
  }

  replaceTbf(s: TbfSpec): this {
    return this.tbf('replace', s);
  }

  /** `qdisc add dev X ingress` (handle ffff:). */
  addIngress(dev: string): this {
    this.lines.push(`qdisc add dev ${tok('device', dev)} ingress`);
    return this;
  }

  /** `qdisc add dev X clsact`. */
  addClsact(dev: string): this {
    this.lines.push(`qdisc add dev ${tok('device', dev)} clsact`);
    return this;
  }

  /** `qdisc del dev X root|ingress|clsact|parent P` (fails when there is none). */
  delQdisc(dev: string, parent: 'root' | 'ingress' | 'clsact' | string = 'root'): this {
    const where = ['root', 'ingress', 'clsact'].includes(parent) ? parent : `parent ${tok('parent', parent)}`;
    this.lines.push(`qdisc del dev ${tok('device', dev)} ${where}`);
    return this;
  }

  /** Redirect everything arriving on `dev` (ingress) to `to`'s egress: mirred egress redirect. */
  addRedirectFilter(s: RedirectFilterSpec): this {
    const kind = s.kind ?? 'u32';
    const parent = s.parent ?? 'ffff:';
    const where = parent === 'ingress' || parent === 'egress' ? [parent] : ['parent', tok('parent', parent)];
    const args = ['filter', 'add', 'dev', tok('device', s.dev), ...where];
    args.push('protocol', tok('protocol', s.protocol ?? 'all'), 'prio', uint('prio', s.prio ?? 1));
    if (kind === 'u32')
      args.push('u32', 'match', 'u32', '0', '0', 'classid', tok('classid', s.classid ?? '1:1'));
    else if (kind === 'matchall') args.push('matchall');
    else throw new TypeError(`invalid tc filter kind: ${String(kind)}`);
    args.push('action', 'mirred', 'egress', 'redirect', 'dev', tok('device', s.to));
    this.lines.push(args.join(' '));
    return this;
  }
}

/** Start a tc batch, optionally for another network namespace (contract: `tcBatch(netnsPath?)`). */
export function tcBatch(netnsPath?: string): TcBatch {
  return new TcBatch(netnsPath === undefined ? {} : { netns: netnsPath });
}

/** A qdisc as printed by `tc -j qdisc show` (rate/burst in bytes). */
export interface TcQdisc {
  kind: string;
  handle: string;
  dev: string;
  root?: boolean;
  parent?: string;
  options?: Record<string, unknown>;
  [k: string]: unknown;
}

/** A filter as printed by `tc -j filter show`. */
export interface TcFilter {
  protocol?: string;
  pref?: number;
  kind: string;
  options?: Record<string, unknown>;
  [k: string]: unknown;
}

function tcJson<T>(args: string[], opts: ToolOptions): T[] {
  const r = runTool('tc', ['-j', ...args], opts);
  if (r.status !== 0) throw new ToolError('tc', ['-j', ...args], r);
  return r.stdout.trim() === '' ? [] : (JSON.parse(r.stdout) as T[]);
}

/**
 * `tc -j -raw qdisc show [dev X]`. With `-raw`, a TBF's options include `limit` (bytes) and
 * `burst_raw` (the kernel's buffer in ticks, hex) besides `rate` and `burst` (bytes) — what the
 * bandwidth plugin's CHECK compares.
 */
export function tcQdiscs(dev?: string, opts: ToolOptions = {}): TcQdisc[] {
  return tcJson<TcQdisc>(
    ['-raw', 'qdisc', 'show', ...(dev === undefined ? [] : ['dev', tok('device', dev)])],
    opts,
  );
}

/** `tc -j filter show dev X [parent P | ingress | egress]`, as printed (u32 also lists its hash tables). */
export function tcFilters(dev: string, parent?: string, opts: ToolOptions = {}): TcFilter[] {
  const where =
    parent === undefined
      ? []
      : parent === 'ingress' || parent === 'egress'
        ? [parent]
        : ['parent', tok('parent', parent)];
  return tcJson<TcFilter>(['filter', 'show', 'dev', tok('device', dev), ...where], opts);
}
