import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { buildStamp, discoverPlugins, entrySource } from './build.ts';
import { buildCommand, distProblem, distSources, distSourcesDigest } from './dist-sources.mjs';

describe('build entry generation', () => {
  test('every plugins/*/src/index.ts is imported, nothing else', () => {
    const found = discoverPlugins();
    const dirs = readdirSync(join(import.meta.dirname, '..', 'plugins')).filter((d) => {
      try {
        return statSync(join(import.meta.dirname, '..', 'plugins', d, 'src', 'index.ts')).isFile();
      } catch {
        return false;
      }
    });
    assert.deepEqual(found.map((p) => p.dir).sort(), dirs.sort());
    assert.ok(found.some((p) => p.dir === 'loopback'));
    const src = entrySource(found, 'sea', 'a'.repeat(64));
    for (const p of found) assert.ok(src.includes(JSON.stringify(p.index)), p.dir);
    assert.match(src, /backend: "sea",\n {2}addonSha: "a{64}",/);
    assert.match(entrySource(found, 'bun', 'b'.repeat(64)), /backend: "bun",\n {2}addonSha: "b{64}",/);
  });
});

describe('dist-bin staleness (scripts/dist-sources.mjs, BUILD-INFO.json `sources`)', () => {
  /** A repository in miniature: one package, one plugin, a build that recorded `backends`. */
  function miniRepo(backends: string[]) {
    const root = mkdtempSync(join(tmpdir(), 'cnikit-dist-'));
    const put = (p: string, text: string) => {
      mkdirSync(dirname(join(root, p)), { recursive: true });
      writeFileSync(join(root, p), text);
    };
    put('packages/sys/package.json', '{"name":"@cnikit/sys"}');
    put('packages/sys/src/atomic.ts', 'export const a = 1;\n');
    put('plugins/host-local/package.json', '{"name":"@cnikit/plugin-host-local"}');
    put('plugins/host-local/src/index.ts', 'export const plugin = 1;\n');
    put('plugins/host-local/src/range.test.ts', '// a test\n');
    put('plugins/host-local/src/testdata/x.json', '{}');
    put('scripts/build.ts', '// build\n');
    for (const b of backends) put(`dist-bin/${b}/cnikit`, 'exe');
    put('dist-bin/cnikit', 'exe');
    const record = () =>
      put(
        'dist-bin/BUILD-INFO.json',
        JSON.stringify({
          default: 'bun',
          plugins: ['host-local'],
          sources: distSourcesDigest(root),
          backends,
        }),
      );
    record();
    return { root, put, record, [Symbol.dispose]: () => rmSync(root, { recursive: true, force: true }) };
  }

  test('a change to a source the executable is built from makes dist-bin stale, with the command to run', () => {
    using r = miniRepo(['bun']);
    assert.equal(distProblem(r.root, ['bun']), undefined);
    assert.ok(distSources(r.root).includes('plugins/host-local/src/index.ts'));
    r.put('plugins/host-local/src/index.ts', 'export const plugin = 2;\n');
    assert.equal(
      distProblem(r.root, ['bun']),
      'dist-bin/ is stale: its sources changed since it was built: run `npm run build`',
    );
    r.record();
    assert.equal(distProblem(r.root, ['bun']), undefined, 'fresh again after a build');
    // a new source file counts too
    r.put('packages/sys/src/layout.ts', 'export const b = 1;\n');
    assert.match(distProblem(r.root, ['bun']) ?? '', /stale/);
  });

  test('tests and testdata are not sources: changing them keeps dist-bin fresh', () => {
    using r = miniRepo(['bun']);
    r.put('plugins/host-local/src/range.test.ts', '// another test\n');
    r.put('plugins/host-local/src/testdata/x.json', '{"y":1}');
    r.put('plugins/host-local/src/new.test.ts', '// new\n');
    assert.equal(distProblem(r.root, ['bun']), undefined);
    assert.deepEqual(
      distSources(r.root).filter((f) => f.includes('test')),
      [],
    );
  });

  test('a back-end the tests drive but the last build did not make is named, with the build for both', () => {
    using r = miniRepo(['bun']);
    // dist-bin/sea/cnikit from an earlier build is of older sources: the record decides, not the file
    r.put('dist-bin/sea/cnikit', 'old exe');
    assert.equal(
      distProblem(r.root, ['bun', 'sea']),
      'dist-bin/ was built without the sea back-end (it has bun): run `npm run build -- --with-sea`',
    );
    assert.equal(buildCommand(['bun']), 'npm run build');
  });

  test('a dist-bin without the record (an older build) or without a build is refused with the command', () => {
    using r = miniRepo(['bun']);
    r.put('dist-bin/BUILD-INFO.json', JSON.stringify({ default: 'bun', plugins: [] }));
    assert.match(
      distProblem(r.root, ['bun']) ?? '',
      /does not record the digest of its sources.*`npm run build`/,
    );
    rmSync(join(r.root, 'dist-bin'), { recursive: true });
    assert.equal(distProblem(r.root, ['bun']), 'dist-bin/ is not built: run `npm run build`');
  });

  test('scripts/build.ts records the digest and the back-ends in BUILD-INFO.json', () => {
    const src = readFileSync(join(import.meta.dirname, 'build.ts'), 'utf8');
    assert.match(src, /const sources = distSourcesDigest\(ROOT\);/);
    assert.match(src, /\n\s+sources,\n\s+backends,\n/);
  });

  test('every test that uses the repository dist-bin goes through test-netns/dist.ts (ensureBuilt / distBin)', () => {
    const root = join(import.meta.dirname, '..');
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        if (e.name === 'node_modules' || e.name.startsWith('.') || e.name === 'dist') continue;
        const p = join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.ts') && p !== join(root, 'test-netns', 'dist.ts')) files.push(p);
      }
    };
    for (const d of ['plugins', 'test-netns']) walk(join(root, d));
    walk(join(root, 'packages', 'testing'));
    const own = /join\((?:import\.meta\.dirname|ROOT|repoRoot|root)\b[^)\n]*['"]dist-bin[/'"]/;
    const found = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((l, i) => ({ l, i }))
        .filter(({ l }) => own.test(l))
        .map(({ l, i }) => `${relative(root, f)}:${i + 1}: ${l.trim()}`),
    );
    assert.deepEqual(
      found,
      [],
      'use distBin() or ensureBuilt() of test-netns/dist.ts: they rebuild a stale dist-bin',
    );
  });
});

describe('the build stamp (cnikit --version, cnikit_build_info)', () => {
  const git = (dir: string, ...args: string[]) => {
    const r = spawnSync('git', ['-C', dir, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  };
  test('package version, commit of HEAD, the dirty flag of tracked files, the commit date; unknown without git', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-stamp-'));
    try {
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', version: '3.2.1' }));
      assert.deepEqual(buildStamp(dir, {}), { version: '3.2.1', commit: 'unknown', date: 'unknown' });
      assert.equal(buildStamp(dir, { SOURCE_DATE_EPOCH: '86400' }).date, '1970-01-02T00:00:00Z');
      git(dir, 'init', '-q');
      git(dir, 'add', 'package.json');
      git(dir, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'one', '--date=@172800');
      const head = git(dir, 'rev-parse', 'HEAD');
      const clean = buildStamp(dir, {});
      assert.equal(clean.commit, head);
      assert.equal(clean.dirty, undefined);
      assert.equal(clean.version, '3.2.1');
      assert.equal(
        clean.date,
        new Date(Number(git(dir, 'log', '-1', '--format=%ct')) * 1000).toISOString().replace(/\.000Z$/, 'Z'),
      );
      writeFileSync(join(dir, 'untracked.txt'), 'not part of the tree');
      assert.equal(buildStamp(dir, {}).dirty, undefined, 'an untracked file does not make the tree dirty');
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', version: '3.2.2' }));
      const dirty = buildStamp(dir, {});
      assert.equal(dirty.dirty, true);
      assert.equal(dirty.commit, head);
      assert.equal(dirty.version, '3.2.2');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('scripts/build.ts builds the stamp in and records it in BUILD-INFO.json', () => {
    const src = readFileSync(join(import.meta.dirname, 'build.ts'), 'utf8');
    assert.match(src, /const stamp = buildStamp\(ROOT\);/);
    assert.match(src, /\n\s+stamp,\n\s+force,/);
    assert.match(src, /\n\s+stamp,\n\s+seaCodeCache/);
  });
});
