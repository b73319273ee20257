/**
 * Hash-derived names shared with the Go reference plugins (plugins.md §0.6), so that a node can
 * switch between the two implementations with containers running.
 */
import { createHash } from 'node:crypto';
import { goQuote, goUnquote } from '@cnikit/skel/go';

/** Maximum length of an iptables chain name produced by the helpers below. */
export const MAX_CHAIN_LENGTH = 28;
const CHAIN_PREFIX = 'CNI-';
/** Length of a full SHA-512 hex digest. */
export const MAX_HASH_LENGTH = 128;

interface Hasher {
  update(data: string, enc: 'utf8'): Hasher;
  digest(enc: 'hex'): string;
}

/**
 * SHA-512 hex: Bun's native CryptoHasher when running under Bun (Bun loads node:crypto on first use, which
 * would add to the start of every masquerade ADD/DEL), node:crypto otherwise.
 */
function sha512Hex(s: string): string {
  const BunHasher = (globalThis as { Bun?: { CryptoHasher?: new (alg: string) => Hasher } }).Bun
    ?.CryptoHasher;
  const h: Hasher = BunHasher ? new BunHasher('sha512') : (createHash('sha512') as unknown as Hasher);
  return h.update(s, 'utf8').digest('hex');
}

/**
 * `prefix + hex(sha512(toHash))`, cut to `length` characters (Go `MustFormatHashWithPrefix`).
 * Throws when `prefix.length >= length` or `length > 128` (Go panics).
 */
export function formatHashWithPrefix(length: number, prefix: string, toHash: string): string {
  if (!Number.isInteger(length) || prefix.length >= length || length > MAX_HASH_LENGTH) {
    throw new RangeError(`invalid length ${length} for hash with prefix ${JSON.stringify(prefix)}`);
  }
  return (prefix + sha512Hex(toHash)).slice(0, length);
}

/** `CNI-<24 hex of sha512(network + containerID)>` (28 chars): the bridge ipmasq chain. */
export function formatChainName(network: string, containerID: string): string {
  return formatChainNameWithPrefix(network, containerID, '');
}

/** `CNI-<prefix><hex…>` cut to 28 chars, e.g. prefix `DN-` for portmap's per-container chain. */
export function formatChainNameWithPrefix(network: string, containerID: string, prefix: string): string {
  return formatHashWithPrefix(MAX_CHAIN_LENGTH, CHAIN_PREFIX + prefix, network + containerID);
}

/** Contract alias: `chainName(network, id, prefix?)`. */
export function chainName(network: string, containerID: string, prefix = ''): string {
  return formatChainNameWithPrefix(network, containerID, prefix);
}

/** `name: "<network>" id: "<containerID>"` with Go `%q` quoting (the iptables rule comment). */
export function formatComment(network: string, containerID: string): string {
  return `name: ${goQuote(network)} id: ${goQuote(containerID)}`;
}

/** nftables ipmasq: 16 hex of sha512(network). */
export function nftNetworkHash(network: string): string {
  return formatHashWithPrefix(16, '', network);
}

/** nftables ipmasq: `<networkHash>-<16 hex of sha512(ifName + ":" + containerID)>`. */
export function nftInstanceHash(network: string, ifName: string, containerID: string): string {
  return `${nftNetworkHash(network)}-${formatHashWithPrefix(16, '', `${ifName}:${containerID}`)}`;
}

/** Maximum nftables comment length (knftables `CommentLengthMax`). */
export const NFT_COMMENT_MAX = 128;

/** nftables ipmasq rule comment: `<hash>, net: <network>, if: <ifName>, id: <containerID>` (quotes removed, ≤128 chars). */
export function nftInstanceComment(network: string, ifName: string, containerID: string): string {
  const strip = (s: string) => s.replaceAll('"', '');
  const c = `${nftInstanceHash(network, ifName, containerID)}, net: ${strip(network)}, if: ${strip(ifName)}, id: ${strip(containerID)}`;
  return cutUtf8(c, NFT_COMMENT_MAX);
}

/** Cut a string to at most `max` UTF-8 bytes (Go slices bytes), without splitting a character. */
function cutUtf8(s: string, max: number): string {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= max) return s;
  let end = max;
  while (end > 0 && ((b[end] ?? 0) & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString('utf8');
}

/** Go `%q` and its inverse: the one implementation, @cnikit/skel/go's (re-exported as part of this package's API). */
export { goQuote, goUnquote };

/**
 * Parse an iptables comment made by formatComment: `name: "<net>" id: "<id>"`. Returns undefined
 * when the text does not have that shape.
 */
export function parseComment(comment: string): { network: string; containerID: string } | undefined {
  const m = /^name: ("(?:[^"\\]|\\.)*") id: ("(?:[^"\\]|\\.)*")$/s.exec(comment);
  if (!m) return undefined;
  try {
    return { network: goUnquote(m[1]!), containerID: goUnquote(m[2]!) };
  } catch {
    return undefined;
  }
}
