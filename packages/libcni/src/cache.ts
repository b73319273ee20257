/**
 * The result cache, in Go libcni's on-disk format so that cnikit and a Go runtime read each other's entries:
 *
 *   <cacheDir>/results/<network>-<containerID>-<ifname>   (directory 0700, file 0600)
 *   {"kind":"cniCacheV1","containerId":…,"config":<base64 of the list's bytes>,"ifName":…,"networkName":…,
 *    "netns":…,"cniArgs":[[k,v],…],"capabilityArgs":{…},"result":{…}}
 *
 * Field order is Go's struct order; `netns`, `cniArgs`, `capabilityArgs` and `result` are left out when empty; maps
 * (`capabilityArgs`, `result`) have their keys sorted at every level, as Go marshals a map. Unlike Go (a plain
 * os.WriteFile), an entry is written atomically (@cnikit/sys/atomic: temp file, fsync, rename, fsync of the directory),
 * so a crash never leaves half of one.
 * An entry that is not `cniCacheV1` is read as a legacy entry (the whole file is the result), like Go.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { foldKey, parseJsonGo } from '@cnikit/skel/go';
import { type AnyResult, convertResult, formatResult, parseResult } from '@cnikit/skel/invoke';
import { writeFileAtomic } from '@cnikit/sys/atomic';
import { goMarshal, type Json } from './conf.ts';
import { CacheError } from './errors.ts';

export const DEFAULT_CACHE_DIR = '/var/lib/cni';
export const CACHE_KIND = 'cniCacheV1';

/** What identifies one attachment (Go RuntimeConf). */
export interface RuntimeConf {
  containerId: string;
  /** Path of the container's network namespace ('' for none). */
  netns?: string;
  ifName: string;
  /** CNI_ARGS pairs, in order. */
  args?: Array<[string, string]>;
  /** Capability arguments, passed in `runtimeConfig` to plugins that declare the capability. */
  capabilityArgs?: Record<string, unknown>;
}

/** A cached attachment (Go NetworkAttachment). */
export interface NetworkAttachment {
  containerId: string;
  network: string;
  ifName: string;
  /** The list's bytes as cached. */
  config: Uint8Array;
  netns: string;
  cniArgs?: Array<[string, string]>;
  capabilityArgs?: Record<string, unknown>;
}

interface CachedInfo {
  kind: string;
  containerId: string;
  config: Uint8Array;
  ifName: string;
  networkName: string;
  netns: string;
  cniArgs?: Array<[string, string]>;
  capabilityArgs?: Record<string, unknown>;
  result?: Json;
}

/** Go's quoting (%q) for the path error (ASCII names; JSON quoting is the same for them). */
const q = (s: string) => JSON.stringify(s);

export function cacheFilePath(cacheDir: string, network: string, rt: RuntimeConf): string {
  if (network === '' || rt.containerId === '' || rt.ifName === '') {
    throw new CacheError(
      `cache file path requires network name (${q(network)}), container ID (${q(rt.containerId)}), and interface name (${q(rt.ifName)})`,
    );
  }
  return join(cacheDir, 'results', `${network}-${rt.containerId}-${rt.ifName}`);
}

/** A typed result as Go marshals it into the cache (and into `prevResult`): its own version's fields. */
export function resultJson(result: AnyResult): Json {
  return JSON.parse(formatResult(result)) as Json;
}

/** The bytes of one cache entry, exactly as Go libcni writes it. */
export function encodeCacheEntry(
  result: AnyResult,
  config: Uint8Array,
  network: string,
  rt: RuntimeConf,
): string {
  const head = goMarshal({ kind: CACHE_KIND });
  const parts = [
    head.slice(1, -1),
    `"containerId":${goMarshal(rt.containerId)}`,
    `"config":${goMarshal(Buffer.from(config).toString('base64'))}`,
    `"ifName":${goMarshal(rt.ifName)}`,
    `"networkName":${goMarshal(network)}`,
  ];
  if (rt.netns) parts.push(`"netns":${goMarshal(rt.netns)}`);
  if (rt.args && rt.args.length > 0) parts.push(`"cniArgs":${goMarshal(rt.args)}`);
  if (rt.capabilityArgs && Object.keys(rt.capabilityArgs).length > 0) {
    parts.push(`"capabilityArgs":${goMarshal(rt.capabilityArgs)}`);
  }
  const res = resultJson(result);
  if (Object.keys(res).length > 0) parts.push(`"result":${goMarshal(res)}`);
  return `{${parts.join(',')}}`;
}

/** Write the entry of an ADD (atomically). */
export function cacheAdd(
  cacheDir: string,
  result: AnyResult,
  config: Uint8Array,
  network: string,
  rt: RuntimeConf,
): void {
  const file = cacheFilePath(cacheDir, network, rt);
  const text = encodeCacheEntry(result, config, network, rt);
  try {
    mkdirSync(join(cacheDir, 'results'), { recursive: true, mode: 0o700 });
    writeFileAtomic(file, text, 0o600);
  } catch (e) {
    throw new CacheError(`failed to set network ${q(network)} cached result: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

/** Remove an entry (no error when it is absent or the path cannot be formed). */
export function cacheDel(cacheDir: string, network: string, rt: RuntimeConf): void {
  let file: string;
  try {
    file = cacheFilePath(cacheDir, network, rt);
  } catch {
    return;
  }
  rmSync(file, { force: true });
}

function readEntry(cacheDir: string, network: string, rt: RuntimeConf): Uint8Array | undefined {
  const file = cacheFilePath(cacheDir, network, rt);
  try {
    return readFileSync(file);
  } catch {
    return undefined; // like Go: read errors mean "no cached result"
  }
}

/** Decode a cachedInfo with Go's json rules (case-insensitive keys); undefined when it is not an object. */
function decodeInfo(bytes: Uint8Array): CachedInfo | Error {
  const parsed = parseJsonGo(bytes);
  if (!parsed.ok) return new Error(parsed.error);
  const v = parsed.value;
  if (v === null)
    return { kind: '', containerId: '', config: new Uint8Array(), ifName: '', networkName: '', netns: '' };
  if (typeof v !== 'object' || Array.isArray(v))
    return new Error('json: cannot unmarshal into Go value of type libcni.cachedInfo');
  const info: CachedInfo = {
    kind: '',
    containerId: '',
    config: new Uint8Array(),
    ifName: '',
    networkName: '',
    netns: '',
  };
  for (const [k, val] of Object.entries(v as Json)) {
    if (val === null) continue;
    const f = foldKey(k);
    const str = (field: string) => {
      if (typeof val !== 'string')
        throw new Error(`json: cannot unmarshal into Go struct field cachedInfo.${field}`);
      return val;
    };
    try {
      if (f === 'kind') info.kind = str('kind');
      else if (f === 'containerid') info.containerId = str('containerId');
      else if (f === 'ifname') info.ifName = str('ifName');
      else if (f === 'networkname') info.networkName = str('networkName');
      else if (f === 'netns') info.netns = str('netns');
      else if (f === 'config') info.config = new Uint8Array(Buffer.from(str('config'), 'base64'));
      else if (f === 'cniargs') {
        if (
          !Array.isArray(val) ||
          val.some((p) => !Array.isArray(p) || p.length > 2 || p.some((x) => typeof x !== 'string'))
        ) {
          throw new Error(
            'json: cannot unmarshal into Go struct field cachedInfo.cniArgs of type [][2]string',
          );
        }
        info.cniArgs = (val as string[][]).map((p) => [p[0] ?? '', p[1] ?? ''] as [string, string]);
      } else if (f === 'capabilityargs' || f === 'result') {
        if (typeof val !== 'object' || Array.isArray(val)) {
          throw new Error(
            `json: cannot unmarshal into Go struct field cachedInfo.${f} of type map[string]interface {}`,
          );
        }
        if (f === 'result') info.result = val as Json;
        else info.capabilityArgs = val as Json;
      }
    } catch (e) {
      return e as Error;
    }
  }
  return info;
}

function convertCached(raw: unknown, cniVersion: string): AnyResult {
  let result: AnyResult;
  try {
    result = parseResult(raw ?? {});
  } catch (e) {
    throw new CacheError((e as Error).message, { cause: e });
  }
  try {
    return convertResult(result, cniVersion);
  } catch (e) {
    throw new CacheError(
      `failed to convert cached result to config version ${q(cniVersion)}: ${(e as Error).message}`,
      { cause: e },
    );
  }
}

/**
 * The cached result of an attachment converted to `cniVersion` (Go getCachedResult), or undefined when there is no
 * entry. Throws CacheError for an entry that cannot be parsed or converted.
 */
export function getCachedResult(
  cacheDir: string,
  network: string,
  cniVersion: string,
  rt: RuntimeConf,
): AnyResult | undefined {
  const bytes = readEntry(cacheDir, network, rt);
  if (!bytes) return undefined;
  const info = decodeInfo(bytes);
  if (info instanceof Error || info.kind !== CACHE_KIND) {
    // legacy entry: the file is the result itself
    const parsed = parseJsonGo(bytes);
    if (!parsed.ok) throw new CacheError(parsed.error);
    return convertCached(parsed.value, cniVersion);
  }
  return convertCached(info.result, cniVersion);
}

/** The cached list bytes and the RuntimeConf with cached args / capability args (Go getCachedConfig). */
export function getCachedConfig(
  cacheDir: string,
  network: string,
  rt: RuntimeConf,
): { config: Uint8Array; rt: RuntimeConf } | undefined {
  const bytes = readEntry(cacheDir, network, rt);
  if (!bytes) return undefined;
  const info = decodeInfo(bytes);
  if (info instanceof Error) {
    throw new CacheError(`failed to unmarshal cached network ${q(network)} config: ${info.message}`, {
      cause: info,
    });
  }
  if (info.kind !== CACHE_KIND) {
    throw new CacheError(`read cached network ${q(network)} config has wrong kind: ${info.kind}`);
  }
  const out: RuntimeConf = { ...rt };
  if (info.cniArgs) out.args = info.cniArgs;
  if (info.capabilityArgs) out.capabilityArgs = info.capabilityArgs;
  else delete out.capabilityArgs;
  return { config: info.config, rt: out };
}

/**
 * Every cached attachment (Go GetCachedAttachments), in file-name order, optionally only those of `containerId`.
 * Unreadable or foreign files are skipped; a missing directory gives none.
 */
export function getCachedAttachments(cacheDir: string, containerId = ''): NetworkAttachment[] {
  const dir = join(cacheDir, 'results');
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new CacheError(`open ${dir}: ${(e as Error).message}`, { cause: e });
  }
  const out: NetworkAttachment[] = [];
  for (const name of names) {
    if (containerId) {
      const part = `-${containerId}-`;
      const pos = name.indexOf(part);
      if (pos <= 0 || pos + part.length >= name.length) continue;
    }
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(join(dir, name));
    } catch {
      continue;
    }
    const info = decodeInfo(bytes);
    if (info instanceof Error || info.kind !== CACHE_KIND) continue;
    if (containerId && info.containerId !== containerId) continue;
    if (info.ifName === '' || info.networkName === '') continue;
    out.push({
      containerId: info.containerId,
      network: info.networkName,
      ifName: info.ifName,
      config: info.config,
      netns: info.netns,
      ...(info.cniArgs ? { cniArgs: info.cniArgs } : {}),
      ...(info.capabilityArgs ? { capabilityArgs: info.capabilityArgs } : {}),
    });
  }
  return out;
}
