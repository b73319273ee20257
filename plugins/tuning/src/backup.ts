/**
 * The reference's backup of the link attributes tuning changes (plugins.md §3.5): `<dataDir>/<containerID>_<ifName>.json`,
 * one-space-indented JSON with only the changed attributes in the order mac, promisc, mtu, allmulti, txQLen;
 * directory mode 0600, file mode 0600 — so the Go tuning restores what cnikit saved and the other way round.
 *
 * cnikit writes it atomically inside a symlink-proof directory handle (@cnikit/sys StateDir), and records the
 * owning network beside it (`<containerID>_<ifName>.json.network`) so that GC of one network never removes the
 * backups of another network's attachments in a shared data directory.
 */
import { StateDir } from '@cnikit/sys';

export interface Backup {
  mac?: string;
  promisc?: boolean;
  mtu?: number;
  allmulti?: boolean;
  txQLen?: number;
}

export const backupName = (containerId: string, ifName: string) => `${containerId}_${ifName}.json`;
export const ownerName = (backup: string) => `${backup}.network`;

/** Go's MarshalIndent(config, "", " ") of configToRestore: omitempty fields in declaration order. */
export function formatBackup(b: Backup): string {
  const out: Backup = {};
  if (b.mac) out.mac = b.mac;
  if (b.promisc !== undefined) out.promisc = b.promisc;
  if (b.mtu) out.mtu = b.mtu;
  if (b.allmulti !== undefined) out.allmulti = b.allmulti;
  if (b.txQLen !== undefined) out.txQLen = b.txQLen;
  return JSON.stringify(out, null, 1);
}

/** Go's json.Unmarshal into configToRestore; undefined for anything the reference cannot read. */
export function parseBackup(text: string): Backup | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const out: Backup = {};
  for (const [k, val] of Object.entries(v)) {
    switch (k.toLowerCase()) {
      case 'mac':
        if (typeof val !== 'string') return undefined;
        out.mac = val;
        break;
      case 'promisc':
        if (typeof val !== 'boolean') return undefined;
        out.promisc = val;
        break;
      case 'mtu':
        if (!Number.isInteger(val)) return undefined;
        out.mtu = val as number;
        break;
      case 'allmulti':
        if (typeof val !== 'boolean') return undefined;
        out.allmulti = val;
        break;
      case 'txqlen':
        if (!Number.isInteger(val)) return undefined;
        out.txQLen = val as number;
        break;
    }
  }
  return out;
}

export function openDataDir(dataDir: string, create: boolean): StateDir | undefined {
  return create ? StateDir.open(dataDir, { create: true, mode: 0o600 }) : StateDir.openIfExists(dataDir);
}
