/**
 * Builds the warm-mode client (client/cnikit-client.c → a static executable) and lays out dist-bin/warm/:
 *
 *   dist-bin/warm/cnikit          hard link to dist-bin/cnikit (the cold executable the client falls back to)
 *   dist-bin/warm/cnikit-client   the client
 *   dist-bin/warm/<plugin>        hard links to cnikit-client, one per plugin
 *
 * `cc -static -Os` with glibc's libc.a (Debian: libc6-dev); no other dependency. Rebuilt only when the source or the
 * compiler changed (stamp next to the output). Run by scripts/build.ts, or alone:
 *   node --import tsx packages/warm/src/build-client.ts [DIST_DIR]
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENT_FILE, EXE_FILE as COLD_FILE, hardLinksOf, placeLink, TOOL_FILE } from '@cnikit/sys/layout';

export { CLIENT_FILE, COLD_FILE };

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CLIENT_SOURCE = join(PKG, 'client', 'cnikit-client.c');
export const CC_FLAGS = ['-static', '-Os', '-s', '-std=gnu11', '-Wall', '-Wextra', '-Werror'];

export interface ClientBuildResult {
  path: string;
  built: boolean;
  size: number;
}

function sha256(s: string | Uint8Array): string {
  return createHash('sha256').update(s).digest('hex');
}

/** Compiles the client to `outFile` unless it is up to date. Throws with the compiler's output on failure. */
export function buildClient(outFile: string, opts: { cc?: string; force?: boolean } = {}): ClientBuildResult {
  const cc = opts.cc ?? process.env.CC ?? 'cc';
  const version = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    throw new Error(
      `C compiler ${JSON.stringify(cc)} not found (${version.error?.message ?? version.stderr}); install gcc and libc6-dev`,
    );
  }
  const inputs = sha256([readFileSync(CLIENT_SOURCE, 'utf8'), version.stdout, CC_FLAGS.join(' ')].join('\n'));
  const stamp = `${outFile}.stamp`;
  if (!opts.force && existsSync(outFile) && existsSync(stamp) && readFileSync(stamp, 'utf8') === inputs) {
    return { path: outFile, built: false, size: statSync(outFile).size };
  }
  mkdirSync(dirname(outFile), { recursive: true });
  const tmp = `${outFile}.tmp-${process.pid}`;
  const r = spawnSync(cc, [...CC_FLAGS, '-o', tmp, CLIENT_SOURCE], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(
      `${cc} ${CC_FLAGS.join(' ')} failed (is libc6-dev installed for static glibc?):\n${r.stderr}${r.error?.message ?? ''}`,
    );
  }
  renameSync(tmp, outFile);
  writeFileSync(stamp, inputs);
  return { path: outFile, built: true, size: statSync(outFile).size };
}

/**
 * Builds the client into `<dist>/warm/` and links it under each plugin name; `<dist>/warm/cnikit` is a hard link of
 * `<dist>/cnikit`. Entries of plugins that no longer exist are removed.
 */
export function layoutWarmDir(
  dist: string,
  plugins: readonly string[],
): { dir: string; client: ClientBuildResult } {
  const dir = join(dist, 'warm');
  mkdirSync(dir, { recursive: true });
  const client = buildClient(join(dir, CLIENT_FILE));
  placeLink(join(dist, COLD_FILE), join(dir, COLD_FILE));
  for (const name of plugins) placeLink(client.path, join(dir, name));
  const clientIno = statSync(client.path).ino;
  for (const entry of readdirSync(dir)) {
    if (entry === CLIENT_FILE || entry === COLD_FILE || plugins.includes(entry) || entry.endsWith('.stamp'))
      continue;
    const st = lstatSync(join(dir, entry));
    if (st.isFile() && (st.ino === clientIno || entry.includes('.tmp-') || entry.startsWith('.cnikit-tmp-')))
      unlinkSync(join(dir, entry));
  }
  return { dir, client };
}

/** Plugin names of a dist-bin directory: the hard links of its cnikit (cnitool excluded: it stays cold). */
export function distPlugins(dist: string): string[] {
  return hardLinksOf(dist, COLD_FILE).filter((n) => n !== TOOL_FILE);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dist = resolve(process.argv[2] ?? join(PKG, '..', '..', 'dist-bin'));
  const { dir, client } = layoutWarmDir(dist, distPlugins(dist));
  process.stderr.write(
    `[build] warm: ${dir}/${CLIENT_FILE} (${client.size} bytes${client.built ? '' : ', unchanged'})\n`,
  );
}
