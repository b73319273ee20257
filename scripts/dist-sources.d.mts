// Types of scripts/dist-sources.mjs (plain JavaScript: run-tests.mjs imports it without a TypeScript loader).
export type Backend = 'bun' | 'sea';
export function distSources(root: string): string[];
export function distSourcesDigest(root: string): string;
export function buildCommand(backends: readonly Backend[]): string;
export function distProblem(root: string, backends: readonly Backend[]): string | undefined;
export function ensureDist(
  root: string,
  backends: readonly Backend[],
  say?: (line: string) => void,
): string | undefined;
