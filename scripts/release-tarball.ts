/**
 * The release tarball of `npm run release`: its name, its README.md, the reproducible flat .tgz (sorted entries,
 * owner 0/0, the commit's mtime, gzip -n) and SHA256SUMS.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { sha256 } from '@cnikit/build';
import { TOOL_NAME } from '@cnikit/build/runtime';
import { CLIENT_FILE } from '@cnikit/sys/layout';
import { reproducibleTar } from './image.ts';
import type { ArchName } from './release-arch.ts';
import { ReleaseError } from './release-common.ts';

export function tarballName(arch: ArchName, version: string): string {
  return `cnikit-linux-${arch}-v${version}.tgz`;
}

/** The short README.md inside each tarball. */
export function tarballReadme(o: {
  version: string;
  arch: ArchName;
  commit: string;
  plugins: string[];
}): string {
  return [
    `# cnikit ${o.version} for linux/${o.arch}`,
    '',
    'CNI plugins (drop-in replacements for the containernetworking/plugins reference set) in one self-contained',
    'executable: no Node.js or other runtime is needed on the node.',
    '',
    `Commit: ${o.commit}`,
    '',
    '## Contents',
    '',
    '- `cnikit`: the multicall executable (`cnikit --version`, `cnikit --help`)',
    `- ${o.plugins.map((p) => `\`${p}\``).join(', ')}: hard links to \`cnikit\`; the name selects the plugin`,
    `- \`${TOOL_NAME}\`: hard link to \`cnikit\` that runs the cnitool CLI`,
    `- \`${CLIENT_FILE}\`: the static warm-mode client (the plugin names link to it in warm mode; see docs/warm-mode.md)`,
    '',
    '## Install',
    '',
    '    tar -C /opt/cni/bin -xzf cnikit-linux-' + `${o.arch}-v${o.version}.tgz`,
    '',
    'or, from a checkout of the repository, atomically (every file replaced by rename):',
    '',
    `    scripts/install --from cnikit-linux-${o.arch}-v${o.version}.tgz [--target /opt/cni/bin] [--no-warm]`,
    '',
    'Where systemd runs the host this installs warm mode (cnikit.socket enabled: systemd starts `cnikit serve` on the',
    'first plugin call); --no-warm keeps it cold, --cold switches back and removes what it enabled.',
    '',
    'Verify the download first with `sha256sum -c SHA256SUMS --ignore-missing`.',
    '',
    'License: Apache-2.0 (LICENSE).',
    '',
  ].join('\n');
}

/**
 * A reproducible .tgz of `names` in `dir`, in the given order (the caller puts `cnikit` first, so it is the regular
 * file and every plugin name a hard-link entry to it): GNU tar, owner/group 0 (numeric), every mtime set to
 * `epoch`, no ACLs/xattrs; gzip -n (no name, no time) at level 9.
 */
export function packTarball(dir: string, names: readonly string[], epoch: number, outFile: string): void {
  const tar = `${outFile}.tar.tmp-${process.pid}`;
  const tmp = `${outFile}.tmp-${process.pid}`;
  try {
    reproducibleTar(dir, names, epoch, tar);
    const fd = openSync(tmp, 'w', 0o644);
    try {
      const r = spawnSync('gzip', ['-n', '-9', '-c', tar], {
        stdio: ['ignore', fd, 'pipe'],
        encoding: 'utf8',
      });
      if (r.error || r.status !== 0) throw new ReleaseError(`gzip failed: ${r.error?.message ?? r.stderr}`);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, outFile);
  } finally {
    rmSync(tar, { force: true });
    rmSync(tmp, { force: true });
  }
}

/** `sha256sum -c` lines for every file, sorted by name. */
export function sha256sums(dir: string, files: readonly string[]): string {
  return [...files]
    .map((f) => relative(dir, f))
    .sort()
    .map((f) => `${sha256(readFileSync(join(dir, f)))}  ${f}\n`)
    .join('');
}
