/**
 * The start-up path of a VERSION call that ./first.ts's table does not answer (`cnikit <plugin>`, an argv0 that is no
 * plugin name …): what runs before anything of the SDK or of a plugin is loaded. A plugin's
 * `CNI_COMMAND=VERSION` (which reads nothing of a plugin but the versions the build recorded) is answered here by the
 * SDK's own VERSION code (@cnikit/skel/version-call) and its stdin/stdout helpers; every other invocation loads the
 * multicall entry (./multicall.ts: the SDK, then only the selected plugin's module) and runs it. With Bun's code
 * splitting (../bun-bundle.ts) this module's static imports are all such a start-up loads.
 */
import { ALL_VERSIONS, processVersionText, writeAll } from '@cnikit/skel/version-call';
import type { LazyPlugin, MainOptions, PluginSource } from './multicall.ts';
import {
  basenameOf,
  CONFORMANCE_WORD,
  INSTALL_CNI_WORD,
  MULTICALL_NAME,
  SERVE_WORD,
  selectPlugin,
  TOOL_WORD,
  toolArgs,
} from './select.ts';

/**
 * Process entry of an executable: the VERSION answer, or the multicall entry's `main` with the options `full` makes
 * (only then: the addon's source is not needed for a VERSION). `opts.name` is the executable's own name.
 */
export async function main(
  sources: readonly PluginSource[],
  opts: Pick<MainOptions, 'name'> = {},
  full: () => MainOptions | Promise<MainOptions> = () => opts,
): Promise<void> {
  if (answerVersion(sources, opts)) return;
  await runMulticall(sources, full);
}

/** The multicall entry's `main` with the options `full` makes: every invocation `answerVersion` did not answer. */
export async function runMulticall(
  sources: readonly PluginSource[],
  full: () => MainOptions | Promise<MainOptions>,
): Promise<void> {
  const [multicall, options] = await Promise.all([import('./multicall.ts'), full()]);
  await multicall.main(sources, options);
}

/**
 * The recorded metadata of the plugin a `CNI_COMMAND=VERSION` invocation selects, exactly when multicall's `main` would
 * answer it from that metadata (no cnitool, no `cnikit serve|conformance|install-cni|tool`, a known plugin name);
 * undefined otherwise.
 */
export function versionOnly(
  sources: readonly PluginSource[],
  opts: Pick<MainOptions, 'name'>,
  proc: { env: Record<string, string | undefined>; argv0: string; execPath: string; args: readonly string[] },
): LazyPlugin['meta'] {
  if (proc.env.CNI_COMMAND !== 'VERSION') return undefined;
  const { argv0, execPath, args } = proc;
  if (toolArgs(argv0, execPath, args)) return undefined;
  const self = basenameOf(argv0) === MULTICALL_NAME || basenameOf(execPath) === MULTICALL_NAME;
  const word = args[0];
  if (
    self &&
    (word === SERVE_WORD || word === CONFORMANCE_WORD || word === INSTALL_CNI_WORD || word === TOOL_WORD)
  )
    return undefined;
  // plain comparisons and loops: each built-in a start-up calls for the first time costs it (callgrind)
  const source =
    sources.length === 1 ? sources[0] : selectPlugin(sources, argv0, execPath, args, opts.name).plugin;
  return source && typeof (source as LazyPlugin).load === 'function'
    ? (source as LazyPlugin).meta
    : undefined;
}

/**
 * Answers VERSION from the recorded metadata; false when this invocation is not one (see versionOnly). Synchronous
 * and before any promise: the entry calls it first.
 */
export function answerVersion(sources: readonly PluginSource[], opts: Pick<MainOptions, 'name'>): boolean {
  const meta = versionOnly(sources, opts, {
    env: process.env,
    argv0: process.argv0,
    execPath: process.execPath,
    args: process.argv.slice(2),
  });
  if (!meta) return false;
  // as the dispatcher answers it: stdin read for the requested cniVersion unless a terminal is on it
  const text = processVersionText(meta.versions ?? ALL_VERSIONS);
  try {
    writeAll(1, text);
  } catch {
    // stdout refused the answer: the full path reports it as the dispatcher does (error object, stderr, exit 1)
    return false;
  }
  process.exitCode = 0;
  return true;
}
