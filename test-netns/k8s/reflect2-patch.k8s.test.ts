/**
 * scripts/k8s/patches/0001-reflect2-go1.18-map-iterator.patch (docs/k8s-build.md) on the code it patches: the
 * vendored json-iterator, modern-go/concurrent and modern-go/reflect2 of Debian's kubernetes source package (taken
 * from the cached source, scripts/k8s-build.mjs fetchSource) marshal a map with Debian's Go 1.19. Unpatched, the
 * program dies with SIGSEGV in runtime.mapiternext; patched, it prints the JSON. Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { CACHE_ROOT, fetchSource, GO, readPatches } from '../../scripts/k8s-build.mjs';

const root = mkdtempSync(join(tmpdir(), 'cnikit-reflect2-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

const PKGS = [
  'github.com/json-iterator/go',
  'github.com/modern-go/concurrent',
  'github.com/modern-go/reflect2',
];
const MAIN = `package main

import (
	"fmt"

	jsoniter "github.com/json-iterator/go"
)

func main() {
	data := map[string]string{}
	for i := 0; i < 50; i++ {
		data[fmt.Sprint("k", i)] = "v"
	}
	b, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(map[string]interface{}{"data": data})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}
`;

function program(dir: string, vendor: string): void {
  for (const p of PKGS) {
    mkdirSync(dirname(join(dir, 'vendor', p)), { recursive: true });
    cpSync(join(vendor, p), join(dir, 'vendor', p), { recursive: true });
  }
  // GOPATH mode with vendor/: no module metadata needed for three vendored packages
  writeFileSync(join(dir, 'main.go'), MAIN);
}

function run(dir: string) {
  return spawnSync(GO, ['run', '.'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 600_000,
    env: {
      PATH: process.env.PATH,
      HOME: root,
      PWD: dir,
      GOPATH: join(root, 'gopath'),
      GOCACHE: join(root, 'gocache'),
      GO111MODULE: 'off',
      GOFLAGS: '',
      GOPROXY: 'off',
      GOTOOLCHAIN: 'local',
      CGO_ENABLED: '0',
    },
  });
}

test('the reflect2 patch: the vendored json-iterator crashes on a map under Go 1.19 without it and not with it', () => {
  const dsc: string = fetchSource(CACHE_ROOT);
  const srcDir = dirname(dsc);
  const orig = readdirSync(srcDir).find((f) => f.endsWith('.orig.tar.gz'));
  assert.ok(orig, `no .orig.tar.gz beside ${dsc}`);
  const extracted = join(root, 'src');
  mkdirSync(extracted);
  const tar = spawnSync(
    'tar',
    [
      '--wildcards',
      '-xzf',
      join(srcDir, orig),
      '-C',
      extracted,
      '--strip-components=1',
      ...PKGS.map((p) => `*/vendor/${p}/*`),
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(tar.status, 0, tar.stderr);
  const vendor = join(extracted, 'vendor');

  // GOPATH/src/example.com/<name>: vendor/ is honoured inside GOPATH
  const plain = join(root, 'gopath', 'src', 'example.com', 'plain');
  const patched = join(root, 'gopath', 'src', 'example.com', 'patched');
  program(plain, vendor);
  program(patched, vendor);
  const patch = readPatches().find((p: { name: string }) => p.name.includes('reflect2'));
  assert.ok(patch, 'the reflect2 patch is in scripts/k8s/patches/');
  const applied = spawnSync('patch', ['-p1', '--batch', '--forward'], {
    cwd: patched,
    input: patch.text,
    encoding: 'utf8',
  });
  assert.equal(applied.status, 0, applied.stdout + applied.stderr);

  const before = run(plain);
  assert.notEqual(before.status, 0, 'unpatched reflect2 must crash under Go 1.19');
  assert.match(before.stderr, /SIGSEGV/);
  assert.match(before.stderr, /runtime\.mapiternext/);

  const afterFix = run(patched);
  assert.equal(afterFix.status, 0, afterFix.stderr);
  const out = JSON.parse(afterFix.stdout);
  assert.equal(Object.keys(out.data).length, 50);
  assert.equal(out.data.k49, 'v');
});
