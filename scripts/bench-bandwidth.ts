/**
 * Benchmark: bandwidth ADD and DEL (ingress TBF + egress IFB/ingress qdisc/u32 redirect/TBF), cnikit
 * (dist-bin/bandwidth) vs the Go reference (/usr/lib/cni/bandwidth), side by side, alternating calls, in private
 * namespaces: this process's main thread moves into a private "host" namespace, so the executables are spawned
 * there directly (no `ip netns exec` in the measured path); the container namespace holds the veth peer.
 *
 *   node --import tsx scripts/bench-bandwidth.ts [--runs=30] [--json]
 *
 * Reported: median and p90 wall time per exec and the ours/Go ratio. Requires `npm run build` and root.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { printRows, sideBySide } from './side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '30'));
const JSON_OUT = process.argv.includes('--json');
const impls = [
  { name: 'cnikit', bin: join(ROOT, 'dist-bin', 'bandwidth') },
  { name: 'go', bin: '/usr/lib/cni/bandwidth' },
];
for (const i of impls) {
  if (!existsSync(i.bin)) {
    console.error(
      `missing ${i.bin}${i.name === 'cnikit' ? ' (run npm run build)' : ' (apt-get install containernetworking-plugins)'}`,
    );
    process.exit(1);
  }
}

const sb = createSandbox();
const inHost = enterNetns(sb.host.path);
try {
  sb.exec('ip', ['link', 'add', 'hv0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', sb.container.name]);
  sb.exec('ip', ['link', 'set', 'hv0', 'up']);
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench-bandwidth',
    type: 'bandwidth',
    ingressRate: 100_000_000,
    ingressBurst: 1_000_000,
    egressRate: 100_000_000,
    egressBurst: 1_000_000,
    prevResult: {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'hv0' }, { name: 'eth0', sandbox: sb.container.path }],
      ips: [{ address: '10.1.2.2/24', interface: 1 }],
    },
  });
  const call = (bin: string, cmd: 'ADD' | 'DEL'): number => {
    const t0 = process.hrtime.bigint();
    const r = spawnSync(bin, [], {
      env: {
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: 'bench',
        CNI_NETNS: sb.container.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
        PATH: process.env.PATH,
      },
      input: conf,
      encoding: 'utf8',
    });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r.status !== 0) throw new Error(`${bin} ${cmd} failed: ${r.stdout}${r.stderr}`);
    return ms;
  };
  // DEL leaves the host veth's qdiscs (like the reference); remove them between rounds, outside the timing
  const reset = () => {
    sb.exec('tc', ['qdisc', 'del', 'dev', 'hv0', 'root'], { check: false });
    sb.exec('tc', ['qdisc', 'del', 'dev', 'hv0', 'ingress'], { check: false });
  };
  const times: Record<string, { ADD: number[]; DEL: number[] }> = {};
  for (const i of impls) times[i.name] = { ADD: [], DEL: [] };
  for (let n = 0; n < 3; n++) {
    for (const i of impls) {
      call(i.bin, 'ADD');
      call(i.bin, 'DEL');
      reset();
    }
  }
  for (let n = 0; n < RUNS; n++) {
    for (const i of n % 2 ? [...impls].reverse() : impls) {
      times[i.name]?.ADD.push(call(i.bin, 'ADD'));
      times[i.name]?.DEL.push(call(i.bin, 'DEL'));
      reset();
    }
  }
  printRows(
    `bandwidth (ingress + egress shaping), ${RUNS} runs each, medians (p90):`,
    (['ADD', 'DEL'] as const).map((cmd) =>
      sideBySide(`bandwidth ${cmd}`, times.cnikit?.[cmd] ?? [], times.go?.[cmd] ?? []),
    ),
    JSON_OUT,
  );
} finally {
  inHost.restore();
  sb.destroy();
}
