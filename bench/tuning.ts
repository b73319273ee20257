/**
 * Benchmark: tuning ADD and DEL (two sysctls + mtu + mac + promisc), cnikit (dist-bin/tuning) vs the Go reference
 * (/usr/lib/cni/tuning), side by side, alternating calls, in private namespaces (a container namespace with a
 * veth `eth0`; nothing touches the machine's own namespace).
 *
 *   node --conditions=cnikit-source --import tsx bench/tuning.ts [--runs=30] [--json]
 *
 * Reported: median and p90 wall time per exec and the ours/Go ratio. Requires `npm run build` and root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { printRows, sideBySide, timedExec } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '30'));
const JSON_OUT = process.argv.includes('--json');
const impls = [
  { name: 'cnikit', bin: join(ROOT, 'dist-bin', 'tuning') },
  { name: 'go', bin: '/usr/lib/cni/tuning' },
];
for (const i of impls) {
  if (!existsSync(i.bin)) {
    console.error(
      `missing ${i.bin}${i.name === 'cnikit' ? ' (run npm run build)' : ' (apt-get install containernetworking-plugins)'}`,
    );
    process.exit(1);
  }
}

const ns = `cnikit-bench-tuning-${process.pid}`;
const dataDir = mkdtempSync(join(tmpdir(), 'cnikit-bench-tuning-'));
execFileSync('ip', ['netns', 'add', ns]);
try {
  execFileSync('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0']);
  execFileSync('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench-tuning',
    type: 'tuning',
    dataDir,
    mtu: 1400,
    mac: 'c2:00:00:00:be:01',
    promisc: true,
    sysctl: { 'net.ipv4.conf.eth0.arp_ignore': '1', 'net.ipv4.conf.all.log_martians': '1' },
    prevResult: { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: `/run/netns/${ns}` }] },
  });
  const call = (bin: string, cmd: 'ADD' | 'DEL'): number =>
    timedExec(
      bin,
      {
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: 'bench',
        CNI_NETNS: `/run/netns/${ns}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
      },
      conf,
    );
  const times: Record<string, { ADD: number[]; DEL: number[] }> = {};
  for (const i of impls) times[i.name] = { ADD: [], DEL: [] };
  for (let n = 0; n < 3; n++) for (const i of impls) call(i.bin, 'ADD') + call(i.bin, 'DEL'); // warm-up
  for (let n = 0; n < RUNS; n++) {
    for (const i of n % 2 ? [...impls].reverse() : impls) {
      times[i.name]?.ADD.push(call(i.bin, 'ADD'));
      times[i.name]?.DEL.push(call(i.bin, 'DEL'));
    }
  }
  printRows(
    `tuning (sysctl ×2 + mtu + mac + promisc), ${RUNS} runs each, medians (p90):`,
    (['ADD', 'DEL'] as const).map((cmd) =>
      sideBySide(`tuning ${cmd}`, times.cnikit?.[cmd] ?? [], times.go?.[cmd] ?? []),
    ),
    JSON_OUT,
  );
} finally {
  spawnSync('ip', ['netns', 'del', ns]);
  rmSync(dataDir, { recursive: true, force: true });
}
