/** Name validation exactly as the reference (`pkg/utils`): container IDs, network names, interface names. */
import { CniError, ErrorCode } from './errors.ts';

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
/** Go `unicode.IsSpace` (not JS `\s`: includes U+0085, excludes U+FEFF). */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/**
 * The longest container ID an ADD accepts. The spec sets only the character set, but IDs reach places with length
 * limits: nftables rule comments (portmap's comment is the ID: ≤ 128 bytes), iptables comments (≤ 256 bytes, with
 * the network name), file names (tuning's `<id>_<ifname>.json`, libcni's cache files: ≤ 255 bytes). Runtimes use
 * 64-character IDs. DEL and CHECK accept any length, so state created by another implementation can still go.
 */
export const MAX_CONTAINER_ID_LENGTH = 128;

/**
 * Throws CniError 3 `missing containerID`, 4 `invalid characters in containerID` (details = the id), or, for ADD,
 * 4 `containerID is too long` beyond MAX_CONTAINER_ID_LENGTH bytes.
 */
export function validateContainerID(id: string, command = 'ADD'): void {
  if (id === '') throw new CniError(ErrorCode.UnknownContainer, 'missing containerID');
  if (!NAME_RE.test(id))
    throw new CniError(ErrorCode.InvalidEnvironmentVariables, 'invalid characters in containerID', id);
  if (command === 'ADD' && id.length > MAX_CONTAINER_ID_LENGTH) {
    throw new CniError(
      ErrorCode.InvalidEnvironmentVariables,
      'containerID is too long',
      `${id.length} bytes; cnikit plugins accept at most ${MAX_CONTAINER_ID_LENGTH} (container runtimes use 64)`,
    );
  }
}

/** Throws CniError 7 `invalid characters found in network name` (details = the name). */
export function validateNetworkName(name: string): void {
  if (name === '') throw new CniError(ErrorCode.InvalidNetworkConfig, 'missing network name');
  if (!NAME_RE.test(name)) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid characters found in network name', name);
  }
}

/**
 * The reference's interface-name rule set (`utils.ValidateInterfaceName`, applied to CNI_IFNAME):
 * ≤15 bytes, not `.` or `..`, no `/`, `:` or Go whitespace. Returns what is wrong, worded to follow
 * "name" (`is empty`, `is longer than 15 bytes`, `is . or ..`, `contains / or : or whitespace characters`),
 * or undefined when the name is valid. Plugins validating other link names (e.g. a bridge name) use this
 * with their own message; `validateInterfaceName` is the CNI_IFNAME wording.
 */
export function interfaceNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'is empty';
  if (Buffer.byteLength(name, 'utf8') > 15) return 'is longer than 15 bytes';
  if (name === '.' || name === '..') return 'is . or ..';
  if (/[/:]/.test(name) || GO_SPACE.test(name)) return 'contains / or : or whitespace characters';
  return undefined;
}

/** CNI_IFNAME validation with the reference's errors (code 4; "too long" carries Go's details text). */
export function validateInterfaceName(name: string): void {
  const problem = interfaceNameProblem(name);
  if (problem === undefined) return;
  if (problem === 'is longer than 15 bytes') {
    throw new CniError(
      ErrorCode.InvalidEnvironmentVariables,
      'interface name is too long',
      'interface name should be less than 16 characters',
    );
  }
  throw new CniError(ErrorCode.InvalidEnvironmentVariables, `interface name ${problem}`);
}
