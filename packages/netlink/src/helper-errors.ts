// Errors of the Go pkg/ip + pkg/ipam equivalents (ipam.ts, veth.ts). Not exported from the package index.

/** An error of these helpers: plain Error (code 999 through the SDK), the underlying error as `cause`. */
export function fail(msg: string, cause?: unknown): Error {
  return new Error(msg, cause === undefined ? undefined : { cause });
}

/** The Go-style reason of a system error ('file exists'), else its message. */
export function reasonOf(err: unknown): string {
  const r = (err as { reason?: unknown } | null)?.reason;
  if (typeof r === 'string' && r) return r;
  return err instanceof Error ? err.message : String(err);
}
