/**
 * The CycloneDX SBOM of `npm run release`: the npm packages the bundle carries (from the bundler's metafile), the
 * Bun runtime, the native addon and the static client with the glibc it links.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { sha256 } from '@cnikit/build';
import { CLIENT_FILE } from '@cnikit/sys/layout';
import type { ArchName } from './release-arch.ts';
import { lockEntry, type PackageJson, ROOT, readJson, type Source } from './release-common.ts';

export function sbomName(arch: ArchName, version: string): string {
  return `cnikit-linux-${arch}-v${version}.cdx.json`;
}

export interface Metafile {
  inputs: Record<string, unknown>;
}

/** The package (name, version, license, dir) a bundled file belongs to: its nearest package.json. */
export function owningPackage(file: string, cache: Map<string, PackageJson & { dir: string }>) {
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

export function purlOf(name: string, version: string): string {
  return `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;
}

export function uuidFrom(hex: string): string {
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
