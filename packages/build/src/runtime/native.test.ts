import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ensurePrivateDir, extractNative, stampPath, verifyFile } from './native.ts';

describe('embedded addon extraction', () => {
  const base = mkdtempSync(join(tmpdir(), 'cnikit-native-test-'));
  after(() => rmSync(base, { recursive: true, force: true }));
  const bytes = Buffer.from('pretend this is an ELF shared object');
  const sha = createHash('sha256').update(bytes).digest('hex');
  let reads = 0;
  const src = {
    sha256: sha,
    read: () => {
      reads++;
      return bytes;
    },
  };

  test('extracts once to <dir>/<sha256>.node, 0500, private dir 0700; reuses afterwards', () => {
    const dir = join(base, 'a');
    const p = extractNative(src, [dir]);
    assert.equal(p, join(dir, `${sha}.node`));
    assert.deepEqual(readFileSync(p), bytes);
    assert.equal(statSync(p).mode & 0o777, 0o500);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const before = reads;
    assert.equal(extractNative(src, [dir]), p);
    assert.equal(reads, before, 'verified existing file is reused without reading the embedded copy');
    assert.deepEqual(readdirSync(dir).sort(), [`${sha}.node`, `${sha}.stamp`]);
    assert.equal(statSync(stampPath(p)).mode & 0o777, 0o400);
  });

  // what a stamp for `file` holds (the format verifyFile writes)
  const identityOf = (file: string): string => {
    const fd = openSync(file, 'r');
    try {
      const st = fstatSync(fd, { bigint: true });
      return `cnikit-addon-stamp 1 ${st.dev} ${st.ino} ${st.size} ${st.mtimeNs} ${st.ctimeNs}\n`;
    } finally {
      closeSync(fd);
    }
  };

  test('the hash is checked once: a file matching its stamp is trusted, any change to it is hashed again', () => {
    const dir = join(base, 's');
    const p = extractNative(src, [dir]);
    assert.equal(readFileSync(stampPath(p), 'latin1'), identityOf(p));
    // same size, mtime set back: the ctime still changed, so the stamp no longer matches and the hash runs
    const st = statSync(p);
    chmodSync(p, 0o600);
    writeFileSync(p, Buffer.alloc(bytes.length, 0x41));
    chmodSync(p, 0o500);
    utimesSync(p, st.atime, st.mtime);
    assert.notEqual(readFileSync(stampPath(p), 'latin1'), identityOf(p));
    assert.equal(verifyFile(p, sha, true), false);
    assert.equal(extractNative(src, [dir]), p);
    assert.deepEqual(readFileSync(p), bytes, 'replaced');
    assert.equal(readFileSync(stampPath(p), 'latin1'), identityOf(p), 're-stamped');
    // a stamp equal to the file's identity is what skips the hash: forge one (only our euid can) for wrong content
    chmodSync(p, 0o600);
    writeFileSync(p, 'evil');
    chmodSync(p, 0o500);
    chmodSync(stampPath(p), 0o600);
    writeFileSync(stampPath(p), identityOf(p));
    assert.equal(verifyFile(p, sha), false, 'without stamps the hash decides');
    assert.equal(verifyFile(p, sha, true), true, 'a matching stamp is trusted without hashing');
    // ... but not a group/other-writable stamp, nor a symlink to a matching one
    chmodSync(stampPath(p), 0o622);
    assert.equal(verifyFile(p, sha, true), false);
    const elsewhere = join(base, 'stamp-elsewhere');
    writeFileSync(elsewhere, identityOf(p));
    rmSync(stampPath(p));
    symlinkSync(elsewhere, stampPath(p));
    assert.equal(verifyFile(p, sha, true), false);
    // a stamp that does not match is replaced after a successful full check
    const good = extractNative(src, [dir]);
    assert.deepEqual(readFileSync(good), bytes);
    assert.ok(lstatSync(stampPath(good)).isFile());
    assert.equal(readFileSync(stampPath(good), 'latin1'), identityOf(good));
  });

  test('a tampered file is replaced', () => {
    const dir = join(base, 'b');
    const p = extractNative(src, [dir]);
    chmodSync(p, 0o600);
    writeFileSync(p, 'evil');
    chmodSync(p, 0o500);
    assert.equal(verifyFile(p, sha), false);
    assert.equal(extractNative(src, [dir]), p);
    assert.deepEqual(readFileSync(p), bytes);
  });

  test('a pre-created symlink at the final name is not followed', () => {
    const dir = join(base, 'c');
    mkdirSync(dir, { mode: 0o700 });
    const victim = join(base, 'victim');
    writeFileSync(victim, bytes);
    symlinkSync(victim, join(dir, `${sha}.node`));
    assert.equal(
      verifyFile(join(dir, `${sha}.node`), sha),
      false,
      'symlink is rejected even with the right content',
    );
    const p = extractNative(src, [dir]);
    assert.ok(lstatSync(p).isFile(), 'replaced by a regular file');
  });

  test('a group/other-writable file or a foreign/loose directory is refused', () => {
    const dir = join(base, 'd');
    const p = extractNative(src, [dir]);
    chmodSync(p, 0o522);
    assert.equal(verifyFile(p, sha), false);
    const loose = join(base, 'loose');
    mkdirSync(loose, { mode: 0o777 });
    chmodSync(loose, 0o777);
    assert.throws(() => ensurePrivateDir(loose), /mode 777; expected 0700/);
    const link = join(base, 'linkdir');
    symlinkSync(dir, link);
    assert.throws(() => ensurePrivateDir(link), /not a directory/);
    // falls through to the next candidate and names every reason if all fail
    assert.throws(
      () => extractNative(src, [loose, link]),
      /cannot extract the embedded native addon: .*loose.*linkdir/,
    );
    assert.equal(extractNative(src, [loose, dir]), join(dir, `${sha}.node`));
  });

  test('corrupt embedded bytes are refused', () => {
    assert.throws(
      () => extractNative({ sha256: 'c'.repeat(64), read: () => bytes }, [join(base, 'e')]),
      /embedded addon is corrupt/,
    );
    assert.throws(
      () => extractNative({ sha256: 'nothex', read: () => bytes }, [join(base, 'f')]),
      /bad embedded addon hash/,
    );
  });
});
