/**
 * The inner loop's selection (`node scripts/run-tests.mjs --plugin NAME` sets it): a file shared by several plugins
 * (test-netns/stacked.test.ts) runs only the cases of the plugins named.
 */

/** Comma-separated plugin names; unset = every plugin (npm test). */
export const TEST_PLUGINS_ENV = 'CNIKIT_TEST_PLUGINS';

/** Whether the cases of plugin `name` run: always, unless CNIKIT_TEST_PLUGINS names other plugins only. */
export function pluginSelected(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const list = (env[TEST_PLUGINS_ENV] ?? '').split(',').filter(Boolean);
  return list.length === 0 || list.includes(name);
}
