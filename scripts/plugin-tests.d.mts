// Types of scripts/plugin-tests.mjs (plain JavaScript: run-tests.mjs imports it without a TypeScript loader).
export const SHARED: Readonly<Record<string, string>>;
export const NO_CONFORMANCE_ROW: Readonly<Record<string, string>>;
export function pluginNames(root: string): string[];
export function markedPlugins(text: string): string[];
export function labRows(root: string): string[];
export interface PluginTests {
  unit: string[];
  kernel: string[];
  blackBox: string[];
  conformance: { file: string; row: string } | undefined;
}
export function pluginTests(root: string, name: string): PluginTests;
export function pluginTestFiles(root: string, name: string): string[];
