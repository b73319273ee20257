import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fsyncDir, writeFileAtomic } from '@cnikit/sys/atomic';
import {
  CLIENT_FILE,
  EXE_FILE as COLD_FILE,
  hardLinksOf,
  linkTarget,
  placeCopy,
  placeLink,
  SYSTEM_BIN_DIR,
  sameContent,
  TOOL_FILE,
} from '@cnikit/sys/layout';
import { DEFAULT_SOCKET } from './protocol.ts';
import { SERVICE_UNIT, SOCKET_UNIT, systemdUnits } from './systemd.ts';

export { SERVICE_UNIT, SOCKET_UNIT, TOOL_FILE };
export const SYSTEM_TARGET = SYSTEM_BIN_DIR;
export const SYSTEM_UNITS = '/etc/systemd/system';
/** The first line of every unit this install writes: what --cold checks before it removes a unit. */
export const UNIT_HEADER = '# written by cnikit';
/** Where `systemctl enable cnikit.socket` puts its link (the socket unit's WantedBy=sockets.target). */
export const SOCKET_WANTS = join('sockets.target.wants', SOCKET_UNIT);
const SERVICE_WANTS = join('multi-user.target.wants', SERVICE_UNIT);

export interface ModeInstallOptions {
  mode: 'warm' | 'cold';
  /** dist-bin (holds cnikit and warm/). */
  source: string;
  target: string;
  /**
   * Where the systemd units go; undefined: they are not written (an install into a scratch --target never
   * touches /etc unless asked with --systemd-dir). parseModeArgs defaults it to /etc/systemd/system only for the
   * system target /opt/cni/bin.
   */
  systemdDir: string | undefined;
  socket: string;
  dryRun: boolean;
  out: (line: string) => void;
  /** Plain files copied as they are (mode kept) beside cnikit: a release tarball's LICENSE and README.md. */
  extras?: readonly { name: string; src: string }[];
  /** The command line as given (`scripts/install --warm …`), for the hints that tell to run it again. */
  command?: string;
  /** The executable the units start, when not the installed path (an install under a --root prefix). */
  unitExe?: string;
  /**
   * Warm: also enable the socket the way `systemctl enable` does, with the link
   * systemdDir/sockets.target.wants/cnikit.socket → /etc/systemd/system/cnikit.socket (an install under a --root
   * prefix, where systemctl is not run: the host booting from it then listens on the socket from its first boot).
   */
  enable?: boolean;
  /** Warm: the caller runs `systemctl daemon-reload` and `enable --now` right after (the default install on `/`). */
  systemctlNext?: boolean;
}

export class ModeInstallError extends Error {}

/** The plugin names of a built dist-bin: the hard links of warm/cnikit-client. */
export function warmPlugins(source: string): string[] {
  const client = join(source, 'warm', CLIENT_FILE);
  let ino: number;
  try {
    ino = statSync(client).ino;
  } catch {
    throw new ModeInstallError(`${client} not found: run \`npm run build\` first`);
  }
  return hardLinksOf(join(source, 'warm'), CLIENT_FILE, ino);
}

export interface ModeStep {
  /** A file name in the target directory, or the absolute path of a unit. */
  name: string;
  action: 'write' | 'unchanged' | 'link' | 'unit' | 'skip' | 'enable' | 'remove';
  detail: string;
}

export function installMode(o: ModeInstallOptions): ModeStep[] {
  const source = resolve(o.source);
  const target = resolve(o.target);
  const cold = join(source, COLD_FILE);
  const client = join(source, 'warm', CLIENT_FILE);
  if (!existsSync(cold)) throw new ModeInstallError(`${cold} not found: run \`npm run build\` first`);
  const names = warmPlugins(source);
  const steps: ModeStep[] = [];
  const dstCold = join(target, COLD_FILE);
  // every file goes in, cold or warm (the client too: the installed `cnikit install-cni --warm` and a later
  // `--warm` find it beside cnikit); the mode only decides what the plugin names link to
  const copies = new Map<string, string>([
    [COLD_FILE, cold],
    [CLIENT_FILE, client],
  ]);
  for (const e of o.extras ?? []) {
    if (copies.has(e.name) || names.includes(e.name) || e.name === TOOL_FILE)
      throw new ModeInstallError(`${e.src}: ${e.name} is a name the install itself writes`);
    copies.set(e.name, e.src);
  }
  for (const [name, src] of copies) {
    steps.push(
      sameContent(src, join(target, name))
        ? { name, action: 'unchanged', detail: 'same content' }
        : { name, action: 'write', detail: `copy ${src}` },
    );
  }
  for (const n of [...names, TOOL_FILE]) {
    const to = linkTarget(n, o.mode);
    const cur = existsSync(join(target, n)) ? lstatSync(join(target, n)) : undefined;
    const dstTo = join(target, to);
    const same =
      cur !== undefined &&
      existsSync(dstTo) &&
      cur.ino === statSync(dstTo).ino &&
      !steps.some((s) => s.name === to && s.action === 'write');
    steps.push(
      same
        ? { name: n, action: 'unchanged', detail: `already a link to ${to}` }
        : { name: n, action: 'link', detail: `hard link to ${to}` },
    );
  }
  const units = systemdUnits({ exe: o.unitExe ?? dstCold, socket: o.socket });
  const systemdDir = o.systemdDir;
  if (o.mode === 'warm' && systemdDir === undefined) {
    for (const unit of Object.keys(units))
      steps.push({
        name: unit,
        action: 'skip',
        detail: `systemd unit not written (no --systemd-dir for the target ${target}); pass --systemd-dir DIR to write it`,
      });
  } else if (o.mode === 'warm' && systemdDir !== undefined) {
    for (const [unit, text] of Object.entries(units)) {
      const p = join(systemdDir, unit);
      const cur = existsSync(p) ? readFileSync(p, 'utf8') : undefined;
      steps.push({
        name: p,
        action: cur === text ? 'unchanged' : 'unit',
        detail:
          cur === text ? 'same content' : cur === undefined ? 'write unit' : 'replace the existing unit',
      });
    }
    if (o.enable) {
      const p = join(systemdDir, SOCKET_WANTS);
      const to = join(SYSTEM_UNITS, SOCKET_UNIT);
      const cur = linkOf(p);
      steps.push(
        cur === to
          ? { name: p, action: 'unchanged', detail: `already enabled (→ ${to})` }
          : {
              name: p,
              action: 'enable',
              detail: `symlink to ${to} (what systemctl enable ${SOCKET_UNIT} writes)`,
            },
      );
    }
  } else if (o.mode === 'cold' && systemdDir !== undefined) {
    // back to cold: what the warm install wrote and enabled goes; an operator's own unit (and its links) stays
    const ours = (unit: string) => {
      const p = join(systemdDir, unit);
      return !existsSync(p) || readFileSync(p, 'utf8').startsWith(UNIT_HEADER);
    };
    for (const wants of [SOCKET_WANTS, SERVICE_WANTS]) {
      const p = join(systemdDir, wants);
      const cur = linkOf(p);
      const unit = wants.slice(wants.indexOf('/') + 1);
      if (cur?.endsWith(`/${unit}`) && ours(unit))
        steps.push({ name: p, action: 'remove', detail: `disable ${unit} (symlink to ${cur})` });
    }
    for (const unit of Object.keys(units)) {
      const p = join(systemdDir, unit);
      if (!existsSync(p)) continue;
      steps.push(
        ours(unit)
          ? { name: p, action: 'remove', detail: 'remove the unit written by the warm install' }
          : {
              name: p,
              action: 'unchanged',
              detail: `not written by cnikit (no "${UNIT_HEADER}" line): left as it is`,
            },
      );
    }
  }

  o.out(`${o.dryRun ? 'would switch' : 'switching'} ${target} to ${o.mode} mode`);
  // every line names the file's full destination
  const where = (s: ModeStep) =>
    s.action === 'skip' || s.name.startsWith('/') ? s.name : join(target, s.name);
  for (const s of steps) o.out(`  ${s.action.padEnd(9)} ${where(s)}: ${s.detail}`);
  if (o.dryRun) return steps;

  for (const dir of o.mode === 'warm' && systemdDir !== undefined ? [target, systemdDir] : [target]) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o755 });
    } catch (e) {
      throw new ModeInstallError(`cannot create ${dir}: ${(e as Error).message}`);
    }
  }
  try {
    for (const s of steps) {
      if (s.action !== 'write') continue;
      const src = copies.get(s.name) as string;
      placeCopy(src, join(target, s.name), statSync(src).mode & 0o777);
    }
    for (const s of steps) {
      if (s.action !== 'link') continue;
      placeLink(join(target, linkTarget(s.name, o.mode)), join(target, s.name));
    }
    fsyncDir(target);
    for (const s of steps) {
      if (s.action !== 'unit') continue;
      const unit = s.name.slice((systemdDir as string).length + 1);
      writeFileAtomic(s.name, Buffer.from(units[unit] as string), 0o644);
    }
    for (const s of steps) {
      if (s.action !== 'enable') continue;
      mkdirSync(dirname(s.name), { recursive: true, mode: 0o755 });
      rmSync(s.name, { force: true });
      symlinkSync(join(SYSTEM_UNITS, SOCKET_UNIT), s.name);
    }
    for (const s of steps) if (s.action === 'remove') rmSync(s.name, { force: true });
    if (systemdDir !== undefined && existsSync(systemdDir)) fsyncDir(systemdDir);
  } catch (e) {
    if (e instanceof ModeInstallError) throw e;
    throw new ModeInstallError(`cannot install into ${target}: ${(e as Error).message}`);
  }
  // the hints carry the options given: the socket the units listen on, the command line to run again
  const check = `${dstCold} serve --check${o.socket === DEFAULT_SOCKET ? '' : ` --socket ${o.socket}`}`;
  if (o.mode === 'warm' && systemdDir === undefined) {
    o.out(
      `done. The service units were not written: run again with --systemd-dir DIR to install them` +
        (o.command ? `: ${o.command} --systemd-dir DIR` : ''),
    );
    o.out(`(until the service runs, every plugin call execs ${dstCold}; check it with: ${check})`);
  } else if (o.mode === 'warm' && o.enable) {
    o.out(
      `done. ${SOCKET_UNIT} is enabled: a host booting from here listens on ${o.socket} from its first boot`,
    );
    o.out(`(until the service runs, every plugin call execs the cold executable; check it with: ${check})`);
  } else if (o.mode === 'warm' && o.systemctlNext) {
    o.out(`done. Enabling ${SOCKET_UNIT} (systemd starts the service on the first plugin call):`);
  } else if (o.mode === 'warm') {
    o.out(`done. Enable the service: systemctl daemon-reload && systemctl enable --now ${SOCKET_UNIT}`);
    o.out(`(until it runs, every plugin call execs ${dstCold}; check it with: ${check})`);
  } else if (steps.some((s) => s.action === 'remove')) {
    o.out(`done. The units and links of warm mode are removed; every plugin call execs ${dstCold}`);
  } else {
    o.out(`done. If the service was enabled: systemctl disable --now ${SOCKET_UNIT} ${SERVICE_UNIT}`);
  }
  return steps;
}

export const MODE_USAGE =
  'usage: scripts/install --warm|--cold [--target DIR] [--source DIR] [--systemd-dir DIR] [--socket PATH] [--dry-run]\n';

export interface ModeDefaults {
  source: string;
  out: (l: string) => void;
  extras?: ModeInstallOptions['extras'];
  command?: string;
  unitExe?: string;
  enable?: boolean;
  systemctlNext?: boolean;
}

/** The target of the symlink at p, or undefined when p is not a symlink. */
function linkOf(p: string): string | undefined {
  try {
    return readlinkSync(p);
  } catch {
    return undefined;
  }
}

export function parseModeArgs(argv: readonly string[], defaults: ModeDefaults): ModeInstallOptions {
  const o: ModeInstallOptions = {
    mode: 'warm',
    source: defaults.source,
    target: SYSTEM_TARGET,
    systemdDir: undefined,
    socket: DEFAULT_SOCKET,
    dryRun: false,
    out: defaults.out,
    ...(defaults.extras ? { extras: defaults.extras } : {}),
    ...(defaults.command ? { command: defaults.command } : {}),
    ...(defaults.unitExe ? { unitExe: defaults.unitExe } : {}),
    ...(defaults.enable ? { enable: true } : {}),
    ...(defaults.systemctlNext ? { systemctlNext: true } : {}),
  };
  let modes = 0;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const value = (flag: string) => {
      const eq = a.indexOf('=');
      if (eq >= 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (!v) throw new ModeInstallError(`${flag} needs a value\n${MODE_USAGE}`);
      return v;
    };
    if (a === '--warm' || a === '--cold') {
      o.mode = a === '--warm' ? 'warm' : 'cold';
      modes++;
    } else if (a === '--dry-run' || a === '-n') o.dryRun = true;
    else if (a === '--target' || a.startsWith('--target=')) o.target = value('--target');
    else if (a === '--source' || a.startsWith('--source=')) o.source = value('--source');
    else if (a === '--systemd-dir' || a.startsWith('--systemd-dir='))
      o.systemdDir = resolve(value('--systemd-dir'));
    else if (a === '--socket' || a.startsWith('--socket=')) o.socket = value('--socket');
    else
      throw new ModeInstallError(`unknown argument ${JSON.stringify(a)} with --warm/--cold\n${MODE_USAGE}`);
  }
  if (modes !== 1) throw new ModeInstallError(`give exactly one of --warm and --cold\n${MODE_USAGE}`);
  // the units go to /etc only for a system install: a scratch --target never touches /etc unless asked
  if (o.systemdDir === undefined && resolve(o.target) === SYSTEM_TARGET) o.systemdDir = SYSTEM_UNITS;
  return o;
}

/** CLI entry used by scripts/install.ts for --warm/--cold. Returns the exit code. */
export function modeCli(argv: readonly string[], defaults: ModeDefaults): number {
  try {
    installMode(parseModeArgs(argv, defaults));
    return 0;
  } catch (e) {
    process.stderr.write(`install: ${(e as Error).message}\n`);
    return 1;
  }
}
