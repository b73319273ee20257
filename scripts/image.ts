/**
 * The container image of a release (`npm run release` calls buildImage per architecture):
 *
 *   release/cnikit-image-linux-<arch>-v<version>.oci.tar   an OCI image layout in a tar archive (`podman load -i`,
 *                                                          `ctr -n k8s.io images import`), one layer, named
 *                                                          ghcr.io/cnikit/cnikit:v<version>
 *
 * The layer is scratch plus exactly what the executable needs:
 *   /opt/cnikit/cnikit           the release executable (install-cni, serve, every plugin)
 *   /opt/cnikit/cnikit-client    the static warm-mode client that install-cni puts under every plugin name
 *   /opt/cnikit/cnikit-hostns    static helper: runs a program in pid 1's mount namespace (the DaemonSet's serve
 *                                container: the host's own /opt/cni/bin/cnikit with the host's iptables, nft,
 *                                /var/lib/cni and /run/netns — docs/kubernetes.md)
 *   /lib64 or /lib/ld-linux-*, /lib/<triplet>/lib*.so.*   the glibc the executable links (its NEEDED entries, from
 *                                Debian's libc6 on amd64 / libc6-arm64-cross on arm64)
 *   /tmp, /run                   for the addon's extraction (native.ts)
 * No iptables/nft in the image: warm mode runs in the host's mount namespace and uses the host's tools, which is
 * what keeps warm and cold node state identical.
 *
 * Built without a registry and without a container engine: the layer is a reproducible tar (sorted, owner 0/0,
 * mtime = the commit date, gzip -n) and the JSON documents are written here, so two runs give the same bytes like
 * the tarballs (podman/buildah would stamp build times). podman and ctr load it in the tests.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { sha256 } from '@cnikit/build';
import { CC_FLAGS } from '@cnikit/warm/build-client';

export const IMAGE_REPOSITORY = 'ghcr.io/cnikit/cnikit';
export const HOSTNS_SOURCE = join(import.meta.dirname, '..', 'packages', 'warm', 'client', 'cnikit-hostns.c');

export function imageName(arch: string, version: string): string {
  return `cnikit-image-linux-${arch}-v${version}.oci.tar`;
}

export function imageRef(version: string): string {
  return `${IMAGE_REPOSITORY}:v${version}`;
}

interface ImageArch {
  name: 'amd64' | 'arm64';
  cc: string;
  objdump: string;
}

/** Where the glibc of an architecture lives on this (Debian) machine, and where it goes in the image. */
function libcLayout(arch: ImageArch['name']): { src: string; triplet: string; interp: string } {
  return arch === 'amd64'
    ? { src: '/lib/x86_64-linux-gnu', triplet: 'x86_64-linux-gnu', interp: 'lib64/ld-linux-x86-64.so.2' }
    : {
        src: '/usr/aarch64-linux-gnu/lib',
        triplet: 'aarch64-linux-gnu',
        interp: 'lib/ld-linux-aarch64.so.1',
      };
}

function run(cmd: string, args: readonly string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error || r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed: ${r.error?.message ?? ''}${r.stderr ?? ''}`);
  return r.stdout;
}

/** The NEEDED entries of an ELF file. */
export function neededLibs(objdump: string, file: string): string[] {
  return [...run(objdump, ['-p', file]).matchAll(/^\s*NEEDED\s+(\S+)$/gm)].map((m) => m[1] as string);
}

/**
 * A reproducible tar of `names` under `dir` (in that order): GNU format, owner 0/0, every mtime `epoch`, no ACLs,
 * xattrs or SELinux labels. The image layers and the release tarballs (scripts/release.ts) both use it.
 */
export function reproducibleTar(dir: string, names: readonly string[], epoch: number, outFile: string): void {
  run('tar', [
    '--create',
    '--file',
    outFile,
    '--format=gnu',
    '--no-recursion',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    `--mtime=@${epoch}`,
    '--no-acls',
    '--no-xattrs',
    '--no-selinux',
    '-C',
    dir,
    '--',
    ...names,
  ]);
}

/** Every path under `dir`, parents before children, in byte order. */
function walk(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const n of readdirSync(join(dir, prefix)).sort()) {
    const rel = prefix ? `${prefix}/${n}` : n;
    out.push(rel);
    if (statSync(join(dir, rel)).isDirectory()) out.push(...walk(dir, rel));
  }
  return out;
}

export interface ImageResult {
  file: string;
  bytes: number;
  ref: string;
  /** Uncompressed layer bytes. */
  layerBytes: number;
  files: string[];
}

/**
 * Build the image archive of one architecture into `out`. `exe` and `client` are the release's executable and
 * warm client for that architecture; `work` a scratch directory.
 */
export function buildImage(o: {
  arch: ImageArch;
  exe: string;
  client: string;
  license: string;
  version: string;
  epoch: number;
  work: string;
  out: string;
  /** gzip level of the layer (9 for a release; tests may trade size for time). */
  level?: number;
}): ImageResult {
  const root = join(o.work, 'image-root');
  const oci = join(o.work, 'image-oci');
  rmSync(root, { recursive: true, force: true });
  rmSync(oci, { recursive: true, force: true });
  const dir = (rel: string, mode = 0o755) => {
    mkdirSync(join(root, rel), { recursive: true });
    chmodSync(join(root, rel), mode);
  };
  const file = (src: string, rel: string, mode: number) => {
    dir(dirname(rel));
    copyFileSync(src, join(root, rel));
    chmodSync(join(root, rel), mode);
  };
  dir('.');
  dir('opt');
  dir('opt/cnikit');
  dir('tmp', 0o1777);
  dir('run');
  file(o.exe, 'opt/cnikit/cnikit', 0o755);
  file(o.client, 'opt/cnikit/cnikit-client', 0o755);
  file(o.license, 'opt/cnikit/LICENSE', 0o644);
  const hostns = join(o.work, 'cnikit-hostns');
  run(o.arch.cc, [...CC_FLAGS, '-o', hostns, HOSTNS_SOURCE]);
  file(hostns, 'opt/cnikit/cnikit-hostns', 0o755);
  const libc = libcLayout(o.arch.name);
  const interpName = libc.interp.slice(libc.interp.lastIndexOf('/') + 1);
  file(realpathSync(join(libc.src, interpName)), libc.interp, 0o755);
  for (const lib of neededLibs(o.arch.objdump, o.exe)) {
    if (lib === interpName) continue;
    file(realpathSync(join(libc.src, lib)), `lib/${libc.triplet}/${lib}`, 0o644);
  }
  for (const d of ['lib', `lib/${libc.triplet}`, 'lib64'])
    try {
      chmodSync(join(root, d), 0o755);
    } catch {}
  const names = walk(root);

  // the layer: tar.gz, its diff_id the digest of the uncompressed tar
  const layerTar = join(o.work, 'layer.tar');
  reproducibleTar(root, names, o.epoch, layerTar);
  const tarBytes = readFileSync(layerTar);
  const diffId = sha256(tarBytes);
  const gz = spawnSync('gzip', ['-n', `-${o.level ?? 9}`, '-c', layerTar], { maxBuffer: 1 << 30 });
  if (gz.error || gz.status !== 0) throw new Error(`gzip failed: ${gz.error?.message ?? gz.stderr}`);
  rmSync(layerTar, { force: true });
  const layer = gz.stdout as Buffer;
  const blobs = join(oci, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const blob = (b: Buffer) => {
    const h = sha256(b);
    writeFileSync(join(blobs, h), b);
    return { digest: `sha256:${h}`, size: b.length };
  };
  const created = new Date(o.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z');
  const ref = imageRef(o.version);
  const annotations = {
    'org.opencontainers.image.title': 'cnikit',
    'org.opencontainers.image.version': o.version,
    'org.opencontainers.image.licenses': 'Apache-2.0',
    'org.opencontainers.image.source': 'https://github.com/cnikit/cnikit',
    'org.opencontainers.image.created': created,
  };
  const config = Buffer.from(
    JSON.stringify({
      created,
      architecture: o.arch.name,
      os: 'linux',
      config: {
        Env: ['PATH=/opt/cnikit:/usr/sbin:/usr/bin:/sbin:/bin'],
        Cmd: ['/opt/cnikit/cnikit', '--help'],
        WorkingDir: '/',
        Labels: annotations,
      },
      rootfs: { type: 'layers', diff_ids: [`sha256:${diffId}`] },
      history: [{ created, created_by: 'npm run release (scripts/image.ts)' }],
    }),
  );
  const configDesc = { mediaType: 'application/vnd.oci.image.config.v1+json', ...blob(config) };
  const layerDesc = { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...blob(layer) };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: configDesc,
      layers: [layerDesc],
      annotations,
    }),
  );
  const manifestDesc = {
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    ...blob(manifest),
    platform: { architecture: o.arch.name, os: 'linux' },
    annotations: { 'org.opencontainers.image.ref.name': ref, 'io.containerd.image.name': ref },
  };
  writeFileSync(
    join(oci, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [manifestDesc],
    }),
  );
  writeFileSync(join(oci, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  for (const p of [oci, join(oci, 'blobs'), blobs]) chmodSync(p, 0o755);
  for (const f of readdirSync(blobs)) chmodSync(join(blobs, f), 0o644);
  for (const f of ['index.json', 'oci-layout']) chmodSync(join(oci, f), 0o644);
  const outFile = join(o.out, imageName(o.arch.name, o.version));
  const tmp = `${outFile}.tmp-${process.pid}`;
  reproducibleTar(
    oci,
    ['oci-layout', 'index.json', ...walk(oci).filter((n) => n.startsWith('blobs'))],
    o.epoch,
    tmp,
  );
  renameSync(tmp, outFile);
  rmSync(oci, { recursive: true, force: true });
  rmSync(root, { recursive: true, force: true });
  return {
    file: outFile,
    bytes: statSync(outFile).size,
    ref,
    layerBytes: tarBytes.length,
    files: names,
  };
}

/** The release's image: one archive, one tag, both architectures. */
export function imageIndexName(version: string): string {
  return `cnikit-image-v${version}.oci.tar`;
}

export interface ImageIndexResult {
  file: string;
  bytes: number;
  ref: string;
  /** The multi-platform image index's digest (what a registry's tag points at after `skopeo copy --all`). */
  digest: string;
  manifests: { architecture: string; os: string; digest: string }[];
}

/**
 * One multi-architecture image from the per-architecture archives of buildImage: an OCI image layout whose
 * index.json names (org.opencontainers.image.ref.name, io.containerd.image.name) a single image index; that index
 * lists one manifest per architecture with its platform. `ctr -n k8s.io images import` and `podman load` take the
 * platform of the machine from it, `skopeo copy --all` pushes the index and every manifest.
 */
export function buildImageIndex(o: {
  archives: readonly string[];
  version: string;
  epoch: number;
  work: string;
  out: string;
}): ImageIndexResult {
  const oci = join(o.work, 'image-index-oci');
  const blobs = join(oci, 'blobs', 'sha256');
  rmSync(oci, { recursive: true, force: true });
  mkdirSync(blobs, { recursive: true });
  const ref = imageRef(o.version);
  const manifests: Array<Record<string, unknown> & { platform: { architecture: string; os: string } }> = [];
  for (const archive of o.archives) {
    const dir = join(o.work, 'image-index-part');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    run('tar', ['-xf', archive, '-C', dir]);
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as {
      manifests: Array<Record<string, unknown> & { platform?: { architecture: string; os: string } }>;
    };
    if (index.manifests.length !== 1 || !index.manifests[0]?.platform)
      throw new Error(`${archive}: expected one manifest with a platform, got ${index.manifests.length}`);
    const { annotations: _names, ...desc } = index.manifests[0];
    if (manifests.some((m) => m.platform.architecture === desc.platform?.architecture))
      throw new Error(`${archive}: a second image for ${desc.platform?.architecture}`);
    manifests.push(desc as (typeof manifests)[number]);
    for (const f of readdirSync(join(dir, 'blobs', 'sha256')))
      copyFileSync(join(dir, 'blobs', 'sha256', f), join(blobs, f));
    rmSync(dir, { recursive: true, force: true });
  }
  if (manifests.length === 0) throw new Error('buildImageIndex: no archives');
  const order = ['amd64', 'arm64'];
  manifests.sort((a, b) => order.indexOf(a.platform.architecture) - order.indexOf(b.platform.architecture));
  const indexBytes = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests,
      annotations: {
        'org.opencontainers.image.title': 'cnikit',
        'org.opencontainers.image.version': o.version,
        'org.opencontainers.image.created': new Date(o.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z'),
      },
    }),
  );
  const h = sha256(indexBytes);
  writeFileSync(join(blobs, h), indexBytes);
  writeFileSync(
    join(oci, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.index.v1+json',
          digest: `sha256:${h}`,
          size: indexBytes.length,
          annotations: { 'org.opencontainers.image.ref.name': ref, 'io.containerd.image.name': ref },
        },
      ],
    }),
  );
  writeFileSync(join(oci, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  for (const p of [oci, join(oci, 'blobs'), blobs]) chmodSync(p, 0o755);
  for (const f of readdirSync(blobs)) chmodSync(join(blobs, f), 0o644);
  for (const f of ['index.json', 'oci-layout']) chmodSync(join(oci, f), 0o644);
  const outFile = join(o.out, imageIndexName(o.version));
  const tmp = `${outFile}.tmp-${process.pid}`;
  reproducibleTar(
    oci,
    ['oci-layout', 'index.json', ...walk(oci).filter((n) => n.startsWith('blobs'))],
    o.epoch,
    tmp,
  );
  renameSync(tmp, outFile);
  rmSync(oci, { recursive: true, force: true });
  return {
    file: outFile,
    bytes: statSync(outFile).size,
    ref,
    digest: `sha256:${h}`,
    manifests: manifests.map((m) => ({
      architecture: m.platform.architecture,
      os: m.platform.os,
      digest: m.digest as string,
    })),
  };
}
