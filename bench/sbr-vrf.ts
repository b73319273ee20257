/**
 * Benchmark: sbr and vrf ADD and DEL, cnikit (dist-bin/sbr, dist-bin/vrf) vs the Go reference (/usr/lib/cni), side by
 * side, alternating calls, in a private container namespace whose `eth0` (a veth, dual stack, a gateway route per
 * family) is made anew before every ADD (untimed). vrf needs the `vrf` link type: where the kernel lacks it the vrf
 * rows are left out with a note (run `npm run vm -- node --conditions=cnikit-source --import tsx bench/sbr-vrf.ts`
 * for them; TCG timings are only comparable with each other).
 *
 *   node --conditions=cnikit-source --import tsx bench/sbr-vrf.ts [--runs=20] [--json]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { printRows, type SideBySideRow, sideBySide, timedExec } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const JSON_OUT = process.argv.includes('--json');

const ns = `cnikit-bench-sbr-${process.pid}`;
const netns = `/run/netns/${ns}`;
const ip = (...a: string[]) => execFileSync('ip', ['-n', ns, ...a]);

function freshEth0(): void {
  spawnSync('ip', ['-n', ns, 'link', 'del', 'eth0']);
  spawnSync('ip', ['-n', ns, 'link', 'del', 'blue']);
  ip('link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0');
  ip('link', 'set', 'eth0', 'up');
  ip('addr', 'add', '10.9.0.5/24', 'dev', 'eth0');
  ip('addr', 'add', 'fd00:9::5/64', 'dev', 'eth0', 'nodad');
  ip('route', 'add', 'default', 'via', '10.9.0.1', 'dev', 'eth0');
  ip('-6', 'route', 'add', 'default', 'via', 'fd00:9::1', 'dev', 'eth0');
}

const prevResult = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', sandbox: netns }],
  ips: [
    { interface: 0, address: '10.9.0.5/24', gateway: '10.9.0.1' },
    { interface: 0, address: 'fd00:9::5/64', gateway: 'fd00:9::1' },
  ],
};
const configs = {
  sbr: { cniVersion: '1.0.0', name: 'bench-sbr', type: 'sbr', prevResult },
  vrf: { cniVersion: '1.0.0', name: 'bench-vrf', type: 'vrf', vrfname: 'blue', prevResult },
};

function bench(plugin: 'sbr' | 'vrf'): SideBySideRow[] {
  const bins = { cnikit: join(ROOT, 'dist-bin', plugin), go: `/usr/lib/cni/${plugin}` };
  for (const [who, bin] of Object.entries(bins))
    if (!existsSync(bin))
      throw new Error(
        `missing ${bin}${who === 'cnikit' ? ' (run npm run build)' : ' (containernetworking-plugins)'}`,
      );
  const input = JSON.stringify(configs[plugin]);
  const env = (cmd: string) => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'bench',
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  });
  const t = {
    cnikit: { add: [] as number[], del: [] as number[] },
    go: { add: [] as number[], del: [] as number[] },
  };
  for (let i = 0; i < RUNS; i++) {
    for (const who of ['cnikit', 'go'] as const) {
      freshEth0();
      t[who].add.push(timedExec(bins[who], env('ADD'), input));
      t[who].del.push(timedExec(bins[who], env('DEL'), input));
    }
  }
  return [
    sideBySide(`${plugin} ADD`, t.cnikit.add, t.go.add),
    sideBySide(`${plugin} DEL`, t.cnikit.del, t.go.del),
  ];
}

execFileSync('ip', ['netns', 'add', ns]);
try {
  ip('link', 'set', 'lo', 'up');
  const rows = bench('sbr');
  const probe = spawnSync('ip', ['-n', ns, 'link', 'add', 'blue', 'type', 'vrf', 'table', '1']);
  if (probe.status === 0) rows.push(...bench('vrf'));
  else if (!JSON_OUT)
    console.log('vrf: this kernel has no vrf link type; run this benchmark in the kernel lab');
  printRows(`sbr / vrf: median (p90) wall time per exec, ${RUNS} runs each`, rows, JSON_OUT);
} finally {
  spawnSync('ip', ['netns', 'del', ns]);
}
