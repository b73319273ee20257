#!/usr/bin/env node
// `npm run build:packages`: the publishable form of every SDK package (packages/*/tsconfig.build.json):
// compiled ESM JavaScript + .d.ts + declaration maps in packages/<name>/dist/ (git-ignored), built by `tsc -b` in
// dependency order (project references), from scratch every time. The native addon of
// @cnikit/sys is built first (scripts/build-native.mjs); its prebuilt copy is put into the tarball by the
// package's own prepack script. Inside the repository nothing needs this: tests, scripts and the executables' bundle
// run from the TypeScript sources through the `cnikit-source` export condition.
//   node scripts/build-packages.mjs            build
//   node scripts/build-packages.mjs --clean    remove every packages/*/dist
//   node scripts/build-packages.mjs --list     print the package directories that are built
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dirs = readdirSync(join(root, 'packages'))
  .filter((d) => existsSync(join(root, 'packages', d, 'tsconfig.build.json')))
  .sort();

if (process.argv.includes('--list')) {
  console.log(dirs.join('\n'));
  process.exit(0);
}
if (process.argv.includes('--clean')) {
  for (const d of dirs) rmSync(join(root, 'packages', d, 'dist'), { recursive: true, force: true });
  process.exit(0);
}
const t0 = performance.now();
// Always from scratch: tsc -b would keep the outputs of a source file that was since removed or excluded, and
// `files: ["dist"]` would publish them.
for (const d of dirs) rmSync(join(root, 'packages', d, 'dist'), { recursive: true, force: true });
const native = spawnSync(process.execPath, [join(root, 'scripts', 'build-native.mjs')], { stdio: 'inherit' });
if (native.status !== 0) process.exit(native.status ?? 1);
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const r = spawnSync(
  process.execPath,
  [tsc, '-b', ...dirs.map((d) => join(root, 'packages', d, 'tsconfig.build.json'))],
  { cwd: root, stdio: 'inherit' },
);
if (r.status !== 0) {
  console.error('build-packages: tsc -b failed');
  process.exit(r.status ?? 1);
}
console.log(
  `build-packages: ${dirs.map((d) => `packages/${d}/dist`).join(', ')} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
);
