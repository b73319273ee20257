// What npm sees of the workspace: the plugins are private and no package README depends on
// them; packing an SDK package without its compiled dist/ fails loudly; `npm run pack:sdk` makes every SDK tarball
// in one directory and prints the one `npm install` that installs them together.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..');
const work = mkdtempSync(join(tmpdir(), 'cnikit-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));
const manifest = (dir: string) =>
  JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as {
    name: string;
    private?: boolean;
    scripts?: Record<string, string>;
  };
const sdk = readdirSync(join(ROOT, 'packages'))
  .filter((d) => existsSync(join(ROOT, 'packages', d, 'tsconfig.build.json')))
  .sort();

test('every plugin package is private, and no package README imports a plugin package', () => {
  for (const d of readdirSync(join(ROOT, 'plugins')).filter((d) =>
    existsSync(join(ROOT, 'plugins', d, 'package.json')),
  )) {
    assert.equal(manifest(`plugins/${d}`).private, true, `plugins/${d}/package.json is not private`);
  }
  for (const d of sdk) {
    const readme = join(ROOT, 'packages', d, 'README.md');
    if (existsSync(readme)) assert.doesNotMatch(readFileSync(readme, 'utf8'), /@cnikit\/plugin-/, readme);
  }
});

test('npm pack of an SDK package without (or with a stale) dist/ fails, naming what to run', () => {
  for (const d of sdk) {
    if (manifest(`packages/${d}`).private) continue;
    assert.match(
      manifest(`packages/${d}`).scripts?.prepack ?? '',
      /prepack-check\.mjs/,
      `packages/${d} prepack`,
    );
  }
  // a copy of one package laid out like the repository (its prepack runs ../../scripts/prepack-check.mjs)
  const pkg = join(work, 'repo', 'packages', 'ip');
  mkdirSync(join(work, 'repo', 'scripts'), { recursive: true });
  cpSync(join(ROOT, 'scripts', 'prepack-check.mjs'), join(work, 'repo', 'scripts', 'prepack-check.mjs'));
  mkdirSync(pkg, { recursive: true });
  cpSync(join(ROOT, 'packages', 'ip', 'package.json'), join(pkg, 'package.json'));
  cpSync(join(ROOT, 'packages', 'ip', 'src'), join(pkg, 'src'), { recursive: true });
  const pack = () =>
    spawnSync('npm', ['pack', '--dry-run', '--json'], {
      cwd: pkg,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
  const missing = pack();
  assert.notEqual(missing.status, 0, `npm pack without dist/ must fail:\n${missing.stdout}`);
  assert.match(missing.stderr, /@cnikit\/ip: refusing to pack: \.\/dist\/index\.d\.ts is missing/);
  assert.match(missing.stderr, /npm run pack:sdk/);
  // a dist/ older than the sources is refused too; a fresh one packs
  mkdirSync(join(pkg, 'dist'));
  for (const f of ['index.js', 'index.d.ts'])
    cpSync(join(ROOT, 'packages', 'ip', 'src', 'index.ts'), join(pkg, 'dist', f));
  const old = new Date(Date.now() - 3600_000);
  for (const f of ['index.js', 'index.d.ts']) utimesSync(join(pkg, 'dist', f), old, old);
  const stale = pack();
  assert.notEqual(stale.status, 0);
  assert.match(stale.stderr, /index\.js is older than the sources in src\//);
  const now = new Date(Date.now() + 1000);
  for (const f of ['index.js', 'index.d.ts']) utimesSync(join(pkg, 'dist', f), now, now);
  const fresh = pack();
  assert.equal(fresh.status, 0, fresh.stderr);
  const files = (JSON.parse(fresh.stdout) as Array<{ files: Array<{ path: string }> }>)[0]?.files.map(
    (f) => f.path,
  );
  assert.ok(files?.includes('dist/index.js'), String(files));
});

test('npm run pack:sdk: one tarball per SDK package in one directory, and the one install command', () => {
  const out = join(work, 'sdk');
  const r = spawnSync('npm', ['run', '--silent', 'pack:sdk', '--', '--out', out], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 600_000,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const published = sdk.filter((d) => !manifest(`packages/${d}`).private);
  const tarballs = readdirSync(out).sort();
  assert.deepEqual(
    tarballs,
    published
      .map((d) => `${manifest(`packages/${d}`).name.replace('@', '').replace('/', '-')}-0.1.0.tgz`)
      .sort(),
  );
  const install = r.stdout.split('\n').find((l) => l.trim().startsWith('npm install '));
  assert.ok(install, r.stdout);
  assert.deepEqual(install.trim().split(' ').slice(2).sort(), tarballs.map((t) => join(out, t)).sort());
  // every tarball has its compiled entry point
  for (const t of tarballs) {
    const list = spawnSync('tar', ['-tzf', join(out, t)], { encoding: 'utf8' }).stdout;
    assert.match(list, /^package\/dist\/index\.js$/m, `${t} has dist/index.js`);
  }
});
