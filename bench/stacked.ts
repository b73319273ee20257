/**
 * Benchmark: macvlan, ipvlan and vlan ADD and DEL (each with static IPAM), cnikit (dist-bin/<plugin>, IPAM in-process
 * through the multicall executable) vs the Go reference (/usr/lib/cni/<plugin> + static, exec'd), side by side,
 * alternating calls, in private namespaces: a "host" namespace with the master `m0` (a veth) and one container
 * namespace.
 *
 *   node --conditions=cnikit-source --import tsx bench/stacked.ts [--runs=20] [--json] [--no-vm]
 *
 * A kernel without macvlan/ipvlan/vlan links (this project's build machine) cannot run it: the benchmark then runs
 * itself inside the kernel lab (`node scripts/vm.mjs`, qemu TCG), where the timings are RELATIVE ONLY (emulated CPU:
 * compare the ratios, not the milliseconds). Reported: median and p90 wall time per exec and the ours/Go ratio.
 * Requires `npm run build` and root.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { setns } from '@cnikit/sys';
import { printRows, type SideBySideRow, sideBySide, timedExec } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const JSON_OUT = process.argv.includes('--json');
const PLUGINS = ['macvlan', 'ipvlan', 'vlan'] as const;
const impls = [
  { name: 'cnikit', dir: join(ROOT, 'dist-bin') },
  { name: 'go', dir: '/usr/lib/cni' },
];

function ip(args: string[], check = true): number {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (check && r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  return r.status ?? 1;
}

/** Whether this kernel makes all three link kinds (probed in a private namespace). */
function kernelHasLinks(): boolean {
  const ns = `cnikit-bench-probe-${process.pid}`;
  ip(['netns', 'add', ns]);
  try {
    ip(['-n', ns, 'link', 'add', 'p0', 'type', 'veth', 'peer', 'name', 'p1']);
    return (
      ip(['-n', ns, 'link', 'add', 'link', 'p0', 'name', 'pm', 'type', 'macvlan'], false) === 0 &&
      // on the other end: a device with macvlans cannot take an ipvlan (EBUSY)
      ip(['-n', ns, 'link', 'add', 'link', 'p1', 'name', 'pi', 'type', 'ipvlan'], false) === 0 &&
      ip(['-n', ns, 'link', 'add', 'link', 'p0', 'name', 'pv', 'type', 'vlan', 'id', '2'], false) === 0
    );
  } finally {
    spawnSync('ip', ['netns', 'del', ns]);
  }
}

function main(): void {
  for (const i of impls)
    for (const p of [...PLUGINS, 'static']) {
      if (!existsSync(join(i.dir, p))) {
        console.error(`missing ${join(i.dir, p)}${i.name === 'cnikit' ? ' (run npm run build)' : ''}`);
        process.exit(1);
      }
    }
  if (!kernelHasLinks()) {
    if (process.argv.includes('--no-vm')) {
      console.error('this kernel has no macvlan/ipvlan/vlan links');
      process.exit(1);
    }
    console.log(
      'this kernel lacks macvlan/ipvlan/vlan: running in the kernel lab (qemu TCG: timings relative only)',
    );
    const r = spawnSync(
      process.execPath,
      [
        join(ROOT, 'scripts', 'vm.mjs'),
        '--',
        process.execPath,
        '--conditions=cnikit-source',
        '--import',
        'tsx',
        join(import.meta.dirname, 'stacked.ts'),
        `--runs=${RUNS}`,
        '--no-vm',
        ...(JSON_OUT ? ['--json'] : []),
      ],
      { cwd: ROOT, stdio: 'inherit' },
    );
    process.exit(r.status ?? 1);
  }

  const host = `cnikit-bench-stk-host-${process.pid}`;
  const cont = `cnikit-bench-stk-c-${process.pid}`;
  ip(['netns', 'add', host]);
  ip(['netns', 'add', cont]);
  // this thread moves into the "host" namespace: the plugins it spawns run there, like on a node
  const orig = openSync('/proc/self/ns/net', 'r');
  try {
    const fd = openSync(`/run/netns/${host}`, 'r');
    setns(fd);
    closeSync(fd);
    ip(['link', 'add', 'm0', 'type', 'veth', 'peer', 'name', 'm0p']);
    ip(['link', 'set', 'm0', 'up']);
    const confs: Record<(typeof PLUGINS)[number], object> = {
      macvlan: { master: 'm0', mode: 'bridge' },
      ipvlan: { master: 'm0', mode: 'l2' },
      vlan: { master: 'm0', vlanId: 42 },
    };
    const rows: SideBySideRow[] = [];
    for (const p of PLUGINS) {
      const conf = JSON.stringify({
        cniVersion: '1.0.0',
        name: `bench-${p}`,
        type: p,
        ...confs[p],
        ipam: { type: 'static', addresses: [{ address: '10.79.0.10/24', gateway: '10.79.0.1' }] },
      });
      const call = (dir: string, cmd: 'ADD' | 'DEL'): number =>
        timedExec(
          join(dir, p),
          {
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'bench',
            CNI_NETNS: `/run/netns/${cont}`,
            CNI_IFNAME: 'eth0',
            CNI_PATH: dir,
          },
          conf,
        );
      const times: Record<string, { ADD: number[]; DEL: number[] }> = {};
      for (const i of impls) times[i.name] = { ADD: [], DEL: [] };
      for (let n = 0; n < 2; n++) for (const i of impls) call(i.dir, 'ADD') + call(i.dir, 'DEL'); // warm-up
      for (let n = 0; n < RUNS; n++) {
        for (const i of n % 2 ? [...impls].reverse() : impls) {
          times[i.name]?.ADD.push(call(i.dir, 'ADD'));
          times[i.name]?.DEL.push(call(i.dir, 'DEL'));
        }
      }
      for (const cmd of ['ADD', 'DEL'] as const)
        rows.push(sideBySide(`${p} ${cmd}`, times.cnikit?.[cmd] ?? [], times.go?.[cmd] ?? []));
    }
    printRows(`macvlan / ipvlan / vlan + static IPAM, ${RUNS} runs each, medians (p90):`, rows, JSON_OUT);
  } finally {
    setns(orig);
    closeSync(orig);
    spawnSync('ip', ['netns', 'del', cont]);
    spawnSync('ip', ['netns', 'del', host]);
  }
}

main();
