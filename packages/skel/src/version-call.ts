/**
 * VERSION (spec §5): the answer to `CNI_COMMAND=VERSION`, which reads nothing of a plugin but its supported versions.
 * The dispatcher answers with it, and so does a compiled executable's start-up path (@cnikit/build's runtime) without
 * loading the rest of the SDK or the plugin's module, so the two answers are the same bytes by construction.
 */

import { foldKey } from './fold.ts';
import { goEscapeJSON, parseJsonGo } from './gojson.ts';
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
    const r = parseJsonGo(toBytes(stdin));
    if (!r.ok || !r.value || typeof r.value !== 'object' || Array.isArray(r.value)) return undefined;
    const v = findKey(r.value as Record<string, unknown>, 'cniVersion');
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

export { ALL_VERSIONS } from './types.ts';
