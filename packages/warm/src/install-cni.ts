/**
 * `cnikit install-cni`: what a Kubernetes DaemonSet's init container runs on every node (deploy/kubernetes/,
 * docs/kubernetes.md). It installs the executable the container carries into the host's CNI bin directory and
 * writes the network configuration from a template, then (optionally) keeps the configuration in step with the
 * template.
 *
 * - Binaries: `cnikit` and `cnikit-client` (copied; cold mode too, when the client is beside the executable, so the
 *   installed `cnikit install-cni --warm` finds it); every plugin name is a hard link to the client (warm) or to
 *   `cnikit` (cold), `cnitool` always to `cnikit` — the layout of `scripts/install --warm|--cold` and of a release
 *   tarball install: the mode only decides what the plugin names link to. Every file is placed atomically (temporary name in the directory, fsync, rename), so a
 *   runtime executing the old file keeps running it (no "text file busy": the old inode is never opened for
 *   writing) and nobody ever sees a partial file.
 * - The conflist is rendered from the template (a ConfigMap file) with `${NAME}` / `${NAME:-default}` replaced by
 *   environment variables (the node name from the downward API, the pod subnet, the MTU, …). Every `${…}` must
 *   resolve: an unset or empty variable without a default, or a malformed reference, is an error that names every
 *   such reference, and then nothing at all is written (the template is rendered and checked before the first
 *   file is touched). A value is inserted JSON-escaped, so it can never end a string or add a key. The conflist is
 *   written LAST, after every binary it names is in place, so a runtime that sees the configuration finds its
 *   plugins (a node is not "network ready" before its plugins exist).
 * - Ownership: the files it wrote and their SHA-256 are recorded in `<bin-dir>/.cnikit-install-cni.json`.
 *   `--uninstall` removes a file only when the record names it AND its content is still what was written; a file
 *   someone else wrote or changed since is left alone and reported. A file of another project that the install
 *   replaced (a Go `bridge`, say) is named as replaced in the output; uninstall does not bring it back.
 * - Idempotent: a second run with the same inputs changes nothing and says "no changes".
 * - `--watch`: after the install, re-renders the template whenever its directory changes (a ConfigMap update is
 *   a symlink swap of `..data`, which an inotify watch on the directory sees) and at least every
 *   `--watch-interval` seconds, and rewrites the conflist when the rendering differs from the file. A template that
 *   stops rendering is reported and the last good conflist stays.
 * - `--check`: exit 0 only when the recorded files are in place with their recorded content, the conflist is
 *   there, and (with `--socket`) the warm-mode service answers — the DaemonSet's readiness probe.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  type FSWatcher,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  type Stats,
  statSync,
  unlinkSync,
  watch,
} from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fsyncDir, linkAtomic, writeFileAtomic } from '@cnikit/sys/atomic';
import { InstallCniError } from './install-cni-error.ts';
import { type NodePodCidrOptions, withNodePodCidr } from './node-podcidr.ts';

// The names of build-client.ts / install.ts (CLIENT_FILE, COLD_FILE, TOOL_FILE), not imported from there: those
// modules resolve the client's C source from import.meta.url at load, which a compiled executable does not have.
const CLIENT_FILE = 'cnikit-client';
const COLD_FILE = 'cnikit';
const TOOL_FILE = 'cnitool';

/** The ownership record in the bin directory. */
export const RECORD_FILE = '.cnikit-install-cni.json';
export const DEFAULT_BIN_DIR = '/host/opt/cni/bin';
export const DEFAULT_CONF_DIR = '/host/etc/cni/net.d';
export const DEFAULT_TEMPLATE = '/etc/cnikit/cni/10-cnikit.conflist';

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

export { InstallCniError } from './install-cni-error.ts';

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

// ---------------------------------------------------------------------------------------------------------------
// template

const REF = /\$\{([^}]*)\}/g;
const REF_BODY = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/** A JSON string's inner text for `v` (quotes, backslashes and control characters escaped). */
function jsonInner(v: string): string {
  return JSON.stringify(v).slice(1, -1);
}

/**
 * Render a template: every `${NAME}` / `${NAME:-default}` replaced by the JSON-escaped value of env NAME (or the
 * default when NAME is unset or empty). Throws InstallCniError naming every unresolved or malformed reference.
 */
export function renderTemplate(
  text: string,
  env: Readonly<Record<string, string | undefined>>,
  where = 'template',
): string {
  const problems: string[] = [];
  const out = text.replace(REF, (whole, body: string) => {
    const m = REF_BODY.exec(body);
    if (!m) {
      problems.push(`${whole} is not a variable reference (use \${NAME} or \${NAME:-default})`);
      return whole;
    }
    const name = m[1] as string;
    const value = env[name];
    if (value !== undefined && value !== '') return jsonInner(value);
    if (m[2] !== undefined) return jsonInner(m[2]);
    problems.push(`${whole}: environment variable ${name} is ${value === undefined ? 'not set' : 'empty'}`);
    return whole;
  });
  const stray = out.replace(REF, '').indexOf('${');
  if (stray >= 0 && problems.length === 0) problems.push(`unterminated \${ at offset ${stray}`);
  if (problems.length) throw new InstallCniError(`${where}: ${problems.join('; ')}; nothing was written`);
  return out;
}

/** The rendered conflist must be a conflist a runtime loads: name, cniVersion, a non-empty plugins list with types. */
export function checkConflist(text: string, where: string): { name: string; types: string[] } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new InstallCniError(`${where} is not valid JSON after substitution: ${(e as Error).message}`);
  }
  const o = v as Record<string, unknown>;
  if (!o || typeof o !== 'object' || Array.isArray(o))
    throw new InstallCniError(`${where}: a conflist is a JSON object`);
  if (typeof o.name !== 'string' || !o.name) throw new InstallCniError(`${where}: "name" must be a string`);
  if (typeof o.cniVersion !== 'string') throw new InstallCniError(`${where}: "cniVersion" must be a string`);
  if (!Array.isArray(o.plugins) || o.plugins.length === 0)
    throw new InstallCniError(`${where}: "plugins" must be a non-empty list`);
  const types = o.plugins.map((p, i) => {
    const t = (p as Record<string, unknown> | null)?.type;
    if (typeof t !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(t))
      throw new InstallCniError(`${where}: plugins[${i}].type must be a plugin file name`);
    return t;
  });
  return { name: o.name, types };
}

// ---------------------------------------------------------------------------------------------------------------
// files

const hashCache = new Map<string, string>();

/** sha256 of a file's content, cached per (dev, ino, size, mtime): hard links are hashed once. */
function sha256File(p: string): string {
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

function lstatOrUndefined(p: string): Stats | undefined {
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

function mkdirs(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
  } catch (e) {
    throw new InstallCniError(`cannot create ${dir}: ${(e as Error).message}`);
  }
}

function readTemplate(template: string): string {
  try {
    return readFileSync(template, 'utf8');
  } catch (e) {
    throw new InstallCniError(`cannot read the template ${template}: ${(e as Error).message}`);
  }
}

/** Render the template into the conflist bytes (or undefined without a template). */
export function renderConf(o: Pick<InstallCniOptions, 'template' | 'env'>): Buffer | undefined {
  if (o.template === undefined) return undefined;
  const text = readTemplate(o.template);
  const rendered = renderTemplate(text, o.env, o.template);
  checkConflist(rendered, `${o.template} (rendered)`);
  return Buffer.from(rendered.endsWith('\n') ? rendered : `${rendered}\n`);
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
  const linkTo = o.mode === 'warm' ? CLIENT_FILE : COLD_FILE;
  const links = [...o.plugins.filter((n) => n !== TOOL_FILE && n !== COLD_FILE && n !== CLIENT_FILE)].sort();
  const linkPlan: { name: string; to: string }[] = [
    ...links.map((n) => ({ name: n, to: linkTo })),
    { name: TOOL_FILE, to: COLD_FILE },
  ];
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
  o.out(
    `${o.dryRun ? 'would install' : 'install-cni'}: ${o.mode} mode into ${binDir}${confPath ? `, ${confPath}` : ''}`,
  );
  for (const c of changes) say(o, c);
  if (o.dryRun) {
    o.out(n === 0 ? 'no changes' : `${n} change(s) would be made`);
    return changes;
  }
  if (n === 0) {
    o.out('no changes');
    return changes;
  }
  // 2. binaries, then the record, then the conflist (last)
  mkdirs(binDir);
  try {
    for (const c of copies)
      if (wrote.has(c.name)) writeFileAtomic(join(binDir, c.name), readFileSync(c.src), 0o755);
    for (const ch of changes) {
      if (ch.action !== 'link') continue;
      const l = linkPlan.find((x) => join(binDir, x.name) === ch.path) as { name: string; to: string };
      linkAtomic(join(binDir, l.to), ch.path);
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
  o.out(`${o.dryRun ? 'would uninstall' : 'uninstall'}: ${binDir}`);
  for (const c of changes) say(o, c);
  if (o.dryRun) {
    o.out(n === 0 ? 'no changes' : `${n} change(s) would be made`);
    return changes;
  }
  if (n === 0) {
    o.out('no changes');
    return changes;
  }
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

/**
 * `--watch`: re-render on every change of the template's directory (a ConfigMap update swaps the `..data`
 * symlink there) and every `intervalMs`; rewrite the conflist when the rendering differs. Resolves when `signal`
 * aborts.
 */
export function watchTemplate(o: InstallCniOptions, intervalMs: number, signal: AbortSignal): Promise<void> {
  const template = o.template;
  if (template === undefined) return Promise.resolve();
  let lastError = '';
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const sync = () => {
    try {
      const conf = renderConf(o);
      if (!conf) return;
      const confPath = join(resolve(o.confDir), o.confName);
      let cur: Buffer | undefined;
      try {
        cur = readFileSync(confPath);
      } catch {
        cur = undefined;
      }
      lastError = '';
      if (cur?.equals(conf)) return;
      installCni({ ...o, dryRun: false });
    } catch (e) {
      const msg = `install-cni --watch: ${(e as Error).message} (the conflist on the node stays as it is)`;
      if (msg !== lastError) o.out(msg);
      lastError = msg;
    }
  };
  return new Promise((done) => {
    const schedule = () => {
      timer = setTimeout(() => {
        sync();
        schedule();
      }, intervalMs);
    };
    try {
      watcher = watch(dirname(template), { persistent: true }, () => {
        // several events arrive per swap: settle first
        if (timer) clearTimeout(timer);
        timer = setTimeout(() => {
          sync();
          schedule();
        }, 100);
      });
    } catch (e) {
      o.out(`install-cni --watch: cannot watch ${dirname(template)} (${(e as Error).message}); polling only`);
    }
    schedule();
    signal.addEventListener(
      'abort',
      () => {
        if (timer) clearTimeout(timer);
        watcher?.close();
        done();
      },
      { once: true },
    );
  });
}

// ---------------------------------------------------------------------------------------------------------------
// CLI

export const INSTALL_CNI_USAGE =
  'usage: cnikit install-cni [--warm|--cold] [--bin-dir DIR] [--conf-dir DIR] [--template FILE|--no-conf]\n' +
  '                         [--conf-name NAME] [--run-dir DIR] [--watch [--watch-interval SECONDS]] [--dry-run]\n' +
  '       cnikit install-cni --uninstall [--bin-dir DIR] [--dry-run]\n' +
  '       cnikit install-cni --check [--bin-dir DIR] [--socket PATH]   (readiness: files + conflist [+ service])\n' +
  `defaults: --warm --bin-dir ${DEFAULT_BIN_DIR} --conf-dir ${DEFAULT_CONF_DIR} --template ${DEFAULT_TEMPLATE}\n` +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the template syntax, literally
  'template: ${NAME} and ${NAME:-default} are replaced by environment variables (JSON-escaped); an unset one is an\n' +
  '          error and nothing is written. The conflist is written last, after the binaries.\n' +
  '          POD_CIDR, POD_CIDR_V4, POD_CIDR_V6, POD_CIDRS left unset: read from spec.podCIDR(s) of Node $NODE_NAME\n' +
  '          (in-cluster API server, service-account token + CA; retried while the node has none).\n';

export interface InstallCniArgs {
  verb: 'install' | 'uninstall' | 'check';
  mode: 'warm' | 'cold';
  binDir: string;
  confDir: string;
  template: string | undefined;
  confName: string | undefined;
  watch: boolean;
  watchIntervalMs: number;
  socket: string | undefined;
  runDir: string | undefined;
  dryRun: boolean;
}

export function parseInstallCniArgs(args: readonly string[]): InstallCniArgs | 'help' {
  const a: InstallCniArgs = {
    verb: 'install',
    mode: 'warm',
    binDir: DEFAULT_BIN_DIR,
    confDir: DEFAULT_CONF_DIR,
    template: DEFAULT_TEMPLATE,
    confName: undefined,
    watch: false,
    watchIntervalMs: 10_000,
    socket: undefined,
    runDir: undefined,
    dryRun: false,
  };
  let modes = 0;
  let verbs = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const value = (flag: string): string => {
      const eq = arg.indexOf('=');
      const v = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (v === undefined || v === '') throw new InstallCniError(`${flag} needs a value`);
      return v;
    };
    const is = (flag: string) => arg === flag || arg.startsWith(`${flag}=`);
    const path = (flag: string): string => {
      const v = value(flag);
      if (!v.startsWith('/'))
        throw new InstallCniError(`${flag} must be an absolute path, got ${JSON.stringify(v)}`);
      return v;
    };
    if (arg === '--help' || arg === '-h') return 'help';
    else if (arg === '--warm' || arg === '--cold') {
      a.mode = arg === '--warm' ? 'warm' : 'cold';
      modes++;
    } else if (arg === '--uninstall' || arg === '--check') {
      a.verb = arg === '--uninstall' ? 'uninstall' : 'check';
      verbs++;
    } else if (arg === '--watch') a.watch = true;
    else if (arg === '--dry-run' || arg === '-n') a.dryRun = true;
    else if (arg === '--no-conf') a.template = undefined;
    else if (is('--bin-dir')) a.binDir = path('--bin-dir');
    else if (is('--conf-dir')) a.confDir = path('--conf-dir');
    else if (is('--template')) a.template = path('--template');
    else if (is('--socket')) a.socket = path('--socket');
    else if (is('--run-dir')) a.runDir = path('--run-dir');
    else if (is('--conf-name')) {
      const v = value('--conf-name');
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*\.(conflist|json)$/.test(v))
        throw new InstallCniError(
          `--conf-name must be a file name ending in .conflist or .json, got ${JSON.stringify(v)}`,
        );
      a.confName = v;
    } else if (is('--watch-interval')) {
      const v = value('--watch-interval');
      const s = Number(v);
      if (!Number.isFinite(s) || s < 0.1 || s > 86_400)
        throw new InstallCniError(
          `--watch-interval must be seconds between 0.1 and 86400, got ${JSON.stringify(v)}`,
        );
      a.watchIntervalMs = Math.round(s * 1000);
    } else throw new InstallCniError(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (modes > 1) throw new InstallCniError('give at most one of --warm and --cold');
  if (verbs > 1) throw new InstallCniError('give at most one of --uninstall and --check');
  if (a.watch && a.verb !== 'install') throw new InstallCniError('--watch goes with an install only');
  if (a.watch && a.template === undefined) throw new InstallCniError('--watch needs a template');
  return a;
}

/** What `cnikit install-cni` receives from the multicall entry. */
export interface InstallCniContext {
  /** Plugin names of this executable. */
  plugins: readonly string[];
  /** The running executable (the file to install). */
  execPath: string;
  env: Readonly<Record<string, string | undefined>>;
  out: (line: string) => void;
  err: (line: string) => void;
  /** The warm-mode service check (`serve --check`, prints its own line) for --check --socket. */
  serviceCheck?: (socket: string) => Promise<number>;
  /** Stops --watch (SIGTERM/SIGINT in the executable). */
  signal?: AbortSignal;
  /** Attempts/waits/credential paths of the node pod-subnet lookup (tests). */
  podCidr?: NodePodCidrOptions;
}

/** Entry of `cnikit install-cni …` (args after the word). Resolves to the exit code. */
export async function installCniMain(args: readonly string[], ctx: InstallCniContext): Promise<number> {
  let a: InstallCniArgs | 'help';
  try {
    a = parseInstallCniArgs(args);
  } catch (e) {
    ctx.err(`cnikit install-cni: ${(e as Error).message}\n${INSTALL_CNI_USAGE}`);
    return 2;
  }
  if (a === 'help') {
    ctx.out(INSTALL_CNI_USAGE.trimEnd());
    return 0;
  }
  try {
    if (a.verb === 'uninstall') {
      uninstallCni({ binDir: a.binDir, dryRun: a.dryRun, out: ctx.out });
      return 0;
    }
    if (a.verb === 'check') {
      const r = checkInstalled(a.binDir);
      for (const p of r.problems) ctx.out(`not ready: ${p}`);
      if (!r.ok) return 1;
      if (a.socket !== undefined) {
        if (!ctx.serviceCheck) {
          ctx.out('not ready: this executable has no warm-mode service to check');
          return 1;
        }
        return await ctx.serviceCheck(a.socket);
      }
      ctx.out(`ok: ${a.binDir} installed, conflist written`);
      return 0;
    }
    const o: InstallCniOptions = {
      mode: a.mode,
      exe: ctx.execPath,
      client: join(dirname(ctx.execPath), CLIENT_FILE),
      plugins: ctx.plugins,
      binDir: a.binDir,
      confDir: a.confDir,
      template: a.template,
      confName:
        a.confName ?? (a.template ? basename(a.template).replace(/\.tmpl$/, '') : '10-cnikit.conflist'),
      env:
        a.template === undefined
          ? ctx.env
          : await withNodePodCidr(ctx.env, readTemplate(a.template), { out: ctx.out, ...ctx.podCidr }),
      ...(a.runDir !== undefined ? { runDir: a.runDir } : {}),
      dryRun: a.dryRun,
      out: ctx.out,
    };
    const t0 = performance.now();
    installCni(o);
    if (!a.dryRun) ctx.out(`install-cni took ${Math.round(performance.now() - t0)} ms`);
    if (a.watch && !a.dryRun) {
      ctx.out(`watching ${o.template} (every ${a.watchIntervalMs / 1000} s and on change)`);
      await watchTemplate(o, a.watchIntervalMs, ctx.signal ?? new AbortController().signal);
    }
    return 0;
  } catch (e) {
    ctx.err(`cnikit install-cni: ${(e as Error).message}`);
    return 1;
  }
}
