/** Helpers shared by the host-local tests (not part of the plugin). */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { invokeInProcess } from '@cnikit/skel';
import { plugin } from './index.ts';

export function tempDir(tag = 'hl'): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), `cnikit-${tag}-${process.pid}-`));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

export interface Call {
  command?: string;
  id?: string;
  ifname?: string;
  args?: string;
  netns?: string;
}

export function env(c: Call = {}): Record<string, string> {
  const e: Record<string, string> = {
    CNI_COMMAND: c.command ?? 'ADD',
    CNI_CONTAINERID: c.id ?? 'dummy',
    CNI_NETNS: c.netns ?? '/var/run/netns/test',
    CNI_IFNAME: c.ifname ?? 'eth0',
    CNI_PATH: '/opt/cni/bin',
  };
  if (c.args !== undefined) e.CNI_ARGS = c.args;
  if (c.command === 'GC' || c.command === 'STATUS') {
    delete e.CNI_CONTAINERID;
    delete e.CNI_NETNS;
    delete e.CNI_IFNAME;
  }
  return e;
}

export interface Outcome {
  code: number;
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
  json: any;
  stdout: string;
  stderr: string;
}

export async function call(conf: unknown, c: Call = {}): Promise<Outcome> {
  const r = await invokeInProcess(plugin, env(c), typeof conf === 'string' ? conf : JSON.stringify(conf));
  return { ...r, json: r.stdout ? JSON.parse(r.stdout) : undefined };
}

export async function add(conf: unknown, c: Call = {}): Promise<Outcome> {
  return call(conf, { ...c, command: 'ADD' });
}

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
