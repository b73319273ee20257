/**
 * `cnikit conformance --plugin PATH --config CONFLIST [--only IDS] [--json] [--junit FILE]` (also the
 * `cnikit-conformance` executable of this package). Exit 0 when no check failed, 1 when one did, 2 on a usage error.
 */
import { accessSync, constants, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CHECKS, SPEC_URL, selectChecks } from './catalog.ts';
import {
  FixtureError,
  type Fixtures,
  mergeFixtures,
  parseFixtures,
  parseHostLinkFlag,
  parseSkipFlag,
} from './fixtures.ts';
import { ISOLATED_ENV, isIsolated, privateStateDir, runIsolated } from './isolate.ts';
import { Kit, type Report } from './kit.ts';
import { formatJson, formatJunit, formatTable } from './report.ts';

export interface ConformanceIO {
  env: NodeJS.ProcessEnv;
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

export interface ConformanceContext {
  /** The command that runs this CLI again (argv before the arguments), for the re-run in a private mount namespace. */
  reexec: readonly string[];
  /** The name in messages (default `cnikit conformance`). */
  name?: string;
}

function wrap(text: string, width: number, indent: string): string {
  const words = text.split(/\s+/);
  const lines: string[] = [];
  let cur = '';
  for (const w of words) {
    if (cur && cur.length + 1 + w.length > width) {
      lines.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) lines.push(cur);
  return lines.map((l) => indent + l).join('\n');
}

export function usage(name = 'cnikit conformance'): string {
  return `usage: ${name} --plugin PATH --config CONFLIST [--only IDS] [--json] [--junit FILE]
                          [--cni-path DIRS] [--ifname NAME] [--concurrency N] [--timeout SECONDS] [--list] [--help]
                          [--fixtures FILE] [--host-link NAME:TYPE[:CIDR,…]] [--container-link MASTER] [--skip ID=WHY]

Tests a CNI plugin executable (any language) against the CNI spec 1.1.0, in private network namespaces and a private
mount namespace (/var/lib/cni and /run/cni are fresh directories there); the machine's namespaces and files are never
touched. Needs root, iproute2 and util-linux (unshare).

  --plugin PATH      the plugin under test: the entry of the list whose type is the file name, else the last one;
                     the plugins before it run from CNI_PATH first to produce its prevResult, as a runtime does
  --config CONFLIST  a network configuration list (.conflist JSON); its cniVersion is the version of the lifecycle
                     checks
  --only IDS         comma-separated check IDs or prefixes (add.*, env.); repeatable
  --json             the results as JSON on stdout: a list of {id, status: pass|fail|skip, detail, title, spec, …}
  --junit FILE       also write JUnit XML to FILE
  --cni-path DIRS    CNI_PATH (colon-separated; default: the plugin's directory)
  --ifname NAME      CNI_IFNAME of the attachments (default eth0; the loopback plugin needs lo)
  --concurrency N    containers in the concurrency check (default 6)
  --timeout SECONDS  per plugin call (default 30)
  --list             print the check IDs and exit

Fixtures (what a node has before the plugin runs; all of it in the kit's private namespaces, gone at the end):
  --host-link NAME:TYPE[:CIDR,…]
                     a link in the sandbox's host namespace, up, before every check (made again when a check took
                     it away): the parent of macvlan/ipvlan/vlan (master), a device for host-device (type veth: its
                     peer NAMEp stays in the host), a bridge with an address for a DHCP server; repeatable
  --container-link MASTER
                     every container gets CNI_IFNAME already, a veth whose host end is a port of the host link
                     MASTER: for plugins that work on an interface another plugin made (IPAM such as dhcp)
  --skip ID=WHY      a check that cannot apply to this configuration, with the reason (reported as a skip);
                     repeatable
  --fixtures FILE    all of the above and daemons, as JSON: {"hostLinks": [{"name", "type", "addresses"?}],
                     "containerLink": {"master"}, "daemons": [{"argv": [...], "readyPath"?}], "skip": {ID: WHY}};
                     daemons start in the sandbox's host namespace after the links (ready when readyPath exists) and
                     are stopped at the end; in argv and readyPath {plugin} is the plugin under test and {dir} a
                     private directory. Example (dhcp): a bridge with 10.95.0.1/24, containerLink on it, daemons
                     dnsmasq (--dhcp-range on the bridge) and ["{plugin}", "daemon"] ready at /run/cni/dhcp.sock
Exit status: 0 when no check failed, 1 when one did, 2 on a usage error.
Every failure says what was expected, what happened, and the exact environment and stdin that reproduce it.

Checks (spec sections of ${SPEC_URL}):
${CHECKS.map((c) => `  ${c.id} — ${c.title} [${c.spec}]\n${wrap(c.explain, 112, '      ')}`).join('\n')}
`;
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: false,
    options: {
      plugin: { type: 'string' },
      config: { type: 'string' },
      only: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      junit: { type: 'string' },
      'cni-path': { type: 'string' },
      ifname: { type: 'string' },
      concurrency: { type: 'string' },
      timeout: { type: 'string' },
      list: { type: 'boolean' },
      fixtures: { type: 'string' },
      'host-link': { type: 'string', multiple: true },
      'container-link': { type: 'string' },
      skip: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h' },
      // the full report as JSON (runConformance of the package API)
      'report-json': { type: 'boolean' },
    },
  });
}

const FILE_FLAGS = ['--config', '--fixtures'];

/**
 * The arguments of the re-run in a private mount namespace: the files the kit reads (`--config`, `--fixtures`, in
 * both the `--flag path` and the `--flag=path` form) made absolute, the rest passed as given.
 */
export function reexecArgs(argv: readonly string[]): string[] {
  let pathNext = false;
  return argv.map((a) => {
    if (pathNext) {
      pathNext = false;
      return resolve(a);
    }
    const eq = a.indexOf('=');
    if (eq > 0 && FILE_FLAGS.includes(a.slice(0, eq))) return `${a.slice(0, eq)}=${resolve(a.slice(eq + 1))}`;
    if (FILE_FLAGS.includes(a)) pathNext = true;
    return a;
  });
}

/** Run the CLI; resolves to the exit code. */
export async function conformanceMain(
  argv: readonly string[],
  io: ConformanceIO,
  ctx: ConformanceContext,
): Promise<number> {
  const name = ctx.name ?? 'cnikit conformance';
  let values: ReturnType<typeof parse>['values'];
  try {
    values = parse(argv).values;
  } catch (e) {
    io.stderr.write(`${name}: ${(e as Error).message}\n${usage(name)}`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(usage(name));
    return 0;
  }
  if (values.list) {
    io.stdout.write(`${CHECKS.map((c) => `${c.id}\t${c.spec}`).join('\n')}\n`);
    return 0;
  }
  const bad = (msg: string) => {
    io.stderr.write(`${name}: ${msg}\n(${name} --help)\n`);
    return 2;
  };
  if (!values.plugin) return bad('--plugin is required');
  if (!values.config) return bad('--config is required');
  const only = (values.only ?? []).flatMap((o) => o.split(',')).filter(Boolean);
  try {
    selectChecks(only);
  } catch (e) {
    return bad((e as Error).message);
  }
  const plugin = resolve(values.plugin);
  try {
    accessSync(plugin, constants.X_OK);
  } catch {
    return bad(`${values.plugin} is not an executable file`);
  }
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(readFileSync(values.config, 'utf8'));
  } catch (e) {
    return bad(`cannot read the configuration list ${values.config}: ${(e as Error).message}`);
  }
  const concurrency = values.concurrency === undefined ? 6 : Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 2 || concurrency > 64)
    return bad('--concurrency takes a whole number from 2 to 64');
  const timeout = values.timeout === undefined ? 30 : Number(values.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0) return bad('--timeout takes a positive number of seconds');
  let fixtures: Fixtures;
  try {
    const fromFile = values.fixtures
      ? parseFixtures(JSON.parse(readFileSync(values.fixtures, 'utf8')), values.fixtures)
      : {};
    const hostLinks = (values['host-link'] ?? []).map(parseHostLinkFlag);
    fixtures = mergeFixtures(fromFile, {
      ...(hostLinks.length ? { hostLinks } : {}),
      ...(values['container-link'] ? { containerLink: { master: values['container-link'] } } : {}),
      ...(values.skip?.length ? { skip: Object.fromEntries(values.skip.map(parseSkipFlag)) } : {}),
    });
  } catch (e) {
    if (e instanceof FixtureError) return bad(e.message);
    return bad(`cannot read the fixtures ${values.fixtures}: ${(e as Error).message}`);
  }
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return bad('needs root (network and mount namespaces)');

  if (!isIsolated(io.env) && io.env[ISOLATED_ENV] !== 'pending') {
    // run again in a private mount namespace
    const [cmd, ...pre] = ctx.reexec;
    if (!cmd) return bad('cannot run itself again (no command)');
    const r = await runIsolated(cmd, [...pre, ...reexecArgs(argv)]);
    return r.code;
  }
  const state = privateStateDir(io.env);
  let kit: Kit | undefined;
  try {
    kit = new Kit({
      plugin,
      config,
      only,
      concurrency,
      fixtures,
      ...(values.ifname ? { ifName: values.ifname } : {}),
      timeoutMs: timeout * 1000,
      stateDir: state.dir,
      ...(values['cni-path'] ? { cniPath: values['cni-path'].split(':').filter(Boolean) } : {}),
      onResult: (r) => {
        if (!values.json && !values['report-json'])
          io.stderr.write(`  ${r.status.toUpperCase().padEnd(4)} ${r.id} (${r.durationMs} ms)\n`);
      },
    });
    const report: Report = await kit.run();
    if (values.junit) writeFileSync(values.junit, formatJunit([report]));
    io.stdout.write(
      values['report-json']
        ? `${JSON.stringify(report)}\n`
        : values.json
          ? formatJson(report)
          : formatTable(report),
    );
    return report.counts.fail > 0 ? 1 : 0;
  } catch (e) {
    io.stderr.write(`${name}: ${(e as Error).message}\n`);
    return 2;
  } finally {
    kit?.dispose();
    state.cleanup();
  }
}
