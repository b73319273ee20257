// The errors of this package's helpers. Not exported from the package index.

/** A plain Error (code 999 through the SDK) with the reference's message, the underlying error as `cause`. */
export function fail(msg: string, cause?: unknown): Error {
  return new Error(msg, cause === undefined ? undefined : { cause });
}
