/**
 * @cnikit/testing — helpers for testing CNI plugins against the real kernel, inside private
 * network namespaces: `createSandbox()` / `withSandbox(fn)` (a "host" and a "container" netns),
 * `snapshot()` / `snapshotNetns()` and `diffSnapshots()` to compare kernel state before/after.
 * Requires root. Never touches the machine's root network namespace.
 */

export * from './cni.ts';
export * from './firewalld.ts';
export * from './sandbox.ts';
export * from './snapshot.ts';
