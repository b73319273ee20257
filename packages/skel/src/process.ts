/**
 * The process entry of a plugin (Go's skel.PluginMain): `dispatch` wired to the process's environment and file
 * descriptors, the exit code in `process.exitCode`.
 */
import { dispatch } from './dispatch.ts';
import { fdWriter, readStdin, stdinIsTerminal } from './fdio.ts';
import type { Invoker } from './invoke.ts';
import { abandonedExportConnects } from './trace.ts';
import type { Plugin } from './types.ts';

export { devMajor, stdinIsTerminal } from './fdio.ts';

/**
 * Process entry point: reads `process.env` and fd 0 (only when needed), writes to fd 1/2 and sets
 * `process.exitCode`. Calls `process.exit` only when a trace export left a connection attempt behind that nothing can
 * cancel (see abandonedExportConnects: Bun, a collector dropping SYNs) — the answer is written by then. `console.log/info/debug/dir/table` are redirected
 * to stderr so stray logging in plugin code cannot corrupt stdout. `opts.invoker` runs the plugin's delegations (the
 * multicall executable passes the Invoker holding its plugins); default: the default Invoker.
 */
export async function runPlugin<C>(plugin: Plugin<C>, opts: { invoker?: Invoker } = {}): Promise<void> {
  // Nothing but the result or error JSON may reach stdout: console output from plugin code goes to stderr.
  const toStderr = console.error.bind(console);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  console.dir = (obj: unknown) => toStderr(obj);
  console.table = (obj: unknown) => toStderr(obj);
  const code = await dispatch(plugin, {
    env: process.env,
    stdin: readStdin,
    // VERSION reads stdin for the requested cniVersion, except from a terminal (a human's CNI_COMMAND=VERSION)
    stdinIsTerminal: () => stdinIsTerminal(),
    // Whatever fd 1 is — a pipe, a file, /dev/null opened by the caller (a shell's >/dev/null, Python's DEVNULL, or the
    // read-write /dev/null Node and Bun put on a closed fd 1 at start-up) — the result counts as delivered unless the
    // write itself fails (EPIPE, EBADF, ENOSPC, …): only then is an ADD rolled back.
    stdout: fdWriter(1),
    stderr: fdWriter(2),
    ...(opts.invoker ? { invoker: opts.invoker } : {}),
  });
  process.exitCode = code;
  if (abandonedExportConnects() > 0) process.exit(code);
}
