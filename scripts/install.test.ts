import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { linkAtomic } from '../packages/sys/src/atomic.ts';
import { copyAtomic, InstallError, install, parseArgs, plan, shellWord, sourcePlugins } from './install.ts';

const base = mkdtempSync(join(tmpdir(), 'cnikit-install-test-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;

/** A fake dist-bin: cnikit + hard links, plus an unrelated file. */
function fakeSource(content = 'binary-v1', names = ['bridge', 'host-local', 'loopback']): string {
  const dir = join(base, `src-${n++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'cnikit'), content, { mode: 0o755 });
  for (const name of names) linkSync(join(dir, 'cnikit'), join(dir, name));
  writeFileSync(join(dir, 'BUILD-INFO.json'), '{}');
  mkdirSync(join(dir, 'bun'));
  return dir;
}
function target(): string {
  return join(base, `dst-${n++}`);
}
const quiet = { out: () => {} };

describe('scripts/install', () => {
  test('sourcePlugins lists the hard links of cnikit only', () => {
    const src = fakeSource();
    assert.deepEqual(sourcePlugins(src), ['bridge', 'host-local', 'loopback']);
    assert.throws(() => sourcePlugins(join(base, 'missing')), InstallError);
  });

  test('fresh install: one file, hard links, mode 0755', () => {
    const src = fakeSource();
    const dst = target();
    const lines: string[] = [];
    install({ source: src, target: dst, dryRun: false, out: (l) => lines.push(l) });
    assert.deepEqual(readdirSync(dst).sort(), ['bridge', 'cnikit', 'host-local', 'loopback']);
    const ino = statSync(join(dst, 'cnikit')).ino;
    for (const name of ['bridge', 'host-local', 'loopback']) assert.equal(statSync(join(dst, name)).ino, ino);
    assert.equal(statSync(join(dst, 'cnikit')).nlink, 4);
    assert.equal(statSync(join(dst, 'cnikit')).mode & 0o777, 0o755);
    assert.equal(readFileSync(join(dst, 'loopback'), 'utf8'), 'binary-v1');
    assert.match(lines.join('\n'), /done: 4 change/);
  });

  test('a build with the warm client: the client goes in beside cnikit (a copy, not a link), and stays unchanged', () => {
    const src = fakeSource('binary-v1');
    mkdirSync(join(src, 'warm'));
    writeFileSync(join(src, 'warm', 'cnikit-client'), 'client-v1', { mode: 0o755 });
    linkSync(join(src, 'warm', 'cnikit-client'), join(src, 'warm', 'bridge'));
    const dst = target();
    const lines: string[] = [];
    install({ source: src, target: dst, dryRun: false, out: (l) => lines.push(l) });
    assert.deepEqual(readdirSync(dst).sort(), [
      'bridge',
      'cnikit',
      'cnikit-client',
      'host-local',
      'loopback',
    ]);
    assert.equal(readFileSync(join(dst, 'cnikit-client'), 'utf8'), 'client-v1');
    assert.equal(statSync(join(dst, 'cnikit-client')).mode & 0o777, 0o755);
    assert.equal(readFileSync(join(dst, 'bridge'), 'utf8'), 'binary-v1', 'plugin names stay cold');
    assert.match(lines.join('\n'), /install\s+cnikit-client: copy /);
    const again = install({ source: src, target: dst, dryRun: false, ...quiet });
    assert.ok(
      again.every((s) => s.action === 'unchanged'),
      JSON.stringify(again),
    );
  });

  test('second install changes nothing', () => {
    const src = fakeSource();
    const dst = target();
    install({ source: src, target: dst, dryRun: false, ...quiet });
    const ino = statSync(join(dst, 'cnikit')).ino;
    const steps = install({ source: src, target: dst, dryRun: false, ...quiet });
    assert.ok(steps.every((s) => s.action === 'unchanged'));
    assert.equal(statSync(join(dst, 'cnikit')).ino, ino);
  });

  test('upgrade replaces the file and relinks; unrelated files (incl. other Go plugins) stay', () => {
    const dst = target();
    mkdirSync(dst);
    writeFileSync(join(dst, 'bridge'), 'go-bridge');
    writeFileSync(join(dst, 'portmap'), 'go-portmap');
    writeFileSync(join(dst, 'README'), 'keep me');
    symlinkSync('/nonexistent', join(dst, 'dangling'));
    install({ source: fakeSource('v1'), target: dst, dryRun: false, ...quiet });
    const steps = install({ source: fakeSource('v2'), target: dst, dryRun: false, ...quiet });
    assert.deepEqual(
      steps.map((s) => s.action),
      ['replace', 'relink', 'relink', 'relink'],
    );
    assert.equal(readFileSync(join(dst, 'bridge'), 'utf8'), 'v2');
    assert.equal(readFileSync(join(dst, 'portmap'), 'utf8'), 'go-portmap');
    assert.equal(readFileSync(join(dst, 'README'), 'utf8'), 'keep me');
    assert.ok(readdirSync(dst).includes('dangling'));
    assert.equal(statSync(join(dst, 'bridge')).ino, statSync(join(dst, 'cnikit')).ino);
    assert.ok(!readdirSync(dst).some((f) => f.startsWith('.cnikit-tmp-')), 'no temp files left');
  });

  test('--dry-run prints the plan and changes nothing', () => {
    const dst = target();
    mkdirSync(dst);
    writeFileSync(join(dst, 'bridge'), 'go-bridge');
    writeFileSync(join(dst, 'other'), 'x');
    const lines: string[] = [];
    install({ source: fakeSource(), target: dst, dryRun: true, out: (l) => lines.push(l) });
    assert.deepEqual(readdirSync(dst).sort(), ['bridge', 'other']);
    assert.equal(readFileSync(join(dst, 'bridge'), 'utf8'), 'go-bridge');
    const text = lines.join('\n');
    assert.match(text, /would install/);
    assert.match(text, /install\s+cnikit/);
    assert.match(text, /relink\s+bridge: replace existing file of 9 bytes/);
    assert.match(text, /link\s+loopback/);
    assert.match(text, /1 other file\(s\) left untouched: other/);
    const dst2 = target();
    install({ source: fakeSource(), target: dst2, dryRun: true, ...quiet });
    assert.throws(() => statSync(dst2), /ENOENT/, 'dry run does not create the directory');
  });

  test('missing target directory is created', () => {
    const dst = join(target(), 'opt', 'cni', 'bin');
    assert.ok(plan(fakeSource(), dst).createDir);
    install({ source: fakeSource(), target: dst, dryRun: false, ...quiet });
    assert.ok(statSync(join(dst, 'cnikit')).isFile());
  });

  test('unwritable target is refused with a clear message (non-root via setpriv)', () => {
    const dst = target();
    mkdirSync(dst);
    chmodSync(dst, 0o555);
    chmodSync(base, 0o755);
    const src = fakeSource();
    const r = spawnSync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--import',
        'tsx',
        join(import.meta.dirname, 'install.ts'),
        '--source',
        src,
        '--target',
        dst,
      ],
      { encoding: 'utf8', cwd: join(import.meta.dirname, '..') },
    );
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /cannot install into .*: it is not writable by uid 65534 \(EACCES/);
    assert.deepEqual(readdirSync(dst), []);
  });

  test('a target that is a file is refused', () => {
    const f = join(base, `file-${n++}`);
    writeFileSync(f, 'x');
    assert.throws(
      () => install({ source: fakeSource(), target: join(f, 'bin'), dryRun: false, ...quiet }),
      /is not a directory/,
    );
  });

  test('missing build output is a clear error', () => {
    assert.throws(
      () => install({ source: join(base, 'nothing'), target: target(), dryRun: false, ...quiet }),
      /run `npm run build` first/,
    );
  });

  test('copyAtomic / linkAtomic replace in place and leave no temp files', () => {
    const dir = join(base, `atomic-${n++}`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'a'), 'new');
    writeFileSync(join(dir, 'b'), 'old');
    copyAtomic(join(dir, 'a'), join(dir, 'b'));
    assert.equal(readFileSync(join(dir, 'b'), 'utf8'), 'new');
    linkAtomic(join(dir, 'a'), join(dir, 'c'));
    linkAtomic(join(dir, 'a'), join(dir, 'b'));
    assert.equal(statSync(join(dir, 'b')).ino, statSync(join(dir, 'a')).ino);
    assert.deepEqual(readdirSync(dir).sort(), ['a', 'b', 'c']);
  });

  test('--backend installs dist-bin/<backend>/cnikit with the same plugin names', () => {
    const src = fakeSource('default-bin');
    mkdirSync(join(src, 'sea'), { recursive: true });
    writeFileSync(join(src, 'sea', 'cnikit'), 'sea-bin', { mode: 0o755 });
    const dst = target();
    install({ source: src, target: dst, dryRun: false, backend: 'sea', ...quiet });
    assert.equal(readFileSync(join(dst, 'loopback'), 'utf8'), 'sea-bin');
    assert.deepEqual(readdirSync(dst).sort(), ['bridge', 'cnikit', 'host-local', 'loopback']);
    assert.throws(
      () => install({ source: src, target: target(), dryRun: false, backend: 'bun', ...quiet }),
      /bun\/cnikit not found/,
    );
    assert.throws(() => parseArgs(['--backend', 'deno']), /--backend must be bun or sea/);
    const o = parseArgs(['--backend=sea']);
    assert.ok(o !== 'help' && o.backend === 'sea');
  });

  test('argument parsing', () => {
    const o = parseArgs(['--dry-run', '--target', '/x', '--source=/y']);
    assert.ok(o !== 'help');
    assert.equal(o.dryRun, true);
    assert.equal(o.target, '/x');
    assert.equal(o.source, '/y');
    assert.equal(parseArgs(['-h']), 'help');
    assert.throws(() => parseArgs(['--bogus']), /unknown argument "--bogus"/);
    assert.throws(() => parseArgs(['--target']), /--target needs a value/);
  });

  test('a printed command line quotes the words a shell would split or expand', () => {
    assert.equal(shellWord('/opt/cni/bin'), '/opt/cni/bin');
    assert.equal(shellWord('--target=/a/b'), '--target=/a/b');
    assert.equal(shellWord('/tmp/my dir'), "'/tmp/my dir'");
    assert.equal(shellWord("it's"), "'it'\\''s'");
    assert.equal(shellWord('$HOME'), "'$HOME'");
  });

  test('the scripts/install wrapper runs from any directory', () => {
    const r = spawnSync(join(import.meta.dirname, 'install'), ['--help'], { encoding: 'utf8', cwd: '/' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /usage: scripts\/install/);
  });
});

describe('scripts/install without --warm/--cold: warm by default where systemd runs the host', () => {
  /** A fake dist-bin with the warm client: cnikit + links, warm/cnikit-client + links. */
  function warmSource(): string {
    const src = fakeSource('cold-binary');
    mkdirSync(join(src, 'warm'));
    writeFileSync(join(src, 'warm', 'cnikit-client'), 'client-binary', { mode: 0o755 });
    for (const name of ['bridge', 'host-local', 'loopback'])
      linkSync(join(src, 'warm', 'cnikit-client'), join(src, 'warm', name));
    return src;
  }
  /** A root prefix; `systemd`: with the directory systemd creates at boot (run/systemd/system). */
  function root(systemd: boolean): string {
    const r = join(base, `root-${n++}`);
    mkdirSync(r);
    if (systemd) mkdirSync(join(r, 'run', 'systemd', 'system'), { recursive: true });
    return r;
  }
  const run = (args: string[]) => {
    const r = spawnSync(join(import.meta.dirname, 'install'), args, { encoding: 'utf8' });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    return r.stdout;
  };
  const ino = (p: string) => statSync(p).ino;

  test('systemd runs: the plugin names link to the warm client and the socket/service units are written', () => {
    const src = warmSource();
    const r = root(true);
    const out = run(['--root', r, '--source', src]);
    const bin = join(r, 'opt', 'cni', 'bin');
    for (const name of ['bridge', 'host-local', 'loopback'])
      assert.equal(ino(join(bin, name)), ino(join(bin, 'cnikit-client')), `${name} → cnikit-client`);
    assert.equal(readFileSync(join(bin, 'cnikit'), 'utf8'), 'cold-binary');
    const units = join(r, 'etc', 'systemd', 'system');
    assert.deepEqual(readdirSync(units).sort(), ['cnikit.service', 'cnikit.socket', 'sockets.target.wants']);
    // enabled as `systemctl enable` does it (the link names the unit as the booted host sees it): the host booting
    // from the prefix listens on the socket from its first boot
    assert.deepEqual(readdirSync(join(units, 'sockets.target.wants')), ['cnikit.socket']);
    assert.equal(
      readlinkSync(join(units, 'sockets.target.wants', 'cnikit.socket')),
      '/etc/systemd/system/cnikit.socket',
    );
    assert.match(out, /cnikit\.socket is enabled/);
    // the units name the executable as the booted host sees it, without the prefix
    assert.match(
      readFileSync(join(units, 'cnikit.service'), 'utf8'),
      /^ExecStart=\/opt\/cni\/bin\/cnikit serve --socket \/run\/cnikit\/cnikit.sock /m,
    );
    assert.match(
      readFileSync(join(units, 'cnikit.socket'), 'utf8'),
      /^ListenStream=\/run\/cnikit\/cnikit.sock$/m,
    );
    // under a root prefix systemctl is never run
    assert.doesNotMatch(out, /^systemctl /m);

    // a second install is idempotent: every file, unit and link unchanged
    const again = run(['--root', r, '--source', src]);
    assert.doesNotMatch(again, /^ {2}(write|link|unit|enable|remove) /m);
    assert.equal(again.match(/^ {2}unchanged /gm)?.length, 2 + 4 + 2 + 1, again);

    // --cold switches back and removes what the warm install wrote and enabled
    const cold = run(['--cold', '--source', src, '--target', bin, '--systemd-dir', units]);
    assert.match(cold, /units and links of warm mode are removed/);
    for (const name of ['bridge', 'host-local', 'loopback'])
      assert.equal(ino(join(bin, name)), ino(join(bin, 'cnikit')), `${name} → cnikit`);
    assert.deepEqual(readdirSync(units), ['sockets.target.wants']);
    assert.deepEqual(readdirSync(join(units, 'sockets.target.wants')), []);

    // --no-warm after a warm install: cold, and it says how the warm install's units go
    run(['--root', r, '--source', src]);
    assert.match(
      run(['--root', r, '--no-warm', '--source', src]),
      /the units of an earlier warm install stay in .*: scripts\/install --cold removes them/,
    );
    assert.equal(ino(join(bin, 'bridge')), ino(join(bin, 'cnikit')));
  });

  test('no systemd: the cold install, no units; --no-socket and a scratch --target stay cold on a systemd host', () => {
    const src = warmSource();
    const plain = root(false);
    assert.match(run(['--root', plain, '--source', src]), /systemd does not run .*: cold mode/);
    const bin = join(plain, 'opt', 'cni', 'bin');
    for (const name of ['bridge', 'host-local', 'loopback'])
      assert.equal(ino(join(bin, name)), ino(join(bin, 'cnikit')), `${name} → cnikit`);
    assert.deepEqual(readdirSync(plain).sort(), ['opt']);

    const opted = root(true);
    assert.match(run(['--root', opted, '--no-socket', '--source', src]), /--no-socket\/--no-warm: cold mode/);
    const ob = join(opted, 'opt', 'cni', 'bin');
    assert.equal(ino(join(ob, 'bridge')), ino(join(ob, 'cnikit')));
    assert.deepEqual(readdirSync(opted).sort(), ['opt', 'run']);
    const noWarm = root(true);
    assert.match(run(['--root', noWarm, '--no-warm', '--source', src]), /--no-socket\/--no-warm: cold mode/);
    const nb = join(noWarm, 'opt', 'cni', 'bin');
    for (const name of ['bridge', 'host-local', 'loopback'])
      assert.equal(ino(join(nb, name)), ino(join(nb, 'cnikit')), `${name} → cnikit`);
    assert.deepEqual(
      readdirSync(noWarm).sort(),
      ['opt', 'run'],
      'no etc/systemd: nothing written or enabled',
    );

    const scratch = target();
    assert.match(run(['--root', root(true), '--target', scratch, '--source', src]), /is not .*: cold mode/);
    assert.equal(ino(join(scratch, 'bridge')), ino(join(scratch, 'cnikit')));
  });

  test('--dry-run on a systemd host prints the warm plan and writes nothing', () => {
    const r = root(true);
    const out = run(['--root', r, '--dry-run', '--source', warmSource()]);
    assert.match(out, /would switch .*opt\/cni\/bin to warm mode/);
    assert.match(out, /cnikit\.socket: write unit/);
    assert.deepEqual(readdirSync(r), ['run']);
  });
});
