/**
 * `cnikit install-cni`: what a Kubernetes DaemonSet's init container runs on every node (deploy/kubernetes/,
 * docs/kubernetes.md). It installs the executable the container carries into the host's CNI bin directory and
 * writes the network configuration from a template, then (optionally) keeps the configuration in step with the
 * template.
 *
 * - Binaries: `cnikit` and `cnikit-client` (copied; cold mode too, when the client is beside the executable, so the
 *   installed `cnikit install-cni --warm` finds it); every plugin name is a hard link to the client (warm) or to
 *   `cnikit` (cold), `cnitool` always to `cnikit` — the layout of `scripts/install --warm|--cold` and of a release
 *   tarball install: the mode only decides what the plugin names link to. Every file is placed atomically (temporary name in the directory, fsync, rename), so a
 *   runtime executing the old file keeps running it (no "text file busy": the old inode is never opened for
 *   writing) and nobody ever sees a partial file.
 * - The conflist is rendered from the template (a ConfigMap file) with `${NAME}` / `${NAME:-default}` replaced by
 *   environment variables (the node name from the downward API, the pod subnet, the MTU, …). Every `${…}` must
 *   resolve: an unset or empty variable without a default, or a malformed reference, is an error that names every
 *   such reference, and then nothing at all is written (the template is rendered and checked before the first
 *   file is touched). A value is inserted JSON-escaped, so it can never end a string or add a key. The conflist is
 *   written LAST, after every binary it names is in place, so a runtime that sees the configuration finds its
 *   plugins (a node is not "network ready" before its plugins exist).
 * - Ownership: the files it wrote and their SHA-256 are recorded in `<bin-dir>/.cnikit-install-cni.json`.
 *   `--uninstall` removes a file only when the record names it AND its content is still what was written; a file
 *   someone else wrote or changed since is left alone and reported. A file of another project that the install
 *   replaced (a Go `bridge`, say) is named as replaced in the output; uninstall does not bring it back.
 * - Idempotent: a second run with the same inputs changes nothing and says "no changes".
 * - `--watch`: after the install, re-renders the template whenever its directory changes (a ConfigMap update is
 *   a symlink swap of `..data`, which an inotify watch on the directory sees) and at least every
 *   `--watch-interval` seconds, and rewrites the conflist when the rendering differs from the file. A template that
 *   stops rendering is reported and the last good conflist stays.
 * - `--check`: exit 0 only when the recorded files are in place with their recorded content, the conflist is
 *   there, and (with `--socket`) the warm-mode service answers — the DaemonSet's readiness probe.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CLIENT_FILE } from '@cnikit/sys/layout';
import { dropStaleBridgeAddresses } from './install-cni-bridge.ts';
import { InstallCniError } from './install-cni-error.ts';
import { checkInstalled, type InstallCniOptions, installCni, uninstallCni } from './install-cni-installer.ts';
import { withAgentMtu } from './install-cni-mtu.ts';
import { readTemplate } from './install-cni-template.ts';
import { watchTemplate } from './install-cni-watch.ts';
import { checkNodeAgentReady } from './node-agent/readyz.ts';
import { type NodePodCidrOptions, withNodePodCidr } from './node-podcidr.ts';

export { InstallCniError } from './install-cni-error.ts';
export {
  type Change,
  checkInstalled,
  type InstallCniOptions,
  installCni,
  RECORD_FILE,
  uninstallCni,
} from './install-cni-installer.ts';
export { checkConflist, renderConf, renderTemplate } from './install-cni-template.ts';
export { watchTemplate } from './install-cni-watch.ts';

export const DEFAULT_BIN_DIR = '/host/opt/cni/bin';
export const DEFAULT_CONF_DIR = '/host/etc/cni/net.d';
export const DEFAULT_TEMPLATE = '/etc/cnikit/cni/10-cnikit.conflist';

export const INSTALL_CNI_USAGE =
  'usage: cnikit install-cni [--warm|--cold] [--bin-dir DIR] [--conf-dir DIR] [--template FILE|--no-conf]\n' +
  '                         [--conf-name NAME] [--run-dir DIR] [--watch [--watch-interval SECONDS]] [--dry-run]\n' +
  '       cnikit install-cni --uninstall [--bin-dir DIR] [--dry-run]\n' +
  '       cnikit install-cni --check [--bin-dir DIR] [--socket PATH]   (readiness: files + conflist [+ service\n' +
  "                         + the node agent's /readyz when $CNIKIT_NODE_AGENT is on])\n" +
  `defaults: --warm --bin-dir ${DEFAULT_BIN_DIR} --conf-dir ${DEFAULT_CONF_DIR} --template ${DEFAULT_TEMPLATE}\n` +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the template syntax, literally
  'template: ${NAME} and ${NAME:-default} are replaced by environment variables (JSON-escaped); an unset one is an\n' +
  '          error and nothing is written. The conflist is written last, after the binaries.\n' +
  '          POD_CIDR, POD_CIDR_V4, POD_CIDR_V6, POD_CIDRS left unset: read from spec.podCIDR(s) of Node $NODE_NAME\n' +
  '          (in-cluster API server, service-account token + CA; retried while the node has none).\n';

export interface InstallCniArgs {
  verb: 'install' | 'uninstall' | 'check';
  mode: 'warm' | 'cold';
  binDir: string;
  confDir: string;
  template: string | undefined;
  confName: string | undefined;
  watch: boolean;
  watchIntervalMs: number;
  socket: string | undefined;
  runDir: string | undefined;
  dryRun: boolean;
}

export function parseInstallCniArgs(args: readonly string[]): InstallCniArgs | 'help' {
  const a: InstallCniArgs = {
    verb: 'install',
    mode: 'warm',
    binDir: DEFAULT_BIN_DIR,
    confDir: DEFAULT_CONF_DIR,
    template: DEFAULT_TEMPLATE,
    confName: undefined,
    watch: false,
    watchIntervalMs: 10_000,
    socket: undefined,
    runDir: undefined,
    dryRun: false,
  };
  let modes = 0;
  let verbs = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const value = (flag: string): string => {
      const eq = arg.indexOf('=');
      const v = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (v === undefined || v === '') throw new InstallCniError(`${flag} needs a value`);
      return v;
    };
    const is = (flag: string) => arg === flag || arg.startsWith(`${flag}=`);
    const path = (flag: string): string => {
      const v = value(flag);
      if (!v.startsWith('/'))
        throw new InstallCniError(`${flag} must be an absolute path, got ${JSON.stringify(v)}`);
      return v;
    };
    if (arg === '--help' || arg === '-h') return 'help';
    else if (arg === '--warm' || arg === '--cold') {
      a.mode = arg === '--warm' ? 'warm' : 'cold';
      modes++;
    } else if (arg === '--uninstall' || arg === '--check') {
      a.verb = arg === '--uninstall' ? 'uninstall' : 'check';
      verbs++;
    } else if (arg === '--watch') a.watch = true;
    else if (arg === '--dry-run' || arg === '-n') a.dryRun = true;
    else if (arg === '--no-conf') a.template = undefined;
    else if (is('--bin-dir')) a.binDir = path('--bin-dir');
    else if (is('--conf-dir')) a.confDir = path('--conf-dir');
    else if (is('--template')) a.template = path('--template');
    else if (is('--socket')) a.socket = path('--socket');
    else if (is('--run-dir')) a.runDir = path('--run-dir');
    else if (is('--conf-name')) {
      const v = value('--conf-name');
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*\.(conflist|json)$/.test(v))
        throw new InstallCniError(
          `--conf-name must be a file name ending in .conflist or .json, got ${JSON.stringify(v)}`,
        );
      a.confName = v;
    } else if (is('--watch-interval')) {
      const v = value('--watch-interval');
      const s = Number(v);
      if (!Number.isFinite(s) || s < 0.1 || s > 86_400)
        throw new InstallCniError(
          `--watch-interval must be seconds between 0.1 and 86400, got ${JSON.stringify(v)}`,
        );
      a.watchIntervalMs = Math.round(s * 1000);
    } else throw new InstallCniError(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (modes > 1) throw new InstallCniError('give at most one of --warm and --cold');
  if (verbs > 1) throw new InstallCniError('give at most one of --uninstall and --check');
  if (a.watch && a.verb !== 'install') throw new InstallCniError('--watch goes with an install only');
  if (a.watch && a.template === undefined) throw new InstallCniError('--watch needs a template');
  return a;
}

/** What `cnikit install-cni` receives from the multicall entry. */
export interface InstallCniContext {
  /** Plugin names of this executable. */
  plugins: readonly string[];
  /** The running executable (the file to install). */
  execPath: string;
  env: Readonly<Record<string, string | undefined>>;
  out: (line: string) => void;
  err: (line: string) => void;
  /** The warm-mode service check (`serve --check`, prints its own line) for --check --socket. */
  serviceCheck?: (socket: string) => Promise<number>;
  /** Stops --watch (SIGTERM/SIGINT in the executable). */
  signal?: AbortSignal;
  /** Attempts/waits/credential paths of the node pod-subnet lookup (tests). */
  podCidr?: NodePodCidrOptions;
  /** The underlay MTU lookup of the node agent's conflist MTU (tests). */
  underlayMtu?: Parameters<typeof withAgentMtu>[2];
  /** The stale bridge address removal after a podCIDR change (tests; default: this namespace's bridges). */
  staleBridge?: (conflist: unknown, out: (line: string) => void) => void;
}

/** Entry of `cnikit install-cni …` (args after the word). Resolves to the exit code. */
export async function installCniMain(args: readonly string[], ctx: InstallCniContext): Promise<number> {
  let a: InstallCniArgs | 'help';
  try {
    a = parseInstallCniArgs(args);
  } catch (e) {
    ctx.err(`cnikit install-cni: ${(e as Error).message}\n${INSTALL_CNI_USAGE}`);
    return 2;
  }
  if (a === 'help') {
    ctx.out(INSTALL_CNI_USAGE.trimEnd());
    return 0;
  }
  try {
    if (a.verb === 'uninstall') {
      uninstallCni({ binDir: a.binDir, dryRun: a.dryRun, out: ctx.out });
      return 0;
    }
    if (a.verb === 'check') {
      const r = checkInstalled(a.binDir);
      for (const p of r.problems) ctx.out(`not ready: ${p}`);
      if (!r.ok) return 1;
      if (a.socket !== undefined) {
        if (!ctx.serviceCheck) {
          ctx.out('not ready: this executable has no warm-mode service to check');
          return 1;
        }
        const rc = await ctx.serviceCheck(a.socket);
        return rc === 0 ? await checkNodeAgentReady(ctx.env, ctx.out) : rc;
      }
      ctx.out(`ok: ${a.binDir} installed, conflist written`);
      return 0;
    }
    const podEnv =
      a.template === undefined
        ? ctx.env
        : await withNodePodCidr(ctx.env, readTemplate(a.template), { out: ctx.out, ...ctx.podCidr });
    const o: InstallCniOptions = {
      mode: a.mode,
      exe: ctx.execPath,
      client: join(dirname(ctx.execPath), CLIENT_FILE),
      plugins: ctx.plugins,
      binDir: a.binDir,
      confDir: a.confDir,
      template: a.template,
      confName:
        a.confName ?? (a.template ? basename(a.template).replace(/\.tmpl$/, '') : '10-cnikit.conflist'),
      env: a.template === undefined ? ctx.env : withAgentMtu(podEnv, ctx.out, ctx.underlayMtu),
      ...(a.runDir !== undefined ? { runDir: a.runDir } : {}),
      dryRun: a.dryRun,
      out: ctx.out,
    };
    const t0 = performance.now();
    installCni(o);
    // pod CIDRs read from the Node object: a bridge left with a previous podCIDR's gateway gets it removed
    if (podEnv !== ctx.env && !a.dryRun) {
      try {
        const conf = JSON.parse(readFileSync(join(o.confDir, o.confName), 'utf8'));
        (ctx.staleBridge ?? dropStaleBridgeAddresses)(conf, ctx.out);
      } catch (e) {
        ctx.out(`bridge addresses not checked: ${(e as Error).message}`);
      }
    }
    if (!a.dryRun) ctx.out(`install-cni took ${Math.round(performance.now() - t0)} ms`);
    if (a.watch && !a.dryRun) {
      ctx.out(`watching ${o.template} (every ${a.watchIntervalMs / 1000} s and on change)`);
      await watchTemplate(o, a.watchIntervalMs, ctx.signal ?? new AbortController().signal);
    }
    return 0;
  } catch (e) {
    ctx.err(`cnikit install-cni: ${(e as Error).message}`);
    return 1;
  }
}
