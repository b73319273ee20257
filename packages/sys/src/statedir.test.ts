// StateDir: nothing is ever opened, created, read or written through a symlink below the opened directory.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  constants as C,
  closeSync,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { isSysError, StateDir } from './index.ts';

function temp(): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), `cnikit-statedir-${process.pid}-`));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

function errorOf(fn: () => unknown): Error & { code?: string; errno?: number } {
  try {
    fn();
  } catch (err) {
    assert.ok(isSysError(err), `not a SysError: ${String(err)}`);
    return err;
  }
  assert.fail('no error');
}

describe('StateDir', () => {
  test('open refuses a symlinked directory (ELOOP, says so) unless follow is set', () => {
    using t = temp();
    mkdirSync(join(t.path, 'real'));
    symlinkSync(join(t.path, 'real'), join(t.path, 'link'));
    const e = errorOf(() => StateDir.open(join(t.path, 'link')));
    assert.equal(e.code, 'ELOOP');
    assert.match(e.message, /link is not a directory \(a symlink is not accepted\): it is a symlink$/);
    const d = StateDir.open(join(t.path, 'link'), { follow: true });
    d.writeAtomic('f', 'x');
    d.close();
    assert.equal(readFileSync(join(t.path, 'real', 'f'), 'utf8'), 'x');
    writeFileSync(join(t.path, 'file'), '');
    assert.match(errorOf(() => StateDir.open(join(t.path, 'file'))).message, /file is not a directory/);
  });

  test('openDir creates a sub-directory with its mode; a (dangling) symlink in its place is refused, nothing created', () => {
    using t = temp();
    const root = StateDir.open(t.path);
    try {
      const sub = root.openDir('net', { create: true, mode: 0o755 });
      assert.equal(sub.path, join(t.path, 'net'));
      assert.equal(statSync(join(t.path, 'net')).mode & 0o777, 0o755 & ~process.umask());
      sub.close();
      symlinkSync(join(t.path, 'nowhere'), join(t.path, 'dangling'));
      mkdirSync(join(t.path, 'outside'));
      symlinkSync(join(t.path, 'outside'), join(t.path, 'linked'));
      for (const name of ['dangling', 'linked']) {
        const e = errorOf(() => root.openDir(name, { create: true }));
        assert.equal(e.code, 'ELOOP', name);
        assert.match(
          e.message,
          new RegExp(`${name} is not a directory \\(a symlink is not accepted\\): it is a symlink`),
        );
      }
      assert.equal(existsSync(join(t.path, 'nowhere')), false);
      assert.equal(root.openDirIfExists('missing'), undefined);
      assert.equal(errorOf(() => root.openDirIfExists('linked')).code, 'ELOOP');
    } finally {
      root.close();
    }
  });

  test('openFile never opens or creates through a symlink; link/rename/remove act on the name itself', () => {
    using t = temp();
    const d = StateDir.open(t.path);
    const outside = join(t.path, '..', `${t.path.split('/').pop()}-outside`);
    try {
      symlinkSync(`${outside}-dangling`, join(t.path, 'lock'));
      const e = errorOf(() => d.openFile('lock', C.O_CREAT | C.O_RDONLY, 0o750));
      assert.equal(e.code, 'ELOOP');
      assert.match(
        e.message,
        /^open .*\/lock: too many levels of symbolic links \(.*\/lock is a symlink, which is never followed\)$/,
      );
      assert.equal(existsSync(`${outside}-dangling`), false);

      const fd = d.openFile('a', C.O_WRONLY | C.O_CREAT | C.O_EXCL, 0o600);
      writeSync(fd, 'content');
      assert.equal(fstatSync(fd).mode & 0o777, 0o600);
      closeSync(fd);
      assert.equal(errorOf(() => d.openFile('a', C.O_WRONLY | C.O_CREAT | C.O_EXCL)).code, 'EEXIST');

      writeFileSync(outside, 'precious');
      symlinkSync(outside, join(t.path, 'taken'));
      assert.equal(errorOf(() => d.link('a', 'taken')).code, 'EEXIST');
      assert.equal(errorOf(() => d.read('taken')).code, 'ELOOP');
      const kinds = Object.fromEntries(
        d.entries().map((x) => [x.name, x.isSymbolicLink() ? 'link' : x.isFile() ? 'file' : '?']),
      );
      assert.deepEqual(kinds, { a: 'file', lock: 'link', taken: 'link' });
      d.link('a', 'b');
      assert.equal(statSync(join(t.path, 'b')).ino, statSync(join(t.path, 'a')).ino);
      d.rename('b', 'taken'); // replaces the symlink, not its target
      assert.equal(lstatSync(join(t.path, 'taken')).isFile(), true);
      assert.equal(readFileSync(outside, 'utf8'), 'precious');
      assert.equal(d.remove('lock'), true); // the symlink itself
      assert.equal(d.remove('lock'), false);
      assert.deepEqual(d.list(), ['a', 'taken']);
      assert.equal(d.read('missing'), undefined);
      assert.equal(d.read('a')?.toString(), 'content');
    } finally {
      d.close();
      rmSync(outside, { force: true });
    }
  });

  test('read returns files larger than any buffer completely', () => {
    using t = temp();
    const big = 'x'.repeat(300_000);
    writeFileSync(join(t.path, 'big'), big);
    const d = StateDir.open(t.path);
    try {
      assert.equal(d.read('big')?.toString(), big);
    } finally {
      d.close();
    }
  });

  test('a writer killed before its rename leaves a temp file that removeStaleTemps removes', () => {
    using t = temp();
    // the real write, killed by the kernel on entering rename(2) (strace fault injection): no name, a temp file
    const code = `import { StateDir } from ${JSON.stringify(join(import.meta.dirname, 'statedir.ts'))};
      StateDir.open(${JSON.stringify(t.path)}).writeAtomic('rec.json', 'data');`;
    const r = spawnSync(
      'strace',
      [
        '-f',
        '-qq',
        '-o',
        '/dev/null',
        '-e',
        'trace=rename,renameat,renameat2',
        '-e',
        'inject=rename,renameat,renameat2:signal=SIGKILL',
        process.execPath,
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        code,
      ],
      { encoding: 'utf8' },
    );
    // strace ends itself with the signal that ended the tracee
    assert.equal(r.signal, 'SIGKILL', `the writer was killed at its rename: ${r.status} ${r.stderr}`);
    const left = readdirSync(t.path);
    assert.equal(left.length, 1, String(left));
    const pidns = String(statSync('/proc/self/ns/pid').ino);
    assert.match(left[0] as string, new RegExp(`^\\.rec\\.json\\.${pidns}-\\d+\\.[0-9a-f]{12}\\.tmp$`));
    // writes that are still running, or that are not temp files of StateDir, stay
    const keep = [
      `.live.json.${pidns}-${process.pid}.0123456789ab.tmp`, // this process: alive
      `.other.json.1-1.0123456789ab.tmp`, // another pid namespace, recent
      '.legacy.json.0123456789ab.tmp', // an earlier version's name, recent
      'a.json.0123456789ab.tmp',
      '.hidden',
      'rec.json',
    ];
    const old = ['.other-old.json.1-1.0123456789ab.tmp', '.legacy-old.json.0123456789ab.tmp'];
    for (const n of [...keep, ...old]) writeFileSync(join(t.path, n), '');
    const hour = Date.now() / 1000 - 3600;
    for (const n of old) utimesSync(join(t.path, n), hour, hour);
    const d = StateDir.open(t.path);
    try {
      assert.deepEqual(d.removeStaleTemps().sort(), [left[0], ...old].sort());
      assert.deepEqual(readdirSync(t.path).sort(), [...keep].sort());
      // a temp name for a name near NAME_MAX still fits (hashed)
      d.writeAtomic('x'.repeat(250), 'long');
      assert.equal(readFileSync(join(t.path, 'x'.repeat(250)), 'utf8'), 'long');
    } finally {
      d.close();
    }
  });

  test('invalid names are refused before any system call', () => {
    using t = temp();
    const d = StateDir.open(t.path);
    try {
      for (const name of ['', '.', '..', 'a/b', 'a\0b']) {
        assert.equal(errorOf(() => d.openFile(name, C.O_RDONLY)).code, 'EINVAL', JSON.stringify(name));
        assert.equal(errorOf(() => d.openDir(name)).code, 'EINVAL', JSON.stringify(name));
      }
    } finally {
      d.close();
    }
  });
});
