/**
 * Run-time extraction of the embedded native addon moved to @cnikit/build (packages/build/src/runtime/native.ts).
 * Re-exported for the scripts and tests here, by path (scripts/install runs under plain tsx).
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
} from '../packages/build/src/runtime/native.ts';
