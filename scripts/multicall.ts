/**
 * The entry of the executables moved to @cnikit/build (packages/build/src/runtime/multicall.ts: one implementation
 * for this repository's build and for plugin authors' `cnikit-build`). Re-exported for the scripts and tests here.
 */
export * from '@cnikit/build/runtime';
