/**
 * A small runtime-side driver that executes CNI plugin binaries exactly like a container runtime (libcni):
 *
 * - the plugin is looked up by `type` in the CNI_PATH directories and executed with CNI_COMMAND, CNI_CONTAINERID,
 *   CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH in the environment and the network config on stdin;
 * - a network configuration list is run as a chain: each plugin's config gets the list's `name` and `cniVersion`
 *   injected, `runtimeConfig` for the capabilities it declares, and the previous plugin's result as `prevResult`;
 * - the final ADD result is cached per (network, container, ifname) under `<cacheDir>/results/` in libcni's
 *   `cniCacheV1` format (empty netns, cniArgs and capabilityArgs omitted); CHECK and DEL (spec ≥ 0.4.0) send the
 *   cached result as `prevResult` (none if there is no cache entry; an unreadable entry is deleted before DEL);
 *   CHECK below 0.4.0 is an error; DEL runs the chain in reverse and removes the cache entry only after every
 *   plugin succeeded;
 * - optionally, every plugin runs inside a named "host" network namespace (`ip netns exec <host> <plugin>`), so a
 *   test never touches the machine's own namespace.
 *
 * Plugin errors come back as RuntimeError carrying the spec error object.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CniErrorObject {
  cniVersion?: string;
  code: number;
  msg: string;
  details?: string;
}

export class RuntimeError extends Error {
  readonly plugin: string;
  readonly command: string;
  readonly exitCode: number;
  readonly cni: CniErrorObject | undefined;
  readonly stdout: string;
  readonly stderr: string;
  constructor(plugin: string, command: string, exitCode: number, stdout: string, stderr: string) {
    let cni: CniErrorObject | undefined;
    try {
      cni = JSON.parse(stdout) as CniErrorObject;
    } catch {
      cni = undefined;
    }
    super(
      `${plugin} ${command} failed (exit ${exitCode})${cni ? `: [${cni.code}] ${cni.msg}${cni.details ? `; ${cni.details}` : ''}` : `: ${stdout}${stderr}`}`,
    );
    this.plugin = plugin;
    this.command = command;
    this.exitCode = exitCode;
    this.cni = cni;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

export interface ExecResult {
  status: number;
  stdout: string;
  stderr: string;
  /** Wall time of the execution in milliseconds. */
  ms: number;
}

export interface RuntimeOptions {
  /** CNI_PATH directories (plugins are looked up by type, first hit wins). */
  path: string[];
  /** Where results are cached (libcni default: /var/lib/cni). */
  cacheDir: string;
  /** Run plugins inside this named network namespace (`ip netns exec`); undefined = the caller's namespace. */
  hostNetns?: string;
  /** Extra environment for every plugin (e.g. CNI_NETNS_OVERRIDE). */
  env?: Record<string, string>;
}

export interface RuntimeConf {
  containerId: string;
  netns: string;
  ifName: string;
  /** CNI_ARGS pairs. */
  args?: Array<[string, string]>;
  /** Capability arguments (`runtimeConfig`), passed to plugins that declare the capability. */
  capabilityArgs?: Record<string, unknown>;
}

export interface PluginConf {
  type: string;
  capabilities?: Record<string, boolean>;
  [key: string]: unknown;
}

export interface ConfList {
  cniVersion: string;
  name: string;
  disableCheck?: boolean;
  plugins: PluginConf[];
}

export type Json = Record<string, unknown>;

/** Versions before 0.4.0 have no CHECK and never get a cached prevResult (libcni). */
const PRE_040 = new Set(['0.1.0', '0.2.0', '0.3.0', '0.3.1']);

/** True when a list of this cniVersion supports CHECK and gets the cached result as prevResult on CHECK/DEL. */
export function supportsCachedPrevResult(cniVersion: string): boolean {
  return !PRE_040.has(cniVersion);
}

export class Runtime {
  readonly opts: RuntimeOptions;
  constructor(opts: RuntimeOptions) {
    this.opts = opts;
  }

  /** libcni FindInPath. */
  findPlugin(type: string): string {
    if (!type) throw new Error('no plugin name provided');
    if (type.includes('/')) throw new Error(`invalid plugin name: ${type}`);
    for (const dir of this.opts.path) {
      const p = join(dir, type);
      if (existsSync(p)) return p;
    }
    throw new Error(`failed to find plugin ${JSON.stringify(type)} in path [${this.opts.path.join(' ')}]`);
  }

  /** Execute one plugin binary with a CNI environment and stdin; no interpretation of the output. */
  execRaw(binary: string, env: Record<string, string>, stdin: string, argv0?: string): ExecResult {
    const fullEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...this.opts.env, ...env };
    const [cmd, args] = this.opts.hostNetns
      ? ['ip', ['netns', 'exec', this.opts.hostNetns, binary]]
      : [binary, [] as string[]];
    const t0 = performance.now();
    const r = spawnSync(cmd, args, {
      env: fullEnv,
      input: stdin,
      encoding: 'utf8',
      timeout: 60_000,
      ...(argv0 && !this.opts.hostNetns ? { argv0 } : {}),
    });
    const ms = performance.now() - t0;
    if (r.error) throw r.error;
    return { status: r.status ?? 128, stdout: r.stdout, stderr: r.stderr, ms };
  }

  private envFor(command: string, rt: RuntimeConf | undefined): Record<string, string> {
    const env: Record<string, string> = { CNI_COMMAND: command, CNI_PATH: this.opts.path.join(':') };
    if (rt) {
      env.CNI_CONTAINERID = rt.containerId;
      env.CNI_NETNS = rt.netns;
      env.CNI_IFNAME = rt.ifName;
      env.CNI_ARGS = (rt.args ?? []).map(([k, v]) => `${k}=${v}`).join(';');
    }
    return env;
  }

  /** Run one plugin; throws RuntimeError on a non-zero exit. Returns the parsed stdout (or undefined if empty). */
  invoke(type: string, command: string, conf: Json, rt?: RuntimeConf): Json | undefined {
    const r = this.execRaw(this.findPlugin(type), this.envFor(command, rt), JSON.stringify(conf));
    if (r.status !== 0) throw new RuntimeError(type, command, r.status, r.stdout, r.stderr);
    if (!r.stdout.trim()) return undefined;
    return JSON.parse(r.stdout) as Json;
  }

  /** VERSION of one plugin. */
  version(type: string): Json {
    const out = this.invoke(type, 'VERSION', { cniVersion: '1.1.0' });
    if (!out) throw new Error(`${type} VERSION printed nothing`);
    return out;
  }

  /** libcni buildOneConfig: inject name, cniVersion, prevResult, runtimeConfig. */
  buildConfig(list: ConfList, plugin: PluginConf, rt: RuntimeConf, prevResult?: Json): Json {
    const conf: Json = { ...plugin, name: list.name, cniVersion: list.cniVersion };
    if (prevResult) conf.prevResult = prevResult;
    const caps = plugin.capabilities ?? {};
    const runtimeConfig: Json = {};
    for (const [cap, on] of Object.entries(caps)) {
      if (on && rt.capabilityArgs && cap in rt.capabilityArgs) runtimeConfig[cap] = rt.capabilityArgs[cap];
    }
    if (Object.keys(runtimeConfig).length) conf.runtimeConfig = runtimeConfig;
    return conf;
  }

  cacheFile(list: ConfList, rt: RuntimeConf): string {
    return join(this.opts.cacheDir, 'results', `${list.name}-${rt.containerId}-${rt.ifName}`);
  }

  getCachedResult(list: ConfList, rt: RuntimeConf): Json | undefined {
    return this.readCache(list, rt).result;
  }

  /** The cached result; `unreadable` when an entry exists but cannot be read or parsed. */
  private readCache(list: ConfList, rt: RuntimeConf): { result?: Json; unreadable?: boolean } {
    let text: string;
    try {
      text = readFileSync(this.cacheFile(list, rt), 'utf8');
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ENOENT' ? {} : { unreadable: true };
    }
    try {
      const data = JSON.parse(text) as { result?: Json } | null;
      const result = data?.result;
      return result && typeof result === 'object' ? { result } : { unreadable: true };
    } catch {
      return { unreadable: true };
    }
  }

  private cacheResult(list: ConfList, rt: RuntimeConf, result: Json): void {
    const file = this.cacheFile(list, rt);
    mkdirSync(join(this.opts.cacheDir, 'results'), { recursive: true, mode: 0o700 });
    // libcni's field order; netns, cniArgs and capabilityArgs are omitted when empty (omitempty).
    const entry: Json = {
      kind: 'cniCacheV1',
      containerId: rt.containerId,
      config: Buffer.from(JSON.stringify(list)).toString('base64'),
      ifName: rt.ifName,
      networkName: list.name,
    };
    if (rt.netns) entry.netns = rt.netns;
    if (rt.args?.length) entry.cniArgs = rt.args;
    if (rt.capabilityArgs && Object.keys(rt.capabilityArgs).length) entry.capabilityArgs = rt.capabilityArgs;
    entry.result = result;
    const tmp = `${file}.tmp-${process.pid}`;
    writeFileSync(tmp, JSON.stringify(entry), { mode: 0o600 });
    renameSync(tmp, file);
  }

  /** ADD the whole chain; returns the final result (also cached). Each step's result is reported to `onStep`. */
  addNetworkList(list: ConfList, rt: RuntimeConf, onStep?: (type: string, result: Json) => void): Json {
    let prev: Json | undefined;
    for (const plugin of list.plugins) {
      const out = this.invoke(plugin.type, 'ADD', this.buildConfig(list, plugin, rt, prev), rt);
      if (!out) throw new Error(`${plugin.type} ADD printed no result`);
      onStep?.(plugin.type, out);
      prev = out;
    }
    if (!prev) throw new Error('empty plugin list');
    this.cacheResult(list, rt, prev);
    return prev;
  }

  /** CHECK the chain in list order with the cached result as prevResult (none if not cached); spec ≥ 0.4.0. */
  checkNetworkList(list: ConfList, rt: RuntimeConf): void {
    if (!supportsCachedPrevResult(list.cniVersion))
      throw new Error(
        `configuration version ${JSON.stringify(list.cniVersion)} does not support the CHECK command`,
      );
    if (list.disableCheck) return;
    const cached = this.getCachedResult(list, rt);
    for (const plugin of list.plugins)
      this.invoke(plugin.type, 'CHECK', this.buildConfig(list, plugin, rt, cached), rt);
  }

  /**
   * DEL the chain in reverse order with the cached result as prevResult (spec ≥ 0.4.0; an unreadable cache entry is
   * deleted and DEL goes on without one); removes the cache entry after every plugin succeeded.
   */
  delNetworkList(list: ConfList, rt: RuntimeConf): void {
    let cached: Json | undefined;
    if (supportsCachedPrevResult(list.cniVersion)) {
      const c = this.readCache(list, rt);
      if (c.unreadable) rmSync(this.cacheFile(list, rt), { force: true });
      cached = c.result;
    }
    for (const plugin of [...list.plugins].reverse()) {
      this.invoke(plugin.type, 'DEL', this.buildConfig(list, plugin, rt, cached), rt);
    }
    rmSync(this.cacheFile(list, rt), { force: true });
  }
}
