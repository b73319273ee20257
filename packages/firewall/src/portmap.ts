/**
 * Host-port forwarding for the portmap plugin, identical in kernel state to the reference (plugins.md §4), so that
 * the Go portmap deletes and checks what cnikit created and the other way round.
 *
 * iptables (table nat, ONE iptables-save + at most ONE iptables-restore per family per call; the reference makes a
 * `-C` + `-A`/`-I` exec per rule):
 *   CNI-HOSTPORT-SETMARK   -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
 *   CNI-HOSTPORT-MASQ      -m mark --mark 0x2000/0x2000 -j MASQUERADE   (POSTROUTING position 1 jumps here)
 *   CNI-HOSTPORT-DNAT      entry from PREROUTING and OUTPUT: -m addrtype --dst-type LOCAL
 *     → per protocol and group of ≤ 15 host ports: -m comment --comment "dnat name: …" -m multiport -p P
 *       --destination-ports a,b [conditions] -j CNI-DN-<hash>
 *   CNI-DN-<hash>          per mapping: [-s <container net> -j SETMARK] [-s 127.0.0.1 -j SETMARK] -j DNAT
 * nftables (tables `ip`/`ip6 cni_hostport`, ONE `nft -f -` per call): chains hostports, hostip_hostports,
 *   hostports_all, base chains prerouting/output (nat, -100, `fib daddr type local jump hostports_all`) and
 *   masquerading (nat postrouting 100); one dnat rule per mapping and the masquerade rules, comment = container ID.
 *
 * Unlike the reference: a re-ADD replaces the container's rules instead of adding to them; teardown needs no
 * mappings (rules are found by chain name / comment) and covers both backends and both families.
 */
import { nftExists } from '@cnikit/netlink';
import { type ParsedCidr, parseCidr } from './cidr.ts';
import { ToolNotFoundError, type ToolOptions } from './exec.ts';
import {
  hasRule,
  type IPFamily,
  IptablesBatch,
  readTable,
  ruleComment,
  ruleTarget,
  type SavedTable,
  supportsIPTables,
} from './iptables.ts';
import { formatChainNameWithPrefix, goQuote } from './names.ts';
import { NftBatch, type NftRule, nftList, supportsNFTables } from './nftables.ts';
import { natChainsMayExist, probeKernel, removeJumpChainsFast } from './probe.ts';

export const HOSTPORT_DNAT_CHAIN = 'CNI-HOSTPORT-DNAT';
export const HOSTPORT_SETMARK_CHAIN = 'CNI-HOSTPORT-SETMARK';
export const HOSTPORT_MASQ_CHAIN = 'CNI-HOSTPORT-MASQ';
export const OLD_HOSTPORT_SNAT_CHAIN = 'CNI-HOSTPORT-SNAT';
export const HOSTPORT_NFT_TABLE = 'cni_hostport';
const NFT_TABLE_COMMENT = 'CNI portmap plugin';

export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol: string;
  /** '' = any host address; `0.0.0.0` / `::` also mean any address of that family. */
  hostIP: string;
}

export interface PortMapArgs extends ToolOptions {
  network: string;
  containerID: string;
  mappings: readonly PortMapping[];
  /** The container address with its prefix (`10.1.2.2/24`). */
  containerIP: string;
  snat: boolean;
  masqAll: boolean;
  /** iptables: bit of the masquerade mark (0–31). */
  markMasqBit: number;
  /** iptables: jump here instead of CNI-HOSTPORT-SETMARK (and create neither SETMARK nor MASQ). */
  externalSetMarkChain?: string;
  /** Extra match tokens of this family (iptables: after the entry rule's matches; nftables: before `fib …`). */
  conditions?: readonly string[];
}

/** `CNI-DN-<21 hex>` of a container. */
export const dnatChainName = (network: string, containerID: string) =>
  formatChainNameWithPrefix(network, containerID, 'DN-');
/** The legacy `CNI-SN-<hash>` chain (removed on teardown like the reference). */
const oldSnatChainName = (network: string, containerID: string) =>
  formatChainNameWithPrefix(network, containerID, 'SN-');

/** The reference's comment on the entry rules, cut to 253 bytes + `...` beyond 255. */
export function dnatComment(network: string, containerID: string): string {
  const c = `dnat name: "${network}" id: "${containerID}"`;
  return c.length <= 255 ? c : `${c.slice(0, 253)}...`;
}

function markDef(bit: number): string {
  const v = (1 << bit) >>> 0;
  return `0x${v.toString(16)}/0x${v.toString(16)}`;
}

function sameFamily(m: PortMapping, family: IPFamily): boolean {
  if (m.hostIP === '') return true;
  return parseCidr(m.hostIP).family === family;
}

/** No destination match: no host IP, or `0.0.0.0` / `::` (Go's IsUnspecified). */
function unspecified(hostIP: string): boolean {
  if (hostIP === '') return true;
  const { ip } = parseCidr(hostIP);
  return ip === '0.0.0.0' || ip === '::';
}

function hostPortText(ip: ParsedCidr, port: number): string {
  return ip.family === 6 ? `[${ip.ip}]:${port}` : `${ip.ip}:${port}`;
}

/** The per-container chain as the reference generates it (pure; exported for tests). */
export function iptablesDnatRules(a: PortMapArgs): {
  chain: string;
  entryRules: string[][];
  rules: string[][];
} {
  const ip = parseCidr(a.containerIP);
  const chain = dnatChainName(a.network, a.containerID);
  const comment = dnatComment(a.network, a.containerID);
  const setMark = a.externalSetMarkChain ?? HOSTPORT_SETMARK_CHAIN;
  const byProto = new Map<string, number[]>();
  for (const m of a.mappings) byProto.set(m.protocol, [...(byProto.get(m.protocol) ?? []), m.hostPort]);
  const entryRules: string[][] = [];
  for (const proto of [...byProto.keys()].sort()) {
    const ports = byProto.get(proto) as number[];
    for (let i = 0; i < ports.length; i += 15) {
      const r = ['-m', 'comment', '--comment', comment, '-m', 'multiport', '-p', proto];
      r.push('--destination-ports', ports.slice(i, i + 15).join(','));
      r.push(...(a.conditions ?? []), '-j', chain);
      entryRules.push(r);
    }
  }
  const rules: string[][] = [];
  for (const m of a.mappings) {
    if (!sameFamily(m, ip.family)) continue;
    const base = ['-p', m.protocol, '--dport', String(m.hostPort)];
    if (!unspecified(m.hostIP)) base.push('-d', m.hostIP);
    if (a.snat) {
      const src = a.masqAll ? (ip.family === 6 ? '::/0' : '0.0.0.0/0') : `${ip.ip}/${ip.prefix}`;
      rules.push([...base, '-s', src, '-j', setMark]);
      if (ip.family === 4 && !a.masqAll) rules.push([...base, '-s', '127.0.0.1', '-j', setMark]);
    }
    rules.push([...base, '-j', 'DNAT', '--to-destination', hostPortText(ip, m.containerPort)]);
  }
  return { chain, entryRules, rules };
}

function setupIptables(a: PortMapArgs, family: IPFamily): void {
  const b = new IptablesBatch(family, a);
  if (a.snat && a.externalSetMarkChain === undefined) {
    const mark = markDef(a.markMasqBit);
    b.ensureChain('nat', HOSTPORT_SETMARK_CHAIN);
    b.appendUnique('nat', HOSTPORT_SETMARK_CHAIN, [
      '-m',
      'comment',
      '--comment',
      'CNI portfwd masquerade mark',
      '-j',
      'MARK',
      '--set-xmark',
      mark,
    ]);
    b.ensureChain('nat', HOSTPORT_MASQ_CHAIN);
    b.appendUnique('nat', HOSTPORT_MASQ_CHAIN, ['-m', 'mark', '--mark', mark, '-j', 'MASQUERADE']);
    b.insertUnique('nat', 'POSTROUTING', [
      '-m',
      'comment',
      '--comment',
      'CNI portfwd requiring masquerade',
      '-j',
      HOSTPORT_MASQ_CHAIN,
    ]);
  }
  b.ensureChain('nat', HOSTPORT_DNAT_CHAIN);
  for (const entry of ['PREROUTING', 'OUTPUT']) {
    b.appendUnique('nat', entry, ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', HOSTPORT_DNAT_CHAIN]);
  }
  const d = iptablesDnatRules(a);
  // a re-ADD replaces the container's rules (the reference keeps stale ones)
  b.deleteRulesWhere('nat', HOSTPORT_DNAT_CHAIN, (r) => ruleTarget(r) === d.chain);
  b.flushChain('nat', d.chain, { create: true });
  for (const r of d.rules) b.append('nat', d.chain, r);
  for (const r of d.entryRules) b.append('nat', HOSTPORT_DNAT_CHAIN, r);
  b.commit();
}

const nftFamily = (f: IPFamily) => (f === 6 ? 'ip6' : 'ip');

/** The container's rules in the nft table (one `nft -j list table` when the table exists). */
function nftOwnRules(family: IPFamily, containerID: string, opts: ToolOptions): NftRule[] {
  const fam = nftFamily(family);
  if (probeKernel(opts, () => nftExists(fam, HOSTPORT_NFT_TABLE), undefined) === false) return [];
  return nftList(['table', fam, HOSTPORT_NFT_TABLE], opts).rules.filter((r) => r.comment === containerID);
}

function setupNftables(a: PortMapArgs, family: IPFamily): void {
  const ip = parseCidr(a.containerIP);
  const fam = nftFamily(family);
  const T = HOSTPORT_NFT_TABLE;
  const stale = nftOwnRules(family, a.containerID, a);
  const tx = new NftBatch(a);
  tx.addTable(fam, T, { comment: NFT_TABLE_COMMENT });
  tx.addChain({ family: fam, table: T, name: 'hostports' });
  tx.addChain({ family: fam, table: T, name: 'hostip_hostports' });
  tx.addChain({ family: fam, table: T, name: 'hostports_all' });
  tx.flushChain(fam, T, 'hostports_all');
  tx.addRule(fam, T, 'hostports_all', 'jump hostip_hostports');
  tx.addRule(fam, T, 'hostports_all', 'jump hostports');
  const cond = (a.conditions ?? []).join(' ');
  for (const [name, hook] of [
    ['prerouting', 'prerouting'],
    ['output', 'output'],
  ] as const) {
    tx.addChain({ family: fam, table: T, name, type: 'nat', hook, priority: -100 });
    tx.flushChain(fam, T, name);
    tx.addRule(fam, T, name, `${cond ? `${cond} ` : ''}fib daddr type local jump hostports_all`);
  }
  if (a.snat)
    tx.addChain({
      family: fam,
      table: T,
      name: 'masquerading',
      type: 'nat',
      hook: 'postrouting',
      priority: 100,
    });
  for (const r of stale) tx.deleteRule(fam, T, r.chain, r.handle);
  const comment = { comment: a.containerID };
  for (const m of a.mappings) {
    if (!sameFamily(m, family)) continue;
    const dst = unspecified(m.hostIP) ? '' : `${fam} daddr ${m.hostIP} `;
    tx.addRule(
      fam,
      T,
      'hostports',
      `${dst}${m.protocol} dport ${m.hostPort} dnat to ${hostPortText(ip, m.containerPort)}`,
      comment,
    );
  }
  if (a.snat) {
    const src = a.masqAll ? (family === 6 ? '::/0' : '0.0.0.0/0') : ip.ip;
    tx.addRule(fam, T, 'masquerading', `${fam} saddr ${src} ${fam} daddr ${ip.ip} masquerade`, comment);
    if (family === 4 && !a.masqAll) {
      tx.addRule(fam, T, 'masquerading', `${fam} saddr 127.0.0.1 ${fam} daddr ${ip.ip} masquerade`, comment);
    }
  }
  tx.commit();
}

/** Install the forwarding of one container address (its family's table) with the given backend. */
export function setupPortMap(backend: 'iptables' | 'nftables', a: PortMapArgs): void {
  const family = parseCidr(a.containerIP).family;
  if (backend === 'iptables') setupIptables(a, family);
  else setupNftables(a, family);
}

/** Go's `%v` of a [][]string. */
const goRules = (rules: string[][]) => `[${rules.map((r) => `[${r.join(' ')}]`).join(' ')}]`;

/** CHECK of one container address with the reference's messages (throws Error). */
export function checkPortMap(backend: 'iptables' | 'nftables', a: PortMapArgs): void {
  const family = parseCidr(a.containerIP).family;
  if (backend === 'iptables') {
    const d = iptablesDnatRules(a);
    const wrap = (msg: string) => new Error(`could not check ipv${family} dnat: ${msg}`);
    let nat: SavedTable;
    try {
      nat = readTable(family, 'nat', a);
    } catch (err) {
      throw new Error(
        `neither iptables nor ip6tables is usable, (iptables) ${family === 4 ? (err as Error).message : '<nil>'}, (ip6tables) ${family === 6 ? (err as Error).message : '<nil>'}`,
      );
    }
    if (!nat.chains.has(d.chain)) throw wrap(`chain ${d.chain} not found in iptables table nat`);
    for (let i = d.rules.length - 1; i >= 0; i--) {
      if (!hasRule(nat, d.chain, d.rules[i] as string[]))
        throw wrap(`rule ${goRules(d.rules)} in chain ${d.chain} not found in table nat`);
    }
    for (let i = d.entryRules.length - 1; i >= 0; i--) {
      if (!hasRule(nat, HOSTPORT_DNAT_CHAIN, d.entryRules[i] as string[])) {
        const shown = d.entryRules.map((r) => r.slice(0, -2));
        throw wrap(`rule ${goRules(shown)} in chain ${HOSTPORT_DNAT_CHAIN} not found in table nat`);
      }
    }
    return;
  }
  const hostPorts = a.mappings.filter((m) => sameFamily(m, family)).length;
  const masq = a.snat ? (family === 4 && !a.masqAll ? 2 : 1) : 0;
  const rules = nftOwnRules(family, a.containerID, a);
  for (const [chain, need] of [
    ['hostports', hostPorts],
    ['masquerading', masq],
  ] as const) {
    if (need > 0 && rules.filter((r) => r.chain === chain).length < need)
      throw new Error(`missing hostport rules in ${goQuote(chain)} chain`);
  }
}

/** Errors of a teardown/GC, reported together after every step was attempted. */
export class PortMapError extends Error {
  readonly errors: unknown[];
  constructor(errors: unknown[]) {
    super(errors.map((e) => (e instanceof Error ? e.message : String(e))).join('\n'));
    this.name = 'PortMapError';
    this.errors = errors;
  }
}

/** What teardown may find (see probe.ts): per iptables family the container's chains; per nft family the table. */
function candidates(chains: readonly string[], opts: ToolOptions) {
  return probeKernel(
    opts,
    () => ({
      ipt4: natChainsMayExist(4, chains),
      ipt6: natChainsMayExist(6, chains),
      nft4: nftExists('ip', HOSTPORT_NFT_TABLE) !== false,
      nft6: nftExists('ip6', HOSTPORT_NFT_TABLE) !== false,
    }),
    { ipt4: true, ipt6: true, nft4: true, nft6: true },
  );
}

/**
 * Remove a container's forwarding from BOTH backends and both families, without needing its mappings: the
 * iptables chain is found by name (and the CNI-HOSTPORT-DNAT jumps to it by target), nft rules by comment.
 * Shared chains stay, as in the reference. Missing tables/chains are fine; a failure of a backend the host
 * supports is reported after every step was tried.
 */
export function teardownPortMap(network: string, containerID: string, opts: ToolOptions = {}): void {
  const errors: unknown[] = [];
  const dn = dnatChainName(network, containerID);
  const sn = oldSnatChainName(network, containerID);
  const may = candidates([dn, sn], opts);
  for (const family of [4, 6] as const) {
    if (!(family === 4 ? may.ipt4 : may.ipt6)) continue;
    const pairs = [
      { from: HOSTPORT_DNAT_CHAIN, target: dn },
      { from: OLD_HOSTPORT_SNAT_CHAIN, target: sn },
    ];
    if (removeJumpChainsFast(family, 'nat', pairs, opts)) continue;
    try {
      const b = new IptablesBatch(family, opts);
      b.deleteRulesWhere('nat', HOSTPORT_DNAT_CHAIN, (r) => ruleTarget(r) === dn);
      b.deleteChain('nat', dn);
      b.deleteRulesWhere('nat', OLD_HOSTPORT_SNAT_CHAIN, (r) => ruleTarget(r) === sn);
      b.deleteChain('nat', sn);
      b.commit();
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsIPTables(family, opts)) errors.push(e);
    }
  }
  const families = ([4, 6] as const).filter((f) => (f === 4 ? may.nft4 : may.nft6));
  if (families.length) {
    try {
      const tx = new NftBatch(opts);
      for (const f of families) {
        for (const r of nftOwnRules(f, containerID, opts))
          tx.deleteRule(nftFamily(f), HOSTPORT_NFT_TABLE, r.chain, r.handle);
      }
      tx.commit();
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsNFTables(opts)) errors.push(e);
    }
  }
  if (errors.length) throw new PortMapError(errors);
}

/**
 * Garbage-collect the iptables forwarding of one network: `CNI-DN-<hash>` chains are attributed to a
 * (network, containerID) through the `dnat name: "<net>" id: "<id>"` comment of the CNI-HOSTPORT-DNAT jumps to
 * them (checked against the chain-name hash); those of this network whose container is not valid are removed
 * with their jumps. nft rules carry only the container ID (the reference's format), so they cannot be
 * attributed to a network and are left to DEL.
 */
export function gcPortMap(
  network: string,
  validContainerIDs: ReadonlySet<string>,
  opts: ToolOptions = {},
): void {
  const errors: unknown[] = [];
  for (const family of [4, 6] as const) {
    try {
      const nat = readTable(family, 'nat', opts);
      const stale = new Set<string>();
      for (const r of nat.rules) {
        if (r.chain !== HOSTPORT_DNAT_CHAIN) continue;
        const target = ruleTarget(r);
        // `dnat name: "%s" id: "%s"` (names and IDs cannot contain quotes)
        const m = /^dnat name: "(.*)" id: "(.*)"$/.exec(ruleComment(r) ?? '');
        if (!target || !m) continue;
        const [, net = '', id = ''] = m;
        if (net !== network || validContainerIDs.has(id) || dnatChainName(net, id) !== target) continue;
        stale.add(target);
      }
      if (stale.size === 0) continue;
      const b = new IptablesBatch(family, opts);
      b.deleteRulesWhere('nat', HOSTPORT_DNAT_CHAIN, (r) => stale.has(ruleTarget(r) ?? ''));
      for (const c of stale) b.deleteChain('nat', c);
      b.commit();
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsIPTables(family, opts)) errors.push(e);
    }
  }
  if (errors.length) throw new PortMapError(errors);
}
