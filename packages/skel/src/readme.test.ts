// Keeps the README's SDK quick start honest: the first TypeScript block between the sdk markers is
// type-checked with the repository's strict settings and then run as a real plugin process (from the sources;
// scripts/packages.test.ts does the same against the packed npm tarballs with plain tsc + node).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sdkQuickStart } from '../../../scripts/readme-snippets.ts';

const skelDir = fileURLToPath(new URL('..', import.meta.url));
const root = join(skelDir, '..', '..');

const snippet = (): string => sdkQuickStart();

describe('README SDK quick start', () => {
  test('type-checks and runs as a plugin', () => {
    const code = snippet();
    assert.match(code, /runPlugin\(/);
    const tag = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const file = join(skelDir, `.readme-check-${tag}.ts`);
    const tsconfig = join(skelDir, `.readme-check-${tag}.json`);
    writeFileSync(file, code);
    writeFileSync(
      tsconfig,
      JSON.stringify({ extends: '../../tsconfig.base.json', files: [`.readme-check-${tag}.ts`] }),
    );
    try {
      const tsc = spawnSync(
        process.execPath,
        [join(root, 'node_modules/typescript/bin/tsc'), '-p', tsconfig, '--noEmit'],
        {
          cwd: root,
          encoding: 'utf8',
        },
      );
      assert.equal(tsc.status, 0, `tsc failed:\n${tsc.stdout}${tsc.stderr}`);

      const env = {
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
      const run = spawnSync(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', file], {
        cwd: root,
        env,
        input: JSON.stringify(conf),
        encoding: 'utf8',
      });
      assert.equal(run.status, 0, `plugin failed: ${run.stdout}${run.stderr}`);
      const out = JSON.parse(run.stdout);
      assert.equal(out.cniVersion, '0.4.0');
      assert.deepEqual(out.ips, [{ version: '4', address: '10.0.0.2/24' }]);
      assert.deepEqual(out.dns, { search: ['hello.local'] });

      const bare = spawnSync(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', file], {
        cwd: root,
        env: { PATH: process.env.PATH },
        encoding: 'utf8',
      });
      assert.equal(bare.status, 0);
      assert.equal(bare.stdout, '');
      assert.match(bare.stderr, /CNI protocol versions supported: 0\.1\.0, /);
    } finally {
      rmSync(file, { force: true });
      rmSync(tsconfig, { force: true });
    }
  });
});
