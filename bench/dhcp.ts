/**
 * Benchmark: dhcp ADD and DEL latency, cnikit vs the Go reference (/usr/lib/cni/dhcp), side by side, each plugin
 * talking to its own daemon (`dhcp daemon`, started here on a private socket) and both daemons leasing from one
 * dnsmasq in a private namespace behind a bridge (plugins/dhcp/src/testenv.ts; needs root, dnsmasq and a build).
 *
 *   node --conditions=cnikit-source --import tsx bench/dhcp.ts [--runs=20] [--burst=50] [--json]
 *
 * Sequential: each run is one ADD then one DEL of a fresh container through the plugin executable (wall time of the
 * exec, the full DHCP exchange included); the implementations alternate run by run. Burst: `--burst` containers ADD
 * at once (one plugin process each), then DEL at once; the wall time of the whole burst is reported.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Container, Lab, startDaemon, stopProcess } from '../plugins/dhcp/src/testenv.ts';
import { printRows, type SideBySideRow, sideBySide, timedExec } from './lib/side-by-side.ts';

const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Math.max(5, Number(arg('runs', '20')));
const BURST = Number(arg('burst', '50'));
const JSON_OUT = process.argv.includes('--json');

const OURS = join(import.meta.dirname, '..', 'dist-bin', 'dhcp');
const GO = '/usr/lib/cni/dhcp';

function env(cmd: string, c: Container, id: string): Record<string, string> {
  return {
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: id,
    CNI_NETNS: c.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
}

function conf(sock: string): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'benchnet',
    type: 'macvlan',
    ipam: { type: 'dhcp', daemonSocketPath: sock },
  });
}

function execAsync(bin: string, e: Record<string, string>, input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [], {
      env: { ...e, PATH: process.env.PATH ?? '' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${bin} ${e.CNI_COMMAND}: ${out}`)),
    );
    child.stdin.end(input);
  });
}

async function main(): Promise<void> {
  for (const bin of [OURS, GO])
    if (!existsSync(bin)) throw new Error(`${bin} is missing (npm run build / containernetworking-plugins)`);
  const lab = new Lab();
  const daemons: Awaited<ReturnType<typeof startDaemon>>[] = [];
  try {
    await lab.startServer({ leaseTime: '1h', range: '10.77.1.1,10.77.250.254,255.255.0.0' });
    const ourSock = join(lab.dir, 'ours.sock');
    const goSock = join(lab.dir, 'go.sock');
    daemons.push(await startDaemon(ourSock, ['-statedir', join(lab.dir, 'state')], OURS));
    const go = spawn(GO, ['daemon', '-socketpath', goSock], { stdio: 'ignore' });
    daemons.push({ child: go, stderr: () => '' });
    for (let i = 0; i < 100 && !existsSync(goSock); i++) await new Promise((r) => setTimeout(r, 50));

    const impls = [
      { name: 'cnikit', bin: OURS, sock: ourSock, add: [] as number[], del: [] as number[] },
      { name: 'go', bin: GO, sock: goSock, add: [] as number[], del: [] as number[] },
    ];
    const containers = lab.addContainers(RUNS * 2);
    for (let i = 0; i < RUNS; i++) {
      for (const [k, impl] of (i % 2 ? [...impls].reverse() : impls).entries()) {
        const c = containers[i * 2 + k] as Container;
        const id = `${impl.name}-${i}`;
        impl.add.push(timedExec(impl.bin, env('ADD', c, id), conf(impl.sock)));
        impl.del.push(timedExec(impl.bin, env('DEL', c, id), conf(impl.sock)));
      }
    }
    const [ours, gos] = impls as [(typeof impls)[0], (typeof impls)[0]];
    const rows: SideBySideRow[] = [
      sideBySide('ADD (one container)', ours.add, gos.add),
      sideBySide('DEL (one container)', ours.del, gos.del),
    ];

    if (BURST > 0) {
      const burst: Record<string, { add: number; del: number }> = {};
      for (const impl of impls) {
        const cs = lab.addContainers(BURST);
        const t0 = performance.now();
        await Promise.all(
          cs.map((c, i) => execAsync(impl.bin, env('ADD', c, `${impl.name}-b${i}`), conf(impl.sock))),
        );
        const add = performance.now() - t0;
        const t1 = performance.now();
        await Promise.all(
          cs.map((c, i) => execAsync(impl.bin, env('DEL', c, `${impl.name}-b${i}`), conf(impl.sock))),
        );
        burst[impl.name] = { add, del: performance.now() - t1 };
      }
      rows.push(sideBySide(`ADD burst of ${BURST}`, [burst.cnikit!.add], [burst.go!.add]));
      rows.push(sideBySide(`DEL burst of ${BURST}`, [burst.cnikit!.del], [burst.go!.del]));
    }
    printRows(
      `dhcp (${RUNS} runs each; dnsmasq in a private namespace; plugin exec + daemon + DHCP exchange)`,
      rows,
      JSON_OUT,
    );
  } finally {
    for (const d of daemons) await stopProcess(d.child);
    await lab.destroy();
  }
}

await main();
