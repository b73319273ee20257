/**
 * host-local store inspection for its tests (not part of the plugin). Calls, environments and temporary
 * directories come from @cnikit/testing (cniRunner, cniCall, tempDir).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The files of a store directory and their contents (byte strings). */
export function storeFiles(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return out;
  }
  for (const n of names) out[n] = readFileSync(join(dir, n), 'latin1');
  return out;
}

/** Reservation files only (no lock, last_reserved_ip.*). */
export function reservations(dir: string): Record<string, string> {
  const out = storeFiles(dir);
  for (const k of Object.keys(out)) if (k === 'lock' || k.startsWith('last_reserved_ip.')) delete out[k];
  return out;
}

export function net(dataDir: string, ipam: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    cniVersion: '1.1.0',
    name: 'mynet',
    type: 'ipvlan',
    master: 'foo0',
    ...extra,
    ipam: { type: 'host-local', dataDir, ...ipam },
  };
}
