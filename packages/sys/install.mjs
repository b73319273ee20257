#!/usr/bin/env node
// npm install script of @cnikit/sys: use the prebuilt addon when it loads here, otherwise build from source.
//   1. prebuilds/<platform>-<arch>/cnikit_sys.node (shipped for linux-x64) is loaded once; if it works, done.
//   2. build/Release/cnikit_sys.node from an earlier build that loads: done.
//   3. node-gyp rebuild (npm's bundled node-gyp, else one on PATH), using the running Node's own headers when it
//      ships them (<prefix>/include/node), so no header download is needed.
// With `npm install --ignore-scripts` nothing runs: on linux-x64 the prebuilt addon is found at run time anyway.
// In the cnikit repository itself (a workspace) nothing is done: `npm run build:native` builds the addon there.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = dirname(fileURLToPath(import.meta.url));
const FILE = 'cnikit_sys.node';
const target = `${process.platform}-${process.arch}`;

function loads(path) {
  if (!existsSync(path)) return false;
  try {
    process.dlopen({ exports: {} }, path);
    return true;
  } catch (err) {
    console.error(`@cnikit/sys: ${path} does not load here (${err.message})`);
    return false;
  }
}

if (
  existsSync(join(pkg, '..', '..', 'scripts', 'build-native.mjs')) &&
  existsSync(join(pkg, 'binding.gyp'))
) {
  console.log('@cnikit/sys: cnikit development checkout; `npm run build:native` builds the addon');
  process.exit(0);
}
if (process.platform !== 'linux') {
  // type-checking and in-process tests work anywhere; the addon (setns, netlink) exists only for Linux
  console.log(
    `@cnikit/sys: ${process.platform} is not Linux; the native addon is not built (it is needed at run time)`,
  );
  process.exit(0);
}
if (loads(join(pkg, 'prebuilds', target, FILE))) process.exit(0);
if (loads(join(pkg, 'build', 'Release', FILE))) process.exit(0);

console.log(`@cnikit/sys: no prebuilt addon for ${target}; building from source with node-gyp`);
const gyp = process.env.npm_config_node_gyp;
const [cmd, pre] = gyp && existsSync(gyp) ? [process.execPath, [gyp]] : ['node-gyp', []];
const args = [...pre, 'rebuild', '--release'];
const prefix = dirname(dirname(process.execPath));
if (
  existsSync(join(prefix, 'include', 'node', 'node_api.h')) &&
  existsSync(join(prefix, 'include', 'node', 'common.gypi'))
) {
  args.push(`--nodedir=${prefix}`);
}
const r = spawnSync(cmd, args, { cwd: pkg, stdio: 'inherit' });
if (r.status === 0 && loads(join(pkg, 'build', 'Release', FILE))) process.exit(0);
console.error(
  `@cnikit/sys: building the native addon failed (${r.error ? r.error.message : `exit ${r.status}`}); ` +
    'it needs a C compiler, make and python3 (Debian: apt-get install g++ make python3), then `npm rebuild @cnikit/sys`',
);
process.exit(1);
