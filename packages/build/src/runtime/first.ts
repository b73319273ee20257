/**
 * The first module an executable runs (the generated entry imports it and nothing else statically). The common
 * VERSION call — a runtime starting a plugin by its link name with no arguments, `CNI_COMMAND=VERSION` — is answered
 * here by the SDK's own VERSION code (@cnikit/skel/version-call, which the dispatcher uses too), looking the plugin up
 * in a table the build wrote as one constant string; every other invocation runs `start`, which loads the real entry
 * (./entry.ts: the start-up path of ./startup.ts, then the multicall entry).
 *
 * Bun's code splitting would put version-call in a chunk of its own (the dispatcher shares it), and each chunk a
 * start-up loads costs it: compileBunModule (../build.ts) therefore hands Bun a copy of this module bundled with its
 * imports by esbuild from the same sources, so the entry chunk holds all a VERSION answer runs.
 */
import { ALL_VERSIONS, processVersionText, writeAll } from '@cnikit/skel/version-call';
import { TOOL_FILE } from '@cnikit/sys/names';
import { basenameOf } from './select.ts';

/** The characters a table entry's name and versions may have (anything else leaves the plugin to ./startup.ts). */
const TABLE_WORD = /^[0-9A-Za-z._+-]+$/;

/**
 * The table of the plugins whose VERSION is answered here: `\n<name>\t<versions>` per plugin with recorded metadata,
 * versions comma-separated, `*` when the plugin records none (every version then). Made by the build.
 */
export function versionTable(meta: Record<string, { versions?: readonly string[] } | undefined>): string {
  let t = '';
  for (const [name, m] of Object.entries(meta)) {
    if (!m || !TABLE_WORD.test(name) || name === TOOL_FILE) continue;
    if (m.versions && !m.versions.every((v) => TABLE_WORD.test(v))) continue;
    t += `\n${name}\t${m.versions ? m.versions.join(',') : '*'}`;
  }
  return t;
}

/**
 * The supported versions to answer with when this invocation is a VERSION call the table answers (no arguments, argv0
 * a plugin of the table, not cnitool); undefined otherwise (./startup.ts decides then). Plain string calls: each
 * built-in a start-up runs for the first time costs it (callgrind).
 */
export function tableVersions(
  table: string,
  command: string | undefined,
  argv0: string,
  execPath: string,
  nargs: number,
): readonly string[] | undefined {
  if (command !== 'VERSION' || nargs !== 0) return undefined;
  const name = basenameOf(argv0);
  if (name === '' || name === TOOL_FILE || basenameOf(execPath) === TOOL_FILE) return undefined;
  const key = `\n${name}\t`;
  const i = table.indexOf(key);
  if (i < 0 || name.indexOf('\n') >= 0) return undefined;
  const from = i + key.length;
  const end = table.indexOf('\n', from);
  const v = end < 0 ? table.slice(from) : table.slice(from, end);
  return v === '*' ? ALL_VERSIONS : v === '' ? [] : v.split(',');
}

/**
 * Answer this process's VERSION call from the table, or run `start`. A refused write (EPIPE …) also runs `start`, whose
 * path reports it as the dispatcher does.
 */
export function answerOrStart(table: string, start: () => void): void {
  const supported = tableVersions(
    table,
    process.env.CNI_COMMAND,
    process.argv0,
    process.execPath,
    process.argv.length - 2,
  );
  if (supported) {
    const text = processVersionText(supported);
    try {
      writeAll(1, text);
      process.exitCode = 0;
      return;
    } catch {
      // below
    }
  }
  start();
}
