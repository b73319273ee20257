#!/usr/bin/env node
// prepack of @cnikit/sys: puts the addon built by node-gyp (build/Release, `npm run build:native`) into
// prebuilds/<platform>-<arch>/ so the tarball carries it (the repository never does: prebuilds/ is git-ignored and
// removed again by `postpack`). `--clean` removes prebuilds/.
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = join(pkg, 'prebuilds');
rmSync(dir, { recursive: true, force: true });
if (process.argv.includes('--clean')) process.exit(0);
const target = `${process.platform}-${process.arch}`;
if (target !== 'linux-x64') {
  console.error(`@cnikit/sys prepack: prebuilt addons are made on linux-x64 (this is ${target})`);
  process.exit(1);
}
const built = join(pkg, 'build', 'Release', 'cnikit_sys.node');
if (!existsSync(built)) {
  console.error(
    `@cnikit/sys prepack: ${built} missing; run \`npm run build:native\` (or npm run build:packages)`,
  );
  process.exit(1);
}
mkdirSync(join(dir, target), { recursive: true });
copyFileSync(built, join(dir, target, 'cnikit_sys.node'));
console.error(`@cnikit/sys prepack: prebuilds/${target}/cnikit_sys.node`);
