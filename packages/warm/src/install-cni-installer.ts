/**
 * install-cni's installer: the binaries in the layout of @cnikit/sys/layout (placed atomically), the conflist last,
 * the ownership record (`.cnikit-install-cni.json`), the uninstall of what the record names and the readiness
 * check. The whole behaviour is described in install-cni.ts.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  type Stats,
  statSync,
  unlinkSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fsyncDir, writeFileAtomic } from '@cnikit/sys/atomic';
import {
  CLIENT_FILE,
  EXE_FILE as COLD_FILE,
  linkTarget,
  placeCopy,
  placeLink,
  TOOL_FILE,
} from '@cnikit/sys/layout';
import { InstallCniError } from './install-cni-error.ts';
import { renderConf } from './install-cni-template.ts';

/** The ownership record in the bin directory. */
export const RECORD_FILE = '.cnikit-install-cni.json';
export interface InstallCniOptions {
  mode: 'warm' | 'cold';
  /** The cold executable to install (the running executable in the image). */
  exe: string;
  /** The warm client (beside the executable in the image); needed in warm mode. */
  client: string;
  /** Plugin names (hard links). */
  plugins: readonly string[];
  binDir: string;
  confDir: string;
  /** The conflist template; undefined: no conflist is written. */
  template: string | undefined;
  /** The conflist's file name in confDir (default: the template's name). */
  confName: string;
  env: Readonly<Record<string, string | undefined>>;
  /**
   * The warm-mode service's directory as the host sees it (the socket and the extracted addon live there): created
   * and made 0700 root, which `cnikit serve` requires (a hostPath DirectoryOrCreate volume is created 0755).
   */
  runDir?: string;
  dryRun: boolean;
  out: (line: string) => void;
}

interface RecordFile {
  version: 1;
  /** bin-dir file name → sha256 of the content written. */
  files: Record<string, string>;
  /**
   * conflist path relative to the bin directory → sha256 of the content written. Relative, so the record reads the
   * same from the init container (/host/opt/cni/bin → /host/etc/cni/net.d) and on the host (/opt/cni/bin →
   * /etc/cni/net.d), where the readiness probe and an uninstall run.
   */
  conf: Record<string, string>;
  /** bin-dir file name → size in bytes (the readiness check compares sizes of large files instead of hashing). */
  sizes?: Record<string, number>;
}

export interface Change {
  path: string;
  action: 'write' | 'link' | 'unchanged' | 'remove' | 'keep';
  detail: string;
}

const hashCache = new Map<string, string>();

/** sha256 of a file's content, cached per (dev, ino, size, mtime): hard links are hashed once. */
export function sha256File(p: string): string {
  const st = statSync(p);
  const key = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  const hit = hashCache.get(key);
  if (hit) return hit;
  const h = createHash('sha256').update(readFileSync(p)).digest('hex');
  hashCache.set(key, h);
  return h;
}

function sha256(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

export function lstatOrUndefined(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

function readRecord(binDir: string): RecordFile {
  const p = join(binDir, RECORD_FILE);
  if (!existsSync(p)) return { version: 1, files: {}, conf: {} };
  try {
    const r = JSON.parse(readFileSync(p, 'utf8')) as RecordFile;
    if (r.version !== 1 || typeof r.files !== 'object' || typeof r.conf !== 'object')
      throw new Error('shape');
    return r;
  } catch (e) {
    throw new InstallCniError(
      `${p} is not an install-cni record (${(e as Error).message}); remove it by hand`,
    );
  }
}

function recordBytes(r: RecordFile): Buffer {
  const sorted = <T>(o: Record<string, T>) =>
    Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const sizes = sorted(Object.fromEntries(Object.entries(r.sizes ?? {}).filter(([n]) => n in r.files)));
  return Buffer.from(
    `${JSON.stringify({ version: 1, files: sorted(r.files), conf: sorted(r.conf), sizes }, null, 2)}\n`,
  );
}

export function mkdirs(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
  } catch (e) {
    throw new InstallCniError(`cannot create ${dir}: ${(e as Error).message}`);
  }
}

function say(o: Pick<InstallCniOptions, 'out'>, c: Change): void {
  o.out(`  ${c.action.padEnd(9)} ${c.path}: ${c.detail}`);
}

/** Install (or with dryRun: plan) the binaries and the conflist. Returns what was (or would be) done. */
export function installCni(o: InstallCniOptions): Change[] {
  const binDir = resolve(o.binDir);
  const confDir = resolve(o.confDir);
  // 1. everything that can fail on bad input is checked before the first write
  const conf = renderConf(o);
  if (!existsSync(o.exe)) throw new InstallCniError(`${o.exe} not found`);
  if (o.mode === 'warm' && !existsSync(o.client))
    throw new InstallCniError(`${o.client} not found (warm mode needs the client beside the executable)`);
  const record = readRecord(binDir);
  const changes: Change[] = [];
  const copies: { name: string; src: string }[] = [{ name: COLD_FILE, src: o.exe }];
  // the client goes in whatever the mode (when the image has it): the mode only decides what the names link to
  if (o.mode === 'warm' || existsSync(o.client)) copies.push({ name: CLIENT_FILE, src: o.client });
  const wrote = new Set<string>();
  for (const c of copies) {
    const dst = join(binDir, c.name);
    const st = lstatOrUndefined(dst);
    const want = sha256File(c.src);
    if (st?.isFile() && sha256File(dst) === want) {
      changes.push({ path: dst, action: 'unchanged', detail: 'same content' });
    } else {
      const was =
        st === undefined
          ? 'new file'
          : record.files[c.name] !== undefined
            ? 'replaces the previous install'
            : `replaces a file install-cni did not write (${st.isFile() ? `${st.size} bytes` : 'not a regular file'})`;
      changes.push({ path: dst, action: 'write', detail: `copy ${c.src}: ${was}` });
      wrote.add(c.name);
    }
    record.files[c.name] = want;
    record.sizes = { ...record.sizes, [c.name]: statSync(c.src).size };
  }
  const links = [...o.plugins.filter((n) => n !== TOOL_FILE && n !== COLD_FILE && n !== CLIENT_FILE)].sort();
  const linkPlan: { name: string; to: string }[] = [...links, TOOL_FILE].map((n) => ({
    name: n,
    to: linkTarget(n, o.mode),
  }));
  for (const l of linkPlan) {
    const dst = join(binDir, l.name);
    const st = lstatOrUndefined(dst);
    const target = lstatOrUndefined(join(binDir, l.to));
    if (st?.isFile() && target && !wrote.has(l.to) && st.ino === target.ino && st.dev === target.dev) {
      changes.push({ path: dst, action: 'unchanged', detail: `already a hard link to ${l.to}` });
    } else {
      const was =
        st === undefined
          ? ''
          : record.files[l.name] !== undefined
            ? ' (replaces the previous install)'
            : ` (replaces a ${st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'entry'} install-cni did not write)`;
      changes.push({ path: dst, action: 'link', detail: `hard link to ${l.to}${was}` });
    }
    record.files[l.name] = record.files[l.to] as string;
    record.sizes = { ...record.sizes, [l.name]: record.sizes?.[l.to] as number };
  }
  let runDirChange = false;
  if (o.runDir !== undefined) {
    const st = lstatOrUndefined(o.runDir);
    if (st !== undefined && !st.isDirectory())
      throw new InstallCniError(`${o.runDir} exists and is not a directory`);
    if (st === undefined || (st.mode & 0o7777) !== 0o700 || st.uid !== 0) {
      runDirChange = true;
      changes.push({
        path: o.runDir,
        action: 'write',
        detail:
          st === undefined
            ? 'create the service directory, mode 0700'
            : `service directory: mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')} uid ${st.uid} -> 0700 uid 0`,
      });
    } else changes.push({ path: o.runDir, action: 'unchanged', detail: 'service directory, mode 0700' });
  }
  let confPath: string | undefined;
  if (conf) {
    confPath = join(confDir, o.confName);
    const st = lstatOrUndefined(confPath);
    const same = st?.isFile() && readFileSync(confPath).equals(conf);
    changes.push(
      same
        ? { path: confPath, action: 'unchanged', detail: 'same content' }
        : {
            path: confPath,
            action: 'write',
            detail: `render ${o.template}${st === undefined ? '' : record.conf[relative(binDir, confPath)] !== undefined ? ' (replaces the previous rendering)' : ' (replaces a file install-cni did not write)'}`,
          },
    );
    for (const k of Object.keys(record.conf)) if (resolve(binDir, k) === confPath) delete record.conf[k];
    record.conf[relative(binDir, confPath)] = sha256(conf);
    if (existsSync(confDir)) {
      const first = readdirSync(confDir)
        .filter((n) => /\.(conf|conflist|json)$/.test(n))
        .sort()[0];
      if (first !== undefined && first < o.confName)
        o.out(
          `  note: ${join(confDir, first)} sorts before ${o.confName}: a runtime that loads the first file uses that one`,
        );
    }
  }
  const n = changes.filter((c) => c.action !== 'unchanged').length;
  const head = `${o.dryRun ? 'would install' : 'install-cni'}: ${o.mode} mode into ${binDir}`;
  if (!report(o, `${head}${confPath ? `, ${confPath}` : ''}`, changes, n)) return changes;
  // 2. binaries, then the record, then the conflist (last)
  mkdirs(binDir);
  try {
    for (const c of copies) if (wrote.has(c.name)) placeCopy(c.src, join(binDir, c.name), 0o755);
    for (const ch of changes) {
      if (ch.action !== 'link') continue;
      const l = linkPlan.find((x) => join(binDir, x.name) === ch.path) as { name: string; to: string };
      placeLink(join(binDir, l.to), ch.path);
    }
    for (const ch of changes) if (ch.action === 'remove' && ch.path.startsWith(binDir)) unlinkSync(ch.path);
    if (runDirChange && o.runDir !== undefined) {
      mkdirs(o.runDir);
      chownSync(o.runDir, 0, 0);
      chmodSync(o.runDir, 0o700);
    }
    writeFileAtomic(join(binDir, RECORD_FILE), recordBytes(record), 0o644);
    fsyncDir(binDir);
    if (conf && confPath && changes.some((c) => c.path === confPath && c.action === 'write')) {
      mkdirs(confDir);
      writeFileAtomic(confPath, conf, 0o644);
      fsyncDir(confDir);
    }
  } catch (e) {
    if (e instanceof InstallCniError) throw e;
    throw new InstallCniError(`install into ${binDir} failed: ${(e as Error).message}`);
  }
  o.out(`done: ${n} change(s)`);
  return changes;
}

/**
 * The plan's report (`head`, then each change); whether to go on and make the `n` changes: not in a dry run ("N
 * change(s) would be made") nor when there are none ("no changes").
 */
function report(
  o: Pick<InstallCniOptions, 'dryRun' | 'out'>,
  head: string,
  changes: Change[],
  n: number,
): boolean {
  o.out(head);
  for (const c of changes) say(o, c);
  if (o.dryRun || n === 0) {
    o.out(n === 0 ? 'no changes' : `${n} change(s) would be made`);
    return false;
  }
  return true;
}

/** Remove what the record names, each file only while its content is still what install-cni wrote. */
export function uninstallCni(o: Pick<InstallCniOptions, 'binDir' | 'dryRun' | 'out'>): Change[] {
  const binDir = resolve(o.binDir);
  const record = readRecord(binDir);
  const changes: Change[] = [];
  // the conflist first: a runtime must stop seeing the network before its plugins go
  const entries: [string, string][] = [
    ...Object.entries(record.conf).map(([c, h]): [string, string] => [resolve(binDir, c), h]),
    ...Object.entries(record.files).map(([n, h]): [string, string] => [join(binDir, n), h]),
  ];
  for (const [p, h] of entries) {
    const st = lstatOrUndefined(p);
    if (st === undefined) changes.push({ path: p, action: 'unchanged', detail: 'already gone' });
    else if (!st.isFile()) changes.push({ path: p, action: 'keep', detail: 'not a regular file any more' });
    else if (sha256File(p) !== h)
      changes.push({
        path: p,
        action: 'keep',
        detail: 'changed since install-cni wrote it: not ours to remove',
      });
    else changes.push({ path: p, action: 'remove', detail: 'written by install-cni' });
  }
  const recordPath = join(binDir, RECORD_FILE);
  const hasRecord = existsSync(recordPath);
  if (hasRecord) changes.push({ path: recordPath, action: 'remove', detail: 'the install record' });
  const n = changes.filter((c) => c.action === 'remove').length;
  if (!report(o, `${o.dryRun ? 'would uninstall' : 'uninstall'}: ${binDir}`, changes, n)) return changes;
  const dirs = new Set<string>();
  for (const c of changes) {
    if (c.action !== 'remove') continue;
    try {
      unlinkSync(c.path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new InstallCniError(`cannot remove ${c.path}: ${(e as Error).message}`);
    }
    dirs.add(dirname(c.path));
  }
  for (const d of dirs) fsyncDir(d);
  o.out(`done: ${n} change(s)`);
  return changes;
}

/** The readiness check: recorded files in place with their content, a conflist recorded and present. */
export function checkInstalled(binDir: string): { ok: boolean; problems: string[] } {
  const problems: string[] = [];
  let record: RecordFile;
  try {
    record = readRecord(resolve(binDir));
  } catch (e) {
    return { ok: false, problems: [(e as Error).message] };
  }
  if (Object.keys(record.files).length === 0) problems.push(`nothing installed in ${binDir} (no record)`);
  if (Object.keys(record.conf).length === 0) problems.push('no conflist written yet');
  const dir = resolve(binDir);
  // a probe runs every few seconds: the conflist and small files are hashed, the large executable is compared by
  // size (its content was hashed when it was written; a replacement by someone else changes more than the hash)
  for (const [p, h, size] of [
    ...Object.entries(record.conf).map(([c, h]): [string, string, undefined] => [
      resolve(dir, c),
      h,
      undefined,
    ]),
    ...Object.entries(record.files).map(([n, h]): [string, string, number | undefined] => [
      join(dir, n),
      h,
      record.sizes?.[n],
    ]),
  ]) {
    try {
      const st = statSync(p);
      if (size !== undefined && size > 1 << 20 ? st.size !== size : sha256File(p) !== h)
        problems.push(`${p} differs from what install-cni wrote`);
    } catch {
      problems.push(`${p} is missing`);
    }
  }
  return { ok: problems.length === 0, problems };
}
