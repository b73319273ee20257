// scripts/install --warm / --cold against temporary directories only.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
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
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  installMode,
  ModeInstallError,
  type ModeInstallOptions,
  parseModeArgs,
  warmPlugins,
} from './install.ts';
import { isWarmClient } from './serve.ts';

const base = mkdtempSync(join(tmpdir(), 'cnikit-warm-install-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;
const NAMES = ['bridge', 'host-local', 'loopback'];

/** A fake dist-bin: cnikit + links, cnitool, warm/cnikit-client + links, warm/cnikit. */
function fakeDist(cold = 'cold-v1', client = 'client-v1'): string {
  const dir = join(base, `dist-${n++}`);
  mkdirSync(join(dir, 'warm'), { recursive: true });
  writeFileSync(join(dir, 'cnikit'), cold, { mode: 0o755 });
  for (const name of [...NAMES, 'cnitool']) linkSync(join(dir, 'cnikit'), join(dir, name));
  writeFileSync(join(dir, 'warm', 'cnikit-client'), client, { mode: 0o755 });
  for (const name of NAMES) linkSync(join(dir, 'warm', 'cnikit-client'), join(dir, 'warm', name));
  linkSync(join(dir, 'cnikit'), join(dir, 'warm', 'cnikit'));
  return dir;
}

function opts(
  source: string,
  mode: 'warm' | 'cold',
  extra: Partial<ModeInstallOptions> = {},
): ModeInstallOptions & { systemdDir: string } {
  const target = extra.target ?? join(base, `dst-${n}`);
  return {
    mode,
    source,
    target,
    systemdDir: join(base, `units-${n++}`),
    socket: '/run/cnikit/cnikit.sock',
    dryRun: false,
    out: () => {},
    ...extra,
  } as ModeInstallOptions & { systemdDir: string };
}

const ino = (p: string) => statSync(p).ino;

describe('install --warm / --cold', () => {
  test('warmPlugins lists the links of the client', () => {
    assert.deepEqual(warmPlugins(fakeDist()), NAMES);
    assert.throws(() => warmPlugins(join(base, 'nope')), ModeInstallError);
  });

  test('--warm: cold executable, client, plugin names link the client, cnitool stays cold, units written', () => {
    const o = opts(fakeDist(), 'warm');
    writeFileSync(join(base, 'other-file'), 'x');
    mkdirSync(o.target, { recursive: true });
    writeFileSync(join(o.target, 'macvlan'), 'go-macvlan');
    installMode(o);
    assert.deepEqual(readdirSync(o.target).sort(), [
      'bridge',
      'cnikit',
      'cnikit-client',
      'cnitool',
      'host-local',
      'loopback',
      'macvlan',
    ]);
    for (const name of NAMES) {
      assert.equal(ino(join(o.target, name)), ino(join(o.target, 'cnikit-client')), name);
      assert.ok(isWarmClient(join(o.target, name)));
    }
    assert.equal(ino(join(o.target, 'cnitool')), ino(join(o.target, 'cnikit')));
    assert.ok(!isWarmClient(join(o.target, 'cnitool')));
    assert.equal(readFileSync(join(o.target, 'macvlan'), 'utf8'), 'go-macvlan', 'other files untouched');
    assert.equal(statSync(join(o.target, 'cnikit-client')).mode & 0o777, 0o755);
    const svc = readFileSync(join(o.systemdDir, 'cnikit.service'), 'utf8');
    assert.match(
      svc,
      new RegExp(`ExecStart=${join(o.target, 'cnikit')} serve --socket /run/cnikit/cnikit.sock`),
    );
    assert.match(
      readFileSync(join(o.systemdDir, 'cnikit.socket'), 'utf8'),
      /ListenStream=\/run\/cnikit\/cnikit.sock/,
    );
    assert.equal(statSync(join(o.systemdDir, 'cnikit.socket')).mode & 0o777, 0o644);
    assert.deepEqual(
      readdirSync(o.target).filter((f) => f.startsWith('.cnikit-tmp')),
      [],
      'no temporary files left',
    );
  });

  test('--warm twice changes nothing; --cold switches back: the names link to cnikit, the client stays', () => {
    const src = fakeDist();
    const o = opts(src, 'warm');
    installMode(o);
    const before = ino(join(o.target, 'bridge'));
    const again = installMode({ ...o });
    assert.ok(
      again.every((s) => s.action === 'unchanged'),
      JSON.stringify(again),
    );
    assert.equal(ino(join(o.target, 'bridge')), before);
    const lines: string[] = [];
    installMode({ ...o, mode: 'cold', out: (l) => lines.push(l) });
    for (const name of [...NAMES, 'cnitool'])
      assert.equal(ino(join(o.target, name)), ino(join(o.target, 'cnikit')), name);
    // every file of the build stays installed: the installed cnikit can switch to warm mode again by itself
    assert.equal(readFileSync(join(o.target, 'cnikit-client'), 'utf8'), 'client-v1');
    assert.equal(readFileSync(join(o.target, 'bridge'), 'utf8'), 'cold-v1');
    // what the warm install wrote in the systemd directory goes with the switch back
    assert.match(
      lines.join('\n'),
      /remove +\S+\/cnikit\.socket: remove the unit written by the warm install/,
    );
    assert.deepEqual(readdirSync(o.systemdDir), [], 'both units removed');
  });

  test('enable: the sockets.target.wants link systemctl enable writes; idempotent; --cold removes it and our units only', () => {
    const src = fakeDist();
    const o = opts(src, 'warm', { enable: true });
    const lines: string[] = [];
    installMode({ ...o, out: (l) => lines.push(l) });
    const wants = join(o.systemdDir, 'sockets.target.wants', 'cnikit.socket');
    assert.equal(readlinkSync(wants), '/etc/systemd/system/cnikit.socket');
    assert.match(lines.join('\n'), /enable +\S+sockets\.target\.wants\/cnikit\.socket: symlink to/);
    assert.match(lines.join('\n'), /cnikit\.socket is enabled/);
    const again = installMode({ ...o });
    assert.ok(
      again.every((s) => s.action === 'unchanged'),
      JSON.stringify(again),
    );
    assert.equal(readlinkSync(wants), '/etc/systemd/system/cnikit.socket');
    // an operator's own service unit (no "# written by cnikit" line) and a link of theirs to it stay
    writeFileSync(join(o.systemdDir, 'cnikit.service'), '[Service]\nExecStart=/usr/local/bin/mine\n');
    mkdirSync(join(o.systemdDir, 'multi-user.target.wants'));
    symlinkSync(
      '/etc/systemd/system/cnikit.service',
      join(o.systemdDir, 'multi-user.target.wants', 'cnikit.service'),
    );
    const cold = installMode({ ...o, mode: 'cold', enable: false });
    assert.equal(existsSync(wants), false, 'the socket link is gone');
    assert.equal(existsSync(join(o.systemdDir, 'cnikit.socket')), false, 'our socket unit is gone');
    assert.equal(
      readFileSync(join(o.systemdDir, 'cnikit.service'), 'utf8'),
      '[Service]\nExecStart=/usr/local/bin/mine\n',
    );
    assert.ok(
      cold.some(
        (s) =>
          s.action === 'unchanged' &&
          s.name.endsWith('/cnikit.service') &&
          /not written by cnikit/.test(s.detail),
      ),
      JSON.stringify(cold),
    );
    assert.deepEqual(
      readdirSync(join(o.systemdDir, 'multi-user.target.wants')),
      ['cnikit.service'],
      'their link stays',
    );
    for (const name of NAMES) assert.equal(ino(join(o.target, name)), ino(join(o.target, 'cnikit')), name);
  });

  test('--cold on a fresh target installs the client too; the plugin names link to cnikit', () => {
    const o = opts(fakeDist('cold-v1', 'client-v1'), 'cold');
    installMode(o);
    assert.deepEqual(readdirSync(o.target).sort(), [...NAMES, 'cnikit', 'cnikit-client', 'cnitool'].sort());
    assert.equal(readFileSync(join(o.target, 'cnikit-client'), 'utf8'), 'client-v1');
    assert.equal(statSync(join(o.target, 'cnikit-client')).mode & 0o777, 0o755);
    for (const name of [...NAMES, 'cnitool'])
      assert.equal(ino(join(o.target, name)), ino(join(o.target, 'cnikit')), name);
  });

  test('the printed hints carry the options given: --socket in the check, the whole command to run again', () => {
    const src = fakeDist();
    const target = join(base, `hint-${n++}`);
    const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
    const sock = join(base, 'run-x', 'warm.sock');
    const r = spawnSync(
      join(root, 'scripts', 'install'),
      ['--warm', '--source', src, '--target', target, '--socket', sock],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.ok(
      r.stdout.includes(`check it with: ${join(target, 'cnikit')} serve --check --socket ${sock})`),
      r.stdout,
    );
    assert.ok(
      r.stdout.includes(
        `run again with --systemd-dir DIR to install them: scripts/install --warm --source ${src} --target ${target} --socket ${sock} --systemd-dir DIR`,
      ),
      r.stdout,
    );
    // with the units written, the check hint still names the socket the units listen on
    const units = join(base, `hint-units-${n++}`);
    const lines: string[] = [];
    installMode({
      ...opts(src, 'warm'),
      target,
      systemdDir: units,
      socket: '/run/x/y.sock',
      out: (l) => lines.push(l),
    });
    assert.match(lines.join('\n'), /serve --check --socket \/run\/x\/y\.sock\)/);
    assert.match(readFileSync(join(units, 'cnikit.socket'), 'utf8'), /ListenStream=\/run\/x\/y\.sock/);
    // the default socket needs no option
    const plain: string[] = [];
    installMode({ ...opts(src, 'warm'), out: (l) => plain.push(l) });
    assert.match(plain.join('\n'), /serve --check\)/);
  });

  test('an upgrade replaces both executables and relinks every name', () => {
    const o = opts(fakeDist('cold-v1', 'client-v1'), 'warm');
    installMode(o);
    installMode({ ...o, source: fakeDist('cold-v2', 'client-v2') });
    assert.equal(readFileSync(join(o.target, 'bridge'), 'utf8'), 'client-v2');
    assert.equal(readFileSync(join(o.target, 'cnitool'), 'utf8'), 'cold-v2');
    assert.equal(ino(join(o.target, 'loopback')), ino(join(o.target, 'cnikit-client')));
  });

  test('--dry-run changes nothing', () => {
    const o = opts(fakeDist(), 'warm', { dryRun: true });
    const lines: string[] = [];
    const steps = installMode({ ...o, out: (l) => lines.push(l) });
    assert.ok(!existsSync(o.target));
    assert.ok(!existsSync(o.systemdDir));
    assert.ok(steps.some((s) => s.action === 'write'));
    assert.match(lines[0] ?? '', /would switch/);
  });

  test('argument errors', () => {
    const d = { source: '/x', out: () => {} };
    assert.throws(() => parseModeArgs(['--warm', '--cold'], d), /exactly one of --warm and --cold/);
    assert.throws(() => parseModeArgs(['--warm', '--backend', 'sea'], d), /unknown argument "--backend"/);
    assert.throws(() => parseModeArgs(['--warm', '--target'], d), /--target needs a value/);
    const o = parseModeArgs(['--cold', '--target=/t', '--systemd-dir', '/u', '--socket', '/s.sock'], d);
    assert.deepEqual([o.mode, o.target, o.systemdDir, o.socket], ['cold', '/t', '/u', '/s.sock']);
    assert.throws(() => installMode(opts(join(base, 'missing'), 'warm')), /run `npm run build` first/);
  });

  test('a scratch --target never touches /etc: units only with --systemd-dir, every planned file named in full', () => {
    const d = { source: '/x', out: () => {} };
    assert.equal(parseModeArgs(['--warm', '--target', join(base, 'scratch')], d).systemdDir, undefined);
    assert.equal(parseModeArgs(['--warm'], d).systemdDir, '/etc/systemd/system');
    assert.equal(parseModeArgs(['--warm', '--target=/opt/cni/bin/'], d).systemdDir, '/etc/systemd/system');
    assert.equal(parseModeArgs(['--warm', '--target', '/t', '--systemd-dir', '/u'], d).systemdDir, '/u');
    const src = fakeDist();
    const target = join(base, `scratch-${n++}`);
    const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
    const run = (...extra: string[]) =>
      spawnSync(join(root, 'scripts', 'install'), ['--warm', '--source', src, '--target', target, ...extra], {
        encoding: 'utf8',
      });
    const dry = run('--dry-run');
    assert.equal(dry.status, 0, dry.stderr);
    assert.doesNotMatch(dry.stdout, /\/etc\//);
    const plan = dry.stdout.split('\n').filter((l) => l.startsWith('  '));
    assert.equal(plan.length, NAMES.length + 5, dry.stdout); // cnikit, client, links, cnitool, two units
    for (const l of plan) {
      const [action, file] = l.trim().split(/\s+/);
      if (action === 'skip')
        assert.match(l, /cnikit\.(socket|service): systemd unit not written .*--systemd-dir/);
      else assert.ok(file?.startsWith(`${target}/`), `${l} names its destination`);
    }
    assert.ok(!existsSync(target));
    const real = run();
    assert.equal(real.status, 0, real.stderr);
    assert.match(real.stdout, /units were not written: run again with --systemd-dir DIR/);
    assert.deepEqual(readdirSync(target).sort(), [...NAMES, 'cnikit', 'cnikit-client', 'cnitool'].sort());
    // with --systemd-dir the dry run names each unit's path, and says when an existing unit would be replaced
    const units = join(base, `scratch-units-${n++}`);
    mkdirSync(units);
    writeFileSync(join(units, 'cnikit.service'), 'mine');
    const withUnits = run('--systemd-dir', units, '--dry-run');
    assert.match(withUnits.stdout, new RegExp(`unit +${units}/cnikit\\.service: replace the existing unit`));
    assert.match(withUnits.stdout, new RegExp(`unit +${units}/cnikit\\.socket: write unit`));
    assert.equal(readFileSync(join(units, 'cnikit.service'), 'utf8'), 'mine');
  });

  test('scripts/install --warm runs end to end (temporary target, temporary systemd dir)', () => {
    const src = fakeDist();
    const target = join(base, `cli-${n++}`);
    const units = join(base, `cli-units-${n++}`);
    const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
    const r = spawnSync(
      join(root, 'scripts', 'install'),
      ['--warm', '--source', src, '--target', target, '--systemd-dir', units],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /systemctl daemon-reload && systemctl enable --now cnikit.socket/);
    assert.equal(ino(join(target, 'bridge')), ino(join(target, 'cnikit-client')));
    const bad = spawnSync(join(root, 'scripts', 'install'), ['--warm', '--cold'], { encoding: 'utf8' });
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /exactly one of --warm and --cold/);
  });
});
