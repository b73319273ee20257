/**
 * VERSION (spec §5): the answer to `CNI_COMMAND=VERSION`, which reads nothing of a plugin but its supported versions.
 * The dispatcher answers with it, and so does a compiled executable's start-up path (@cnikit/build's runtime) without
 * loading the rest of the SDK or the plugin's module, so the two answers are the same bytes by construction. It imports
only modules without imports of their own (fold, types, fdraw): the start-up path loads nothing else.
 */

import { readAll, stdinIsTerminal } from './fdraw.ts';
import { foldKey, goEscapeJSON } from './fold.ts';
import { CURRENT_VERSION } from './types.ts';

/** The config bytes: given, or read by the reader (which may throw). */
export function toBytes(stdin: Uint8Array | string | (() => Uint8Array)): Uint8Array {
  if (typeof stdin === 'function') return stdin();
  if (typeof stdin === 'string') return new TextEncoder().encode(stdin);
  return stdin;
}

/** A key of a decoded config as Go's encoding/json finds it: the last exact or case-folded match that is not null. */
export function findKey(obj: Record<string, unknown>, key: string): unknown {
  let out: unknown;
  const f = foldKey(key);
  for (const [k, v] of Object.entries(obj)) if ((k === key || foldKey(k) === f) && v !== null) out = v;
  return out;
}

/**
 * The `cniVersion` a VERSION request asks for (SPEC.md §5 VERSION Success: the answer's cniVersion is "the value of
 * cniVersion specified on input"): the string of `{"cniVersion": …}` on stdin, or undefined when stdin is a terminal,
 * unreadable, not a JSON object or has no non-empty string `cniVersion` (the answer then carries CURRENT_VERSION).
 */
export function requestedVersion(
  stdin: Uint8Array | string | (() => Uint8Array),
  stdinIsTerminal?: () => boolean,
): string | undefined {
  try {
    if (typeof stdin === 'function' && stdinIsTerminal?.()) return undefined;
    // as parseJsonGo decodes (a BOM stays and fails the parse); any syntax error means the current version
    const value: unknown = JSON.parse(new TextDecoder('utf-8', { ignoreBOM: true }).decode(toBytes(stdin)));
    if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
    const v = findKey(value as Record<string, unknown>, 'cniVersion');
    return typeof v === 'string' && v !== '' ? v : undefined;
  } catch {
    return undefined;
  }
}

/** The VERSION answer, one line of JSON. */
export function versionText(supported: readonly string[], requested: string | undefined): string {
  const obj: Record<string, unknown> = { cniVersion: requested ?? CURRENT_VERSION };
  if (supported.length) obj.supportedVersions = supported;
  return `${goEscapeJSON(JSON.stringify(obj))}\n`;
}

/**
 * The VERSION answer of this process: fd 0 read to EOF for the requested cniVersion unless a terminal is on it. A stdin
 * that cannot be read (a closed fd 0 included, which reads as an empty /dev/null) gets the current version, as the
 * dispatcher answers with the process's stdin reader.
 */
export function processVersionText(supported: readonly string[]): string {
  return versionText(
    supported,
    requestedVersion(
      () => readAll(0),
      () => stdinIsTerminal(),
    ),
  );
}

export { writeAll } from './fdraw.ts';
export { ALL_VERSIONS } from './types.ts';
