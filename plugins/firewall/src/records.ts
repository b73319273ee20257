/**
 * cnikit's record of each attachment the firewall plugin opened (a cnikit extension; the reference keeps none):
 * `<dataDir>/<network>:<containerID>:<ifname>.json` — `:` can appear in neither a network name nor a container
 * ID, so names never collide — holding the host routes it added and where (backend, zone). Written atomically
 * in a symlink-proof directory (@cnikit/sys StateDir) before ADD changes anything (removed again if the ADD
 * fails), removed by DEL; it lets DEL work without prevResult — also after an ADD killed midway — and GC find
 * stale attachments.
 */
import { createHash } from 'node:crypto';
import { StateDir } from '@cnikit/sys';
import type { Backend } from './config.ts';

export interface AttachmentRecord {
  network: string;
  containerID: string;
  ifname: string;
  backend: Backend;
  /** firewalld zone (also kept for iptables: harmless). */
  zone: string;
  /** Host routes: `10.1.2.3/32`, `fd00::3/128`. */
  ips: string[];
}

export const RECORD_SUFFIX = '.json';

/** The file name of an attachment's record (a hash when the readable name would not fit in 255 bytes). */
export function recordName(network: string, containerID: string, ifname: string): string {
  const readable = `${network}:${containerID}:${ifname}${RECORD_SUFFIX}`;
  if (Buffer.byteLength(readable) <= 240 && !readable.startsWith('.')) return readable;
  const h = createHash('sha256').update(`${network}\0${containerID}\0${ifname}`).digest('hex');
  return `h-${h}${RECORD_SUFFIX}`;
}

export function formatRecord(r: AttachmentRecord): string {
  return `${JSON.stringify(r, null, 1)}\n`;
}

/** Parse a record; undefined for anything malformed. */
export function parseRecord(text: string): AttachmentRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const str = (k: string) => typeof o[k] === 'string';
  if (!str('network') || !str('containerID') || !str('ifname') || !str('zone')) return undefined;
  if (o.backend !== 'iptables' && o.backend !== 'firewalld') return undefined;
  if (!Array.isArray(o.ips) || !o.ips.every((x) => typeof x === 'string')) return undefined;
  return {
    network: o.network as string,
    containerID: o.containerID as string,
    ifname: o.ifname as string,
    backend: o.backend,
    zone: o.zone as string,
    ips: o.ips as string[],
  };
}

export function openRecords(dataDir: string, create: boolean): StateDir | undefined {
  return create ? StateDir.open(dataDir, { create: true, mode: 0o700 }) : StateDir.openIfExists(dataDir);
}
