// cnikit-build's command line and the build steps that need no compiler: usage errors, the generated entry, plugin
// module loading, tool lookup. (Building real executables: test-netns/packages.test.ts and `npm run build`.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ENTRY_MODULE, entrySource, FIRST_MODULE, findBun, loadPlugins } from './build.ts';
import { cli } from './cli.ts';
import { selectPlugin } from './runtime/multicall.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-build-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await cli(args, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

describe('cnikit-build command line', () => {
  test('--help prints the usage on stdout', async () => {
    const r = await runCli(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^usage: cnikit-build PLUGIN\.ts\.\.\. \[--out FILE\|DIR\]/);
  });

  const bad: Array<[string, string[], RegExp]> = [
    ['no plugin module', ['--out', join(dir, 'x')], /no plugin module given/],
    ['several modules, no --out', [join(dir, 'p.ts'), join(dir, 'p.ts')], /--out is required with several/],
    [
      'unknown back-end',
      [join(dir, 'p.ts'), '--out', join(dir, 'x'), '--backend', 'pkg'],
      /unknown back-end "pkg"/,
    ],
    ['missing module', [join(dir, 'nope.ts'), '--out', join(dir, 'x')], /no such file: .*nope\.ts/],
    ['unknown option', ['--frobnicate'], /Unknown option '--frobnicate'/],
  ];
  for (const [what, args, msg] of bad) {
    test(`${what}: exit 2, the reason and the usage on stderr`, async () => {
      writeFileSync(join(dir, 'p.ts'), 'export const plugin = { name: "p" };\n');
      const r = await runCli(args);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, msg);
      assert.match(r.stderr, /usage: cnikit-build/);
    });
  }

  test('a module without a plugin export: exit 1 naming the module and what it must export', async () => {
    const file = join(dir, 'noplugin.ts');
    writeFileSync(file, 'export const something = 1;\n');
    const r = await runCli([
      file,
      '--out',
      join(dir, 'out', 'x'),
      '--work-dir',
      join(dir, 'work'),
      '--quiet',
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /noplugin\.ts must export `plugin` \(or a default export\)/);
  });
});

describe('a real build from the command line', () => {
  test('one module without --out: ./<module name>; --quiet prints nothing on success', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'cnikit-build-cwd-'));
    const before = process.cwd();
    try {
      writeFileSync(
        join(cwd, 'hello.ts'),
        "export const plugin = { name: 'hello', versions: ['1.0.0'], add: () => ({ cniVersion: '1.0.0' }) };\n",
      );
      process.chdir(cwd);
      const r = await runCli(['hello.ts', '--quiet', '--work-dir', join(cwd, 'work')]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, '', '--quiet: nothing on stdout');
      assert.equal(r.stderr, '', '--quiet: nothing on stderr');
      const v = spawnSync(join(cwd, 'hello'), [], {
        input: '{"cniVersion":"1.0.0"}',
        env: { CNI_COMMAND: 'VERSION' },
        encoding: 'utf8',
      });
      assert.equal(v.status, 0, v.stderr);
      assert.deepEqual(JSON.parse(v.stdout).supportedVersions, ['1.0.0']);
    } finally {
      process.chdir(before);
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

describe('build steps', () => {
  test('a module that runs itself at import (top-level await runPlugin): exit 1 with what to change', async () => {
    const file = join(dir, 'selfrun.ts');
    writeFileSync(
      file,
      "export const plugin = { name: 'selfrun' };\nawait Promise.resolve(plugin); // e.g. runPlugin(plugin)\n",
    );
    const r = await runCli([
      file,
      '--out',
      join(dir, 'out', 'selfrun'),
      '--work-dir',
      join(dir, 'work'),
      '--quiet',
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /must not run itself at import time \(no top-level `await runPlugin\(plugin\)`\)/);
  });

  test('loadPlugins evaluates TypeScript modules under plain node and records name, about, versions', async () => {
    const file = join(dir, 'meta.ts');
    writeFileSync(
      file,
      "const versions: string[] = ['1.0.0', '1.1.0'];\nexport default { name: 'meta', about: 'meta plugin', versions };\n",
    );
    const [p] = await loadPlugins([file], { workDir: join(dir, 'work') });
    assert.deepEqual(p, {
      entry: file,
      name: 'meta',
      meta: { about: 'meta plugin', versions: ['1.0.0', '1.1.0'] },
    });
  });

  test('entrySource: only data for the real entry: lazy plugins with their metadata, the addon digest, optional tool/serve', () => {
    const plugins = [{ name: 'a', entry: '/x/a.ts' }];
    const bun = entrySource(plugins, {
      backend: 'bun',
      addonSha: 'c'.repeat(64),
      meta: { a: { about: 'A' } },
    });
    // the first module (the table's VERSION answer) and the real entry, which loads the rest only when it is called
    assert.deepEqual(
      [...bun.matchAll(/^import .*$/gm)].map((m) => m[0]),
      [
        `import { answerOrStart } from ${JSON.stringify(FIRST_MODULE)};`,
        `import { pick, start } from ${JSON.stringify(ENTRY_MODULE)};`,
      ],
    );
    assert.ok(bun.includes(`answerOrStart("\\na\\t*", () => {`), 'the table: a constant string');
    assert.match(bun, /load: \(\) => pick\(require\("\/x\/a\.ts"\)\), meta: \{"about":"A"\}/);
    assert.match(bun, /^start\(\{\n {2}backend: "bun",\n {2}addonSha: "c{64}",\n {2}plugins: \[\n/m);
    assert.doesNotMatch(bun, /tool:|serve:|snapshot:|\n {2}name:/);
    assert.doesNotMatch(bun, /main\(|bunSource|seaSource|catch/, 'no logic in the generated module');
    const sea = entrySource(plugins, {
      backend: 'sea',
      addonSha: 'd'.repeat(64),
      extras: { tool: '@cnikit/libcni', serve: '@cnikit/warm/serve' },
    });
    assert.match(sea, /backend: "sea",\n {2}addonSha: "d{64}",/);
    assert.match(sea, /tool: \(\) => import\("@cnikit\/libcni"\)\.then\(\(m\) => m\.runCnitool\)/);
    assert.match(sea, /serve: \(\) => import\("@cnikit\/warm\/serve"\)\.then\(\(m\) => m\.serveMain\)/);
  });

  test('a multicall executable named other than cnikit: its own name selects nothing, a plugin name selects it', () => {
    const plugins = [{ name: 'a' }, { name: 'b' }];
    assert.equal(
      entrySource([], { backend: 'bun', addonSha: 'e'.repeat(64), name: 'mycni' }).includes('name: "mycni"'),
      true,
    );
    const own = selectPlugin(plugins, '/opt/cni/bin/mycni', '/opt/cni/bin/mycni', ['--list'], 'mycni');
    assert.deepEqual([own.plugin, own.name], [undefined, '']);
    assert.equal(
      selectPlugin(plugins, '/opt/cni/bin/b', '/opt/cni/bin/mycni', [], 'mycni').plugin?.name,
      'b',
    );
    const other = selectPlugin(plugins, '/opt/cni/bin/zz', '/opt/cni/bin/mycni', ['--list'], 'mycni');
    assert.equal(other.name, 'zz'); // an unknown name is reported as such
  });

  test('findBun: CNIKIT_BUN wins; otherwise a real bun executable is found', () => {
    assert.equal(findBun({ CNIKIT_BUN: '/opt/bun/bin/bun' }), '/opt/bun/bin/bun');
    const bun = findBun({});
    assert.match(bun, /bun(\.exe)?$/);
    assert.equal(spawnSync(bun, ['--version'], { encoding: 'utf8' }).status, 0, `${bun} --version`);
  });
});
