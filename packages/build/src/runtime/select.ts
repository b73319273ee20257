/**
 * How an invocation of a multicall executable selects what runs (see ./multicall.ts for the rules): pure functions of
 * argv0, execPath and the arguments, kept apart from the SDK so the executable's start-up path can use them without
 * loading it.
 */
import type { AnyPlugin } from '@cnikit/skel';
import { EXE_FILE, TOOL_FILE } from '@cnikit/sys/names';

export const MULTICALL_NAME = EXE_FILE;
/** The name (hard link) and the `cnikit <word>` that select the cnitool CLI. */
export const TOOL_NAME = TOOL_FILE;
export const TOOL_WORD = 'tool';
/** `cnikit serve …`: the warm-mode service (packages/warm). */
export const SERVE_WORD = 'serve';
/** `cnikit conformance …`: the conformance kit (packages/conformance). */
export const CONFORMANCE_WORD = 'conformance';
/** `cnikit install-cni …`: the Kubernetes init container's installer (packages/warm/src/install-cni.ts). */
export const INSTALL_CNI_WORD = 'install-cni';

/** The cnitool arguments when this invocation selects cnitool, else undefined. */
export function toolArgs(
  argv0: string | undefined,
  execPath: string | undefined,
  args: readonly string[],
): string[] | undefined {
  if (basenameOf(argv0) === TOOL_NAME || basenameOf(execPath) === TOOL_NAME) return [...args];
  const invoked = basenameOf(argv0);
  if ((invoked === MULTICALL_NAME || basenameOf(execPath) === MULTICALL_NAME) && args[0] === TOOL_WORD)
    return args.slice(1);
  return undefined;
}

export interface Selection<P extends { name: string } = AnyPlugin> {
  /** The selected plugin, or undefined when the name is unknown / missing. */
  plugin?: P;
  /** The name that was looked up (for messages). */
  name: string;
  /** True when selected through `cnikit <plugin>`. */
  explicit: boolean;
  /** Arguments after the plugin selection. */
  rest: string[];
}

export function basenameOf(p: string | undefined): string {
  if (!p) return '';
  const i = p.lastIndexOf('/');
  return i >= 0 ? p.slice(i + 1) : p;
}

/** The plugin of that name (the last one, should two share it), by a plain loop: the start-up path runs this once. */
function byName<P extends { name: string }>(plugins: readonly P[], name: string | undefined): P | undefined {
  for (let i = plugins.length - 1; i >= 0; i--) if (plugins[i]!.name === name) return plugins[i];
  return undefined;
}

/**
 * Pick the plugin for an invocation. `args` are the user arguments (process.argv.slice(2) in both back-ends).
 */
export function selectPlugin<P extends { name: string } = AnyPlugin>(
  plugins: readonly P[],
  argv0: string | undefined,
  execPath: string | undefined,
  args: readonly string[],
  self: string = MULTICALL_NAME,
): Selection<P> {
  const invoked = basenameOf(argv0);
  const direct = byName(plugins, invoked);
  if (direct) return { plugin: direct, name: invoked, explicit: false, rest: [...args] };
  // A symlink resolves to its target in execPath, so argv0 comes first; when argv0 is not a plugin name (e.g.
  // `exec -a`), the hard link the kernel executed is the next best evidence.
  const exe = basenameOf(execPath);
  const viaExe = byName(plugins, exe);
  if (viaExe) return { plugin: viaExe, name: exe, explicit: false, rest: [...args] };
  const first = args[0];
  if (first !== undefined && !first.startsWith('-')) {
    return { plugin: byName(plugins, first), name: first, explicit: true, rest: args.slice(1) };
  }
  const unknown = invoked === self || invoked === MULTICALL_NAME || invoked === '' ? '' : invoked;
  return { plugin: undefined, name: unknown, explicit: false, rest: [...args] };
}
