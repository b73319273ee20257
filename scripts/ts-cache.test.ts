// The kernel lab's TypeScript cache (scripts/ts-cache.mjs): what the VM's processes load instead of tsx.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { scaled } from '@cnikit/testing';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { buildTsCache, tsxEntry } from './ts-cache.mjs';

const root = mkdtempSync(join(tmpdir(), 'cnikit-ts-cache-test-'));
const cacheRoot = join(root, 'cache');
after(() => rmSync(root, { recursive: true, force: true }));

function put(rel: string, text: string): string {
  const p = join(root, rel);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, text);
  return p;
}

put('package.json', '{ "type": "module" }\n');
const main = put(
  'packages/m/src/main.ts',
  [
    "import { value } from './value.ts';",
    'type Shape = { n: number };',
    'const s: Shape = { n: value };',
    'console.log(JSON.stringify({ url: import.meta.url, n: s.n }));',
    'if (process.argv[2] === "throw") {',
    '  throw new Error("thrown on line 6");',
    '}',
    '',
  ].join('\n'),
);
put('packages/m/src/value.ts', 'export const value: number = 1;\n');
put('packages/m/src/types.d.ts', 'export declare const nothing: number;\n');
put('packages/m/node_modules/dep/index.ts', 'export const x: number = 1;\n');
put('plugins/p/src/p.ts', 'export const p: string = "p";\n');

type Cache = { dir: string; register: string; files: number; ms: number };
const cache: Cache = await buildTsCache(root, cacheRoot);

function run(file: string, ...args: string[]) {
  return spawnSync(process.execPath, ['--import', pathToFileURL(cache.register).href, file, ...args], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
    timeout: scaled(30_000),
  });
}

test('every .ts of the source directories, one .js each at the same relative path; no .d.ts, no node_modules', () => {
  assert.equal(cache.files, 3);
  assert.ok(cache.dir.startsWith(`${cacheRoot}/run-`), cache.dir);
  for (const rel of ['packages/m/src/main.js', 'packages/m/src/value.js', 'plugins/p/src/p.js'])
    assert.ok(existsSync(join(cache.dir, rel)), rel);
  assert.equal(existsSync(join(cache.dir, 'packages/m/src/types.d.js')), false);
  assert.equal(existsSync(join(cache.dir, 'packages/m/node_modules')), false);
  const js = readFileSync(join(cache.dir, 'packages/m/src/value.js'), 'utf8');
  assert.match(js, /^const value = 1;$/m, 'types stripped');
  assert.match(js, /^export \{\s*value\s*\};$/m, 'ESM kept');
  assert.match(js, /sourceMappingURL=data:application\/json;base64,/, 'inline source map');
});

test('a .ts module runs from the cache under its own URL; relative .ts imports resolve', () => {
  // the cache's copy, changed: what runs is the cache, not a transform of the source
  writeFileSync(join(cache.dir, 'packages/m/src/value.js'), 'export const value = 42;\n');
  const r = run(main);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { url: pathToFileURL(main).href, n: 42 });
});

test("a stack trace names the .ts file and the source's line (inline source maps)", () => {
  const r = run(main, 'throw');
  assert.equal(r.status, 1);
  assert.ok(r.stderr.includes(`${main}:6`), r.stderr);
  assert.match(r.stderr, /Error: thrown on line 6/);
});

test('a .ts file written after the cache was built is transpiled on the spot', () => {
  const late = put('packages/m/src/late.ts', 'const late: string = "late";\nconsole.log(late);\n');
  const r = run(late);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'late\n');
});

test("tsx's entry module, which the VM binds the cache's register.mjs over, exists", () => {
  const entry: string = tsxEntry(new URL('..', import.meta.url).pathname);
  assert.match(entry, /node_modules\/tsx\/.*loader\.mjs$/);
  assert.ok(existsSync(entry), entry);
});
