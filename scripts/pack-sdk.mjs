#!/usr/bin/env node
// `npm run pack:sdk [-- --out DIR]`: every tarball a plugin author needs, in one directory (default
// release/sdk/): builds the SDK packages (scripts/build-packages.mjs), packs each published one (`npm pack`, whose
// prepack checks the build), and prints the one command that installs them all — installed together, the
// @cnikit packages' dependencies on each other resolve among the tarballs.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const i = process.argv.indexOf('--out');
const out = resolve(i > 0 && process.argv[i + 1] ? process.argv[i + 1] : join(root, 'release', 'sdk'));
const dirs = readdirSync(join(root, 'packages'))
  .filter((d) => existsSync(join(root, 'packages', d, 'tsconfig.build.json')))
  .filter((d) => !JSON.parse(readFileSync(join(root, 'packages', d, 'package.json'), 'utf8')).private)
  .sort();

const build = spawnSync(process.execPath, [join(root, 'scripts', 'build-packages.mjs')], {
  stdio: 'inherit',
});
if (build.status !== 0) process.exit(build.status ?? 1);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const npm = spawnSync(
  'npm',
  ['pack', '--silent', '--pack-destination', out, ...dirs.flatMap((d) => ['-w', `packages/${d}`])],
  { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' },
);
if (npm.status !== 0) process.exit(npm.status ?? 1);
const tarballs = readdirSync(out)
  .filter((f) => f.endsWith('.tgz'))
  .sort();
process.stdout.write(
  `pack-sdk: ${tarballs.length} tarballs in ${out}\n` +
    `install them all in your project with one command:\n  npm install ${tarballs.map((t) => join(out, t)).join(' ')}\n`,
);
