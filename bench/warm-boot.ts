/**
 * The first plugin call after boot under a real systemd, and the calls after it, against a cold call: the kernel
 * lab's VM booted with systemd as PID 1 (`scripts/vm.mjs --systemd`), the build installed there by
 * `scripts/install` with no mode flag (it enables cnikit.socket), then bench/lib/warm-boot-vm.mjs inside the VM:
 *
 *   - the first call after the install (the socket listening, no service: the state right after boot), which makes
 *     systemd start `cnikit serve`, and --firsts more of them (the service stopped each time, the socket kept), each
 *     beside a cold call;
 *   - --rounds rounds alternating a cold call (/opt/cni/bin/cnikit named bridge) and a warm one (/opt/cni/bin/bridge,
 *     the client, the service running).
 *
 * Every call is bridge VERSION. The client waits --hello-ms for the service's greeting (default 2000, the client's
 * own default: a first call whose service takes longer to start runs cold, and is counted as a fallback).
 * Under TCG (no KVM on this machine) every figure is 10-20x a real host's; the ratios are the result.
 *
 * Before the VM, the same first call at this machine's own speed (no emulation, no systemd as PID 1 here):
 * `systemd-socket-activate` (systemd's own socket-activation launcher, what systemd does for cnikit.socket) listens
 * on a private socket and execs `dist-bin/cnikit serve` on the first connection; each round times that first call
 * through dist-bin/warm/bridge, one more call to the running service, and a cold call (dist-bin/bridge), alternating.
 *
 *   node --conditions=cnikit-source --import tsx bench/warm-boot.ts [--rounds=21] [--firsts=11] [--hello-ms=2000]
 *     [--no-vm]
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
// @ts-expect-error: a plain ES module without types
import { buildTsCache, tsxEntry } from '../scripts/ts-cache.mjs';
// @ts-expect-error: a plain ES module without types
import { runInVm } from '../scripts/vm.mjs';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const ROUNDS = Math.max(20, Number(arg('rounds', '21')) || 21);
const FIRSTS = Math.max(1, Number(arg('firsts', '11')) || 11);
const HELLO = arg('hello-ms', '2000');

if (process.getuid?.() !== 0) {
  console.log('warm-boot: skipped (the kernel lab needs root)');
  process.exit(0);
}
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? (v[m] as number) : ((v[m - 1] as number) + (v[m] as number)) / 2;
};

/** One bridge VERSION through `file` with CNIKIT_SOCKET=socket; its wall time in ms. */
function call(file: string, socket: string): number {
  const t0 = performance.now();
  const r = spawnSync(file, [], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', CNI_COMMAND: 'VERSION', CNIKIT_SOCKET: socket },
    input: '{"cniVersion":"1.1.0"}',
    encoding: 'utf8',
  });
  const ms = performance.now() - t0;
  if (r.status !== 0 || !/"supportedVersions"/.test(r.stdout))
    throw new Error(`${file}: ${r.stdout}${r.stderr}`);
  return ms;
}

{
  const dist = join(ROOT, 'dist-bin');
  const first: number[] = [];
  const next: number[] = [];
  const cold: number[] = [];
  let fellBack = 0;
  const load0 = loadavg();
  for (let i = 0; i < ROUNDS; i++) {
    const dir = mkdtempSync('/tmp/cnikit-warmdefault-boot-');
    const sock = join(dir, 'cnikit.sock');
    const sa = spawn(
      'systemd-socket-activate',
      ['-l', sock, join(dist, 'cnikit'), 'serve', '--socket', sock, '--metrics', 'off'],
      { stdio: 'ignore' },
    );
    try {
      for (let t = 0; !existsSync(sock); t++) {
        if (t > 2000) throw new Error('systemd-socket-activate did not listen');
        await new Promise((r) => setTimeout(r, 5));
      }
      cold.push(call(join(dist, 'bridge'), sock));
      first.push(call(join(dist, 'warm', 'bridge'), sock));
      next.push(call(join(dist, 'warm', 'bridge'), sock));
      if (existsSync(join(dir, 'client-fallbacks'))) fellBack++;
    } finally {
      sa.kill('SIGTERM');
      await new Promise((r) => sa.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(
    `warm-boot on this machine (systemd-socket-activate, no VM), ${ROUNDS} alternating rounds, medians`,
  );
  console.log(`  load average: ${load0} at the start, ${loadavg()} at the end`);
  console.log(
    `  first call (socket activation execs cnikit serve): ${ms(median(first))} = ${(median(first) / median(cold)).toFixed(2)}x cold`,
  );
  console.log(
    `  the call after it: ${ms(median(next))} = ${(median(next) / median(cold)).toFixed(2)}x cold; cold: ${ms(median(cold))}`,
  );
  console.log(`  first calls that fell back cold: ${fellBack} of ${ROUNDS}`);
}
if (process.argv.includes('--no-vm')) process.exit(0);
const hostLoadStart = loadavg();
const cache = await buildTsCache(ROOT);
let text = '';
const out = new Writable({
  write(chunk, _e, done) {
    text += chunk.toString();
    done();
  },
});
let status: number;
try {
  status = await runInVm(
    [
      'node',
      join(ROOT, 'bench', 'lib', 'warm-boot-vm.mjs'),
      '--repo',
      ROOT,
      '--rounds',
      String(ROUNDS),
      '--firsts',
      String(FIRSTS),
      '--hello-ms',
      HELLO,
    ],
    {
      cwd: ROOT,
      systemd: true,
      stdout: out,
      binds: [
        [cache.register, tsxEntry(ROOT)],
        [cache.register, join(ROOT, 'node_modules', 'tsx', 'dist', 'esm', 'index.mjs')],
      ],
    },
  );
} finally {
  rmSync(cache.dir, { recursive: true, force: true });
}
if (status !== 0) {
  console.error(`warm-boot: the VM's command failed (exit ${status}):\n${text}`);
  process.exit(1);
}
const r = JSON.parse(text.trim().split('\n').at(-1) as string);
const f = r.figures;
const ms = (x: number) => `${x.toFixed(1)} ms`;
const fallbacks = (r.afterFirsts.fallbacks as string).split('\n').filter(Boolean);
console.log(
  `warm-boot (kernel lab VM, TCG, systemd ${r.pid1 === 'systemd' ? 'as PID 1' : `NOT PID 1: ${r.pid1}`})`,
);
console.log(`  host load average: ${hostLoadStart} at the start, ${loadavg()} at the end`);
console.log(`  VM load average: ${r.loadavgStart} at the start, ${r.loadavgEnd} at the end`);
console.log(
  `  install (scripts/install, socket enabled): ${r.installSeconds.toFixed(1)} s; --cold: ${r.uninstallSeconds.toFixed(1)} s`,
);
console.log(`  client greeting wait: ${r.helloMs} ms`);
console.log(`  first call after boot (systemd starts cnikit serve): ${ms(r.firstCallMs)}`);
console.log(
  `  first calls, median of ${f.firstMs.length}: ${ms(f.firstMedianMs)} vs cold ${ms(f.firstColdMedianMs)} beside them: ${(f.firstMedianMs / f.firstColdMedianMs).toFixed(2)}x cold`,
);
console.log(
  `  calls after it, median of ${f.rounds} alternating rounds: warm ${ms(f.warmMedianMs)} vs cold ${ms(f.coldMedianMs)}: ${(f.warmMedianMs / f.coldMedianMs).toFixed(2)}x cold`,
);
console.log(
  `  first calls that fell back cold (the service did not greet within ${r.helloMs} ms): ${fallbacks.length} of ${f.firstMs.length}${fallbacks.length ? ` (${fallbacks.join(', ')})` : ''}`,
);
if (process.argv.includes('--json')) console.log(JSON.stringify(r));
