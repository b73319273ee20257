// Host-side veth names and locally administered MAC addresses, generated like the reference plugins do.
import { formatMac } from './nl.ts';

// Web Crypto's getRandomValues is a global: no node:crypto load on the paths that never need it.
function randomBytes(n: number): Buffer {
  const b = Buffer.alloc(n);
  globalThis.crypto.getRandomValues(b);
  return b;
}

/** `veth` + 8 lowercase hex characters from 4 random bytes (Go ip.RandomVethName). */
export function randomVethName(): string {
  return `veth${randomBytes(4).toString('hex')}`;
}

/** A random locally administered, unicast MAC address ('x2:…', 'x6:…', 'xa:…' or 'xe:…'). */
export function randomLocalMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfe) | 0x02;
  return formatMac(b);
}
