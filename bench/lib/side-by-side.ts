/**
 * What the side-by-side benchmarks (bench/*.ts) share: one timed plugin exec, the median and quantiles of wall times,
 * one row per operation (cnikit vs Go medians, p90 and the ratio), and printing the rows (or JSON with --json).
 * A new benchmark imports these instead of writing its own.
 */
import { spawnSync } from 'node:child_process';

/**
 * Exec a plugin like a runtime (the CNI_* variables of `env` plus PATH, the configuration on stdin) and return its
 * wall time in milliseconds; a failure throws with the plugin's output.
 */
export function timedExec(bin: string, env: Record<string, string>, input: string): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(bin, [], { env: { ...env, PATH: process.env.PATH }, input, encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${bin} ${env.CNI_COMMAND} failed: ${r.stdout}${r.stderr}`);
  return ms;
}

/** The p-quantile (0..1) of a list of samples (the sample at floor(n·p) of the sorted list). */
export function quantile(xs: readonly number[], p: number): number {
  return [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
}

/** The median of a list of samples (the mean of the two middle samples when their number is even; NaN when empty). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface SideBySideRow {
  op: string;
  cnikit: number;
  cnikitP90: number;
  go: number;
  goP90: number;
  /** cnikit median / Go median. */
  ratio: number;
}

export function sideBySide(op: string, ours: readonly number[], go: readonly number[]): SideBySideRow {
  const m = quantile(ours, 0.5);
  const g = quantile(go, 0.5);
  return { op, cnikit: m, cnikitP90: quantile(ours, 0.9), go: g, goP90: quantile(go, 0.9), ratio: m / g };
}

/** Print the rows under a title (or their JSON when `json`). */
export function printRows(title: string, rows: readonly SideBySideRow[], json: boolean): void {
  if (json) {
    console.log(JSON.stringify(rows));
    return;
  }
  console.log(title);
  const width = Math.max(...rows.map((r) => r.op.length)) + 2;
  for (const r of rows) {
    console.log(
      `  ${r.op.padEnd(width)} cnikit ${r.cnikit.toFixed(1)} ms (${r.cnikitP90.toFixed(1)})   go ${r.go.toFixed(1)} ms (${r.goP90.toFixed(1)})   ratio ${r.ratio.toFixed(2)}×`,
    );
  }
}
