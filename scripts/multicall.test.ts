import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
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
import type { Plugin } from '@cnikit/skel';
import { discoverPlugins, entrySource } from './build.ts';
import { handleNoPlugin, selectPlugin } from './multicall.ts';
import { ensurePrivateDir, extractNative, verifyFile } from './multicall-native.ts';

const plugins: Plugin[] = [{ name: 'bridge' }, { name: 'loopback' }, { name: 'host-local' }];

describe('multicall name selection', () => {
  test('argv0 basename wins (hard link or symlink name)', () => {
    assert.equal(
      selectPlugin(plugins, '/opt/cni/bin/bridge', '/opt/cni/bin/bridge', []).plugin?.name,
      'bridge',
    );
    // symlink: execPath resolves to the target, argv0 keeps the link name
    assert.equal(
      selectPlugin(plugins, '/opt/cni/bin/loopback', '/opt/cni/bin/cnikit', []).plugin?.name,
      'loopback',
    );
    assert.equal(selectPlugin(plugins, 'host-local', '/x/host-local', ['a']).rest[0], 'a');
  });
  test('the executed hard link wins over an arbitrary argv0 (exec -a)', () => {
    const s = selectPlugin(plugins, 'weird', '/opt/cni/bin/bridge', []);
    assert.equal(s.plugin?.name, 'bridge');
    assert.equal(s.explicit, false);
  });
  test('explicit form: cnikit <plugin>', () => {
    const s = selectPlugin(plugins, '/opt/cni/bin/cnikit', '/opt/cni/bin/cnikit', ['loopback', 'x']);
    assert.equal(s.plugin?.name, 'loopback');
    assert.equal(s.explicit, true);
    assert.deepEqual(s.rest, ['x']);
  });
  test('unknown names', () => {
    const a = selectPlugin(plugins, '/usr/bin/portmap', '/usr/bin/portmap', []);
    assert.equal(a.plugin, undefined);
    assert.equal(a.name, 'portmap');
    const b = selectPlugin(plugins, 'cnikit', '/bin/cnikit', ['nope']);
    assert.equal(b.plugin, undefined);
    assert.equal(b.name, 'nope');
    const c = selectPlugin(plugins, 'cnikit', '/bin/cnikit', []);
    assert.equal(c.plugin, undefined);
    assert.equal(c.name, '');
  });
  test('unknown plugin: message on stderr, CNI error JSON on stdout only when CNI_COMMAND is set', () => {
    const run = (env: Record<string, string>, args: string[], argv0 = 'cnikit') => {
      let out = '';
      let err = '';
      const code = handleNoPlugin(plugins, selectPlugin(plugins, argv0, '/bin/cnikit', args), {
        env,
        stdout: { write: (s: string) => (out += s) },
        stderr: { write: (s: string) => (err += s) },
      });
      return { code, out, err };
    };
    const a = run({}, ['nope']);
    assert.equal(a.code, 1);
    assert.equal(a.out, '');
    assert.match(a.err, /unknown plugin "nope"/);
    assert.match(a.err, /plugins: bridge, host-local, loopback/);
    const b = run({ CNI_COMMAND: 'ADD' }, [], 'portmap');
    assert.equal(b.code, 1);
    assert.deepEqual(JSON.parse(b.out), {
      code: 999,
      msg: 'cnikit: unknown plugin "portmap"',
      details: 'available plugins: bridge, host-local, loopback',
    });
    const c = run({}, []);
    assert.equal(c.code, 1);
    assert.match(c.err, /no plugin selected/);
    const d = run({}, ['--list']);
    assert.equal(d.code, 0);
    assert.equal(d.out, 'bridge\nhost-local\nloopback\n');
    const e = run({}, ['--help']);
    assert.equal(e.code, 0);
    assert.match(e.out, /usage: cnikit <plugin>/);
  });
});

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
    assert.match(src, /seaSource\("a{64}", "cnikit_sys.node"\)/);
    assert.match(entrySource(found, 'bun', 'b'.repeat(64)), /bunSource\("b{64}", 'cnikit_sys'\)/);
  });
});

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
    assert.deepEqual(readdirSync(dir), [`${sha}.node`]);
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
