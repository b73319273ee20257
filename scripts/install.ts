/**
 * scripts/install [--dry-run] [--target DIR] [--source DIR] [--backend bun|sea]
 *
 * Installs the multicall executable into DIR (default /opt/cni/bin) as DIR/cnikit, then one hard link per plugin
 * name (DIR/bridge, DIR/loopback, …) and DIR/cnitool (the cnitool CLI) — the same layout as dist-bin/ — and the warm
 * client DIR/cnikit-client (dist-bin/warm/cnikit-client) when the build has it: every file of the build goes in, so
 * the installed `cnikit install-cni --warm` or a later `scripts/install --warm` finds the client beside cnikit.
 * Cold or warm only decides what the plugin names link to.
 *
 * - Atomic: every file is written under a temporary name inside DIR (same filesystem), fsynced, then renamed over
 *   the old name, so a runtime executing DIR/bridge at that moment sees the old or the new file, never a partial one.
 *   The hard links are created the same way (link to a temporary name, rename).
 * - Never deletes anything it did not create: only DIR/cnikit and DIR/<plugin> for our plugin names are replaced;
 *   every other file is left untouched (and counted in the plan).
 * - --dry-run prints the plan and changes nothing.
 * - A target that cannot be written is refused up front with a clear message (exit 1).
 * - --backend picks the executable of one back-end (dist-bin/<backend>/cnikit) instead of the default one
 *   (dist-bin/cnikit); the plugin names still come from the links in dist-bin/.
 * - --from TARBALL installs a release tarball (npm run release) the same way, with or without --warm: it is checked
 *   against the SHA256SUMS beside it when there is one, must be flat, and is unpacked into a private temporary
 *   directory first (stageTarball); nothing is written into the target before every file is complete. Every file
 *   of the tarball goes into the target (cnikit, its links, cnitool, cnikit-client, LICENSE, README.md), cold or warm.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fsyncDir, tmpName } from '@cnikit/sys/atomic';
import { CLIENT_FILE, EXE_FILE, hardLinksOf, placeCopy, placeLink, TOOL_FILE } from '@cnikit/sys/layout';
import { modeCli } from '@cnikit/warm/install';
import { coldDisables, daemonReload, defaultPlan, disableSocket, enableSocket } from './install-default.ts';

export const MAIN = EXE_FILE;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface InstallOptions {
  source: string;
  target: string;
  dryRun: boolean;
  /** Install dist-bin/<backend>/cnikit instead of dist-bin/cnikit. */
  backend?: 'bun' | 'sea';
  /** Plain files copied as they are (mode kept) beside cnikit: the tarball's LICENSE and README.md. */
  extras?: readonly Extra[];
  out: (line: string) => void;
}

/** A file installed as a copy of `src` under `name` in the target. */
export interface Extra {
  name: string;
  src: string;
}

export interface PlanStep {
  name: string;
  action: 'install' | 'replace' | 'unchanged' | 'link' | 'relink';
  detail: string;
}

export class InstallError extends Error {}

/** Plugin names in `source`: the files that are hard links of source/cnikit (same inode). */
export function sourcePlugins(source: string): string[] {
  const main = join(source, MAIN);
  let ino: number;
  try {
    const st = statSync(main);
    if (!st.isFile()) throw new Error('not a file');
    ino = st.ino;
  } catch {
    throw new InstallError(`${main} not found: run \`npm run build\` first`);
  }
  return hardLinksOf(source, MAIN, ino);
}

function hashFile(p: string): string {
  return createHash('sha256').update(readFileSync(p)).digest('hex');
}

function fileState(p: string): ReturnType<typeof lstatSync> | undefined {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

/** The executable to install: dist-bin/cnikit, or dist-bin/<backend>/cnikit. */
export function sourceMain(source: string, backend?: string): string {
  const p = backend ? join(source, backend, MAIN) : join(source, MAIN);
  if (!existsSync(p)) throw new InstallError(`${p} not found: run \`npm run build\` first`);
  return p;
}

/**
 * The files copied beside cnikit: the build's warm client (dist-bin/warm/cnikit-client, also laid out so by
 * stageTarball) and the given extras.
 */
export function sourceExtras(source: string, extras: readonly Extra[] = []): Extra[] {
  const client = join(source, 'warm', CLIENT_FILE);
  return [...(existsSync(client) ? [{ name: CLIENT_FILE, src: client }] : []), ...extras];
}

export function plan(
  source: string,
  target: string,
  backend?: 'bun' | 'sea',
  extras: readonly Extra[] = [],
): { steps: PlanStep[]; others: string[]; createDir: boolean; copies: Extra[] } {
  const names = sourcePlugins(source);
  const createDir = !existsSync(target);
  const steps: PlanStep[] = [];
  const srcMain = sourceMain(source, backend);
  const dstMain = join(target, MAIN);
  const cur = createDir ? undefined : fileState(dstMain);
  let mainChanges = true;
  if (!cur) steps.push({ name: MAIN, action: 'install', detail: `copy ${srcMain}` });
  else if (cur.isFile() && cur.size === statSync(srcMain).size && hashFile(dstMain) === hashFile(srcMain)) {
    steps.push({ name: MAIN, action: 'unchanged', detail: 'same content' });
    mainChanges = false;
  } else steps.push({ name: MAIN, action: 'replace', detail: `copy ${srcMain} over the existing file` });
  const mainIno = cur?.ino;
  for (const n of names) {
    const st = createDir ? undefined : fileState(join(target, n));
    if (!st) steps.push({ name: n, action: 'link', detail: `hard link to ${MAIN}` });
    else if (!mainChanges && st.ino === mainIno)
      steps.push({ name: n, action: 'unchanged', detail: `already a link to ${MAIN}` });
    else if (st.ino === mainIno)
      steps.push({ name: n, action: 'relink', detail: `update the link to the new ${MAIN}` });
    else {
      const what = st.isSymbolicLink() ? 'symlink' : st.isFile() ? `file of ${st.size} bytes` : 'entry';
      steps.push({ name: n, action: 'relink', detail: `replace existing ${what} by a hard link to ${MAIN}` });
    }
  }
  const copies = sourceExtras(source, extras);
  for (const c of copies) {
    const st = createDir ? undefined : fileState(join(target, c.name));
    if (!st) steps.push({ name: c.name, action: 'install', detail: `copy ${c.src}` });
    else if (
      st.isFile() &&
      st.size === statSync(c.src).size &&
      hashFile(join(target, c.name)) === hashFile(c.src)
    )
      steps.push({ name: c.name, action: 'unchanged', detail: 'same content' });
    else steps.push({ name: c.name, action: 'replace', detail: `copy ${c.src} over the existing file` });
  }
  const ours = new Set([MAIN, ...names, ...copies.map((c) => c.name)]);
  const others = createDir
    ? []
    : readdirSync(target).filter((n) => !ours.has(n) && !n.startsWith('.cnikit-tmp-'));
  return { steps, others, createDir, copies };
}

/** Copy src to dst atomically: O_EXCL temp file in dst's directory, write, fsync, rename. */
export function copyAtomic(src: string, dst: string, mode = 0o755): void {
  placeCopy(src, dst, mode);
}

/** Throws InstallError when `target` (or the directory that would hold it) cannot be written. */
export function checkWritable(target: string): void {
  let dir = target;
  while (!existsSync(dir)) {
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  const st = statSync(dir);
  if (!st.isDirectory()) throw new InstallError(`cannot install into ${target}: ${dir} is not a directory`);
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EROFS'
        ? 'it is on a read-only file system'
        : `it is not writable by uid ${process.getuid?.()} (${code}; run as root, or pick another --target)`;
    throw new InstallError(`cannot install into ${target}: ${why}`);
  }
  // access() ignores read-only mounts in some cases; probe with a real file.
  if (dir === target) {
    const probe = tmpName(target, 'probe');
    try {
      closeSync(openSync(probe, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
      unlinkSync(probe);
    } catch (err) {
      throw new InstallError(`cannot install into ${target}: ${(err as Error).message}`);
    }
  }
}

/** mkdir -p without relying on recursive mkdir (which spins on some pseudo filesystems). */
function mkdirParents(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; !existsSync(d); d = dirname(d)) {
    missing.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing) {
    try {
      mkdirSync(d, { mode: 0o755 });
    } catch (err) {
      throw new InstallError(`cannot create ${d}: ${(err as Error).message}`);
    }
  }
}

export function install(opts: InstallOptions): PlanStep[] {
  const source = resolve(opts.source);
  const target = resolve(opts.target);
  const p = plan(source, target, opts.backend, opts.extras);
  const say = opts.out;
  const srcMain = sourceMain(source, opts.backend);
  say(`${opts.dryRun ? 'would install' : 'installing'} ${srcMain} into ${target}`);
  if (p.createDir) say(`  create directory ${target}`);
  for (const s of p.steps) say(`  ${s.action.padEnd(9)} ${s.name}: ${s.detail}`);
  if (p.others.length) say(`  ${p.others.length} other file(s) left untouched: ${p.others.join(', ')}`);
  checkWritable(target);
  if (opts.dryRun) return p.steps;
  if (p.createDir) mkdirParents(target);
  const main = join(target, MAIN);
  if (p.steps[0]?.action !== 'unchanged') copyAtomic(srcMain, main);
  const copied = new Map(p.copies.map((c) => [c.name, c.src]));
  for (const s of p.steps.slice(1)) {
    if (s.action === 'unchanged') continue;
    const src = copied.get(s.name);
    if (src !== undefined) copyAtomic(src, join(target, s.name), statSync(src).mode & 0o777);
    else placeLink(main, join(target, s.name));
  }
  fsyncDir(target);
  say(`done: ${p.steps.filter((s) => s.action !== 'unchanged').length} change(s)`);
  return p.steps;
}

/** stdout line writer that tolerates a closed pipe (`scripts/install --dry-run | head`). */
function printLine(line: string): void {
  try {
    writeSync(1, `${line}\n`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
  }
}

const USAGE =
  'usage: scripts/install [--dry-run] [--root DIR] [--no-warm] [--target DIR] [--source DIR] [--backend bun|sea]\n' +
  '       (warm mode with systemd socket activation when systemd runs the host, else cold; --no-warm or --no-socket: cold)\n' +
  '       scripts/install --from cnikit-linux-<arch>-v<version>.tgz [--warm] [--target DIR] [--dry-run]   (a release tarball)\n' +
  '       scripts/install --warm|--cold [--target DIR] [--systemd-dir DIR] [--socket PATH] [--dry-run]   (warm mode: packages/warm)\n';

export function parseArgs(argv: string[]): InstallOptions | 'help' {
  const opts: InstallOptions = {
    source: join(ROOT, 'dist-bin'),
    target: '/opt/cni/bin',
    dryRun: false,
    out: printLine,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const value = (flag: string) => {
      const eq = a.indexOf('=');
      if (eq >= 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (!v) throw new InstallError(`${flag} needs a value\n${USAGE}`);
      return v;
    };
    if (a === '--dry-run' || a === '-n') opts.dryRun = true;
    else if (a === '--target' || a.startsWith('--target=')) opts.target = value('--target');
    else if (a === '--source' || a.startsWith('--source=')) opts.source = value('--source');
    else if (a === '--backend' || a.startsWith('--backend=')) {
      const b = value('--backend');
      if (b !== 'bun' && b !== 'sea')
        throw new InstallError(`--backend must be bun or sea, got ${JSON.stringify(b)}\n${USAGE}`);
      opts.backend = b;
    } else if (a === '--help' || a === '-h') return 'help';
    else throw new InstallError(`unknown argument ${JSON.stringify(a)}\n${USAGE}`);
  }
  return opts;
}

/** A file name of a flat release tarball: no directory, nothing hidden, no path tricks. */
const TARBALL_ENTRY = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * `--from TARBALL`: a release tarball (npm run release) unpacked into a private temporary directory laid out like
 * dist-bin/ (cnikit and its hard links; warm/ with the client under each plugin name), so the install below is the
 * same atomic one. When a SHA256SUMS file lies beside the tarball, the tarball must match its line. Returns the
 * directory; the caller removes it.
 */
export function stageTarball(tarball: string, say: (line: string) => void): string {
  const file = resolve(tarball);
  if (!existsSync(file)) throw new InstallError(`${file} not found`);
  const sums = join(dirname(file), 'SHA256SUMS');
  if (existsSync(sums)) {
    const name = file.slice(dirname(file).length + 1);
    const line = readFileSync(sums, 'utf8')
      .split('\n')
      .find((l) => l.endsWith(`  ${name}`));
    if (!line) throw new InstallError(`${sums} has no line for ${name}`);
    if (line.slice(0, 64) !== hashFile(file))
      throw new InstallError(`${name} does not match its SHA256SUMS line: corrupt or replaced download`);
    say(`${name}: SHA256 matches ${sums}`);
  } else say(`note: no SHA256SUMS beside ${file}; its checksum is not verified`);
  const list = spawnSync('tar', ['-tzf', file], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (list.status !== 0) throw new InstallError(`${file} is not a readable .tgz: ${list.stderr.trim()}`);
  const entries = list.stdout.split('\n').filter(Boolean);
  const bad = entries.filter((e) => !TARBALL_ENTRY.test(e));
  if (bad.length)
    throw new InstallError(`${file} is not a flat cnikit release tarball (entries ${bad.join(', ')})`);
  if (!entries.includes(MAIN)) throw new InstallError(`${file} has no ${MAIN}`);
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-install-'));
  const x = spawnSync('tar', ['-xzf', file, '-C', dir, '--no-same-owner', '--', ...entries], {
    encoding: 'utf8',
  });
  if (x.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new InstallError(`cannot unpack ${file}: ${x.stderr.trim()}`);
  }
  // warm/: the client under every plugin name (not cnitool: it stays cold), as the build lays it out
  if (entries.includes(CLIENT_FILE)) {
    mkdirSync(join(dir, 'warm'));
    linkSync(join(dir, CLIENT_FILE), join(dir, 'warm', CLIENT_FILE));
    for (const n of sourcePlugins(dir).filter((n) => n !== TOOL_FILE))
      linkSync(join(dir, 'warm', CLIENT_FILE), join(dir, 'warm', n));
  }
  return dir;
}

/**
 * The tarball's plain files that are neither cnikit, nor one of its links, nor the client (those three are laid out
 * by stageTarball and installed as a build's are): LICENSE, README.md, and whatever a later release adds.
 */
export function tarballExtras(dir: string): Extra[] {
  const links = new Set([MAIN, ...sourcePlugins(dir), CLIENT_FILE]);
  return readdirSync(dir)
    .filter((n) => !links.has(n) && TARBALL_ENTRY.test(n) && lstatSync(join(dir, n)).isFile())
    .sort()
    .map((n) => ({ name: n, src: join(dir, n) }));
}

/** A word of a printed command line, quoted for a POSIX shell when it needs to be. */
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

export function cli(argv: string[], staged?: { dir: string; given: readonly string[] }): number {
  const from = argv.findIndex((a) => a === '--from' || a.startsWith('--from='));
  if (from >= 0) {
    const arg = argv[from] as string;
    const tarball = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[from + 1];
    const rest = argv.filter((_, i) => i !== from && (arg.includes('=') || i !== from + 1));
    if (!tarball) {
      process.stderr.write(`install: --from needs a tarball\n${USAGE}`);
      return 1;
    }
    if (rest.some((a) => a === '--source' || a.startsWith('--source=') || a.startsWith('--backend'))) {
      process.stderr.write(`install: --from replaces --source/--backend\n${USAGE}`);
      return 1;
    }
    let dir: string;
    try {
      dir = stageTarball(tarball, printLine);
    } catch (err) {
      process.stderr.write(`install: ${(err as Error).message}\n`);
      return 1;
    }
    try {
      return cli([...rest, '--source', dir], { dir, given: argv });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const given = staged?.given ?? argv;
  try {
    const extras = staged ? tarballExtras(staged.dir) : [];
    // --warm / --cold: warm mode on or off (packages/warm/src/install.ts)
    if (argv.includes('--warm') || argv.includes('--cold')) {
      // --cold where systemd runs this host with the warm install's units: stopped and disabled first
      const disable = !argv.includes('--warm') && coldDisables(argv);
      if (disable && !disableSocket(printLine)) return 1;
      const code = modeCli(argv, {
        source: join(ROOT, 'dist-bin'),
        out: printLine,
        extras,
        command: ['scripts/install', ...given].map(shellWord).join(' '),
      });
      if (code !== 0 || !disable) return code;
      return daemonReload(printLine) ? 0 : 1;
    }
    if (argv.includes('--help') || argv.includes('-h')) {
      process.stdout.write(USAGE);
      return 0;
    }
    // neither: warm through systemd socket activation when systemd runs the host, else cold (install-default.ts)
    const auto = defaultPlan(argv);
    if (auto.mode === 'warm') {
      const code = modeCli(auto.argv, {
        source: join(ROOT, 'dist-bin'),
        out: printLine,
        extras,
        command: ['scripts/install', ...given].map(shellWord).join(' '),
        ...(auto.unitExe ? { unitExe: auto.unitExe } : {}),
        ...(auto.link ? { enable: true } : {}),
        ...(auto.enable ? { systemctlNext: true } : {}),
      });
      if (code !== 0 || !auto.enable) return code;
      return enableSocket(printLine) ? 0 : 1;
    }
    const opts = parseArgs(auto.argv);
    if (opts === 'help') {
      process.stdout.write(USAGE);
      return 0;
    }
    if (auto.why) printLine(auto.why);
    install({ ...opts, extras });
    return 0;
  } catch (err) {
    process.stderr.write(`install: ${(err as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = cli(process.argv.slice(2));
}
