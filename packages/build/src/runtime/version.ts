/**
 * `cnikit --version`: what an executable is. The version, commit and build date are stamped in at build time (the
 * release takes the date from the commit, so two builds of one commit agree byte for byte); the back-end and the
 * architecture are read from the running process, so the text says what actually runs (a linux/arm64 executable
 * under qemu-user still reports arm64).
 */

/** Build-time facts of an executable (@cnikit/build puts them into the generated entry). */
export interface BuildStamp {
  /** The release version (the single version of the cnikit packages). */
  version: string;
  /** Git commit the executable was built from (40 hex digits), or 'unknown'. */
  commit: string;
  /** True when the work tree had uncommitted changes to tracked files. */
  dirty?: boolean;
  /** Build date, ISO 8601 UTC (the commit date for releases). */
  date: string;
}

/** What the running process is: the back-end (runtime and its version) and the platform/architecture. */
export interface RuntimeFacts {
  backend: string;
  platform: string;
  arch: string;
}

/** The running process's facts: Bun when the Bun global exists (bun --compile), else Node (single executable). */
export function runtimeFacts(): RuntimeFacts {
  const bun = (globalThis as { Bun?: { version?: string } }).Bun;
  const backend = bun ? `bun ${bun.version ?? 'unknown'}` : `node ${process.version.replace(/^v/, '')} (SEA)`;
  return { backend, platform: process.platform, arch: releaseArch(process.arch) };
}

/** Node's architecture name → the name release tarballs use (Go's, like the reference: amd64, arm64, …). */
export function releaseArch(nodeArch: string): string {
  return ({ x64: 'amd64', ia32: '386', arm: 'arm' } as Record<string, string>)[nodeArch] ?? nodeArch;
}

/** The `--version` text: `<name> <version>` then one `key: value` line per fact. */
export function versionText(name: string, stamp: BuildStamp | undefined, rt: RuntimeFacts): string {
  const commit = stamp ? `${stamp.commit}${stamp.dirty ? ' (modified work tree)' : ''}` : 'unknown';
  return [
    `${name} ${stamp?.version ?? 'unknown'}`,
    `commit: ${commit}`,
    `build date: ${stamp?.date ?? 'unknown'}`,
    `back-end: ${rt.backend}`,
    `architecture: ${rt.platform}/${rt.arch}`,
    '',
  ].join('\n');
}
