#!/usr/bin/env node
// Runs every *.test.ts with Node's built-in test runner and the tsx loader.
//   node scripts/run-tests.mjs            all tests (unit, kernel, black-box)
//   node scripts/run-tests.mjs --unit     only tests that need no root/kernel (files not named *.kernel.test.ts / in test-netns/)
//   node scripts/run-tests.mjs FILE...    just these files
//   node scripts/run-tests.mjs --plugin NAME   the inner loop: that plugin's unit, kernel (here, or in the kernel lab
//                                         where this kernel lacks a feature), black-box and conformance-row files
//                                         (scripts/plugin-tests.mjs), on one back-end (dist-bin/ rebuilt with
//                                         `npm run build` first when its sources changed); repeat for more plugins
//   node scripts/run-tests.mjs --vm       only the kernel and black-box tests, inside the kernel lab's VM (npm run test:vm)
//   node scripts/run-tests.mjs --release  only the release tests (*.release.test.ts: `npm run test:release`, slow;
//                                         every other run leaves them out unless they are named)
//   node scripts/run-tests.mjs --k8s      only the Kubernetes end-to-end tests (*.k8s.test.ts: `npm run test:k8s`, a
//                                         private containerd; every other run leaves them out unless they are named);
//                                         each file its own `node --test`, the longest first (scripts/k8s-order.mjs),
//                                         CNIKIT_TEST_CONCURRENCY at a time (CNIKIT_TEST_POOL=1 does the same for the
//                                         files named)
//
// Tests must not change the machine: as root, every mode (--vm: the host side) records the network state of the
// namespace this runner is in (scripts/host-state.mjs: links, addresses, routes, rules, iptables/nft, the net.*
// sysctls) before the first file and after the last, and fails the run naming what changed. Only the top-level run
// does this (its test processes get CNIKIT_TEST_RUN=1); CNIKIT_TEST_HOST_NETNS=PATH points it at another namespace
// (scripts/run-tests.kernel.test.ts uses a private one).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import { ensureDist } from './dist-sources.mjs';
import { diffHostState, hostState } from './host-state.mjs';
import { longestFirst } from './k8s-order.mjs';
import { pluginNames, pluginTestFiles } from './plugin-tests.mjs';
import { buildTsCache, tsxEntry } from './ts-cache.mjs';
import { runInVm } from './vm.mjs';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const unitOnly = args.includes('--unit');
const releaseOnly = args.includes('--release');
const k8sOnly = args.includes('--k8s');
// --plugin NAME / --plugin=NAME (repeatable): the plugin's files instead of FILE arguments
const plugins = [];
const rest = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--plugin') plugins.push(args[++i] ?? '');
  else if (a.startsWith('--plugin=')) plugins.push(a.slice('--plugin='.length));
  else rest.push(a);
}
const explicit = rest.filter((a) => !a.startsWith('--'));

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist-bin' || name === 'build' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

// the machine's state before anything runs (see the top): only the top-level run, and only root can read all of it
const hostNetns = process.env.CNIKIT_TEST_HOST_NETNS || undefined;
const hostCheck =
  process.getuid?.() === 0 && (hostNetns !== undefined || process.env.CNIKIT_TEST_RUN !== '1');
const hostBefore = hostCheck ? hostState(hostNetns) : undefined;
if (!hostCheck && process.env.CNIKIT_TEST_RUN !== '1')
  console.log("ℹ host state: not checked (reading the machine's firewall and every sysctl needs root)");

/** Exit with `status`, or 1 when the run changed the machine's network state (each change named). */
function finish(status) {
  if (hostBefore) {
    const { problems, notes } = diffHostState(hostBefore, hostState(hostNetns));
    const where = hostNetns ?? "this machine's network namespace";
    for (const n of notes) console.log(`ℹ host state: ${n}`);
    if (problems.length) {
      console.log(`✖ the tests changed ${where} (tests must leave it as they found it):`);
      for (const p of problems) console.log(`✖   ${p}`);
      process.exit(1);
    }
    console.log(`ℹ host state: ${where} unchanged`);
  }
  process.exit(status);
}

const known = plugins.length ? pluginNames(root) : [];
for (const p of plugins) {
  if (!known.includes(p)) {
    console.error(
      `--plugin ${JSON.stringify(p)}: no such plugin (plugins/<name>/src/index.ts): ${known.join(', ')}`,
    );
    process.exit(2);
  }
}
const pluginFiles = [...new Set(plugins.flatMap((p) => pluginTestFiles(root, p)))];
if (plugins.length) {
  // one back-end (the default) and the plugins' conformance rows only; dist-bin/ made fresh once, here, before any
  // test file would (and never inside the kernel lab's VM: CNIKIT_DIST_NO_BUILD there)
  process.env.CNIKIT_TEST_BACKENDS = 'one';
  process.env.CNIKIT_CONFORMANCE_ROWS = plugins.join(',');
  // cnikit's half of the rows (conformance-matrix.ts) and, in files shared by several plugins, these plugins' cases
  process.env.CNIKIT_CONFORMANCE_IMPLS = 'cnikit';
  process.env.CNIKIT_TEST_PLUGINS = plugins.join(',');
  console.log(`ℹ --plugin ${plugins.join(' ')}: ${pluginFiles.length} file(s): ${pluginFiles.join(' ')}`);
  try {
    ensureDist(root, [process.env.CNIKIT_BACKEND === 'sea' ? 'sea' : 'bun'], (l) => console.log(`ℹ ${l}`));
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}

let files =
  explicit.length || plugins.length
    ? [...explicit, ...pluginFiles]
    : ['packages', 'plugins', 'scripts', 'test-netns'].flatMap((d) => walk(join(root, d), [])).sort();
if (!explicit.length && !plugins.length) {
  files = files.filter(
    (f) => f.endsWith('.release.test.ts') === releaseOnly && f.endsWith('.k8s.test.ts') === k8sOnly,
  );
}
if (unitOnly) files = files.filter((f) => !f.endsWith('.kernel.test.ts') && !f.startsWith('test-netns/'));
if (files.length === 0) {
  console.error('no test files found');
  finish(1);
}
const concurrency = process.env.CNIKIT_TEST_CONCURRENCY ?? '4';
// Workspace packages resolve to their TypeScript sources (the `cnikit-source` export condition, listed first in each
// package.json), so tests never need the compiled packages; NODE_OPTIONS carries the condition to child processes.
const SOURCE_CONDITION = '--conditions=cnikit-source';
const nodeOptions = [process.env.NODE_OPTIONS, SOURCE_CONDITION].filter(Boolean).join(' ');
const nodeTestArgs = (list) => [
  SOURCE_CONDITION,
  '--import',
  'tsx',
  '--import',
  join(root, 'scripts', 'test-setup.mjs'),
  '--test',
  `--test-concurrency=${concurrency}`,
  '--test-reporter=spec',
  '--test-reporter-destination=stdout',
  // one line per file on stderr as each finishes (the spec reporter keeps the files' order: scripts/test-progress.mjs)
  `--test-reporter=${join(root, 'scripts', 'test-progress.mjs')}`,
  '--test-reporter-destination=stderr',
  ...list,
];
// The firewall code's rule-handle records (default /run/cnikit/nft-handles, the machine's own) of every test that
// passes its environment on go to a directory of this run, removed at its end: a test that deletes a namespace
// without a DEL leaves no record on the machine.
const handlesDir =
  process.env.CNIKIT_NFT_HANDLES_DIR === undefined && process.env.CNIKIT_TEST_RUN !== '1'
    ? mkdtempSync(join(tmpdir(), 'cnikit-test-nft-handles-'))
    : undefined;
if (handlesDir) process.on('exit', () => rmSync(handlesDir, { recursive: true, force: true }));
// CNIKIT_TEST_RUN: a run-tests started by a test is not the top-level run (no host-state check of its own)
const testEnv = {
  ...process.env,
  ...(handlesDir ? { CNIKIT_NFT_HANDLES_DIR: handlesDir } : {}),
  NODE_OPTIONS: nodeOptions,
  CNIKIT_TEST_RUN: '1',
};
const envFor = (list) => ({ ...testEnv, CNIKIT_TEST_FILES: String(list.length) });

// Kernel lab (docs/kernel-lab.md): a file whose top comment says `// cnikit-kernel-features: a b` runs on this
// machine when its kernel has them, otherwise in ONE boot of the lab's VM (Debian's kernel) together with the other
// such files; --vm sends every kernel and black-box file there (npm run test:vm). Both parts count in one summary.
const vmAll = args.includes('--vm');
/**
 * The kernel and black-box files that --vm leaves to `npm test` on the host, each with the reason (the one list;
 * docs/kernel-lab.md). Everything else of the kernel suite runs in the VM.
 */
const HOST_ONLY = {
  // the lab's own test boots the VM: inside it, that would be qemu emulated by qemu
  'scripts/vm.kernel.test.ts': 'boots the VM itself',
  // podman + runc with the host's container storage, a 55 MB image import and a node container: the host's runtime
  'test-netns/kubernetes-image.test.ts': "needs the host's container runtime (podman, runc, their storage)",
  // npm pack + an offline npm install, tsc over the SDK's examples, node-gyp: the packaging, not the kernel
  'test-netns/packages.test.ts': 'tests the npm packages (npm, tsc, node-gyp), not the kernel',
  // the kit's own checks against toy plain-JavaScript plugins: hundreds of Node starts (its first group of tests
  // alone took 45 min in the VM on 2026-11-26); the plugins' conformance on 6.1 is test-netns/conformance.test.ts
  'packages/conformance/src/conformance.kernel.test.ts':
    "tests the conformance kit's logic with toy Node plugins (45+ min under TCG), not the kernel",
};
let vmFiles = [];
if (vmAll) {
  // the unit tests do not depend on the kernel: npm test runs them
  vmFiles = files.filter(
    (f) => (f.endsWith('.kernel.test.ts') || f.startsWith('test-netns/')) && !(f in HOST_ONLY),
  );
  const left = files.filter((f) => f in HOST_ONLY);
  for (const f of left) console.log(`ℹ kernel lab: ${f} runs on the host only: ${HOST_ONLY[f]}`);
  files = [];
} else if (!unitOnly) {
  const marked = files.filter((f) =>
    /^\s*(\/\/[^\n]*\n\s*)*\/\/ cnikit-kernel-features:/.test(readFileSync(join(root, f), 'utf8')),
  );
  if (marked.length) {
    // the probes live in @cnikit/testing (TypeScript): ask a child process with the same loader
    const probe = spawnSync(
      process.execPath,
      [
        SOURCE_CONDITION,
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { readFileSync } from 'node:fs';
         import { parseKernelFeaturesMarker, missingKernelFeatures } from '@cnikit/testing';
         const out = {};
         for (const f of ${JSON.stringify(marked)}) out[f] = missingKernelFeatures(parseKernelFeaturesMarker(readFileSync(f, 'utf8'), f));
         console.log(JSON.stringify(out));`,
      ],
      { cwd: root, encoding: 'utf8', env: testEnv },
    );
    if (probe.status !== 0) {
      console.error(`kernel feature probe failed:\n${probe.stderr}`);
      finish(1);
    }
    const missing = JSON.parse(probe.stdout);
    vmFiles = marked.filter((f) => missing[f].length > 0);
    files = files.filter((f) => !vmFiles.includes(f));
    if (vmFiles.length) {
      const why = [...new Set(vmFiles.flatMap((f) => missing[f]))].join(', ');
      console.log(
        `ℹ kernel lab: ${vmFiles.length} file(s) need what this kernel lacks (${why}); they run in the VM`,
      );
    }
  }
}

/** Forwards a stream to ours and keeps the spec reporter's closing counts ("ℹ pass 12"). */
function tally(target) {
  const counts = {};
  let partial = '';
  // counted line by line as they pass: with failures, the reporter's details follow the counts at length
  const scan = (text) => {
    for (const m of text.matchAll(/^ℹ (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$/gm))
      counts[m[1]] = Number(m[2]);
  };
  const stream = new Writable({
    write(chunk, _enc, done) {
      target.write(chunk);
      const text = partial + chunk.toString();
      const end = text.lastIndexOf('\n') + 1;
      scan(text.slice(0, end));
      partial = text.slice(end);
      done();
    },
  });
  stream.counts = () => {
    scan(partial);
    return counts;
  };
  return stream;
}

function runHere(list) {
  if (list.length === 0) return Promise.resolve({ status: 0, counts: {} });
  const out = tally(process.stdout);
  const child = spawn(process.execPath, nodeTestArgs(list), {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: envFor(list),
  });
  child.stdout.pipe(out);
  return new Promise((done) =>
    child.on('close', (code) => out.end(() => done({ status: code ?? 1, counts: out.counts() }))),
  );
}

/** The project allows no skipped or todo test (a skip hides a missing kernel feature or tool): both count as failing. */
function noSkips(counts) {
  const n = (counts.skipped ?? 0) + (counts.todo ?? 0);
  if (n > 0) console.log(`✖ ${n} test(s) skipped or todo: the project allows none (docs/kernel-lab.md)`);
  return n === 0;
}

/**
 * Each file its own `node --test`, started longest first (scripts/k8s-order.mjs: node --test sorts the files it is
 * given by name), `concurrency` at a time; a file's spec output is printed whole when it ends, with a line of its
 * time; the counts are summed.
 */
async function runPool(list) {
  const queue = longestFirst(list);
  const lanes = Math.max(1, Math.min(Number(concurrency) || 1, queue.length));
  const start = Date.now();
  const counts = {};
  let status = 0;
  let done = 0;
  console.log(`ℹ ${queue.length} file(s), ${lanes} at a time, longest first: ${queue.join(' ')}`);
  const lane = async () => {
    for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
      const t0 = Date.now();
      const chunks = [];
      const child = spawn(process.execPath, nodeTestArgs([f]), {
        cwd: root,
        stdio: ['ignore', 'pipe', 'inherit'],
        env: envFor([f]),
      });
      child.stdout.on('data', (d) => chunks.push(d));
      const code = await new Promise((done) => child.on('close', (c) => done(c ?? 1)));
      const out = tally(process.stdout);
      await new Promise((done) => out.end(Buffer.concat(chunks), done));
      for (const [k, v] of Object.entries(out.counts())) counts[k] = (counts[k] ?? 0) + v;
      if (code !== 0) status = 1;
      done += 1;
      console.log(
        `ℹ file ${done}/${list.length} ${code === 0 ? '✔' : '✖'} ${f}: ${((Date.now() - t0) / 1000).toFixed(1)} s ` +
          `(${((Date.now() - start) / 1000).toFixed(0)} s into the run)`,
      );
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  console.log(`ℹ ${list.length} file(s) in ${((Date.now() - start) / 1000).toFixed(0)} s; all of them:`);
  for (const k of ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'])
    console.log(`ℹ ${k} ${counts[k] ?? 0}`);
  return { status, counts };
}

const pooled = (k8sOnly && !explicit.length && !plugins.length) || process.env.CNIKIT_TEST_POOL === '1';
const host = pooled && files.length ? await runPool(files) : await runHere(files);
if (vmFiles.length === 0) finish(host.status === 0 && noSkips(host.counts) ? 0 : 1);
console.log(`ℹ kernel lab: ${vmFiles.length} file(s) in the VM (npm run vm)`);
// dist-bin/ fresh before the VM boots: inside it a stale dist-bin/ is an error (CNIKIT_DIST_NO_BUILD), not a build
// under emulation into a throw-away overlay
try {
  const one = process.env.CNIKIT_TEST_BACKENDS === 'one';
  const def = process.env.CNIKIT_BACKEND === 'sea' ? 'sea' : 'bun';
  ensureDist(root, one ? [def] : ['bun', 'sea'], (l) => console.log(`ℹ kernel lab: ${l}`));
} catch (e) {
  console.error(e.message);
  finish(1);
}
const vmOut = tally(process.stdout);
const vmStart = Date.now();
// TypeScript transpiled here, once, for every process in the VM: there, tsx's entry is the cache's loader
// (scripts/ts-cache.mjs; under TCG tsx alone costs seconds per Node process)
const tsCache = await buildTsCache(root);
console.log(`ℹ kernel lab: ${tsCache.files} TypeScript files transpiled for the VM in ${tsCache.ms} ms`);
let vmStatus;
try {
  vmStatus = await runInVm([process.execPath, ...nodeTestArgs(vmFiles)], {
    cwd: root,
    env: { ...envFor(vmFiles), CNIKIT_DIST_NO_BUILD: '1' },
    stdout: vmOut,
    binds: [[tsCache.register, tsxEntry(root)]],
    // black-box tests hard-link dist-bin/ files (bridge.test.ts): one overlay copy-up would split dist-bin/bridge from
    // its other names for every later file (a plugin would then exec its delegate instead of running it in-process)
    keepLinks: [join(root, 'dist-bin')],
  });
} finally {
  rmSync(tsCache.dir, { recursive: true, force: true });
}
const vm = { status: vmStatus, counts: vmOut.counts() };
const keys = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];
const sum = Object.fromEntries(keys.map((k) => [k, (host.counts[k] ?? 0) + (vm.counts[k] ?? 0)]));
const vmReported = vm.counts.tests !== undefined;
if (!vmReported) sum.fail += 1; // the VM part itself failed (no summary): count it
console.log('');
console.log(
  `ℹ this kernel: ${files.length} file(s), ${host.counts.pass ?? 0} passed, ${host.counts.fail ?? 0} failed; ` +
    `kernel lab VM: ${vmFiles.length} file(s), ${vm.counts.pass ?? 0} passed, ${vm.counts.fail ?? 0} failed ` +
    `(${((Date.now() - vmStart) / 1000).toFixed(0)} s${vmReported ? '' : `, no summary: exit ${vmStatus}`})`,
);
for (const k of keys) console.log(`ℹ ${k} ${sum[k]}`);
console.log(`${sum.pass} passed, ${sum.fail} failed`);
finish(host.status === 0 && vmStatus === 0 && sum.fail === 0 && noSkips(sum) ? 0 : 1);
