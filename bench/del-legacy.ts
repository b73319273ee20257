// portmap and bridge ipMasq (iptables backend) on legacy x_tables (iptables-legacy*): ADD and DEL at 0 and N pods kept
// in a private namespace. There is no per-rule kernel interface there: every change is IPT_SO_GET_ENTRIES of the
// whole table, then IPT_SO_SET_REPLACE of the whole table (what iptables-legacy-restore does), so the cost of one
// pod's DEL grows with the table — this bench states by how much. The tools are the legacy ones through a PATH of
// symlinks (the `iptables` names → xtables-legacy-multi); cnikit sees the loaded x_tables nat table and takes its
// iptables-save / iptables-restore path. Figures: compiled portmap ADD/DEL (cold, wait4 CPU with the iptables
// children) and in-process ipMasq DEL (wall), medians, plus the size of `iptables-save -t nat`.
//   node --conditions=cnikit-source --import tsx bench/del-legacy.ts [--rounds=10] [--pods=250]
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setupIPMasq, teardownIPMasq } from '@cnikit/firewall';
import { setns } from '@cnikit/sys';
import { createSandbox } from '@cnikit/testing';
import { iptables } from '../plugins/portmap/src/iptables.ts';
import type { PortMapArgs } from '../plugins/portmap/src/mapping.ts';
import { compileLauncher } from './lib/launcher.ts';
import { median } from './lib/side-by-side.ts';

const arg = (k: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d);
const ROUNDS = arg('rounds', 10);
const PODS = arg('pods', 250);
const BIN = join(import.meta.dirname, '..', 'dist-bin', 'portmap');
if (!existsSync(BIN)) throw new Error(`${BIN} missing: npm run build`);

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-dellegacy-bench-'));
const legacyBin = join(tmp, 'bin');
mkdirSync(legacyBin);
for (const f of ['iptables', 'ip6tables'])
  for (const s of ['', '-save', '-restore'])
    symlinkSync(`/usr/sbin/${f}-legacy${s}`, join(legacyBin, `${f}${s}`));
process.env.PATH = `${legacyBin}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
process.env.CNIKIT_NFT_HANDLES_DIR = join(tmp, 'handles');
const launch = compileLauncher(tmp);
const sb = createSandbox({ prefix: 'nftbackend-legacy' });
const ns = { netns: sb.host.path };
const NET = 'benchnet';
const ip = (i: number) => `10.${70 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
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
    backend: 'iptables',
    snat: true,
    runtimeConfig: { portMappings: pm(i).mappings },
    prevResult: {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
      ips: [{ address: pm(i).containerIP, interface: 0 }],
    },
  });
const PROBE = 4000;
const orig = openSync('/proc/thread-self/ns/net', 'r');
function compiled(cmd: 'ADD' | 'DEL'): { cpu: number; wall: number } {
  const fd = openSync(sb.host.path, 'r');
  setns(fd);
  closeSync(fd);
  try {
    const out = launch(
      BIN,
      {
        PATH: process.env.PATH!,
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
const rows = new Map<string, { cpu: number[]; wall: number[] }>();
const push = (k: string, m: { cpu: number; wall: number }) => {
  if (!rows.has(k)) rows.set(k, { cpu: [], wall: [] });
  rows.get(k)!.cpu.push(m.cpu);
  rows.get(k)!.wall.push(m.wall);
};
const saveBytes = () => sb.exec('iptables-legacy-save', ['-t', 'nat']).stdout.length;

const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim();
let filled = 0;
const sizes: string[] = [];
try {
  for (const level of [0, PODS]) {
    for (; filled < level; filled++) {
      setupIPMasq({ backend: 'iptables', ...masq(filled), ...ns });
      iptables.setup({ ...pm(filled), ...ns }, 4);
    }
    const legacy = spawnSync('ip', ['netns', 'exec', sb.host.name, 'cat', '/proc/net/ip_tables_names'], {
      encoding: 'utf8',
    }).stdout;
    sizes.push(
      `${level} pods: iptables-save -t nat ${saveBytes()} bytes (x_tables loaded: ${legacy.trim().replace(/\n/g, ',') || 'none'})`,
    );
    for (let r = 0; r < ROUNDS; r++) {
      push(`portmap ADD, compiled (cold), ${level} pods`, compiled('ADD'));
      push(`portmap DEL, compiled (cold), ${level} pods`, compiled('DEL'));
      setupIPMasq({ backend: 'iptables', ...masq(PROBE), ...ns });
      const t0 = performance.now();
      teardownIPMasq({ ...masq(PROBE), ...ns });
      push(`ipMasq DEL, in process (wall), ${level} pods`, { cpu: Number.NaN, wall: performance.now() - t0 });
    }
  }
} finally {
  setns(orig);
  sb.destroy();
  rmSync(tmp, { recursive: true, force: true });
}
const loadAfter = readFileSync('/proc/loadavg', 'utf8').trim();
console.log(`legacy x_tables, ${ROUNDS} rounds per level; load ${loadBefore} → ${loadAfter}`);
for (const s of sizes) console.log(s);
for (const [k, r] of rows)
  console.log(
    `${k.padEnd(44)} cpu ${median(r.cpu).toFixed(2).padStart(8)}  wall ${median(r.wall).toFixed(2).padStart(8)}  (ms, medians)`,
  );
