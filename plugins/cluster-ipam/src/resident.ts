/**
 * Whether this process is the node's warm service (`cnikit serve` marks itself on globalThis under this symbol:
 * packages/warm/src/resident.ts), where the plugin keeps state from call to call (warm.ts).
 */
const RESIDENT = Symbol.for('cnikit.resident');

export function isResident(): boolean {
  return (globalThis as Record<symbol, unknown>)[RESIDENT] === true;
}
