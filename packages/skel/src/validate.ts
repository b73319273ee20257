/** Name validation exactly as the reference (`pkg/utils`): container IDs, network names, interface names. */
import { CniError, ErrorCode } from './errors.ts';

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
/** Go `unicode.IsSpace` (not JS `\s`: includes U+0085, excludes U+FEFF). */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** Throws CniError 4 `invalid characters in containerID` (details = the id). */
export function validateContainerID(id: string): void {
  if (id === '') throw new CniError(ErrorCode.UnknownContainer, 'missing containerID');
  if (!NAME_RE.test(id))
    throw new CniError(ErrorCode.InvalidEnvironmentVariables, 'invalid characters in containerID', id);
}

/** Throws CniError 7 `invalid characters found in network name` (details = the name). */
export function validateNetworkName(name: string): void {
  if (name === '') throw new CniError(ErrorCode.InvalidNetworkConfig, 'missing network name');
  if (!NAME_RE.test(name)) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid characters found in network name', name);
  }
}

/** Linux interface-name rules as the reference checks them (≤15 bytes, not . or .., no / : or space). */
export function validateInterfaceName(name: string): void {
  if (name.length === 0) throw new CniError(ErrorCode.InvalidEnvironmentVariables, 'interface name is empty');
  if (Buffer.byteLength(name, 'utf8') > 15) {
    throw new CniError(
      ErrorCode.InvalidEnvironmentVariables,
      'interface name is too long',
      'interface name should be less than 16 characters',
    );
  }
  if (name === '.' || name === '..')
    throw new CniError(ErrorCode.InvalidEnvironmentVariables, 'interface name is . or ..');
  if (/[/:]/.test(name) || GO_SPACE.test(name)) {
    throw new CniError(
      ErrorCode.InvalidEnvironmentVariables,
      'interface name contains / or : or whitespace characters',
    );
  }
}
