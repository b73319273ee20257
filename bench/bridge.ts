/**
 * Benchmark: bridge + host-local ADD and DEL latency, cnikit (dist-bin/bridge, IPAM delegated in-process
 * through the multicall binary) vs the Go reference (/usr/lib/cni/bridge + host-local), side by side.
 *
 *   node --conditions=cnikit-source --import tsx bench/bridge.ts [--runs=20] [--preload=200] [--masq]
 *
 * Everything runs in private network namespaces: this process moves its main thread into a private
 * "host" namespace and executes the plugin binaries directly from there (as a runtime would on a node),
 * with one fresh container namespace per attachment. Each implementation gets its own bridge, subnet
 * and host-local store. Reported: median (and p90) wall time per exec, and ours/Go ratio.
 * Scenario 1: empty bridge. Scenario 2: `--preload` attachments already on each bridge.
 * Requires `npm run build` (dist-bin/) and root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setns } from '@cnikit/sys';
import { median, quantile } from './lib/side-by-side.ts';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg('runs', '20'));
const PRELOAD = Number(arg('preload', '200'));
const MASQ = process.argv.includes('--masq');

interface Impl {
  name: string;
  bin: string;
  path: string;
  bridge: string;
  subnet: string;
}
const impls: Impl[] = [
  {
    name: 'cnikit',
    bin: join(ROOT, 'dist-bin', 'bridge'),
    path: join(ROOT, 'dist-bin'),
    bridge: 'brbts',
    subnet: '10.61.0.0/16',
  },
  { name: 'go', bin: '/usr/lib/cni/bridge', path: '/usr/lib/cni', bridge: 'brbgo', subnet: '10.62.0.0/16' },
];
for (const i of impls) {
  if (!existsSync(i.bin)) {
    console.error(`missing ${i.bin}${i.name === 'cnikit' ? ' (run npm run build)' : ''}`);
    process.exit(1);
  }
}

const tag = `${process.pid.toString(36)}`;
const HOST = `cnikit-bench-${tag}-h`;
const created: string[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'cnikit-bench-'));
let nsCounter = 0;

function newNs(): string {
  const name = `cnikit-bench-${tag}-${nsCounter++}`;
  execFileSync('ip', ['netns', 'add', name]);
  created.push(name);
  return name;
}

function conf(i: Impl): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: `bench-${i.name}`,
    type: 'bridge',
    bridge: i.bridge,
    isDefaultGateway: true,
    ipMasq: MASQ,
    ipam: { type: 'host-local', ranges: [[{ subnet: i.subnet }]], dataDir },
  });
}

function call(i: Impl, cmd: 'ADD' | 'DEL', ns: string, id: string): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(i.bin, [], {
    env: {
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: id,
      CNI_NETNS: `/run/netns/${ns}`,
      CNI_IFNAME: 'eth0',
      CNI_PATH: i.path,
      PATH: process.env.PATH,
    },
    input: conf(i),
    encoding: 'utf8',
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${i.name} ${cmd} failed: ${r.stdout}${r.stderr}`);
  return ms;
}

const p90 = (xs: number[]) => quantile(xs, 0.9);

function measure(label: string): Record<string, { add: number[]; del: number[] }> {
  const out: Record<string, { add: number[]; del: number[] }> = {};
  for (const i of impls) out[i.name] = { add: [], del: [] };
  const namespaces = impls.map(() => Array.from({ length: RUNS }, () => newNs()));
  // interleave the implementations run by run so that drift affects both alike
  for (let r = 0; r < RUNS; r++) {
    for (const [k, i] of impls.entries())
      out[i.name]!.add.push(call(i, 'ADD', namespaces[k]![r]!, `${label}-${r}`));
  }
  for (let r = 0; r < RUNS; r++) {
    for (const [k, i] of impls.entries())
      out[i.name]!.del.push(call(i, 'DEL', namespaces[k]![r]!, `${label}-${r}`));
  }
  return out;
}

const summary: Array<{ scenario: string; op: string; impl: string; medianMs: number; p90Ms: number }> = [];

function report(title: string, res: Record<string, { add: number[]; del: number[] }>): void {
  for (const op of ['add', 'del'] as const) {
    for (const i of impls) {
      const xs = res[i.name]![op];
      summary.push({ scenario: title, op, impl: i.name, medianMs: median(xs), p90Ms: p90(xs) });
    }
  }
  console.log(`\n${title} (${RUNS} runs each${MASQ ? ', ipMasq' : ''})`);
  console.log('op   impl      median ms   p90 ms');
  for (const op of ['add', 'del'] as const) {
    for (const i of impls) {
      const xs = res[i.name]![op];
      console.log(
        `${op.toUpperCase().padEnd(4)} ${i.name.padEnd(8)} ${median(xs).toFixed(1).padStart(10)} ${p90(xs).toFixed(1).padStart(8)}`,
      );
    }
    const ratio = median(res.cnikit![op]) / median(res.go![op]);
    console.log(`${op.toUpperCase().padEnd(4)} ratio cnikit/go = ${ratio.toFixed(2)}`);
  }
}

const orig = openSync('/proc/self/ns/net', 'r');
try {
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  const fd = openSync(`/run/netns/${HOST}`, 'r');
  setns(fd);
  closeSync(fd);
  // warm-up (bridge creation, page cache) — not measured
  for (const i of impls) {
    const ns = newNs();
    call(i, 'ADD', ns, 'warm');
    call(i, 'DEL', ns, 'warm');
  }
  report('empty bridge', measure('a'));
  if (PRELOAD > 0) {
    process.stderr.write(`preloading ${PRELOAD} attachments per bridge…\n`);
    for (let n = 0; n < PRELOAD; n++) {
      for (const i of impls) call(i, 'ADD', newNs(), `pre-${n}`);
    }
    report(`with ${PRELOAD} attachments already on the bridge`, measure('b'));
  }
  mkdirSync(join(ROOT, '.bench'), { recursive: true });
  writeFileSync(
    join(ROOT, '.bench', MASQ ? 'bridge-masq.json' : 'bridge.json'),
    `${JSON.stringify({ runs: RUNS, preload: PRELOAD, masq: MASQ, summary }, null, 2)}\n`,
  );
} finally {
  setns(orig);
  closeSync(orig);
  for (const ns of [...created, HOST]) spawnSync('ip', ['netns', 'del', ns]);
  rmSync(dataDir, { recursive: true, force: true });
}
