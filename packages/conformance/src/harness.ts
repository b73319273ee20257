/**
 * The harness of the checks (kit.ts binds it to the check bodies of checks.ts), run in this process. Needs root and a private mount namespace in which /var/lib/cni is a private
 * directory (`cli.ts` and `runConformance` arrange both); every check runs in a fresh sandbox (private "host" and
 * "container" network namespaces from @cnikit/testing) whose host namespace this thread enters, so every plugin the
 * kit starts runs there, as on a node. The plugins before the plugin under test run through @cnikit/libcni's
 * CniConfig (exec'd from CNI_PATH, as a runtime would); the plugin under test is exec'd directly, so every call is
 * recorded with its exact environment and stdin for the report.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { CniConfig, confListFromObject, type RuntimeConf } from '@cnikit/libcni';
import { sysctlGet, withNetns } from '@cnikit/netlink';
import { formatResult, versionGte } from '@cnikit/skel';
import {
  type CniCallOptions,
  type CniCommand,
  type CniOutcome,
  cniCall,
  cniEnv,
  createSandbox,
  deleteNamedNetns,
  enterNetns,
  type NamedNetns,
  type Sandbox,
  sleep,
} from '@cnikit/testing';
import { type CheckInfo, KIT_VERSIONS, selectChecks } from './catalog.ts';
import { Fail, type Json, Skip, short } from './check-outcome.ts';
import { Daemon, expand, FixtureError, type Fixtures, vethPeer } from './fixtures.ts';
import type { CallRecord, CheckResult, Report } from './kit-types.ts';
import { captureWorld, nsExec, verifyResult, type World } from './state.ts';

export type { CallRecord, CheckResult, Report, Status } from './kit-types.ts';

/** The check bodies by id (checks.ts), each given the harness and answering its summary line. */
export type CheckTable = Readonly<Record<string, (k: Harness) => Promise<string>>>;

export interface KitOptions {
  /** The plugin executable under test. */
  plugin: string;
  /** The network configuration list (parsed JSON). */
  config: Record<string, unknown>;
  /** Checks to run: IDs or prefixes (`add.*`); default all. */
  only?: readonly string[];
  /** CNI_PATH for the plugins before it and its delegates (default: the plugin's directory). */
  cniPath?: readonly string[];
  /** CNI_IFNAME of the attachments (default eth0; loopback: lo). */
  ifName?: string;
  /** Containers in `concurrency` (default 6). */
  concurrency?: number;
  /** Timeout per plugin call in ms (default 30 s). */
  timeoutMs?: number;
  /** The directory plugins keep their files in (default /var/lib/cni: private when run through the CLI). */
  stateDir?: string;
  /** What the sandbox needs before the plugin runs: host links, a link in every container, daemons, skips. */
  fixtures?: Fixtures;
  /** Called after each check (progress). */
  onResult?: (r: CheckResult) => void;
}

/**
 * Sample capability arguments (CONVENTIONS.md "Well-known capabilities"): what the kit passes as runtimeConfig, as a
 * runtime passes its capability arguments, when a plugin entry declares the capability (`capabilities: {X: true}`)
 * and gives no `runtimeConfig.X` of its own. Without them a declared capability is never exercised (portmap with no
 * mapping changes nothing).
 */
export const SAMPLE_CAPABILITY_ARGS: Readonly<Record<string, unknown>> = {
  portMappings: [{ hostPort: 18080, containerPort: 80, protocol: 'tcp' }],
  bandwidth: { ingressRate: 8_000_000, ingressBurst: 160_000, egressRate: 8_000_000, egressBurst: 160_000 },
  ipRanges: [[{ subnet: '10.98.0.0/24' }]],
  ips: ['10.98.1.42/24'],
  mac: '0a:58:0a:62:01:2a',
  dns: { nameservers: ['10.98.0.53'], search: ['conformance.test'], options: ['ndots:2'] },
};

/**
 * The capability arguments the kit supplies for `entry` (the declared capabilities its runtimeConfig lacks); throws
 * for a declared capability the kit has no sample of, so a run never passes without exercising it.
 */
export function capabilitySamples(entry: Record<string, unknown>): Record<string, unknown> {
  const caps = entry.capabilities;
  if (!caps || typeof caps !== 'object' || Array.isArray(caps)) return {};
  const rc = entry.runtimeConfig;
  const given = rc && typeof rc === 'object' && !Array.isArray(rc) ? (rc as Record<string, unknown>) : {};
  const out: Record<string, unknown> = {};
  for (const [cap, on] of Object.entries(caps as Record<string, unknown>)) {
    if (on !== true || given[cap] !== undefined) continue;
    if (!Object.hasOwn(SAMPLE_CAPABILITY_ARGS, cap))
      throw new Error(
        `the plugin "${String(entry.type)}" declares the capability "${cap}" and the list gives no runtimeConfig for ` +
          `it; the kit has samples only for ${Object.keys(SAMPLE_CAPABILITY_ARGS).join(', ')}: add ` +
          `"runtimeConfig": {"${cap}": …} to the entry, as a runtime would pass it`,
      );
    out[cap] = SAMPLE_CAPABILITY_ARGS[cap];
  }
  return out;
}

/** The checks that run the plugin in the configuration's cniVersion (skipped when version.config fails). */
const CONFIG_VERSION_DEPENDENTS = [
  'add.prevresult',
  'add.ifname-exists',
  'add.failure-clean',
  'check.',
  'del.',
  'concurrency',
  'determinism',
];

/** An attachment: one (container, ifname) with its chain results. */
export interface Att {
  rt: RuntimeConf;
  ns: NamedNetns;
  version: string;
  prev?: Json;
  result?: Json;
}

export class Harness {
  readonly plugin: string;
  readonly conflist: Record<string, unknown>;
  readonly network: string;
  readonly baseVersion: string;
  readonly put: Record<string, unknown>;
  readonly prefix: Record<string, unknown>[];
  readonly type: string;
  readonly cniPath: string[];
  readonly stateDir: string;
  readonly timeoutMs: number;
  readonly concurrency: number;
  readonly ifName: string;
  private made: NamedNetns[] = [];
  /** Names under /run/netns the kit handed out as CNI_NETNS of no namespace (a plugin may create the file). */
  private stray = new Set<string>();
  readonly fixtures: Fixtures;
  private readonly fixtureDir: string;
  private daemons: Daemon[] = [];
  private readonly cacheDir: string;
  private readonly runtime: CniConfig;
  supported: string[] = [];
  /** Why the configuration's cniVersion cannot be used (set by the version check), undefined when it can. */
  configVersionProblem: string | undefined;
  /** Capability arguments the kit supplies: for the plugin under test, and for the plugins before it (libcni). */
  readonly putCapabilityArgs: Record<string, unknown>;
  readonly prefixCapabilityArgs: Record<string, unknown>;
  readonly suppliedRuntimeConfig: Report['suppliedRuntimeConfig'] = [];
  private prefixSupported: string[][] = [];
  private calls: CallRecord[] = [];
  private sb: Sandbox | undefined;

  constructor(
    readonly opts: KitOptions,
    private readonly checks: CheckTable,
  ) {
    this.plugin = opts.plugin;
    const c = opts.config;
    if (!c || typeof c !== 'object') throw new Error('the configuration is not a JSON object');
    const plugins = c.plugins;
    if (!Array.isArray(plugins) || plugins.length === 0)
      throw new Error('the configuration is not a list: it needs a non-empty "plugins" array');
    if (typeof c.name !== 'string' || !c.name) throw new Error('the configuration list has no "name"');
    if (typeof c.cniVersion !== 'string' || !c.cniVersion)
      throw new Error('the configuration list has no "cniVersion"');
    this.conflist = c;
    this.network = c.name;
    this.baseVersion = c.cniVersion;
    const self = basename(opts.plugin);
    let at = plugins.findIndex((p) => p && typeof p === 'object' && p.type === self);
    if (at < 0) at = plugins.length - 1;
    this.put = plugins[at] as Record<string, unknown>;
    this.prefix = plugins.slice(0, at) as Record<string, unknown>[];
    this.type = String(this.put.type ?? self);
    this.putCapabilityArgs = capabilitySamples(this.put);
    this.prefixCapabilityArgs = {};
    for (const p of this.prefix) Object.assign(this.prefixCapabilityArgs, capabilitySamples(p));
    for (const p of [...this.prefix, this.put]) {
      for (const [capability, value] of Object.entries(capabilitySamples(p)))
        this.suppliedRuntimeConfig.push({ type: String(p.type), capability, value });
    }
    this.cniPath = [...(opts.cniPath ?? [dirname(opts.plugin)])];
    this.stateDir = opts.stateDir ?? '/var/lib/cni';
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.concurrency = Math.max(2, opts.concurrency ?? 6);
    this.ifName = opts.ifName ?? 'eth0';
    this.cacheDir = mkdtempSync(join(tmpdir(), 'cnikit-conformance-cache-'));
    this.fixtures = opts.fixtures ?? {};
    this.fixtureDir = join(this.cacheDir, 'fixtures');
    mkdirSync(this.fixtureDir);
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CNI_')));
    this.runtime = new CniConfig({
      path: this.cniPath,
      cacheDir: this.cacheDir,
      inProcess: false,
      env,
      stderr: { write: () => true },
      timeoutMs: this.timeoutMs,
    });
  }

  dispose(): void {
    for (const d of this.daemons) d.killNow();
    this.daemons = [];
    this.sb?.destroy();
    this.sb = undefined;
    this.removeStray();
    rmSync(this.cacheDir, { recursive: true, force: true });
  }

  /**
   * A CNI_NETNS path that names no namespace, for the checks that need one. Some plugins create the path they are
   * given (Go's sbr 1.1.1 opens it with O_CREAT as a lock file, before it finds it is no namespace): the kit removes
   * the path after every check and at the end, whoever created it.
   */
  goneNetns(): string {
    const name = `cnikit-conformance-gone-${randomBytes(3).toString('hex')}`;
    this.stray.add(name);
    return `/run/netns/${name}`;
  }

  /** Remove what the kit named under /run/netns (an empty file a plugin created, or a namespace). */
  private removeStray(): void {
    for (const name of this.stray) {
      try {
        deleteNamedNetns(name);
        this.stray.delete(name);
      } catch {
        // tried again at the end
      }
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // fixtures

  private fixtureVars() {
    return { plugin: this.plugin, dir: this.fixtureDir };
  }

  /** The host links of the fixtures, created where missing (a check may have taken one away: host-device). */
  private ensureHostLinks(sb: Sandbox): void {
    const want = this.fixtures.hostLinks ?? [];
    if (!want.length) return;
    const have = new Set(
      (
        JSON.parse(nsExec(sb, 'host', 'ip', ['-json', 'link', 'show']).stdout || '[]') as Array<{
          ifname: string;
        }>
      ).map((l) => l.ifname),
    );
    for (const l of want) {
      if (have.has(l.name)) continue;
      const peer = l.type === 'veth' ? ['peer', 'name', vethPeer(l.name)] : [];
      if (l.type === 'veth') nsExec(sb, 'host', 'ip', ['link', 'del', vethPeer(l.name)], { check: false });
      const r = nsExec(sb, 'host', 'ip', ['link', 'add', l.name, 'type', l.type, ...peer], { check: false });
      if (r.status !== 0)
        throw new FixtureError(
          `the host link fixture ${l.name} (type ${l.type}): ip link add failed: ${r.stderr.trim()}`,
        );
      if (l.type === 'bridge') pinBridgeAddress(sb, l.name);
      for (const a of l.addresses ?? []) nsExec(sb, 'host', 'ip', ['addr', 'add', a, 'dev', l.name]);
      if (l.type === 'veth') nsExec(sb, 'host', 'ip', ['link', 'set', vethPeer(l.name), 'up']);
      nsExec(sb, 'host', 'ip', ['link', 'set', l.name, 'up']);
    }
  }

  /** Before every check: host links there, daemons running (started with the sandbox). */
  private async fixturesReady(sb: Sandbox, fresh: boolean): Promise<void> {
    this.ensureHostLinks(sb);
    if (fresh) {
      for (const d of this.fixtures.daemons ?? []) {
        const v = this.fixtureVars();
        const daemon = new Daemon(
          d.argv.map((a) => expand(a, v)),
          d.readyPath ? expand(d.readyPath, v) : undefined,
        );
        this.daemons.push(daemon);
        await daemon.ready(this.timeoutMs);
      }
    }
    for (const d of this.daemons) {
      const p = d.problem();
      if (p) throw new FixtureError(p);
    }
  }

  private async stopDaemons(): Promise<void> {
    await Promise.all(this.daemons.map((d) => d.stop()));
    this.daemons = [];
  }

  // -------------------------------------------------------------------------------------------------------------
  // calls

  private callOpts(a: Partial<Att> & { ns?: NamedNetns }, extra: CniCallOptions = {}): CniCallOptions {
    return {
      containerId: a.rt?.containerId ?? 'conformance',
      netns: a.rt?.netns ?? a.ns?.path ?? '',
      ifName: a.rt?.ifName ?? this.ifName,
      path: this.cniPath.join(':'),
      timeoutMs: this.timeoutMs,
      ...extra,
    };
  }

  /** Call the plugin under test; `conf` is an object or the exact stdin. */
  async call(
    command: CniCommand,
    conf: unknown,
    o: CniCallOptions,
  ): Promise<CniOutcome & { rec: CallRecord }> {
    const stdin = typeof conf === 'string' ? conf : JSON.stringify(conf);
    const env = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...cniEnv(command, o) };
    const out = await cniCall({ binary: this.plugin }, command, stdin, o);
    const rec: CallRecord = {
      plugin: this.plugin,
      env,
      stdin,
      code: out.code,
      stdout: out.stdout,
      stderr: out.stderr,
    };
    this.calls.push(rec);
    return { ...out, rec };
  }

  /** The plugin configuration the runtime hands the plugin under test. */
  conf(version: string, prev?: Json, extra: Record<string, unknown> = {}): Record<string, unknown> {
    const { prevResult: _drop, ...rest } = this.put;
    const caps = Object.keys(this.putCapabilityArgs).length
      ? {
          runtimeConfig: {
            ...((rest.runtimeConfig as Record<string, unknown> | undefined) ?? {}),
            ...this.putCapabilityArgs,
          },
        }
      : {};
    return {
      ...rest,
      ...caps,
      name: this.network,
      cniVersion: version,
      ...(prev !== undefined ? { prevResult: prev } : {}),
      ...extra,
    };
  }

  private prefixList(version: string) {
    const { cniVersions: _v, ...rest } = this.conflist;
    return confListFromObject({ ...rest, cniVersion: version, plugins: this.prefix });
  }

  /** An IPAM plugin run directly (its entry's `ipam.type` is its own type): results are allocations, not kernel state. */
  get ipamDirect(): boolean {
    const ipam = this.put.ipam as { type?: unknown } | undefined;
    return !this.prefix.length && ipam?.type === this.type;
  }

  /**
   * The version the dispatcher checks (env.*, stdin.*) use: the configuration's, or — when the plugin does not support
   * it (version.config fails) — the highest it lists, so they test what they name and not the version again.
   */
  get workingVersion(): string {
    if (this.supported.includes(this.baseVersion) || !this.supported.length) return this.baseVersion;
    return this.supported[this.supported.length - 1] as string;
  }

  lastCall(): CallRecord | undefined {
    return this.calls.at(-1);
  }

  chainSupports(v: string): boolean {
    return this.supported.includes(v) && this.prefixSupported.every((s) => s.includes(v));
  }

  /** A fresh container namespace in the sandbox (no DAD: addresses are stable between two snapshots). */
  container(): NamedNetns {
    const sb = this.sandbox();
    const ns = sb.newContainer();
    quiet(sb, ns);
    // a runtime's fresh namespace has lo down (the loopback plugin's ADD brings it up, its DEL down again)
    nsExec(sb, ns, 'ip', ['link', 'set', 'lo', 'down']);
    this.made.push(ns);
    const cl = this.fixtures.containerLink;
    if (cl) {
      // CNI_IFNAME made beforehand, as the main plugin would have (a veth whose host end is a port of the master)
      const host = `cfc${randomBytes(4).toString('hex')}`;
      nsExec(sb, 'host', 'ip', [
        'link',
        'add',
        host,
        'type',
        'veth',
        'peer',
        'name',
        this.ifName,
        'netns',
        ns.name,
      ]);
      nsExec(sb, 'host', 'ip', ['link', 'set', host, 'master', cl.master, 'up']);
      nsExec(sb, ns, 'ip', ['link', 'set', this.ifName, 'up']);
      settleLink(sb, 'host', host, this.timeoutMs);
      settleLink(sb, ns, this.ifName, this.timeoutMs);
      // the master's own carrier (and link-local address) follows its first forwarding port
      settleLink(sb, 'host', cl.master, Math.min(this.timeoutMs, 5000));
    }
    return ns;
  }

  /**
   * `ip netns del` of a container namespace, as a runtime does when a pod is gone, then waits (up to the call timeout)
   * until the kernel has destroyed it: the host-side peers of its links are gone. A namespace is destroyed
   * asynchronously after its last reference, so a snapshot taken at once could still show its veth.
   */
  async deleteContainer(ns: NamedNetns): Promise<void> {
    const sb = this.sandbox();
    const links = (
      JSON.parse(nsExec(sb, ns, 'ip', ['-json', 'link', 'show'], { check: false }).stdout || '[]') as {
        link_index?: number;
        link_netnsid?: number;
      }[]
    ).flatMap((l) => (l.link_netnsid !== undefined && l.link_index !== undefined ? [l.link_index] : []));
    nsExec(sb, 'host', 'ip', ['netns', 'del', ns.name], { check: false });
    const deadline = Date.now() + this.timeoutMs;
    while (links.length && Date.now() < deadline) {
      const host = JSON.parse(nsExec(sb, 'host', 'ip', ['-json', 'link', 'show']).stdout || '[]') as {
        ifindex: number;
      }[];
      if (!host.some((h) => links.includes(h.ifindex))) return;
      await sleep(20);
    }
  }

  sandbox(): Sandbox {
    if (!this.sb) throw new Error('no sandbox');
    return this.sb;
  }

  att(ns: NamedNetns, version = this.baseVersion, ifName = this.ifName): Att {
    return {
      ns,
      version,
      rt: {
        containerId: `cfm-${randomBytes(4).toString('hex')}`,
        netns: ns.path,
        ifName,
        ...(Object.keys(this.prefixCapabilityArgs).length
          ? { capabilityArgs: { ...this.prefixCapabilityArgs } }
          : {}),
      },
    };
  }

  /** The plugins before the plugin under test (through libcni); fails the check when they fail. */
  async prefixAdd(a: Att): Promise<void> {
    if (!this.prefix.length) return;
    try {
      const r = await this.runtime.addNetworkListRaw(this.prefixList(a.version), a.rt);
      a.prev = JSON.parse(formatResult(r));
    } catch (e) {
      throw new Fail(
        `the plugins before ${this.type} (${this.prefix.map((p) => p.type).join(', ')}) to succeed as setup`,
        `they failed: ${(e as Error).message}`,
      );
    }
  }

  async prefixDel(a: Att): Promise<void> {
    if (!this.prefix.length) return;
    try {
      await this.runtime.delNetworkList(this.prefixList(a.version), a.rt);
    } catch {
      // cleanup of the setup: the sandbox goes away anyway
    }
  }

  /** ADD of the plugin under test (after prefixAdd). */
  async putAdd(a: Att, extra: CniCallOptions = {}) {
    const r = await this.call('ADD', this.conf(a.version, a.prev), this.callOpts(a, extra));
    if (r.code === 0) a.result = r.json;
    return r;
  }

  async putDel(a: Att, extra: CniCallOptions = {}) {
    const prev = versionGte(a.version, '0.4.0') ? (a.result ?? a.prev) : undefined;
    return this.call('DEL', this.conf(a.version, prev), this.callOpts(a, extra));
  }

  async putCheck(a: Att) {
    return this.call('CHECK', this.conf(a.version, a.result), this.callOpts(a));
  }

  /** prefix + ADD, failing the check when ADD fails. */
  async addOk(a: Att, what = 'ADD'): Promise<Json> {
    await this.prefixAdd(a);
    const r = await this.putAdd(a);
    if (r.code !== 0) throw new Fail(`${what} to succeed`, short(r), [r.rec]);
    return r.json;
  }

  async delAll(a: Att): Promise<CniOutcome & { rec: CallRecord }> {
    const r = await this.putDel(a);
    await this.prefixDel(a);
    return r;
  }

  world(containers: readonly NamedNetns[], opts: { light?: boolean } = {}): World {
    return captureWorld(this.sandbox(), containers, this.stateDir, opts);
  }

  /** Why a check is skipped, decided before a sandbox is made (undefined: run it). */
  skipReason(id: string): string | undefined {
    const v = id.startsWith('add.') ? id.slice(4) : '';
    if (KIT_VERSIONS.includes(v as (typeof KIT_VERSIONS)[number])) {
      if (!this.supported.includes(v)) return `the plugin does not list ${v} in VERSION`;
      if (!this.chainSupports(v)) return `a plugin before ${this.type} does not support ${v}`;
    }
    if (id === 'add.prevresult' && !this.prefix.length)
      return `${this.type} is first in its chain: it gets no prevResult`;
    if (id === 'add.ifname-exists' && this.prefix.length)
      return `${this.type} is chained: the interface is not its own`;
    if (id === 'add.ifname-exists' && this.fixtures.containerLink)
      return `the fixtures make ${this.ifName} in every container (containerLink): the interface is not the plugin's`;
    if (id.startsWith('check.') && !versionGte(this.baseVersion, '0.4.0'))
      return `configuration version ${this.baseVersion} has no CHECK`;
    if (id === 'gc.valid-attachments' && !this.chainSupports('1.1.0'))
      return 'GC needs 1.1.0, which the chain does not support';
    if (id === 'status.answers' && !this.supported.includes('1.1.0'))
      return 'STATUS needs 1.1.0, which the plugin does not support';
    const declared = this.fixtures.skip?.[id];
    if (declared) return `declared by the fixtures: ${declared}`;
    if (this.configVersionProblem && CONFIG_VERSION_DEPENDENTS.some((d) => id === d || id.startsWith(d)))
      return `version.config failed: ${this.configVersionProblem}; this check runs the plugin in that version`;
    return undefined;
  }

  // -------------------------------------------------------------------------------------------------------------
  // running

  async run(): Promise<Report> {
    const t0 = performance.now();
    const checks = selectChecks(this.opts.only);
    const results: CheckResult[] = [];
    // VERSION of every plugin first (outside a sandbox: VERSION needs no namespace)
    let versionProblem: string | undefined;
    try {
      const v = await this.call(
        'VERSION',
        { cniVersion: this.baseVersion },
        { path: this.cniPath.join(':') },
      );
      const sv = v.json?.supportedVersions;
      if (v.code !== 0 || !Array.isArray(sv)) versionProblem = `VERSION failed: ${short(v)}`;
      else this.supported = sv.filter((x: unknown) => typeof x === 'string');
    } catch (e) {
      versionProblem = `the plugin could not be run: ${(e as Error).message}`;
    }
    for (const p of this.prefix) {
      try {
        const vi = await this.runtime.getVersionInfo(String(p.type));
        this.prefixSupported.push(vi.supportedVersions);
      } catch {
        this.prefixSupported.push([]);
      }
    }
    if (!versionProblem) {
      const v = this.baseVersion;
      const before = this.prefix.filter((_p, i) => !(this.prefixSupported[i] ?? []).includes(v));
      if (!this.supported.includes(v))
        this.configVersionProblem = `the configuration's cniVersion ${v} is not one the plugin supports (VERSION lists ${this.supported.join(', ') || 'none'})`;
      else if (before.length)
        this.configVersionProblem = `the configuration's cniVersion ${v} is not supported by ${before.map((p) => String(p.type)).join(', ')} before ${this.type}`;
    }
    for (const c of checks) {
      const t = performance.now();
      this.calls = [];
      let res: Omit<CheckResult, 'durationMs' | 'title' | 'spec' | 'id'>;
      try {
        if (versionProblem && c.id !== 'version.output') throw new Fail('a working VERSION', versionProblem);
        const skip = this.skipReason(c.id);
        if (skip) throw new Skip(skip);
        const detail = await this.inSandbox(() => this.one(c));
        res = { status: 'pass', detail };
      } catch (e) {
        if (e instanceof Skip) res = { status: 'skip', detail: e.message };
        else if (e instanceof Fail)
          res = {
            status: 'fail',
            detail: `expected: ${e.expected}\nactual: ${e.actual}`,
            repro: e.calls.length ? e.calls : this.calls.slice(-1),
          };
        else
          res = {
            status: 'fail',
            detail: `the kit could not run the check: ${(e as Error).message}`,
            repro: this.calls.slice(-1),
          };
      }
      // the check's container namespaces go (the sandbox stays for the next check), and any file a plugin made at
      // a CNI_NETNS path the kit handed out
      for (const ns of this.made.splice(0)) {
        try {
          deleteNamedNetns(ns);
        } catch {
          // removed with the sandbox at the end
        }
      }
      this.removeStray();
      const r: CheckResult = {
        id: c.id,
        title: c.title,
        spec: c.spec,
        ...res,
        durationMs: Math.round(performance.now() - t),
      };
      results.push(r);
      this.opts.onResult?.(r);
    }
    await this.stopDaemons();
    const counts = { pass: 0, fail: 0, skip: 0 };
    for (const r of results) counts[r.status]++;
    return {
      plugin: this.plugin,
      type: this.type,
      network: this.network,
      cniVersion: this.baseVersion,
      supportedVersions: this.supported,
      suppliedRuntimeConfig: this.suppliedRuntimeConfig,
      results,
      counts,
      durationMs: Math.round(performance.now() - t0),
    };
  }

  /**
   * One sandbox for the whole run, as one node: every check makes its own container namespaces in it, and compares
   * what the plugin did against snapshots it takes itself (state other checks left is part of "before").
   */
  private async inSandbox<T>(fn: () => Promise<T>): Promise<T> {
    let fresh = false;
    if (!this.sb || this.sb.destroyed) {
      this.sb = createSandbox();
      quiet(this.sb, this.sb.host);
      fresh = true;
    }
    const inHost = enterNetns(this.sb.host.path);
    try {
      // daemons start here, from the thread in the host namespace: they run there, like the plugins
      await this.fixturesReady(this.sb, fresh);
      return await fn();
    } finally {
      inHost.restore();
    }
  }

  private one(c: CheckInfo): Promise<string> {
    const id = c.id;
    if (id.startsWith('add.') && KIT_VERSIONS.includes(id.slice(4) as (typeof KIT_VERSIONS)[number]))
      return this.addVersion(id.slice(4));
    const fn = this.checks[id];
    if (!fn) throw new Error(`no implementation for ${id}`);
    return fn(this);
  }

  private async addVersion(v: string): Promise<string> {
    if (!this.supported.includes(v)) throw new Skip(`the plugin does not list ${v} in VERSION`);
    if (!this.chainSupports(v)) throw new Skip(`a plugin before ${this.type} does not support ${v}`);
    const a = this.att(this.container(), v);
    const json = await this.addOk(a, `ADD with cniVersion ${v}`);
    const problems = verifyResult(json, v, this.sandbox(), a.ns, { kernel: !this.ipamDirect });
    const addCall = this.calls[this.calls.length - 1];
    const d = await this.putDel(a);
    if (problems.length)
      throw new Fail(`a ${v} result that matches the kernel`, problems.join('\n'), addCall ? [addCall] : []);
    if (d.code !== 0) throw new Fail('DEL after ADD to succeed', short(d), [d.rec]);
    await this.prefixDel(a);
    return `result ${v}: ${(json?.interfaces ?? []).length} interface(s), ${(json?.ips ?? []).length || (json?.ip4 ? 1 : 0)} address(es), ${(json?.routes ?? []).length} route(s), all in the kernel`;
  }
}

/**
 * A bridge without an address of its own takes its lowest port's, and its STP identity (every port's bridge_id /
 * root_id) with it: a container's port going away would change the other ports' state. An address set explicitly
 * stays (the kernel ignores setting the one it has: its last bit is flipped).
 */
export function pinBridgeAddress(sb: Sandbox, name: string): void {
  const [b] = JSON.parse(nsExec(sb, 'host', 'ip', ['-json', 'link', 'show', 'dev', name]).stdout) as {
    address: string;
  }[];
  if (!b) return;
  const last = (Number.parseInt(b.address.slice(-2), 16) ^ 1).toString(16).padStart(2, '0');
  nsExec(sb, 'host', 'ip', ['link', 'set', 'dev', name, 'address', `${b.address.slice(0, -2)}${last}`]);
}

/**
 * Waits (up to `ms`) until the kernel is done bringing up a link the kit just set up: the carrier change reaches the
 * stack through linkwatch, later under load (operstate, a bridge port's state, the IPv6 link-local address all
 * follow it). A snapshot taken before would see the fixture's own link change during the plugin's call and count it
 * as the plugin's doing.
 */
export function settleLink(sb: Sandbox, ns: NamedNetns | 'host', ifname: string, ms: number): void {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = nsExec(sb, ns, 'ip', ['-json', '-details', 'address', 'show', 'dev', ifname], { check: false });
    const [l] = (r.status === 0 && r.stdout.trim() ? JSON.parse(r.stdout) : []) as {
      operstate?: string;
      linkinfo?: { info_slave_kind?: string; info_slave_data?: { state?: string } };
      addr_info?: { family: string; scope?: string; tentative?: boolean }[];
    }[];
    const ipv6 = readSysctlIn(sb, ns, `net/ipv6/conf/${ifname}/disable_ipv6`) !== '1';
    const settled =
      l !== undefined &&
      l.operstate === 'UP' &&
      (l.linkinfo?.info_slave_kind !== 'bridge' || l.linkinfo.info_slave_data?.state === 'forwarding') &&
      (!ipv6 || (l.addr_info ?? []).some((a) => a.family === 'inet6' && a.scope === 'link' && !a.tentative));
    if (settled || Date.now() >= deadline) return;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
}

function readSysctlIn(sb: Sandbox, ns: NamedNetns | 'host', name: string): string | undefined {
  return withNetns(ns === 'host' ? sb.host.path : ns.path, () => {
    try {
      return sysctlGet(name);
    } catch {
      return undefined;
    }
  });
}

/** No IPv6 duplicate address detection in a sandbox namespace (stable snapshots). */
function quiet(_sb: Sandbox, ns: NamedNetns): void {
  withNetns(ns.path, () => {
    for (const k of ['all', 'default']) writeFileSync(`/proc/sys/net/ipv6/conf/${k}/accept_dad`, '0');
  });
}
