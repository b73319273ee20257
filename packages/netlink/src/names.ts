// Host-side veth names and locally administered MAC addresses, generated like the reference plugins do.
import { randomBytes } from 'node:crypto';
import { formatMac } from './nl.ts';

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
