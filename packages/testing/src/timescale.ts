/**
 * One knob for every wall-clock bound in tests: `CNIKIT_TEST_TIME_SCALE` (a positive number, default 1).
 *
 * A timeout that holds on a developer's machine is wrong under emulation: the kernel lab's VM (`npm run vm`,
 * `npm run test:vm`, docs/kernel-lab.md) runs every process start 5-30x slower under TCG on a loaded machine. The
 * lab sets the variable in the VM (the caller's value times its own factor), and every per-process timeout, poll
 * deadline and "answered within" bound of the harness and the tests goes through {@link scaled}:
 *
 * ```ts
 * import { scaled } from '@cnikit/testing';
 * test('ADD then DEL', { timeout: scaled(60_000) }, async () => {
 *   spawnSync('ip', args, { timeout: scaled(30_000) });
 * });
 * ```
 *
 * The helpers of this package (`cniCall`'s `timeoutMs`, `eventually`, sandbox `exec`, snapshots, the kernel
 * feature probes, firewalld start-up) scale their defaults and the bounds they are given themselves. Values that are
 * the behaviour under test (a plugin's own `--timeout 0.5`, a DHCP lease time) are not wall-clock bounds of the test
 * and stay as they are.
 */

/** The variable the kernel lab sets (and anyone may set on a slow machine). */
export const TIME_SCALE_ENV = 'CNIKIT_TEST_TIME_SCALE';

/** The factor of {@link TIME_SCALE_ENV}: 1 when unset or empty; anything but a positive finite number throws. */
export function timeScale(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[TIME_SCALE_ENV];
  if (raw === undefined || raw.trim() === '') return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${TIME_SCALE_ENV}=${JSON.stringify(raw)}: expected a positive number (e.g. 1, 2.5, 10)`);
  return n;
}

/** `ms` times {@link timeScale}, rounded to whole milliseconds (at least 1). */
export function scaled(ms: number, env: NodeJS.ProcessEnv = process.env): number {
  return Math.max(1, Math.round(ms * timeScale(env)));
}
