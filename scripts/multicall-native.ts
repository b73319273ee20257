/**
 * Run-time extraction of the embedded native addon moved to @cnikit/build (packages/buildkit/src/runtime/native.ts).
 * Re-exported for the scripts and tests here (scripts/install.ts's writeAtomic), by path: scripts/install runs
 * under plain tsx, without the `cnikit-source` condition that resolves @cnikit/build to its sources.
 */
export {
  bunSource,
  candidateDirs,
  ensurePrivateDir,
  extractNative,
  installNativeOverride,
  type NativeSource,
  seaSource,
  verifyFile,
  writeAtomic,
} from '../packages/buildkit/src/runtime/native.ts';
