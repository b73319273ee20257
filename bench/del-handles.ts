// DEL of bridge ipMasq and portmap (iptables-nft) with and without the jump record of packages/firewall/src/handles.ts,
// at 0 and N pods kept in a private namespace (each pod: a POSTROUTING jump to its masquerade chain, two
// CNI-HOSTPORT-DNAT jumps to its portmap chain). Per round and level, alternating in random order:
//   new — the probe pod's ADD left its record: DEL fetches its rules by handle (no chain listed);
//   old — the record is removed before DEL: DEL lists POSTROUTING / CNI-HOSTPORT-DNAT as before this change.
// Figures: in-process teardownIPMasq / portmap teardown (what bridge and portmap DEL call), CPU of this process and
// wall; and the compiled portmap DEL (cold, through bench/lib/launcher.ts: wall and wait4 CPU). Medians.
// The records go to a directory under os.tmpdir() (CNIKIT_NFT_HANDLES_DIR): on this machine the same ext4 as /run.
//   node --conditions=cnikit-source --import tsx bench/del-handles.ts [--rounds=30] [--pods=250]
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forgetJumps, formatChainName, rememberJumps, setupIPMasq, teardownIPMasq } from '@cnikit/firewall';
import { setns } from '@cnikit/sys';
import { createSandbox } from '@cnikit/testing';
import { dnatChainName, iptables } from '../plugins/portmap/src/iptables.ts';
import type { PortMapArgs } from '../plugins/portmap/src/mapping.ts';
import { compileLauncher } from './lib/launcher.ts';
import { median } from './lib/side-by-side.ts';

const arg = (k: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d);
const ROUNDS = arg('rounds', 30);
const PODS = arg('pods', 250);
const BIN = join(import.meta.dirname, '..', 'dist-bin', 'portmap');
if (!existsSync(BIN)) throw new Error(`${BIN} missing: npm run build`);

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-delhandles-bench-'));
process.env.CNIKIT_NFT_HANDLES_DIR = join(tmp, 'handles');
const launch = compileLauncher(tmp);
const sb = createSandbox({ prefix: 'cnikit-delhandles-bench' });
const ns = { netns: sb.host.path };
const NET = 'benchnet';

const ip = (i: number) => `10.${70 + (i >> 16)}.${(i >> 8) & 255}.${(i & 255) + 0}`;
const masq = (i: number) => ({ ips: [`${ip(i)}/16`], network: NET, ifName: 'eth0', containerID: `pod${i}` });
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
const rows = () => ({ new: { cpu: [], wall: [] }, old: { cpu: [], wall: [] } }) as Row;
const results = new Map<string, Row>();
const push = (k: string, v: 'new' | 'old', m: { cpu: number; wall: number }) => {
  if (!results.has(k)) results.set(k, rows());
  results.get(k)![v].cpu.push(m.cpu);
  results.get(k)![v].wall.push(m.wall);
};

const orig = openSync('/proc/thread-self/ns/net', 'r');
const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim();
let filled = 0;
try {
  for (const level of [0, PODS]) {
    for (; filled < level; filled++) {
      setupIPMasq({ backend: 'iptables', ...masq(filled), ...ns });
      iptables.setup({ ...pm(filled), ...ns }, 4);
    }
    for (let r = 0; r < ROUNDS; r++) {
      const order: Array<'new' | 'old'> = Math.random() < 0.5 ? ['new', 'old'] : ['old', 'new'];
      for (const v of order) {
        // what the record costs an ADD: writing it (both variants write it; timed here on its own)
        if (v === 'new')
          push(
            `record write at ADD, ${level} pods`,
            v,
            measure(() =>
              rememberJumps(
                4,
                'nat',
                'CNI-BENCH-RECORD',
                [
                  {
                    table: 'nat',
                    chain: 'POSTROUTING',
                    target: 'CNI-BENCH-RECORD',
                    handle: '0000000000000123',
                  },
                ],
                ns,
              ),
            ),
          );
        // bridge ipMasq DEL (in process)
        setupIPMasq({ backend: 'iptables', ...masq(PROBE), ...ns });
        if (v === 'old') forgetJumps(4, 'nat', formatChainName(NET, `pod${PROBE}`), ns);
        push(
          `ipMasq DEL, in process, ${level} pods`,
          v,
          measure(() => teardownIPMasq({ ...masq(PROBE), ...ns })),
        );
        // portmap DEL (in process)
        iptables.setup({ ...pm(PROBE), ...ns }, 4);
        if (v === 'old') forgetJumps(4, 'nat', dnatChainName(NET, `pod${PROBE}`), ns);
        push(
          `portmap DEL, in process, ${level} pods`,
          v,
          measure(() => {
            const e = iptables.teardown(NET, `pod${PROBE}`, ns);
            if (e.length) throw new Error(String(e));
          }),
        );
        // portmap DEL (compiled, cold), run in the sandbox's host namespace
        iptables.setup({ ...pm(PROBE), ...ns }, 4);
        if (v === 'old') forgetJumps(4, 'nat', dnatChainName(NET, `pod${PROBE}`), ns);
        const fd = openSync(sb.host.path, 'r');
        setns(fd);
        closeSync(fd);
        let out: { ms: number; cpuMs: number };
        try {
          out = launch(
            BIN,
            {
              PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
              CNIKIT_NFT_HANDLES_DIR: process.env.CNIKIT_NFT_HANDLES_DIR!,
              CNI_COMMAND: 'DEL',
              CNI_CONTAINERID: `pod${PROBE}`,
              CNI_NETNS: '/run/netns/none',
              CNI_IFNAME: 'eth0',
              CNI_PATH: join(import.meta.dirname, '..', 'dist-bin'),
            },
            pmConf(PROBE),
          );
        } finally {
          setns(orig);
        }
        push(`portmap DEL, compiled (cold), ${level} pods`, v, { cpu: out.cpuMs, wall: out.ms });
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
  if (r.old.cpu.length === 0) {
    console.log(
      `${k.padEnd(44)} ${median(r.new.cpu).toFixed(2).padStart(8)} ${''.padStart(15)} ${median(r.new.wall).toFixed(2).padStart(16)}`,
    );
    continue;
  }
  const nc = median(r.new.cpu);
  const oc = median(r.old.cpu);
  const nw = median(r.new.wall);
  const ow = median(r.old.wall);
  console.log(
    `${k.padEnd(44)} ${nc.toFixed(2).padStart(8)} ${oc.toFixed(2).padStart(8)} ${(nc / oc).toFixed(2).padStart(6)} ${nw.toFixed(2).padStart(9)} ${ow.toFixed(2).padStart(9)} ${(nw / ow).toFixed(2).padStart(6)}`,
  );
}
