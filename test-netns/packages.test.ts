/**
 * The SDK as a plugin author gets it from npm, outside this repository:
 *   1. `npm run build:packages`, `npm pack` of every package and `npm publish --dry-run` (contents, fields, sizes);
 *   2. a fresh project under the system temp directory: the tarballs installed with `--ignore-scripts`, offline and
 *      with an empty npm cache (no registry at all); @cnikit/build's third-party dependencies (esbuild, postject)
 *      are packed from this repository's node_modules and installed the same way, its optional bun is skipped and
 *      the repository's bun is named by CNIKIT_BUN (typescript and @types/node are linked from node_modules too);
 *   3. plain `tsc` (strict, module nodenext) over the README's SDK quick start, packages/skel/examples/*, every
 *      package README's example and the "Write your own plugin" walk-through (docs/sdk.md); plain
 *      `node` (no tsx) runs them: the quick start as a runtime would, the in-process tests with `node --test`;
 *   4. the walk-through's plugin built by `cnikit-build` from the packed @cnikit/build, its VERSION, its sandbox test
 *      (ADD/CHECK/DEL through @cnikit/libcni chained after cnikit's bridge + host-local from dist-bin/, in private
 *      namespaces), its install into a target directory;
 *   5. @cnikit/sys's install script builds the addon from source (node-gyp) when no prebuilt addon is there.
 * Nothing in the repository is changed except the git-ignored packages/*\/dist.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { findBun } from '@cnikit/build';
import { scaled } from '@cnikit/testing';
import { exampleBlock, howtoFiles, ROOT, sdkQuickStart } from '../scripts/readme-snippets.ts';
import { DIST, ensureBuilt } from './dist.ts';

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Run a command without a shell; resolves with its exit status and output (never rejects on a non-zero exit). */
function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env: opts.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: scaled(opts.timeoutMs ?? 120_000),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

function ok(r: Run, what: string): Run {
  assert.equal(r.status, 0, `${what} failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** The environment of a user's shell: no source condition, no tsx, nothing of this repository. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: process.env.HOME ?? '/root',
    npm_config_update_notifier: 'false',
    ...extra,
  };
}

interface Packed {
  name: string;
  version: string;
  size: number;
  unpackedSize: number;
  filename: string;
  files: Array<{ path: string; size: number }>;
}

/** Package directories built by build:packages, with their package names. */
const PACKAGES = readdirSync(join(ROOT, 'packages'))
  .filter((d) => existsSync(join(ROOT, 'packages', d, 'tsconfig.build.json')))
  .sort()
  .map((dir) => ({
    dir,
    name: (JSON.parse(readFileSync(join(ROOT, 'packages', dir, 'package.json'), 'utf8')) as { name: string })
      .name,
  }));
const NAMES = PACKAGES.map((p) => p.name).sort();
const ROOT_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;
const workspaces = PACKAGES.flatMap((p) => ['-w', `packages/${p.dir}`]);
/**
 * Third-party packages of the SDK (@cnikit/build's, and @cnikit/testing's Prometheus parser with its one dependency),
 * packed from this repository's node_modules (the versions npm ci put there).
 */
const THIRD_PARTY = [
  'esbuild',
  '@esbuild/linux-x64',
  'postject',
  'commander',
  'parse-prometheus-text-format',
  'shallow-equal',
];
/** The bun executable of this repository (@cnikit/build's optional dependency is not installed offline). */
const BUN = findBun();
const HOWTO = howtoFiles(readFileSync(join(ROOT, 'docs', 'sdk.md'), 'utf8'));

describe('the SDK from npm tarballs, in a project outside the repository', () => {
  let work = '';
  let app = '';
  let packed: Packed[] = [];
  let t0 = 0;
  const timings: string[] = [];
  const mark = (what: string) => timings.push(`${what} ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'cnikit-packages-'));
    ok(await run(process.execPath, [join(ROOT, 'scripts', 'build-packages.mjs')]), 'npm run build:packages');
    const packs = join(work, 'packs');
    mkdirSync(packs);
    const r = ok(
      await run('npm', ['pack', '--json', '--pack-destination', packs, ...workspaces], { env: userEnv() }),
      'npm pack',
    );
    packed = JSON.parse(r.stdout) as Packed[];
    const third = ok(
      await run(
        'npm',
        [
          'pack',
          '--json',
          '--ignore-scripts', // their published files as they are (shallow-equal's prepare would rebuild itself)
          '--pack-destination',
          packs,
          ...THIRD_PARTY.map((m) => join(ROOT, 'node_modules', m)),
        ],
        { env: userEnv() },
      ),
      'npm pack of the third-party packages',
    );
    const thirdFiles = (JSON.parse(third.stdout) as Packed[]).map((p) => join(packs, p.filename));

    // From here on, what a plugin author does (the walk-through): empty directory → installed packages.
    t0 = performance.now();
    app = join(work, 'ifalias');
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'ifalias', version: '1.0.0', private: true, type: 'module' }),
    );
    ok(
      await run(
        'npm',
        [
          'install',
          '--offline',
          '--cache',
          join(work, 'npm-cache'),
          '--ignore-scripts',
          '--no-audit',
          '--no-fund',
          ...packed.map((p) => join(packs, p.filename)),
          ...thirdFiles,
        ],
        { cwd: app, env: userEnv() },
      ),
      'npm install of the tarballs',
    );
    // The author's own toolchain: TypeScript and Node's types (from this repository's node_modules; no registry).
    mkdirSync(join(app, 'node_modules', '@types'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', 'typescript'), join(app, 'node_modules', 'typescript'));
    symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(app, 'node_modules', '@types', 'node'));
    mark('installed');
  });

  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('every package is packed with compiled JS, types, README and nothing else', (t) => {
    assert.deepEqual(packed.map((p) => p.name).sort(), NAMES);
    for (const p of packed) {
      const dir = PACKAGES.find((x) => x.name === p.name)?.dir ?? '';
      const files = p.files.map((f) => f.path);
      t.diagnostic(
        `${p.name}@${p.version}: ${(p.size / 1024).toFixed(1)} kB packed, ${(p.unpackedSize / 1024).toFixed(1)} kB unpacked, ${files.length} files`,
      );
      assert.equal(p.version, ROOT_VERSION, `${p.name}: versions move together`);
      for (const need of [
        'package.json',
        'README.md',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/index.d.ts.map',
      ]) {
        assert.ok(files.includes(need), `${p.name} lacks ${need}`);
      }
      const debris = files.filter((f) =>
        /(\.test\.|tsbuildinfo|fixtures?\/|\.readme-check|\.tgz$|^build\/|^node_modules\/|testns\.ts$|tsconfig)/.test(
          f,
        ),
      );
      assert.deepEqual(debris, [], `${p.name}: tests, fixtures or build debris in the tarball`);
      const pkg = JSON.parse(readFileSync(join(ROOT, 'packages', dir, 'package.json'), 'utf8')) as {
        exports: Record<string, string | Record<string, string>>;
        engines: { node: string };
        repository: { directory: string };
        license: string;
        sideEffects: boolean;
        dependencies?: Record<string, string>;
      };
      assert.equal(pkg.license, 'Apache-2.0');
      assert.equal(pkg.repository.directory, `packages/${dir}`);
      assert.equal(typeof pkg.sideEffects, 'boolean');
      assert.match(pkg.engines.node, /^>=\d+/);
      for (const [sub, target] of Object.entries(pkg.exports)) {
        if (typeof target === 'string') continue;
        assert.deepEqual(Object.keys(target), ['cnikit-source', 'types', 'import'], `${p.name} ${sub}`);
        assert.ok(
          files.includes((target.import ?? '').slice(2)),
          `${p.name} ${sub}: ${target.import} packed`,
        );
        assert.ok(files.includes((target.types ?? '').slice(2)), `${p.name} ${sub}: ${target.types} packed`);
      }
      for (const [dep, range] of Object.entries(pkg.dependencies ?? {})) {
        if (dep.startsWith('@cnikit/')) assert.equal(range, ROOT_VERSION, `${p.name} → ${dep}`);
      }
    }
    const sys = packed.find((p) => p.name === '@cnikit/sys')?.files.map((f) => f.path) ?? [];
    for (const need of ['prebuilds/linux-x64/cnikit_sys.node', 'install.mjs', 'binding.gyp', 'src/sys.c']) {
      assert.ok(sys.includes(need), `@cnikit/sys lacks ${need}`);
    }
    assert.ok(
      !existsSync(join(ROOT, 'packages', 'sys', 'prebuilds')),
      'the prebuilt copy is removed after pack',
    );
  });

  test('npm publish --dry-run is clean for every package', async (t) => {
    const r = ok(
      await run('npm', ['publish', '--dry-run', '--json', ...workspaces], { env: userEnv() }),
      'npm publish --dry-run',
    );
    // npm prints one JSON object per group of packages (a package with lifecycle scripts gets its own)
    const out = Object.assign(
      {},
      ...r.stdout
        .trim()
        .split(/\n(?=\{\n)/)
        .map((chunk) => JSON.parse(chunk) as Record<string, Packed>),
    ) as Record<string, Packed>;
    assert.deepEqual(Object.keys(out).sort(), NAMES);
    for (const [name, p] of Object.entries(out)) {
      t.diagnostic(
        `npm publish --dry-run ${name}: ${(p.size / 1024).toFixed(1)} kB, ${p.files.length} files`,
      );
      const mine = packed.find((x) => x.name === name);
      assert.deepEqual(
        p.files.map((f) => f.path).sort(),
        mine?.files.map((f) => f.path).sort(),
        `${name}: publish and pack agree`,
      );
    }
  });

  test('installed with --ignore-scripts, the prebuilt addon is there and nothing was compiled', () => {
    const sys = join(app, 'node_modules', '@cnikit', 'sys');
    assert.ok(existsSync(join(sys, 'prebuilds', 'linux-x64', 'cnikit_sys.node')));
    assert.ok(!existsSync(join(sys, 'build')), 'no node-gyp build ran');
    for (const name of NAMES)
      assert.ok(existsSync(join(app, 'node_modules', name, 'dist', 'index.js')), name);
    assert.ok(existsSync(join(app, 'node_modules', '.bin', 'cnikit-build')), 'the cnikit-build command');
  });

  test('README quick start, skel examples, package README examples, the walk-through: tsc, node, cnikit-build', async (t) => {
    // The walk-through's files, then the other snippets beside them.
    writeFileSync(join(app, 'tsconfig.json'), HOWTO.tsconfig);
    for (const [file, code] of Object.entries(HOWTO.files)) {
      mkdirSync(dirname(join(app, file)), { recursive: true });
      writeFileSync(join(app, file), code);
    }
    writeFileSync(join(app, 'src', 'hello.ts'), sdkQuickStart());
    // the quick start's module only exports the plugin; a process entry is the two lines the README names
    writeFileSync(
      join(app, 'src', 'hello-main.ts'),
      "import { runPlugin } from '@cnikit/skel';\nimport { plugin } from './hello.js';\nawait runPlugin(plugin);\n",
    );
    for (const f of readdirSync(join(ROOT, 'packages', 'skel', 'examples')).filter((f) =>
      f.endsWith('.ts'),
    )) {
      copyFileSync(join(ROOT, 'packages', 'skel', 'examples', f), join(app, 'src', f));
    }
    // Every package README's example; one that needs packages which are not published (the cnikit plugins) is
    // left to its own package's tests and named here.
    const examples: string[] = [];
    for (const { dir } of PACKAGES) {
      const block = exampleBlock(
        readFileSync(join(ROOT, 'packages', dir, 'README.md'), 'utf8'),
        `${dir}/README.md`,
      );
      const foreign = [...block.matchAll(/from '(@cnikit\/[^'/]+)/g)]
        .map((m) => m[1] ?? '')
        .filter((s) => !NAMES.includes(s));
      if (foreign.length) {
        t.diagnostic(`${dir}/README.md example imports unpublished ${foreign.join(', ')}: not compiled here`);
        continue;
      }
      writeFileSync(join(app, 'src', `readme-${dir}.ts`), block);
      examples.push(dir);
    }
    writeFileSync(
      join(app, 'test', 'inprocess.test.ts'),
      `import assert from 'node:assert/strict';
import { test } from 'node:test';
import { invokeInProcess } from '@cnikit/skel';
import { plugin } from '../src/passthrough.js';

test('VERSION and ADD in-process', async () => {
  const v = await invokeInProcess(plugin, { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.1.0"}');
  assert.equal(v.code, 0);
  assert.deepEqual(JSON.parse(v.stdout).supportedVersions, ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  const conf = { cniVersion: '1.0.0', name: 'n', type: 'passthrough', result: { cniVersion: '1.0.0', ips: [{ address: '10.1.0.5/24' }] } };
  const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };
  const add = await invokeInProcess(plugin, env, JSON.stringify(conf));
  assert.equal(add.code, 0, add.stdout);
  assert.deepEqual(JSON.parse(add.stdout).ips, [{ address: '10.1.0.5/24' }]);
  const bad = await invokeInProcess(plugin, env, '{"cniVersion":"1.0.0","name":"n","type":"passthrough","fail":{"code":11,"msg":"try again"}}');
  assert.equal(bad.code, 1);
  assert.equal(JSON.parse(bad.stdout).code, 11);
});
`,
    );
    ok(
      await run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], {
        cwd: app,
        env: userEnv(),
      }),
      'tsc (strict, nodenext) in the project',
    );
    mark('tsc');
    const out = (file: string) => join(app, 'out', file);
    // The author's programs get a TMPDIR of their own, inside `work` (removed at the end); what a test leaves there is
    // checked after each of them (a program may keep a file there, as the @cnikit/sys example keeps its lock file).
    const authorTmp = join(work, 'author-tmp');
    mkdirSync(authorTmp);
    const node = (file: string, env: Record<string, string> = {}, input = '') =>
      run(process.execPath, [out(file)], { cwd: app, env: userEnv({ TMPDIR: authorTmp, ...env }), input });
    const nodeTest = async (file: string, env: Record<string, string> = {}) => {
      const before = readdirSync(authorTmp);
      const r = await run(process.execPath, ['--test', out(file)], {
        cwd: app,
        env: userEnv({ TMPDIR: authorTmp, ...env }),
      });
      assert.deepEqual(readdirSync(authorTmp), before, `${file} left temporary files behind`);
      return r;
    };

    // The walk-through, step 3: the in-process test.
    assert.match(ok(await nodeTest('test/plugin.test.js'), 'test/plugin.test.ts').stdout, /# pass 1\b/);

    // Step 5: build with the packed kit, then VERSION.
    const built = ok(
      await run(
        process.execPath,
        [join(app, 'node_modules', '.bin', 'cnikit-build'), 'src/plugin.ts', '--out', 'dist-bin/ifalias'],
        { cwd: app, env: userEnv({ CNIKIT_BUN: BUN }), timeoutMs: 180_000 },
      ),
      'npx cnikit-build src/plugin.ts --out dist-bin/ifalias',
    );
    const result = JSON.parse(built.stdout) as { plugins: string[]; backend: string; bytes: number };
    assert.deepEqual(result.plugins, ['ifalias']);
    assert.equal(result.backend, 'bun');
    const exe = join(app, 'dist-bin', 'ifalias');
    const version = ok(
      await run(exe, [], {
        cwd: app,
        env: userEnv({ CNI_COMMAND: 'VERSION' }),
        input: '{"cniVersion":"1.1.0"}',
      }),
      'dist-bin/ifalias VERSION',
    );
    mark('running executable');
    assert.equal(JSON.parse(version.stdout).cniVersion, '1.1.0');
    assert.ok(JSON.parse(version.stdout).supportedVersions.includes('0.4.0'));
    const about = ok(await run(exe, [], { cwd: app, env: userEnv() }), 'dist-bin/ifalias (bare)');
    assert.match(about.stderr, /^ifalias: names the container interface after its container\n/);
    t.diagnostic(
      `empty directory → running executable: ${timings.join(', ')} (${(result.bytes / 1e6).toFixed(0)} MB)`,
    );

    // Several plugins → one multicall executable with a hard link per plugin name.
    writeFileSync(
      join(app, 'src', 'second.ts'),
      "import type { Plugin } from '@cnikit/skel';\nexport default { name: 'second', about: 'second plugin', add: (req) => req.prevResult ?? { cniVersion: req.cniVersion }, del() {} } satisfies Plugin;\n",
    );
    const multi = ok(
      await run(
        process.execPath,
        [
          join(app, 'node_modules', '.bin', 'cnikit-build'),
          'src/plugin.ts',
          'src/second.ts',
          '--out',
          'multi/mycni',
        ],
        { cwd: app, env: userEnv({ CNIKIT_BUN: BUN }) },
      ),
      'cnikit-build with two plugins',
    );
    const m = JSON.parse(multi.stdout) as { plugins: string[]; links: string[] };
    assert.deepEqual(m.plugins, ['ifalias', 'second']);
    assert.deepEqual(m.links.sort(), [join(app, 'multi', 'ifalias'), join(app, 'multi', 'second')]);
    for (const [name, about] of [
      ['second', /^second plugin\n/],
      ['ifalias', /^ifalias: names the container interface/],
    ] as const) {
      assert.match(ok(await run(join(app, 'multi', name), [], { env: userEnv() }), name).stderr, about);
    }
    const unknown = await run(join(app, 'multi', 'mycni'), ['third'], { env: userEnv() });
    assert.equal(unknown.status, 1);
    assert.match(
      unknown.stderr,
      /^mycni: unknown plugin "third"\nusage: mycni <plugin> .*\nplugins: ifalias, second\n$/,
    );

    // Step 4: the sandbox test, chained after cnikit's bridge + host-local (dist-bin/ of this repository).
    ensureBuilt();
    const cniBin = join(work, 'cni-bin');
    mkdirSync(cniBin);
    for (const name of ['bridge', 'host-local']) symlinkSync(join(DIST, 'cnikit'), join(cniBin, name));
    const chain = ok(
      await nodeTest('test/chain.test.js', { CNI_PATH: `${cniBin}:${join(app, 'dist-bin')}` }),
      'test/chain.test.ts (sandbox: bridge + host-local + ifalias through @cnikit/libcni)',
    );
    assert.match(chain.stdout, /# pass 1\b/);

    // Step 6: install (a target directory here, not the machine's /opt/cni/bin), and it runs from there.
    const target = join(work, 'opt-cni-bin');
    mkdirSync(target);
    ok(await run('install', ['-m', '0755', exe, join(target, 'ifalias')]), 'install -m 0755');
    const installed = ok(
      await run(join(target, 'ifalias'), [], {
        env: userEnv({ CNI_COMMAND: 'VERSION' }),
        input: '{"cniVersion":"1.0.0"}',
      }),
      'installed ifalias VERSION',
    );
    assert.ok(JSON.parse(installed.stdout).supportedVersions.includes('1.0.0'), installed.stdout);

    // The quick start as a runtime runs it.
    const cniEnv = {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'readme',
      CNI_NETNS: '/nonexistent',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
    };
    const conf = {
      cniVersion: '0.4.0',
      name: 'readme-net',
      type: 'hello',
      prevResult: { cniVersion: '0.4.0', ips: [{ version: '4', address: '10.0.0.2/24' }], dns: {} },
    };
    const hello = ok(await node('src/hello-main.js', cniEnv, JSON.stringify(conf)), 'hello-main.js ADD');
    assert.deepEqual(JSON.parse(hello.stdout), {
      cniVersion: '0.4.0',
      ips: [{ version: '4', address: '10.0.0.2/24' }],
      dns: { search: ['hello.local'] },
    });
    const noPrev = await node(
      'src/hello-main.js',
      cniEnv,
      JSON.stringify({ ...conf, prevResult: undefined }),
    );
    assert.equal(noPrev.status, 1);
    assert.equal(JSON.parse(noPrev.stdout).code, 100);

    const pass = ok(
      await node('src/passthrough.js', { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}'),
      'passthrough.js VERSION',
    );
    assert.ok(JSON.parse(pass.stdout).supportedVersions.includes('1.0.0'), pass.stdout);
    assert.match(ok(await nodeTest('test/inprocess.test.js'), 'inprocess.test.ts').stdout, /# pass 1\b/);

    const expected: Record<string, RegExp> = {
      ip: /^10\.88\.0\.17\/16 10\.88\.0\.1 true$/m,
      skel: /^0 7$/m,
      ipam: /dst: '0\.0\.0\.0\/0'/,
      sys: /EBADF flock/,
      netlink: /'192\.0\.2\.1\/24'/,
      firewall: /^true$/m,
      testing: /# pass 1\b/,
      build: /^\[ 'ifalias' \] sea \d+ MB$/m,
      libcni: /^true \[\]$/m,
      warm: /^1 bridge ADD\ncnikit.socket cnikit.service$/m,
      conformance: /^5 passed$/m,
      link: /^function function function$/m,
    };
    for (const dir of examples) {
      const file = `src/readme-${dir}.js`;
      const r = ok(
        dir === 'testing' ? await nodeTest(file) : await node(file),
        `packages/${dir}/README.md example`,
      );
      const want = expected[dir];
      assert.ok(want, `an expected output for packages/${dir}/README.md`);
      assert.match(r.stdout, want, `packages/${dir}/README.md example printed:\n${r.stdout}${r.stderr}`);
    }
    // the API example built the same plugin with Node SEA
    const sea = ok(
      await run(join(app, 'dist-bin', 'ifalias-sea'), [], {
        env: userEnv({ CNI_COMMAND: 'VERSION' }),
        input: '{"cniVersion":"1.1.0"}',
      }),
      'dist-bin/ifalias-sea VERSION',
    );
    assert.equal(JSON.parse(sea.stdout).cniVersion, '1.1.0');
  });

  test('@cnikit/sys install script: builds from source with node-gyp when no prebuilt addon is there', async () => {
    const project = join(work, 'sys-from-source');
    const pkg = join(project, 'node_modules', '@cnikit', 'sys');
    cpSync(join(app, 'node_modules', '@cnikit', 'sys'), pkg, { recursive: true });
    rmSync(join(pkg, 'prebuilds'), { recursive: true });
    const nodeGyp = join(ROOT, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    const r = ok(
      await run(process.execPath, [join(pkg, 'install.mjs')], {
        cwd: pkg,
        env: userEnv({ npm_config_node_gyp: nodeGyp }),
        timeoutMs: 180_000,
      }),
      'install.mjs',
    );
    assert.match(r.stdout, /no prebuilt addon for linux-x64; building from source/);
    assert.ok(existsSync(join(pkg, 'build', 'Release', 'cnikit_sys.node')));
    const load = ok(
      await run(
        process.execPath,
        ['--input-type=module', '-e', "const s = await import('@cnikit/sys'); console.log(s.gettid() > 0)"],
        { cwd: project, env: userEnv() },
      ),
      'loading the addon built from source',
    );
    assert.equal(load.stdout.trim(), 'true');
    // With neither a prebuilt nor a built addon: an error that names the fix.
    rmSync(join(pkg, 'build'), { recursive: true });
    const none = await run(
      process.execPath,
      ['--input-type=module', '-e', "const s = await import('@cnikit/sys'); s.gettid()"],
      { cwd: project, env: userEnv() },
    );
    assert.notEqual(none.status, 0);
    assert.match(none.stderr, /npm rebuild @cnikit\/sys/);
  });
});
