/**
 * Fixtures: what a node has before a plugin runs and the kit's sandbox lacks — a parent link for macvlan/ipvlan/vlan
 * (`master`), a device to hand over (host-device), an interface already in the container (an IPAM plugin such as
 * dhcp, which is called after the main plugin made it), a daemon and a server (dhcp's daemon and a DHCP server).
 * Declared in a JSON file (`--fixtures FILE`), in short flags (`--host-link`, `--container-link`, `--skip`) or in
 * `runConformance({ fixtures })`; all of it lives in the kit's private namespaces and goes with them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { CHECKS } from './catalog.ts';

export interface HostLinkFixture {
  /** Interface name in the sandbox's host namespace (1-15 characters). */
  name: string;
  /** `ip link add NAME type TYPE`: dummy, bridge, veth (its peer NAME-p… stays in the host too), macvlan, … */
  type: string;
  /** Addresses (CIDR) put on it. */
  addresses?: string[];
}

export interface DaemonFixture {
  /** The command and its arguments (no shell); `{plugin}` is the plugin under test, `{dir}` a private directory. */
  argv: string[];
  /** The daemon is ready when this path exists (a socket, a pid file); `{dir}` and `{plugin}` expand too. */
  readyPath?: string;
}

export interface Fixtures {
  /** Links created (up) in the sandbox's host namespace before the checks, and again before a check when gone. */
  hostLinks?: HostLinkFixture[];
  /**
   * Every container namespace the kit makes gets CNI_IFNAME already: a veth whose host end is a port of `master`
   * (a host link). For plugins that work on an interface another plugin made (IPAM plugins such as dhcp).
   */
  containerLink?: { master: string };
  /** Processes started in the sandbox's host namespace (after the links) and stopped at the end. */
  daemons?: DaemonFixture[];
  /** Checks that cannot apply to this configuration: check ID → the reason, printed as the skip detail. */
  skip?: Record<string, string>;
}

const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;
const LINK_TYPE = /^[a-z][a-z0-9_]{0,30}$/;
const CIDR = /^[0-9a-fA-F:.]+\/\d{1,3}$/;

export class FixtureError extends Error {}

const isObj = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);

function hostLink(x: unknown, where: string): HostLinkFixture {
  if (!isObj(x)) throw new FixtureError(`${where}: not an object`);
  const { name, type, addresses, ...rest } = x;
  if (Object.keys(rest).length)
    throw new FixtureError(`${where}: unknown key(s) ${Object.keys(rest).join(', ')}`);
  if (typeof name !== 'string' || !IFNAME.test(name))
    throw new FixtureError(`${where}: "name" must be an interface name (1-15 of A-Z a-z 0-9 _ . -)`);
  if (typeof type !== 'string' || !LINK_TYPE.test(type))
    throw new FixtureError(`${where}: "type" must be a link type such as dummy, bridge or veth`);
  if (
    addresses !== undefined &&
    (!Array.isArray(addresses) || addresses.some((a) => typeof a !== 'string' || !CIDR.test(a)))
  )
    throw new FixtureError(`${where}: "addresses" must be a list of CIDRs (10.0.0.1/24)`);
  return { name, type, ...(addresses ? { addresses: addresses as string[] } : {}) };
}

/** `NAME:TYPE[:CIDR[,CIDR…]]` of `--host-link`. */
export function parseHostLinkFlag(spec: string): HostLinkFixture {
  const [name, type, addrs, ...more] = spec.split(':');
  // an IPv6 CIDR has colons itself: everything after the second colon is the address list
  const list = [addrs, ...more].filter((s) => s !== undefined).join(':');
  return hostLink(
    { name, type, ...(list ? { addresses: list.split(',') } : {}) },
    `--host-link ${JSON.stringify(spec)} (NAME:TYPE[:CIDR,…])`,
  );
}

/** `ID=REASON` of `--skip`. */
export function parseSkipFlag(spec: string): [string, string] {
  const at = spec.indexOf('=');
  const id = at < 0 ? spec : spec.slice(0, at);
  const reason = at < 0 ? '' : spec.slice(at + 1).trim();
  if (!CHECKS.some((c) => c.id === id))
    throw new FixtureError(`--skip ${JSON.stringify(spec)}: unknown check ID ${JSON.stringify(id)}`);
  if (!reason) throw new FixtureError(`--skip ${JSON.stringify(spec)}: give the reason (ID=REASON)`);
  return [id, reason];
}

/** Validate a fixtures object (the `--fixtures` file's content). */
export function parseFixtures(raw: unknown, where = 'fixtures'): Fixtures {
  if (!isObj(raw)) throw new FixtureError(`${where}: not a JSON object`);
  const { hostLinks, containerLink, daemons, skip, ...rest } = raw;
  if (Object.keys(rest).length)
    throw new FixtureError(
      `${where}: unknown key(s) ${Object.keys(rest).join(', ')} (hostLinks, containerLink, daemons, skip)`,
    );
  const out: Fixtures = {};
  if (hostLinks !== undefined) {
    if (!Array.isArray(hostLinks)) throw new FixtureError(`${where}: "hostLinks" must be a list`);
    out.hostLinks = hostLinks.map((h, i) => hostLink(h, `${where}: hostLinks[${i}]`));
    const names = out.hostLinks.map((h) => h.name);
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup) throw new FixtureError(`${where}: host link ${dup} is declared twice`);
  }
  if (containerLink !== undefined) {
    if (
      !isObj(containerLink) ||
      typeof containerLink.master !== 'string' ||
      Object.keys(containerLink).length !== 1
    )
      throw new FixtureError(`${where}: "containerLink" must be {"master": "<host link>"}`);
    if (!out.hostLinks?.some((h) => h.name === containerLink.master))
      throw new FixtureError(
        `${where}: containerLink.master ${JSON.stringify(containerLink.master)} is not one of hostLinks`,
      );
    out.containerLink = { master: containerLink.master };
  }
  if (daemons !== undefined) {
    if (!Array.isArray(daemons)) throw new FixtureError(`${where}: "daemons" must be a list`);
    out.daemons = daemons.map((d, i) => {
      const w = `${where}: daemons[${i}]`;
      if (!isObj(d)) throw new FixtureError(`${w}: not an object`);
      const { argv, readyPath, ...more } = d;
      if (Object.keys(more).length)
        throw new FixtureError(`${w}: unknown key(s) ${Object.keys(more).join(', ')}`);
      if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== 'string' || a === ''))
        throw new FixtureError(`${w}: "argv" must be a non-empty list of strings (no shell)`);
      if (
        readyPath !== undefined &&
        (typeof readyPath !== 'string' || (!readyPath.startsWith('/') && !readyPath.startsWith('{')))
      )
        throw new FixtureError(`${w}: "readyPath" must be an absolute path`);
      return { argv: argv as string[], ...(readyPath ? { readyPath } : {}) };
    });
  }
  if (skip !== undefined) {
    if (!isObj(skip)) throw new FixtureError(`${where}: "skip" must be an object {check ID: reason}`);
    out.skip = {};
    for (const [id, reason] of Object.entries(skip)) {
      if (!CHECKS.some((c) => c.id === id))
        throw new FixtureError(`${where}: skip: unknown check ID ${JSON.stringify(id)}`);
      if (typeof reason !== 'string' || !reason.trim())
        throw new FixtureError(`${where}: skip.${id}: give the reason`);
      out.skip[id] = reason.trim();
    }
  }
  return out;
}

/** Merge fixtures (a file, then the short flags). */
export function mergeFixtures(...all: Fixtures[]): Fixtures {
  const out: Fixtures = {};
  for (const f of all) {
    if (f.hostLinks) out.hostLinks = [...(out.hostLinks ?? []), ...f.hostLinks];
    if (f.containerLink) out.containerLink = f.containerLink;
    if (f.daemons) out.daemons = [...(out.daemons ?? []), ...f.daemons];
    if (f.skip) out.skip = { ...(out.skip ?? {}), ...f.skip };
  }
  return parseFixtures(out, 'the fixtures');
}

export function expand(s: string, vars: { plugin: string; dir: string }): string {
  return s.replaceAll('{plugin}', vars.plugin).replaceAll('{dir}', vars.dir);
}

/** The peer of a veth host link (in the host namespace too). */
export function vethPeer(name: string): string {
  return `${name.slice(0, 14)}p`;
}

/** A running daemon fixture. */
export class Daemon {
  private readonly child: ChildProcess;
  private output = '';
  exited: string | undefined;

  constructor(
    readonly argv: string[],
    readonly readyPath: string | undefined,
  ) {
    const [cmd, ...args] = argv as [string, ...string[]];
    this.child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (d: string) => {
      this.output = (this.output + d).slice(-4000);
    };
    this.child.stdout?.setEncoding('utf8').on('data', keep);
    this.child.stderr?.setEncoding('utf8').on('data', keep);
    this.child.on('error', (e) => {
      this.exited = `could not start: ${e.message}`;
    });
    this.child.on('exit', (code, signal) => {
      this.exited ??= `exited (${signal ?? `status ${code}`})`;
    });
  }

  get name(): string {
    return this.argv.join(' ');
  }

  /** Why it is not running (undefined: running), with the end of its output. */
  problem(): string | undefined {
    return this.exited
      ? `the daemon fixture \`${this.name}\` ${this.exited}: ${this.output.trim().slice(-1000)}`
      : undefined;
  }

  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.readyPath && !existsSync(this.readyPath)) {
      const p = this.problem();
      if (p) throw new FixtureError(p);
      if (Date.now() > deadline)
        throw new FixtureError(
          `the daemon fixture \`${this.name}\` made no ${this.readyPath} within ${timeoutMs / 1000} s: ${this.output.trim().slice(-1000)}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
    const p = this.problem();
    if (p) throw new FixtureError(p);
  }

  /** SIGTERM, then SIGKILL for what is still there after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exited || this.child.exitCode !== null) return;
    const gone = new Promise((r) => this.child.once('exit', r));
    this.exited = 'stopped by the kit';
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(t);
  }

  /** At process exit (synchronous): no daemon outlives the kit. */
  killNow(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}
