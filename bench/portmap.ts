/**
 * Benchmark: portmap ADD and DEL (iptables backend, 2 mappings, snat), cnikit (dist-bin/portmap) vs the Go reference
 * (/usr/lib/cni/portmap), side by side, with 1 and with `--preload` containers already mapped (the reference's cost
 * grows with the table). Everything runs in a private network namespace that this process's main thread enters.
 *
 *   node --conditions=cnikit-source --import tsx bench/portmap.ts [--runs=20] [--preload=200] [--json]
 *
 * Reported: median and p90 wall time per exec and the ours/Go ratio. Requires `npm run build` and root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { setns } from '@cnikit/sys';
import { quantile } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const PRELOAD = Number(arg('preload', '200'));
const JSON_OUT = process.argv.includes('--json');
const impls = [
  { name: 'cnikit', bin: join(ROOT, 'dist-bin', 'portmap'), net: 'bench-ts', base: 10 },
  { name: 'go', bin: '/usr/lib/cni/portmap', net: 'bench-go', base: 20 },
];
for (const i of impls) {
  if (!existsSync(i.bin)) {
    console.error(
      `missing ${i.bin}${i.name === 'cnikit' ? ' (run npm run build)' : ' (apt-get install containernetworking-plugins)'}`,
    );
    process.exit(1);
  }
}

const conf = (impl: (typeof impls)[number], n: number) =>
  JSON.stringify({
    cniVersion: '0.4.0',
    name: impl.net,
    type: 'portmap',
    runtimeConfig: {
      portMappings: [
        { hostPort: 10000 + impl.base * 1000 + n * 2, containerPort: 80, protocol: 'tcp' },
        { hostPort: 10001 + impl.base * 1000 + n * 2, containerPort: 53, protocol: 'udp' },
      ],
    },
    prevResult: {
      cniVersion: '0.4.0',
      interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
      ips: [{ version: '4', address: `10.${impl.base}.${n >> 8}.${(n % 250) + 2}/16`, interface: 0 }],
    },
  });

function call(impl: (typeof impls)[number], cmd: 'ADD' | 'DEL', n: number): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(impl.bin, [], {
    env: {
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: `c${n}`,
      CNI_NETNS: '/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      PATH: process.env.PATH,
    },
    input: conf(impl, n),
    encoding: 'utf8',
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${impl.name} ${cmd} failed: ${r.stdout}${r.stderr}`);
  return ms;
}

const ns = `cnikit-bench-pm-${process.pid}`;
execFileSync('ip', ['netns', 'add', ns]);
const orig = openSync('/proc/thread-self/ns/net', 'r');
const fd = openSync(`/run/netns/${ns}`, 'r');
setns(fd);
closeSync(fd);
const q = quantile;
const rows: Array<Record<string, number | string>> = [];
try {
  let loaded = 0;
  for (const target of [1, PRELOAD]) {
    for (; loaded < target; loaded++) for (const i of impls) call(i, 'ADD', loaded);
    const t: Record<string, { ADD: number[]; DEL: number[] }> = {
      cnikit: { ADD: [], DEL: [] },
      go: { ADD: [], DEL: [] },
    };
    for (let n = 0; n < RUNS + 2; n++) {
      for (const i of n % 2 ? [...impls].reverse() : impls) {
        const a = call(i, 'ADD', 400 + n);
        const d = call(i, 'DEL', 400 + n);
        if (n >= 2) {
          t[i.name]?.ADD.push(a);
          t[i.name]?.DEL.push(d);
        }
      }
    }
    for (const cmd of ['ADD', 'DEL'] as const) {
      const ours = t.cnikit?.[cmd] ?? [];
      const go = t.go?.[cmd] ?? [];
      rows.push({
        op: `portmap ${cmd}, ${target} mapped`,
        cnikit: q(ours, 0.5),
        cnikitP90: q(ours, 0.9),
        go: q(go, 0.5),
        goP90: q(go, 0.9),
        ratio: q(ours, 0.5) / q(go, 0.5),
      });
    }
  }
} finally {
  setns(orig);
  closeSync(orig);
  spawnSync('ip', ['netns', 'del', ns]);
}
if (JSON_OUT) console.log(JSON.stringify(rows));
else {
  console.log(`portmap (iptables, 2 mappings, snat), ${RUNS} runs each, medians (p90):`);
  for (const r of rows) {
    const f = (x: unknown) => (x as number).toFixed(1);
    console.log(
      `  ${String(r.op).padEnd(28)} cnikit ${f(r.cnikit)} ms (${f(r.cnikitP90)})   go ${f(r.go)} ms (${f(r.goP90)})   ratio ${(r.ratio as number).toFixed(2)}×`,
    );
  }
}
