/**
 * The process entry of a plugin (Go's skel.PluginMain): `dispatch` wired to the process's environment and file
 * descriptors, the exit code in `process.exitCode`.
 */
import { fstatSync } from 'node:fs';
import { isatty } from 'node:tty';
import { dispatch } from './dispatch.ts';
import { fdWriter, readStdin } from './fdio.ts';
import type { Invoker } from './invoke.ts';
import { abandonedExportConnects } from './trace.ts';
import type { Plugin } from './types.ts';

/**
 * Whether fd 0 is a terminal. A terminal is a character device, and never one of Linux's memory devices (major 1:
 * /dev/null, /dev/zero, /dev/urandom …), so a pipe, a file or /dev/null (what a runtime gives) is told apart with one
 * fstat, and node:tty (whose module pulls in the stream classes: milliseconds of a Bun start-up) is loaded only for
 * another character device.
 */
export function stdinIsTerminal(fd = 0): boolean {
  try {
    const st = fstatSync(fd);
    if (!st.isCharacterDevice() || devMajor(st.rdev) === MEM_MAJOR) return false;
  } catch {
    return false; // a closed or unusable descriptor is no terminal (isatty says the same)
  }
  return isatty(fd);
}

/** Linux's major number of the memory character devices (drivers/char/mem.c). */
const MEM_MAJOR = 1;

/** The major number of a device number as glibc encodes it (gnu_dev_major). */
export function devMajor(rdev: number): number {
  return ((rdev >>> 8) & 0xfff) | (Math.floor(rdev / 2 ** 32) & ~0xfff);
}

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
