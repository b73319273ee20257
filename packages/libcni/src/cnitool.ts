/**
 * `cnitool`: try a network by hand (Go's cnitool, cobra version at HEAD), as a command of cnikit's multicall
 * executable (`cnitool …` through a hard link, or `cnikit tool …`):
 *
 *   cnitool [options] add|check|del|gc|status NETWORK NETNS
 *   cnitool [options] add|check|del|gc|status NETWORK --netns-create NAME
 *   cnitool [options] gc --from-cri SOCKET [--dry-run] [NETWORK]
 *
 * Like the reference: the network is loaded from NETCONFPATH (default /etc/cni/net.d) with LoadNetworkConf, plugins
 * are found in CNI_PATH, the interface is `-i/--ifname`, else CNI_IFNAME, else eth0; CNI_ARGS (`K=V;K2=V2`) and
 * CAP_ARGS (a JSON object of capability arguments) are passed on; the container ID is `cnitool-` + the first 10
 * bytes (20 hex digits) of the SHA-512 of the absolute netns path; `add` prints the result JSON; `gc` without
 * `--keep` treats every cached attachment of the network as stale (the reference passes no valid attachments).
 *
 * Additions: `--netns-create NAME` uses /run/netns/NAME, creating it for `add` (`ip netns add`) when it does not
 * exist and removing it after a successful `del`; `--keep NETNS` (gc, repeatable) keeps the attachment of that
 * namespace; `gc --from-cri SOCKET` takes the valid attachments from the CRI runtime's pod sandboxes (cri-gc.ts),
 * `--dry-run` only prints what it would release; `--cache-dir DIR` (or CNI_CACHE_DIR) instead of /var/lib/cni; `--exec` runs every plugin as a process
 * even when it is this executable; `--timeout SECONDS`; `-v` tells how each plugin runs. Errors are printed as text on stderr (for a plugin error:
 * its code, message, details and stderr); the exit status is 1 for a failed operation and 2 for a usage error.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { formatResult, type Invoker } from '@cnikit/skel/invoke';
import { CniConfig } from './api.ts';
import type { RuntimeConf } from './cache.ts';
import { loadNetworkConf } from './conf.ts';
import { criGc, formatCriGcReport } from './cri-gc.ts';
import { LibcniError, PluginError } from './errors.ts';

export const DEFAULT_NET_DIR = '/etc/cni/net.d';
const NETNS_DIR = '/run/netns';
const COMMANDS = ['add', 'check', 'del', 'gc', 'status'] as const;
type ToolCommand = (typeof COMMANDS)[number];

export interface ToolIO {
  env: Readonly<Record<string, string | undefined>>;
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
  /** Working directory for a relative netns path (default process.cwd()). */
  cwd?: string;
  /** Runs the plugins (the multicall executable passes the Invoker holding its plugins); default skel's default. */
  invoker?: Invoker;
}

export const USAGE = `usage: cnitool [options] add|check|del|gc|status NETWORK NETNS
       cnitool [options] add|check|del|gc|status NETWORK --netns-create NAME
       cnitool [options] gc --from-cri SOCKET [--dry-run] [NETWORK]

Runs the network configuration list NETWORK (from NETCONFPATH, default ${DEFAULT_NET_DIR}) against the network
namespace NETNS (a path such as /run/netns/ci1). Plugins are looked up in CNI_PATH.

options:
  -i, --ifname IF        interface name (default: CNI_IFNAME, else eth0)
  --netns-create NAME    use ${NETNS_DIR}/NAME: add creates it if needed, del removes it afterwards
  --keep NETNS           gc: keep the attachment of this namespace (repeatable); without it every
                         cached attachment of NETWORK is deleted, as the reference does
  --from-cri SOCKET      gc: the valid attachments are the pod sandboxes (ready or not) that the CRI runtime
                         at SOCKET lists (e.g. /run/containerd/containerd.sock); without NETWORK, every
                         network of NETCONFPATH; if the runtime cannot be asked, nothing is released
  --dry-run              gc --from-cri: print what would be released, change nothing
  --grace SECONDS        gc --from-cri: keep what is younger than this (default 60: a sandbox in creation)
  --json                 gc --from-cri: print the report as one JSON object
  --cache-dir DIR        result cache directory (default: CNI_CACHE_DIR, else /var/lib/cni)
  --timeout SECONDS      give up (and kill the running plugin) after this long
  --exec                 run every plugin as a process, even cnikit's own (which run in-process)
  -v, --verbose          tell on stderr how each plugin of the list runs (in-process or exec)
  -h, --help             this text

environment: NETCONFPATH, CNI_PATH, CNI_IFNAME, CNI_ARGS (K=V;K2=V2), CAP_ARGS (JSON capability arguments)
`;

class UsageError extends Error {}

/** The container ID cnitool derives from a netns path: `cnitool-` + 20 hex digits of its SHA-512. */
export function containerIdFor(netnsPath: string): string {
  return `cnitool-${createHash('sha512').update(netnsPath).digest('hex').slice(0, 20)}`;
}

/** Go cnitool parseArgs: `K=V;K2=V2`, every pair exactly one `=` with both sides non-empty. */
export function parseCniArgs(value: string): Array<[string, string]> {
  return value.split(';').map((pair) => {
    const kv = pair.split('=');
    if (kv.length !== 2 || kv[0] === '' || kv[1] === '')
      throw new LibcniError(`invalid CNI_ARGS pair ${JSON.stringify(pair)}`);
    return [kv[0]!, kv[1]!];
  });
}

function netnsName(name: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name)) {
    throw new UsageError(
      `invalid --netns-create name ${JSON.stringify(name)}: use letters, digits, '_', '.', '-' (at most 64)`,
    );
  }
  return name;
}

function ip(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.error) throw new LibcniError(`ip ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new LibcniError(`ip ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim()}`);
}

/** Human-readable text of an error (the reference prints err; a plugin error also gets its code and stderr). */
export function describeError(e: unknown): string {
  if (PluginError.is(e)) {
    const lines = [e.message, `  CNI error code ${e.code} from plugin "${e.plugin}" (${e.command})`];
    const stderr = e.stderr.trim();
    if (stderr) lines.push('  plugin stderr:', ...stderr.split('\n').map((l) => `    ${l}`));
    return lines.join('\n');
  }
  return e instanceof Error ? e.message : String(e);
}

/** Run cnitool with `args` (after the program name). Resolves to the exit status; never throws. */
export async function runCnitool(args: readonly string[], io: ToolIO): Promise<number> {
  try {
    return await run(args, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`cnitool: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    io.stderr.write(`cnitool: ${describeError(e)}\n`);
    return 1;
  }
}

async function run(argv: readonly string[], io: ToolIO): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  const [command, network, netnsArg, ...extra] = positionals;
  if (command === undefined) throw new UsageError('missing command');
  if (!(COMMANDS as readonly string[]).includes(command))
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  if (values['dry-run'] && values['from-cri'] === undefined)
    throw new UsageError('--dry-run is for gc --from-cri');
  if ((values.grace !== undefined || values.json) && values['from-cri'] === undefined)
    throw new UsageError('--grace and --json are for gc --from-cri');
  if (values['from-cri'] !== undefined) {
    if (command !== 'gc') throw new UsageError('--from-cri is for gc only');
    if (netnsArg !== undefined || values['netns-create'] !== undefined || values.keep)
      throw new UsageError(
        'gc --from-cri takes no NETNS, --netns-create or --keep: the CRI says what is valid',
      );
    return await gcFromCri(values, network, io);
  }
  if (network === undefined) throw new UsageError('network name and namespace are required');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  const created = values['netns-create'];
  if (created !== undefined && netnsArg !== undefined)
    throw new UsageError('give either NETNS or --netns-create NAME, not both');
  if (created === undefined && netnsArg === undefined)
    throw new UsageError('network name and namespace are required');
  if (values.keep && command !== 'gc') throw new UsageError('--keep is for gc only');
  let timeoutMs: number | undefined;
  if (values.timeout !== undefined) {
    const s = Number(values.timeout);
    if (!Number.isFinite(s) || s <= 0)
      throw new UsageError(`invalid --timeout ${JSON.stringify(values.timeout)}: seconds > 0`);
    timeoutMs = Math.round(s * 1000);
  }

  const cmd = command as ToolCommand;
  const env = io.env;
  const netDir = env.NETCONFPATH || DEFAULT_NET_DIR;
  const list = loadNetworkConf(netDir, network);

  let capabilityArgs: Record<string, unknown> | undefined;
  const capText = env.CAP_ARGS ?? '';
  if (capText.length > 0) {
    let v: unknown;
    try {
      v = JSON.parse(capText);
    } catch (e) {
      throw new LibcniError(`CAP_ARGS: ${(e as Error).message}`);
    }
    if (v !== null && (typeof v !== 'object' || Array.isArray(v))) {
      throw new LibcniError('CAP_ARGS: json: cannot unmarshal into Go value of type map[string]interface {}');
    }
    capabilityArgs = (v ?? undefined) as Record<string, unknown> | undefined;
  }
  const argsText = env.CNI_ARGS ?? '';
  const cniArgs = argsText.length > 0 ? parseCniArgs(argsText) : undefined;
  const ifName = values.ifname || env.CNI_IFNAME || 'eth0';
  const netns =
    created !== undefined
      ? `${NETNS_DIR}/${netnsName(created)}`
      : resolve(io.cwd ?? process.cwd(), netnsArg!);
  const rt: RuntimeConf = {
    containerId: containerIdFor(netns),
    netns,
    ifName,
    ...(cniArgs ? { args: cniArgs } : {}),
    ...(capabilityArgs ? { capabilityArgs } : {}),
  };
  const cni = new CniConfig({
    path: env.CNI_PATH ?? '',
    cacheDir: values['cache-dir'] || env.CNI_CACHE_DIR || '',
    inProcess: !values.exec,
    ...(io.invoker ? { invoker: io.invoker } : {}),
    env,
    stderr: io.stderr,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  });

  if (values.verbose) {
    for (const p of list.plugins) {
      let how: string;
      try {
        how = cni.runMode(p.network.type);
      } catch (e) {
        how = `not found (${(e as Error).message})`;
      }
      io.stderr.write(`cnitool: ${p.network.type}: ${how}\n`);
    }
  }
  switch (cmd) {
    case 'add': {
      if (created !== undefined && !existsSync(netns)) ip(['netns', 'add', created]);
      const result = await cni.addNetworkListRaw(list, rt);
      io.stdout.write(`${formatResult(result)}\n`);
      return 0;
    }
    case 'check':
      await cni.checkNetworkList(list, rt);
      return 0;
    case 'del':
      await cni.delNetworkList(list, rt);
      if (created !== undefined && existsSync(netns)) ip(['netns', 'del', created]);
      return 0;
    case 'gc': {
      const keep = values.keep ?? [];
      const validAttachments = keep.map((p) => ({
        containerID: containerIdFor(resolve(io.cwd ?? process.cwd(), p)),
        ifname: ifName,
      }));
      await cni.gcNetworkList(list, keep.length > 0 ? { validAttachments } : undefined);
      return 0;
    }
    case 'status':
      await cni.getStatusNetworkList(list);
      return 0;
  }
}

/** `gc --from-cri SOCKET [--dry-run] [NETWORK]`: the valid attachments are the runtime's sandboxes (cri-gc.ts). */
async function gcFromCri(
  values: ReturnType<typeof parse>['values'],
  network: string | undefined,
  io: ToolIO,
): Promise<number> {
  let graceMs: number | undefined;
  if (values.grace !== undefined) {
    const s = Number(values.grace);
    if (!Number.isFinite(s) || s < 0)
      throw new UsageError(`invalid --grace ${JSON.stringify(values.grace)}: seconds >= 0`);
    graceMs = Math.round(s * 1000);
  }
  const env = io.env;
  const cacheDir = values['cache-dir'] || env.CNI_CACHE_DIR || '';
  const cni = new CniConfig({
    path: env.CNI_PATH ?? '',
    cacheDir,
    inProcess: !values.exec,
    ...(io.invoker ? { invoker: io.invoker } : {}),
    env,
    stderr: io.stderr,
  });
  const report = await criGc({
    socket: values['from-cri'] as string,
    cni,
    netDir: env.NETCONFPATH || DEFAULT_NET_DIR,
    ...(network !== undefined ? { network } : {}),
    ...(cacheDir ? { cacheDir } : {}),
    ifName: values.ifname || env.CNI_IFNAME || 'eth0',
    dryRun: values['dry-run'] === true,
    ...(graceMs !== undefined ? { graceMs } : {}),
  });
  io.stdout.write(values.json ? `${JSON.stringify(report)}\n` : formatCriGcReport(report));
  const failed = report.networks.some(
    (n) => n.errors.length > 0 || (!report.dryRun && n.released.length < n.stale.length),
  );
  return failed ? 1 : 0;
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      ifname: { type: 'string', short: 'i' },
      'netns-create': { type: 'string' },
      keep: { type: 'string', multiple: true },
      'from-cri': { type: 'string' },
      'dry-run': { type: 'boolean' },
      json: { type: 'boolean' },
      grace: { type: 'string' },
      'cache-dir': { type: 'string' },
      timeout: { type: 'string' },
      exec: { type: 'boolean' },
      verbose: { type: 'boolean', short: 'v' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
