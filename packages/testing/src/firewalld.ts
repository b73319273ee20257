/**
 * A real firewalld for tests, isolated from the machine:
 *
 * ```ts
 * const bus = await startPrivateSystemBus();                        // its own dbus-daemon, socket in a temp dir
 * const fw = await startFirewalld({ netns: sb.host, bus });         // firewalld inside the sandbox's namespace
 * cni.add(conf, { env: bus.env });                                   // DBUS_SYSTEM_BUS_ADDRESS → the private bus
 * await fw.stop(); await bus.stop();                                 // also done at exit if a test forgets
 * ```
 *
 * - The bus is a system-type dbus-daemon (`--nofork --print-address`) listening on a unix socket in a private
 *   temporary directory; it includes the installed system.d policies, so firewalld may own
 *   `org.fedoraproject.FirewallD1` (callers are root).
 * - firewalld runs in the given network namespace AND in a private mount namespace (`unshare -m`) with tmpfs over
 *   /run and /var/log, its system configuration copied to the temporary directory (`--system-config`), logging
 *   to the console: the machine's /etc, /run, logs and firewall are never touched. Its nftables ruleset lives in
 *   that network namespace only.
 * Needs root and the Debian packages "firewalld" and "dbus" (dbus-daemon, dbus-send).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NamedNetns } from './sandbox.ts';
import { scaled } from './timescale.ts';

export interface PrivateBus {
  /** The bus address (`unix:path=…`), what DBUS_SYSTEM_BUS_ADDRESS must hold. */
  readonly address: string;
  /** `{ DBUS_SYSTEM_BUS_ADDRESS: address }`, to merge into a plugin call's environment. */
  readonly env: Record<string, string>;
  /** The private temporary directory (socket, configuration). */
  readonly dir: string;
  /** Stop the daemon and remove the directory (idempotent). */
  stop(): Promise<void>;
}

export interface PrivateFirewalld {
  readonly bus: PrivateBus;
  readonly netns: NamedNetns;
  /** Milliseconds from start until firewalld answered with state RUNNING. */
  readonly startupMs: number;
  /** What firewalld printed so far (stdout + stderr). */
  output(): string;
  /** Stop firewalld (SIGTERM, SIGKILL after 5 s) and wait until its name is released; idempotent. */
  stop(): Promise<void>;
}

const live = new Set<{ stop(): Promise<void>; kill(): void }>();
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const x of live) x.kill();
  });
}

function busConfig(socket: string): string {
  return `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=${socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
  <includedir>/etc/dbus-1/system.d</includedir>
</busconfig>
`;
}

function need(tool: string, pkg: string): void {
  const dirs = (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  const found = tool.startsWith('/') ? existsSync(tool) : dirs.some((d) => d && existsSync(join(d, tool)));
  if (!found) throw new Error(`${tool} not found: install the Debian package "${pkg}"`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function waitExit(p: ChildProcess, ms: number): Promise<boolean> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** One dbus-send call on `address`; stdout or undefined on failure. */
export function dbusSendRaw(address: string, dest: string, path: string, method: string, args: string[]) {
  const r = spawnSync(
    'dbus-send',
    [
      `--bus=${address}`,
      '--print-reply',
      `--reply-timeout=${scaled(5000)}`,
      `--dest=${dest}`,
      path,
      method,
      ...args,
    ],
    { encoding: 'utf8', timeout: scaled(10_000) },
  );
  return r.status === 0 ? r.stdout : undefined;
}

/** Whether `name` has an owner on the bus at `address`. */
export function busNameHasOwner(address: string, name: string): boolean {
  const out = dbusSendRaw(
    address,
    'org.freedesktop.DBus',
    '/org/freedesktop/DBus',
    'org.freedesktop.DBus.NameHasOwner',
    [`string:${name}`],
  );
  return out !== undefined && /boolean true/.test(out);
}

/** Start a private system-type bus (see the module comment). */
export async function startPrivateSystemBus(): Promise<PrivateBus> {
  need('dbus-daemon', 'dbus-daemon');
  need('dbus-send', 'dbus-bin');
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-dbus-'));
  const socket = join(dir, 'system_bus_socket');
  const conf = join(dir, 'bus.conf');
  writeFileSync(conf, busConfig(socket));
  const p = spawn('dbus-daemon', [`--config-file=${conf}`, '--nofork', '--print-address'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  p.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const entry = {
    kill: () => {
      if (p.exitCode === null) p.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
    stop: async () => {
      live.delete(entry);
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        if (!(await waitExit(p, 3000))) p.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  live.add(entry);
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`dbus-daemon did not start: ${err}`)), scaled(10_000));
      p.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) {
          clearTimeout(t);
          resolve();
        }
      });
      p.once('exit', (c) => {
        clearTimeout(t);
        reject(new Error(`dbus-daemon exited with ${c}: ${err}`));
      });
    });
  } catch (e) {
    await entry.stop();
    throw e;
  }
  const address = `unix:path=${socket}`;
  return { address, env: { DBUS_SYSTEM_BUS_ADDRESS: address }, dir, stop: entry.stop };
}

/** Mount tmpfs over /run and /var/log (inside the private mount namespace), then become firewalld. */
const WRAPPER = `import os, subprocess, sys
for d in ('/run', '/var/log'):
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'mode=0755', 'cnikit-firewalld', d], check=True)
os.execv('/usr/sbin/firewalld', ['/usr/sbin/firewalld'] + sys.argv[1:])
`;

export interface FirewalldOptions {
  /** The network namespace firewalld manages (a sandbox's "host"). */
  netns: NamedNetns;
  bus: PrivateBus;
  /** Milliseconds to wait for state RUNNING (default 30 s). */
  timeoutMs?: number;
}

/** Start firewalld on `bus` inside `netns` and a private mount namespace (see the module comment). */
export async function startFirewalld(opts: FirewalldOptions): Promise<PrivateFirewalld> {
  need('/usr/sbin/firewalld', 'firewalld');
  need('unshare', 'util-linux');
  hookExit();
  const { bus, netns } = opts;
  const etc = join(bus.dir, 'firewalld-etc');
  cpSync('/etc/firewalld', etc, { recursive: true });
  const confFile = join(etc, 'firewalld.conf');
  const base = existsSync(confFile) ? readFileSync(confFile, 'utf8') : '';
  // no cleanup work at exit (the namespace goes away with the test; never rmmod), nftables, no per-rule calls
  const settings: Record<string, string> = {
    CleanupOnExit: 'no',
    CleanupModulesOnExit: 'no',
    FirewallBackend: 'nftables',
    IndividualCalls: 'no',
    LogDenied: 'off',
  };
  let text = base
    .split('\n')
    .filter((l) => !Object.keys(settings).some((k) => l.startsWith(`${k}=`)))
    .join('\n');
  for (const [k, v] of Object.entries(settings)) text += `\n${k}=${v}`;
  writeFileSync(confFile, `${text}\n`);
  const started = Date.now();
  const p = spawn(
    'ip',
    [
      'netns',
      'exec',
      netns.name,
      'unshare',
      '-m',
      '--propagation',
      'private',
      '--',
      '/usr/bin/python3',
      '-c',
      WRAPPER,
      '--nofork',
      '--nopid',
      '--system-config',
      etc,
      '--log-target',
      'console',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...bus.env } },
  );
  let out = '';
  p.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  p.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const entry = {
    kill: () => {
      if (p.exitCode === null) p.kill('SIGKILL');
    },
    stop: async () => {
      live.delete(entry);
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        if (!(await waitExit(p, 5000))) {
          p.kill('SIGKILL');
          await waitExit(p, 5000);
        }
      }
      for (let i = 0; i < 100 && busNameHasOwner(bus.address, 'org.fedoraproject.FirewallD1'); i++)
        await sleep(20);
    },
  };
  live.add(entry);
  const startMs = scaled(opts.timeoutMs ?? 30_000);
  const deadline = started + startMs;
  try {
    for (;;) {
      if (p.exitCode !== null || p.signalCode !== null)
        throw new Error(`firewalld exited (${p.exitCode ?? p.signalCode}): ${out}`);
      if (busNameHasOwner(bus.address, 'org.fedoraproject.FirewallD1')) {
        const state = dbusSendRaw(
          bus.address,
          'org.fedoraproject.FirewallD1',
          '/org/fedoraproject/FirewallD1',
          'org.freedesktop.DBus.Properties.Get',
          ['string:org.fedoraproject.FirewallD1', 'string:state'],
        );
        if (state?.includes('"RUNNING"')) break;
      }
      if (Date.now() > deadline) throw new Error(`firewalld not running after ${startMs} ms: ${out}`);
      await sleep(50);
    }
  } catch (e) {
    await entry.stop();
    throw e;
  }
  return { bus, netns, startupMs: Date.now() - started, output: () => out, stop: entry.stop };
}
