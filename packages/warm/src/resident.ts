/**
 * The mark of the warm service's process: plugins that keep state from call to call when they run in it (the
 * cluster-ipam plugin's in-memory view of the node's blocks) look for it on globalThis under this symbol, so
 * they need not import the service. Set once, when the service starts; a cold executable never sets it.
 */
export const RESIDENT = Symbol.for('cnikit.resident');

export function markResident(): void {
  (globalThis as Record<symbol, unknown>)[RESIDENT] = true;
}
