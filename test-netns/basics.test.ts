/**
 * Black-box basics on the compiled executables: VERSION and bare invocation of every plugin name, the multicall
 * forms, and spec error objects for malformed invocations (compared with the Go reference where installed).
 * The default back-end gets the full set; the other back-end a smoke set.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { invokeInProcess, type Plugin } from '@cnikit/skel';
import {
  type CniCallOptions,
  type CniCommand,
  cniCall,
  cniEnv,
  expectCniError,
  scaled,
} from '@cnikit/testing';
import {
  type Backend,
  DIST,
  distPlugins,
  ensureBuilt,
  ensureLinks,
  GO_CNI,
  goAvailable,
  runtime,
} from './dist.ts';

const info = ensureBuilt();
const other: Backend = info.default === 'bun' ? 'sea' : 'bun';
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const ALL = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

function run(bin: string, env: Record<string, string>, stdin = '', args: string[] = [], argv0?: string) {
  const r = spawnSync(bin, args, {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env },
    input: stdin,
    encoding: 'utf8',
    timeout: scaled(30_000),
    ...(argv0 ? { argv0 } : {}),
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Spec error object printed on stdout, exit 1 (expectCniError: only code/msg/details, no stack trace). */
function assertCniError(
  r: { status: number | null; stdout: string; stderr?: string },
  code: number,
  msg?: string | RegExp,
) {
  assert.equal(r.status, 1, `exit status (stdout: ${r.stdout})`);
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return expectCniError({ code: r.status, stdout: r.stdout, stderr: r.stderr ?? '', json }, code, msg);
}

describe(`compiled plugins (${info.default}, default back-end)`, () => {
  const plugins = distPlugins();

  test('dist-bin has cnikit + one hard link per plugin directory, and BUILD-INFO agrees', () => {
    assert.ok(plugins.includes('loopback'));
    assert.deepEqual(plugins, [...info.plugins].sort());
  });

  test('cnikit --version: the build stamp (package version, commit of the tree, dirty flag, commit date)', () => {
    const stamp = info.stamp;
    assert.ok(stamp, 'BUILD-INFO.json records the stamp');
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as {
      version: string;
    };
    assert.equal(stamp.version, pkg.version);
    assert.match(stamp.commit, /^[0-9a-f]{40}$/);
    const r = run(join(DIST, 'cnikit'), {}, '', ['--version']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.equal(lines[0], `cnikit ${pkg.version}`);
    assert.equal(lines[1], `commit: ${stamp.commit}${stamp.dirty ? ' (modified work tree)' : ''}`);
    assert.equal(lines[2], `build date: ${stamp.date}`);
  });

  for (const name of plugins) {
    test(`${name}: VERSION`, () => {
      const r = run(join(DIST, name), cniEnv('VERSION'));
      assert.equal(r.status, 0, r.stderr);
      const v = JSON.parse(r.stdout) as { cniVersion: string; supportedVersions: string[] };
      assert.equal(v.cniVersion, '1.1.0');
      assert.ok(v.supportedVersions.length > 0);
      for (const s of v.supportedVersions) assert.ok(ALL.includes(s), s);
      // the requested version is echoed (SPEC.md §5 VERSION Success; the Go plugins print their own), with the
      // same supportedVersions (what libcni reads; skel's dispatch.test decodes both forms with libcni's decoder)
      const asked = run(join(DIST, name), cniEnv('VERSION'), '{"cniVersion":"0.2.0"}');
      assert.equal(asked.status, 0, asked.stderr);
      assert.deepEqual(JSON.parse(asked.stdout), {
        cniVersion: '0.2.0',
        supportedVersions: v.supportedVersions,
      });
    });

    test(`${name}: VERSION and about text equal the plugin module's (build-time metadata fast path)`, async () => {
      const { plugin } = (await import(join(DIST, '..', 'plugins', name, 'src', 'index.ts'))) as {
        plugin: Plugin;
      };
      const inProc = await invokeInProcess(plugin, cniEnv('VERSION'), '');
      assert.equal(run(join(DIST, name), cniEnv('VERSION')).stdout, inProc.stdout);
      const bare = await invokeInProcess(plugin, {}, '');
      assert.equal(run(join(DIST, name), {}).stderr, bare.stderr);
    });

    test(`${name}: bare invocation prints the about text on stderr`, () => {
      const r = run(join(DIST, name), {});
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, new RegExp(`CNI ${name} plugin`));
      assert.match(r.stderr, /CNI protocol versions supported: [0-9., ]+/);
    });
  }

  test('loopback VERSION supports every spec version (Go 1.1.1 lists up to 1.0.0)', () => {
    const v = JSON.parse(run(join(DIST, 'loopback'), cniEnv('VERSION')).stdout);
    assert.deepEqual(v.supportedVersions, ALL);
    if (goAvailable()) {
      const go = JSON.parse(run(join(GO_CNI, 'loopback'), cniEnv('VERSION')).stdout);
      for (const s of go.supportedVersions) assert.ok(v.supportedVersions.includes(s), s);
    }
  });

  test('multicall forms: explicit `cnikit <plugin>`, symlink name, unknown names', () => {
    const explicit = run(join(DIST, 'cnikit'), cniEnv('VERSION'), '', ['loopback']);
    assert.equal(explicit.status, 0, explicit.stderr);
    assert.deepEqual(JSON.parse(explicit.stdout).supportedVersions, ALL);
    const link = join(scratch, 'loopback');
    symlinkSync(join(DIST, 'cnikit'), link);
    const viaSymlink = run(link, {});
    assert.equal(viaSymlink.status, 0);
    assert.match(viaSymlink.stderr, /CNI loopback plugin/);
    const bogus = join(scratch, 'portmap-nope');
    symlinkSync(join(DIST, 'cnikit'), bogus);
    const unknown = run(bogus, cniEnv('ADD'));
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /unknown plugin "portmap-nope"/);
    assert.match(unknown.stderr, /plugins: .*loopback/);
    assertCniError(unknown, 999, 'cnikit: unknown plugin "portmap-nope"');
    const none = run(join(DIST, 'cnikit'), {});
    assert.equal(none.status, 1);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /no plugin selected/);
    const list = run(join(DIST, 'cnikit'), {}, '', ['--list']);
    assert.equal(list.status, 0);
    assert.deepEqual(list.stdout.trim().split('\n'), plugins);
  });

  test('scripts/install puts a working plugin set into a target directory (one file + hard links)', () => {
    const target = join(scratch, 'opt-cni-bin');
    const r = spawnSync(join(DIST, '..', 'scripts', 'install'), ['--target', target], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    for (const name of plugins) {
      const v = run(join(target, name), cniEnv('VERSION'));
      assert.equal(v.status, 0, `${name}: ${v.stderr}`);
      assert.equal(statSync(join(target, name)).ino, statSync(join(target, 'cnikit')).ino);
    }
    // cnikit, one link per plugin, and the cnitool command
    assert.equal(statSync(join(target, 'cnikit')).nlink, plugins.length + 2);
    const tool = spawnSync(join(target, 'cnitool'), ['--help'], { encoding: 'utf8' });
    assert.equal(tool.status, 0, tool.stderr);
    assert.match(tool.stdout, /^usage: cnitool /);
    // every file of the build is there: the installed executable can switch a bin directory to warm mode by itself
    const warmDir = join(scratch, 'warm-bin');
    const w = spawnSync(
      join(target, 'cnikit'),
      ['install-cni', '--warm', '--bin-dir', warmDir, '--no-conf'],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(w.status, 0, w.stdout + w.stderr);
    assert.equal(statSync(join(warmDir, 'bridge')).ino, statSync(join(warmDir, 'cnikit-client')).ino);
  });

  test('the embedded native addon is extracted to a private content-addressed file and loads', () => {
    const dir = join(scratch, 'native');
    // CNIKIT_NATIVE_PATH (a development override) is ignored by the compiled binary: it loads its own addon.
    const r = run(
      join(DIST, 'cnikit'),
      { CNIKIT_NATIVE_DIR: dir, CNIKIT_NATIVE_PATH: join(scratch, 'not-an-addon.node') },
      '',
      ['--native-selftest'],
    );
    assert.equal(r.status, 0, r.stderr);
    const { path, tid } = JSON.parse(r.stdout) as { path: string; tid: number };
    assert.match(path, new RegExp(`^${dir}/[0-9a-f]{64}\\.node$`));
    assert.equal(typeof tid, 'number');
  });

  // Malformed invocations: spec error JSON on stdout, exit 1. [call, stdin, expected code, expected msg]
  const base: CniCallOptions & { command?: CniCommand } = {
    containerId: 'c1',
    netns: '/run/netns/none',
    path: '/opt/cni/bin',
  };
  const good = JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'loopback' });
  const cases: Array<[string, CniCallOptions & { command?: CniCommand }, string, number, string | RegExp]> = [
    ['invalid JSON on stdin', base, '{not json', 6, /^error unmarshall network config: /],
    [
      'missing network name',
      base,
      JSON.stringify({ cniVersion: '1.0.0', type: 'loopback' }),
      7,
      'missing network name',
    ],
    [
      'bad network name',
      base,
      JSON.stringify({ cniVersion: '1.0.0', name: 'a b', type: 'loopback' }),
      7,
      'invalid characters found in network name',
    ],
    [
      'unsupported cniVersion',
      base,
      JSON.stringify({ cniVersion: '9.9.9', name: 'n', type: 'loopback' }),
      1,
      'incompatible CNI versions',
    ],
    ['unknown CNI_COMMAND', { ...base, env: { CNI_COMMAND: 'FROB' } }, good, 4, 'unknown CNI_COMMAND: FROB'],
    ['missing CNI_PATH', { ...base, path: '' }, good, 4, 'required env variables [CNI_PATH] missing'],
    [
      'missing CNI_CONTAINERID',
      { ...base, containerId: '' },
      good,
      4,
      'required env variables [CNI_CONTAINERID] missing',
    ],
    ['bad CNI_CONTAINERID', { ...base, containerId: '-x/y' }, good, 4, 'invalid characters in containerID'],
    [
      'interface name too long',
      { ...base, ifName: 'a-very-long-ifname' },
      good,
      4,
      'interface name is too long',
    ],
    [
      'CHECK with a 0.3.1 config',
      { ...base, command: 'CHECK' },
      JSON.stringify({ cniVersion: '0.3.1', name: 'n', type: 'loopback' }),
      1,
      'config version does not allow CHECK',
    ],
    ['ADD into a missing namespace', base, good, 999, /no such file or directory/],
  ];
  for (const [what, { command = 'ADD', ...o }, stdin, code, msg] of cases) {
    test(`malformed: ${what} → code ${code}`, async () => {
      const r = await cniCall({ binary: join(DIST, 'loopback') }, command, stdin, o);
      assert.equal(r.code, 1, `exit status (stdout: ${r.stdout})`);
      const ours = expectCniError(r, code, msg);
      if (goAvailable() && what !== 'bad CNI_CONTAINERID') {
        // The Go reference agrees on the code (and, where Debian 1.1.1 = HEAD, on the message).
        const go = (await cniCall({ binary: join(GO_CNI, 'loopback') }, command, stdin, o)).json as {
          code: number;
          msg: string;
        };
        assert.equal(ours.code, go.code, `Go: ${JSON.stringify(go)}`);
        if (typeof msg === 'string') assert.equal(ours.msg, go.msg);
      }
    });
  }
});

describe(`compiled plugins (${other}, smoke)`, () => {
  const dir = ensureLinks(other, info);
  const rt = runtime(join(scratch, 'cache-smoke'), dir);

  test('VERSION of every plugin name', async () => {
    for (const name of info.plugins) {
      const v = await rt.getVersionInfo(name);
      assert.equal(v.cniVersion, '1.1.0', name);
    }
  });

  test('bare invocation and an error object', async () => {
    const r = run(join(dir, 'loopback'), {});
    assert.equal(r.status, 0);
    assert.match(r.stderr, /CNI loopback plugin/);
    const bad = await cniCall({ binary: join(dir, 'loopback') }, 'ADD', '{not json', {
      containerId: 'c1',
      netns: '/run/netns/none',
      path: '/x',
    });
    assert.equal(bad.code, 1);
    expectCniError(bad, 6);
  });

  test('the embedded native addon loads', () => {
    const r = run(join(dir, 'cnikit'), { CNIKIT_NATIVE_DIR: join(scratch, 'native-other') }, '', [
      '--native-selftest',
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(JSON.parse(r.stdout).path, /[0-9a-f]{64}\.node$/);
  });
});
