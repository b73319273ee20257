/**
 * Benchmark: a whole bridge + host-local → tuning → portmap chain ADD and DEL through @cnikit/libcni, three ways:
 *   in-process   cnikit's plugin objects run in this process (CniConfig `plugins`; bridge → host-local too)
 *   exec         cnikit's compiled executables (dist-bin/), one process per plugin (CniConfig `inProcess: false`)
 *   go           the Go reference plugins (/usr/lib/cni), exec'd by the same libcni
 * Everything runs in a private "host" network namespace that this process's main thread enters, against one private
 * container namespace (a different container ID each round). The list is 1.0.0 (Debian's Go plugins stop there),
 * portmap uses iptables with one mapping, tuning sets one sysctl.
 *
 *   node --conditions=cnikit-source --import tsx bench/libcni.ts [--runs=20] [--json]
 *
 * Reported: median and p90 wall time of one ADD and one DEL of the whole chain, and the ratio to Go. Requires
 * `npm run build` and root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CniConfig, confListFromObject, type RuntimeConf } from '@cnikit/libcni';
import { plugin as bridge } from '@cnikit/plugin-bridge';
import { plugin as hostLocal } from '@cnikit/plugin-host-local';
import { plugin as portmap } from '@cnikit/plugin-portmap';
import { plugin as tuning } from '@cnikit/plugin-tuning';
import { setns } from '@cnikit/sys';

const ROOT = join(import.meta.dirname, '..');
const DIST = join(ROOT, 'dist-bin');
const GO = '/usr/lib/cni';
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const JSON_OUT = process.argv.includes('--json');
for (const [p, hint] of [
  [join(DIST, 'bridge'), 'run npm run build'],
  [join(GO, 'bridge'), 'apt-get install containernetworking-plugins'],
] as const) {
  if (!existsSync(p)) {
    console.error(`missing ${p} (${hint})`);
    process.exit(1);
  }
}

const work = mkdtempSync(join(tmpdir(), 'cnikit-bench-libcni-'));
const impls = [
  {
    name: 'in-process',
    n: 1,
    cni: () =>
      new CniConfig({
        path: [DIST],
        cacheDir: join(work, 'c1'),
        plugins: [bridge, hostLocal, tuning, portmap],
      }),
  },
  {
    name: 'exec',
    n: 2,
    cni: () => new CniConfig({ path: [DIST], cacheDir: join(work, 'c2'), inProcess: false }),
  },
  {
    name: 'go',
    n: 3,
    cni: () => new CniConfig({ path: [GO], cacheDir: join(work, 'c3'), inProcess: false }),
  },
];
const list = (n: number) =>
  confListFromObject({
    cniVersion: '1.0.0',
    name: `bench${n}`,
    plugins: [
      {
        type: 'bridge',
        bridge: `benchbr${n}`,
        isGateway: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: `10.95.${n}.0/24` }]],
          dataDir: join(work, `ipam${n}`),
        },
      },
      { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_ignore': '1' } },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  });

const host = `cnikit-bench-lc-h-${process.pid}`;
const ctr = `cnikit-bench-lc-c-${process.pid}`;
for (const ns of [host, ctr]) execFileSync('ip', ['netns', 'add', ns]);
const orig = openSync('/proc/thread-self/ns/net', 'r');
const fd = openSync(`/run/netns/${host}`, 'r');
setns(fd);
closeSync(fd);
spawnSync('ip', ['link', 'set', 'lo', 'up']);
const q = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
const t: Record<string, { ADD: number[]; DEL: number[] }> = {};
try {
  for (let round = 0; round < RUNS + 2; round++) {
    for (const impl of round % 2 ? [...impls].reverse() : impls) {
      const cni = impl.cni();
      const l = list(impl.n);
      const rt: RuntimeConf = {
        containerId: `bench-${impl.n}-${round}`,
        netns: `/run/netns/${ctr}`,
        ifName: `eth${impl.n}`,
        capabilityArgs: { portMappings: [{ hostPort: 20000 + impl.n, containerPort: 80, protocol: 'tcp' }] },
      };
      const t0 = performance.now();
      await cni.addNetworkList(l, rt);
      const t1 = performance.now();
      await cni.delNetworkList(l, rt);
      const t2 = performance.now();
      if (round >= 2) {
        t[impl.name] ??= { ADD: [], DEL: [] };
        t[impl.name]!.ADD.push(t1 - t0);
        t[impl.name]!.DEL.push(t2 - t1);
      }
    }
  }
} finally {
  setns(orig);
  closeSync(orig);
  for (const ns of [host, ctr]) spawnSync('ip', ['netns', 'del', ns]);
  rmSync(work, { recursive: true, force: true });
}
const rows = (['ADD', 'DEL'] as const).flatMap((op) =>
  impls.map((i) => ({
    op,
    impl: i.name,
    median: q(t[i.name]![op], 0.5),
    p90: q(t[i.name]![op], 0.9),
    ratioToGo: q(t[i.name]![op], 0.5) / q(t.go![op], 0.5),
  })),
);
if (JSON_OUT) console.log(JSON.stringify(rows));
else {
  console.log(
    `bridge + host-local → tuning → portmap through libcni, ${RUNS} runs each, median (p90), ratio to Go:`,
  );
  for (const r of rows) {
    console.log(
      `  ${r.op} ${r.impl.padEnd(11)} ${r.median.toFixed(1).padStart(6)} ms (${r.p90.toFixed(1)})   ${r.ratioToGo.toFixed(2)}×`,
    );
  }
}
