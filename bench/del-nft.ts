// ADD and DEL of the nftables backends (portmap `backend: nftables`, bridge ipMasq `ipMasqBackend: nftables`) with
// and without the rule records of packages/firewall/src/nftcommit.ts, at 0 and N pods kept in a private namespace
// (each pod: two dnat + two masquerade rules in `ip cni_hostport`, one rule in `inet cni_plugins_masquerade
// masq_checks`). Per round and level, alternating in random order:
//   new — the probe pod's record is there (DEL: GETRULE by handle + one nfnetlink transaction, no nft process; a
//         re-ADD: its earlier rules checked by handle, one `nft -f -`; a first ADD: no record, nothing listed);
//   old — the record is marked pending (as an ADD killed mid-way leaves it), which takes the listing path of the
//         code before this change (`nft -j list table|chain` + `nft -f -`).
// Figures: in process (what portmap and bridge call), CPU of this process (without the nft children) and wall; and
// the compiled portmap ADD/DEL (cold, through bench/lib/launcher.ts: wall and wait4 CPU, nft children included).
//   node --conditions=cnikit-source --import tsx bench/del-nft.ts [--rounds=20] [--pods=250]
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { markNftRulesPending, nftInstanceComment, setupIPMasq, teardownIPMasq } from '@cnikit/firewall';
import { setns } from '@cnikit/sys';
import { createSandbox } from '@cnikit/testing';
import type { PortMapArgs } from '../plugins/portmap/src/mapping.ts';
import { HOSTPORT_NFT_TABLE, nftables } from '../plugins/portmap/src/nftables.ts';
import { compileLauncher } from './lib/launcher.ts';
import { median } from './lib/side-by-side.ts';

const arg = (k: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d);
const ROUNDS = arg('rounds', 20);
const PODS = arg('pods', 250);
const BIN = join(import.meta.dirname, '..', 'dist-bin', 'portmap');
if (!existsSync(BIN)) throw new Error(`${BIN} missing: npm run build`);

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-delnft-bench-'));
process.env.CNIKIT_NFT_HANDLES_DIR = join(tmp, 'handles');
const launch = compileLauncher(tmp);
const sb = createSandbox({ prefix: 'nftbackend-bench' });
const ns = { netns: sb.host.path };
const NET = 'benchnet';

const ip = (i: number) => `10.${70 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
const masq = (i: number) => ({ ips: [`${ip(i)}/16`], network: NET, ifName: 'eth0', containerID: `pod${i}` });
const masqComment = (i: number) => nftInstanceComment(NET, 'eth0', `pod${i}`);
const pm = (i: number): PortMapArgs => ({
  network: NET,
  containerID: `pod${i}`,
  containerIP: `${ip(i)}/16`,
  mappings: [
    { hostPort: 10000 + i, containerPort: 80, protocol: 'tcp', hostIP: '' },
    { hostPort: 20000 + i, containerPort: 53, protocol: 'udp', hostIP: '' },
  ],
  snat: true,
  masqAll: false,
  markMasqBit: 13,
});
const pmConf = (i: number) =>
  JSON.stringify({
    cniVersion: '1.0.0',
    name: NET,
    type: 'portmap',
    backend: 'nftables',
    snat: true,
    runtimeConfig: { portMappings: pm(i).mappings },
    prevResult: {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
      ips: [{ address: pm(i).containerIP, interface: 0 }],
    },
  });
const PROBE = 4000;

function measure(fn: () => void): { cpu: number; wall: number } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { cpu: (c.user + c.system) / 1000, wall };
}

type Row = Record<'new' | 'old', { cpu: number[]; wall: number[] }>;
const results = new Map<string, Row>();
const push = (k: string, v: 'new' | 'old', m: { cpu: number; wall: number }) => {
  if (!results.has(k)) results.set(k, { new: { cpu: [], wall: [] }, old: { cpu: [], wall: [] } });
  results.get(k)![v].cpu.push(m.cpu);
  results.get(k)![v].wall.push(m.wall);
};
const pending = (comment: string, family: string, table: string) => {
  if (!markNftRulesPending(family, table, comment, ns)) throw new Error('record not written');
};

const orig = openSync('/proc/thread-self/ns/net', 'r');
function compiled(cmd: 'ADD' | 'DEL'): { cpu: number; wall: number } {
  const fd = openSync(sb.host.path, 'r');
  setns(fd);
  closeSync(fd);
  try {
    const out = launch(
      BIN,
      {
        PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
        CNIKIT_NFT_HANDLES_DIR: process.env.CNIKIT_NFT_HANDLES_DIR!,
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: `pod${PROBE}`,
        CNI_NETNS: '/run/netns/none',
        CNI_IFNAME: 'eth0',
        CNI_PATH: join(import.meta.dirname, '..', 'dist-bin'),
      },
      pmConf(PROBE),
    );
    return { cpu: out.cpuMs, wall: out.ms };
  } finally {
    setns(orig);
  }
}

const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim();
let filled = 0;
try {
  for (const level of [0, PODS]) {
    for (; filled < level; filled++) {
      setupIPMasq({ backend: 'nftables', ...masq(filled), ...ns });
      nftables.setup({ ...pm(filled), ...ns }, 4);
    }
    for (let r = 0; r < ROUNDS; r++) {
      const order: Array<'new' | 'old'> = Math.random() < 0.5 ? ['new', 'old'] : ['old', 'new'];
      for (const v of order) {
        // ipMasq (nftables): ADD (first: new has no record, old lists), re-ADD, DEL
        if (v === 'old') pending(masqComment(PROBE), 'inet', 'cni_plugins_masquerade');
        push(
          `ipMasq ADD, in process, ${level} pods`,
          v,
          measure(() => setupIPMasq({ backend: 'nftables', ...masq(PROBE), ...ns })),
        );
        if (v === 'old') pending(masqComment(PROBE), 'inet', 'cni_plugins_masquerade');
        push(
          `ipMasq re-ADD, in process, ${level} pods`,
          v,
          measure(() => setupIPMasq({ backend: 'nftables', ...masq(PROBE), ...ns })),
        );
        if (v === 'old') pending(masqComment(PROBE), 'inet', 'cni_plugins_masquerade');
        push(
          `ipMasq DEL, in process, ${level} pods`,
          v,
          measure(() => teardownIPMasq({ ...masq(PROBE), ...ns })),
        );
        // portmap (nftables), in process
        if (v === 'old') pending(`pod${PROBE}`, 'ip', HOSTPORT_NFT_TABLE);
        push(
          `portmap ADD, in process, ${level} pods`,
          v,
          measure(() => nftables.setup({ ...pm(PROBE), ...ns }, 4)),
        );
        if (v === 'old') pending(`pod${PROBE}`, 'ip', HOSTPORT_NFT_TABLE);
        push(
          `portmap DEL, in process, ${level} pods`,
          v,
          measure(() => {
            const e = nftables.teardown(NET, `pod${PROBE}`, ns);
            if (e.length) throw new Error(String(e));
          }),
        );
        // portmap (nftables), compiled, cold
        if (v === 'old') pending(`pod${PROBE}`, 'ip', HOSTPORT_NFT_TABLE);
        push(`portmap ADD, compiled (cold), ${level} pods`, v, compiled('ADD'));
        if (v === 'old') pending(`pod${PROBE}`, 'ip', HOSTPORT_NFT_TABLE);
        push(`portmap DEL, compiled (cold), ${level} pods`, v, compiled('DEL'));
      }
    }
  }
} finally {
  setns(orig);
  sb.destroy();
  rmSync(tmp, { recursive: true, force: true });
}
const loadAfter = readFileSync('/proc/loadavg', 'utf8').trim();

console.log(`${ROUNDS} rounds per level, levels 0 and ${PODS} pods; load ${loadBefore} → ${loadAfter}`);
console.log(
  `${'figure'.padEnd(44)} ${'new cpu'.padStart(8)} ${'old cpu'.padStart(8)} ${'ratio'.padStart(6)} ${'new wall'.padStart(9)} ${'old wall'.padStart(9)} ${'ratio'.padStart(6)}  (ms, medians)`,
);
for (const [k, r] of results) {
  const nc = median(r.new.cpu);
  const oc = median(r.old.cpu);
  const nw = median(r.new.wall);
  const ow = median(r.old.wall);
  console.log(
    `${k.padEnd(44)} ${nc.toFixed(2).padStart(8)} ${oc.toFixed(2).padStart(8)} ${(nc / oc).toFixed(2).padStart(6)} ${nw.toFixed(2).padStart(9)} ${ow.toFixed(2).padStart(9)} ${(nw / ow).toFixed(2).padStart(6)}`,
  );
}
