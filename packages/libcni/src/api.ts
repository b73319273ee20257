/**
 * `CniConfig`: the runtime side of CNI (Go libcni `CNIConfig`, HEAD) as a typed async API.
 *
 * Operations on a configuration list, in the reference's order and with its error texts:
 *   ADD    plugins in list order; each gets the previous plugin's result (as that plugin printed it) as prevResult;
 *          before each plugin the container ID, network name and ifname are validated; the final result is cached.
 *          No DEL after a failed ADD (the caller runs DEL, as with Go).
 *   CHECK  list version ≥ 0.4.0; `disableCheck` → nothing runs; plugins in list order with the cached result
 *          (converted to the list's version) as prevResult.
 *   DEL    plugins in reverse order with the cached result (≥ 0.4.0; an unreadable entry is removed and DEL goes
 *          on without it); the cache entry is removed after every plugin succeeded.
 *   GC     `disableGC` → nothing; every cached attachment of the network not in `validAttachments` gets a full DEL,
 *          then (list ≥ 1.1.0) every plugin gets GC with `cni.dev/valid-attachments` (and the old
 *          `cni.dev/attachments`); failures are collected and reported together (MultiError).
 *   STATUS list ≥ 1.1.0: plugins in order, the first failure is returned.
 * Each plugin's config: the plugin object with `name` and `cniVersion` of the list, `prevResult`, and
 * `runtimeConfig` holding the capability arguments the plugin declared (`capabilities`), serialised like Go.
 *
 * Plugins run in the calling process through skel's dispatcher when they are cnikit plugins — the file found in
 * CNI_PATH is this very executable (cnitool inside the multicall binary) or the caller passed the plugin objects
 * (`plugins`) — and as processes otherwise; results and errors are the same either way.
 */

import { parseJsonGo } from '@cnikit/skel/go';
import {
  type AnyPlugin,
  type AnyResult,
  type Attachment,
  defaultInvoker,
  findInPath as findInPathSync,
  type InProcessRunner,
  Invoker,
  parseResult,
  type Result,
  toCurrent,
  type VersionInfo,
  validateContainerID,
  validateInterfaceName,
  validateNetworkName,
  versionGte,
} from '@cnikit/skel/invoke';

import { type Span, SpanKind, startRecording, traceEndpoint, withSpan } from '@cnikit/skel/trace';
import {
  cacheAdd,
  cacheDel,
  DEFAULT_CACHE_DIR,
  getCachedAttachments,
  getCachedConfig,
  getCachedResult,
  type NetworkAttachment,
  type RuntimeConf,
  resultJson,
} from './cache.ts';
import { injectConf, type Json, type NetworkConfigList, type PluginConfig } from './conf.ts';
import { CacheError, LibcniError, MultiError, PluginError, type Verb } from './errors.ts';
import {
  type CallOptions,
  callSignal,
  pluginError,
  type RunOptions,
  runMode,
  runPlugin,
  traceEnv,
  versionInfo,
  type Writable,
} from './exec.ts';

/**
 * Runs the plugin objects handed in `CniConfigOptions.plugins` in-process: the plugin dispatcher of @cnikit/skel,
 * loaded on the first in-process call (a program may hold plain plugin objects and never have loaded it).
 */
const dispatcherRunner: InProcessRunner = {
  invoke: async (plugin, env, stdin, o) =>
    (await import('@cnikit/skel')).invokeInProcess(plugin, env, stdin, o),
  validate: async (plugin, env, stdin, o) =>
    (await import('@cnikit/skel')).validateInProcess(plugin, env, stdin, o),
};

export interface CniConfigOptions {
  /** CNI_PATH: the directories plugins are looked up in (first hit wins), as a list or `a:b:c`. */
  path: readonly string[] | string;
  /** Result cache directory (default /var/lib/cni, like Go libcni). */
  cacheDir?: string;
  /**
   * Plugin objects to run in this process (e.g. cnikit's plugins imported from source): a plugin whose `type` is one
   * of these names runs through skel's dispatcher instead of exec'ing the file CNI_PATH resolves it to (that file
   * must still exist, as the lookup is unchanged). They are registered in this config's Invoker, which their own
   * delegations (bridge → host-local) use too; plugins registered with skel's `registerInProcess` stay reachable.
   */
  plugins?: readonly AnyPlugin[];
  /**
   * The Invoker that runs the plugins (skel `@cnikit/skel/invoke`): its in-process plugins run in this process
   * (`plugins` are added to it). Default: a new one over `plugins` falling back to skel's default Invoker, or the
   * default Invoker itself when there are no `plugins`.
   */
  invoker?: Invoker;
  /** false: exec every plugin, even a registered one or one that is this executable (default true). */
  inProcess?: boolean;
  /** The environment plugins start from (default process.env); CNI_* variables are set on top. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where a successful plugin's stderr goes (default process.stderr); a failing plugin's is in PluginError.stderr. */
  stderr?: Writable;
  /** Default timeout of each operation in milliseconds (none by default). */
  timeoutMs?: number;
}

export interface GcArgs {
  /** The attachments that are still in use; every other cached attachment of the network is deleted. */
  validAttachments?: Attachment[];
}

export type { CallOptions, NetworkAttachment, RuntimeConf };

function pluginDescription(p: PluginConfig): string {
  return `type=${JSON.stringify(p.network.type)}${p.network.name ? ` name=${JSON.stringify(p.network.name)}` : ''}`;
}

export class CniConfig {
  readonly path: readonly string[];
  readonly cacheDir: string;
  readonly inProcess: boolean;
  readonly invoker: Invoker;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly stderr: Writable;
  private readonly timeoutMs: number | undefined;

  constructor(opts: CniConfigOptions) {
    this.path =
      typeof opts.path === 'string' ? (opts.path === '' ? [] : opts.path.split(':')) : [...opts.path];
    this.cacheDir = opts.cacheDir || DEFAULT_CACHE_DIR;
    this.inProcess = opts.inProcess ?? true;
    this.env = opts.env ?? process.env;
    this.stderr = opts.stderr ?? process.stderr;
    this.timeoutMs = opts.timeoutMs;
    this.invoker =
      opts.invoker ??
      (opts.plugins?.length
        ? new Invoker({ fallback: defaultInvoker, runner: dispatcherRunner })
        : defaultInvoker);
    for (const p of opts.plugins ?? []) this.invoker.register(p, { anyPath: true });
  }

  /** How the plugin `type` would run now: `in-process` or `exec` (throws when it is not in CNI_PATH). */
  runMode(type: string): 'exec' | 'in-process' {
    return runMode(findOrThrow(type, this.path), this.inProcess, this.invoker);
  }

  // ------------------------------------------------------------------------------------------------------------
  // plumbing

  private async withCall<T>(
    opts: CallOptions,
    fn: (ro: Omit<RunOptions, 'prefix'>) => Promise<T>,
    label?: CallLabel,
  ): Promise<T> {
    const withDefault =
      opts.timeoutMs === undefined && this.timeoutMs !== undefined
        ? { ...opts, timeoutMs: this.timeoutMs }
        : opts;
    const sig = callSignal(withDefault);
    // tracing configured: this operation is a span — a child of the caller's context, or the root of a
    // new trace when the caller has none — and every plugin gets it as TRACEPARENT
    const span = label ? startCallSpan(this.env, opts.trace, label) : undefined;
    try {
      const trace = span ? { ...opts.trace, traceparent: span.traceparent } : opts.trace;
      const env = { ...this.env, ...traceEnv(trace) };
      const run = () =>
        fn({
          path: this.path,
          env,
          stderr: this.stderr,
          inProcess: this.inProcess,
          invoker: this.invoker,
          ...(sig.signal ? { signal: sig.signal } : {}),
        });
      if (!span) return await run();
      try {
        const out = await withSpan(span, run);
        span.setAttributes({ 'cni.result_code': 0 });
        span.end();
        return out;
      } catch (e) {
        span.setAttributes({ 'cni.result_code': PluginError.is(e) ? e.code : 999 });
        span.end(e);
        throw e;
      }
    } finally {
      sig.dispose();
      if (span) await exportSpan(span, this.env);
    }
  }

  private cniEnv(command: Verb, rt: RuntimeConf | undefined): Record<string, string> {
    return {
      CNI_COMMAND: command,
      CNI_CONTAINERID: rt?.containerId ?? '',
      CNI_NETNS: rt?.netns ?? '',
      CNI_ARGS: (rt?.args ?? []).map(([k, v]) => `${k}=${v}`).join(';'),
      CNI_IFNAME: rt?.ifName ?? '',
      CNI_PATH: this.path.join(':'),
    };
  }

  /** Go buildOneConfig: name, cniVersion, prevResult and runtimeConfig injected. */
  private buildOneConfig(
    name: string,
    cniVersion: string,
    orig: PluginConfig,
    prev: AnyResult | undefined,
    rt: RuntimeConf | undefined,
  ): PluginConfig {
    const inject: Json = { name, cniVersion };
    if (prev) inject.prevResult = resultJson(prev);
    let conf = injectConf(orig, inject);
    if (rt) {
      const rc: Json = {};
      for (const [cap, on] of Object.entries(orig.network.capabilities)) {
        if (on && rt.capabilityArgs && Object.hasOwn(rt.capabilityArgs, cap))
          rc[cap] = rt.capabilityArgs[cap];
      }
      if (Object.keys(rc).length > 0) conf = injectConf(conf, { runtimeConfig: rc });
    }
    return conf;
  }

  private async addOne(
    name: string,
    cniVersion: string,
    net: PluginConfig,
    prev: AnyResult | undefined,
    rt: RuntimeConf,
    ro: RunOptions,
  ): Promise<AnyResult> {
    // like Go: the binary must exist before the names are validated
    findOrThrow(net.network.type, this.path, ro.prefix);
    try {
      validateContainerID(rt.containerId, 'LIBCNI');
      validateNetworkName(name);
      validateInterfaceName(rt.ifName);
    } catch (e) {
      throw pluginError(e, net.network.type, 'ADD', undefined, '', ro.prefix);
    }
    const conf = this.buildOneConfig(name, cniVersion, net, prev, rt);
    const out = await runPlugin(net.network.type, 'ADD', conf.bytes, this.cniEnv('ADD', rt), ro);
    return parseAddResult(out, cniVersion, ro.prefix);
  }

  // ------------------------------------------------------------------------------------------------------------
  // lists

  /**
   * ADD the list and cache the result; resolves to the final result as the last plugin printed it (its own
   * version, like Go's AddNetworkList). `addNetworkList` gives the same in the 1.1.0 shape.
   */
  async addNetworkListRaw(
    list: NetworkConfigList,
    rt: RuntimeConf,
    opts: CallOptions = {},
  ): Promise<AnyResult> {
    return this.withCall(
      opts,
      async (base) => {
        let result: AnyResult | undefined;
        for (const net of list.plugins) {
          const ro = { ...base, prefix: `plugin ${pluginDescription(net)} failed (add): ` };
          result = await this.addOne(list.name, list.cniVersion, net, result, rt, ro);
        }
        if (!result) throw new LibcniError(`network ${JSON.stringify(list.name)} has no plugins`);
        cacheAdd(this.cacheDir, result, list.bytes, list.name, rt);
        return result;
      },
      callLabel('ADD', list, rt),
    );
  }

  /** ADD the list; the final result in the 1.1.0 shape (cached as the plugin printed it). */
  async addNetworkList(list: NetworkConfigList, rt: RuntimeConf, opts: CallOptions = {}): Promise<Result> {
    return toCurrent(await this.addNetworkListRaw(list, rt, opts));
  }

  /** CHECK the list (spec ≥ 0.4.0) with the cached result as prevResult. */
  async checkNetworkList(list: NetworkConfigList, rt: RuntimeConf, opts: CallOptions = {}): Promise<void> {
    if (!gte(list.cniVersion, '0.4.0')) {
      throw new LibcniError(`configuration version "${list.cniVersion}" does not support the CHECK command`);
    }
    if (list.disableCheck) return;
    let cached: AnyResult | undefined;
    try {
      cached = getCachedResult(this.cacheDir, list.name, list.cniVersion, rt);
    } catch (e) {
      throw new CacheError(`failed to get network "${list.name}" cached result: ${(e as Error).message}`, {
        cause: e,
      });
    }
    await this.withCall(
      opts,
      async (base) => {
        for (const net of list.plugins) {
          // Go returns CHECK errors unwrapped
          const ro = { ...base, prefix: '' };
          const conf = this.buildOneConfig(list.name, list.cniVersion, net, cached, rt);
          await runPlugin(net.network.type, 'CHECK', conf.bytes, this.cniEnv('CHECK', rt), ro);
        }
      },
      callLabel('CHECK', list, rt),
    );
  }

  /** DEL the list in reverse order with the cached result as prevResult; removes the cache entry. */
  async delNetworkList(list: NetworkConfigList, rt: RuntimeConf, opts: CallOptions = {}): Promise<void> {
    await this.withCall(opts, (base) => this.delList(list, rt, base), callLabel('DEL', list, rt));
  }

  private async delList(
    list: NetworkConfigList,
    rt: RuntimeConf,
    base: Omit<RunOptions, 'prefix'>,
  ): Promise<void> {
    let cached: AnyResult | undefined;
    if (gte(list.cniVersion, '0.4.0')) {
      try {
        cached = getCachedResult(this.cacheDir, list.name, list.cniVersion, rt);
      } catch {
        cacheDel(this.cacheDir, list.name, rt);
        cached = undefined;
      }
    }
    for (const net of [...list.plugins].reverse()) {
      const ro = { ...base, prefix: `plugin ${pluginDescription(net)} failed (delete): ` };
      const conf = this.buildOneConfig(list.name, list.cniVersion, net, cached, rt);
      await runPlugin(net.network.type, 'DEL', conf.bytes, this.cniEnv('DEL', rt), ro);
    }
    cacheDel(this.cacheDir, list.name, rt);
  }

  /**
   * GC (Go GCNetworkList): DEL every cached attachment of this network that is not valid, then GC each plugin (list
   * ≥ 1.1.0). Keeps going after failures; rejects with MultiError listing all of them.
   */
  async gcNetworkList(list: NetworkConfigList, args?: GcArgs, opts: CallOptions = {}): Promise<void> {
    if (list.disableGC) return;
    let cachedAttachments: NetworkAttachment[];
    try {
      cachedAttachments = getCachedAttachments(this.cacheDir);
    } catch {
      return; // like Go: an unreadable cache directory ends GC with success
    }
    const valid = args?.validAttachments
      ? new Set(args.validAttachments.map((a) => `${a.containerID}\u0000${a.ifname}`))
      : new Set<string>();
    const errs: Error[] = [];
    await this.withCall(
      opts,
      async (base) => {
        for (const a of cachedAttachments) {
          if (a.network !== list.name) continue;
          if (valid.has(`${a.containerId}\u0000${a.ifName}`)) continue;
          const rt: RuntimeConf = {
            containerId: a.containerId,
            netns: a.netns,
            ifName: a.ifName,
            ...(a.cniArgs ? { args: a.cniArgs } : {}),
            ...(a.capabilityArgs ? { capabilityArgs: a.capabilityArgs } : {}),
          };
          try {
            await this.delList(list, rt, base);
          } catch (e) {
            errs.push(wrapErr(`failed to delete stale attachment ${rt.containerId} ${rt.ifName}: `, e));
          }
        }
        if (!gte(list.cniVersion, '1.1.0')) return;
        const inject: Json = { name: list.name, cniVersion: list.cniVersion };
        if (args) {
          const va = (args.validAttachments ?? []).map((a) => ({
            containerID: a.containerID,
            ifname: a.ifname,
          }));
          inject['cni.dev/valid-attachments'] = va;
          inject['cni.dev/attachments'] = va;
        }
        for (const plugin of list.plugins) {
          const prefix = `failed to GC plugin ${plugin.network.type}: `;
          try {
            const conf = injectConf(plugin, inject);
            await runPlugin(plugin.network.type, 'GC', conf.bytes, this.cniEnv('GC', undefined), {
              ...base,
              prefix,
            });
          } catch (e) {
            errs.push(e as Error);
          }
        }
      },
      callLabel('GC', list),
    );
    if (errs.length === 1) throw errs[0];
    if (errs.length > 1) throw new MultiError(errs);
  }

  /** STATUS (Go GetStatusNetworkList): list ≥ 1.1.0, plugins in order, the first failure is thrown. */
  async getStatusNetworkList(list: NetworkConfigList, opts: CallOptions = {}): Promise<void> {
    if (!gte(list.cniVersion, '1.1.0')) return;
    const inject: Json = { name: list.name, cniVersion: list.cniVersion };
    await this.withCall(
      opts,
      async (base) => {
        for (const plugin of list.plugins) {
          const conf = injectConf(plugin, inject);
          await runPlugin(plugin.network.type, 'STATUS', conf.bytes, this.cniEnv('STATUS', undefined), {
            ...base,
            prefix: '',
          });
        }
      },
      callLabel('STATUS', list),
    );
  }

  /** The cached result of an attachment in the 1.1.0 shape (undefined when there is none). */
  async getNetworkListCachedResult(list: NetworkConfigList, rt: RuntimeConf): Promise<Result | undefined> {
    const r = getCachedResult(this.cacheDir, list.name, list.cniVersion, rt);
    return r ? toCurrent(r) : undefined;
  }

  /** The cached list bytes and the RuntimeConf with the cached CNI_ARGS / capability arguments. */
  async getNetworkListCachedConfig(
    list: NetworkConfigList,
    rt: RuntimeConf,
  ): Promise<{ config: Uint8Array; rt: RuntimeConf } | undefined> {
    return getCachedConfig(this.cacheDir, list.name, rt);
  }

  /** Every cached attachment (of one container when `containerId` is given). */
  async getCachedAttachments(containerId = ''): Promise<NetworkAttachment[]> {
    return getCachedAttachments(this.cacheDir, containerId);
  }

  // ------------------------------------------------------------------------------------------------------------
  // single plugin configurations (Go AddNetwork / CheckNetwork / DelNetwork)

  async addNetwork(net: PluginConfig, rt: RuntimeConf, opts: CallOptions = {}): Promise<Result> {
    return this.withCall(
      opts,
      async (base) => {
        const result = await this.addOne(net.network.name, net.network.cniVersion, net, undefined, rt, {
          ...base,
          prefix: '',
        });
        cacheAdd(this.cacheDir, result, net.bytes, net.network.name, rt);
        return toCurrent(result);
      },
      callLabel('ADD', net, rt),
    );
  }

  async checkNetwork(net: PluginConfig, rt: RuntimeConf, opts: CallOptions = {}): Promise<void> {
    const { name, cniVersion } = net.network;
    if (!gte(cniVersion, '0.4.0'))
      throw new LibcniError(`configuration version "${cniVersion}" does not support the CHECK command`);
    let cached: AnyResult | undefined;
    try {
      cached = getCachedResult(this.cacheDir, name, cniVersion, rt);
    } catch (e) {
      throw new CacheError(`failed to get network "${name}" cached result: ${(e as Error).message}`, {
        cause: e,
      });
    }
    await this.withCall(
      opts,
      async (base) => {
        const conf = this.buildOneConfig(name, cniVersion, net, cached, rt);
        await runPlugin(net.network.type, 'CHECK', conf.bytes, this.cniEnv('CHECK', rt), {
          ...base,
          prefix: '',
        });
      },
      callLabel('CHECK', net, rt),
    );
  }

  async delNetwork(net: PluginConfig, rt: RuntimeConf, opts: CallOptions = {}): Promise<void> {
    const { name, cniVersion } = net.network;
    let cached: AnyResult | undefined;
    if (gte(cniVersion, '0.4.0')) {
      try {
        cached = getCachedResult(this.cacheDir, name, cniVersion, rt);
      } catch {
        cacheDel(this.cacheDir, name, rt);
      }
    }
    await this.withCall(
      opts,
      async (base) => {
        const conf = this.buildOneConfig(name, cniVersion, net, cached, rt);
        await runPlugin(net.network.type, 'DEL', conf.bytes, this.cniEnv('DEL', rt), { ...base, prefix: '' });
      },
      callLabel('DEL', net, rt),
    );
    cacheDel(this.cacheDir, name, rt);
  }

  // ------------------------------------------------------------------------------------------------------------
  // versions

  /** VERSION of one plugin (Go GetVersionInfo). */
  async getVersionInfo(type: string, opts: CallOptions = {}): Promise<VersionInfo> {
    return this.withCall(opts, (base) => versionInfo(type, { ...base, prefix: '' }));
  }

  /**
   * Go ValidateNetworkList: every plugin is in CNI_PATH and supports the list's version; resolves to the
   * capabilities the list's plugins declare (sorted). Rejects with one error naming every problem.
   */
  async validateNetworkList(list: NetworkConfigList, opts: CallOptions = {}): Promise<string[]> {
    const version = list.cniVersion || '0.1.0';
    const caps = new Set<string>();
    const errs: Error[] = [];
    await this.withCall(opts, async (base) => {
      for (const net of list.plugins) {
        try {
          const vi = await versionInfo(net.network.type, { ...base, prefix: '' });
          if (!vi.supportedVersions.includes(version)) {
            throw new LibcniError(`plugin ${net.network.type} does not support config version "${version}"`);
          }
        } catch (e) {
          errs.push(e as Error);
        }
        for (const [c, on] of Object.entries(net.network.capabilities)) if (on) caps.add(c);
      }
    });
    if (errs.length > 0) {
      const err = new MultiError(errs);
      // Go's text: "[err1 err2]"
      Object.defineProperty(err, 'message', { value: `[${errs.map((e) => e.message).join(' ')}]` });
      throw err;
    }
    return [...caps].sort();
  }
}

function gte(v: string, min: string): boolean {
  try {
    return versionGte(v, min);
  } catch (e) {
    throw new LibcniError((e as Error).message, { cause: e });
  }
}

function findOrThrow(type: string, path: readonly string[], prefix = ''): string {
  try {
    return findInPathSync(type, path);
  } catch (e) {
    throw new LibcniError(`${prefix}${(e as Error).message}`, { cause: e });
  }
}

function wrapErr(prefix: string, e: unknown): Error {
  if (PluginError.is(e)) return e.withPrefix(prefix);
  return new LibcniError(`${prefix}${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

/** Go fixupResultVersion + create.Create: the ADD output parsed in its own version (the config's when absent). */
/** What a traced libcni operation's span names. */
interface CallLabel {
  command: string;
  network: string;
  plugins: string[];
  rt?: RuntimeConf;
}

function callLabel(command: string, x: NetworkConfigList | PluginConfig, rt?: RuntimeConf): CallLabel {
  const plugins = 'plugins' in x ? x.plugins : [x];
  const network = 'plugins' in x ? x.name : (x.network.name ?? '');
  return { command, network, plugins: plugins.map((p) => p.network.type), ...(rt ? { rt } : {}) };
}

/** The span of one libcni operation when tracing is configured in the environment plugins get; else undefined. */
function startCallSpan(
  env: Readonly<Record<string, string | undefined>>,
  trace: CallOptions['trace'],
  label: CallLabel,
): Span | undefined {
  const endpoint = traceEndpoint(env);
  if (!endpoint) return undefined;
  return startRecording(
    endpoint,
    `libcni ${label.command} ${label.network}`,
    {
      'cni.command': label.command,
      'cni.network': label.network,
      'cni.plugins': label.plugins.join(','),
      'cni.container_id': label.rt?.containerId ?? '',
      'cni.ifname': label.rt?.ifName ?? '',
      'cni.netns': label.rt?.netns ?? '',
    },
    SpanKind.Client,
    trace?.traceparent ?? env.TRACEPARENT,
  );
}

/** Exports the operation's spans (and those of plugins that ran in-process) with the cold mode's bounded wait. */
async function exportSpan(span: Span, env: Readonly<Record<string, string | undefined>>): Promise<void> {
  try {
    const { exportRecording } = await import('@cnikit/skel/otlp');
    await exportRecording(span.recording, env);
  } catch {
    // tracing never fails an operation
  }
}

export function parseAddResult(stdout: Uint8Array, confVersion: string, prefix: string): AnyResult {
  const fail = (msg: string, cause?: unknown) => new LibcniError(`${prefix}${msg}`, { cause });
  const parsed = parseJsonGo(stdout);
  if (!parsed.ok) throw fail(`failed to unmarshal raw result: ${parsed.error}`);
  let raw = parsed.value;
  if (raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw fail(
      `failed to unmarshal raw result: json: cannot unmarshal ${Array.isArray(raw) ? 'array' : typeof raw} into Go value of type map[string]interface {}`,
    );
  }
  const rec = { ...(raw as Json) };
  let version = confVersion || '0.1.0';
  if (typeof rec.cniVersion === 'string' && rec.cniVersion !== '') version = rec.cniVersion;
  else rec.cniVersion = version;
  try {
    return parseResult(rec, version);
  } catch (e) {
    throw fail((e as Error).message, e);
  }
}
