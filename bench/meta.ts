/**
 * Benchmark: the chained plugins that work in the runtime's namespace — bandwidth (ingress TBF + egress IFB,
 * ingress qdisc, u32 redirect, TBF) and firewall (iptables backend, one IPv4 + one IPv6 address) — ADD and DEL,
 * cnikit (dist-bin/) vs the Go reference (/usr/lib/cni), side by side, alternating calls, in private namespaces:
 * this process's main thread moves into a private "host" namespace, so the executables are spawned there directly
 * (no `ip netns exec` in the measured path); the container namespace holds the veth peer.
 *
 *   node --conditions=cnikit-source --import tsx bench/meta.ts [--runs=30] [--only=bandwidth|firewall] [--json]
 *
 * Reported: median and p90 wall time per exec and the ours/Go ratio. Requires `npm run build` and root.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns, type Sandbox } from '@cnikit/testing';
import { printRows, type SideBySideRow, sideBySide, timedExec } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '30'));
const ONLY = arg('only', '');
const JSON_OUT = process.argv.includes('--json');
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-meta-'));

interface Case {
  plugin: string;
  extra: Record<string, unknown>;
  /** Between rounds, outside the timing: what DEL leaves on purpose. */
  reset(sb: Sandbox): void;
}
const CASES: Case[] = [
  {
    plugin: 'bandwidth',
    extra: {
      ingressRate: 100_000_000,
      ingressBurst: 1_000_000,
      egressRate: 100_000_000,
      egressBurst: 1_000_000,
    },
    // DEL leaves the host veth's qdiscs (like the reference: they go with the veth)
    reset: (sb) => {
      sb.exec('tc', ['qdisc', 'del', 'dev', 'hv0', 'root'], { check: false });
      sb.exec('tc', ['qdisc', 'del', 'dev', 'hv0', 'ingress'], { check: false });
    },
  },
  {
    plugin: 'firewall',
    extra: { backend: 'iptables', dataDir: join(scratch, 'firewall') },
    reset: () => undefined, // the shared chains stay, as they would on a node
  },
];

const sb = createSandbox();
const inHost = enterNetns(sb.host.path);
try {
  sb.exec('ip', ['link', 'add', 'hv0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', sb.container.name]);
  sb.exec('ip', ['link', 'set', 'hv0', 'up']);
  const rows: SideBySideRow[] = [];
  for (const c of CASES) {
    if (ONLY && c.plugin !== ONLY) continue;
    const impls = [
      { name: 'cnikit', bin: join(ROOT, 'dist-bin', c.plugin) },
      { name: 'go', bin: `/usr/lib/cni/${c.plugin}` },
    ];
    const gone = impls.filter((i) => !existsSync(i.bin)).map((i) => i.bin);
    if (gone.length) {
      console.error(
        `missing ${gone.join(', ')} (npm run build / apt-get install containernetworking-plugins)`,
      );
      process.exitCode = 1;
      continue;
    }
    const conf = JSON.stringify({
      cniVersion: '1.0.0',
      name: `bench-${c.plugin}`,
      type: c.plugin,
      ...c.extra,
      prevResult: {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'hv0' }, { name: 'eth0', sandbox: sb.container.path }],
        ips: [
          { address: '10.1.2.2/24', interface: 1 },
          { address: 'fd00:1::2/64', interface: 1 },
        ],
      },
    });
    const call = (bin: string, cmd: 'ADD' | 'DEL'): number =>
      timedExec(
        bin,
        {
          CNI_COMMAND: cmd,
          CNI_CONTAINERID: 'bench',
          CNI_NETNS: sb.container.path,
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/usr/lib/cni',
        },
        conf,
      );
    const times: Record<string, { ADD: number[]; DEL: number[] }> = {};
    for (const i of impls) times[i.name] = { ADD: [], DEL: [] };
    for (let n = 0; n < RUNS + 3; n++) {
      for (const i of n % 2 ? [...impls].reverse() : impls) {
        const add = call(i.bin, 'ADD');
        const del = call(i.bin, 'DEL');
        c.reset(sb);
        if (n < 3) continue; // warm-up
        times[i.name]?.ADD.push(add);
        times[i.name]?.DEL.push(del);
      }
    }
    for (const cmd of ['ADD', 'DEL'] as const)
      rows.push(sideBySide(`${c.plugin} ${cmd}`, times.cnikit?.[cmd] ?? [], times.go?.[cmd] ?? []));
  }
  printRows(`bandwidth and firewall, ${RUNS} runs each, medians (p90):`, rows, JSON_OUT);
} finally {
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
