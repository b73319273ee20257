/**
 * @cnikit/conformance — tests any CNI plugin executable against the CNI spec 1.1.0 in private namespaces:
 * `runConformance({ plugin, config })` from a test file, `cnikit conformance` / `cnikit-conformance` on the command
 * line. Every export here is public API.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Fixtures } from './fixtures.ts';
import { runIsolated } from './isolate.ts';
import type { Report } from './kit.ts';

export { CHECKS, type CheckInfo, checkInfo, KIT_VERSIONS, SPEC_URL, selectChecks } from './catalog.ts';
export { type ConformanceContext, type ConformanceIO, conformanceMain, usage } from './cli.ts';
export {
  type DaemonFixture,
  FixtureError,
  type Fixtures,
  type HostLinkFixture,
  parseFixtures,
} from './fixtures.ts';
export type { CallRecord, CheckResult, Report, Status } from './kit.ts';
export { capabilitySamples, SAMPLE_CAPABILITY_ARGS } from './kit.ts';
export { formatJson, formatJunit, formatTable, reproLine, suppliedText } from './report.ts';

export interface ConformanceOptions {
  /** The plugin executable under test. */
  plugin: string;
  /** The network configuration list: a file path or the parsed object. */
  config: string | Record<string, unknown>;
  /** Check IDs or prefixes (`add.*`). */
  only?: readonly string[];
  /** CNI_PATH (default: the plugin's directory). */
  cniPath?: readonly string[];
  /** CNI_IFNAME (default eth0). */
  ifName?: string;
  /** Containers in the concurrency check (default 6). */
  concurrency?: number;
  /** Seconds per plugin call (default 30). */
  timeoutSeconds?: number;
  /** Host links, a link in every container, daemons and declared skips (docs/conformance.md, "Fixtures"). */
  fixtures?: Fixtures;
}

/** This package's CLI module (resolved on use: a bundle that carries the package has no such file). */
const bin = () =>
  fileURLToPath(new URL(`./bin.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url));

/**
 * Run the kit (as root) in its own private mount namespace — a child process, so the calling process's namespaces
 * are never changed — and resolve to its report. Rejects when the kit could not run (usage error, no root).
 */
export async function runConformance(opts: ConformanceOptions): Promise<Report> {
  const tmp = mkdtempSync(join(tmpdir(), 'cnikit-conformance-'));
  try {
    let config = opts.config;
    if (typeof config !== 'string') {
      const file = join(tmp, 'config.conflist');
      writeFileSync(file, JSON.stringify(config));
      config = file;
    }
    const fixtures = opts.fixtures ? join(tmp, 'fixtures.json') : undefined;
    if (fixtures) writeFileSync(fixtures, JSON.stringify(opts.fixtures));
    const args = [
      '--plugin',
      opts.plugin,
      '--config',
      config,
      '--report-json',
      ...(opts.only?.length ? ['--only', opts.only.join(',')] : []),
      ...(opts.cniPath ? ['--cni-path', opts.cniPath.join(':')] : []),
      ...(opts.concurrency ? ['--concurrency', String(opts.concurrency)] : []),
      ...(opts.ifName ? ['--ifname', opts.ifName] : []),
      ...(opts.timeoutSeconds ? ['--timeout', String(opts.timeoutSeconds)] : []),
      ...(fixtures ? ['--fixtures', fixtures] : []),
    ];
    const r = await runIsolated(process.execPath, [...process.execArgv, bin(), ...args], { stdio: 'pipe' });
    if (r.code === 2 || !r.stdout.trim())
      throw new Error(`cnikit conformance failed (exit ${r.code}): ${r.stderr.trim()}`);
    return JSON.parse(r.stdout) as Report;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
