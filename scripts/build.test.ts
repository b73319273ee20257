import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { discoverPlugins, entrySource } from './build.ts';

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
