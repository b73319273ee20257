/**
 * portmap's iptables backend (table nat, ONE iptables-save + at most ONE iptables-restore per family per call; the
 * reference makes a `-C` + `-A`/`-I` exec per rule):
 *   CNI-HOSTPORT-SETMARK   -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
 *   CNI-HOSTPORT-MASQ      -m mark --mark 0x2000/0x2000 -j MASQUERADE   (POSTROUTING position 1 jumps here)
 *   CNI-HOSTPORT-DNAT      entry from PREROUTING and OUTPUT: -m addrtype --dst-type LOCAL
 *     → per protocol and group of ≤ 15 host ports: -m comment --comment "dnat name: …" -m multiport -p P
 *       --destination-ports a,b [conditions] -j CNI-DN-<hash>
 *   CNI-DN-<hash>          per mapping: [-s <container net> -j SETMARK] [-s 127.0.0.1 -j SETMARK] -j DNAT
 *
 * Unlike the reference: a re-ADD replaces the container's rules instead of adding to them; teardown needs no
 * mappings (the chain is found by name, the CNI-HOSTPORT-DNAT jumps to it by target).
 */
import {
  forgetJumps,
  formatChainNameWithPrefix,
  hasRule,
  type IPFamily,
  IptablesBatch,
  natChainsInPlace,
  natChainsMayExist,
  parseCidr,
  probeKernel,
  readTable,
  rememberJumps,
  removeJumpChainsFast,
  ruleComment,
  ruleTarget,
  type SavedTable,
  supportsIPTables,
  ToolNotFoundError,
  type ToolOptions,
} from '@cnikit/firewall';
import {
  hostPortText,
  type PortMapArgs,
  type PortMapBackend,
  PortMapError,
  sameFamily,
  unspecified,
} from './mapping.ts';

export const HOSTPORT_DNAT_CHAIN = 'CNI-HOSTPORT-DNAT';
export const HOSTPORT_SETMARK_CHAIN = 'CNI-HOSTPORT-SETMARK';
export const HOSTPORT_MASQ_CHAIN = 'CNI-HOSTPORT-MASQ';
export const OLD_HOSTPORT_SNAT_CHAIN = 'CNI-HOSTPORT-SNAT';

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

/**
 * The shared chains and jumps every container's forwarding relies on are in place already (the usual case after
 * the first container): CNI-HOSTPORT-SETMARK and CNI-HOSTPORT-MASQ with their one rule each, POSTROUTING jumping to
 * CNI-HOSTPORT-MASQ (when `snat`), PREROUTING and OUTPUT jumping to CNI-HOSTPORT-DNAT. Told from one nfnetlink dump
 * of each of those chains: the per-call work then does not depend on how many containers have rules in the table.
 */
function sharedChainsInPlace(a: PortMapArgs, family: IPFamily): boolean {
  const masq = a.snat && a.externalSetMarkChain === undefined;
  return natChainsInPlace(
    family,
    'nat',
    [
      ...(masq
        ? [
            { chain: HOSTPORT_SETMARK_CHAIN, rules: 1 },
            { chain: HOSTPORT_MASQ_CHAIN, rules: 1 },
            { chain: 'POSTROUTING', jumpsTo: [HOSTPORT_MASQ_CHAIN] },
          ]
        : []),
      { chain: 'PREROUTING', jumpsTo: [HOSTPORT_DNAT_CHAIN] },
      { chain: 'OUTPUT', jumpsTo: [HOSTPORT_DNAT_CHAIN] },
    ],
    a,
  );
}

function setupIptables(a: PortMapArgs, family: IPFamily): void {
  const b = new IptablesBatch(family, a);
  const needShared = !sharedChainsInPlace(a, family);
  if (needShared && a.snat && a.externalSetMarkChain === undefined) {
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
  if (needShared)
    for (const entry of ['PREROUTING', 'OUTPUT']) {
      b.appendUnique('nat', entry, ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', HOSTPORT_DNAT_CHAIN]);
    }
  const d = iptablesDnatRules(a);
  // a re-ADD replaces the container's rules (the reference keeps stale ones)
  b.deleteRulesWhere('nat', HOSTPORT_DNAT_CHAIN, (r) => ruleTarget(r) === d.chain, d.chain);
  b.flushChain('nat', d.chain, { create: true });
  for (const r of d.rules) b.append('nat', d.chain, r);
  for (const r of d.entryRules) b.append('nat', HOSTPORT_DNAT_CHAIN, r);
  // the handles of the CNI-HOSTPORT-DNAT jumps, when nf_tables told them: DEL deletes them without listing the chain
  rememberJumps(family, 'nat', d.chain, b.commit().created, a);
}

/** Go's `%v` of a [][]string. */
const goRules = (rules: string[][]) => `[${rules.map((r) => `[${r.join(' ')}]`).join(' ')}]`;

/** CHECK of one container address with the reference's messages (throws Error). */
function check(a: PortMapArgs, family: IPFamily): void {
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
}

/** Remove the container's CNI-DN (and legacy CNI-SN) chain and the jumps to it, in every family where they may exist. */
function teardown(network: string, containerID: string, opts: ToolOptions): unknown[] {
  const errors: unknown[] = [];
  const dn = dnatChainName(network, containerID);
  const sn = oldSnatChainName(network, containerID);
  const may = probeKernel(
    opts,
    () => ({ ipt4: natChainsMayExist(4, [dn, sn]), ipt6: natChainsMayExist(6, [dn, sn]) }),
    { ipt4: true, ipt6: true },
  );
  for (const family of [4, 6] as const) {
    if (!(family === 4 ? may.ipt4 : may.ipt6)) {
      forgetJumps(family, 'nat', dn, opts); // left by a DEL killed after its transaction
      continue;
    }
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
  return errors;
}

export const iptables: PortMapBackend = { setup: setupIptables, check, teardown };

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
      for (const c of stale) forgetJumps(family, 'nat', c, opts);
    } catch (e) {
      if (!(e instanceof ToolNotFoundError) && supportsIPTables(family, opts)) errors.push(e);
    }
  }
  if (errors.length) throw new PortMapError(errors);
}
