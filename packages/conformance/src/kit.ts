/**
 * The checks, run in this process. Needs root and a private mount namespace in which /var/lib/cni is a private
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
import { withNetns } from '@cnikit/netlink';
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
} from '@cnikit/testing';
import { type CheckInfo, KIT_VERSIONS, selectChecks } from './catalog.ts';
import { Daemon, expand, FixtureError, type Fixtures, vethPeer } from './fixtures.ts';
import type { CallRecord, CheckResult, Report, Status } from './kit-types.ts';
import { suppliedText } from './report.ts';
import {
  captureWorld,
  diffWorld,
  droppedFromPrev,
  findTamper,
  formatWorldDiff,
  nsExec,
  rawFirewall,
  resultAddresses,
  resultShape,
  verifyResult,
  type World,
} from './state.ts';

export type { CallRecord, CheckResult, Report, Status } from './kit-types.ts';

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

class Fail extends Error {
  constructor(
    readonly expected: string,
    readonly actual: string,
    readonly calls: CallRecord[] = [],
  ) {
    super(`expected ${expected}; actual ${actual}`);
  }
}
class Skip extends Error {}

// biome-ignore lint/suspicious/noExplicitAny: JSON
type Json = any;

const STACK =
  /\n\s+at .+[(:]\d+:\d+\)?|goroutine \d+ \[|panic: |Traceback \(most recent call last\)|\n\s+at \S+:\d+/;

/** Problems of a failed call's output: exactly one error object, no stack trace (empty when fine). */
export function errorObjectProblems(o: { code: number; stdout: string }): string[] {
  const p: string[] = [];
  if (o.code === 0) p.push('exit status 0');
  let j: Json;
  try {
    j = JSON.parse(o.stdout);
  } catch {
    if (STACK.test(o.stdout)) p.push('a stack trace on stdout');
    p.push(
      o.stdout.trim() === ''
        ? 'nothing on stdout'
        : `stdout is not one JSON object: ${JSON.stringify(o.stdout.slice(0, 300))}`,
    );
    return p;
  }
  if (!j || typeof j !== 'object' || Array.isArray(j)) {
    p.push(`stdout is JSON but not an object: ${o.stdout.slice(0, 200)}`);
    return p;
  }
  if (typeof j.code !== 'number') p.push('the error object has no numeric code');
  if (typeof j.msg !== 'string') p.push('the error object has no msg string');
  const extra = Object.keys(j).filter((k) => !['code', 'msg', 'details', 'cniVersion'].includes(k));
  if (extra.length) p.push(`the error object has other keys: ${extra.join(', ')}`);
  if (STACK.test(o.stdout)) p.push('a stack trace on stdout');
  return p;
}

function errCode(o: { stdout: string }): number | undefined {
  try {
    const j = JSON.parse(o.stdout);
    return typeof j?.code === 'number' ? j.code : undefined;
  } catch {
    return undefined;
  }
}

function short(o: { code: number; stdout: string; stderr: string }): string {
  const out = o.stdout.trim();
  const err = o.stderr.trim();
  return `exit ${o.code}; stdout ${out ? out.slice(0, 400) : '(empty)'}${err ? `; stderr ${err.slice(0, 300)}` : ''}`;
}

/** An attachment: one (container, ifname) with its chain results. */
interface Att {
  rt: RuntimeConf;
  ns: NamedNetns;
  version: string;
  prev?: Json;
  result?: Json;
}

export class Kit {
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

  constructor(readonly opts: KitOptions) {
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
    }
    return ns;
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
    const fn = (CHECK_FNS as Record<string, (k: Kit) => Promise<string>>)[id];
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

/** No IPv6 duplicate address detection in a sandbox namespace (stable snapshots). */
function quiet(_sb: Sandbox, ns: NamedNetns): void {
  withNetns(ns.path, () => {
    for (const k of ['all', 'default']) writeFileSync(`/proc/sys/net/ipv6/conf/${k}/accept_dad`, '0');
  });
}

// ---------------------------------------------------------------------------------------------------------------
// the checks

const ENV_VARS = ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'] as const;

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

async function expectEnvError(k: Kit, variable: string, env: Record<string, string | undefined>) {
  const ns = k.container();
  const r = await k.call('ADD', k.conf(k.workingVersion), {
    containerId: 'conformance',
    netns: ns.path,
    ifName: k.ifName,
    path: k.cniPath.join(':'),
    timeoutMs: k.timeoutMs,
    env,
  });
  const probs = errorObjectProblems(r);
  const code = errCode(r);
  if (probs.length || code !== 4)
    throw new Fail(
      `one error object with code 4 naming ${variable}`,
      [...probs, ...(code !== undefined && code !== 4 ? [`code ${code}`] : [])].join('; ') || short(r),
      [r.rec],
    );
  const j = JSON.parse(r.stdout);
  const text = `${j.msg} ${j.details ?? ''}`;
  if (!text.includes(variable) && !(env.CNI_COMMAND && text.includes(env.CNI_COMMAND)))
    throw new Fail(
      `msg or details naming ${variable}`,
      `msg ${JSON.stringify(j.msg)}, details ${JSON.stringify(j.details ?? '')}`,
      [r.rec],
    );
  return `code 4: ${j.msg}`;
}

const CHECK_FNS = {
  async 'version.output'(k: Kit): Promise<string> {
    const want = [
      ...new Set([...k.supported.filter((v) => KIT_VERSIONS.includes(v as never)), '1.1.0', k.baseVersion]),
    ];
    const seen: string[] = [];
    for (const v of want) {
      const r = await k.call('VERSION', { cniVersion: v }, { path: k.cniPath.join(':') });
      if (r.code !== 0) throw new Fail(`VERSION with cniVersion ${v} to succeed`, short(r), [r.rec]);
      const j = r.json;
      if (!j || typeof j !== 'object') throw new Fail('one JSON object on stdout', short(r), [r.rec]);
      if (j.cniVersion !== v)
        throw new Fail(
          `cniVersion "${v}" (the value specified on input)`,
          `cniVersion ${JSON.stringify(j.cniVersion)}`,
          [r.rec],
        );
      if (
        !Array.isArray(j.supportedVersions) ||
        j.supportedVersions.length === 0 ||
        j.supportedVersions.some((x: unknown) => typeof x !== 'string' || !/^\d+\.\d+\.\d+$/.test(x))
      )
        throw new Fail('supportedVersions: a non-empty list of version strings', short(r), [r.rec]);
      seen.push(v);
    }
    return `echoes ${seen.join(', ')}; supports ${k.supported.join(', ')}`;
  },

  async 'version.config'(k: Kit): Promise<string> {
    if (k.configVersionProblem) throw new Fail('a cniVersion the chain supports', k.configVersionProblem);
    const supplied = suppliedText(k.suppliedRuntimeConfig);
    return `cniVersion ${k.baseVersion} is supported (${k.supported.join(', ')})${supplied ? `; ${supplied}` : ''}`;
  },

  async 'version.unsupported'(k: Kit): Promise<string> {
    const ns = k.container();
    const r = await k.call('ADD', k.conf('99.0.0'), {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
    });
    const probs = errorObjectProblems(r);
    if (probs.length || errCode(r) !== 1)
      throw new Fail(
        'one error object with code 1 (incompatible CNI version)',
        probs.join('; ') || short(r),
        [r.rec],
      );
    return `code 1: ${JSON.parse(r.stdout).msg}`;
  },

  async 'env.command'(k: Kit): Promise<string> {
    const bogus = await expectEnvError(k, 'CNI_COMMAND', { CNI_COMMAND: 'BOGUS' });
    const ns = k.container();
    const r = await k.call('ADD', k.conf(k.workingVersion), {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
      env: { CNI_COMMAND: undefined },
    });
    if (r.code === 0) {
      if (r.stdout.trim() !== '' || r.stderr.trim() === '')
        throw new Fail(
          'without CNI_COMMAND: code 4, or the about banner on stderr and nothing on stdout',
          short(r),
          [r.rec],
        );
      return `BOGUS → ${bogus}; unset → the about banner (${r.stderr.trim().split('\n')[0]})`;
    }
    const probs = errorObjectProblems(r);
    if (probs.length || errCode(r) !== 4)
      throw new Fail('without CNI_COMMAND: one error object with code 4', probs.join('; ') || short(r), [
        r.rec,
      ]);
    return `BOGUS → ${bogus}; unset → code 4`;
  },
  'env.containerid': (k: Kit) => expectEnvError(k, ENV_VARS[0], { CNI_CONTAINERID: undefined }),
  'env.netns': (k: Kit) => expectEnvError(k, ENV_VARS[1], { CNI_NETNS: undefined }),
  'env.ifname': (k: Kit) => expectEnvError(k, ENV_VARS[2], { CNI_IFNAME: undefined }),

  async 'stdin.malformed'(k: Kit): Promise<string> {
    const ns = k.container();
    const full = JSON.stringify(k.conf(k.workingVersion));
    const cases: Array<[string, string]> = [
      ['truncated JSON', full.slice(0, Math.max(1, Math.floor(full.length / 2)))],
      ['random bytes', Buffer.from(randomBytes(48)).toString('latin1')],
      ['a JSON array', '[1,2,3]'],
      ['a JSON string', '"cni"'],
      ['not JSON at all', 'cniVersion=1.0.0'],
    ];
    const codes: string[] = [];
    for (const [what, stdin] of cases) {
      const r = await k.call('ADD', stdin, {
        containerId: 'conformance',
        netns: ns.path,
        path: k.cniPath.join(':'),
        timeoutMs: k.timeoutMs,
      });
      const probs = errorObjectProblems(r);
      const code = errCode(r);
      if (probs.length || (code !== 6 && code !== 7))
        throw new Fail(
          `${what} on stdin: one error object with code 6 or 7, no stack trace`,
          [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; '),
          [r.rec],
        );
      codes.push(`${what} → ${code}`);
    }
    return codes.join('; ');
  },

  async 'stdin.oversized'(k: Kit): Promise<string> {
    const ns = k.container();
    const stdin = `{"cniVersion":"${k.baseVersion}","name":"${k.network}","type":"${k.type}","pad":"${'A'.repeat(8 * 1024 * 1024)}`;
    const r = await k.call('ADD', stdin, {
      containerId: 'conformance',
      netns: ns.path,
      path: k.cniPath.join(':'),
      timeoutMs: k.timeoutMs,
    });
    const probs = errorObjectProblems(r);
    const code = errCode(r);
    if (r.signal) probs.push(`killed by ${r.signal} (timeout ${k.timeoutMs / 1000} s)`);
    if (probs.length || (code !== 6 && code !== 7))
      throw new Fail(
        'one error object with code 6 or 7 for 8 MiB of broken JSON',
        [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; '),
        [r.rec],
      );
    return `code ${code}`;
  },

  async 'add.prevresult'(k: Kit): Promise<string> {
    if (!k.prefix.length) throw new Skip(`${k.type} is first in its chain: it gets no prevResult`);
    const v = k.chainSupports(k.baseVersion) ? k.baseVersion : undefined;
    if (!v) throw new Skip(`the chain does not support ${k.baseVersion}`);
    const a = k.att(k.container(), v);
    const json = await k.addOk(a);
    const addCall = k.lastCall();
    const dropped = droppedFromPrev(a.prev, json);
    await k.delAll(a);
    if (dropped.length)
      throw new Fail(
        'every part of prevResult in the result',
        `missing: ${dropped.join(', ')}\nprevResult: ${JSON.stringify(a.prev)}\nresult: ${JSON.stringify(json)}`,
        addCall ? [addCall] : [],
      );
    return `prevResult (${(a.prev?.interfaces ?? []).length} interface(s), ${(a.prev?.ips ?? []).length} address(es)) passed through`;
  },

  async 'add.ifname-exists'(k: Kit): Promise<string> {
    if (k.prefix.length) throw new Skip(`${k.type} is chained: the interface is not its own`);
    const sb = k.sandbox();
    const a = k.att(k.container());
    const before = k.world([a.ns], { light: true }); // only whether the container had the name before
    const json = await k.addOk(a);
    const creates =
      Array.isArray(json?.interfaces) &&
      json.interfaces.some((i: Json) => i?.name === a.rt.ifName && i?.sandbox === a.ns.path) &&
      !(before.containers[a.ns.name]?.links ?? []).some((l) => l.includes(`"ifname":"${a.rt.ifName}"`));
    await k.delAll(a);
    if (!creates) throw new Skip(`ADD does not create ${a.rt.ifName} in the container`);
    const b = k.att(k.container());
    nsExec(sb, b.ns, 'ip', ['link', 'add', b.rt.ifName, 'type', 'veth', 'peer', 'name', 'cfmpeer0']);
    const w0 = k.world([b.ns]);
    const r = await k.putAdd(b);
    const w1 = k.world([b.ns]);
    if (r.code === 0) {
      await k.putDel(b);
      throw new Fail(`ADD to fail: ${b.rt.ifName} exists in the container`, short(r), [r.rec]);
    }
    const probs = errorObjectProblems(r);
    if (probs.length) throw new Fail('one error object', probs.join('; '), [r.rec]);
    const d = diffWorld(w0, w1);
    if (d.length) throw new Fail('nothing changed by the failed ADD', formatWorldDiff(d), [r.rec]);
    return `failed with code ${errCode(r)}: ${JSON.parse(r.stdout).msg}; nothing changed`;
  },

  async 'add.failure-clean'(k: Kit): Promise<string> {
    const sb = k.sandbox();
    // shared state a node has anyway (bridge, base chains, forwarding)
    const p = k.att(k.container());
    await k.addOk(p, 'the priming ADD');
    await k.delAll(p);
    const tried: string[] = [];
    const forcings: Array<[string, (a: Att) => CniCallOptions]> = [
      ['CNI_NETNS names no namespace', () => ({ netns: k.goneNetns() })],
      ['CNI_IFNAME of 16 characters', () => ({ ifName: 'cfm0123456789abc' })],
    ];
    for (const [what, extra] of forcings) {
      const a = k.att(k.container());
      await k.prefixAdd(a);
      const w0 = k.world([a.ns]);
      const x = extra(a);
      const r = await k.putAdd(a, x);
      if (r.code === 0) {
        tried.push(what);
        await k.putDel(a, x);
        await k.prefixDel(a);
        continue;
      }
      const w1 = k.world([a.ns]);
      const probs = errorObjectProblems(r);
      if (probs.length) throw new Fail(`${what}: one error object`, probs.join('; '), [r.rec]);
      const d = diffWorld(w0, w1);
      if (d.length) {
        await k.putDel(a, x);
        const cleaned = diffWorld(w0, k.world([a.ns])).length === 0;
        throw new Fail(
          `${what}: the failed ADD leaves host, container and /var/lib/cni as they were`,
          `${formatWorldDiff(d)}\n(a DEL afterwards ${cleaned ? 'does' : 'does not'} remove it)`,
          [r.rec],
        );
      }
      await k.prefixDel(a);
      return `${what}: failed with code ${errCode(r)}, nothing changed`;
    }
    void sb;
    throw new Skip(`no forced failure: the plugin succeeded with ${tried.join(' and with ')}`);
  },

  async 'check.after-add'(k: Kit): Promise<string> {
    if (!versionGte(k.baseVersion, '0.4.0'))
      throw new Skip(`configuration version ${k.baseVersion} has no CHECK`);
    const a = k.att(k.container());
    await k.addOk(a);
    const r = await k.putCheck(a);
    await k.delAll(a);
    if (r.code !== 0 || r.stdout.trim() !== '')
      throw new Fail('CHECK to succeed with nothing on stdout', short(r), [r.rec]);
    return 'CHECK passed';
  },

  async 'check.tampered'(k: Kit): Promise<string> {
    if (!versionGte(k.baseVersion, '0.4.0'))
      throw new Skip(`configuration version ${k.baseVersion} has no CHECK`);
    const sb = k.sandbox();
    const a = k.att(k.container());
    await k.prefixAdd(a);
    const w0 = k.world([a.ns]);
    const f0 = rawFirewall(sb);
    const add = await k.putAdd(a);
    if (add.code !== 0) throw new Fail('ADD to succeed', short(add), [add.rec]);
    const w1 = k.world([a.ns]);
    const f1 = rawFirewall(sb);
    const ok = await k.putCheck(a);
    if (ok.code !== 0) {
      await k.delAll(a);
      throw new Skip('CHECK fails already right after ADD (check.after-add)');
    }
    const t = findTamper(sb, a.ns, k.stateDir, w0, w1, f0, f1);
    if (!t) {
      await k.delAll(a);
      throw new Skip('ADD changed nothing the kit can revert');
    }
    t.apply();
    const r = await k.putCheck(a);
    await k.delAll(a);
    if (r.code === 0) throw new Fail(`CHECK to fail after the kit ${t.what}`, 'CHECK succeeded', [r.rec]);
    const probs = errorObjectProblems(r);
    if (probs.length) throw new Fail('one error object from the failing CHECK', probs.join('; '), [r.rec]);
    return `after the kit ${t.what.split('\n')[0]}: CHECK failed with code ${errCode(r)}`;
  },

  async 'del.twice'(k: Kit): Promise<string> {
    const a = k.att(k.container());
    await k.addOk(a);
    const d1 = await k.putDel(a);
    if (d1.code !== 0) throw new Fail('the first DEL to succeed', short(d1), [d1.rec]);
    const d2 = await k.putDel(a);
    await k.prefixDel(a);
    if (d2.code !== 0) throw new Fail('the second DEL to succeed', short(d2), [d2.rec]);
    return 'both DELs succeeded';
  },

  async 'del.without-add'(k: Kit): Promise<string> {
    const a = k.att(k.container());
    const d = await k.putDel(a);
    if (d.code !== 0) throw new Fail('DEL without ADD to succeed', short(d), [d.rec]);
    return 'DEL succeeded';
  },

  async 'del.netns-gone'(k: Kit): Promise<string> {
    const sb = k.sandbox();
    const a = k.att(k.container());
    await k.addOk(a);
    nsExec(sb, 'host', 'ip', ['netns', 'del', a.ns.name], { check: false });
    const d = await k.putDel(a);
    await k.prefixDel(a);
    if (d.code !== 0) throw new Fail('DEL to succeed with the namespace gone', short(d), [d.rec]);
    return 'DEL succeeded';
  },

  async 'del.cleanup'(k: Kit): Promise<string> {
    const p = k.att(k.container());
    await k.addOk(p, 'the priming ADD');
    await k.delAll(p);
    const a = k.att(k.container());
    const w0 = k.world([a.ns]);
    await k.addOk(a);
    const d = await k.putDel(a);
    await k.prefixDel(a);
    if (d.code !== 0) throw new Fail('DEL to succeed', short(d), [d.rec]);
    const diff = diffWorld(w0, k.world([a.ns]), { pathsOnly: true });
    if (diff.length)
      throw new Fail('host, container and file paths as before ADD', formatWorldDiff(diff), [d.rec]);
    return 'everything ADD did is gone';
  },

  async concurrency(k: Kit): Promise<string> {
    const atts = Array.from({ length: k.concurrency }, () => k.att(k.container()));
    const w0 = k.world(
      atts.map((a) => a.ns),
      { light: true },
    );
    const adds = await Promise.all(
      atts.map(async (a) => {
        try {
          await k.prefixAdd(a);
          return await k.putAdd(a);
        } catch (e) {
          return e as Error;
        }
      }),
    );
    const failed = adds.find((r) => r instanceof Error || r.code !== 0);
    const seen = new Map<string, string>();
    const dup: string[] = [];
    atts.forEach((a) => {
      for (const ip of resultAddresses(a.result)) {
        const other = seen.get(ip);
        if (other) dup.push(`${ip} given to ${other} and ${a.rt.containerId}`);
        seen.set(ip, a.rt.containerId);
      }
    });
    const dels = await Promise.all(
      atts.map(async (a) => {
        const r = await k.putDel(a);
        await k.prefixDel(a);
        return r;
      }),
    );
    if (failed)
      throw failed instanceof Error
        ? failed
        : new Fail(`${k.concurrency} concurrent ADDs to succeed`, short(failed), [failed.rec]);
    // the same addresses in every container: the configuration names them (static), no conflict
    const sets = new Set(atts.map((x) => resultAddresses(x.result).sort().join(',')));
    if (dup.length && sets.size > 1) throw new Fail('a different address per container', dup.join('; '));
    const badDel = dels.find((r) => r.code !== 0);
    if (badDel) throw new Fail(`${k.concurrency} concurrent DELs to succeed`, short(badDel), [badDel.rec]);
    const diff = diffWorld(
      w0,
      k.world(
        atts.map((a) => a.ns),
        { light: true },
      ),
      { pathsOnly: true },
    );
    const ctr = diff.filter((d) => d.section.startsWith('container'));
    if (ctr.length) throw new Fail('the containers as before after the DELs', formatWorldDiff(ctr));
    return `${k.concurrency} ADDs and ${k.concurrency} DELs at once, ${seen.size} distinct address(es)`;
  },

  async 'gc.valid-attachments'(k: Kit): Promise<string> {
    if (!k.chainSupports('1.1.0')) throw new Skip('GC needs 1.1.0, which the chain does not support');
    const sb = k.sandbox();
    const a = k.att(k.container(), '1.1.0');
    const b = k.att(k.container(), '1.1.0');
    const lines = (w: World) => [
      ...Object.values(w.host)
        .flat()
        .map((l) => `host ${l}`),
      ...w.files.map((f) => `file ${f.replace(/ [0-9a-f?]+$/, '')}`),
    ];
    const added = (x: World, y: World) => {
      const old = new Set(lines(x));
      return lines(y).filter((l) => !old.has(l));
    };
    await k.prefixAdd(a);
    const a0 = k.world([]);
    if ((await k.putAdd(a)).code !== 0)
      throw new Fail('ADD of A to succeed', short(k.lastCall() as CallRecord));
    const aAdded = added(a0, k.world([]));
    await k.prefixAdd(b);
    const b0 = k.world([]);
    if ((await k.putAdd(b)).code !== 0)
      throw new Fail('ADD of B to succeed', short(k.lastCall() as CallRecord));
    const bAdded = added(b0, k.world([]));
    nsExec(sb, 'host', 'ip', ['netns', 'del', b.ns.name], { check: false });
    const valid = [{ containerID: a.rt.containerId, ifname: a.rt.ifName }];
    const r = await k.call(
      'GC',
      k.conf('1.1.0', undefined, { 'cni.dev/valid-attachments': valid, 'cni.dev/attachments': valid }),
      { path: k.cniPath.join(':'), timeoutMs: k.timeoutMs },
    );
    const now = new Set(lines(k.world([])));
    await k.delAll(a);
    await k.putDel(b);
    await k.prefixDel(b);
    if (r.code !== 0) throw new Fail('GC to succeed', short(r), [r.rec]);
    const lostA = aAdded.filter((l) => !now.has(l));
    const keptB = bAdded.filter((l) => now.has(l));
    if (lostA.length || keptB.length)
      throw new Fail(
        'GC keeps what ADD made for the valid attachment A and removes what it made for B',
        [...lostA.map((l) => `removed (A's): ${l}`), ...keptB.map((l) => `kept (B's): ${l}`)]
          .slice(0, 30)
          .join('\n'),
        [r.rec],
      );
    return `kept ${aAdded.length} line(s) of A, removed ${bAdded.length} of B`;
  },

  async 'status.answers'(k: Kit): Promise<string> {
    if (!k.chainSupports('1.1.0') && !k.supported.includes('1.1.0'))
      throw new Skip('STATUS needs 1.1.0, which the plugin does not support');
    const r = await k.call('STATUS', k.conf('1.1.0'), { path: k.cniPath.join(':'), timeoutMs: k.timeoutMs });
    if (r.code === 0) {
      if (r.stdout.trim() !== '')
        throw new Fail('nothing on stdout from a successful STATUS', short(r), [r.rec]);
      return 'ready (exit 0)';
    }
    const probs = errorObjectProblems(r);
    const code = errCode(r);
    if (probs.length || (code !== 50 && code !== 51))
      throw new Fail(
        'exit 0, or one error object with code 50 or 51',
        [...probs, ...(code !== undefined ? [`code ${code}`] : [])].join('; ') || short(r),
        [r.rec],
      );
    return `not available: code ${code}`;
  },

  async determinism(k: Kit): Promise<string> {
    const v1 = await k.call('VERSION', { cniVersion: k.baseVersion }, { path: k.cniPath.join(':') });
    const v2 = await k.call('VERSION', { cniVersion: k.baseVersion }, { path: k.cniPath.join(':') });
    if (v1.stdout !== v2.stdout)
      throw new Fail('the same VERSION output twice', `${v1.stdout} then ${v2.stdout}`, [v1.rec, v2.rec]);
    const a = k.att(k.container());
    const first = await k.addOk(a);
    const firstCall = k.lastCall() as CallRecord;
    await k.delAll(a);
    a.prev = undefined;
    a.result = undefined;
    const second = await k.addOk(a, 'the second ADD');
    const secondCall = k.lastCall() as CallRecord;
    await k.delAll(a);
    const s1 = JSON.stringify(resultShape(first));
    const s2 = JSON.stringify(resultShape(second));
    if (s1 !== s2) throw new Fail(`results of the same shape: ${s1}`, s2, [firstCall, secondCall]);
    return 'VERSION identical; ADD results of the same shape';
  },
};
