#!/usr/bin/env node
// Runs every *.test.ts with Node's built-in test runner and the tsx loader.
//   node scripts/run-tests.mjs            all tests (unit, kernel, black-box)
//   node scripts/run-tests.mjs --unit     only tests that need no root/kernel (files not named *.kernel.test.ts / in test-netns/)
//   node scripts/run-tests.mjs FILE...    just these files
//   node scripts/run-tests.mjs --release  only the release tests (*.release.test.ts: `npm run test:release`, slow;
//                                         every other run leaves them out unless they are named)
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const unitOnly = args.includes('--unit');
const releaseOnly = args.includes('--release');
const explicit = args.filter((a) => !a.startsWith('--'));

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist-bin' || name === 'build' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

let files = explicit.length
  ? explicit
  : ['packages', 'plugins', 'scripts', 'test-netns'].flatMap((d) => walk(join(root, d), [])).sort();
if (!explicit.length) files = files.filter((f) => f.endsWith('.release.test.ts') === releaseOnly);
if (unitOnly) files = files.filter((f) => !f.endsWith('.kernel.test.ts') && !f.startsWith('test-netns/'));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const concurrency = process.env.CNIKIT_TEST_CONCURRENCY ?? '4';
// Workspace packages resolve to their TypeScript sources (the `cnikit-source` export condition, listed first in each
// package.json), so tests never need the compiled packages; NODE_OPTIONS carries the condition to child processes.
const SOURCE_CONDITION = '--conditions=cnikit-source';
const nodeOptions = [process.env.NODE_OPTIONS, SOURCE_CONDITION].filter(Boolean).join(' ');
const r = spawnSync(
  process.execPath,
  [
    SOURCE_CONDITION,
    '--import',
    'tsx',
    '--import',
    join(root, 'scripts', 'test-setup.mjs'),
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-reporter=spec',
    ...files,
  ],
  { cwd: root, stdio: 'inherit', env: { ...process.env, NODE_OPTIONS: nodeOptions } },
);
process.exit(r.status ?? 1);
