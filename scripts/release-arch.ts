/**
 * The per-architecture side of `npm run release`: the tool chain of linux/amd64 and linux/arm64 (compiler, objdump,
 * libc package, qemu-user runner), the Bun embedded for a foreign architecture, the native addon compiled for it,
 * and the glibc floor an executable needs.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { CACHE, lockEntry, log, ReleaseError, ROOT, readJson, run } from './release-common.ts';

export type ArchName = 'amd64' | 'arm64';
export const ARCHES: readonly ArchName[] = ['amd64', 'arm64'];

export interface ArchSpec {
  name: ArchName;
  /** Node's name (process.arch) and Bun's platform package suffix. */
  nodeArch: string;
  bunPackage: string;
  bunTarget: string;
  /** C compiler for the addon and the client; objdump for the glibc floor. */
  cc: string;
  objdump: string;
  /** Debian package of the glibc the static client links (its version goes into the SBOM). */
  libcPackage: string;
  /** Prefix that runs one of its executables on this machine (qemu-user for arm64 on amd64). */
  runner: string[];
}

/** Where qemu-user finds the arm64 dynamic loader and libc (Debian's libc6-arm64-cross). */
export const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';

export function archSpec(name: ArchName, host = process.arch): ArchSpec {
  if (name === 'amd64') {
    return {
      name,
      nodeArch: 'x64',
      bunPackage: '@oven/bun-linux-x64',
      bunTarget: 'bun-linux-x64',
      cc: host === 'x64' ? 'cc' : 'x86_64-linux-gnu-gcc',
      objdump: host === 'x64' ? 'objdump' : 'x86_64-linux-gnu-objdump',
      libcPackage: host === 'x64' ? 'libc6-dev' : 'libc6-dev-amd64-cross',
      runner: host === 'x64' ? [] : ['qemu-x86_64-static', '-L', '/usr/x86_64-linux-gnu'],
    };
  }
  return {
    name,
    nodeArch: 'arm64',
    bunPackage: '@oven/bun-linux-aarch64',
    bunTarget: 'bun-linux-arm64',
    cc: host === 'arm64' ? 'cc' : 'aarch64-linux-gnu-gcc',
    objdump: host === 'arm64' ? 'objdump' : 'aarch64-linux-gnu-objdump',
    libcPackage: host === 'arm64' ? 'libc6-dev' : 'libc6-dev-arm64-cross',
    runner: host === 'arm64' ? [] : ['qemu-aarch64-static', '-L', ARM64_SYSROOT],
  };
}

/**
 * The Bun executable that is embedded for `spec` (same version as the compiling Bun): the host's own, or the
 * platform package fetched once with `npm pack` into node_modules/.cache, its sha512 checked against
 * package-lock.json's integrity before it is unpacked.
 */
export function bunFor(spec: ArchSpec, bunVersion: string): string | undefined {
  if (spec.nodeArch === process.arch) return undefined; // the compiling Bun itself
  const dir = join(CACHE, `${spec.bunPackage.replace('/', '+')}-${bunVersion}`);
  const exe = join(dir, 'package', 'bin', 'bun');
  if (existsSync(exe)) return exe;
  mkdirSync(CACHE, { recursive: true });
  const spec0 = `${spec.bunPackage}@${bunVersion}`;
  log(`fetching ${spec0} (npm pack)`);
  const packed = JSON.parse(run('npm', ['pack', spec0, '--json', '--pack-destination', CACHE])) as Array<{
    filename: string;
    integrity: string;
  }>;
  const tgz = join(CACHE, packed[0]?.filename ?? '');
  const lock = lockEntry(spec.bunPackage);
  const actual = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  if (lock?.version === bunVersion && lock.integrity && lock.integrity !== actual)
    throw new ReleaseError(`${spec0}: sha512 ${actual} differs from package-lock.json's ${lock.integrity}`);
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  run('tar', ['-xzf', tgz, '-C', tmp]);
  rmSync(tgz, { force: true });
  renameSync(tmp, dir);
  return exe;
}

/** The include directory with node_api.h: the running Node's own headers, else node-gyp's download of them. */
export function nodeHeaders(): string {
  const prefix = dirname(dirname(process.execPath));
  const candidates = [
    join(prefix, 'include', 'node'),
    join(process.env.HOME ?? '/root', '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ];
  const found = candidates.find((d) => existsSync(join(d, 'node_api.h')));
  if (!found) throw new ReleaseError(`node_api.h not found (tried ${candidates.join(', ')})`);
  return found;
}

/**
 * The native addon of @cnikit/sys for one architecture, compiled directly with the flags of its binding.gyp (one C
 * file, pure N-API: no node-gyp configuration per target needed). Paths are mapped so the output does not depend on
 * where the repository lies.
 */
export function buildAddon(spec: ArchSpec, outFile: string): void {
  const pkg = join(ROOT, 'packages', 'sys');
  const gyp = readJson<{ targets: Array<{ sources: string[]; cflags: string[]; defines: string[] }> }>(
    join(pkg, 'binding.gyp'),
  );
  const t = gyp.targets[0];
  if (!t) throw new ReleaseError('packages/sys/binding.gyp has no target');
  mkdirSync(dirname(outFile), { recursive: true });
  run(
    spec.cc,
    [
      '-shared',
      '-fPIC',
      '-pthread',
      ...t.cflags,
      ...t.defines.map((d) => `-D${d}`),
      `-ffile-prefix-map=${ROOT}=.`,
      '-include',
      join(pkg, 'src', 'glibc-floor.h'),
      '-I',
      nodeHeaders(),
      '-s',
      '-o',
      outFile,
      ...t.sources.map((s) => join(pkg, s)),
      '-Wl,--no-as-needed',
      '-l:libpthread.so.0',
    ],
    { cwd: pkg },
  );
}

/** The GLIBC_x.y symbol versions an ELF file needs (`objdump -T`), and the highest of them. */
export function glibcNeeds(objdump: string, file: string): { versions: string[]; floor: string | null } {
  const out = run(objdump, ['-T', file]);
  const set = new Set<string>();
  for (const m of out.matchAll(/\bGLIBC_(\d+(?:\.\d+)+)\b/g)) set.add(m[1] as string);
  const versions = [...set].sort(compareVersions);
  return { versions, floor: versions.at(-1) ?? null };
}

/** The highest of some dotted versions (null when there is none). */
export function maxVersion(vs: ReadonlyArray<string | null>): string | null {
  return (
    vs
      .filter((v): v is string => v !== null)
      .sort(compareVersions)
      .at(-1) ?? null
  );
}

export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
