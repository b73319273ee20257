import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ADDON_KEY, BUN_ADDON_PREFIX, pick } from './entry.ts';
import { mainOptions } from './options.ts';

describe('the executable entry (runtime/entry.ts)', () => {
  test('pick: the plugin export, else the default export', () => {
    const a = { name: 'a' };
    const b = { name: 'b' };
    assert.equal(pick({ plugin: a, default: b }), a);
    assert.equal(pick({ default: b }), b);
  });

  test('mainOptions: the addon source of the back-end, the name unless cnikit, only the entry points built in', async () => {
    const sha = 'f'.repeat(64);
    const tool = async () => async () => 0;
    const bun = mainOptions({ backend: 'bun', addonSha: sha, plugins: [], name: 'cnikit', tool });
    assert.equal(bun.native?.sha256, sha);
    assert.deepEqual(Object.keys(bun).sort(), ['native', 'tool']);
    assert.equal(bun.tool, tool);
    const sea = mainOptions({
      backend: 'sea',
      addonSha: sha,
      plugins: [],
      name: 'mycni',
      stamp: { version: '0.1.0', commit: 'unknown' } as never,
    });
    assert.deepEqual(Object.keys(sea).sort(), ['name', 'native', 'stamp']);
    assert.equal(sea.name, 'mycni');
    // outside a SEA / Bun executable the embedded addon is not there: each source says so in its own words
    assert.throws(() => sea.native!.read());
    assert.throws(() => bun.native!.read(), new RegExp(BUN_ADDON_PREFIX));
    assert.equal(ADDON_KEY, 'cnikit_sys.node');
  });
});
