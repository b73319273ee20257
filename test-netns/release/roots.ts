/**
 * Minimal Debian 12 roots for the release tests, made once with mmdebstrap and cached outside the repository
 * (CNIKIT_RELEASE_CACHE, default /var/cache/cnikit-release; mirror CNIKIT_DEBIAN_MIRROR, default deb.debian.org):
 *
 *   debian12-amd64-root   minbase + iproute2, iptables, nftables: a node without Node.js, where the amd64 tarball is
 *                         extracted and run under chroot
 *   debian12-arm64-root   the packages linux-image-arm64, busybox-static, iproute2 (and their dependencies) only
 *                         extracted (mmdebstrap's extract variant runs no arm64 maintainer script, so no binfmt is
 *                         needed on this machine): the arm64 VM's kernel, modules and userland
 *
 * A root is built under a temporary name and renamed when complete.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export const CACHE = process.env.CNIKIT_RELEASE_CACHE ?? '/var/cache/cnikit-release';
const MIRROR = process.env.CNIKIT_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error || r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? r.status}):\n${r.stderr}`);
}

function cached(name: string, make: (tmp: string) => void): string {
  mkdirSync(CACHE, { recursive: true });
  const dir = join(CACHE, name);
  if (existsSync(join(dir, 'etc'))) return dir;
  // built under a name of this process; the first complete one to be renamed wins (no lock needed)
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  make(tmp);
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

/** Debian 12 minbase + iproute2 + iptables + nftables for amd64 (no Node.js). */
export function amd64Root(): string {
  return cached('debian12-amd64-root', (tmp) =>
    run('mmdebstrap', [
      '--quiet',
      '--variant=minbase',
      '--architectures=amd64',
      '--include=iproute2,iptables,nftables',
      'bookworm',
      tmp,
      MIRROR,
    ]),
  );
}

/** Debian 12 arm64: kernel + modules (depmod run here), busybox-static and iproute2, extracted only. */
export function arm64Root(): string {
  return cached('debian12-arm64-root', (tmp) => {
    run('mmdebstrap', [
      '--quiet',
      '--variant=extract',
      '--architectures=arm64',
      '--include=linux-image-arm64,busybox-static,iproute2',
      'bookworm',
      tmp,
      MIRROR,
    ]);
    for (const kver of readdirSync(join(tmp, 'lib', 'modules'))) run('depmod', ['-b', tmp, kver]);
    // mount points the VM needs on the read-only shared root (arm64-vm.ts)
    for (const d of ['proc', 'sys', 'dev', 'run', 'job', 'var/lib/cni', 'opt/cni/bin'])
      mkdirSync(join(tmp, d), { recursive: true });
  });
}
