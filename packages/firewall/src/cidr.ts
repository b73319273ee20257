/**
 * Minimal IP/CIDR helpers the firewall code needs (parsing, masking, canonical text). Kept local so
 * this package does not depend on the IPAM package.
 */
import { isIPv4, isIPv6 } from 'node:net';

export interface ParsedCidr {
  family: 4 | 6;
  /** The address as given, in canonical text (`10.1.2.2`, `2001:db8::2`). */
  ip: string;
  prefix: number;
  /** The masked network address in canonical text (`10.1.2.0`). */
  network: string;
}

function v4Bytes(s: string): number[] {
  return s.split('.').map((x) => Number.parseInt(x, 10));
}

function v6Bytes(s: string): number[] {
  let text = s;
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const v4 = v4Bytes(text.slice(lastColon + 1));
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':').map((x) => Number.parseInt(x, 16)) : [];
  const r = rest !== undefined && rest !== '' ? rest.split(':').map((x) => Number.parseInt(x, 16)) : [];
  const words = rest === undefined ? h : [...h, ...new Array(8 - h.length - r.length).fill(0), ...r];
  if (tail.length) words.splice(6, 2, ...tail);
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

/** Canonical (RFC 5952) IPv6 text from 16 bytes; IPv4 dotted quad from 4 bytes. */
export function formatBytes(b: number[]): string {
  if (b.length === 4) return b.join('.');
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((b[i]! << 8) | b[i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

function mask(bytes: number[], prefix: number): number[] {
  return bytes.map((byte, i) => {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    return byte & ((0xff << (8 - bits)) & 0xff);
  });
}

/** Parse `ip` or `ip/prefix` (a bare IP gets /32 or /128). Throws TypeError on bad input. */
export function parseCidr(text: string): ParsedCidr {
  const slash = text.indexOf('/');
  const ipText = slash < 0 ? text : text.slice(0, slash);
  const family = isIPv4(ipText) ? 4 : isIPv6(ipText) ? 6 : 0;
  if (family === 0) throw new TypeError(`invalid CIDR address: ${text}`);
  const max = family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) throw new TypeError(`invalid CIDR address: ${text}`);
    prefix = Number(p);
  }
  const bytes = family === 4 ? v4Bytes(ipText) : v6Bytes(ipText);
  return { family, ip: formatBytes(bytes), prefix, network: formatBytes(mask(bytes, prefix)) };
}
