/**
 * @cnikit/testing — helpers for testing CNI plugins against the real kernel, inside private
 * network namespaces: `createSandbox()` / `withSandbox(fn)` (a "host" and a "container" netns),
 * `snapshot()` / `snapshotNetns()` and `diffSnapshots()` to compare kernel state before/after.
 * `startPrivateSystemBus()` / `startFirewalld()`: a real firewalld on a private bus inside a sandbox namespace.
 * `ipJson()`, `ipLink()`, `linkNames()`, `globalAddrs()`: kernel state read back through iproute2's JSON output.
 * `linkLab()`: the fixture of a stacked link plugin's kernel test (sandbox, config, host-local, `clean()`).
 * `requireKernelFeatures()` and the `// cnikit-kernel-features:` file marker: tests that need kernel features some
 * kernels lack run in the kernel lab (docs/kernel-lab.md). `scaled(ms)`: every wall-clock bound of a test, times
 * `CNIKIT_TEST_TIME_SCALE` (the lab's VM sets it).
 * Requires root. Never touches the machine's root network namespace.
 */
// Every export here is public API.
export {
  type CniCallOptions,
  type CniCommand,
  type CniOutcome,
  type CniRunner,
  type CniTarget,
  catchError,
  cniCall,
  cniEnv,
  cniRunner,
  enterNetns,
  eventually,
  expectCniError,
  expectOk,
  sleep,
  tempDir,
} from './cni.ts';
export {
  busNameHasOwner,
  dbusSendRaw,
  type FirewalldOptions,
  type PrivateBus,
  type PrivateFirewalld,
  startFirewalld,
  startPrivateSystemBus,
} from './firewalld.ts';
export {
  globalAddrs,
  type IpJson,
  type IpNetns,
  ipAddrLink,
  ipAddrLinks,
  ipJson,
  ipLink,
  ipLinks,
  ipRun,
  linkNames,
} from './ip.ts';
export {
  KERNEL_FEATURES,
  type KernelFeature,
  type KernelFeatureName,
  missingKernelFeatures,
  type ProbeOutcome,
  parseKernelFeaturesMarker,
  probeKernelFeatures,
  requireKernelFeatures,
} from './kernel-features.ts';
export { hostLocalReservations, type LinkLabOptions, linkLab } from './link-lab.ts';
export {
  createNamedNetns,
  createSandbox,
  deleteNamedNetns,
  destroyAllSandboxes,
  type ExecOptions,
  type ExecResult,
  type NamedNetns,
  type Sandbox,
  type SandboxRole,
  sandboxForFile,
  withNamedNetns,
  withSandbox,
} from './sandbox.ts';
export { pluginSelected, TEST_PLUGINS_ENV } from './selection.ts';
export {
  DEFAULT_SYSCTLS,
  diffSnapshots,
  formatDiff,
  SNAPSHOT_SECTIONS,
  type Snapshot,
  type SnapshotDiff,
  type SnapshotOptions,
  type SnapshotSection,
  snapshotNetns,
  stableJson,
  stableStateFile,
} from './snapshot.ts';
export { scaled, TIME_SCALE_ENV, timeScale } from './timescale.ts';
