/**
 * Independent readers of kernel state for tests: iproute2's JSON output (`ip -j`), parsed. A namespace is named
 * (`ip -n NAME`; a NamedNetns or its name) or, undefined, the calling thread's. A failing `ip` throws with its stderr.
 */
import { spawnSync } from 'node:child_process';
import type { NamedNetns } from './sandbox.ts';

/** One object of `ip -j` output (iproute2's own field names: `ifname`, `addr_info`, `linkinfo`, …). */
// biome-ignore lint/suspicious/noExplicitAny: iproute2 JSON
export type IpJson = any;

/** Where an `ip` command looks: a named namespace, or the calling thread's (undefined). */
export type IpNetns = NamedNetns | string | undefined;

function nsArgs(ns: IpNetns): string[] {
  if (ns === undefined) return [];
  return ['-n', typeof ns === 'string' ? ns : ns.name];
}

/** Runs `ip [-n NS] ARGS` and returns its stdout. */
export function ipRun(ns: IpNetns, ...args: string[]): string {
  const full = [...nsArgs(ns), ...args];
  const r = spawnSync('ip', full, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${full.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** `ip [-n NS] -j ARGS`, parsed (`[]` for empty output). */
export function ipJson(ns: IpNetns, ...args: string[]): IpJson[] {
  const out = ipRun(ns, '-j', ...args);
  return out.trim() ? JSON.parse(out) : [];
}

/** Every link with its details (`ip -d -j link show`). */
export function ipLinks(ns: IpNetns): IpJson[] {
  return ipJson(ns, '-d', 'link', 'show');
}

/** The link `name` with its details, or undefined. */
export function ipLink(ns: IpNetns, name: string): IpJson | undefined {
  return ipLinks(ns).find((l) => l.ifname === name);
}

/** Every link with its details and addresses (`ip -d -j addr show`). */
export function ipAddrLinks(ns: IpNetns): IpJson[] {
  return ipJson(ns, '-d', 'addr', 'show');
}

/** The link `name` with its details and addresses, or undefined. */
export function ipAddrLink(ns: IpNetns, name: string): IpJson | undefined {
  return ipAddrLinks(ns).find((l) => l.ifname === name);
}

/** The names of the namespace's links, sorted. */
export function linkNames(ns: IpNetns): string[] {
  return ipJson(ns, 'link', 'show')
    .map((l) => l.ifname as string)
    .sort();
}

/** The global-scope addresses of `dev`, `ip/prefix`. */
export function globalAddrs(ns: IpNetns, dev: string): string[] {
  return ((ipJson(ns, 'addr', 'show', 'dev', dev)[0]?.addr_info ?? []) as IpJson[])
    .filter((a) => a.scope === 'global')
    .map((a) => `${a.local}/${a.prefixlen}`);
}
