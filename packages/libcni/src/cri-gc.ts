/**
 * Node-scoped CNI GC from the container runtime's live sandboxes (`cnitool gc --from-cri SOCKET`, and the warm
 * service's periodic GC): the valid attachments are the pod sandboxes the CRI lists (READY and NOTREADY: a stopped
 * sandbox still owns its network until it is removed), each sandbox's ID being the CNI container ID, so what a reboot
 * or a crashed runtime left behind (containerd/cri#948: host-local reservations of sandboxes that no longer exist) is
 * released, and nothing of a sandbox that exists.
 *
 * Rules:
 * - the sandboxes are read first; if the CRI cannot be reached or answers an error, nothing is released;
 * - a live sandbox keeps every attachment of its ID, whatever the interface name;
 * - an attachment younger than the grace period (file modification time) is kept: containerd adds a sandbox to its
 *   list only after the network of RunPodSandbox is set up, so a fresh reservation may belong to a sandbox in creation;
 * - a stale cached attachment (the result cache in cacheDir) gets a full DEL of the list, as libcni's GC does; then
 *   the plugins' GC runs with the valid attachments (spec 1.1.0 `cni.dev/valid-attachments`), for a list older than
 *   1.1.0 too (as 1.1.0: the version that defines GC) when host-local reservations without a cached result remain.
 * - the dry run only reads: it tells what would be released.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { CniConfig } from './api.ts';
import { getCachedAttachments } from './cache.ts';
import {
  confFiles,
  confFromFile,
  confListFromConf,
  confListFromFile,
  loadNetworkConf,
  type NetworkConfigList,
} from './conf.ts';
import { type CriSandbox, listPodSandboxes } from './cri.ts';
import { LibcniError } from './errors.ts';

export const HOST_LOCAL_DATA_DIR = '/var/lib/cni/networks';
export const DEFAULT_GC_GRACE_MS = 60_000;

/** Something GC would release (or released): a cached attachment, or a host-local reservation. */
export interface StaleItem {
  network: string;
  containerId: string;
  ifName: string;
  /** `cache`: a cached result (gets a DEL); `host-local`: a reservation file (the plugin's GC removes it). */
  kind: 'cache' | 'host-local';
  /** host-local: the address; cache: the cache file. */
  what: string;
}

export interface CriGcNetworkReport {
  network: string;
  stale: StaleItem[];
  /** After a real run: those of `stale` that are gone. */
  released: StaleItem[];
  /** Kept although no sandbox has them: younger than the grace period. */
  recent: StaleItem[];
  errors: string[];
}

export interface CriGcReport {
  service: string;
  sandboxes: CriSandbox[];
  dryRun: boolean;
  networks: CriGcNetworkReport[];
}

export interface CriGcOptions {
  socket: string;
  cni: CniConfig;
  /** The directory of network configuration lists (NETCONFPATH). */
  netDir: string;
  /** Only this network; default every list of netDir. */
  network?: string;
  /** libcni's cache directory (default /var/lib/cni). */
  cacheDir?: string;
  /** Interface name a live sandbox's attachment has when nothing on disk names it (default eth0). */
  ifName?: string;
  dryRun?: boolean;
  graceMs?: number;
  timeoutMs?: number;
  now?: () => number;
}

function allLists(netDir: string): NetworkConfigList[] {
  const out: NetworkConfigList[] = [];
  for (const f of confFiles(netDir, ['.conf', '.conflist', '.json'])) {
    out.push(f.endsWith('.conflist') ? confListFromFile(f) : confListFromConf(confFromFile(f)));
  }
  return out;
}

interface Found extends StaleItem {
  mtimeMs: number;
}

/** host-local reservations of the list's network: files named by an address in `<dataDir>/<network>/`. */
function reservations(list: NetworkConfigList): Found[] {
  const dirs = new Set<string>();
  for (const p of list.plugins) {
    const ipam = (p.raw as { ipam?: { type?: unknown; dataDir?: unknown } }).ipam;
    if (ipam?.type !== 'host-local') continue;
    const dataDir =
      typeof ipam.dataDir === 'string' && ipam.dataDir !== '' ? ipam.dataDir : HOST_LOCAL_DATA_DIR;
    dirs.add(join(dataDir, list.name));
  }
  const out: Found[] = [];
  for (const dir of dirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new LibcniError(`read ${dir}: ${(e as Error).message}`);
    }
    for (const name of names.sort()) {
      if (isIP(name) === 0) continue;
      const path = join(dir, name);
      let st: ReturnType<typeof statSync>;
      let text: string;
      try {
        st = statSync(path);
        if (!st.isFile()) continue;
        text = readFileSync(path, 'utf8');
      } catch {
        continue;
      }
      const [id = '', ifName = ''] = text.split('\r\n');
      out.push({
        network: list.name,
        containerId: id.trim(),
        ifName: ifName.trim(),
        kind: 'host-local',
        what: name,
        mtimeMs: st.mtimeMs,
      });
    }
  }
  return out;
}

function cached(list: NetworkConfigList, cacheDir: string): Found[] {
  const out: Found[] = [];
  for (const a of getCachedAttachments(cacheDir)) {
    if (a.network !== list.name) continue;
    const file = join(cacheDir, 'results', `${list.name}-${a.containerId}-${a.ifName}`);
    let mtimeMs = 0;
    try {
      mtimeMs = statSync(file).mtimeMs;
    } catch {
      // named otherwise: treat as old
    }
    out.push({
      network: list.name,
      containerId: a.containerId,
      ifName: a.ifName,
      kind: 'cache',
      what: file,
      mtimeMs,
    });
  }
  return out;
}

const strip = ({ mtimeMs: _, ...item }: Found): StaleItem => item;
const itemKey = (i: StaleItem) => `${i.kind}\u0000${i.what}`;

/** Run (or, with dryRun, plan) the GC. Rejects (releasing nothing) when the CRI cannot give its sandboxes. */
export async function criGc(opts: CriGcOptions): Promise<CriGcReport> {
  const { service, sandboxes } = await listPodSandboxes(opts.socket, opts.timeoutMs);
  const live = new Set(sandboxes.map((s) => s.id));
  const cacheDir = opts.cacheDir || '/var/lib/cni';
  const ifName = opts.ifName || 'eth0';
  const grace = opts.graceMs ?? DEFAULT_GC_GRACE_MS;
  const now = (opts.now ?? Date.now)();
  const lists = opts.network ? [loadNetworkConf(opts.netDir, opts.network)] : allLists(opts.netDir);
  const report: CriGcReport = { service, sandboxes, dryRun: opts.dryRun === true, networks: [] };

  for (const list of lists) {
    const found = [...cached(list, cacheDir), ...reservations(list)];
    const valid = new Map<string, { containerID: string; ifname: string }>();
    const keep = (containerID: string, ifname: string) =>
      valid.set(`${containerID}\u0000${ifname}`, { containerID, ifname });
    for (const id of live) keep(id, ifName);
    const stale: Found[] = [];
    const recent: Found[] = [];
    for (const f of found) {
      if (live.has(f.containerId)) keep(f.containerId, f.ifName || ifName);
      else if (now - f.mtimeMs < grace) {
        recent.push(f);
        keep(f.containerId, f.ifName || ifName);
      } else stale.push(f);
    }
    const net: CriGcNetworkReport = {
      network: list.name,
      stale: stale.map(strip),
      released: [],
      recent: recent.map(strip),
      errors: [],
    };
    report.networks.push(net);
    if (opts.dryRun || stale.length === 0 || list.disableGC) continue;

    const validAttachments = [...valid.values()];
    const run = async (l: NetworkConfigList) => {
      try {
        await opts.cni.gcNetworkList(l, { validAttachments });
      } catch (e) {
        net.errors.push(e instanceof Error ? e.message : String(e));
      }
    };
    await run(list);
    const left = () => {
      const now = new Set([...cached(list, cacheDir), ...reservations(list)].map(itemKey));
      return stale.filter((s) => now.has(itemKey(s)));
    };
    if (!gte11(list.cniVersion) && left().some((s) => s.kind === 'host-local'))
      await run({ ...list, cniVersion: '1.1.0' });
    const remaining = new Set(left().map(itemKey));
    net.released = stale.filter((s) => !remaining.has(itemKey(s))).map(strip);
  }
  return report;
}

function gte11(v: string): boolean {
  const [a = 0, b = 0] = v.split('.').map(Number);
  return a > 1 || (a === 1 && b >= 1);
}

/** The report as lines of text (cnitool's output). */
export function formatCriGcReport(r: CriGcReport): string {
  const lines = [`${r.sandboxes.length} pod sandbox(es) from ${r.service}`];
  const verb = r.dryRun ? 'would release' : 'released';
  for (const n of r.networks) {
    const items = r.dryRun ? n.stale : n.released;
    for (const s of items)
      lines.push(
        `${verb} ${s.kind === 'host-local' ? `address ${s.what}` : 'cached attachment'} of ${s.containerId} ${s.ifName} (network ${n.network})`,
      );
    for (const s of n.recent)
      lines.push(
        `kept ${s.kind === 'host-local' ? `address ${s.what}` : 'cached attachment'} of ${s.containerId} ${s.ifName} (network ${n.network}): younger than the grace period`,
      );
    if (!r.dryRun)
      for (const s of n.stale.filter((x) => !n.released.some((y) => itemKey(x) === itemKey(y))))
        lines.push(`NOT released ${s.kind} ${s.what} of ${s.containerId} ${s.ifName} (network ${n.network})`);
    for (const e of n.errors) lines.push(`error (network ${n.network}): ${e}`);
    if (items.length === 0 && n.recent.length === 0) lines.push(`nothing to release (network ${n.network})`);
  }
  return `${lines.join('\n')}\n`;
}
