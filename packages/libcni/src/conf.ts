/**
 * Network configuration loading and validation, following Go libcni (`libcni/conf.go`, spec 1.1.0 §Configuration):
 *
 * - `confListFromBytes` / `confListFromFile`: a `.conflist` (name, cniVersion / cniVersions, disableCheck, disableGC,
 *   loadOnlyInlinedPlugins, plugins); from a file, unless `loadOnlyInlinedPlugins` is true, more plugin objects are
 *   appended from `<dir of the file>/<network name>/*.conf` (the spec 1.1.0 plugin directory);
 * - `pluginConfFromBytes`: one plugin object (needs `type`);
 * - `confFiles`, `loadConf` (deprecated single `.conf` / `.json`), `loadNetworkConf` (sorted `.conflist` files, first
 *   match by name, then a single `.conf` promoted to a list), `confListFromConf`, `injectConf`.
 *
 * Error texts are the reference's (`error parsing configuration list: no name`, `failed to parse plugin config 0:
 * error parsing configuration: missing 'type'`, `no net configuration with name "x" in /dir`, …). Re-serialised JSON
 * (plugin objects of a list, injected configs, an up-converted `.conf`) is written like Go's encoding/json writes a
 * map: keys sorted at every level, compact, `<`, `>`, `&` escaped.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { foldKey, goJsonSyntaxErrorPosition, goKind, goMarshal, parseJsonGo } from '@cnikit/skel/go';
import { CURRENT_VERSION, compareVersions } from '@cnikit/skel/invoke';
import { ConfigError, LibcniError, NoConfigsFoundError, NotFoundError } from './errors.ts';

export type Json = Record<string, unknown>;

/** The fields libcni reads from a plugin object (Go `types.PluginConf`). */
export interface PluginConf {
  type: string;
  name: string;
  cniVersion: string;
  /** `capabilities`: names mapped to whether the plugin wants them in `runtimeConfig`. */
  capabilities: Record<string, boolean>;
}

/** One plugin object: its parsed fields, the exact bytes sent (before injection) and the JSON object. */
export interface PluginConfig {
  network: PluginConf;
  bytes: Uint8Array;
  raw: Json;
}

/** A network configuration list (Go `NetworkConfigList`). `bytes` is what the result cache records as `config`. */
export interface NetworkConfigList {
  name: string;
  cniVersion: string;
  disableCheck: boolean;
  disableGC: boolean;
  loadOnlyInlinedPlugins: boolean;
  plugins: PluginConfig[];
  bytes: Uint8Array;
}

const enc = new TextEncoder();

export { goMarshal };

/** Go's `%T` of a value decoded into interface{}. */
export function goTypeName(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (Array.isArray(v)) return '[]interface {}';
  if (typeof v === 'number') return 'float64';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'string') return 'string';
  return 'map[string]interface {}';
}

function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === 'string' ? enc.encode(data) : data;
}

/** Go's `os` error text for a failed read (`open /x: no such file or directory`). */
function fsErrorText(err: unknown, op: string, path: string): string {
  const code = (err as NodeJS.ErrnoException).code;
  const text: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
  };
  return `${op} ${path}: ${(code && text[code]) ?? (err instanceof Error ? err.message : String(err))}`;
}

function unmarshalObject(bytes: Uint8Array, goType: string): Json {
  const parsed = parseJsonGo(bytes);
  if (!parsed.ok) throw new Error(parsed.error);
  const v = parsed.value;
  if (v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new Error(`json: cannot unmarshal ${goKind(v)} into Go value of type ${goType}`);
  }
  return v as Json;
}

/** Decode the PluginConf fields with Go's rules (case-insensitive keys, last wins, null = absent, type errors). */
function decodePluginConf(raw: Json): PluginConf {
  const out: PluginConf = { type: '', name: '', cniVersion: '', capabilities: {} };
  const bad = (field: string, v: unknown, type: string) =>
    new Error(`json: cannot unmarshal ${goKind(v)} into Go struct field PluginConf.${field} of type ${type}`);
  for (const [k, v] of Object.entries(raw)) {
    if (v === null) continue;
    const f = foldKey(k);
    if (f === 'type' || f === 'name' || f === 'cniversion') {
      if (typeof v !== 'string') throw bad(f === 'cniversion' ? 'cniVersion' : f, v, 'string');
      if (f === 'type') out.type = v;
      else if (f === 'name') out.name = v;
      else out.cniVersion = v;
    } else if (f === 'capabilities') {
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('capabilities', v, 'map[string]bool');
      for (const [cap, on] of Object.entries(v as Json)) {
        if (on === null) continue;
        if (typeof on !== 'boolean') throw bad('capabilities', on, 'bool');
        out.capabilities[cap] = on;
      }
    } else if (f === 'ipam') {
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('ipam', v, 'types.IPAM');
      for (const [ik, iv] of Object.entries(v as Json)) {
        if (foldKey(ik) === 'type' && iv !== null && typeof iv !== 'string')
          throw bad('ipam.type', iv, 'string');
      }
    } else if (f === 'dns') {
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('dns', v, 'types.DNS');
    } else if (f === 'prevresult') {
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('prevResult', v, 'map[string]interface {}');
    }
  }
  return out;
}

/** Go `NetworkPluginConfFromBytes` (= the deprecated `ConfFromBytes`): one plugin object with a `type`. */
export function pluginConfFromBytes(data: Uint8Array | string): PluginConfig {
  const bytes = toBytes(data);
  let raw: Json;
  let network: PluginConf;
  try {
    raw = unmarshalObject(bytes, 'types.PluginConf');
    network = decodePluginConf(raw);
  } catch (e) {
    throw new ConfigError(`error parsing configuration: ${(e as Error).message}`, { cause: e });
  }
  if (network.type === '') throw new ConfigError("error parsing configuration: missing 'type'");
  return { network, bytes, raw };
}

const LIST = 'error parsing configuration list';

/** Go `NetworkConfFromBytes` (= `ConfListFromBytes`): a configuration list from bytes, inline plugins only. */
export function confListFromBytes(data: Uint8Array | string): NetworkConfigList {
  const bytes = toBytes(data);
  let raw: Json;
  try {
    raw = unmarshalObject(bytes, 'map[string]interface {}');
  } catch (e) {
    throw new ConfigError(`${LIST}: ${(e as Error).message}`, { cause: e });
  }
  if (!Object.hasOwn(raw, 'name')) throw new ConfigError(`${LIST}: no name`);
  const name = raw.name;
  if (typeof name !== 'string') throw new ConfigError(`${LIST}: invalid name type ${goTypeName(name)}`);

  let cniVersion = '';
  if (Object.hasOwn(raw, 'cniVersion')) {
    if (typeof raw.cniVersion !== 'string') {
      throw new ConfigError(`${LIST}: invalid cniVersion type ${goTypeName(raw.cniVersion)}`);
    }
    cniVersion = raw.cniVersion;
  }
  if (Object.hasOwn(raw, 'cniVersions')) cniVersion = pickVersion(raw.cniVersions, cniVersion);

  const readBool = (key: string): boolean => {
    if (!Object.hasOwn(raw, key)) return false;
    const v = raw[key];
    if (typeof v === 'boolean') return v;
    if (typeof v !== 'string') throw new ConfigError(`${LIST}: invalid type ${goTypeName(v)} for ${key}`);
    const s = v.toLowerCase();
    if (s === 'true') return true;
    if (s === 'false') return false;
    throw new ConfigError(`${LIST}: invalid value "${s}" for ${key}`);
  };
  const list: NetworkConfigList = {
    name,
    cniVersion,
    disableCheck: readBool('disableCheck'),
    disableGC: readBool('disableGC'),
    loadOnlyInlinedPlugins: readBool('loadOnlyInlinedPlugins'),
    plugins: [],
    bytes,
  };
  if (!Object.hasOwn(raw, 'plugins')) {
    if (list.loadOnlyInlinedPlugins) {
      throw new ConfigError(`${LIST}: \`loadOnlyInlinedPlugins\` is true, and no 'plugins' key`);
    }
    return list;
  }
  const plugins = raw.plugins;
  if (!Array.isArray(plugins))
    throw new ConfigError(`${LIST}: invalid 'plugins' type ${goTypeName(plugins)}`);
  if (plugins.length === 0) throw new ConfigError(`${LIST}: no plugins in list`);
  plugins.forEach((p, i) => {
    try {
      list.plugins.push(pluginConfFromBytes(goMarshal(p)));
    } catch (e) {
      throw new ConfigError(`failed to parse plugin config ${i}: ${(e as Error).message}`, { cause: e });
    }
  });
  return list;
}

/** `cniVersions`: the highest entry not newer than this library's version, together with `cniVersion`. */
function pickVersion(rawVersions: unknown, cniVersion: string): string {
  if (!Array.isArray(rawVersions))
    throw new ConfigError(`${LIST}: invalid type for cniVersions: []interface {}`);
  const vs: string[] = [];
  const newer = (v: string) => compareVersions(v, CURRENT_VERSION) > 0;
  rawVersions.forEach((rv, i) => {
    if (typeof rv !== 'string') {
      throw new ConfigError(`${LIST}: invalid type for cniVersions index ${i}: ${goTypeName(rv)}`);
    }
    try {
      if (!newer(rv)) vs.push(rv);
    } catch (e) {
      throw new ConfigError(
        `${LIST}: invalid cniVersions entry ${rv} at index ${i}: ${(e as Error).message}`,
      );
    }
  });
  if (cniVersion !== '') {
    try {
      if (!newer(cniVersion)) vs.push(cniVersion);
    } catch (e) {
      throw new ConfigError(`${LIST}: invalid cniVersion ${cniVersion}: ${(e as Error).message}`);
    }
  }
  vs.sort(compareVersions);
  return vs.length > 0 ? vs[vs.length - 1]! : cniVersion;
}

/** A list from a plain object (serialised like a file would be): a convenience for programs and tests. */
export function confListFromObject(obj: Json): NetworkConfigList {
  return confListFromBytes(JSON.stringify(obj));
}

/**
 * Go `ConfFiles`: the files (not directories) of `dir` whose extension is one of `extensions`, in name order; a
 * missing directory gives none; other read errors are thrown.
 */
export function confFiles(dir: string, extensions: readonly string[]): string[] {
  let entries: import('node:fs').Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new ConfigError(fsErrorText(e, 'open', dir), { cause: e });
  }
  return entries
    .filter((f) => !f.isDirectory() && extensions.includes(extname(f.name)))
    .map((f) => f.name)
    .sort()
    .map((n) => join(dir, n));
}

function readConfFile(filename: string): Uint8Array {
  try {
    return readFileSync(filename);
  } catch (e) {
    throw new ConfigError(`error reading ${filename}: ${fsErrorText(e, 'open', filename)}`, { cause: e });
  }
}

/** Go `NetworkPluginConfsFromFiles`: the plugin objects in `<confDir>/<network>/*.conf`, in name order. */
export function pluginConfsFromFiles(confDir: string, network: string): PluginConfig[] {
  const dir = join(confDir, network);
  let files: string[];
  try {
    files = confFiles(dir, ['.conf']);
  } catch (e) {
    throw new ConfigError(`failed to read plugin config files in ${dir}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  return files.map((f) => {
    const bytes = readConfFile(f);
    return inFile(f, bytes, () => pluginConfFromBytes(bytes));
  });
}

/**
 * A configuration error of a file names the file, and for malformed JSON the line and column
 * (`/etc/cni/net.d/10-x.conflist:7:3: error parsing configuration list: invalid character '}' …`); the Go
 * library's text names neither.
 */
function inFile<T>(filename: string, bytes: Uint8Array, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const pos = goJsonSyntaxErrorPosition(bytes);
    const where = pos ? `${filename}:${pos.line}:${pos.column}` : filename;
    throw new ConfigError(`${where}: ${e.message}`, { cause: e });
  }
}

/** Go `NetworkConfFromFile` (= `ConfListFromFile`): a list file plus its plugin directory. */
export function confListFromFile(filename: string): NetworkConfigList {
  const bytes = readConfFile(filename);
  const conf = inFile(filename, bytes, () => confListFromBytes(bytes));
  if (!conf.loadOnlyInlinedPlugins) {
    const dir = filename.includes('/') ? filename.slice(0, filename.lastIndexOf('/')) || '/' : '.';
    conf.plugins.push(...pluginConfsFromFiles(dir, conf.name));
  }
  if (conf.plugins.length === 0) throw new ConfigError('no plugin configs found');
  return conf;
}

/** Go `ConfFromFile` (deprecated single-plugin file). */
export function confFromFile(filename: string): PluginConfig {
  const bytes = readConfFile(filename);
  return inFile(filename, bytes, () => pluginConfFromBytes(bytes));
}

/** Go `LoadConf` (deprecated): the first `.conf` / `.json` file of `dir` (name order) whose `name` matches. */
export function loadConf(dir: string, name: string): PluginConfig {
  const files = confFiles(dir, ['.conf', '.json']);
  if (files.length === 0) throw new NoConfigsFoundError(dir);
  for (const f of files) {
    const conf = confFromFile(f);
    if (conf.network.name === name) return conf;
  }
  throw new NotFoundError(dir, name);
}

/**
 * Go `LoadNetworkConf` (= `LoadConfList`): the first `.conflist` of `dir` in name order whose `name` matches (every
 * file before it must parse), else a single `.conf` / `.json` of that name promoted to a list.
 */
export function loadNetworkConf(dir: string, name: string): NetworkConfigList {
  const files = confFiles(dir, ['.conflist']);
  for (const f of files) {
    const conf = confListFromFile(f);
    if (conf.name === name) return conf;
  }
  let single: PluginConfig;
  try {
    single = loadConf(dir, name);
  } catch (e) {
    if (files.length !== 0 && NoConfigsFoundError.is(e)) throw new NotFoundError(dir, name);
    throw e;
  }
  return confListFromConf(single);
}

/** Go `ConfListFromConf`: a list holding one plugin object, with the plugin's name and cniVersion. */
export function confListFromConf(original: PluginConfig): NetworkConfigList {
  const raw = unmarshalObject(original.bytes, 'map[string]interface {}');
  return confListFromBytes(
    goMarshal({ name: original.network.name, cniVersion: original.network.cniVersion, plugins: [raw] }),
  );
}

/** Go `InjectConf`: the plugin object with top-level keys set (re-serialised). */
export function injectConf(original: PluginConfig, values: Json): PluginConfig {
  let config: Json;
  try {
    config = unmarshalObject(original.bytes, 'map[string]interface {}');
  } catch (e) {
    throw new LibcniError(`unmarshal existing network bytes: ${(e as Error).message}`, { cause: e });
  }
  for (const [key, value] of Object.entries(values)) {
    if (key === '') throw new LibcniError('keys cannot be empty');
    if (value === null || value === undefined) throw new LibcniError(`key '${key}' value must not be nil`);
    config[key] = value;
  }
  return pluginConfFromBytes(goMarshal(config));
}
