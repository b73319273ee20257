// Errors of the Go pkg/ip + pkg/ipam equivalents (ipam.ts, veth.ts). Not exported from the package index.
// The reason text of a system error is @cnikit/sys's `SysError.reasonOf` (one definition for every package).

/** An error of these helpers: plain Error (code 999 through the SDK), the underlying error as `cause`. */
export function fail(msg: string, cause?: unknown): Error {
  return new Error(msg, cause === undefined ? undefined : { cause });
}
