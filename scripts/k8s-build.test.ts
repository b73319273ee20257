// The Kubernetes build's cache and source fix-ups (scripts/k8s-build.mjs, docs/k8s-build.md). The build itself (10+
// minutes) is not run here: ensureBuilt gets a stand-in build function, the fix-ups run on small trees of their own.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import {
  BINARIES,
  cacheKey,
  debSrcStanza,
  ensureBuilt,
  fixVendorModules,
  GO,
  LOCK,
  lookup,
  openapiInputDirs,
  RECIPE,
  readPatches,
  // @ts-expect-error: a JavaScript module of scripts/ without declarations
} from './k8s-build.mjs';

const root = mkdtempSync(join(tmpdir(), 'cnikit-k8s-build-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const scratch = (): string => {
  const d = join(root, `t${n++}`);
  mkdirSync(d, { recursive: true });
  return d;
};
function put(base: string, rel: string, text: string): string {
  const p = join(base, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
}

const P1 = { name: '0001-a.patch', text: '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n' };
const P2 = { name: '0002-b.patch', text: '--- a/y\n+++ b/y\n@@ -1 +1 @@\n-c\n+d\n' };
const PATCHES = [P1, P2];
const base = { sourceVersion: '1.20.5+really1.20.2-1.1+deb12u1', goVersion: 'go1.19.8', patches: PATCHES };

test('cache key: stable for the same inputs, different when a patch, the versions or the recipe change', () => {
  const k = cacheKey(base);
  assert.equal(cacheKey({ ...base, patches: PATCHES.map((p) => ({ ...p })) }), k);
  assert.match(k, /^1\.20\.5\+really1\.20\.2-1\.1\+deb12u1-go1\.19\.8-[0-9a-f]{16}$/);
  const variants = [
    { ...base, patches: [P1, { ...P2, text: P2.text.replace('+d', '+e') }] },
    { ...base, patches: [P1, { ...P2, name: '0003-b.patch' }] },
    { ...base, patches: [P1] },
    { ...base, patches: [...PATCHES, { name: '0003-c.patch', text: '' }] },
    // the boundary between two patches is part of the key, not just their concatenation
    {
      ...base,
      patches: [
        { ...P1, text: P1.text + P2.text.slice(0, 4) },
        { ...P2, text: P2.text.slice(4) },
      ],
    },
    { ...base, goVersion: 'go1.19.9' },
    { ...base, sourceVersion: '1.20.5+really1.20.2-1.1+deb12u2' },
    { ...base, recipe: { ...RECIPE, tags: ['providerless'] } },
    { ...base, recipe: { ...RECIPE, revision: RECIPE.revision + 1 } },
  ];
  const keys = new Set([k, ...variants.map((v) => cacheKey(v))]);
  assert.equal(keys.size, variants.length + 1);
});

test("the repository's patch set is read in name order and is part of the key", () => {
  const dir = scratch();
  put(dir, '0002-b.patch', 'two');
  put(dir, '0001-a.patch', 'one');
  put(dir, 'README', 'not a patch');
  const read = readPatches(dir);
  assert.deepEqual(read, [
    { name: '0001-a.patch', text: 'one' },
    { name: '0002-b.patch', text: 'two' },
  ]);
  const k1 = cacheKey({ ...base, patches: read });
  put(dir, '0001-a.patch', 'one, changed');
  assert.notEqual(cacheKey({ ...base, patches: readPatches(dir) }), k1);
  // the real patch set exists and holds the reflect2 change
  const real = readPatches();
  assert.ok(
    real.some((p: { text: string }) => p.text.includes('vendor/github.com/modern-go/reflect2/unsafe_map.go')),
  );
});

/** What a cache root holds besides its lock file (LOCK, kept on purpose). */
const entries = (cacheRoot: string): string[] => readdirSync(cacheRoot).filter((f) => f !== LOCK);

/** A stand-in build that writes every binary (size = name length * 1000) and counts its calls. */
function fakeBuild() {
  const calls: string[] = [];
  const build = (stage: string) => {
    calls.push(stage);
    for (const b of BINARIES) writeFileSync(join(stage, 'bin', b), Buffer.alloc(b.length * 1000, 1));
    return { note: 'fake' };
  };
  return { calls, build };
}

test('a miss builds once into a staging directory renamed into place; a hit does not build again', async () => {
  const cacheRoot = scratch();
  const key = cacheKey(base);
  const { calls, build } = fakeBuild();
  assert.equal(lookup(cacheRoot, key), null);
  const first = await ensureBuilt({ cacheRoot, key, build });
  assert.equal(first.hit, false);
  assert.equal(calls.length, 1);
  assert.notEqual(calls[0], join(cacheRoot, key), 'the build writes a staging directory, not the entry');
  assert.equal(first.dir, join(cacheRoot, key));
  const manifest = JSON.parse(readFileSync(join(first.dir, 'manifest.json'), 'utf8'));
  assert.equal(manifest.key, key);
  assert.equal(manifest.note, 'fake');
  assert.deepEqual(
    manifest.binaries,
    BINARIES.map((name: string) => ({ name, size: name.length * 1000 })),
  );
  assert.deepEqual(entries(cacheRoot), [key], 'no staging directory is left behind');

  const second = await ensureBuilt({ cacheRoot, key, build });
  assert.equal(second.hit, true);
  assert.equal(calls.length, 1, 'a hit runs no build');
  assert.equal(second.dir, first.dir);

  // another patch set is another entry, built separately; the first stays
  const key2 = cacheKey({ ...base, patches: [P1] });
  const third = await ensureBuilt({ cacheRoot, key: key2, build });
  assert.equal(third.hit, false);
  assert.equal(calls.length, 2);
  assert.deepEqual(entries(cacheRoot).sort(), [key, key2].sort());
});

/**
 * A process that calls ensureBuilt on cacheRoot with a stand-in build taking `ms` and prints its result as JSON;
 * every build appends a line to cacheRoot/../builds.
 */
function builder(cacheRoot: string, key: string, ms: number) {
  const mod = join(import.meta.dirname, 'k8s-build.mjs');
  const code = `
    import { appendFileSync, writeFileSync } from 'node:fs';
    import { join } from 'node:path';
    const { ensureBuilt, BINARIES } = await import(${JSON.stringify(mod)});
    const logs = [];
    const r = await ensureBuilt({
      cacheRoot: ${JSON.stringify(cacheRoot)},
      key: ${JSON.stringify(key)},
      log: (m) => logs.push(m),
      build: async (stage) => {
        appendFileSync(${JSON.stringify(join(cacheRoot, '..', 'builds'))}, process.pid + '\\n');
        await new Promise((r) => setTimeout(r, ${ms}));
        for (const b of BINARIES) writeFileSync(join(stage, 'bin', b), Buffer.alloc(b.length * 1000, 1));
      },
    });
    process.stdout.write(JSON.stringify({ hit: r.hit, dir: r.dir, logs }));
  `;
  return spawn(process.execPath, ['--input-type=module', '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

function result(p: ReturnType<typeof builder>): Promise<{ hit: boolean; dir: string; logs: string[] }> {
  let out = '';
  p.stdout?.on('data', (d: Buffer) => (out += d));
  return new Promise((resolve, reject) =>
    p.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`builder exited ${code}`)),
    ),
  );
}

test('builds started together build once: the others wait on the lock and find the entry', async () => {
  const top = scratch();
  const cacheRoot = join(top, 'cache');
  const key = cacheKey(base);
  const procs = [builder(cacheRoot, key, 1500), builder(cacheRoot, key, 1500), builder(cacheRoot, key, 1500)];
  const results = await Promise.all(procs.map(result));
  const builds = readFileSync(join(top, 'builds'), 'utf8').trim().split('\n');
  assert.equal(builds.length, 1, `one build for three callers: ${builds.join(' ')}`);
  assert.deepEqual(results.map((r) => r.hit).sort(), [false, true, true]);
  for (const r of results) assert.equal(r.dir, join(cacheRoot, key));
  const waited = results.filter((r) => r.logs.some((l) => /another build .* waiting/.test(l)));
  assert.ok(waited.length >= 1, `a caller said it waited: ${JSON.stringify(results)}`);
  assert.deepEqual(entries(cacheRoot), [key]);
  assert.ok(lookup(cacheRoot, key));
});

test('a build killed while it holds the lock does not block the next one (the kernel drops the lock)', async () => {
  const top = scratch();
  const cacheRoot = join(top, 'cache');
  const key = cacheKey(base);
  const first = builder(cacheRoot, key, 60_000);
  // killed once its build has started (it holds the lock then)
  for (let i = 0; !existsSync(join(top, 'builds')); i++) {
    assert.ok(i < 300, 'the first build started');
    await new Promise((r) => setTimeout(r, 50));
  }
  first.kill('SIGKILL');
  await new Promise((r) => first.on('close', r));
  const t0 = Date.now();
  const second = await result(builder(cacheRoot, key, 10));
  assert.equal(second.hit, false, 'the second caller built the entry');
  assert.ok(Date.now() - t0 < 30_000, 'without waiting for the dead build');
  assert.equal(readFileSync(join(top, 'builds'), 'utf8').trim().split('\n').length, 2);
  assert.ok(lookup(cacheRoot, key));
});

test('a partly written entry is not a hit and is rebuilt', async () => {
  const key = cacheKey(base);
  const cases: [string, (dir: string) => void][] = [
    ['binaries without a manifest', (dir) => rmSync(join(dir, 'manifest.json'))],
    ['a truncated manifest', (dir) => truncateSync(join(dir, 'manifest.json'), 20)],
    ['a binary shorter than recorded', (dir) => truncateSync(join(dir, 'bin', 'kube-apiserver'), 100)],
    ['a missing binary', (dir) => rmSync(join(dir, 'bin', 'kubectl'))],
    [
      "another key's manifest",
      (dir) => {
        const m = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
        writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ ...m, key: 'other' }));
      },
    ],
  ];
  for (const [what, damage] of cases) {
    const cacheRoot = scratch();
    const { calls, build } = fakeBuild();
    const { dir } = await ensureBuilt({ cacheRoot, key, build });
    damage(dir);
    assert.equal(lookup(cacheRoot, key), null, what);
    const again = await ensureBuilt({ cacheRoot, key, build });
    assert.equal(again.hit, false, what);
    assert.equal(calls.length, 2, what);
    assert.ok(lookup(cacheRoot, key), `${what}: rebuilt entry is complete`);
  }
});

test('a build that fails or leaves a binary out writes no entry and no staging directory', async () => {
  const key = cacheKey(base);
  const cacheRoot = scratch();
  await assert.rejects(
    ensureBuilt({
      cacheRoot,
      key,
      build: (stage: string) => {
        writeFileSync(join(stage, 'bin', 'kubelet'), 'half');
        throw new Error('go build: killed');
      },
    }),
    /killed/,
  );
  assert.deepEqual(entries(cacheRoot), []);
  await assert.rejects(
    ensureBuilt({
      cacheRoot,
      key,
      build: (stage: string) => {
        writeFileSync(join(stage, 'bin', 'kubelet'), 'only one');
      },
    }),
    /did not produce bin\/kube-apiserver/,
  );
  assert.deepEqual(entries(cacheRoot), []);
  assert.equal(lookup(cacheRoot, key), null);
});

// The layout of Kubernetes 1.20's vendor/modules.txt in small: a module listed under its versioned replacement line
// and again under the wildcard one, with packages under both (sorted by path, so a package of a parent module can
// follow a child module's wildcard line).
const BROKEN = [
  '# example.com/dep v1.0.0 => example.com/dep v1.0.0',
  '## explicit',
  'example.com/dep/a',
  '# example.com/dep => example.com/dep v1.0.0',
  'example.com/dep/b',
  '# example.com/dep/sub v1.1.0 => example.com/dep/sub v1.1.0',
  '## explicit',
  'example.com/dep/sub',
  '# example.com/dep/sub => example.com/dep/sub v1.1.0',
  'example.com/dep/sub/x',
  '# example.com/other => example.com/other v0.1.0',
  '',
].join('\n');

test('vendor/modules.txt: packages under wildcard lines move under their module, nothing else changes', () => {
  const { text, moved } = fixVendorModules(BROKEN);
  assert.equal(moved, 2);
  assert.equal(
    text,
    [
      '# example.com/dep v1.0.0 => example.com/dep v1.0.0',
      '## explicit',
      'example.com/dep/a',
      'example.com/dep/b',
      '# example.com/dep => example.com/dep v1.0.0',
      '# example.com/dep/sub v1.1.0 => example.com/dep/sub v1.1.0',
      '## explicit',
      'example.com/dep/sub',
      'example.com/dep/sub/x',
      '# example.com/dep/sub => example.com/dep/sub v1.1.0',
      '# example.com/other => example.com/other v0.1.0',
      '',
    ].join('\n'),
  );
  assert.deepEqual(fixVendorModules(text), { text, moved: 0 }, 'idempotent');
  assert.throws(
    () => fixVendorModules('# a.example/m => a.example/m v1.0.0\nb.example/p\n'),
    /no versioned module/,
  );
});

test('vendor/modules.txt: Go 1.19 refuses the wildcard layout with -mod=vendor and builds the fixed one', () => {
  assert.ok(existsSync(GO), `${GO} is missing: apt-get install golang-1.19-go`);
  const dir = scratch();
  put(
    dir,
    'go.mod',
    'module example.com/m\n\ngo 1.15\n\nrequire (\n\texample.com/dep v1.0.0\n\texample.com/dep/sub v1.1.0\n)\n\n' +
      'replace example.com/dep => example.com/dep v1.0.0\n\nreplace example.com/dep/sub => example.com/dep/sub v1.1.0\n\n' +
      'replace example.com/other => example.com/other v0.1.0\n',
  );
  put(
    dir,
    'main.go',
    'package main\n\nimport (\n\t"example.com/dep/a"\n\t"example.com/dep/b"\n\t"example.com/dep/sub"\n\t"example.com/dep/sub/x"\n)\n\n' +
      'func main() { println(a.A + b.B + sub.S + x.X) }\n',
  );
  put(dir, 'vendor/example.com/dep/a/a.go', 'package a\n\nconst A = 1\n');
  put(dir, 'vendor/example.com/dep/b/b.go', 'package b\n\nconst B = 2\n');
  put(dir, 'vendor/example.com/dep/sub/s.go', 'package sub\n\nconst S = 3\n');
  put(dir, 'vendor/example.com/dep/sub/x/x.go', 'package x\n\nconst X = 4\n');
  const modules = put(dir, 'vendor/modules.txt', BROKEN);
  const build = () =>
    spawnSync(GO, ['build', '-o', join(dir, 'm'), '.'], {
      cwd: dir,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        GOCACHE: join(dir, '.gocache'),
        GOPATH: join(dir, '.gopath'),
        GOFLAGS: '-mod=vendor',
        GOPROXY: 'off',
        GOTOOLCHAIN: 'local',
        CGO_ENABLED: '0',
      },
    });
  const before = build();
  assert.notEqual(before.status, 0, 'the unfixed layout must not build');
  assert.match(before.stderr, /example\.com\/dep\/b/);
  writeFileSync(modules, fixVendorModules(BROKEN).text);
  const afterFix = build();
  assert.equal(afterFix.status, 0, afterFix.stderr);
  const out = spawnSync(join(dir, 'm'), { encoding: 'utf8' });
  assert.equal(out.stderr.trim(), '10');
});

test("openapi-gen's input packages: tagged directories, staging named as vendor, generator examples left out", () => {
  const tree = scratch();
  const tagged = '// +k8s:openapi-gen=true\npackage v1\n';
  put(tree, 'pkg/apis/core/v1/doc.go', tagged);
  put(tree, 'pkg/apis/core/v1/types.go', tagged);
  put(tree, 'staging/src/k8s.io/api/apps/v1/doc.go', tagged);
  put(tree, 'staging/src/k8s.io/code-generator/_examples/x/v1/doc.go', tagged);
  put(tree, 'staging/src/k8s.io/sample-apiserver/pkg/v1/doc.go', tagged);
  put(tree, 'pkg/other/doc.go', '// +k8s:deepcopy-gen=package\npackage other\n');
  put(tree, 'pkg/untagged/doc.go', 'package untagged // mentions +k8s:openapi-gen= inline only\n');
  put(tree, 'vendor/github.com/x/y/doc.go', tagged);
  put(tree, '_output/local/doc.go', tagged);
  put(tree, '.go/src/doc.go', tagged);
  assert.deepEqual(openapiInputDirs(tree), [
    'k8s.io/kubernetes/pkg/apis/core/v1',
    'k8s.io/kubernetes/vendor/k8s.io/api/apps/v1',
  ]);
});

test('deb-src stanza for the archive the machine already uses', () => {
  const sources = [
    'Types: deb',
    'URIs: http://mirror.example/debian',
    'Suites: bookworm bookworm-updates',
    'Components: main',
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
    '',
    'Types: deb',
    'URIs: http://mirror.example/debian-security',
    'Suites: bookworm-security',
    'Components: main',
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
    '',
  ].join('\n');
  assert.equal(
    debSrcStanza(sources),
    'Types: deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n' +
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n',
  );
  assert.throws(() => debSrcStanza('Types: deb\nURIs: http://x/ubuntu\nSuites: jammy\n'), /bookworm/);
});
