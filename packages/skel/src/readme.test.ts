// Keeps the README's SDK quick start honest: the first TypeScript block between the sdk markers is
// type-checked with the repository's strict settings, then the ```sh block after it runs as written in a directory
// that holds nothing but hello.ts — `npx cnikit-build hello.ts` (cnikit-build from this repository: the directory
// sits inside it, so @cnikit/* resolve to the workspace) and the VERSION call of the executable it wrote — and the
// executable answers ADD as a runtime runs it. A failed build leaves no node_modules/.cache behind.
// (test-netns/packages.test.ts does the same against the packed npm tarballs with plain tsc + node.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sdkQuickStart } from '../../../scripts/readme-snippets.ts';

const skelDir = fileURLToPath(new URL('..', import.meta.url));
const root = join(skelDir, '..', '..');
const work = mkdtempSync(join(skelDir, '.readme-check-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** The ```sh block that follows the quick start's ```ts block, as lines. */
function quickStartShell(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('<!-- sdk:start -->'), readme.indexOf('<!-- sdk:end -->'));
  const sh = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(sh, 'a ```sh block in the SDK quick start');
  return sh.split('\n').filter((l) => l.trim() !== '');
}

/**
 * A shell whose `npx` runs this repository's cnikit-build from source (what `npx cnikit-build` runs once the SDK
 * is installed; test-netns/packages.test.ts runs the packed one). The workspace packages resolve to their sources
 * (the cnikit-source condition): a fresh clone has no compiled dist/.
 */
function shellEnv(dir: string): NodeJS.ProcessEnv {
  const bin = join(dir, '.bin');
  if (!existsSync(bin)) {
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'npx'),
      `#!/bin/sh\n[ "$1" = cnikit-build ] || exit 127\nshift\nexec ${JSON.stringify(process.execPath)} --conditions=cnikit-source --import tsx ${JSON.stringify(join(root, 'packages', 'build', 'src', 'cli.ts'))} --condition cnikit-source "$@"\n`,
      { mode: 0o755 },
    );
  }
  return { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME };
}

describe('README SDK quick start', () => {
  test('type-checks; its shell lines build ./hello from an otherwise empty directory; it runs as a plugin', () => {
    const code = sdkQuickStart();
    assert.doesNotMatch(code, /await runPlugin\(/, 'a plugin module must not run itself at import time');
    const dir = mkdtempSync(join(work, 'app-'));
    writeFileSync(join(dir, 'hello.ts'), code);
    const tsconfig = join(work, 'tsconfig.json');
    writeFileSync(
      tsconfig,
      JSON.stringify({ extends: '../../../tsconfig.base.json', files: [join(dir, 'hello.ts')] }),
    );
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', tsconfig], {
      cwd: root,
      encoding: 'utf8',
    });
    assert.equal(tsc.status, 0, `tsc failed:\n${tsc.stdout}${tsc.stderr}`);

    const lines = quickStartShell();
    assert.deepEqual(lines[0], 'npx cnikit-build hello.ts');
    const env = shellEnv(work);
    const outputs = lines.map((line) => {
      const r = spawnSync('sh', ['-ec', line], { cwd: dir, env, encoding: 'utf8', timeout: 300_000 });
      assert.equal(r.status, 0, `${line}\n${r.stdout}${r.stderr}`);
      return r.stdout;
    });
    assert.ok(existsSync(join(dir, 'hello')), './hello written');
    assert.deepEqual(
      readdirSync(dir)
        .filter((f) => f !== 'node_modules')
        .sort(),
      ['hello', 'hello.ts'],
    );
    assert.equal(JSON.parse(outputs[1] ?? '').cniVersion, '1.1.0');

    const cniEnv = {
      PATH: process.env.PATH,
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
    const run = spawnSync(join(dir, 'hello'), [], {
      env: cniEnv,
      input: JSON.stringify(conf),
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, `plugin failed: ${run.stdout}${run.stderr}`);
    assert.deepEqual(JSON.parse(run.stdout), {
      cniVersion: '0.4.0',
      ips: [{ version: '4', address: '10.0.0.2/24' }],
      dns: { search: ['hello.local'] },
    });
    const noPrev = spawnSync(join(dir, 'hello'), [], {
      env: cniEnv,
      input: JSON.stringify({ ...conf, prevResult: undefined }),
      encoding: 'utf8',
    });
    assert.equal(noPrev.status, 1);
    assert.equal(JSON.parse(noPrev.stdout).code, 100);
  });

  test('a failed build leaves no node_modules/.cache/cnikit-build behind', () => {
    const dir = mkdtempSync(join(work, 'fail-'));
    writeFileSync(
      join(dir, 'selfrun.ts'),
      "export const plugin = { name: 'selfrun' };\nawait Promise.resolve(plugin);\n",
    );
    const r = spawnSync('sh', ['-ec', 'npx cnikit-build selfrun.ts'], {
      cwd: dir,
      env: shellEnv(work),
      encoding: 'utf8',
    });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /must not run itself at import time/);
    assert.deepEqual(readdirSync(dir), ['selfrun.ts']);
  });
});
