/**
 * The three kernel operations loopback needs, on `lo` of the calling thread's namespace (call inside withNetns).
 * TEMPORARY: implemented with iproute2 (spawnSync, argument arrays, no shell) until @cnikit/netlink's link and
 * address operations land; then this file switches to setLinkUp/setLinkDown/getLink/listAddrs.
 */
import { spawnSync } from 'node:child_process';

export interface LoopbackAddr {
  family: 4 | 6;
  ip: string;
  prefixLen: number;
}

function ip(args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
}

export function setLoopbackUp(): void {
  ip(['link', 'set', 'dev', 'lo', 'up']);
}

export function setLoopbackDown(): void {
  ip(['link', 'set', 'dev', 'lo', 'down']);
}

export function loopbackIsUp(): boolean {
  const [link] = JSON.parse(ip(['-json', 'link', 'show', 'dev', 'lo'])) as Array<{ flags?: string[] }>;
  return Boolean(link?.flags?.includes('UP'));
}

export function loopbackAddrs(): LoopbackAddr[] {
  const [link] = JSON.parse(ip(['-json', 'addr', 'show', 'dev', 'lo'])) as Array<{
    addr_info?: Array<{ family: string; local: string; prefixlen: number }>;
  }>;
  return (link?.addr_info ?? []).map((a) => ({
    family: a.family === 'inet6' ? 6 : 4,
    ip: a.local,
    prefixLen: a.prefixlen,
  }));
}
