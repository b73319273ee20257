/**
 * Benchmark: ptp (host-local IPAM, as kindnetd uses it), host-device (a veth end moved in and back, static IPAM) and
 * tap (L2) ADD and DEL, cnikit cold (dist-bin/<plugin>, IPAM in-process through the multicall executable) and warm
 * (dist-bin/warm/<plugin>: the static client talking to `cnikit serve` on a private socket) vs the Go reference
 * (/usr/lib/cni/<plugin>, IPAM exec'd), side by side, alternating calls, in private namespaces.
 * Debian's Go package has no tap and no dummy: tap is measured for cnikit alone; dummy needs a kernel with the dummy
 * link type (the kernel lab, where timings are emulated) and is not measured here.
 *
 *   node --conditions=cnikit-source --import tsx bench/interface.ts [--runs=20] [--json]
 *
 * Reported: median and p90 wall time per exec and the cnikit/Go ratio. Requires `npm run build` and root.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setns } from '@cnikit/sys';
import {
  median,
  printRows,
  quantile,
  type SideBySideRow,
  sideBySide,
  timedExec,
} from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const JSON_OUT = process.argv.includes('--json');
const impls = [
  { name: 'cnikit', dir: join(ROOT, 'dist-bin') },
  { name: 'go', dir: '/usr/lib/cni' },
  { name: 'warm', dir: join(ROOT, 'dist-bin', 'warm') },
] as const;

function ip(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
}

function main(): void {
  for (const p of ['ptp', 'host-device', 'tap', 'host-local', 'static'])
    if (!existsSync(join(ROOT, 'dist-bin', p))) {
      console.error(`missing dist-bin/${p} (run npm run build)`);
      process.exit(1);
    }
  for (const p of ['ptp', 'host-device', 'host-local', 'static'])
    if (!existsSync(join('/usr/lib/cni', p))) {
      console.error(`missing /usr/lib/cni/${p} (Debian containernetworking-plugins)`);
      process.exit(1);
    }
  const sock = join(mkdtempSync(join(tmpdir(), 'cnikit-bench-if-sock-')), 'serve.sock');
  const service: ChildProcess = spawn(join(ROOT, 'dist-bin', 'cnikit'), ['serve', '--socket', sock], {
    stdio: 'ignore',
    env: { PATH: process.env.PATH },
  });
  for (let i = 0; ; i++) {
    const r = spawnSync(join(ROOT, 'dist-bin', 'cnikit'), ['serve', '--check', '--socket', sock]);
    if (r.status === 0) break;
    if (i > 200) throw new Error('cnikit serve did not start');
    spawnSync('sleep', ['0.05']);
  }
  const host = `cnikit-bench-if-host-${process.pid}`;
  const cont = `cnikit-bench-if-c-${process.pid}`;
  const data = mkdtempSync(join(tmpdir(), 'cnikit-bench-if-'));
  ip(['netns', 'add', host]);
  ip(['netns', 'add', cont]);
  const orig = openSync('/proc/self/ns/net', 'r');
  try {
    // this thread moves into the "host" namespace: the plugins it spawns run there, like on a node
    const fd = openSync(`/run/netns/${host}`, 'r');
    setns(fd);
    closeSync(fd);
    ip(['link', 'set', 'lo', 'up']);
    ip(['link', 'add', 'hd0', 'type', 'veth', 'peer', 'name', 'hd0p']);
    ip(['addr', 'add', '192.168.91.7/24', 'dev', 'hd0']);
    ip(['link', 'set', 'hd0', 'up']);
    const cases: Array<{ plugin: string; ifName: string; conf: object; goToo: boolean }> = [
      {
        plugin: 'ptp',
        ifName: 'eth0',
        conf: {
          mtu: 1500,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.78.0.0/24' }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: data,
          },
        },
        goToo: true,
      },
      {
        plugin: 'host-device',
        ifName: 'net1',
        conf: {
          device: 'hd0',
          dataDir: join(data, 'hd'),
          ipam: { type: 'static', addresses: [{ address: '10.78.1.5/24' }] },
        },
        goToo: true,
      },
      { plugin: 'tap', ifName: 'tap0', conf: { multiQueue: true }, goToo: false },
    ];
    const rows: SideBySideRow[] = [];
    const alone: string[] = [];
    for (const c of cases) {
      const conf = JSON.stringify({
        cniVersion: '1.0.0',
        name: `bench-${c.plugin}`,
        type: c.plugin,
        ...c.conf,
      });
      const call = (dir: string, cmd: 'ADD' | 'DEL'): number =>
        timedExec(
          join(dir, c.plugin),
          {
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'bench',
            CNI_NETNS: `/run/netns/${cont}`,
            CNI_IFNAME: c.ifName,
            CNI_PATH: dir,
            CNIKIT_SOCKET: sock,
          },
          conf,
        );
      const use = c.goToo ? impls : impls.filter((i) => i.name !== 'go');
      const times: Record<string, { ADD: number[]; DEL: number[] }> = {};
      for (const i of use) times[i.name] = { ADD: [], DEL: [] };
      for (let n = 0; n < 2; n++) for (const i of use) call(i.dir, 'ADD') + call(i.dir, 'DEL'); // warm-up
      for (let n = 0; n < RUNS; n++) {
        for (const i of n % 2 ? [...use].reverse() : use) {
          times[i.name]?.ADD.push(call(i.dir, 'ADD'));
          times[i.name]?.DEL.push(call(i.dir, 'DEL'));
        }
      }
      for (const cmd of ['ADD', 'DEL'] as const) {
        if (c.goToo) {
          rows.push(sideBySide(`${c.plugin} ${cmd}`, times.cnikit?.[cmd] ?? [], times.go?.[cmd] ?? []));
          rows.push(sideBySide(`${c.plugin} ${cmd} (warm)`, times.warm?.[cmd] ?? [], times.go?.[cmd] ?? []));
        } else {
          for (const mode of ['cnikit', 'warm'] as const) {
            const xs = times[mode]?.[cmd] ?? [];
            const op = `${c.plugin} ${cmd}${mode === 'warm' ? ' (warm)' : ''}`;
            alone.push(
              `  ${op.padEnd(22)} cnikit ${median(xs).toFixed(1)} ms (${quantile(xs, 0.9).toFixed(1)})   go: not in Debian's package`,
            );
          }
        }
      }
    }
    printRows(`ptp / host-device (cold, and warm), ${RUNS} runs each, medians (p90):`, rows, JSON_OUT);
    if (!JSON_OUT) for (const l of alone) console.log(l);
  } finally {
    service.kill();
    rmSync(dirname(sock), { recursive: true, force: true });
    setns(orig);
    closeSync(orig);
    spawnSync('ip', ['netns', 'del', cont]);
    spawnSync('ip', ['netns', 'del', host]);
    rmSync(data, { recursive: true, force: true });
  }
}

main();
