/**
 * Benchmark: whole plugin chains as a runtime runs them (each plugin exec'd with CNI_* env and the config on stdin,
 * prevResult passed along on ADD, DEL in reverse order with the final result), cnikit (dist-bin/) vs the Go
 * reference plugins (/usr/lib/cni), alternating, inside private namespaces (this process's main thread moves into a
 * private "host" namespace; nothing touches the machine's own namespace).
 *
 *   node --conditions=cnikit-source --import tsx bench/chain.ts [--runs=20] [--json] [--detail] [--chain=NAME]
 *     [--before=DIR]   (another cnikit build, e.g. of an earlier tree, in the same alternating rounds)
 *
 * Chains:
 *   kubelet: bridge (ipMasq) + host-local, tuning, portmap, bandwidth
 *   podman:  bridge (ipMasq) + host-local, portmap, firewall, tuning
 * Reported: median and p90 wall time of the whole chain ADD and DEL, and the ours/Go ratio.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { printRows, quantile, type SideBySideRow, sideBySide } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const JSON_OUT = process.argv.includes('--json');
const DETAIL = process.argv.includes('--detail');
/** --detail: per-plugin exec times, keyed `impl chain cmd type`. */
const detail = new Map<string, number[]>();
const BEFORE = arg('before', '');
const ONLY = arg('chain', '');
const IMPLS = [
  { name: 'cnikit', dir: join(ROOT, 'dist-bin') },
  ...(BEFORE ? [{ name: 'before', dir: BEFORE }] : []),
  { name: 'go', dir: '/usr/lib/cni' },
];
const implOf = (dir: string) => IMPLS.find((i) => i.dir === dir)?.name ?? dir;

type Conf = Record<string, unknown>;
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-chain-'));
const bridge = (impl: string): Conf => ({
  type: 'bridge',
  bridge: 'cnibench0',
  isGateway: true,
  ipMasq: true,
  ipam: {
    type: 'host-local',
    ranges: [[{ subnet: '10.77.0.0/16' }]],
    dataDir: join(scratch, `ipam-${impl}`),
  },
});
const portmap: Conf = {
  type: 'portmap',
  capabilities: { portMappings: true },
  runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: 'tcp' }] },
};
const tuning = (impl: string): Conf => ({
  type: 'tuning',
  dataDir: join(scratch, `tuning-${impl}`),
  mtu: 1400,
  sysctl: { 'net.ipv4.conf.eth0.arp_ignore': '1' },
});
const bandwidth: Conf = {
  type: 'bandwidth',
  ingressRate: 100_000_000,
  ingressBurst: 1_000_000,
  egressRate: 100_000_000,
  egressBurst: 1_000_000,
};
const firewall: Conf = { type: 'firewall', backend: 'iptables' };
const CHAINS: Record<string, (impl: string) => Conf[]> = {
  kubelet: (impl) => [bridge(impl), tuning(impl), portmap, bandwidth],
  podman: (impl) => [bridge(impl), portmap, firewall, tuning(impl)],
};

function missing(dir: string, chain: string): string | undefined {
  return CHAINS[chain]?.('x')
    .map((p) => join(dir, p.type as string))
    .find((b) => !existsSync(b));
}

const sb = createSandbox();
const inHost = enterNetns(sb.host.path);
try {
  const exec = (dir: string, cmd: 'ADD' | 'DEL', conf: Conf): unknown => {
    const t0 = process.hrtime.bigint();
    const r = spawnSync(join(dir, conf.type as string), [], {
      env: {
        CNI_COMMAND: cmd,
        CNI_CONTAINERID: 'bench-chain',
        CNI_NETNS: sb.container.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH: dir,
        PATH: process.env.PATH,
      },
      input: JSON.stringify(conf),
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`${dir}/${conf.type} ${cmd} failed: ${r.stdout}${r.stderr}`);
    const key = `${implOf(dir)} ${conf.name} ${cmd} ${conf.type}`;
    detail.set(key, [...(detail.get(key) ?? []), Number(process.hrtime.bigint() - t0) / 1e6]);
    return r.stdout ? JSON.parse(r.stdout) : undefined;
  };
  const run = (dir: string, plugins: Conf[], name: string): { add: number; del: number } => {
    const head = { cniVersion: '1.0.0', name };
    let t0 = process.hrtime.bigint();
    let prev: unknown;
    for (const p of plugins)
      prev = exec(dir, 'ADD', { ...head, ...p, ...(prev ? { prevResult: prev } : {}) });
    const add = Number(process.hrtime.bigint() - t0) / 1e6;
    t0 = process.hrtime.bigint();
    for (const p of [...plugins].reverse()) exec(dir, 'DEL', { ...head, ...p, prevResult: prev });
    const del = Number(process.hrtime.bigint() - t0) / 1e6;
    return { add, del };
  };
  const rows: SideBySideRow[] = [];
  const load0 = loadavg();
  for (const chain of Object.keys(CHAINS).filter((c) => !ONLY || c === ONLY)) {
    const gone = IMPLS.map((i) => missing(i.dir, chain)).filter(Boolean);
    if (gone.length) {
      console.error(
        `chain ${chain}: missing ${gone.join(', ')} (npm run build / apt-get install containernetworking-plugins)`,
      );
      continue;
    }
    const t: Record<string, { add: number[]; del: number[] }> = {};
    for (const i of IMPLS) t[i.name] = { add: [], del: [] };
    for (let n = 0; n < 2; n++) for (const i of IMPLS) run(i.dir, CHAINS[chain]!(i.name), `bench-${chain}`);
    for (let n = 0; n < RUNS; n++) {
      for (const i of n % 2 ? [...IMPLS].reverse() : IMPLS) {
        const r = run(i.dir, CHAINS[chain]!(i.name), `bench-${chain}`);
        t[i.name]!.add.push(r.add);
        t[i.name]!.del.push(r.del);
      }
    }
    for (const op of ['add', 'del'] as const) {
      rows.push(sideBySide(`${chain} chain ${op.toUpperCase()}`, t.cnikit![op], t.go![op]));
      if (BEFORE)
        rows.push(sideBySide(`${chain} chain ${op.toUpperCase()} (--before)`, t.before![op], t.go![op]));
    }
  }
  const la = (l: number[]) => l.map((x) => x.toFixed(1)).join(' / ');
  printRows(
    `plugin chains exec'd like a runtime, ${RUNS} runs each, medians (p90); load average ${la(load0)} → ${la(loadavg())}:`,
    rows,
    JSON_OUT,
  );
  if (DETAIL)
    for (const [k, xs] of detail) console.log(`  ${k.padEnd(40)} ${quantile(xs, 0.5).toFixed(1)} ms`);
} finally {
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
