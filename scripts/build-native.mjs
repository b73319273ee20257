#!/usr/bin/env node
// Builds the native addon packages/sys (src/sys.c → build/Release/cnikit_sys.node) with node-gyp.
// npm 11 does not run install scripts on its own, so `npm run build:native` / `npm run build` call this.
//   node scripts/build-native.mjs           build unless the .node is newer than its sources
//   node scripts/build-native.mjs --force   always rebuild
// Headers: when the running Node ships its headers (<prefix>/include/node/node_api.h, e.g. /usr for the
// Debian/NodeSource packages) they are used (--nodedir), so no download is needed.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = join(root, 'packages', 'sys');
const output = join(pkg, 'build', 'Release', 'cnikit_sys.node');
const force = process.argv.includes('--force');

function newestSource() {
  let newest = statSync(join(pkg, 'binding.gyp')).mtimeMs;
  for (const name of readdirSync(join(pkg, 'src'))) {
    if (/\.(c|h)$/.test(name)) newest = Math.max(newest, statSync(join(pkg, 'src', name)).mtimeMs);
  }
  newest = Math.max(newest, statSync(fileURLToPath(import.meta.url)).mtimeMs);
  return newest;
}

if (!force && existsSync(output) && statSync(output).mtimeMs >= newestSource()) {
  console.log(`build-native: ${output} is up to date`);
  process.exit(0);
}

const nodeGyp = [
  join(root, 'node_modules', '.bin', 'node-gyp'),
  join(pkg, 'node_modules', '.bin', 'node-gyp'),
].find((p) => existsSync(p));
if (!nodeGyp) {
  console.error('build-native: node-gyp not found in node_modules/.bin; run `npm ci` first');
  process.exit(1);
}
// `build` in an already-configured tree replaces the .node only at the end (processes loading it meanwhile keep
// working); `rebuild` (clean + configure + build) is for a fresh tree or --force.
const configured =
  existsSync(join(pkg, 'build', 'Makefile')) && existsSync(join(pkg, 'build', 'config.gypi'));
const args = [configured && !force ? 'build' : 'rebuild', '--release'];
const prefix = dirname(dirname(process.execPath));
if (
  existsSync(join(prefix, 'include', 'node', 'node_api.h')) &&
  existsSync(join(prefix, 'include', 'node', 'common.gypi'))
) {
  args.push(`--nodedir=${prefix}`);
}
console.log(`build-native: ${nodeGyp} ${args.join(' ')} (in ${pkg})`);
let r = spawnSync(nodeGyp, args, { cwd: pkg, stdio: ['ignore', 'inherit', 'inherit'] });
if (!r.error && r.status !== 0 && args[0] === 'build') {
  console.log('build-native: incremental build failed; retrying with a clean rebuild');
  args[0] = 'rebuild';
  r = spawnSync(nodeGyp, args, { cwd: pkg, stdio: ['ignore', 'inherit', 'inherit'] });
}
if (r.error) {
  console.error(`build-native: cannot run node-gyp: ${r.error.message}`);
  process.exit(1);
}
if (r.status !== 0 || !existsSync(output)) {
  console.error(
    `build-native: node-gyp failed (exit ${r.status ?? r.signal}); a C compiler, make and python3 are needed`,
  );
  process.exit(r.status || 1);
}
console.log(`build-native: built ${output}`);
