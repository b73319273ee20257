/**
 * The pieces of `npm run release` that need neither a compiler nor qemu: the one-version rule, the reproducible
 * tarball, SHA256SUMS, the glibc measurement, the SBOM shape and the arguments; `scripts/install --from` with
 * small tarballs made by packTarball (the whole release runs in test-netns/release/release.release.test.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  glibcNeeds,
  maxVersion,
  packTarball,
  parseReleaseArgs,
  ReleaseError,
  releaseVersion,
  sbom,
  sha256sums,
  tarballName,
  tarballReadme,
} from './release.ts';

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-release-unit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const fresh = (name: string) => {
  const d = join(tmp, `${name}-${n++}`);
  mkdirSync(d, { recursive: true });
  return d;
};

function fakeRepo(
  versions: Record<string, { version: string; deps?: Record<string, string> }>,
  root = '1.2.3',
) {
  const dir = fresh('repo');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'cnikit', version: root }));
  for (const [path, v] of Object.entries(versions)) {
    mkdirSync(join(dir, path), { recursive: true });
    writeFileSync(
      join(dir, path, 'package.json'),
      JSON.stringify({
        name: `@cnikit/${path.split('/')[1]}`,
        version: v.version,
        dependencies: v.deps ?? {},
      }),
    );
  }
  mkdirSync(join(dir, 'packages'), { recursive: true });
  mkdirSync(join(dir, 'plugins'), { recursive: true });
  return dir;
}

describe('releaseVersion: one version for every package', () => {
  test('agreeing packages give package.json version', () => {
    const repo = fakeRepo({
      'packages/skel': { version: '1.2.3' },
      'plugins/bridge': { version: '1.2.3', deps: { '@cnikit/skel': '1.2.3', other: '^9' } },
    });
    assert.equal(releaseVersion(repo), '1.2.3');
  });
  test('a package with another version, or a dependency on another cnikit version, stops the release', () => {
    const repo = fakeRepo({
      'packages/skel': { version: '1.2.2' },
      'plugins/bridge': { version: '1.2.3', deps: { '@cnikit/skel': '^1.2.0' } },
    });
    assert.throws(
      () => releaseVersion(repo),
      (e: Error) =>
        e instanceof ReleaseError &&
        e.message.includes('packages/skel/package.json: version 1.2.2') &&
        e.message.includes('plugins/bridge/package.json: @cnikit/skel ^1.2.0'),
    );
  });
  test('a root version that is not semver is refused', () => {
    assert.throws(() => releaseVersion(fakeRepo({}, 'next')), /not a semantic version/);
  });
  test("this repository's packages agree", () => {
    assert.match(releaseVersion(), /^\d+\.\d+\.\d+/);
  });
});

function stage(): { dir: string; names: string[] } {
  const dir = fresh('stage');
  writeFileSync(join(dir, 'cnikit'), 'pretend executable\n', { mode: 0o755 });
  for (const p of ['bridge', 'loopback', 'cnitool']) linkSync(join(dir, 'cnikit'), join(dir, p));
  writeFileSync(join(dir, 'cnikit-client'), 'pretend client\n', { mode: 0o755 });
  writeFileSync(join(dir, 'LICENSE'), 'license\n', { mode: 0o644 });
  writeFileSync(join(dir, 'README.md'), '# readme\n', { mode: 0o644 });
  return { dir, names: ['cnikit', 'LICENSE', 'README.md', 'bridge', 'cnikit-client', 'cnitool', 'loopback'] };
}

describe('packTarball', () => {
  test('same inputs → same bytes, whatever the files’ own times; cnikit first, links as link entries', () => {
    const a = stage();
    const b = stage();
    spawnSync('touch', ['-d', '2001-01-01', join(b.dir, 'LICENSE')]);
    const ta = join(fresh('out'), 'a.tgz');
    const tb = join(fresh('out'), 'b.tgz');
    packTarball(a.dir, a.names, 1_700_000_000, ta);
    packTarball(b.dir, b.names, 1_700_000_000, tb);
    assert.ok(readFileSync(ta).equals(readFileSync(tb)));
    const gz = readFileSync(ta);
    assert.equal(gz.readUInt32LE(4), 0, 'gzip MTIME');
    assert.equal((gz[3] as number) & 0x08, 0, 'gzip FNAME');
    const list = spawnSync('tar', ['--numeric-owner', '--full-time', '-tvzf', ta], { encoding: 'utf8' });
    const lines = list.stdout.trim().split('\n');
    assert.deepEqual(
      lines.map((l) => l.split(/\s+/)[5]),
      a.names,
    );
    assert.match(lines[0] as string, /^-rwxr-xr-x 0\/0 .* 2023-11-14 22:13:20 cnikit$/);
    assert.match(lines[3] as string, /^hrwxr-xr-x 0\/0 .* bridge link to cnikit$/);
    const x = fresh('x');
    spawnSync('tar', ['-C', x, '-xzf', ta]);
    assert.equal(statSync(join(x, 'bridge')).ino, statSync(join(x, 'cnikit')).ino);
  });
  test('another epoch gives other bytes (the date is really in it)', () => {
    const a = stage();
    const t1 = join(fresh('out'), 'a.tgz');
    const t2 = join(fresh('out'), 'b.tgz');
    packTarball(a.dir, a.names, 1_700_000_000, t1);
    packTarball(a.dir, a.names, 1_700_000_001, t2);
    assert.ok(!readFileSync(t1).equals(readFileSync(t2)));
  });
});

test('sha256sums: sha256sum -c accepts it, and rejects a changed file', () => {
  const dir = fresh('sums');
  writeFileSync(join(dir, 'b.tgz'), 'bbb');
  writeFileSync(join(dir, 'a.tgz'), 'aaa');
  const text = sha256sums(dir, [join(dir, 'b.tgz'), join(dir, 'a.tgz')]);
  assert.deepEqual(
    text.split('\n').map((l) => l.slice(66)),
    ['a.tgz', 'b.tgz', ''],
  );
  writeFileSync(join(dir, 'SHA256SUMS'), text);
  assert.equal(spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir }).status, 0);
  writeFileSync(join(dir, 'a.tgz'), 'aab');
  assert.notEqual(spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir }).status, 0);
});

test('glibcNeeds: the GLIBC_ versions of a real executable; maxVersion compares numerically', () => {
  const { versions, floor } = glibcNeeds('objdump', '/bin/ls');
  assert.ok(versions.length > 0);
  assert.equal(floor, versions.at(-1));
  assert.equal(maxVersion(['2.9', '2.17', null, '2.2.5']), '2.17');
  assert.equal(maxVersion([null]), null);
});

test('tarballName, tarballReadme and the arguments', () => {
  assert.equal(tarballName('arm64', '0.1.0'), 'cnikit-linux-arm64-v0.1.0.tgz');
  const readme = tarballReadme({
    version: '0.1.0',
    arch: 'amd64',
    commit: 'c0ffee',
    plugins: ['bridge', 'ptp'],
  });
  assert.match(readme, /tar -C \/opt\/cni\/bin -xzf cnikit-linux-amd64-v0\.1\.0\.tgz/);
  assert.match(readme, /`bridge`, `ptp`/);
  // the installer is warm by default where systemd runs the host; the README says so and names the opt-out
  assert.match(
    readme,
    /scripts\/install --from cnikit-linux-amd64-v0\.1\.0\.tgz \[--target \/opt\/cni\/bin\] \[--no-warm\]/,
  );
  assert.match(readme, /Where systemd runs the host this installs warm mode \(cnikit\.socket enabled/);
  assert.deepEqual(parseReleaseArgs([]).arches, ['amd64', 'arm64']);
  assert.deepEqual(parseReleaseArgs(['--arch', 'arm64', '--out', '/x']), { arches: ['arm64'], out: '/x' });
  assert.throws(() => parseReleaseArgs(['--arch', 'riscv64']), /unknown --arch "riscv64"/);
});

test('sbom: only packages whose files are bundled, the runtime, addon, client, libc; stable for one commit', () => {
  const dir = fresh('sbom');
  writeFileSync(join(dir, 'addon.node'), 'addon');
  writeFileSync(join(dir, 'client'), 'client');
  const input = {
    version: '0.1.0',
    arch: 'arm64' as const,
    source: { commit: 'a'.repeat(40), dirty: false, epoch: 1_700_000_000 },
    metafile: {
      inputs: {
        'packages/skel/src/index.ts': {},
        'packages/skel/src/types.ts': {},
        'plugins/bridge/src/index.ts': {},
        'lazy-builtin:util': {},
        '<stdin>': {},
      },
    },
    bun: { name: '@oven/bun-linux-aarch64', version: '1.4.5' },
    addon: join(dir, 'addon.node'),
    client: join(dir, 'client'),
    libc: { name: 'libc6-dev', version: '2.36' },
    files: [{ name: 'client', path: join(dir, 'client') }],
    glibcFloor: '2.17',
  };
  const text = sbom(input);
  assert.equal(text, sbom(input));
  const doc = JSON.parse(text);
  assert.equal(doc.bomFormat, 'CycloneDX');
  assert.equal(doc.metadata.timestamp, '2023-11-14T22:13:20Z');
  assert.match(
    doc.serialNumber,
    /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  const libs = doc.components
    .filter((c: { type: string }) => c.type === 'library')
    .map((c: { name: string }) => c.name);
  assert.deepEqual(libs, ['@cnikit/plugin-bridge', '@cnikit/skel', 'cnikit_sys.node', 'libc6-dev']);
  const skel = doc.components.find((c: { name: string }) => c.name === '@cnikit/skel');
  assert.equal(skel.properties[0].value, '2');
  assert.ok(doc.components.some((c: { name: string }) => c.name === '@oven/bun-linux-aarch64'));
  assert.equal(
    doc.metadata.component.properties.find((p: { name: string }) => p.name === 'cnikit:glibc-floor').value,
    '2.17',
  );
  assert.notEqual(sbom({ ...input, source: { ...input.source, commit: 'b'.repeat(40) } }), text);
});

describe('scripts/install --from TARBALL', () => {
  const install = (args: string[]) =>
    spawnSync(join(import.meta.dirname, 'install'), args, { encoding: 'utf8', env: process.env });
  const release = () => {
    const s = stage();
    const out = fresh('rel');
    const tgz = join(out, tarballName('amd64', '9.9.9'));
    packTarball(s.dir, s.names, 1_700_000_000, tgz);
    writeFileSync(join(out, 'SHA256SUMS'), sha256sums(out, [tgz]));
    return { tgz, out };
  };

  /** Every entry of stage()'s tarball is in `target`; its files (not the links: their mode decides) as packed. */
  const assertEveryFile = (target: string) => {
    const s = stage();
    for (const n of ['cnikit', 'cnikit-client', 'LICENSE', 'README.md'])
      assert.equal(readFileSync(join(target, n), 'utf8'), readFileSync(join(s.dir, n), 'utf8'), n);
    assert.deepEqual(
      readdirSync(target)
        .filter((f) => !f.startsWith('.'))
        .sort(),
      [...s.names].sort(),
    );
  };

  test('cold: cnikit and a hard link per plugin and cnitool, checked against SHA256SUMS', () => {
    const { tgz } = release();
    const target = join(fresh('t'), 'bin');
    const r = install(['--from', tgz, '--target', target]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /SHA256 matches/);
    assert.equal(readFileSync(join(target, 'cnikit'), 'utf8'), 'pretend executable\n');
    for (const n of ['bridge', 'loopback', 'cnitool'])
      assert.equal(statSync(join(target, n)).ino, statSync(join(target, 'cnikit')).ino, n);
    // every file of the tarball goes in, cold too: the installed `cnikit install-cni --warm` needs the client
    assertEveryFile(target);
    assert.equal(statSync(join(target, 'cnikit-client')).mode & 0o777, 0o755);
    assert.equal(statSync(join(target, 'LICENSE')).mode & 0o777, 0o644);
    assert.notEqual(statSync(join(target, 'cnikit-client')).ino, statSync(join(target, 'cnikit')).ino);
  });

  test('--warm: the plugin names link to the client, cnitool to cnikit; units only where asked', () => {
    const { tgz } = release();
    const target = join(fresh('t'), 'bin');
    const units = fresh('units');
    const r = install(['--from', tgz, '--warm', '--target', target, '--systemd-dir', units]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    const client = statSync(join(target, 'cnikit-client')).ino;
    for (const n of ['bridge', 'loopback']) assert.equal(statSync(join(target, n)).ino, client, n);
    assert.equal(statSync(join(target, 'cnitool')).ino, statSync(join(target, 'cnikit')).ino);
    assert.ok(readdirSync(units).length > 0, 'systemd units written');
    assertEveryFile(target);
  });

  test('--warm without --systemd-dir: the hints name the tarball, the target and the socket given', () => {
    const { tgz } = release();
    const target = join(fresh('t'), 'bin');
    const sock = join(fresh('run'), 'w.sock');
    const r = install(['--from', tgz, '--warm', '--target', target, '--socket', sock]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.ok(
      r.stdout.includes(
        `run again with --systemd-dir DIR to install them: scripts/install --from ${tgz} --warm --target ${target} --socket ${sock} --systemd-dir DIR`,
      ),
      r.stdout,
    );
    assert.ok(
      r.stdout.includes(`check it with: ${join(target, 'cnikit')} serve --check --socket ${sock})`),
      r.stdout,
    );
    assertEveryFile(target);
  });

  test('cold then --warm then --cold from the same tarball: the file set never shrinks', () => {
    const { tgz } = release();
    const target = join(fresh('t'), 'bin');
    for (const mode of [[], ['--warm'], ['--cold']]) {
      const r = install(['--from', tgz, ...mode, '--target', target]);
      assert.equal(r.status, 0, r.stderr + r.stdout);
      assertEveryFile(target);
    }
    assert.equal(statSync(join(target, 'bridge')).ino, statSync(join(target, 'cnikit')).ino, 'cold again');
  });

  test('a tarball that does not match SHA256SUMS is refused and nothing is installed', () => {
    const { tgz } = release();
    const bytes = readFileSync(tgz);
    bytes[bytes.length - 12] = ((bytes[bytes.length - 12] as number) + 1) & 0xff;
    writeFileSync(tgz, bytes);
    const target = join(fresh('t'), 'bin');
    const r = install(['--from', tgz, '--target', target]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /does not match its SHA256SUMS line/);
    assert.ok(!existsSync(target));
  });

  test('a tarball with directories or path tricks is refused', () => {
    const dir = fresh('bad');
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'cnikit'), 'x');
    const tgz = join(fresh('badout'), 'x.tgz');
    packTarball(dir, ['sub/cnikit'], 1_700_000_000, tgz);
    const target = join(fresh('t'), 'bin');
    const r = install(['--from', tgz, '--target', target]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /not a flat cnikit release tarball \(entries sub\/cnikit\)/);
    assert.ok(!existsSync(target));
  });

  test('--dry-run changes nothing; a missing tarball or value is an error', () => {
    const { tgz } = release();
    const target = join(fresh('t'), 'bin');
    const r = install(['--from', tgz, '--target', target, '--dry-run']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /would install/);
    for (const n of ['cnikit-client', 'LICENSE', 'README.md'])
      assert.match(r.stdout, new RegExp(`install +${n}: copy `));
    assert.ok(!existsSync(target));
    assert.match(install(['--from', join(tmp, 'nope.tgz')]).stderr, /nope\.tgz not found/);
    assert.match(install(['--from']).stderr, /--from needs a tarball/);
  });
});
