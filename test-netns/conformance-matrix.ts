/**
 * The conformance matrix: test-netns/conformance.test.ts runs the rows this machine's kernel runs; the rows
 * that need link types only the kernel lab's Debian 6.1 kernel has (LAB_ROWS) are set apart for a marker file in the
 * lab (not in the matrix yet: docs/conformance.md says why). For every row:
 * `cnikit conformance` (the compiled executable, as a user runs it) against every cnikit plugin in dist-bin/ and every
 * Go reference plugin in /usr/lib/cni that has a configuration list in test-netns/conformance/<plugin>.conflist — the
 * same list (and fixtures, <plugin>.fixtures.json) for both implementations (drop-in replacements, same keys). Every
 * failure must be one of the documented ones below (a real defect, with its spec section; the list is the matrix of
 * docs/conformance.md), and every documented failure must still happen, so the docs cannot go stale.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Report } from '@cnikit/conformance';
import type { KernelFeatureName } from '@cnikit/testing';
import { DIST, ensureBuilt, GO_CNI, ROOT } from './dist.ts';

export const LISTS = join(ROOT, 'test-netns', 'conformance');

/** Every plugin with a list. */
export const PLUGINS = readdirSync(LISTS)
  .filter((f) => f.endsWith('.conflist'))
  .map((f) => f.slice(0, -'.conflist'.length))
  .sort();

/**
 * The rows that need the kernel lab (the features a lab file's marker line would name): the link types the plugin
 * creates or its fixtures need (a dummy parent for macvlan/ipvlan/vlan). conformance.test.ts leaves them out.
 */
export const LAB_ROWS: Record<string, KernelFeatureName[]> = {
  dummy: ['dummy'],
  ipvlan: ['ipvlan', 'dummy'],
  macvlan: ['macvlan', 'dummy'],
  vlan: ['vlan', 'dummy'],
  vrf: ['vrf'],
};

/**
 * `rows` restricted to CNIKIT_CONFORMANCE_ROWS (comma-separated plugin names) when it is set: the inner loop's one
 * row (`node scripts/run-tests.mjs --plugin NAME`).
 */
export function selectRows(rows: readonly string[]): string[] {
  const only = process.env.CNIKIT_CONFORMANCE_ROWS;
  if (!only) return [...rows];
  const want = only.split(',').filter(Boolean);
  return rows.filter((r) => want.includes(r));
}

/**
 * The checks a lab row runs (`--only`): those whose outcome depends on the link type the plugin makes — ADD in every
 * version against the kernel, a failed ADD, CHECK and tampering, the DEL variants, concurrency, GC, STATUS,
 * determinism. Left out: VERSION (`version.*`), the environment variables (`env.*`) and malformed or oversized stdin
 * (`stdin.*`). Those are answered by the implementation's dispatcher before any link code runs (cnikit's skel, Go's
 * skel), the same code for every plugin of one implementation, and the host rows run them for 12 plugins of each;
 * under the lab's TCG they would cost ~20 s per row.
 */
export const LAB_CHECKS = ['add.*', 'check.*', 'del.*', 'concurrency', 'gc.*', 'status.*', 'determinism'];

/**
 * Rows without a Go reference plugin (cnikit's own plugins), with the reason: only cnikit's half runs, and a Go
 * executable of that name in /usr/lib/cni is not run.
 */
export const CNIKIT_ONLY: Record<string, string> = {
  'cluster-ipam': 'the reference has no cluster-wide IPAM (its fixtures start a real etcd in the sandbox)',
};

/** CNI_IFNAME per plugin (default eth0). */
const IFNAME: Record<string, string> = { loopback: 'lo' };

/**
 * The reference's VERSION answers with its own current version, not the one asked for. cnikit answers with the
 * requested one (SPEC.md §5 VERSION Success; a deliberate difference from the Go plugins, docs/plugins/common.md).
 */
const GO_VERSION_ECHO =
  'VERSION prints cniVersion "1.0.0" whatever was asked (§5 VERSION Success: "The value of cniVersion specified on input")';

const LOOPBACK_CHECK = 'CHECK passes with ::1/128 of its result gone (§2 CHECK "should return an error")';
const SBR_CHECK = 'CHECK passes with the routes it added gone (§2 CHECK "should return an error")';
/** ipvlan and vlan 1.1.1 make the link under a temporary name in the container, then rename it. */
const TMP_LINK_LEFT =
  'the failed ADD (eth0 exists) leaves its link in the container under the temporary name (rename error returned, link not deleted; kit rule, §2 ADD)';
const VRF_ROUTES =
  'the result lists the default route, which enslaving eth0 to the VRF removed (§5 ADD Success)';

/**
 * Documented failures: implementation → plugin → check ID → the defect (docs/conformance.md explains each). Every Go
 * plugin with a list fails `version.output` (GO_VERSION_ECHO); cnikit's plugins fail nothing.
 */
export const EXPECTED: Record<'go' | 'cnikit', Record<string, Record<string, string>>> = {
  go: {
    loopback: {
      'add.0.1.0': 'prints interfaces/ips labelled 0.1.0 (§5: a 0.1.0/0.2.0 result has ip4/ip6)',
      'add.0.2.0': 'prints interfaces/ips labelled 0.2.0 (§5: a 0.1.0/0.2.0 result has ip4/ip6)',
      'check.tampered': LOOPBACK_CHECK,
    },
    ptp: {
      'add.ifname-exists': 'the failed ADD leaves host-local last_reserved_ip advanced (IPAM runs first)',
      'add.failure-clean': 'the failed ADD leaves host-local last_reserved_ip advanced (IPAM runs first)',
    },
    'host-device': {
      'add.ifname-exists':
        'the failed ADD leaves the device in the container under its host name (moved before the rename fails)',
      'del.twice': 'the second DEL fails "failed to find eth0" (§2 DEL MUST accept multiple DEL calls)',
      'del.without-add': 'DEL fails "failed to find eth0" (§2 DEL: success when things are missing)',
      'del.netns-gone': 'DEL fails "failed to open netns" with the namespace gone (§2 DEL)',
    },
    portmap: { 'check.after-add': 'CHECK looks for an IPv6 DNAT chain it never created (§2 CHECK)' },
    // kernel lab rows (LAB_ROWS)
    ipvlan: { 'add.ifname-exists': TMP_LINK_LEFT },
    vlan: { 'add.ifname-exists': TMP_LINK_LEFT },
    vrf: {
      'add.0.3.1': VRF_ROUTES,
      'add.0.4.0': VRF_ROUTES,
      'add.1.0.0': VRF_ROUTES,
      'check.tampered': 'CHECK ignores its own error and always succeeds (§2 CHECK "should return an error")',
    },
    sbr: {
      'check.tampered': SBR_CHECK,
      'del.without-add': 'DEL fails "Failed to get link eth0" (§2 DEL MUST succeed when things are missing)',
      'del.netns-gone': 'DEL fails "unknown FS magic" with the namespace gone (§2 DEL)',
    },
  },
  cnikit: {},
};

function expected(impl: 'go' | 'cnikit', plugin: string): Record<string, string> {
  return {
    ...(impl === 'go' ? { 'version.output': GO_VERSION_ECHO } : {}),
    ...(EXPECTED[impl][plugin] ?? {}),
  };
}

function kit(
  exe: string,
  plugin: string,
  name: string,
  timeoutSeconds: number,
  only: readonly string[] | undefined,
): Promise<Report> {
  const fixtures = join(LISTS, `${name}.fixtures.json`);
  const args = [
    'conformance',
    '--plugin',
    plugin,
    '--config',
    join(LISTS, `${name}.conflist`),
    '--report-json',
    '--concurrency',
    '4',
    '--timeout',
    String(timeoutSeconds),
    ...(existsSync(fixtures) ? ['--fixtures', fixtures] : []),
    ...(IFNAME[name] ? ['--ifname', IFNAME[name]] : []),
    ...(only ? ['--only', only.join(',')] : []),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(stdout) as Report);
      } catch {
        reject(new Error(`cnikit conformance ${name} exited ${code}: ${stderr}`));
      }
    });
  });
}

/** Run `jobs` with at most `n` at a time. */
async function pool<T>(jobs: Array<() => Promise<T>>, n: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await (jobs[i] as () => Promise<T>)();
      }
    }),
  );
  return out;
}

/**
 * CNIKIT_CONFORMANCE_IMPLS=cnikit (the inner loop, `run-tests --plugin`) runs cnikit's half of each row only: the Go
 * half checks that the reference's documented failures still happen, which no change of ours alters; `npm test` runs
 * both.
 */
function implSelected(impl: 'go' | 'cnikit'): boolean {
  const only = (process.env.CNIKIT_CONFORMANCE_IMPLS ?? '').split(',').filter(Boolean);
  return only.length === 0 || only.includes(impl);
}

/**
 * Run the kit over `plugins` (both implementations where they exist), `parallel` runs at a time, and require
 * exactly the documented failures (of the checks that ran: `only` restricts them).
 */
export async function runMatrix(
  t: TestContext,
  plugins: readonly string[],
  opts: { parallel: number; timeoutSeconds: number; only?: readonly string[] },
): Promise<void> {
  ensureBuilt();
  const exe = join(DIST, 'cnikit');
  const runs = plugins
    .flatMap((p) => [
      { impl: 'cnikit' as const, name: p, path: join(DIST, p) },
      { impl: 'go' as const, name: p, path: join(GO_CNI, p) },
    ])
    .filter((r) => existsSync(r.path) && implSelected(r.impl) && !(r.impl === 'go' && CNIKIT_ONLY[r.name]));
  assert.ok(
    !implSelected('go') || plugins.every((p) => CNIKIT_ONLY[p]) || runs.some((r) => r.impl === 'go'),
    `no Go plugin in ${GO_CNI} (Debian: containernetworking-plugins)`,
  );
  for (const p of plugins)
    assert.ok(existsSync(join(DIST, p)), `${p} has a list but no cnikit executable in dist-bin/`);
  const reports = await pool(
    runs.map((r) => async () => ({
      ...r,
      report: await kit(exe, r.path, r.name, opts.timeoutSeconds, opts.only),
    })),
    opts.parallel,
  );
  const problems: string[] = [];
  for (const { impl, name, report } of reports) {
    const failed = report.results.filter((x) => x.status === 'fail');
    const skipped = report.results.filter((x) => x.status === 'skip');
    t.diagnostic(
      `${impl} ${name}: ${report.counts.pass} pass, ${report.counts.fail} fail, ${report.counts.skip} skip (${(report.durationMs / 1000).toFixed(1)} s)${failed.length ? ` — ${failed.map((f) => f.id).join(', ')}` : ''}; skipped: ${skipped.map((s) => s.id).join(', ')}`,
    );
    const ran = new Set(report.results.map((x) => x.id));
    const want = Object.fromEntries(Object.entries(expected(impl, name)).filter(([id]) => ran.has(id)));
    for (const f of failed) {
      if (!want[f.id]) problems.push(`${impl} ${name}: ${f.id} fails, not documented:\n${f.detail}`);
    }
    for (const id of Object.keys(want)) {
      if (!failed.some((f) => f.id === id))
        problems.push(`${impl} ${name}: ${id} is documented as failing (${want[id]}) but does not fail`);
    }
  }
  assert.deepEqual(problems, [], problems.join('\n\n'));
}
