/**
 * What `scripts/install` does when neither --warm nor --cold is given: warm mode through systemd socket activation
 * when systemd runs the host, the plain cold install otherwise.
 *
 * - systemd runs the host when `<root>/run/systemd/system` is a directory (what sd_booted(3) checks);
 * - `--root DIR` installs under a prefix (a DESTDIR, an image being built): the target defaults to
 *   DIR/opt/cni/bin, the units go to DIR/etc/systemd/system and name the executable without the prefix, and
 *   systemctl is never run (the units are only written: the host that boots from DIR enables them);
 * - `--no-socket` (or `--no-warm`) keeps the cold install on a systemd host (so does `--cold`, which also switches a
 *   warm install back: `systemctl disable --now` where systemd runs /, then the units and links the warm install
 *   wrote are removed); a scratch `--target` (not /opt/cni/bin under the root) also stays cold unless --warm is
 *   given;
 * - under a --root prefix the socket is enabled by writing the link `systemctl enable` writes
 *   (DIR/etc/systemd/system/sockets.target.wants/cnikit.socket), so the host booting from DIR listens from its first
 *   boot;
 * - with the root `/`, after the units are written: `systemctl daemon-reload` and `systemctl enable --now
 *   cnikit.socket` — systemd then listens on the socket and starts the service on the first plugin call; no plugin
 *   call ever starts a resident process itself, and until the service answers every call execs the cold executable.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SERVICE_UNIT, SOCKET_UNIT, SYSTEM_TARGET, SYSTEM_UNITS } from '@cnikit/warm/install';

/** The marker systemd creates at boot (sd_booted). */
export const SYSTEMD_MARKER = 'run/systemd/system';

/** True when systemd runs the system under `root`. */
export function systemdRuns(root: string): boolean {
  try {
    return statSync(join(root, SYSTEMD_MARKER)).isDirectory();
  } catch {
    return false;
  }
}

export interface DefaultPlan {
  /** The arguments for the install itself (--root and --no-socket taken out, --target/--systemd-dir put in). */
  argv: string[];
  mode: 'warm' | 'cold';
  /** Run systemctl after the install (root `/`, systemd running, warm, not a dry run). */
  enable: boolean;
  /** Why the install is cold on this host (printed), when it is. */
  why?: string;
  /** The executable the units name (the installed path without the root prefix). */
  unitExe?: string;
  /** Warm under a --root prefix: write the enable link itself (systemctl is not run there). */
  link?: boolean;
}

/** The plan of an install given without --warm/--cold (argv as given to scripts/install, --from already handled). */
export function defaultPlan(argv: readonly string[]): DefaultPlan {
  let root = '/';
  let noSocket = false;
  let target: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--root' || a.startsWith('--root=')) {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (!v) throw new Error('--root needs a value');
      root = resolve(v);
    } else if (a === '--no-socket' || a === '--no-warm') noSocket = true;
    else {
      if (a === '--target' || a.startsWith('--target='))
        target = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[i + 1];
      rest.push(a);
    }
  }
  const systemTarget = join(root, SYSTEM_TARGET);
  const withTarget = target === undefined ? [...rest, '--target', systemTarget] : rest;
  const cold = (why: string): DefaultPlan => ({ argv: withTarget, mode: 'cold', enable: false, why });
  if (noSocket) {
    // a warm install before this one left its units (and maybe the enabled socket): say how they go
    const left = existsSync(join(root, SYSTEM_UNITS, SOCKET_UNIT))
      ? `; the units of an earlier warm install stay in ${join(root, SYSTEM_UNITS)}: scripts/install --cold removes them`
      : '';
    return cold(`--no-socket/--no-warm: cold mode (every plugin call execs cnikit)${left}`);
  }
  if (rest.some((a) => a === '--backend' || a.startsWith('--backend=')))
    return cold('--backend: cold mode with that back-end (warm mode installs the default one: --warm)');
  if (!systemdRuns(root))
    return cold(
      `systemd does not run ${root === '/' ? 'this host' : root} (no /${SYSTEMD_MARKER}): cold mode`,
    );
  if (target !== undefined && resolve(target) !== systemTarget)
    return cold(`--target ${target} is not ${systemTarget}: cold mode (give --warm for warm mode there)`);
  if (rest.some((a) => a === '--systemd-dir' || a.startsWith('--systemd-dir=')))
    throw new Error('--systemd-dir goes with --warm');
  const dryRun = rest.includes('--dry-run') || rest.includes('-n');
  return {
    argv: ['--warm', ...withTarget, '--systemd-dir', join(root, SYSTEM_UNITS)],
    mode: 'warm',
    enable: root === '/' && !dryRun,
    unitExe: join(SYSTEM_TARGET, 'cnikit'),
    link: root !== '/',
  };
}

/**
 * `--cold` where systemd runs this host and the warm install's socket unit is in /etc/systemd/system (the system
 * target, no --systemd-dir elsewhere, not a dry run): the socket and service are stopped and disabled before their
 * files are removed.
 */
export function coldDisables(argv: readonly string[], root = '/'): boolean {
  if (argv.includes('--dry-run') || argv.includes('-n') || !systemdRuns(root)) return false;
  const value = (flag: string) => {
    const i = argv.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
    if (i < 0) return undefined;
    const a = argv[i] as string;
    return a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[i + 1];
  };
  const target = value('--target');
  const units = value('--systemd-dir');
  if (target !== undefined && resolve(target) !== SYSTEM_TARGET) return false;
  if (units !== undefined && resolve(units) !== SYSTEM_UNITS) return false;
  return existsSync(join(SYSTEM_UNITS, SOCKET_UNIT));
}

/** `systemctl disable --now cnikit.socket cnikit.service`; false (with the message said) on failure. */
export function disableSocket(say: (line: string) => void): boolean {
  const args = ['disable', '--now', SOCKET_UNIT, SERVICE_UNIT];
  say(`systemctl ${args.join(' ')}`);
  const r = spawnSync('systemctl', args, { encoding: 'utf8', stdio: ['ignore', 'inherit', 'pipe'] });
  if (r.status === 0) return true;
  say(
    `systemctl ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}: ${r.stderr.trim()}`}); ` +
      'nothing was changed',
  );
  return false;
}

/** `systemctl daemon-reload` after the units were removed; false (with the message said) on failure. */
export function daemonReload(say: (line: string) => void): boolean {
  say('systemctl daemon-reload');
  const r = spawnSync('systemctl', ['daemon-reload'], {
    encoding: 'utf8',
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  if (r.status === 0) return true;
  say(`systemctl daemon-reload failed (${r.error?.message ?? `exit ${r.status}: ${r.stderr.trim()}`})`);
  return false;
}

/** `systemctl daemon-reload` then `systemctl enable --now cnikit.socket`; false (with the message said) on failure. */
export function enableSocket(say: (line: string) => void): boolean {
  for (const args of [['daemon-reload'], ['enable', '--now', SOCKET_UNIT]]) {
    say(`systemctl ${args.join(' ')}`);
    const r = spawnSync('systemctl', args, { encoding: 'utf8', stdio: ['ignore', 'inherit', 'pipe'] });
    if (r.status !== 0) {
      say(
        `systemctl ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}: ${r.stderr.trim()}`}); ` +
          `the plugins fall back to cold mode until it is enabled: systemctl enable --now ${SOCKET_UNIT}`,
      );
      return false;
    }
  }
  return true;
}
