// What dist-bin/ is built from, as one digest: scripts/build.ts records it in dist-bin/BUILD-INFO.json (`sources`),
// test-netns/dist.ts ensureBuilt() and scripts/run-tests.mjs compare it with the working tree's, so a test never
// runs the executable of older sources (after a change to host-local, a macvlan test would exec the old host-local).
//
// The inputs: every package.json and every file under src/ and client/ of packages/* and plugins/* but the tests
// (*.test.ts) and their testdata/ directories, the native addon's binding.gyp, scripts/build.ts and
// package-lock.json. A digest of about 600 files takes some 30 ms.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name.startsWith('.') || e.name === 'node_modules' || e.name === 'testdata') continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile() && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

/** The files dist-bin/ is built from, relative to `root`, sorted. */
export function distSources(root) {
  const files = [];
  for (const base of ['packages', 'plugins']) {
    for (const d of readdirSync(join(root, base)).sort()) {
      const pkg = join(root, base, d);
      if (!existsSync(join(pkg, 'package.json'))) continue;
      files.push(join(pkg, 'package.json'));
      for (const sub of ['src', 'client']) if (existsSync(join(pkg, sub))) walk(join(pkg, sub), files);
    }
  }
  for (const f of ['packages/sys/binding.gyp', 'scripts/build.ts', 'package-lock.json'])
    if (existsSync(join(root, f))) files.push(join(root, f));
  return files.map((f) => relative(root, f)).sort();
}

/** sha256 over every source's path and content (hex). */
export function distSourcesDigest(root) {
  const h = createHash('sha256');
  for (const f of distSources(root)) {
    h.update(`${f}\0`);
    h.update(
      createHash('sha256')
        .update(readFileSync(join(root, f)))
        .digest(),
    );
  }
  return h.digest('hex');
}

/** The build command that makes dist-bin/ for these back-ends. */
export function buildCommand(backends) {
  return backends.includes('sea') ? 'npm run build -- --with-sea' : 'npm run build';
}

/**
 * Why dist-bin/ cannot serve a test that drives `backends` (undefined when it can): missing, built without one of
 * them, or built from other sources than the working tree's (each with the command that fixes it).
 */
export function distProblem(root, backends) {
  const dist = join(root, 'dist-bin');
  const cmd = buildCommand(backends);
  const infoFile = join(dist, 'BUILD-INFO.json');
  if (!existsSync(infoFile) || !existsSync(join(dist, 'cnikit')))
    return `dist-bin/ is not built: run \`${cmd}\``;
  let info;
  try {
    info = JSON.parse(readFileSync(infoFile, 'utf8'));
  } catch (e) {
    return `dist-bin/BUILD-INFO.json is unreadable (${e.message}): run \`${cmd}\``;
  }
  if (typeof info.sources !== 'string' || !Array.isArray(info.backends))
    return `dist-bin/ does not record the digest of its sources (built by an older scripts/build.ts): run \`${cmd}\``;
  if (info.sources !== distSourcesDigest(root))
    return `dist-bin/ is stale: its sources changed since it was built: run \`${cmd}\``;
  // a back-end left from an earlier build (dist-bin/sea/cnikit after a bun-only build) is of older sources
  const missing = backends.filter((b) => !info.backends.includes(b) || !existsSync(join(dist, b, 'cnikit')));
  if (missing.length)
    return `dist-bin/ was built without the ${missing.join(', ')} back-end (it has ${info.backends.join(', ')}): run \`${cmd}\``;
  return undefined;
}

/**
 * Build dist-bin/ for `backends` unless it is already fresh (the native addon first, then scripts/build.ts, with
 * --with-sea for both back-ends). Returns why it was built, or undefined when it was fresh. Throws when a build
 * step fails or dist-bin/ is still not what was asked for.
 */
export function ensureDist(root, backends, say = (line) => process.stderr.write(`${line}\n`)) {
  const why = distProblem(root, backends);
  if (why === undefined) return undefined;
  say(`dist-bin: ${why.replace(/: run `[^`]*`$/, '')}; building it (${buildCommand(backends)})`);
  for (const args of [
    [join(root, 'scripts', 'build-native.mjs')],
    [
      '--conditions=cnikit-source',
      '--import',
      'tsx',
      join(root, 'scripts', 'build.ts'),
      ...(backends.includes('sea') ? ['--with-sea'] : []),
    ],
  ]) {
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.error || r.status !== 0)
      throw new Error(
        `build failed (${relative(root, args.at(-1))}): run \`${buildCommand(backends)}\` and read its output`,
      );
  }
  const still = distProblem(root, backends);
  if (still !== undefined) throw new Error(`${still} (after a build)`);
  return why;
}

// node scripts/dist-sources.mjs --ensure=bun[,sea]: ensureDist, for callers that hold a lock (test-netns/dist.ts)
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = process.argv.find((a) => a.startsWith('--ensure='));
  const backends = arg ? arg.slice('--ensure='.length).split(',') : ['bun'];
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  try {
    ensureDist(root, backends);
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
}
