/**
 * CNI spec data types: network configuration, results of every spec version, and the
 * request/handler contract of a plugin. Runtime-neutral (no Node imports).
 */

/** Every published spec version, oldest first. */
export const ALL_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export type SpecVersion = (typeof ALL_VERSIONS)[number];
/** The version this SDK implements natively; handlers receive and return results of this shape. */
export const CURRENT_VERSION = '1.1.0';

// ---------------------------------------------------------------------------------------------
// Results

/** A route. `mtu`, `advmss`, `priority`, `table`, `scope` are @since 1.1.0. */
export interface Route {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface DNS {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** An interface in a 0.3.0+ result. `mtu`, `socketPath`, `pciID` are @since 1.1.0. */
export interface Interface {
  name: string;
  mac?: string;
  mtu?: number;
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

/** An address in a 1.x result (`address` is CIDR notation, host bits kept). */
export interface IPConfig {
  /** Index into `interfaces`; 0 is a valid index and must be preserved. */
  interface?: number;
  address: string;
  gateway?: string;
}

/** Result of spec 1.0.0 / 1.1.0: the shape every handler returns and receives as prevResult. */
export interface Result {
  cniVersion: string;
  interfaces?: Interface[];
  ips?: IPConfig[];
  routes?: Route[];
  dns?: DNS;
}

/** Result of spec 0.3.0 / 0.3.1 / 0.4.0. */
export interface Result040 {
  cniVersion: string;
  interfaces?: Interface[];
  ips?: Array<IPConfig & { version: '4' | '6' | '' }>;
  routes?: Route[];
  dns: DNS;
}

/** `ip4` / `ip6` of a 0.1.0 / 0.2.0 result. */
export interface IPConfig020 {
  ip: string;
  gateway?: string;
  routes?: Route[];
}

/** Result of spec 0.1.0 / 0.2.0. */
export interface Result020 {
  cniVersion: string;
  ip4?: IPConfig020;
  ip6?: IPConfig020;
  dns: DNS;
}

export type AnyResult = Result | Result040 | Result020;

// ---------------------------------------------------------------------------------------------
// Configuration

/** One `runtimeConfig.portMappings` entry (CONVENTIONS.md). */
export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol?: string;
  hostIP?: string;
}

/** One `ipRanges` range (host-local range syntax). */
export interface IPRange {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  gateway?: string;
}

export interface BandwidthEntry {
  ingressRate?: number;
  ingressBurst?: number;
  egressRate?: number;
  egressBurst?: number;
}

/** Well-known capability arguments (CONVENTIONS.md). Plugins read only what they declared. */
export interface RuntimeConfig {
  portMappings?: PortMapping[];
  ipRanges?: IPRange[][];
  bandwidth?: BandwidthEntry;
  dns?: DNS;
  ips?: string[];
  mac?: string;
  infinibandGUID?: string;
  deviceID?: string;
  aliases?: string[];
  cgroupPath?: string;
  [key: string]: unknown;
}

/** `args.cni` conventions. */
export interface CniArgsConvention {
  ips?: string[];
  labels?: Array<{ key: string; value: string }>;
  mac?: string;
  [key: string]: unknown;
}

/** An attachment that GC must keep. */
export interface Attachment {
  containerID: string;
  ifname: string;
}

/** The keys every plugin config has; plugin-specific keys are decoded by the plugin's schema. */
export interface NetConf {
  cniVersion: string;
  name: string;
  type: string;
  capabilities?: Record<string, boolean>;
  ipam?: { type?: string; [key: string]: unknown };
  dns?: DNS;
  runtimeConfig?: RuntimeConfig;
  args?: { cni?: CniArgsConvention; [key: string]: unknown };
  /** Raw prevResult as found in the config; handlers use `Request.prevResult` instead. */
  prevResult?: unknown;
  /** GC (spec 1.1.0): attachments still valid. The SDK also accepts the old `cni.dev/attachments` key. */
  'cni.dev/valid-attachments'?: Attachment[];
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Plugin contract

export type Command = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';

export interface Logger {
  debug(msg: string, ...args: unknown[]): void;
  info(msg: string, ...args: unknown[]): void;
  warn(msg: string, ...args: unknown[]): void;
  error(msg: string, ...args: unknown[]): void;
}

/** The parsed, validated invocation before the plugin's config decoder ran (what `Plugin.conf` receives). */
export interface RequestBase {
  command: Exclude<Command, 'VERSION'>;
  /** CNI_CONTAINERID ('' for GC/STATUS when unset). */
  containerId: string;
  /** CNI_NETNS ('' when unset, e.g. DEL after the namespace is gone). */
  netns: string;
  /** CNI_IFNAME ('' for GC/STATUS when unset). */
  ifName: string;
  /** CNI_ARGS verbatim; parse with `loadArgs`. */
  args: string;
  /** CNI_PATH split on ':' (empty elements kept as '' like Go). */
  path: string[];
  /** The config bytes exactly as received on stdin (delegates get these unchanged). */
  stdin: Uint8Array;
  /** stdin parsed as JSON (keys as sent); decode plugin keys with a schema. */
  config: NetConf;
  /** The config's cniVersion ('0.1.0' when absent). */
  cniVersion: string;
  /** prevResult parsed in the config's version and converted to the current (1.1.0) shape. */
  prevResult?: Result;
  /** GC: the valid attachments (from `cni.dev/valid-attachments`, falling back to `cni.dev/attachments`). */
  validAttachments?: Attachment[];
  /** The complete environment of the invocation (delegates inherit it). */
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
  /** The invocation's stderr (delegates' stderr is copied here on success). Default process.stderr. */
  stderr?: { write(s: string): unknown };
  /**
   * The Invoker this invocation was dispatched with (`PluginIO.invoker`): `delegateAdd` & co. run delegates through
   * it (its in-process plugins). Absent: the default Invoker.
   */
  invoker?: InvokerHandle;
}

/**
 * What `req.invoker` holds: an `Invoker` of `@cnikit/skel/invoke`. Declared here, as the part of it a request
 * carries, so the spec types import nothing of the runtime side.
 */
export interface InvokerHandle {
  delegate(
    verb: 'ADD' | 'DEL' | 'CHECK' | 'STATUS' | 'GC',
    type: string,
    req: RequestBase,
  ): Promise<Uint8Array>;
  delegateAdd(type: string, req: RequestBase): Promise<Result>;
  delegateDel(type: string, req: RequestBase): Promise<void>;
}

/** What a handler receives: the parsed, validated invocation with the config decoded by `Plugin.conf`. */
export interface Request<C = NetConf> extends RequestBase {
  /** The config as decoded by the plugin's `conf` decoder (the raw `config` when the plugin declares none). */
  conf: C;
}

/**
 * A plugin's config decoder: the raw stdin object (keys as sent) and the request in, the typed config out. Throw a
 * `CniError` for a bad config (it becomes the error object; any other error is code 999). `req.command` tells the
 * verb, for decoders that validate less on DEL/GC/STATUS, like the reference plugins do.
 */
export type ConfDecoder<C> = (raw: Record<string, unknown>, req: RequestBase) => C;

export type MaybePromise<T> = T | Promise<T>;

/**
 * A plugin: one options object, handlers return their result and the SDK prints it. `C` is the type of the decoded
 * config (`req.conf`); without a `conf` decoder it is the raw `NetConf`. Code that holds plugins of any config type
 * (registries, the multicall table) uses `AnyPlugin`.
 */
export interface Plugin<C = NetConf> {
  /** Plugin name, e.g. 'bridge' (also the multicall name). */
  name: string;
  /** About text printed on a bare invocation, e.g. 'CNI bridge plugin cnikit 0.1.0'. */
  about?: string;
  /** Supported spec versions; default ALL_VERSIONS. */
  versions?: readonly string[];
  /**
   * Whether the SDK parses `prevResult` into `Request.prevResult` before ADD/CHECK/DEL (default true;
   * a parse failure is then code 999 before the handler runs). Set false to parse it yourself with
   * `parsePrevResult(req.config, req.cniVersion)` (e.g. to validate your own keys first or ignore it on DEL).
   */
  parsePrevResult?: boolean;
  /**
   * Prefix for the prevResult parse error message, to match a reference plugin's wording
   * (loopback: 'failed to parse prevResult: ', portmap/bandwidth: 'could not parse prevResult: ').
   */
  prevResultErrorPrefix?: string;
  /**
   * The config decoder (conventionally `parseConf` from the plugin's `config.ts`). The SDK calls it before each
   * handler it runs (every verb but VERSION; after prevResult parsing and the namespace guard) and hands its value to
   * the handler as `req.conf`.
   */
  conf?: ConfDecoder<C>;
  /**
   * What a main plugin may name in its `ipam.type`: true for an IPAM plugin (host-local, static, dhcp), false for a
   * plugin that never is one (a main or chained plugin). A delegating plugin's `validateDelegate(type, req, { ipam:
   * true })` refuses an in-process delegate declaring false with code 7, before any change; unset is not checked.
   */
  ipam?: boolean;
  add?(req: Request<C>): MaybePromise<Result>;
  del?(req: Request<C>): MaybePromise<void>;
  check?(req: Request<C>): MaybePromise<void>;
  gc?(req: Request<C>): MaybePromise<void>;
  status?(req: Request<C>): MaybePromise<void>;
  /**
   * Command-line subcommands of the executable (the dhcp plugin's `dhcp daemon …`): when CNI_COMMAND is unset and
   * the first argument names one, the multicall entry runs it with the remaining arguments instead of the CNI
   * protocol; the resolved number is the exit code.
   */
  commands?: Readonly<Record<string, (args: readonly string[]) => Promise<number>>>;
  /**
   * A resident part of the plugin that a long-running process of the executable may run beside its own work (the
   * dhcp plugin's daemon, hosted by the warm service: `cnikit serve --dhcp-daemon`). The same work as the command
   * of the same name, without its signal handling: the host decides when it stops.
   */
  resident?: Resident;
}

/** See Plugin.resident. */
export interface Resident {
  /** The plugin's subcommand this runs (`daemon` for `dhcp daemon`): its flags are the ones start() takes. */
  readonly command: string;
  /** Starts it with the command's flags; resolves once it serves. Throws (with a message for the log) when it cannot. */
  start(args: readonly string[], log: (line: string) => void): Promise<ResidentHandle>;
}

export interface ResidentHandle {
  /** What it serves, for the host's log (e.g. `listening on /run/cni/dhcp.sock, 2 lease(s) resumed`). */
  readonly description: string;
  /** Stops it the way SIGTERM stops the command (state kept for the next start). */
  stop(): Promise<void>;
}

/** A plugin with any config type: what registries, dispatchers and multicall tables hold. */
export type AnyPlugin = Plugin<unknown>;
