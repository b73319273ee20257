/**
 * A cold call's start-up side by side: `CNI_COMMAND=VERSION` of dist-bin/loopback (the configuration on a pipe, as a
 * runtime gives it), of empty programs compiled exactly as the build compiles cnikit (`compileBunModule` of
 * @cnikit/build: Bun.build with splitting, ESM bytecode, JIT policy, no autoload) and of Go's loopback, alternating, started by the C launcher
 * (wall time and user + system CPU from wait4). The empty programs: `nothing` (an empty file: the runtime's own
 * start and exit), `writeSync` (writes `{}` to fd 1 with node:fs, the least a plugin must do to answer) and
 * `process.stdout` (the same through process.stdout.write). Prints medians, the ratios and the load average at the
 * start and the end. --before=PATH adds another build in the same rounds. With --callgrind, also the instructions each one executes (valgrind, independent of load).
 *   node --conditions=cnikit-source --import tsx bench/startup.ts [--runs=30] [--callgrind] [--bin=PATH] [--before=PATH] [--json]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { compileBunModule } from '@cnikit/build';
import { compileLauncher } from './lib/launcher.ts';
import { median } from './lib/side-by-side.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '30' },
    callgrind: { type: 'boolean', default: false },
    bin: { type: 'string', default: resolve(import.meta.dirname, '..', 'dist-bin', 'loopback') },
    go: { type: 'string', default: '/usr/lib/cni/loopback' },
    /** Another cnikit executable (a hard link named loopback) measured in the same rounds, e.g. an earlier build. */
    before: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const RUNS = Number(values.runs);
const dir = mkdtempSync(join(tmpdir(), 'cnikit-bench-startup-'));
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' / ');

try {
  const empties: Record<string, string> = {
    nothing: '',
    writeSync: "import { writeSync } from 'node:fs';\nwriteSync(1, '{}\\n');\n",
    'process.stdout': "process.stdout.write('{}\\n');\n",
  };
  const addon = join(dir, 'cnikit_sys.node');
  writeFileSync(addon, ''); // compileBun embeds a file; an empty one stands in for the addon
  const impls: Array<[string, string]> = [['cnikit', values.bin]];
  if (values.before) impls.push(['cnikit (--before)', values.before]);
  for (const [name, src] of Object.entries(empties)) {
    const d = join(dir, name.replace(/\W/g, '_'));
    mkdirSync(d);
    writeFileSync(join(d, 'entry.ts'), src);
    // compiled exactly as the build compiles cnikit's bun back-end (Bun.build, ESM bytecode, splitting)
    await compileBunModule({
      entry: join(d, 'entry.ts'),
      addon,
      outFile: join(d, 'empty'),
      workDir: d,
      log: () => {},
    });
    impls.push([`empty (${name})`, join(d, 'empty')]);
  }
  if (existsSync(values.go)) impls.push(['Go', values.go]);

  const launch = compileLauncher(dir);
  const env = { CNI_COMMAND: 'VERSION', PATH: process.env.PATH ?? '' };
  const input = '{"cniVersion":"1.0.0"}';
  const wall: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (const [name, bin] of impls) {
    launch(bin, env, input); // warm the page cache
    wall[name] = [];
    cpu[name] = [];
  }
  const load0 = load();
  for (let i = 0; i < RUNS; i++) {
    for (const [name, bin] of impls) {
      const r = launch(bin, env, input);
      wall[name]!.push(r.ms);
      cpu[name]!.push(r.cpuMs);
    }
  }
  const load1 = load();
  const instr: Record<string, number> = {};
  if (values.callgrind) {
    for (const [name, bin] of impls) {
      const r = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', bin], {
        env,
        input,
        encoding: 'utf8',
      });
      const m = /refs:\s+([\d,]+)/.exec(r.stderr);
      if (m) instr[name] = Number(m[1]!.replace(/,/g, ''));
    }
  }
  const rows = impls.map(([name]) => ({
    name,
    wallMs: median(wall[name]!),
    cpuMs: median(cpu[name]!),
    ...(instr[name] !== undefined ? { instructions: instr[name] } : {}),
  }));
  if (values.json) {
    console.log(JSON.stringify({ runs: RUNS, load: [load0, load1], rows }));
  } else {
    const ref = (n: string) => rows.find((r) => r.name === n);
    const ws = ref('empty (writeSync)');
    const go = ref('Go');
    console.log(`VERSION start-up, ${RUNS} alternating rounds, medians; load average ${load0} → ${load1}`);
    for (const r of rows) {
      console.log(
        `  ${r.name.padEnd(24)} wall ${r.wallMs.toFixed(2).padStart(7)} ms  CPU ${r.cpuMs.toFixed(2).padStart(7)} ms` +
          (r.instructions !== undefined ? `  ${(r.instructions / 1e6).toFixed(2).padStart(6)} M instr` : '') +
          (ws
            ? `   /writeSync ${(r.wallMs / ws.wallMs).toFixed(2)}× wall, ${(r.cpuMs / ws.cpuMs).toFixed(2)}× CPU`
            : '') +
          (go ? `   /Go ${(r.wallMs / go.wallMs).toFixed(2)}×` : ''),
      );
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
