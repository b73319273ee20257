// The release's multi-architecture image (scripts/image.ts buildImageIndex): the per-architecture archives of
// buildImage (here with small static programs standing in for the executables, compiled for amd64 and arm64) become
// one OCI layout whose index.json names one image index of two manifests with their platforms; every blob is there
// with its digest; two runs give the same bytes; podman (Debian's 4.3) loads it, into a private storage, as the
// image of this machine's platform under the release's tag.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildImage, buildImageIndex, type ImageIndexResult, imageIndexName, imageRef } from './image.ts';

const tmp = mkdtempSync(join(tmpdir(), 'cnikit-image-index-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
const VERSION = '9.8.7';
const EPOCH = 1_700_000_000;
const ARCHES = [
  { name: 'amd64' as const, cc: 'cc', objdump: 'objdump' },
  { name: 'arm64' as const, cc: 'aarch64-linux-gnu-gcc', objdump: 'aarch64-linux-gnu-objdump' },
];

function must(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.error?.message ?? ''}${r.stderr}`);
  return r.stdout;
}

function build(name: string): ImageIndexResult {
  const work = join(tmp, name);
  const out = join(work, 'out');
  mkdirSync(out, { recursive: true });
  const src = join(tmp, 'hello.c');
  writeFileSync(src, 'int main(void) { return 0; }\n');
  const archives = ARCHES.map((arch) => {
    const exe = join(work, `hello-${arch.name}`);
    must(arch.cc, ['-O1', '-o', exe, src]);
    const w = join(work, arch.name);
    mkdirSync(w, { recursive: true });
    return buildImage({
      arch,
      exe,
      client: exe,
      license: src,
      version: VERSION,
      epoch: EPOCH,
      work: w,
      out: w,
      level: 1,
    }).file;
  });
  return buildImageIndex({ archives, version: VERSION, epoch: EPOCH, work, out });
}

let a: ImageIndexResult;
let layout = '';
before(() => {
  a = build('a');
  layout = join(tmp, 'layout');
  mkdirSync(layout);
  must('tar', ['-xf', a.file, '-C', layout]);
});

const blob = (digest: string) =>
  readFileSync(join(layout, 'blobs', 'sha256', digest.replace(/^sha256:/, '')));

describe('multi-architecture image index', () => {
  test('index.json names one image index; it lists amd64 and arm64 manifests with platforms; every blob is there', () => {
    assert.equal(a.file.endsWith(imageIndexName(VERSION)), true);
    const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8'));
    assert.deepEqual(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8')), {
      imageLayoutVersion: '1.0.0',
    });
    assert.equal(top.manifests.length, 1);
    const [desc] = top.manifests;
    assert.equal(desc.mediaType, 'application/vnd.oci.image.index.v1+json');
    assert.deepEqual(desc.annotations, {
      'org.opencontainers.image.ref.name': imageRef(VERSION),
      'io.containerd.image.name': imageRef(VERSION),
    });
    assert.equal(desc.digest, a.digest);
    const index = JSON.parse(blob(desc.digest).toString());
    assert.equal(blob(desc.digest).length, desc.size);
    assert.equal(index.mediaType, 'application/vnd.oci.image.index.v1+json');
    assert.deepEqual(
      index.manifests.map((m: { platform: unknown; mediaType: string }) => [m.mediaType, m.platform]),
      [
        ['application/vnd.oci.image.manifest.v1+json', { architecture: 'amd64', os: 'linux' }],
        ['application/vnd.oci.image.manifest.v1+json', { architecture: 'arm64', os: 'linux' }],
      ],
    );
    // every digest names a blob of that size and content; each manifest's config is its architecture
    const referenced = new Set<string>([desc.digest]);
    for (const m of index.manifests) {
      const manifest = JSON.parse(blob(m.digest).toString());
      assert.equal(blob(m.digest).length, m.size);
      const config = JSON.parse(blob(manifest.config.digest).toString());
      assert.equal(config.architecture, m.platform.architecture);
      for (const d of [m, manifest.config, ...manifest.layers]) {
        referenced.add(d.digest);
        const b = blob(d.digest);
        assert.equal(`sha256:${createHash('sha256').update(b).digest('hex')}`, d.digest);
        assert.equal(b.length, d.size);
      }
    }
    assert.deepEqual(
      readdirSync(join(layout, 'blobs', 'sha256')).sort(),
      [...referenced].map((d) => d.slice('sha256:'.length)).sort(),
      'no blob missing, none extra',
    );
  });

  test('two runs give the same bytes', () => {
    const b = build('b');
    assert.ok(readFileSync(a.file).equals(readFileSync(b.file)));
  });

  test('podman load takes the image of this machine from it, under the release tag', () => {
    const store = [
      '--root',
      join(tmp, 'podman-root'),
      '--runroot',
      join(tmp, 'podman-run'),
      '--storage-driver',
      'vfs',
    ];
    const load = must('podman', [...store, 'load', '-i', a.file]);
    assert.match(load, new RegExp(`Loaded image: ${imageRef(VERSION).replace(/\./g, '\\.')}`));
    const info = JSON.parse(must('podman', [...store, 'image', 'inspect', imageRef(VERSION)]))[0];
    assert.equal(info.Architecture, 'amd64');
    assert.equal(info.Os, 'linux');
  });

  test('ctr import (Debian containerd 1.6, a private instance) makes one image of both platforms', async () => {
    const d = join(tmp, 'containerd');
    mkdirSync(d);
    const sock = join(d, 'c.sock');
    writeFileSync(
      join(d, 'config.toml'),
      [
        'version = 2',
        `root = ${JSON.stringify(join(d, 'root'))}`,
        `state = ${JSON.stringify(join(d, 'state'))}`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
        '  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]',
        '[grpc]',
        `  address = ${JSON.stringify(sock)}`,
        '[ttrpc]',
        `  address = ${JSON.stringify(`${sock}.ttrpc`)}`,
        '[metrics]',
        '  address = ""',
        '',
      ].join('\n'),
    );
    const c = spawn('containerd', ['--config', join(d, 'config.toml')], { stdio: 'ignore' });
    try {
      for (let i = 0; !existsSync(sock); i++) {
        assert.ok(i < 200 && c.exitCode === null, 'containerd started');
        await new Promise((r) => setTimeout(r, 50));
      }
      const ctr = (args: string[]) => must('ctr', ['--address', sock, '--namespace', 'k8s.io', ...args]);
      ctr(['images', 'import', a.file]);
      const ls = ctr(['images', 'ls']).trim().split('\n');
      assert.equal(ls.length, 2, ls.join('\n'));
      const row = (ls[1] ?? '').split(/\s+/);
      assert.deepEqual(
        [row[0], row[1], row[2]],
        [imageRef(VERSION), 'application/vnd.oci.image.index.v1+json', a.digest],
      );
      assert.match(ls[1] ?? '', /linux\/amd64,linux\/arm64/);
      assert.match(ctr(['images', 'check']), /complete \(2\/2\)/);
    } finally {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }
  });
});
