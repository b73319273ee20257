/**
 * Instructions per plugin call of the kubelet-style chain (bridge + host-local with ipMasq, tuning, portmap,
 * bandwidth), ADD then DEL in reverse, each call run under `valgrind --tool=callgrind` (the plugin's own process;
 * tools it starts, iptables-restore, are not counted), for cnikit (dist-bin/), another cnikit build (--before=DIR)
 * and the Go plugins (/usr/lib/cni), inside private namespaces. Independent of the machine's load: what a cold call
 * costs in user space, start-up included.
 *   node --conditions=cnikit-source --import tsx bench/chain-instructions.ts [--before=DIR] [--go] [--json]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, enterNetns } from '@cnikit/testing';
import { type Conf, kubeletChain } from './lib/chains.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const BEFORE = arg('before', '');
const IMPLS = [
  { name: 'cnikit', dir: join(ROOT, 'dist-bin') },
  ...(BEFORE ? [{ name: 'before', dir: BEFORE }] : []),
  // Go under valgrind is not reliable (a bridge ADD fails under it): only with --go
  ...(process.argv.includes('--go') && existsSync('/usr/lib/cni/bridge')
    ? [{ name: 'go', dir: '/usr/lib/cni' }]
    : []),
];
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bench-instr-'));
const sb = createSandbox();
const inHost = enterNetns(sb.host.path);
const out: Record<string, Record<string, number>> = {};
try {
  for (const impl of IMPLS) {
    const chain = kubeletChain({
      bridge: 'cniinstr0',
      subnet: '10.79.0.0/16',
      dir: join(scratch, impl.name),
      hostPort: 18090,
    });
    const head = { cniVersion: '1.0.0', name: 'bench-instr' };
    const exec = (cmd: 'ADD' | 'DEL', conf: Conf): unknown => {
      const r = spawnSync(
        'valgrind',
        ['--tool=callgrind', '--callgrind-out-file=/dev/null', join(impl.dir, conf.type as string)],
        {
          env: {
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'bench-instr',
            CNI_NETNS: sb.container.path,
            CNI_IFNAME: 'eth0',
            CNI_PATH: impl.dir,
            PATH: process.env.PATH,
          },
          input: JSON.stringify(conf),
          encoding: 'utf8',
        },
      );
      const m = /refs:\s+([\d,]+)/.exec(r.stderr);
      out[impl.name] = out[impl.name] ?? {};
      out[impl.name]![`${conf.type} ${cmd}`] =
        m && r.status === 0 ? Number(m[1]!.replace(/,/g, '')) : Number.NaN;
      if (r.status === 0) return r.stdout ? JSON.parse(r.stdout) : undefined;
      // valgrind itself can fail on a call (a crash in its allocator): the call again without it, not counted
      const again = spawnSync(join(impl.dir, conf.type as string), [], {
        env: {
          CNI_COMMAND: cmd,
          CNI_CONTAINERID: 'bench-instr',
          CNI_NETNS: sb.container.path,
          CNI_IFNAME: 'eth0',
          CNI_PATH: impl.dir,
          PATH: process.env.PATH,
        },
        input: JSON.stringify(conf),
        encoding: 'utf8',
      });
      if (again.status !== 0)
        throw new Error(`${impl.name} ${conf.type} ${cmd} failed: ${again.stdout}${again.stderr}`);
      return again.stdout ? JSON.parse(again.stdout) : undefined;
    };
    let prev: unknown;
    for (const p of chain) prev = exec('ADD', { ...head, ...p, ...(prev ? { prevResult: prev } : {}) });
    for (const p of [...chain].reverse()) exec('DEL', { ...head, ...p, prevResult: prev });
  }
} finally {
  inHost.restore();
  sb.destroy();
  rmSync(scratch, { recursive: true, force: true });
}
if (process.argv.includes('--json')) console.log(JSON.stringify(out));
else {
  const keys = Object.keys(out[IMPLS[0]!.name] ?? {});
  console.log(`instructions per call (M), kubelet chain: ${IMPLS.map((i) => i.name).join(' / ')}`);
  for (const k of keys)
    console.log(
      `  ${k.padEnd(16)} ${IMPLS.map((i) => ((out[i.name]?.[k] ?? Number.NaN) / 1e6).toFixed(1).padStart(7)).join(' ')}`,
    );
  for (const cmd of ['ADD', 'DEL'])
    console.log(
      `  chain ${cmd.padEnd(10)} ${IMPLS.map((i) =>
        (
          Object.entries(out[i.name] ?? {})
            .filter(([k]) => k.endsWith(cmd))
            .reduce((a, [, v]) => a + v, 0) / 1e6
        )
          .toFixed(1)
          .padStart(7),
      ).join(' ')}`,
    );
}
