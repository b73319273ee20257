// Test helper (not exported from the package): throwaway named network namespaces and independent state
// readers based on iproute2's JSON output.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

export interface TestNs {
  name: string;
  path: string;
}

export function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** Creates a named namespace cnikit-nl-<pid>-<rand> with lo up. */
export function makeNs(): TestNs {
  const name = `cnikit-nl-${process.pid}-${randomBytes(3).toString('hex')}`;
  run('ip', ['netns', 'add', name]);
  run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  return { name, path: `/run/netns/${name}` };
}

export function delNs(ns: TestNs | undefined): void {
  if (ns) spawnSync('ip', ['netns', 'del', ns.name]);
}

/** Runs fn with `count` fresh namespaces, deleting them afterwards even on failure. */
export function withTestNs<T>(count: number, fn: (...ns: TestNs[]) => T): T {
  const made: TestNs[] = [];
  try {
    for (let i = 0; i < count; i++) made.push(makeNs());
    return fn(...made);
  } finally {
    for (const ns of made) delNs(ns);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: iproute2 JSON
export type Json = any;

export function ipJson(ns: TestNs, ...args: string[]): Json {
  const out = run('ip', ['-n', ns.name, '-json', ...args]);
  return out.trim() ? JSON.parse(out) : [];
}

export function bridgeJson(ns: TestNs, ...args: string[]): Json {
  const out = run('bridge', ['-n', ns.name, '-json', ...args]);
  return out.trim() ? JSON.parse(out) : [];
}

export function ipLink(ns: TestNs, name: string): Json | undefined {
  const r = spawnSync('ip', ['-n', ns.name, '-json', '-details', 'link', 'show', 'dev', name], {
    encoding: 'utf8',
  });
  if (r.status !== 0) return undefined;
  return JSON.parse(r.stdout)[0];
}

export function ip(ns: TestNs, ...args: string[]): string {
  return run('ip', ['-n', ns.name, ...args]);
}
