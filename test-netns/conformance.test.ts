/**
 * The conformance matrix (issue 27): `cnikit conformance` (the compiled executable, as a user runs it) against every
 * cnikit plugin in dist-bin/ and every Go reference plugin in /usr/lib/cni that has a configuration list in
 * test-netns/conformance/<plugin>.conflist — the same list for both implementations (drop-in replacements, same
 * keys). Every failure must be one of the documented ones below (a real defect, with its spec section; the list is
 * the matrix of docs/conformance.md), and every documented failure must still happen, so the docs cannot go stale.
 * Plugins without a list are left out for the reasons docs/conformance.md gives (kernel features this machine lacks,
 * a daemon, a device to hand over). Kit runs go three at a time.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Report } from '@cnikit/conformance';
import { DIST, ensureBuilt, GO_CNI, ROOT } from './dist.ts';

const LISTS = join(ROOT, 'test-netns', 'conformance');
const PLUGINS = readdirSync(LISTS)
  .filter((f) => f.endsWith('.conflist'))
  .map((f) => f.slice(0, -'.conflist'.length))
  .sort();

/** CNI_IFNAME per plugin (default eth0). */
const IFNAME: Record<string, string> = { loopback: 'lo' };

/** The reference's VERSION answers with its own current version, not the one asked for. */
const GO_VERSION_ECHO =
  'VERSION prints cniVersion "1.0.0" whatever was asked (§5 VERSION Success: "The value of cniVersion specified on input")';

const LOOPBACK_CHECK = 'CHECK passes with ::1/128 of its result gone (§2 CHECK "should return an error")';
const SBR_CHECK = 'CHECK passes with the routes it added gone (§2 CHECK "should return an error")';

/**
 * Documented failures: implementation → plugin → check ID → the defect (docs/conformance.md explains each). Every
 * plugin with a list fails `version.output` in both implementations (see GO_VERSION_ECHO; cnikit answers like the
 * reference on purpose).
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
    portmap: { 'check.after-add': 'CHECK looks for an IPv6 DNAT chain it never created (§2 CHECK)' },
    sbr: {
      'check.tampered': SBR_CHECK,
      'del.without-add': 'DEL fails "Failed to get link eth0" (§2 DEL MUST succeed when things are missing)',
      'del.netns-gone': 'DEL fails "unknown FS magic" with the namespace gone (§2 DEL)',
    },
  },
  cnikit: {
    loopback: { 'check.tampered': LOOPBACK_CHECK },
    sbr: { 'check.tampered': SBR_CHECK },
  },
};

function expected(impl: 'go' | 'cnikit', plugin: string): Record<string, string> {
  return { 'version.output': GO_VERSION_ECHO, ...(EXPECTED[impl][plugin] ?? {}) };
}

function kit(exe: string, plugin: string, name: string): Promise<Report> {
  const args = [
    'conformance',
    '--plugin',
    plugin,
    '--config',
    join(LISTS, `${name}.conflist`),
    '--report-json',
    '--concurrency',
    '4',
    ...(IFNAME[name] ? ['--ifname', IFNAME[name]] : []),
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

describe('conformance matrix: cnikit and the Go reference plugins', () => {
  test('every failure is a documented defect, every documented defect still fails', async (t) => {
    ensureBuilt();
    const exe = join(DIST, 'cnikit');
    const runs = PLUGINS.flatMap((p) => [
      { impl: 'cnikit' as const, name: p, path: join(DIST, p) },
      { impl: 'go' as const, name: p, path: join(GO_CNI, p) },
    ]).filter((r) => existsSync(r.path));
    assert.ok(
      runs.some((r) => r.impl === 'go'),
      `no Go plugin in ${GO_CNI} (Debian: containernetworking-plugins)`,
    );
    const reports = await pool(
      runs.map((r) => async () => ({ ...r, report: await kit(exe, r.path, r.name) })),
      3,
    );
    const problems: string[] = [];
    for (const { impl, name, report } of reports) {
      const failed = report.results.filter((x) => x.status === 'fail');
      t.diagnostic(
        `${impl} ${name}: ${report.counts.pass} pass, ${report.counts.fail} fail, ${report.counts.skip} skip (${(report.durationMs / 1000).toFixed(1)} s)${failed.length ? ` — ${failed.map((f) => f.id).join(', ')}` : ''}`,
      );
      const want = expected(impl, name);
      for (const f of failed) {
        if (!want[f.id]) problems.push(`${impl} ${name}: ${f.id} fails, not documented:\n${f.detail}`);
      }
      for (const id of Object.keys(want)) {
        if (!failed.some((f) => f.id === id))
          problems.push(`${impl} ${name}: ${id} is documented as failing (${want[id]}) but does not fail`);
      }
    }
    assert.deepEqual(problems, [], problems.join('\n\n'));
  });
});
