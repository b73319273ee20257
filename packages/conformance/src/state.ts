/**
 * What the kit compares and changes in a sandbox: the "world" (kernel snapshots of host and container namespaces plus
 * the files under the private /var/lib/cni), its diff, the check of an ADD result against the kernel, and the
 * tampering that undoes part of an ADD for `check.tampered`.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sysctlPath, withNetns } from '@cnikit/netlink';
import { parseResult, versionGte } from '@cnikit/skel';
import {
  diffSnapshots,
  type ExecResult,
  type NamedNetns,
  type Sandbox,
  SNAPSHOT_SECTIONS,
  type Snapshot,
  stableStateFile,
} from '@cnikit/testing';

/**
 * `cmd args` in a namespace of the sandbox, started once from this thread switched into it (Sandbox.exec's `direct`:
 * no `ip netns exec`, a second process start per command, ~0.4 s each under the kernel lab's TCG, where a run makes
 * hundreds of them); none of the commands the kit runs (ip, tc, iptables/nft) needs the /sys remount.
 */
export function nsExec(
  sb: Sandbox,
  ns: NamedNetns | 'host',
  cmd: string,
  args: readonly string[],
  opts: { check?: boolean; input?: string } = {},
): ExecResult {
  return sb.exec(cmd, args, { ...opts, ns, direct: true });
}

export interface World {
  host: Snapshot;
  containers: Record<string, Snapshot>;
  /** `relative/path sha256` per file under the state directory (directories end in `/`). */
  files: string[];
}

export interface WorldDiff {
  section: string;
  removed: string[];
  added: string[];
}

/**
 * Every file below `dir` as `path sha256` (sorted; host-local's listing index hashed as stableStateFile prints it); a
 * missing directory has none.
 */
export function stateFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    let names: string[];
    try {
      names = readdirSync(join(dir, rel)).sort();
    } catch {
      return;
    }
    for (const n of names) {
      const r = rel ? `${rel}/${n}` : n;
      const full = join(dir, r);
      let st: ReturnType<typeof statSync>;
      try {
        st = statSync(full);
      } catch {
        continue;
      }
      if (st.isDirectory()) {
        out.push(`${r}/`);
        walk(r);
      } else {
        let sum = '?';
        try {
          // host-local's listing index (cnikit's cache beside the network directories) by the listing it
          // describes: a failed ADD rolled back by a DEL journals both and leaves the same listing
          sum = createHash('sha256')
            .update(stableStateFile(r, readFileSync(full, 'latin1')), 'latin1')
            .digest('hex')
            .slice(0, 16);
        } catch {
          // unreadable: the path alone
        }
        out.push(`${r} ${sum}`);
      }
    }
  };
  walk('');
  return out.sort();
}

/** Timers of a link that move by themselves (bridge and bridge-port timers). */
const LINK_TIMERS = /"(\w+_timer)":[\d.]+/g;

/** Carrier state of a bridge follows its ports with a delay: not part of what a plugin leaves. */
const CARRIER = /"NO-CARRIER",|,"NO-CARRIER"|"LOWER_UP",|,"LOWER_UP"|"operstate":"[A-Z]+",?/g;

function stable(s: Snapshot): Snapshot {
  return {
    ...s,
    links: s.links.map((l) => l.replace(LINK_TIMERS, '"$1":0').replace(CARRIER, '')),
    // a route's linkdown flag is the same carrier state
    routes: s.routes.map((l) => l.replace(/"linkdown",?|,"linkdown"/g, '')),
  };
}

/** Host and containers: every section, or (`light`) links, addresses and routes of the containers only. */
export function captureWorld(
  sb: Sandbox,
  containers: readonly NamedNetns[],
  stateDir: string,
  opts: { light?: boolean } = {},
): World {
  const snaps: Record<string, Snapshot> = {};
  // plugins change links, addresses, routes and sysctls in a container; firewall and tc state is the host's
  const sections = opts.light
    ? (['links', 'addresses', 'routes'] as const)
    : (['links', 'addresses', 'routes', 'sysctls'] as const);
  for (const c of containers) snaps[c.name] = stable(sb.snapshot(c, { sections }));
  // light: the host is not captured (an empty snapshot), its caller compares containers only
  const host = opts.light
    ? (Object.fromEntries(SNAPSHOT_SECTIONS.map((x) => [x, []])) as unknown as Snapshot)
    : stable(sb.snapshot('host'));
  return { host, containers: snaps, files: stateFiles(stateDir) };
}

function diffLines(section: string, a: readonly string[], b: readonly string[]): WorldDiff | undefined {
  const count = new Map<string, number>();
  for (const l of a) count.set(l, (count.get(l) ?? 0) + 1);
  const added: string[] = [];
  for (const l of b) {
    const n = count.get(l) ?? 0;
    if (n > 0) count.set(l, n - 1);
    else added.push(l);
  }
  const removed = [...count].flatMap(([l, n]) => new Array<string>(n).fill(l));
  return added.length || removed.length ? { section, removed, added } : undefined;
}

const pathOf = (line: string) => line.replace(/ [0-9a-f?]+$/, '');

/** Differences between two worlds; `pathsOnly` compares the file paths and not their contents. */
export function diffWorld(a: World, b: World, opts: { pathsOnly?: boolean } = {}): WorldDiff[] {
  const out: WorldDiff[] = [];
  for (const d of diffSnapshots(a.host, b.host)) out.push({ ...d, section: `host ${d.section}` });
  for (const name of Object.keys(a.containers)) {
    const sa = a.containers[name];
    const sb = b.containers[name];
    if (!sa || !sb) continue;
    for (const d of diffSnapshots(sa, sb)) out.push({ ...d, section: `container ${d.section}` });
  }
  const fa = opts.pathsOnly ? a.files.map(pathOf) : a.files;
  const fb = opts.pathsOnly ? b.files.map(pathOf) : b.files;
  const f = diffLines('files under /var/lib/cni', fa, fb);
  if (f) out.push(f);
  return out;
}

export function formatWorldDiff(diff: readonly WorldDiff[], max = 40): string {
  const lines = diff.flatMap((d) => [
    `[${d.section}]`,
    ...d.removed.map((l) => `- ${l}`),
    ...d.added.map((l) => `+ ${l}`),
  ]);
  return lines.length > max
    ? [...lines.slice(0, max), `… ${lines.length - max} more lines`].join('\n')
    : lines.join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// results against the kernel

interface IpLink {
  ifname: string;
  address?: string;
  mtu?: number;
  addr_info?: Array<{ family: string; local: string; prefixlen: number }>;
}

function ipJson<T>(sb: Sandbox, ns: NamedNetns | 'host', args: string[]): T[] {
  const r = nsExec(sb, ns, 'ip', ['-json', ...args], { check: false });
  const t = r.stdout.trim();
  return r.status === 0 && t ? (JSON.parse(t) as T[]) : [];
}

function normDst(dst: string): string {
  if (dst === '0.0.0.0/0' || dst === '::/0') return 'default';
  return dst.includes('/') ? dst.replace(/\/(32|128)$/, '') : dst;
}

/** A textual shape of an IP: family and prefix length. */
function ipFamily(addr: string): '4' | '6' {
  return addr.includes(':') ? '6' : '4';
}

/**
 * Problems of an ADD result against its requested version and the kernel (empty when none). `netns` is CNI_NETNS;
 * `container` the namespace it names.
 */
export function verifyResult(
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
  json: any,
  version: string,
  sb: Sandbox,
  container: NamedNetns,
  opts: { kernel?: boolean } = {},
): string[] {
  const problems: string[] = [];
  if (!json || typeof json !== 'object' || Array.isArray(json)) return ['the result is not a JSON object'];
  if (json.cniVersion !== version)
    problems.push(`cniVersion is ${JSON.stringify(json.cniVersion)}, the request asked for "${version}"`);
  try {
    parseResult(json, version);
  } catch (e) {
    problems.push(`does not parse as a ${version} result: ${(e as Error).message}`);
  }
  // the keys a result of this version may have
  const allowed = versionGte(version, '0.3.0')
    ? ['cniVersion', 'interfaces', 'ips', 'routes', 'dns']
    : ['cniVersion', 'ip4', 'ip6', 'dns'];
  const extra = Object.keys(json).filter((k) => !allowed.includes(k));
  if (extra.length) problems.push(`keys that a ${version} result does not have: ${extra.join(', ')}`);
  // an IPAM plugin run directly only allocates (§5 Delegated plugins): the interface plugin applies its result
  if (opts.kernel === false) return problems;
  const cLinks = ipJson<IpLink>(sb, container, ['addr', 'show']);
  const hLinks = ipJson<IpLink>(sb, 'host', ['addr', 'show']);
  const hasAddr = (links: IpLink[], addr: string, ifname?: string) => {
    const [ip, len] = addr.split('/');
    return links.some(
      (l) =>
        (ifname === undefined || l.ifname === ifname) &&
        (l.addr_info ?? []).some((a) => a.local === ip && String(a.prefixlen) === len),
    );
  };
  if (!versionGte(version, '0.3.0')) {
    for (const fam of ['ip4', 'ip6']) {
      const ip = json[fam]?.ip;
      if (typeof ip === 'string' && !hasAddr(cLinks, ip))
        problems.push(`${fam}.ip ${ip} is on no interface of the container`);
    }
    return problems;
  }
  const ifaces: Array<{ name?: string; mac?: string; mtu?: number; sandbox?: string }> = Array.isArray(
    json.interfaces,
  )
    ? json.interfaces
    : [];
  const where = (i: { sandbox?: string }) =>
    !i.sandbox ? 'host' : i.sandbox === container.path ? 'container' : undefined;
  ifaces.forEach((i, n) => {
    const w = where(i);
    if (!w || !i.name) return;
    const link = (w === 'host' ? hLinks : cLinks).find((l) => l.ifname === i.name);
    if (!link) {
      problems.push(`interfaces[${n}] ${i.name} is not in the ${w} namespace`);
      return;
    }
    if (i.mac && link.address && i.mac.toLowerCase() !== link.address.toLowerCase())
      problems.push(`interfaces[${n}] ${i.name}: mac ${i.mac} in the result, ${link.address} in the kernel`);
    if (typeof i.mtu === 'number' && i.mtu > 0 && link.mtu !== undefined && i.mtu !== link.mtu)
      problems.push(`interfaces[${n}] ${i.name}: mtu ${i.mtu} in the result, ${link.mtu} in the kernel`);
  });
  const ips: Array<{ address?: string; interface?: number }> = Array.isArray(json.ips) ? json.ips : [];
  ips.forEach((ip, n) => {
    if (typeof ip.address !== 'string' || typeof ip.interface !== 'number') return;
    const i = ifaces[ip.interface];
    if (!i) {
      problems.push(`ips[${n}].interface ${ip.interface} names no entry of interfaces`);
      return;
    }
    const w = where(i);
    if (w !== 'container' || !i.name) return;
    if (!hasAddr(cLinks, ip.address, i.name))
      problems.push(`ips[${n}] ${ip.address} is not on ${i.name} in the container`);
  });
  const routes: Array<{ dst?: string; gw?: string }> = Array.isArray(json.routes) ? json.routes : [];
  if (routes.length) {
    const table = [
      ...ipJson<{ dst: string; gateway?: string }>(sb, container, ['-4', 'route', 'show', 'table', 'all']),
      ...ipJson<{ dst: string; gateway?: string }>(sb, container, ['-6', 'route', 'show', 'table', 'all']),
    ];
    routes.forEach((r, n) => {
      if (typeof r.dst !== 'string') return;
      const dst = normDst(r.dst);
      const hit = table.some((t) => normDst(t.dst) === dst && (!r.gw || t.gateway === r.gw));
      if (!hit)
        problems.push(
          `routes[${n}] ${r.dst}${r.gw ? ` via ${r.gw}` : ''} is not in the container's routing tables`,
        );
    });
  }
  return problems;
}

/** The shape of a result: what must not change between two identical requests (`determinism`). */
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
export function resultShape(json: any): unknown {
  if (!json || typeof json !== 'object') return json;
  const ipShape = (a: unknown) =>
    typeof a === 'string' && a.includes('/') ? `v${ipFamily(a)}/${a.split('/')[1]}` : typeof a;
  return {
    cniVersion: json.cniVersion,
    keys: Object.keys(json).sort(),
    // host interface names may be random (veth peers): only their number counts
    interfaces: (json.interfaces ?? []).map((i: { name?: string; sandbox?: string }) =>
      i.sandbox ? [i.name, i.sandbox] : ['(host)', ''],
    ),
    ips: (json.ips ?? []).map((i: { address?: string; interface?: number }) => [
      ipShape(i.address),
      i.interface,
    ]),
    routes: (json.routes ?? []).map((r: { dst?: string }) => r.dst).sort(),
    ip4: json.ip4 ? ipShape(json.ip4.ip) : undefined,
    ip6: json.ip6 ? ipShape(json.ip6.ip) : undefined,
    dns: json.dns ?? null,
  };
}

/** What of prevResult is missing from a chained plugin's result. */
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
export function droppedFromPrev(prev: any, result: any): string[] {
  const out: string[] = [];
  if (!prev || typeof prev !== 'object') return out;
  if (!result || typeof result !== 'object') return ['the whole result'];
  const rIfaces: Array<{ name?: string; sandbox?: string }> = result.interfaces ?? [];
  for (const i of (prev.interfaces ?? []) as Array<{ name?: string; sandbox?: string }>) {
    if (!rIfaces.some((r) => r.name === i.name && (r.sandbox ?? '') === (i.sandbox ?? '')))
      out.push(`interface ${i.name}${i.sandbox ? ` (sandbox ${i.sandbox})` : ''}`);
  }
  const rIps: Array<{ address?: string }> = result.ips ?? [];
  for (const ip of (prev.ips ?? []) as Array<{ address?: string }>) {
    if (!rIps.some((r) => r.address === ip.address)) out.push(`address ${ip.address}`);
  }
  const rRoutes: Array<{ dst?: string; gw?: string }> = result.routes ?? [];
  for (const r of (prev.routes ?? []) as Array<{ dst?: string; gw?: string }>) {
    if (!rRoutes.some((x) => x.dst === r.dst && (x.gw ?? '') === (r.gw ?? '')))
      out.push(`route ${r.dst}${r.gw ? ` via ${r.gw}` : ''}`);
  }
  for (const f of ['ip4', 'ip6']) {
    if (prev[f]?.ip && result[f]?.ip !== prev[f].ip) out.push(`${f}.ip ${prev[f].ip}`);
  }
  const rNs: string[] = result.dns?.nameservers ?? [];
  for (const n of (prev.dns?.nameservers ?? []) as string[]) {
    if (!rNs.includes(n)) out.push(`dns nameserver ${n}`);
  }
  return out;
}

/**
 * Every address of a result (for the no-two-containers-share-an-address rule of `concurrency`); loopback addresses
 * are every container's own.
 */
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
export function resultAddresses(json: any): string[] {
  if (!json || typeof json !== 'object') return [];
  const out: string[] = [];
  for (const ip of json.ips ?? []) if (typeof ip?.address === 'string') out.push(ip.address.split('/')[0]);
  for (const f of ['ip4', 'ip6']) if (typeof json[f]?.ip === 'string') out.push(json[f].ip.split('/')[0]);
  return out.filter((a) => !a.startsWith('127.') && a !== '::1');
}

// ---------------------------------------------------------------------------------------------------------------
// tampering

/** Raw state the tamper step needs beside the normalised snapshots (rule handles, iptables tables). */
export interface RawFirewall {
  iptables: string;
  ip6tables: string;
  // biome-ignore lint/suspicious/noExplicitAny: nft JSON
  nft: any[];
}

export function rawFirewall(sb: Sandbox): RawFirewall {
  const save = (cmd: string) => {
    const r = nsExec(sb, 'host', cmd, [], { check: false });
    return r.status === 0 ? r.stdout : '';
  };
  const nft = nsExec(sb, 'host', 'nft', ['-j', 'list', 'ruleset'], { check: false });
  let objs: unknown[] = [];
  try {
    objs = nft.status === 0 && nft.stdout.trim() ? (JSON.parse(nft.stdout).nftables ?? []) : [];
  } catch {
    objs = [];
  }
  return { iptables: save('iptables-save'), ip6tables: save('ip6tables-save'), nft: objs };
}

/** iptables-save text → per table: chains and rule lines (`-A …`). */
function parseSave(text: string): Map<string, { chains: Set<string>; rules: string[] }> {
  const out = new Map<string, { chains: Set<string>; rules: string[] }>();
  let cur: { chains: Set<string>; rules: string[] } | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('*')) {
      cur = { chains: new Set(), rules: [] };
      out.set(line.slice(1), cur);
    } else if (line.startsWith(':') && cur) cur.chains.add(line.slice(1).split(' ')[0] ?? '');
    else if (line.startsWith('-A ') && cur) cur.rules.push(line);
  }
  return out;
}

/** The iptables-restore --noflush input that removes what `after` has and `before` has not ('' when nothing). */
export function iptablesUndo(before: string, after: string): string {
  const b = parseSave(before);
  const a = parseSave(after);
  const parts: string[] = [];
  for (const [table, t] of a) {
    const old = b.get(table) ?? { chains: new Set<string>(), rules: [] };
    const oldRules = new Map<string, number>();
    for (const r of old.rules) oldRules.set(r, (oldRules.get(r) ?? 0) + 1);
    const newChains = [...t.chains].filter((c) => !old.chains.has(c));
    const dels: string[] = [];
    for (const r of t.rules) {
      const n = oldRules.get(r) ?? 0;
      if (n > 0) {
        oldRules.set(r, n - 1);
        continue;
      }
      const chain = r.split(' ')[1] ?? '';
      if (!newChains.includes(chain)) dels.push(`-D ${r.slice(3)}`);
    }
    if (!dels.length && !newChains.length) continue;
    parts.push(
      `*${table}`,
      ...dels,
      ...newChains.map((c) => `-F ${c}`),
      ...newChains.map((c) => `-X ${c}`),
      'COMMIT',
    );
  }
  return parts.length ? `${parts.join('\n')}\n` : '';
}

export interface Tamper {
  /** What was undone, for the report. */
  what: string;
  apply(): void;
}

/** Drop object handles so rules of two dumps compare. */
// biome-ignore lint/suspicious/noExplicitAny: nft JSON
function nftKey(o: any): string {
  const { handle: _h, ...rest } = o ?? {};
  return JSON.stringify(rest);
}

/**
 * The first revertible change of an ADD (`before` → `after`), in the order of `check.tampered`; undefined when ADD
 * changed nothing the kit can revert.
 */
export function findTamper(
  sb: Sandbox,
  container: NamedNetns,
  stateDir: string,
  before: World,
  after: World,
  rawBefore: RawFirewall,
  rawAfter: RawFirewall,
): Tamper | undefined {
  const cb = before.containers[container.name];
  const ca = after.containers[container.name];
  const hostDiff = diffSnapshots(before.host, after.host);
  const ctrDiff = cb && ca ? diffSnapshots(cb, ca) : [];
  const sect = (d: ReturnType<typeof diffSnapshots>, s: string) => d.find((x) => x.section === s);
  const linkName = (l: string) => (JSON.parse(l) as { ifname: string }).ifname;
  const run = (cmd: string, args: string[], ns: NamedNetns | 'host', input?: string) =>
    nsExec(sb, ns, cmd, args, { ...(input !== undefined ? { input } : {}) });

  // container links created
  const cl = sect(ctrDiff, 'links');
  const oldC = new Set((cl?.removed ?? []).map(linkName));
  const newCLinks = (cl?.added ?? []).map(linkName).filter((n) => !oldC.has(n));
  if (newCLinks.length)
    return {
      what: `deleted the container link(s) ${newCLinks.join(', ')}`,
      apply: () => {
        for (const n of newCLinks) run('ip', ['link', 'del', 'dev', n], container);
      },
    };
  const ca2 = sect(ctrDiff, 'addresses');
  if (ca2?.added.length) {
    const addrs = ca2.added.map((l) => {
      const sp = l.indexOf(' ');
      const a = JSON.parse(l.slice(sp + 1)) as { local: string; prefixlen: number };
      return { dev: l.slice(0, sp), addr: `${a.local}/${a.prefixlen}` };
    });
    return {
      what: `deleted the container address(es) ${addrs.map((a) => `${a.addr} on ${a.dev}`).join(', ')}`,
      apply: () => {
        for (const a of addrs) run('ip', ['addr', 'del', a.addr, 'dev', a.dev], container);
      },
    };
  }
  const cr = sect(ctrDiff, 'routes');
  if (cr?.added.length) {
    const routes = cr.added.map((l) => {
      const sp = l.indexOf(' ');
      const r = JSON.parse(l.slice(sp + 1)) as {
        dst: string;
        gateway?: string;
        dev?: string;
        table?: string;
      };
      return { fam: l.slice(0, sp), ...r };
    });
    return {
      what: `deleted the container route(s) ${routes.map((r) => `${r.dst}${r.gateway ? ` via ${r.gateway}` : ''}`).join(', ')}`,
      apply: () => {
        for (const r of routes) {
          run(
            'ip',
            [
              r.fam,
              'route',
              'del',
              r.dst,
              ...(r.gateway ? ['via', r.gateway] : []),
              ...(r.dev ? ['dev', r.dev] : []),
              ...(r.table ? ['table', r.table] : []),
            ],
            container,
          );
        }
      },
    };
  }
  // container link attributes changed
  if (cl?.added.length) {
    type L = { ifname: string; mtu?: number; address?: string; flags?: string[] };
    const olds = new Map((cl.removed ?? []).map((l) => [linkName(l), JSON.parse(l) as L]));
    for (const l of cl.added) {
      const now = JSON.parse(l) as L;
      const old = olds.get(now.ifname);
      if (!old) continue;
      const args: string[] = [];
      if (old.mtu !== now.mtu && old.mtu) args.push('mtu', String(old.mtu));
      if (old.address !== now.address && old.address) args.push('address', old.address);
      const wasPromisc = (old.flags ?? []).includes('PROMISC');
      if (wasPromisc !== (now.flags ?? []).includes('PROMISC'))
        args.push('promisc', wasPromisc ? 'on' : 'off');
      if (args.length)
        return {
          what: `set ${args.join(' ')} on the container link ${now.ifname} again`,
          apply: () => run('ip', ['link', 'set', 'dev', now.ifname, ...args], container),
        };
    }
  }
  // host links created
  const hl = sect(hostDiff, 'links');
  const oldH = new Set((hl?.removed ?? []).map(linkName));
  const newHLinks = (hl?.added ?? []).map(linkName).filter((n) => !oldH.has(n));
  if (newHLinks.length)
    return {
      what: `deleted the host link(s) ${newHLinks.join(', ')}`,
      apply: () => {
        for (const n of newHLinks) nsExec(sb, 'host', 'ip', ['link', 'del', 'dev', n], { check: false });
      },
    };
  for (const [cmd, b, a] of [
    ['iptables', rawBefore.iptables, rawAfter.iptables],
    ['ip6tables', rawBefore.ip6tables, rawAfter.ip6tables],
  ] as const) {
    const undo = iptablesUndo(b, a);
    if (undo)
      return {
        what: `removed the ${cmd} rules and chains ADD added:\n${undo.trimEnd()}`,
        apply: () => run(`${cmd}-restore`, ['--noflush'], 'host', undo),
      };
  }
  const oldNft = new Map<string, number>();
  for (const o of rawBefore.nft) oldNft.set(nftKey(o), (oldNft.get(nftKey(o)) ?? 0) + 1);
  // biome-ignore lint/suspicious/noExplicitAny: nft JSON
  const newRules: any[] = [];
  for (const o of rawAfter.nft) {
    const k = nftKey(o);
    const n = oldNft.get(k) ?? 0;
    if (n > 0) oldNft.set(k, n - 1);
    else if (o?.rule) newRules.push(o.rule);
  }
  if (newRules.length)
    return {
      what: `deleted the ${newRules.length} nftables rule(s) ADD added`,
      apply: () => {
        const script = newRules
          .map((r) => `delete rule ${r.family} ${r.table} ${r.chain} handle ${r.handle}`)
          .join('\n');
        run('nft', ['-f', '-'], 'host', `${script}\n`);
      },
    };
  for (const [diff, ns, label] of [
    [hostDiff, 'host', 'host'],
    [ctrDiff, container, 'container'],
  ] as const) {
    const tc = sect(diff, 'tc');
    const qd = (tc?.added ?? [])
      .filter((l) => l.startsWith('qdisc '))
      .map((l) => JSON.parse(l.slice(6)) as { dev: string; kind: string; root?: boolean; parent?: string })
      .filter((q) => q.root || q.kind === 'ingress' || q.kind === 'clsact');
    if (qd.length)
      return {
        what: `deleted the ${label} qdisc(s) ${qd.map((q) => `${q.kind} on ${q.dev}`).join(', ')}`,
        apply: () => {
          for (const q of qd)
            nsExec(
              sb,
              ns,
              'tc',
              ['qdisc', 'del', 'dev', q.dev, q.kind === 'ingress' || q.kind === 'clsact' ? q.kind : 'root'],
              { check: false },
            );
        },
      };
  }
  for (const [diff, ns, label] of [
    [ctrDiff, container, 'container'],
    [hostDiff, sb.host, 'host'],
  ] as const) {
    const sc = sect(diff, 'sysctls');
    const olds = new Map(
      (sc?.removed ?? []).map((l) => {
        const i = l.indexOf(' = ');
        return [l.slice(0, i), l.slice(i + 3)];
      }),
    );
    const changed = (sc?.added ?? [])
      .map((l) => l.slice(0, l.indexOf(' = ')))
      .filter((k) => olds.has(k))
      .map((k) => [k, olds.get(k) ?? ''] as const);
    if (changed.length)
      return {
        what: `set the ${label} sysctl(s) back: ${changed.map(([k, v]) => `${k} = ${v}`).join(', ')}`,
        apply: () =>
          withNetns(ns.path, () => {
            for (const [k, v] of changed) writeFileSync(sysctlPath(k), v);
          }),
      };
  }
  const oldFiles = new Set(before.files.map(pathOf));
  const newFiles = after.files.map(pathOf).filter((f) => !f.endsWith('/') && !oldFiles.has(f));
  if (newFiles.length)
    return {
      what: `removed the file(s) ADD created under /var/lib/cni: ${newFiles.join(', ')}`,
      apply: () => {
        for (const f of newFiles) rmSync(join(stateDir, f), { force: true });
      },
    };
  return undefined;
}
