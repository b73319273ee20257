/**
 * isNetnsGoneForDel: the one DEL rule for "the namespace is already gone" (used by loopback and bridge). No root
 * needed: the errors come from openNetnsFd on ordinary files, /proc files and synthetic errors.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { isNetnsGone, isNetnsGoneForDel, NetnsNotFoundError, NotNetnsError, openNetnsFd } from './netns.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-netns-del-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The error openNetnsFd throws for `path` (it must throw). */
function openErr(path: string): unknown {
  try {
    openNetnsFd(path);
  } catch (err) {
    return err;
  }
  assert.fail(`${path} opened as a network namespace`);
}

describe('isNetnsGoneForDel', () => {
  test('a missing path (and a path under a regular file) is gone', () => {
    for (const p of [join(dir, 'missing'), join(dir, 'missing', 'x')]) {
      const err = openErr(p);
      assert.ok(err instanceof NetnsNotFoundError, p);
      assert.equal(isNetnsGoneForDel(err, p), true, p);
    }
    const file = join(dir, 'plainfile');
    writeFileSync(file, 'x');
    const p = join(file, 'x'); // ENOTDIR
    assert.equal(isNetnsGoneForDel(openErr(p), p), true);
  });

  test('an empty regular file (an unmounted bind-mount point) is gone; also through a cause chain', () => {
    const empty = join(dir, 'empty');
    writeFileSync(empty, '');
    const err = openErr(empty);
    assert.ok(err instanceof NotNetnsError);
    assert.equal(isNetnsGone(err), false, 'isNetnsGone alone keeps its narrow meaning');
    assert.equal(isNetnsGoneForDel(err, empty), true);
    assert.equal(isNetnsGoneForDel(new Error('wrapped', { cause: err }), empty), true);
    const link = join(dir, 'link-to-empty');
    symlinkSync(empty, link);
    assert.equal(isNetnsGoneForDel(openErr(link), link), true, 'a symlink to an empty file');
  });

  test('a non-empty file, a directory, another namespace type and procfs files are NOT gone', () => {
    const full = join(dir, 'full');
    writeFileSync(full, 'not a namespace');
    const sub = join(dir, 'sub');
    mkdirSync(sub);
    for (const p of [full, sub, '/proc/self/ns/mnt', '/proc/self/ns/uts', '/proc/self/status']) {
      const err = openErr(p);
      assert.ok(err instanceof NotNetnsError, p);
      assert.equal(isNetnsGoneForDel(err, p), false, p);
    }
  });

  test('the file is re-examined: emptied later → gone; filled later → not gone; removed since → gone', () => {
    const p = join(dir, 'changing');
    writeFileSync(p, 'x');
    const errFull = openErr(p);
    writeFileSync(p, '');
    assert.equal(isNetnsGoneForDel(errFull, p), true);
    const errEmpty = openErr(p);
    writeFileSync(p, 'again');
    assert.equal(isNetnsGoneForDel(errEmpty, p), false);
    rmSync(p);
    assert.equal(isNetnsGoneForDel(errEmpty, p), true);
  });

  test('other errors are not gone, whatever the path is', () => {
    const empty = join(dir, 'empty2');
    writeFileSync(empty, '');
    assert.equal(isNetnsGoneForDel(new Error('EPERM'), empty), false);
    assert.equal(isNetnsGoneForDel(undefined, empty), false);
    // a NotNetnsError without an fs magic is "on nsfs/procfs but another type": never gone
    assert.equal(isNetnsGoneForDel(new NotNetnsError(empty, 'x is not a network namespace'), empty), false);
    assert.equal(isNetnsGoneForDel(new NotNetnsError(empty, 'unknown FS magic', 0x01021994), empty), true);
  });
});
