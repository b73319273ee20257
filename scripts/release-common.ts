/**
 * What the parts of `npm run release` (release.ts) share: the repository root, the work and cache directories, the
 * error type, logging, running a tool, and package-lock.json's entries.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const WORK = join(ROOT, 'build', 'release');
export const CACHE = join(ROOT, 'node_modules', '.cache', 'cnikit-release');
export const CONDITIONS = ['cnikit-source'];

export class ReleaseError extends Error {}

export function log(msg: string): void {
  process.stderr.write(`[release] ${msg}\n`);
}

export function run(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): string {
  const r = spawnSync(cmd, args, { cwd: opts.cwd, env: opts.env, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw new ReleaseError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new ReleaseError(`${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal}):\n${r.stderr}`);
  return r.stdout;
}

export interface PackageJson {
  name: string;
  version: string;
  license?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

export function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

/** package-lock.json's entry of an installed or platform-optional package (version, integrity). */
export function lockEntry(
  name: string,
): { version: string; integrity?: string; resolved?: string } | undefined {
  const lock = readJson<{
    packages: Record<string, { version: string; integrity?: string; resolved?: string }>;
  }>(join(ROOT, 'package-lock.json'));
  return lock.packages[`node_modules/${name}`];
}

export interface Source {
  commit: string;
  dirty: boolean;
  /** Seconds since the epoch: SOURCE_DATE_EPOCH, else the commit date. */
  epoch: number;
}
