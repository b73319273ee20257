import assert from 'node:assert/strict';
import {
  linkSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { linkAtomic, writeFileAtomic } from './atomic.ts';
import { StateDir } from './statedir.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-atomic-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function fresh(): string {
  const d = join(dir, `d${n++}`);
  StateDir.open(d, { create: true }).close();
  return d;
}
const mode = (p: string) => statSync(p).mode & 0o7777;

describe('@cnikit/sys/atomic (the one atomic writer)', () => {
  test('writeFileAtomic: content and mode as asked, replaces the old file, leaves no temp file', () => {
    const d = fresh();
    const f = join(d, 'f');
    writeFileAtomic(f, 'one', 0o600);
    assert.equal(readFileSync(f, 'utf8'), 'one');
    assert.equal(mode(f), 0o600);
    const before = statSync(f).ino;
    writeFileAtomic(f, new Uint8Array([0x74, 0x77, 0x6f]), 0o755);
    assert.equal(readFileSync(f, 'utf8'), 'two');
    assert.equal(mode(f), 0o755);
    assert.notEqual(statSync(f).ino, before, 'a new file renamed over the old one');
    assert.deepEqual(readdirSync(d), ['f']);
  });

  test('writeFileAtomic: a symlink at the destination is replaced, its target untouched', () => {
    const d = fresh();
    const target = join(d, 'target');
    writeFileSync(target, 'keep');
    symlinkSync(target, join(d, 'link'));
    writeFileAtomic(join(d, 'link'), 'new', 0o644);
    assert.ok(lstatSync(join(d, 'link')).isFile());
    assert.equal(readFileSync(target, 'utf8'), 'keep');
  });

  test('writeFileAtomic: a failed rename removes the temp file and throws', () => {
    const d = fresh();
    const sub = join(d, 'sub');
    StateDir.open(sub, { create: true }).close();
    writeFileSync(join(sub, 'x'), 'x');
    // renaming a file over a non-empty directory fails (EISDIR/ENOTEMPTY)
    assert.throws(() => writeFileAtomic(sub, 'data', 0o600), /EISDIR|ENOTEMPTY|EEXIST/);
    assert.deepEqual(readdirSync(d), ['sub']);
  });

  test('linkAtomic: dst becomes a hard link of src, replacing what was there', () => {
    const d = fresh();
    writeFileSync(join(d, 'src'), 'S');
    writeFileSync(join(d, 'dst'), 'old');
    linkAtomic(join(d, 'src'), join(d, 'dst'));
    assert.equal(statSync(join(d, 'dst')).ino, statSync(join(d, 'src')).ino);
    assert.deepEqual(readdirSync(d).sort(), ['dst', 'src']);
    linkSync(join(d, 'src'), join(d, 'again'));
    assert.equal(statSync(join(d, 'again')).nlink, 3);
  });

  test('StateDir.writeAtomic uses it: mode, content, temp name of the owner or its own, none left', () => {
    const d = fresh();
    const s = StateDir.open(d);
    s.writeAtomic('state', '{"a":1}', 0o640);
    assert.equal(readFileSync(join(d, 'state'), 'utf8'), '{"a":1}');
    assert.equal(mode(join(d, 'state')), 0o640);
    s.writeAtomic('state', 'b', 0o600, '.owner-temp.tmp');
    assert.equal(readFileSync(join(d, 'state'), 'utf8'), 'b');
    assert.deepEqual(readdirSync(d), ['state']);
    // an existing temp name is refused (O_EXCL): nothing changes
    writeFileSync(join(d, '.owner-temp.tmp'), 'stale');
    assert.throws(() => s.writeAtomic('state', 'c', 0o600, '.owner-temp.tmp'), /write .*state/);
    assert.equal(readFileSync(join(d, 'state'), 'utf8'), 'b');
    assert.equal(
      readFileSync(join(d, '.owner-temp.tmp'), 'utf8'),
      'stale',
      'a file it did not create is left alone',
    );
    s.close();
  });
});
