// Kubernetes binaries for the lab cluster, built offline from Debian 12's own `kubernetes` source package
// (docs/k8s-build.md). `npm run k8s:build` prints the directory holding kubelet, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy and kubectl.
//
//   1. Source: `apt-get source --download-only kubernetes=VERSION` with a private apt state under the cache
//      (a deb-src list for the archive /etc/apt/sources.list.d/debian.sources already uses, its own lists
//      directory): the machine's apt configuration is never changed. dpkg-source -x checks the .dsc's checksums
//      and applies Debian's patches.
//   2. The repository's patches (scripts/k8s/patches/*.patch, in name order) with patch(1).
//   3. vendor/modules.txt made readable for Go >= 1.17 (fixVendorModules below), no code change.
//   4. pkg/generated/openapi/zz_generated.openapi.go generated with the vendored openapi-gen (upstream's make
//      does this; the source package does not ship the file and kube-apiserver does not link without it).
//   5. One `go build` of the six commands with Debian's golang-1.19: -mod=vendor, GOPROXY=off, CGO_ENABLED=0,
//      tags providerless,dockerless, upstream's default ldflags (-s -w) and version stamps.
//
// The result is cached outside the repository, under CACHE_ROOT/<key>/ where the key names the source version,
// the Go version and a hash of the patch set and the build recipe: a second run with the same inputs builds
// nothing. An entry is built in a temporary directory and renamed into place, and it counts only with a
// manifest whose binaries are all present at their recorded sizes, so an interrupted build is never a hit.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SOURCE_PACKAGE = 'kubernetes';
/** Debian 12's version of the source package: upstream v1.20.2 (the "+really" tag) with Debian's patches. */
export const SOURCE_VERSION = '1.20.5+really1.20.2-1.1+deb12u1';
export const UPSTREAM_VERSION = 'v1.20.2';
export const BINARIES = [
  'kubelet',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kube-proxy',
  'kubectl',
];
export const CACHE_ROOT = process.env.CNIKIT_K8S_CACHE || '/var/cache/cnikit/k8s';
export const GO = process.env.CNIKIT_K8S_GO || '/usr/lib/go-1.19/bin/go';
export const PATCH_DIR = join(dirname(fileURLToPath(import.meta.url)), 'k8s', 'patches');

/**
 * Everything besides the source and the patches that decides what the binaries are. It is part of the cache key:
 * bump RECIPE.revision when a step of this script changes in a way these fields do not show.
 */
export const RECIPE = {
  revision: 1,
  binaries: BINARIES,
  tags: ['providerless', 'dockerless'],
  env: { CGO_ENABLED: '0', GOFLAGS: '-mod=vendor', GOPROXY: 'off', GO111MODULE: 'on' },
  ldflags: ['-s', '-w', '-buildid='],
  trimpath: true,
  version: UPSTREAM_VERSION,
};

const MANIFEST = 'manifest.json';

/** The patch set as the key sees it: name and content of every *.patch in dir, in name order. */
export function readPatches(dir = PATCH_DIR) {
  const names = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.patch')) : [];
  return names.sort().map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
}

/** `go version`'s version word (go1.19.8). */
export function goVersion(go = GO) {
  const r = spawnSync(go, ['env', 'GOVERSION'], { encoding: 'utf8', env: { ...process.env, GOFLAGS: '' } });
  if (r.status !== 0)
    throw new Error(`${go} env GOVERSION failed (is golang-1.19-go installed?): ${r.stderr}`);
  return r.stdout.trim();
}

/**
 * The cache entry's name: readable parts (source version, Go version) and a hash over the patch set, the recipe
 * and both versions. Any change to a patch's name or bytes, the recipe or either version gives another key.
 */
export function cacheKey({ sourceVersion = SOURCE_VERSION, goVersion: gover, patches, recipe = RECIPE }) {
  const h = createHash('sha256');
  h.update(JSON.stringify({ sourceVersion, goVersion: gover, recipe }));
  for (const p of patches) {
    h.update(`\0patch\0${p.name}\0${p.text.length}\0`);
    h.update(p.text);
  }
  const safe = (s) => s.replace(/[^A-Za-z0-9.+_-]/g, '_');
  return `${safe(sourceVersion)}-${safe(gover)}-${h.digest('hex').slice(0, 16)}`;
}

/**
 * The cached entry for key if it is complete: its manifest parses, names this key and every binary it lists
 * exists as a regular file of the recorded size. Returns { dir, manifest } or null.
 */
export function lookup(cacheRoot, key) {
  const dir = join(cacheRoot, key);
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8'));
  } catch {
    return null;
  }
  if (manifest?.key !== key || !Array.isArray(manifest.binaries) || manifest.binaries.length === 0)
    return null;
  for (const b of manifest.binaries) {
    const st = statSync(join(dir, 'bin', b.name), { throwIfNoEntry: false });
    if (!st?.isFile() || st.size !== b.size) return null;
  }
  return { dir, manifest };
}

/**
 * Cached binaries for the inputs, built by `build(stage)` on a miss. build receives an empty staging directory
 * and writes the binaries into stage/bin/; the entry (with its manifest) is then renamed to cacheRoot/key in one
 * step. A stale or partial entry under the key is replaced. Returns { dir, key, hit, manifest }.
 */
export async function ensureBuilt({
  cacheRoot = CACHE_ROOT,
  key,
  binaries = BINARIES,
  build,
  log = () => {},
}) {
  const found = lookup(cacheRoot, key);
  if (found) return { ...found, key, hit: true };
  mkdirSync(cacheRoot, { recursive: true });
  // one build at a time per cache: test files started together (run-tests --k8s runs several at once) would
  // otherwise each build the same entry from scratch on a fresh machine; a waiter finds the entry once the lock is
  // free. flock(2) on this process's own descriptor: the kernel releases it if the process dies.
  const fd = openSync(join(cacheRoot, LOCK), 'a');
  try {
    if (!(await flockFd(fd, false))) {
      log(`another build of ${key} runs (${join(cacheRoot, LOCK)}): waiting for it`);
      const t0 = Date.now();
      await flockFd(fd, true);
      log(`waited ${((Date.now() - t0) / 1000).toFixed(1)} s for the other build`);
    }
    const built = lookup(cacheRoot, key);
    if (built) return { ...built, key, hit: true };
    return await buildLocked({ cacheRoot, key, binaries, build, log });
  } finally {
    closeSync(fd);
  }
}

/** The lock file of a cache root (kept: removing a lock file others may hold open would let two builds run). */
export const LOCK = '.build.lock';

/**
 * flock(2) LOCK_EX on fd through flock(1) (util-linux), which locks the open file description it inherits as its
 * descriptor 3: the lock stays with this process's descriptor after flock(1) exits. Returns false when `wait` is
 * false and another process holds it.
 */
function flockFd(fd, wait) {
  return new Promise((resolve, reject) => {
    const p = spawn('flock', ['--exclusive', ...(wait ? [] : ['--nonblock']), '3'], {
      stdio: ['ignore', 'ignore', 'pipe', fd],
    });
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    p.on('error', (e) => reject(new Error(`flock: ${e.message}`)));
    p.on('close', (status, signal) => {
      if (status === 0) resolve(true);
      else if (!wait && status === 1) resolve(false);
      else reject(new Error(`flock on the build lock exited with ${status ?? signal}: ${stderr}`));
    });
  });
}

async function buildLocked({ cacheRoot, key, binaries, build, log }) {
  const stage = join(cacheRoot, `.stage-${key}-${process.pid}`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(join(stage, 'bin'), { recursive: true });
  try {
    const info = (await build(stage)) ?? {};
    const list = binaries.map((name) => {
      const st = statSync(join(stage, 'bin', name), { throwIfNoEntry: false });
      if (!st?.isFile()) throw new Error(`the build did not produce bin/${name}`);
      return { name, size: st.size };
    });
    const manifest = { key, ...info, binaries: list, builtAt: new Date().toISOString() };
    writeFileSync(join(stage, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    const dir = join(cacheRoot, key);
    rmSync(dir, { recursive: true, force: true });
    renameSync(stage, dir);
    log(`cached ${dir}`);
    return { dir, key, hit: false, manifest };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/**
 * vendor/modules.txt as Go >= 1.17 reads it. Kubernetes 1.20 (written by Go 1.15 and hack/update-vendor.sh) lists
 * each replaced module twice, `# P vX => P vX` and the wildcard `# P => P vX`, and puts part of the module's
 * packages under the wildcard line. Go 1.17+ assigns packages under a wildcard line to a module without version
 * and then refuses the tree ("updates to go.mod needed, disabled by -mod=vendor"). Every package line (and
 * annotation) under a wildcard line is moved under the versioned header of the module it belongs to: the longest
 * versioned module path that is the package's path or a parent of it. Lines are only moved, none is changed, added or dropped.
 * Returns { text, moved } where moved is the number of wildcard headers that had lines under them.
 */
export function fixVendorModules(text) {
  const lines = text.split('\n');
  const trailing = lines.at(-1) === '' ? lines.pop() : undefined;
  /** @type {{ header: string | null, path: string | null, versioned: boolean, body: string[] }[]} */
  const blocks = [{ header: null, path: null, versioned: false, body: [] }];
  for (const line of lines) {
    if (line.startsWith('# ')) {
      const f = line.split(/\s+/);
      blocks.push({ header: line, path: f[1], versioned: f.length >= 3 && f[2] !== '=>', body: [] });
    } else blocks.at(-1).body.push(line);
  }
  const versioned = new Map(blocks.filter((b) => b.versioned).map((b) => [b.path, b]));
  /** The versioned module that owns pkg: the longest module path that is pkg or a parent of it. */
  const ownerOf = (pkg) => {
    for (let p = pkg; p; p = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '') {
      const b = versioned.get(p);
      if (b) return b;
    }
    return null;
  };
  let moved = 0;
  for (const b of blocks) {
    if (b.header === null || b.versioned || !b.body.some((l) => l !== '')) continue;
    for (const line of b.body) {
      if (line === '') continue;
      const owner = line.startsWith('## ') ? versioned.get(b.path) : ownerOf(line.trim());
      if (!owner)
        throw new Error(`vendor/modules.txt: no versioned module for "${line}" (under "${b.header}")`);
      owner.body.push(line);
    }
    b.body = b.body.filter((l) => l === '');
    moved++;
  }
  const out = [];
  for (const b of blocks) {
    if (b.header !== null) out.push(b.header);
    out.push(...b.body);
  }
  if (trailing !== undefined) out.push(trailing);
  return { text: out.join('\n'), moved };
}

/** The Go packages (import paths) upstream's make gives openapi-gen for pkg/generated/openapi (KUBE target). */
export function openapiInputDirs(tree) {
  const dirs = new Set();
  const walk = (dir, top) => {
    for (const ent of readdirSync(dir, { withFileTypes: true })) {
      if (top && (ent.name.startsWith('_') || ent.name.startsWith('.') || ent.name === 'vendor')) continue;
      const p = join(dir, ent.name);
      if (ent.isDirectory()) walk(p, false);
      else if (ent.isFile() && ent.name.endsWith('.go')) {
        const s = readFileSync(p, 'utf8');
        if (/^\/\/ *\+k8s:/m.test(s) && s.includes('+k8s:openapi-gen=')) {
          const rel = relative(tree, dirname(p)).replace(/^staging\/src\//, 'vendor/');
          if (
            rel.startsWith('vendor/k8s.io/code-generator/') ||
            rel.startsWith('vendor/k8s.io/sample-apiserver/')
          )
            continue;
          dirs.add(`k8s.io/kubernetes/${rel}`);
        }
      }
    }
  };
  walk(tree, true);
  return [...dirs].sort();
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.slice(0, 4).join(' ')}… exited with ${r.status ?? r.signal}`);
  return r;
}

/** The deb-src stanza for the Debian archive the machine's deb stanzas use (URIs and Signed-By of the first). */
export function debSrcStanza(sourcesText) {
  const stanza = sourcesText
    .split(/\n\s*\n/)
    .find((s) => /^Types:.*\bdeb\b/m.test(s) && /^Suites:.*\bbookworm\b/m.test(s) && !/security/.test(s));
  if (!stanza)
    throw new Error('no Debian 12 (bookworm) deb stanza in /etc/apt/sources.list.d/debian.sources');
  const uris = /^URIs:\s*(.+)$/m.exec(stanza)?.[1].trim();
  const signed = /^Signed-By:\s*(.+)$/m.exec(stanza)?.[1].trim();
  return [
    'Types: deb-src',
    `URIs: ${uris}`,
    'Suites: bookworm bookworm-updates',
    'Components: main',
    ...(signed ? [`Signed-By: ${signed}`] : []),
    '',
  ].join('\n');
}

/** Downloads the source package into cacheRoot/src (once) and returns the .dsc's path. */
export function fetchSource(cacheRoot = CACHE_ROOT, log = () => {}) {
  const srcDir = join(cacheRoot, 'src');
  const dsc = join(srcDir, `${SOURCE_PACKAGE}_${SOURCE_VERSION}.dsc`);
  if (existsSync(dsc)) {
    const text = readFileSync(dsc, 'utf8');
    const files = [...text.matchAll(/^ [0-9a-f]{64} \d+ (\S+)$/gm)].map((m) => m[1]);
    if (files.length > 0 && files.every((f) => existsSync(join(srcDir, f)))) return dsc;
  }
  const apt = join(cacheRoot, 'apt');
  mkdirSync(join(apt, 'lists', 'partial'), { recursive: true });
  mkdirSync(join(apt, 'cache', 'archives', 'partial'), { recursive: true });
  mkdirSync(srcDir, { recursive: true });
  const list = join(apt, 'deb-src.sources');
  writeFileSync(list, debSrcStanza(readFileSync('/etc/apt/sources.list.d/debian.sources', 'utf8')));
  const o = [
    '-o',
    `Dir::Etc::SourceList=${list}`,
    '-o',
    `Dir::Etc::SourceParts=${join(apt, 'parts.d')}`,
    '-o',
    `Dir::State::Lists=${join(apt, 'lists')}`,
    '-o',
    `Dir::Cache=${join(apt, 'cache')}`,
    // the files land in a root-owned cache directory: no download sandbox user
    '-o',
    'APT::Sandbox::User=root',
  ];
  mkdirSync(join(apt, 'parts.d'), { recursive: true });
  const t0 = Date.now();
  run('apt-get', ['-q', ...o, 'update'], { stdio: ['ignore', 'ignore', 'inherit'] });
  run('apt-get', ['-q', ...o, 'source', '--download-only', `${SOURCE_PACKAGE}=${SOURCE_VERSION}`], {
    cwd: srcDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  log(`source fetched in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (!existsSync(dsc)) throw new Error(`apt-get source did not leave ${dsc}`);
  return dsc;
}

function goEnv(cacheRoot, work) {
  return {
    PATH: `${dirname(GO)}:/usr/sbin:/usr/bin:/sbin:/bin`,
    HOME: work,
    GOCACHE: process.env.CNIKIT_K8S_GOCACHE || join(cacheRoot, 'gocache'),
    GOPATH: join(work, 'gopath'),
    GOTOOLCHAIN: 'local',
    GOFLAGS: RECIPE.env.GOFLAGS,
    GOPROXY: RECIPE.env.GOPROXY,
    GOSUMDB: 'off',
    GO111MODULE: RECIPE.env.GO111MODULE,
    CGO_ENABLED: RECIPE.env.CGO_ENABLED,
  };
}

/** Steps 2-5 into stage/bin, in a scratch tree under cacheRoot/work that is removed afterwards. */
export function buildFromSource({ cacheRoot = CACHE_ROOT, stage, patches, log = () => {} }) {
  const timings = {};
  let t = Date.now();
  const lap = (name) => {
    timings[name] = Math.round((Date.now() - t) / 100) / 10;
    log(`${name}: ${timings[name]} s`);
    t = Date.now();
  };
  const dsc = fetchSource(cacheRoot, log);
  lap('fetch');
  const work = join(cacheRoot, 'work', `${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, 'gopath', 'src', 'k8s.io'), { recursive: true });
  const tree = join(work, 'tree');
  try {
    run('dpkg-source', ['-x', dsc, tree], { stdio: ['ignore', 'ignore', 'inherit'] });
    for (const p of patches) {
      const r = spawnSync('patch', ['-p1', '--batch', '--forward', '--silent'], {
        cwd: tree,
        input: p.text,
        encoding: 'utf8',
      });
      if (r.status !== 0) throw new Error(`patch ${p.name} does not apply: ${r.stdout}${r.stderr}`);
    }
    const mt = join(tree, 'vendor', 'modules.txt');
    const fixed = fixVendorModules(readFileSync(mt, 'utf8'));
    writeFileSync(mt, fixed.text);
    log(`vendor/modules.txt: packages of ${fixed.moved} modules moved under their versioned headers`);
    lap('extract');

    const env = goEnv(cacheRoot, work);
    mkdirSync(env.GOCACHE, { recursive: true });
    const bin = join(work, 'bin');
    run(
      GO,
      ['build', '-trimpath', '-o', join(bin, 'openapi-gen'), './vendor/k8s.io/kube-openapi/cmd/openapi-gen'],
      {
        cwd: tree,
        env,
      },
    );
    // openapi-gen (gengo) reads packages with go/build in GOPATH mode, as upstream's make runs it.
    const gopathTree = join(env.GOPATH, 'src', 'k8s.io', 'kubernetes');
    symlinkSync(tree, gopathTree);
    const inputs = openapiInputDirs(tree);
    run(
      join(bin, 'openapi-gen'),
      [
        '--logtostderr',
        '-i',
        inputs.join(','),
        '-p',
        'k8s.io/kubernetes/pkg/generated/openapi',
        '-O',
        'zz_generated.openapi',
        '-h',
        'vendor/k8s.io/code-generator/hack/boilerplate.go.txt',
        '-r',
        join(work, 'openapi-violations.report'),
      ],
      // PWD: Go's os.Getwd keeps the GOPATH spelling of the directory, as `cd` in upstream's make does (getcwd
      // would resolve the link to a directory outside GOPATH and gengo would find no vendor/ for it)
      { cwd: gopathTree, env: { ...env, PWD: gopathTree, GO111MODULE: 'off', GOFLAGS: '' } },
    );
    // upstream's make fails when the API rule violations differ from the known list: the same inputs give the same
    // report, so this also checks that openapiInputDirs found what make finds
    const report = readFileSync(join(work, 'openapi-violations.report'), 'utf8');
    if (report !== readFileSync(join(tree, 'api', 'api-rules', 'violation_exceptions.list'), 'utf8'))
      throw new Error('openapi-gen: API rule violations differ from api/api-rules/violation_exceptions.list');
    if (!existsSync(join(tree, 'pkg', 'generated', 'openapi', 'zz_generated.openapi.go')))
      throw new Error('openapi-gen did not write pkg/generated/openapi/zz_generated.openapi.go');
    lap('openapi');

    const [major, minor] = UPSTREAM_VERSION.slice(1).split('.');
    const stamp = { gitVersion: UPSTREAM_VERSION, gitMajor: major, gitMinor: minor, gitTreeState: 'archive' };
    const x = [];
    for (const pkg of ['k8s.io/client-go/pkg/version', 'k8s.io/component-base/version'])
      for (const [k, v] of Object.entries(stamp)) x.push('-X', `${pkg}.${k}=${v}`);
    run(
      GO,
      [
        'build',
        ...(RECIPE.trimpath ? ['-trimpath'] : []),
        '-tags',
        RECIPE.tags.join(','),
        '-ldflags',
        [...RECIPE.ldflags, ...x].join(' '),
        '-o',
        join(stage, 'bin') + '/',
        ...BINARIES.map((b) => `./cmd/${b}`),
      ],
      { cwd: tree, env },
    );
    lap('build');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return {
    sourceVersion: SOURCE_VERSION,
    goVersion: goVersion(),
    patches: patches.map((p) => p.name),
    timings,
  };
}

/** The whole step: the cache directory for the current inputs, built if it is not there. */
export async function k8sBinaries({
  cacheRoot = CACHE_ROOT,
  log = (m) => process.stderr.write(`k8s-build: ${m}\n`),
} = {}) {
  const patches = readPatches();
  const key = cacheKey({ goVersion: goVersion(), patches });
  return ensureBuilt({
    cacheRoot,
    key,
    log,
    build: (stage) => buildFromSource({ cacheRoot, stage, patches, log }),
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const t0 = Date.now();
  const r = await k8sBinaries();
  process.stderr.write(
    `k8s-build: ${r.hit ? 'cache hit' : 'built'} in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${r.dir}\n`,
  );
  process.stdout.write(`${join(r.dir, 'bin')}\n`);
}
