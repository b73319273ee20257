// @cnikit/sys/layout: the install layout's one owner (file names, what each name links to, atomic placement).
import assert from 'node:assert/strict';
import { linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import {
  CLIENT_FILE,
  EXE_FILE,
  hardLinksOf,
  linkTarget,
  placeCopy,
  placeLink,
  sameContent,
  TOOL_FILE,
} from './layout.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.')) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) sources(p, out);
    else if (/\.(ts|mjs)$/.test(e.name) && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

describe('install layout', () => {
  test('what each name links to: cnitool to cnikit, a plugin to the client (warm) or to cnikit (cold)', () => {
    assert.equal(linkTarget(TOOL_FILE, 'warm'), EXE_FILE);
    assert.equal(linkTarget(TOOL_FILE, 'cold'), EXE_FILE);
    assert.equal(linkTarget('bridge', 'warm'), CLIENT_FILE);
    assert.equal(linkTarget('bridge', 'cold'), EXE_FILE);
  });

  test('hardLinksOf: the names of one inode, sorted, the file itself and hidden names left out', () => {
    const d = mkdtempSync(join(tmpdir(), 'cnikit-layout-'));
    try {
      writeFileSync(join(d, EXE_FILE), 'exe');
      writeFileSync(join(d, 'other'), 'exe');
      for (const n of ['vlan', 'bridge', '.hidden']) linkSync(join(d, EXE_FILE), join(d, n));
      assert.deepEqual(hardLinksOf(d, EXE_FILE), ['bridge', 'vlan']);
      placeCopy(join(d, 'other'), join(d, 'copy'), 0o750);
      assert.equal(statSync(join(d, 'copy')).mode & 0o777, 0o750);
      assert.ok(sameContent(join(d, 'copy'), join(d, EXE_FILE)));
      assert.equal(sameContent(join(d, 'copy'), join(d, 'missing')), false);
      placeLink(join(d, 'copy'), join(d, 'bridge'));
      assert.equal(statSync(join(d, 'bridge')).ino, statSync(join(d, 'copy')).ino);
      assert.deepEqual(hardLinksOf(d, EXE_FILE), ['vlan']);
      assert.deepEqual(
        readdirSync(d).filter((n) => n.includes('tmp')),
        [],
        'no temporary name left behind',
      );
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  test("the layout's file names are defined here only (no second copy of 'cnikit-client' to drift)", () => {
    const def = /\b(?:const|let)\s+\w+(?::\s*\w+)?\s*=\s*['"](cnikit-client|cnitool|cnikit)['"]/;
    // names.ts holds them (constants only, for the start-up path); layout.ts re-exports them
    const own = join(ROOT, 'packages', 'sys', 'src', 'names.ts');
    const found = ['packages', 'plugins', 'scripts', 'test-netns']
      .flatMap((d) => sources(join(ROOT, d)))
      .filter((f) => f !== own)
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .map((l, i) => [l, i] as const)
          .filter(([l]) => def.test(l))
          .map(([l, i]) => `${relative(ROOT, f)}:${i + 1}: ${l.trim()}`),
      );
    assert.deepEqual(found, [], 'import EXE_FILE / CLIENT_FILE / TOOL_FILE from @cnikit/sys/layout instead');
  });

  test('scripts import packages by name, never a package source by relative path', () => {
    const bad = sources(join(ROOT, 'scripts')).flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/from '(\.\.\/packages\/[^']+)'/g)].map(
        (m) => `${relative(ROOT, f)}: ${m[1]}`,
      ),
    );
    assert.deepEqual(bad, []);
  });
});
