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
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  bundle,
  compileBunModule,
  entrySource,
  findBun,
  listPlugins,
  loadPlugins,
  sha256,
} from '@cnikit/build';
import type { BuildStamp, PluginMeta } from '@cnikit/build/runtime';
import { TOOL_NAME } from '@cnikit/build/runtime';
import { CLIENT_FILE } from '@cnikit/sys/layout';
import { buildClient } from '@cnikit/warm/build-client';
import { discoverPlugins, extras } from './build.ts';
import { buildImage, buildImageIndex } from './image.ts';
import {
  ARCHES,
  type ArchName,
  type ArchSpec,
  archSpec,
  buildAddon,
  bunFor,
  glibcNeeds,
  maxVersion,
} from './release-arch.ts';
import {
  CONDITIONS,
  log,
  type PackageJson,
  ReleaseError,
  ROOT,
  readJson,
  run,
  type Source,
  WORK,
} from './release-common.ts';
import { type Metafile, sbom, sbomName } from './release-sbom.ts';
import { packTarball, sha256sums, tarballName, tarballReadme } from './release-tarball.ts';

export {
  ARCHES,
  ARM64_SYSROOT,
  type ArchName,
  archSpec,
  buildAddon,
  bunFor,
  glibcNeeds,
  maxVersion,
} from './release-arch.ts';
export { ReleaseError, ROOT, type Source } from './release-common.ts';
export { sbom, sbomName } from './release-sbom.ts';
export { packTarball, sha256sums, tarballName, tarballReadme } from './release-tarball.ts';

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
  const plugins = o.plugins.map((p) => ({ name: p.dir, entry: p.index }));
  const entryOpts = {
    backend: 'bun' as const,
    addonSha: sha256(readFileSync(addon)),
    meta: o.meta,
    extras: extras(ROOT), // the same entry points as npm run build (cnitool, serve, …)
    stamp,
    name: 'cnikit',
  };
  // esbuild's bundle of the same entry: its metafile lists the files the executable carries (the SBOM)
  await bundle({
    plugins,
    ...entryOpts,
    outFile: join(work, 'cnikit.cjs'),
    resolveDir: ROOT,
    conditions: CONDITIONS,
    metafile,
  });
  // the executable as npm run build makes it: Bun's bundler with code splitting (a plugin's code loads at its call)
  const exe = join(work, 'cnikit');
  const entry = join(work, 'cnikit-entry.ts');
  writeFileSync(entry, entrySource(plugins, entryOpts));
  const cross = bunFor(spec, o.bunVersion);
  await compileBunModule({
    entry,
    addon,
    outFile: exe,
    workDir: work,
    conditions: CONDITIONS,
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
