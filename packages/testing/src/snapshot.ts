/**
 * Kernel state snapshots of a network namespace, and a diff between two of them.
 *
 * Each section is a sorted list of stable text lines (volatile data removed: statistics, address
 * lifetimes, route expiry, iptables/nft counters, iptables-save timestamps), so two snapshots of
 * an unchanged namespace are equal and `diffSnapshots` reports exactly what changed.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { sysctlNormalName, sysctlPath, withNetns } from '@cnikit/netlink';
import { scaled } from './timescale.ts';

export type SnapshotSection =
  | 'links'
  | 'addresses'
  | 'routes'
  | 'iptables'
  | 'ip6tables'
  | 'nftables'
  | 'tc'
  | 'sysctls';

export const SNAPSHOT_SECTIONS: readonly SnapshotSection[] = [
  'links',
  'addresses',
  'routes',
  'iptables',
  'ip6tables',
  'nftables',
  'tc',
  'sysctls',
];

export type Snapshot = Record<SnapshotSection, string[]>;

export interface SnapshotOptions {
  /** Sections to capture (default all). Sections not captured are empty lists. */
  sections?: readonly SnapshotSection[];
  /** Extra sysctls to record (dotted or slashed names, relative to /proc/sys). */
  sysctls?: readonly string[];
  /** Keep nftables object handles (default false: handles change when equal rules are re-added). */
  keepNftHandles?: boolean;
  /**
   * Wait up to this many milliseconds (scaled) for IPv6 duplicate address detection to finish on every link that
   * is up before capturing: an address is "tentative" for about a second after its link comes up, so two snapshots
   * of the same state taken at different moments after a change would differ in their `tentative` flags and in the
   * local routes the kernel adds only once DAD is done. Default 0: capture at once. Links without carrier are not
   * waited for (DAD cannot run there); a timeout is not an error (the snapshot shows what stayed tentative).
   */
  settleMs?: number;
}

/** Global sysctls always recorded. Per-interface ones are added for every link. */
export const DEFAULT_SYSCTLS = [
  'net/ipv4/ip_forward',
  'net/ipv6/conf/all/forwarding',
  'net/ipv6/conf/all/disable_ipv6',
  'net/ipv6/conf/default/disable_ipv6',
  'net/ipv4/conf/all/route_localnet',
  'net/ipv4/conf/all/rp_filter',
  'net/ipv4/conf/all/arp_ignore',
];
const PER_LINK_SYSCTLS = [
  'net/ipv4/conf/%/route_localnet',
  'net/ipv4/conf/%/forwarding',
  'net/ipv4/conf/%/proxy_arp',
  'net/ipv6/conf/%/disable_ipv6',
  'net/ipv6/conf/%/forwarding',
  'net/ipv6/conf/%/keep_addr_on_down',
  'net/ipv6/conf/%/accept_dad',
];

function run(cmd: string, args: string[], allowFail = false): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: scaled(30_000), maxBuffer: 256 * 1024 * 1024 });
  if (r.error) {
    if ((r.error as NodeJS.ErrnoException).code === 'ENOENT' && allowFail) return '';
    throw r.error;
  }
  if (r.status !== 0) {
    if (allowFail) return '';
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

function json(cmd: string, args: string[], allowFail = false): unknown[] {
  const out = run(cmd, args, allowFail).trim();
  return out === '' ? [] : (JSON.parse(out) as unknown[]);
}

/** Polls (in the current namespace) until no link with carrier has a tentative IPv6 address, or `ms` passed. */
function settleDad(ms: number): void {
  const deadline = Date.now() + ms;
  for (;;) {
    const links = json('ip', ['-json', '-6', 'address', 'show', 'tentative']) as {
      flags?: string[];
      addr_info?: unknown[];
    }[];
    const waiting = links.some((l) => (l.addr_info ?? []).length > 0 && l.flags?.includes('LOWER_UP'));
    if (!waiting || Date.now() >= deadline) return;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  }
}

/** Recursively remove keys from an object tree. */
function strip(v: unknown, keys: ReadonlySet<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => strip(x, keys));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (!keys.has(k)) out[k] = strip(x, keys);
    return out;
  }
  return v;
}

/** JSON with sorted keys, so equal objects print equally. */
/**
 * A file of a CNI state directory (/var/lib/cni …) as two runs that left the same state write it: host-local's
 * listing index (`.cnikit-index-*`, beside the network directories) names its directory's device, inode and mtime,
 * which differ whenever the directory was made anew; they are replaced, the listing it holds is kept.
 */
export function stableStateFile(path: string, text: string): string {
  if (!/(^|\/)\.cnikit-index-[^/]*$/.test(path)) return text;
  return stableIndex(text) ?? text.replace(/"(dev|ino|mtimeNs)":"\d+"/g, '"$1":"…"');
}

/**
 * The listing an index file holds (its snapshot line with the journal lines after it replayed, names sorted), so
 * that equal listings print equally however they were written; undefined when it does not parse.
 */
function stableIndex(text: string): string | undefined {
  try {
    const lines = text.split('\n').filter((l) => l !== '');
    const ix = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    const files = new Map(ix.files as [string, string][]);
    const names = new Set(ix.names as string[]);
    let symlinks = ix.symlinks as string[];
    for (const l of lines.slice(1)) {
      const [op, name, key] = JSON.parse(l) as [string, string, string?];
      if (op === '+') {
        names.add(name);
        if (key !== undefined) files.set(name, key);
      } else if (op === '-') {
        names.delete(name);
        files.delete(name);
        symlinks = symlinks.filter((x) => x !== name);
      }
    }
    const sorted = <T>(a: T[], k: (x: T) => string) =>
      a.sort((x, y) => (k(x) < k(y) ? -1 : k(x) > k(y) ? 1 : 0));
    return JSON.stringify({
      ...ix,
      dev: '…',
      ino: '…',
      mtimeNs: '…',
      files: sorted([...files], (f) => f[0]),
      names: sorted([...names], (n) => n),
      symlinks: sorted([...symlinks], (n) => n),
    });
  } catch {
    return undefined;
  }
}

export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const LINK_VOLATILE = new Set([
  'stats',
  'stats64',
  'carrier_changes',
  'carrier_up_count',
  'carrier_down_count',
]);
const ADDR_VOLATILE = new Set(['valid_life_time', 'preferred_life_time']);
const ROUTE_VOLATILE = new Set(['expires', 'cache']);

function iptablesLines(save: string): string[] {
  return save
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.replace(/^\[\d+:\d+\] /, '').replace(/ \[\d+:\d+\]$/, ' [0:0]'));
}

function nftLines(doc: unknown, keepHandles: boolean): string[] {
  const objs = ((doc as { nftables?: unknown[] } | undefined)?.nftables ?? []).filter(
    (o) => !(o && typeof o === 'object' && 'metainfo' in o),
  );
  const volatile = new Set(keepHandles ? [] : ['handle']);
  return objs.map((o) => {
    const s = strip(o, volatile);
    // Zero the counters (statement {"counter": {"packets": n, "bytes": n}}).
    return stableJson(s)
      .replace(/"bytes":\d+/g, '"bytes":0')
      .replace(/"packets":\d+/g, '"packets":0');
  });
}

/** Read a sysctl by its slashed path relative to /proc/sys (interface names may contain dots). */
function readSysctl(name: string): string | undefined {
  let path: string;
  try {
    path = sysctlPath(name);
  } catch {
    return undefined; // not a valid name (e.g. a link name that cannot be a path component): nothing to read
  }
  try {
    return readFileSync(path, 'utf8').trimEnd();
  } catch {
    return undefined;
  }
}

/** Capture the state of the namespace at `path` (must be run as root). */
export function snapshotNetns(path: string, opts: SnapshotOptions = {}): Snapshot {
  const want = new Set(opts.sections ?? SNAPSHOT_SECTIONS);
  // Caller-supplied names: Go's dotted/slashed rules, and sysctlPath rejects '..' / empty components (throws).
  const extraSysctls = (opts.sysctls ?? []).map((n) => {
    sysctlPath(n);
    return sysctlNormalName(n);
  });
  const snap = Object.fromEntries(SNAPSHOT_SECTIONS.map((s) => [s, [] as string[]])) as unknown as Snapshot;
  withNetns(path, () => {
    if (opts.settleMs) settleDad(scaled(opts.settleMs));
    const links = json('ip', ['-json', '-details', 'link', 'show']) as { ifname: string }[];
    const names = links.map((l) => l.ifname).sort();
    if (want.has('links')) {
      snap.links = links.map((l) => stableJson(strip(l, LINK_VOLATILE))).sort();
    }
    if (want.has('addresses')) {
      const addrs = json('ip', ['-json', 'address', 'show']) as { ifname: string; addr_info?: unknown[] }[];
      snap.addresses = addrs
        .flatMap((l) => (l.addr_info ?? []).map((a) => `${l.ifname} ${stableJson(strip(a, ADDR_VOLATILE))}`))
        .sort();
    }
    if (want.has('routes')) {
      for (const fam of ['-4', '-6']) {
        const routes = json('ip', ['-json', fam, 'route', 'show', 'table', 'all']);
        snap.routes.push(...routes.map((r) => `${fam} ${stableJson(strip(r, ROUTE_VOLATILE))}`));
      }
      snap.routes.sort();
    }
    if (want.has('iptables')) snap.iptables = iptablesLines(run('iptables-save', [], true));
    if (want.has('ip6tables')) snap.ip6tables = iptablesLines(run('ip6tables-save', [], true));
    if (want.has('nftables')) {
      const out = run('nft', ['-j', 'list', 'ruleset'], true).trim();
      snap.nftables = nftLines(out === '' ? undefined : JSON.parse(out), opts.keepNftHandles ?? false).sort();
    }
    if (want.has('tc')) {
      const qdiscs = json('tc', ['-j', 'qdisc', 'show'], true) as { dev: string; kind: string }[];
      snap.tc.push(...qdiscs.map((q) => `qdisc ${stableJson(strip(q, new Set(['refcnt'])))}`));
      for (const q of qdiscs) {
        if (q.kind === 'noqueue') continue; // a noqueue qdisc cannot hold filters: one tc process less per link
        const parents =
          q.kind === 'ingress' ? ['ffff:'] : q.kind === 'clsact' ? ['ingress', 'egress'] : ['root'];
        for (const p of parents) {
          const args = [
            '-j',
            'filter',
            'show',
            'dev',
            q.dev,
            ...(p === 'root' ? [] : p === 'ffff:' ? ['parent', p] : [p]),
          ];
          const filters = json('tc', args, true);
          snap.tc.push(...filters.map((f) => `filter ${q.dev} ${p} ${stableJson(f)}`));
        }
      }
      snap.tc = [...new Set(snap.tc)].sort();
    }
    if (want.has('sysctls')) {
      const keys = [
        ...DEFAULT_SYSCTLS,
        ...names.flatMap((n) => PER_LINK_SYSCTLS.map((k) => k.replace('%', n))),
        ...extraSysctls,
      ];
      for (const k of [...new Set(keys)]) {
        const v = readSysctl(k);
        if (v !== undefined) snap.sysctls.push(`${k} = ${v}`);
      }
      snap.sysctls.sort();
    }
  });
  return snap;
}

/** What changed in one section: lines only in `before` (removed) and only in `after` (added). */
export interface SnapshotDiff {
  section: SnapshotSection;
  removed: string[];
  added: string[];
}

/** Differences between two snapshots (multiset comparison per section); empty when identical. */
export function diffSnapshots(before: Snapshot, after: Snapshot): SnapshotDiff[] {
  const out: SnapshotDiff[] = [];
  for (const section of SNAPSHOT_SECTIONS) {
    const a = before[section] ?? [];
    const b = after[section] ?? [];
    const count = new Map<string, number>();
    for (const l of a) count.set(l, (count.get(l) ?? 0) + 1);
    const added: string[] = [];
    for (const l of b) {
      const n = count.get(l) ?? 0;
      if (n > 0) count.set(l, n - 1);
      else added.push(l);
    }
    const removed = [...count].flatMap(([l, n]) => new Array<string>(n).fill(l));
    if (added.length || removed.length) out.push({ section, removed, added });
  }
  return out;
}

/** Human-readable rendering of a diff (`- line` / `+ line` under `[section]`). */
export function formatDiff(diff: readonly SnapshotDiff[]): string {
  return diff
    .map((d) =>
      [`[${d.section}]`, ...d.removed.map((l) => `- ${l}`), ...d.added.map((l) => `+ ${l}`)].join('\n'),
    )
    .join('\n');
}
