import assert from 'node:assert/strict';
import { test } from 'node:test';
import { releaseArch, runtimeFacts, versionText } from './version.ts';

const stamp = { version: '1.2.3', commit: 'a'.repeat(40), date: '2026-11-24T14:56:14Z' };

test('versionText: version line, then commit, build date, back-end and architecture', () => {
  const text = versionText('cnikit', stamp, { backend: 'bun 1.4.5', platform: 'linux', arch: 'arm64' });
  assert.equal(
    text,
    [
      'cnikit 1.2.3',
      `commit: ${'a'.repeat(40)}`,
      'build date: 2026-11-24T14:56:14Z',
      'back-end: bun 1.4.5',
      'architecture: linux/arm64',
      '',
    ].join('\n'),
  );
});

test('versionText: a build from a modified work tree says so; no stamp says unknown', () => {
  const rt = { backend: 'node 20.20.2 (SEA)', platform: 'linux', arch: 'amd64' };
  assert.match(
    versionText('cnikit', { ...stamp, dirty: true }, rt),
    /^commit: a{40} \(modified work tree\)$/m,
  );
  const bare = versionText('mine', undefined, rt);
  assert.match(bare, /^mine unknown\ncommit: unknown\nbuild date: unknown\n/);
});

test('releaseArch: Node names map to the release names (Go/Debian), others pass through', () => {
  assert.equal(releaseArch('x64'), 'amd64');
  assert.equal(releaseArch('arm64'), 'arm64');
  assert.equal(releaseArch('ia32'), '386');
  assert.equal(releaseArch('riscv64'), 'riscv64');
});

test('runtimeFacts: under Node (no Bun global) the back-end is node with its version', () => {
  const rt = runtimeFacts();
  assert.equal(rt.backend, `node ${process.version.slice(1)} (SEA)`);
  assert.equal(rt.platform, process.platform);
  assert.equal(rt.arch, process.arch === 'x64' ? 'amd64' : process.arch);
});
