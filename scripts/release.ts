/**
 * `npm run release`: the release artifacts of the checked-out commit, for linux/amd64 and linux/arm64.
 *
 *   release/cnikit-linux-<arch>-v<version>.tgz        flat, like the reference's cni-plugins-linux-<arch>-v<ver>.tgz:
 *                                                     cnikit, a hard link per plugin name and cnitool, cnikit-client
 *                                                     (warm mode), LICENSE, README.md
 *   release/cnikit-linux-<arch>-v<version>.cdx.json   CycloneDX SBOM of what the executable and the client carry
 *   release/cnikit-image-v<version>.oci.tar     the DaemonSet's image: one OCI image index of every architecture built
 *                                              (scripts/image.ts buildImageIndex; the per-architecture archives stay
 *                                              in build/release/<arch>/)
 *   release/SHA256SUMS                                `sha256sum -c` format
 *
 * Every plugin directory the build finds is in the tarball (discoverPlugins: no list kept here). The executables are
 * `bun build --compile` (the default back-end); arm64 embeds the linux-aarch64 Bun of the npm package
 * @oven/bun-linux-aarch64 (the version of the Bun that compiles, its integrity checked against package-lock.json),
 * and the native addon and the static warm-mode client are cross-compiled with Debian's gcc-aarch64-linux-gnu.
 * Each executable is checked before it is packed (`--list --verify` and `--version`; arm64 through qemu-user).
 *
 * Reproducible: the version comes from package.json (every workspace package must carry the same one), the build
 * date from the commit (SOURCE_DATE_EPOCH overrides), tar entries are sorted with owner 0/0 and that mtime, and gzip
 * leaves out name and time (-n); two runs of one commit give the same bytes (test-netns/release.release.test.ts).
 *
 *   npm run release [-- --arch amd64|arm64 ...] [--out DIR]
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { bundle, compileBun, findBun, listPlugins, loadPlugins, sha256 } from '@cnikit/build';
import type { BuildStamp, PluginMeta } from '@cnikit/build/runtime';
import { TOOL_NAME } from '@cnikit/build/runtime';
import { buildClient, CLIENT_FILE } from '@cnikit/warm/build-client';
import { discoverPlugins, extras } from './build.ts';
import { buildImage, buildImageIndex, reproducibleTar } from './image.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const WORK = join(ROOT, 'build', 'release');
const CACHE = join(ROOT, 'node_modules', '.cache', 'cnikit-release');
const CONDITIONS = ['cnikit-source'];

export type ArchName = 'amd64' | 'arm64';
export const ARCHES: readonly ArchName[] = ['amd64', 'arm64'];

interface ArchSpec {
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

export class ReleaseError extends Error {}

function log(msg: string): void {
  process.stderr.write(`[release] ${msg}\n`);
}

function run(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): string {
  const r = spawnSync(cmd, args, { cwd: opts.cwd, env: opts.env, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw new ReleaseError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new ReleaseError(`${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal}):\n${r.stderr}`);
  return r.stdout;
}

interface PackageJson {
  name: string;
  version: string;
  license?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

/** Every workspace package.json (packages/*, plugins/*), sorted by path. */
export function workspacePackages(root = ROOT): Array<{ dir: string; pkg: PackageJson }> {
  const out: Array<{ dir: string; pkg: PackageJson }> = [];
  for (const base of ['packages', 'plugins']) {
    for (const d of readdirSync(join(root, base)).sort()) {
      const file = join(root, base, d, 'package.json');
      if (existsSync(file)) out.push({ dir: `${base}/${d}`, pkg: readJson<PackageJson>(file) });
    }
  }
  return out;
}

/**
 * The one version of a release: package.json's. Every workspace package must carry it, and every dependency of one
 * cnikit package on another must name exactly it; otherwise the release stops and lists what disagrees.
 */
export function releaseVersion(root = ROOT): string {
  const version = readJson<PackageJson>(join(root, 'package.json')).version;
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version))
    throw new ReleaseError(`package.json version ${JSON.stringify(version)} is not a semantic version`);
  const wrong: string[] = [];
  const ours = new Set(workspacePackages(root).map((w) => w.pkg.name));
  for (const { dir, pkg } of workspacePackages(root)) {
    if (pkg.version !== version) wrong.push(`${dir}/package.json: version ${pkg.version}`);
    for (const [dep, range] of Object.entries({ ...pkg.dependencies, ...pkg.optionalDependencies })) {
      if (ours.has(dep) && range !== version) wrong.push(`${dir}/package.json: ${dep} ${range}`);
    }
  }
  if (wrong.length)
    throw new ReleaseError(
      `every cnikit package must have version ${version} (package.json):\n  ${wrong.join('\n  ')}`,
    );
  return version;
}

export interface Source {
  commit: string;
  dirty: boolean;
  /** Seconds since the epoch: SOURCE_DATE_EPOCH, else the commit date. */
  epoch: number;
}

/** The commit being released, whether tracked files differ from it, and the date every artifact carries. */
export function sourceInfo(root = ROOT, env: NodeJS.ProcessEnv = process.env): Source {
  const commit = run('git', ['-C', root, 'rev-parse', 'HEAD']).trim();
  const dirty = run('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no']).trim() !== '';
  const fromEnv = env.SOURCE_DATE_EPOCH;
  if (fromEnv !== undefined && !/^\d+$/.test(fromEnv))
    throw new ReleaseError(`SOURCE_DATE_EPOCH must be a number of seconds, got ${JSON.stringify(fromEnv)}`);
  const epoch = Number(fromEnv ?? run('git', ['-C', root, 'log', '-1', '--format=%ct', 'HEAD']).trim());
  return { commit, dirty, epoch };
}

export function tarballName(arch: ArchName, version: string): string {
  return `cnikit-linux-${arch}-v${version}.tgz`;
}

export function sbomName(arch: ArchName, version: string): string {
  return `cnikit-linux-${arch}-v${version}.cdx.json`;
}

/** package-lock.json's entry of an installed or platform-optional package (version, integrity). */
function lockEntry(name: string): { version: string; integrity?: string; resolved?: string } | undefined {
  const lock = readJson<{
    packages: Record<string, { version: string; integrity?: string; resolved?: string }>;
  }>(join(ROOT, 'package-lock.json'));
  return lock.packages[`node_modules/${name}`];
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
function nodeHeaders(): string {
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

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
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
    `- \`${CLIENT_FILE}\`: the static warm-mode client (used only after \`scripts/install --warm\`; see docs/warm-mode.md)`,
    '',
    '## Install',
    '',
    '    tar -C /opt/cni/bin -xzf cnikit-linux-' + `${o.arch}-v${o.version}.tgz`,
    '',
    'or, from a checkout of the repository, atomically (every file replaced by rename):',
    '',
    `    scripts/install --from cnikit-linux-${o.arch}-v${o.version}.tgz [--target /opt/cni/bin] [--warm]`,
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

interface Metafile {
  inputs: Record<string, unknown>;
}

/** The package (name, version, license, dir) a bundled file belongs to: its nearest package.json. */
function owningPackage(file: string, cache: Map<string, PackageJson & { dir: string }>) {
  for (let d = dirname(file); d !== dirname(d); d = dirname(d)) {
    const hit = cache.get(d);
    if (hit) return hit;
    const p = join(d, 'package.json');
    if (existsSync(p)) {
      const pkg = { ...readJson<PackageJson>(p), dir: d };
      if (pkg.name) {
        cache.set(d, pkg);
        return pkg;
      }
    }
  }
  return undefined;
}

function purlOf(name: string, version: string): string {
  return `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;
}

function uuidFrom(hex: string): string {
  const h = `${hex.slice(0, 12)}5${hex.slice(13, 16)}${((Number.parseInt(hex[16] as string, 16) & 3) | 8).toString(16)}${hex.slice(17, 32)}`;
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * CycloneDX 1.5 SBOM of one tarball, restricted to what is in it: every package whose files esbuild put into the
 * bundle (from its metafile; Node built-ins are part of the runtime), the Bun runtime the executable is made of
 * (its npm package and the lock's integrity), the native addon (compiled from packages/sys) and the static
 * client with the glibc it links. Timestamp and serial number derive from the commit: the same commit gives the
 * same bytes.
 */
export function sbom(o: {
  version: string;
  arch: ArchName;
  source: Source;
  metafile: Metafile;
  bun: { name: string; version: string };
  addon: string;
  client: string;
  libc: { name: string; version: string };
  files: Array<{ name: string; path: string }>;
  /** The highest GLIBC_ symbol version the dynamic executables need (the client is static). */
  glibcFloor: string | null;
}): string {
  const cache = new Map<string, PackageJson & { dir: string }>();
  const pkgs = new Map<string, PackageJson & { dir: string; files: number }>();
  for (const input of Object.keys(o.metafile.inputs)) {
    if (input.startsWith('<') || input.includes(':')) continue; // generated entry, lazy-builtin shims
    const pkg = owningPackage(resolve(input), cache); // metafile paths are relative to the working directory
    if (!pkg || pkg.dir === ROOT) continue;
    const cur = pkgs.get(pkg.name);
    pkgs.set(pkg.name, { ...pkg, files: (cur?.files ?? 0) + 1 });
  }
  const lockBun = lockEntry(o.bun.name);
  const hashes = (integrity?: string) =>
    integrity?.startsWith('sha512-')
      ? [{ alg: 'SHA-512', content: Buffer.from(integrity.slice(7), 'base64').toString('hex') }]
      : [];
  const byInode = new Map<string, string>(); // hard links are hashed once
  const fileHash = (p: string) => {
    const st = statSync(p);
    const key = `${st.dev}:${st.ino}`;
    const hex = byInode.get(key) ?? sha256(readFileSync(p));
    byInode.set(key, hex);
    return [{ alg: 'SHA-256', content: hex }];
  };
  const components = [
    ...[...pkgs.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((p) => ({
        type: 'library',
        'bom-ref': purlOf(p.name, p.version),
        name: p.name,
        version: p.version,
        purl: purlOf(p.name, p.version),
        ...(p.license ? { licenses: [{ license: { id: p.license } }] } : {}),
        properties: [
          { name: 'cnikit:bundled-files', value: String(p.files) },
          { name: 'cnikit:source', value: relative(ROOT, p.dir) || '.' },
        ],
      })),
    {
      type: 'application',
      'bom-ref': purlOf(o.bun.name, o.bun.version),
      name: o.bun.name,
      version: o.bun.version,
      description: 'Bun runtime the executable is compiled into (bun build --compile)',
      purl: purlOf(o.bun.name, o.bun.version),
      licenses: [{ license: { id: 'MIT' } }],
      hashes: hashes(lockBun?.version === o.bun.version ? lockBun.integrity : undefined),
    },
    {
      type: 'library',
      'bom-ref': 'cnikit:native-addon',
      name: 'cnikit_sys.node',
      version: o.version,
      description: 'N-API addon of @cnikit/sys (packages/sys/src/sys.c), embedded in the executable',
      licenses: [{ license: { id: 'Apache-2.0' } }],
      hashes: fileHash(o.addon),
    },
    {
      type: 'application',
      'bom-ref': 'cnikit:warm-client',
      name: CLIENT_FILE,
      version: o.version,
      description: 'static warm-mode client (packages/warm/client/cnikit-client.c)',
      licenses: [{ license: { id: 'Apache-2.0' } }],
      hashes: fileHash(o.client),
    },
    {
      type: 'library',
      'bom-ref': `pkg:deb/debian/${o.libc.name}@${o.libc.version}`,
      name: o.libc.name,
      version: o.libc.version,
      description: 'GNU C library linked statically into the warm-mode client',
      purl: `pkg:deb/debian/${o.libc.name}@${o.libc.version}`,
      licenses: [{ license: { id: 'LGPL-2.1-or-later' } }],
    },
    ...o.files.map((f) => ({
      type: 'file',
      'bom-ref': `file:${f.name}`,
      name: f.name,
      hashes: fileHash(f.path),
    })),
  ];
  const doc = {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    serialNumber: `urn:uuid:${uuidFrom(sha256(`${o.source.commit}/${o.arch}/${o.version}/${o.source.dirty}`))}`,
    version: 1,
    metadata: {
      timestamp: new Date(o.source.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z'),
      tools: { components: [{ type: 'application', name: 'cnikit scripts/release.ts', version: o.version }] },
      component: {
        type: 'application',
        'bom-ref': 'cnikit',
        name: 'cnikit',
        version: o.version,
        description: `cnikit ${o.version} for linux/${o.arch}, commit ${o.source.commit}${o.source.dirty ? ' (modified work tree)' : ''}`,
        licenses: [{ license: { id: 'Apache-2.0' } }],
        properties: [
          { name: 'cnikit:commit', value: o.source.commit },
          { name: 'cnikit:arch', value: o.arch },
          { name: 'cnikit:glibc-floor', value: o.glibcFloor ?? 'none' },
        ],
      },
    },
    components,
    dependencies: [
      {
        ref: 'cnikit',
        dependsOn: components.filter((c) => c.type !== 'file').map((c) => c['bom-ref']),
      },
    ],
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

export interface ArchResult {
  arch: ArchName;
  tarball: string;
  sbom: string;
  /** The OCI image archive (scripts/image.ts). */
  image: string;
  bytes: number;
  exeBytes: number;
  plugins: string[];
  glibc: Record<string, { floor: string | null; versions: string[] }>;
}

async function releaseArch(
  spec: ArchSpec,
  o: {
    version: string;
    source: Source;
    plugins: ReturnType<typeof discoverPlugins>;
    meta: Record<string, PluginMeta>;
    bunVersion: string;
    out: string;
  },
): Promise<ArchResult> {
  const t0 = performance.now();
  const work = join(WORK, spec.name);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const addon = join(work, 'cnikit_sys.node');
  buildAddon(spec, addon);
  const stamp: BuildStamp = {
    version: o.version,
    commit: o.source.commit,
    ...(o.source.dirty ? { dirty: true } : {}),
    date: new Date(o.source.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z'),
  };
  const metafile = join(work, 'metafile.json');
  const cjs = await bundle({
    plugins: o.plugins.map((p) => ({ name: p.dir, entry: p.index })),
    backend: 'bun',
    addonSha: sha256(readFileSync(addon)),
    meta: o.meta,
    extras: extras(ROOT), // the same entry points as npm run build (cnitool, serve, …)
    stamp,
    outFile: join(work, 'cnikit.cjs'),
    resolveDir: ROOT,
    conditions: CONDITIONS,
    metafile,
  });
  const exe = join(work, 'cnikit');
  const cross = bunFor(spec, o.bunVersion);
  await compileBun({
    bundle: cjs,
    addon,
    outFile: exe,
    ...(cross ? { target: { bunTarget: spec.bunTarget, executable: cross } } : {}),
  });
  // the executable must run and carry exactly the plugins of this tree
  const names = listPlugins(exe, spec.runner);
  const want = o.plugins.map((p) => p.dir).sort();
  if (names.join(',') !== want.join(','))
    throw new ReleaseError(`${spec.name}: executable lists ${names.join(', ')}, expected ${want.join(', ')}`);
  const argv = [...spec.runner, exe];
  const vcmd = argv[0] as string;
  const vpre = argv.slice(1);
  const versionOut = run(vcmd, [...vpre, '--version'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  const selftest = run(vcmd, [...vpre, '--native-selftest'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  if (!/"tid":\d+/.test(selftest)) throw new ReleaseError(`${spec.name}: --native-selftest: ${selftest}`);
  if (
    !versionOut.startsWith(`cnikit ${o.version}\n`) ||
    !versionOut.includes(`architecture: linux/${spec.name}`)
  )
    throw new ReleaseError(`${spec.name}: unexpected --version output:\n${versionOut}`);
  const client = buildClient(join(work, CLIENT_FILE), { cc: spec.cc, force: true }).path;

  // the tarball's tree: one executable, its hard links, the client, LICENSE, README.md
  const stage = join(work, 'stage');
  mkdirSync(stage);
  copyFileSync(exe, join(stage, 'cnikit'));
  chmodSync(join(stage, 'cnikit'), 0o755);
  for (const n of [...names, TOOL_NAME]) linkSync(join(stage, 'cnikit'), join(stage, n));
  copyFileSync(client, join(stage, CLIENT_FILE));
  chmodSync(join(stage, CLIENT_FILE), 0o755);
  copyFileSync(join(ROOT, 'LICENSE'), join(stage, 'LICENSE'));
  writeFileSync(
    join(stage, 'README.md'),
    tarballReadme({ version: o.version, arch: spec.name, commit: o.source.commit, plugins: names }),
  );
  for (const f of ['LICENSE', 'README.md']) chmodSync(join(stage, f), 0o644);
  // cnikit first (the file; the plugin names are link entries to it), then every other name in byte order
  const entries = [
    'cnikit',
    ...readdirSync(stage)
      .filter((n) => n !== 'cnikit')
      .sort(),
  ];
  const tarball = join(o.out, tarballName(spec.name, o.version));
  packTarball(stage, entries, o.source.epoch, tarball);

  const glibc = {
    cnikit: glibcNeeds(spec.objdump, exe),
    'cnikit_sys.node': glibcNeeds(spec.objdump, addon),
  };
  const libcVersion = run('dpkg-query', ['-W', `-f=\${Version}`, spec.libcPackage]).trim();
  const sbomFile = join(o.out, sbomName(spec.name, o.version));
  writeFileSync(
    sbomFile,
    sbom({
      version: o.version,
      arch: spec.name,
      source: o.source,
      metafile: readJson<Metafile>(metafile),
      bun: { name: spec.bunPackage, version: o.bunVersion },
      addon,
      client,
      libc: { name: spec.libcPackage.replace(/-(amd64|arm64)-cross$/, ''), version: libcVersion },
      files: entries.map((n) => ({ name: n, path: join(stage, n) })),
      glibcFloor: maxVersion([glibc.cnikit.floor, glibc['cnikit_sys.node'].floor]),
    }),
  );
  const image = buildImage({
    arch: { name: spec.name, cc: spec.cc, objdump: spec.objdump },
    exe,
    client,
    license: join(ROOT, 'LICENSE'),
    version: o.version,
    epoch: o.source.epoch,
    work,
    out: work,
  });
  log(`${relative(ROOT, image.file)}: ${(image.bytes / 1e6).toFixed(1)} MB (${image.ref})`);
  const bytes = statSync(tarball).size;
  log(
    `${relative(ROOT, tarball)}: ${(bytes / 1e6).toFixed(1)} MB (executable ${(statSync(exe).size / 1e6).toFixed(1)} MB), ` +
      `${names.length} plugins, glibc ≥ ${maxVersion([glibc.cnikit.floor, glibc['cnikit_sys.node'].floor])} ` +
      `(executable ${glibc.cnikit.floor}, addon ${glibc['cnikit_sys.node'].floor}), ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return {
    arch: spec.name,
    tarball,
    sbom: sbomFile,
    image: image.file,
    bytes,
    exeBytes: statSync(exe).size,
    plugins: names,
    glibc,
  };
}

/** `sha256sum -c` lines for every file, sorted by name. */
export function sha256sums(dir: string, files: readonly string[]): string {
  return [...files]
    .map((f) => relative(dir, f))
    .sort()
    .map((f) => `${sha256(readFileSync(join(dir, f)))}  ${f}\n`)
    .join('');
}

export interface ReleaseOptions {
  arches: ArchName[];
  out: string;
}

export function parseReleaseArgs(argv: readonly string[]): ReleaseOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: { arch: { type: 'string', multiple: true }, out: { type: 'string' } },
  });
  const arches = (values.arch ?? [...ARCHES]) as ArchName[];
  for (const a of arches)
    if (!ARCHES.includes(a))
      throw new ReleaseError(`unknown --arch ${JSON.stringify(a)} (${ARCHES.join(' | ')})`);
  return { arches: [...new Set(arches)], out: values.out ?? join(ROOT, 'release') };
}

export async function release(opts: ReleaseOptions): Promise<ArchResult[]> {
  const t0 = performance.now();
  const version = releaseVersion();
  const source = sourceInfo();
  if (source.dirty) log(`warning: tracked files differ from ${source.commit}; the artifacts say so`);
  if (!existsSync(join(ROOT, 'LICENSE'))) throw new ReleaseError('LICENSE missing at the repository root');
  const plugins = discoverPlugins(ROOT);
  if (plugins.length === 0) throw new ReleaseError('no plugins found (plugins/*/src/index.ts)');
  log(`cnikit ${version}, commit ${source.commit.slice(0, 12)}${source.dirty ? '+modified' : ''}`);
  log(`plugins: ${plugins.map((p) => p.dir).join(', ')}`);
  const loaded = await loadPlugins(
    plugins.map((p) => p.index),
    { workDir: join(WORK, 'meta'), conditions: CONDITIONS },
  );
  const meta: Record<string, PluginMeta> = {};
  for (const [i, p] of plugins.entries()) {
    if (loaded[i]?.name !== p.dir)
      throw new ReleaseError(
        `plugins/${p.dir}/src/index.ts must export \`plugin\` named ${JSON.stringify(p.dir)}`,
      );
    meta[p.dir] = loaded[i].meta;
  }
  const bunVersion = run(findBun(), ['--version']).trim();
  // a fresh directory: only this run's artifacts end up in it
  const out = opts.out;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const results: ArchResult[] = [];
  for (const arch of opts.arches) {
    results.push(await releaseArch(archSpec(arch), { version, source, plugins, meta, bunVersion, out }));
  }
  const index = buildImageIndex({
    archives: results.map((r) => r.image),
    version,
    epoch: source.epoch,
    work: WORK,
    out,
  });
  log(
    `${relative(ROOT, index.file)}: ${(index.bytes / 1e6).toFixed(1)} MB (${index.ref}: ${index.manifests.map((m) => `${m.os}/${m.architecture}`).join(', ')}; index ${index.digest})`,
  );
  const files = [...results.flatMap((r) => [r.tarball, r.sbom]), index.file];
  writeFileSync(join(out, 'SHA256SUMS'), sha256sums(out, files));
  log(`${relative(ROOT, out) || out}/SHA256SUMS; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`);
  return results;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  Promise.resolve()
    .then(() => release(parseReleaseArgs(process.argv.slice(2))))
    .catch((err: Error) => {
      process.stderr.write(`[release] error: ${err.message}\n`);
      process.exitCode = 1;
    });
}
