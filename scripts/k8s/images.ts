/**
 * Container images built on the machine, no registry (docs/lab-cluster.md): the sandbox ("pause") image from
 * test-netns/k8s/pause.c and a test image holding Debian's busybox-static, each written as an OCI image layout in a
 * tar archive that `ctr -n k8s.io images import` takes. Layers are reproducible (sorted, owner 0, mtime 0).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

export const SANDBOX_IMAGE = 'cnikit.test/pause:1';
export const BUSYBOX_IMAGE = 'cnikit.test/busybox:1';
/** Where the busybox-static package is downloaded once (apt-get download). */
export const IMAGE_CACHE = '/var/cache/cnikit/lab-images';

function must(cmd: string, args: string[], opts: { cwd?: string; timeout?: number } = {}): string {
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    cwd: opts.cwd,
    timeout: opts.timeout ?? 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** An OCI archive named `name` (registry/repo:tag) of one layer made of rootfs, with the given image config. */
export function ociArchive(
  workDir: string,
  rootfs: string,
  name: string,
  config: { Entrypoint?: string[]; Cmd?: string[]; Env?: string[] },
): string {
  const layer = join(workDir, 'layer.tar');
  must('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mtime=@0',
    '-C',
    rootfs,
    '-cf',
    layer,
    ...readdirSync(rootfs).sort(),
  ]);
  const oci = join(workDir, 'oci');
  rmSync(oci, { recursive: true, force: true });
  const blobs = join(oci, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const put = (data: Buffer): { digest: string; size: number } => {
    const h = createHash('sha256').update(data).digest('hex');
    writeFileSync(join(blobs, h), data);
    return { digest: `sha256:${h}`, size: data.length };
  };
  const layerBlob = put(readFileSync(layer));
  rmSync(layer);
  const cfg = put(
    Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config,
        rootfs: { type: 'layers', diff_ids: [layerBlob.digest] },
      }),
    ),
  );
  const manifest = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...cfg },
        layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layerBlob }],
      }),
    ),
  );
  writeFileSync(join(oci, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(oci, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          platform: { architecture: 'amd64', os: 'linux' },
          annotations: {
            'io.containerd.image.name': name,
            'org.opencontainers.image.ref.name': name.slice(name.lastIndexOf(':') + 1),
          },
        },
      ],
    }),
  );
  const archive = join(workDir, 'image.oci.tar');
  must('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '-C', oci, '-cf', archive, '.']);
  rmSync(oci, { recursive: true, force: true });
  return archive;
}

/** The sandbox image: one layer holding the static pause binary (built with cc -static). */
export function buildPauseImage(workDir: string, pauseSource: string): string {
  const rootfs = join(workDir, 'rootfs');
  mkdirSync(rootfs, { recursive: true });
  must('cc', ['-static', '-Os', '-s', '-o', join(rootfs, 'pause'), pauseSource]);
  return ociArchive(workDir, rootfs, SANDBOX_IMAGE, { Entrypoint: ['/pause'] });
}

/**
 * The test image: /bin/busybox from Debian's busybox-static package (downloaded once into IMAGE_CACHE with
 * `apt-get download`, the machine's own apt sources) with a symlink per applet, and an empty /tmp.
 */
export function buildBusyboxImage(workDir: string): string {
  mkdirSync(IMAGE_CACHE, { recursive: true });
  let deb = readdirSync(IMAGE_CACHE).find((f) => /^busybox-static_.*\.deb$/.test(f));
  if (!deb) {
    must('apt-get', ['download', 'busybox-static'], { cwd: IMAGE_CACHE, timeout: 300_000 });
    deb = readdirSync(IMAGE_CACHE).find((f) => /^busybox-static_.*\.deb$/.test(f));
    if (!deb) throw new Error(`apt-get download busybox-static left no package in ${IMAGE_CACHE}`);
  }
  const extracted = join(workDir, 'deb');
  mkdirSync(extracted, { recursive: true });
  must('dpkg-deb', ['-x', join(IMAGE_CACHE, deb), extracted]);
  const busybox = join(extracted, 'bin', 'busybox');
  if (!existsSync(busybox)) throw new Error(`${deb} has no bin/busybox`);
  const rootfs = join(workDir, 'rootfs');
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  writeFileSync(join(rootfs, 'bin', 'busybox'), readFileSync(busybox), { mode: 0o755 });
  for (const applet of must(busybox, ['--list']).split('\n')) {
    if (applet && applet !== 'busybox') symlinkSync('busybox', join(rootfs, 'bin', applet));
  }
  rmSync(extracted, { recursive: true, force: true });
  return ociArchive(workDir, rootfs, BUSYBOX_IMAGE, {
    Cmd: ['/bin/sh'],
    Env: ['PATH=/bin'],
  });
}
