// ADD and DEL of the bridge plugin's MAC spoof check (`macspoofchk`: table bridge nat, a PREROUTING jump and two
// chains per port) with and without its rule records, at 0 and N ports kept in a private namespace; and portmap
// `backend: nftables` DEL of a v4-only pod while the ip6 cni_hostport table holds N v6 pods, with and without the
// ADD's record of no ip6 rules. Per round and level, alternating in random order:
//   new — the probe's record is there (spoof DEL: one GETRULE by handle + one nfnetlink transaction, no nft process;
//         re-ADD: the earlier jump checked by handle, one `nft -f -`; portmap DEL: the ip6 table not asked for);
//   old — the record is marked pending (spoof check; as an ADD killed mid-way leaves it) or absent (portmap ip6: as
//         an ADD before this change left it), which takes the listing path (`nft -j list table` + `nft -f -`).
// In process (what the bridge and portmap plugins call): CPU of this process (nft children not included), wall, and
// the nft processes and nfnetlink rule dumps/GETs per call.
//   node --conditions=cnikit-source --import tsx bench/del-spoof.ts [--rounds=20] [--pods=250]
import { mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  markNftRulesPending,
  nftRulesRecordPath,
  setupSpoofCheck,
  teardownSpoofCheck,
} from '@cnikit/firewall';
import { execStats } from '@cnikit/firewall/testing';
import { nftRuleRequests } from '@cnikit/netlink/testing';
import { createSandbox } from '@cnikit/testing';
import type { PortMapArgs } from '../plugins/portmap/src/mapping.ts';
import { HOSTPORT_NFT_TABLE, nftables, recordUnusedFamilies } from '../plugins/portmap/src/nftables.ts';
import { median } from './lib/side-by-side.ts';

const arg = (k: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d);
const ROUNDS = arg('rounds', 20);
const PODS = arg('pods', 250);

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-delspoof-bench-'));
process.env.CNIKIT_NFT_HANDLES_DIR = join(tmp, 'handles');
const sb = createSandbox({ prefix: 'spoofdel-bench' });
const ns = { netns: sb.host.path };
const NET = 'benchnet';
const PROBE = 4000;

const mac = (i: number) =>
  `0a:58:${[(i >> 16) & 255, (i >> 8) & 255, i & 255, 7].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
const spoof = (i: number) => ({ iface: `vb${i}`, mac: mac(i), refID: `pod${i}-eth0`, ...ns });
const spoofComment = (i: number) => `macspoofchk-pod${i}-eth0`;
const pm = (i: number, v6: boolean): PortMapArgs => ({
  network: NET,
  containerID: `pod${i}`,
  containerIP: v6 ? `fd70::${i.toString(16)}/64` : `10.70.${(i >> 8) & 255}.${i & 255}/16`,
  mappings: [
    { hostPort: 10000 + i, containerPort: 80, protocol: 'tcp', hostIP: '' },
    { hostPort: 20000 + i, containerPort: 53, protocol: 'udp', hostIP: '' },
  ],
  snat: true,
  masqAll: false,
  markMasqBit: 13,
});

interface M {
  cpu: number;
  wall: number;
  execs: number;
  dumps: number;
  gets: number;
}
function measure(fn: () => void): M {
  const e0 = execStats.count;
  const d0 = nftRuleRequests.ruleDumps;
  const g0 = nftRuleRequests.ruleGets;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return {
    cpu: (c.user + c.system) / 1000,
    wall,
    execs: execStats.count - e0,
    dumps: nftRuleRequests.ruleDumps - d0,
    gets: nftRuleRequests.ruleGets - g0,
  };
}

type Row = Record<'new' | 'old', M[]>;
const results = new Map<string, Row>();
const push = (k: string, v: 'new' | 'old', m: M) => {
  if (!results.has(k)) results.set(k, { new: [], old: [] });
  results.get(k)![v].push(m);
};
const pendingSpoof = () => {
  if (!markNftRulesPending('bridge', 'nat', spoofComment(PROBE), ns)) throw new Error('record not written');
};
const ip6Record = () => nftRulesRecordPath('ip6', HOSTPORT_NFT_TABLE, `pod${PROBE}`, ns)!;

const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim();
let filled = 0;
try {
  for (const level of [0, PODS]) {
    for (; filled < level; filled++) {
      setupSpoofCheck(spoof(filled));
      nftables.setup({ ...pm(filled, true), ...ns }, 6);
    }
    // the ip6 table exists at level 0 too (one v6 pod beside): the old path lists it
    if (level === 0) nftables.setup({ ...pm(PROBE + 1, true), ...ns }, 6);
    for (let r = 0; r < ROUNDS; r++) {
      const order: Array<'new' | 'old'> = Math.random() < 0.5 ? ['new', 'old'] : ['old', 'new'];
      for (const v of order) {
        if (v === 'old') pendingSpoof();
        push(
          `spoof ADD, ${level} ports`,
          v,
          measure(() => setupSpoofCheck(spoof(PROBE))),
        );
        if (v === 'old') pendingSpoof();
        push(
          `spoof re-ADD, ${level} ports`,
          v,
          measure(() => setupSpoofCheck(spoof(PROBE))),
        );
        if (v === 'old') pendingSpoof();
        push(
          `spoof DEL, ${level} ports`,
          v,
          measure(() => teardownSpoofCheck(`pod${PROBE}-eth0`, ns)),
        );
        nftables.setup({ ...pm(PROBE, false), ...ns }, 4);
        sb.runInHost(() => recordUnusedFamilies({ containerID: `pod${PROBE}`, network: NET }, [4]));
        if (v === 'old') unlinkSync(ip6Record());
        push(
          `portmap v4 DEL, ${level} v6 pods`,
          v,
          measure(() => {
            const e = nftables.teardown(NET, `pod${PROBE}`, ns);
            if (e.length) throw new Error(String(e));
          }),
        );
      }
    }
  }
} finally {
  sb.destroy();
  rmSync(tmp, { recursive: true, force: true });
}
const loadAfter = readFileSync('/proc/loadavg', 'utf8').trim();

console.log(`${ROUNDS} rounds per level, levels 0 and ${PODS}; load ${loadBefore} → ${loadAfter}`);
console.log(
  `${'figure'.padEnd(30)} ${'new cpu'.padStart(8)} ${'old cpu'.padStart(8)} ${'new wall'.padStart(9)} ${'old wall'.padStart(9)} ${'ratio'.padStart(6)}  new/old: nft procs, rule dumps, GETRULEs (ms, medians)`,
);
const f = (x: number) => x.toFixed(2);
for (const [k, r] of results) {
  const med = (ms: M[], key: keyof M) => median(ms.map((m) => m[key]));
  const nw = med(r.new, 'wall');
  const ow = med(r.old, 'wall');
  console.log(
    `${k.padEnd(30)} ${f(med(r.new, 'cpu')).padStart(8)} ${f(med(r.old, 'cpu')).padStart(8)} ${f(nw).padStart(9)} ${f(ow).padStart(9)} ${(nw / ow).toFixed(2).padStart(6)}  ${med(r.new, 'execs')}/${med(r.old, 'execs')}, ${med(r.new, 'dumps')}/${med(r.old, 'dumps')}, ${med(r.new, 'gets')}/${med(r.old, 'gets')}`,
  );
}
