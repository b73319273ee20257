/**
 * tuning configuration (reference: plugins/meta/tuning, plugins.md §3.1–3.2): decoding with the reference's
 * precedence, the duplicate-sysctl-key check, sysctl file names and the allow-list. Pure: no system access
 * except `readAllowlist`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { posix } from 'node:path';
import {
  CniError,
  decode,
  ErrorCode,
  errorReason,
  type Infer,
  loadArgs,
  type RequestBase,
  s,
} from '@cnikit/skel/plugin';
import { RegexpError, re2ToRegExp } from './re2.ts';

export const DEFAULT_DATA_DIR = '/run/cni/tuning';
export const ALLOWLIST_FILE = '/etc/cni/tuning/allowlist.conf';

const argsSchema = s.object({
  sysctl: s.record(s.string()).optional(),
  mac: s.string().optional(),
  promisc: s.bool().optional(),
  mtu: s.int().optional(),
  allmulti: s.bool().optional(),
  txQLen: s.int().optional(),
});

const confSchema = s.object({
  dataDir: s.string().default(''),
  sysctl: s.record(s.string()).optional(),
  mac: s.string().default(''),
  promisc: s.bool().default(false),
  mtu: s.int().default(0),
  txQLen: s.int().optional(),
  allmulti: s.bool().optional(),
  runtimeConfig: s.object({ mac: s.string().default('') }).optional(),
  args: s.object({ cni: argsSchema.optional() }).optional(),
});

export interface TuningConf {
  name: string;
  dataDir: string;
  /** Sysctls in configuration order (`args.cni.sysctl` merged over the top-level object). */
  sysctl: Array<[key: string, value: string]>;
  /** The MAC as configured ('' = unchanged), verbatim (the reference puts it in the result as written). */
  mac: string;
  promisc: boolean;
  mtu: number;
  txQLen: number | undefined;
  allmulti: boolean | undefined;
}

export type RawConf = Infer<typeof confSchema>;

/**
 * The reference's parseConf: config values, then CNI_ARGS `MAC`, then `runtimeConfig.mac`, then `args.cni.*`
 * (so MAC precedence is args.cni > runtimeConfig > CNI_ARGS > mac — unlike the bridge). A top-level `sysctl`
 * that is absent while `args.cni.sysctl` is set works (the reference panics).
 */
export function decodeConf(config: Record<string, unknown>, cniArgs: string): TuningConf {
  const raw = decode(confSchema, config);
  const conf: TuningConf = {
    name: typeof config.name === 'string' ? config.name : '',
    dataDir: raw.dataDir || DEFAULT_DATA_DIR,
    sysctl: Object.entries(raw.sysctl ?? {}),
    mac: raw.mac,
    promisc: raw.promisc,
    mtu: raw.mtu,
    txQLen: raw.txQLen,
    allmulti: raw.allmulti,
  };
  if (cniArgs !== '') {
    const e = loadArgs(cniArgs, { MAC: 'string' });
    if (e.MAC) conf.mac = e.MAC;
  }
  if (raw.runtimeConfig?.mac) conf.mac = raw.runtimeConfig.mac;
  const a = raw.args?.cni;
  if (a) {
    if (a.sysctl) {
      const merged = new Map(conf.sysctl);
      for (const [k, v] of Object.entries(a.sysctl)) merged.set(k, v);
      conf.sysctl = [...merged];
    }
    if (a.mac !== undefined) conf.mac = a.mac;
    if (a.promisc !== undefined) conf.promisc = a.promisc;
    if (a.mtu !== undefined) conf.mtu = a.mtu;
    if (a.allmulti !== undefined) conf.allmulti = a.allmulti;
    if (a.txQLen !== undefined) conf.txQLen = a.txQLen;
  }
  return conf;
}

/**
 * The plugin's config decoder: ADD and CHECK first refuse a sysctl key given twice in the raw bytes (JSON decoding
 * keeps only the last), then every verb decodes the config and applies CNI_ARGS.
 */
export function parseConf(
  raw: Record<string, unknown>,
  req: Pick<RequestBase, 'command' | 'stdin' | 'args'>,
): TuningConf {
  if (req.command === 'ADD' || req.command === 'CHECK')
    checkDuplicateSysctlKeys(new TextDecoder().decode(req.stdin));
  return decodeConf(raw, req.args);
}

/** Whether ADD changes link attributes (and so writes a backup first). */
export function changesLink(conf: TuningConf): boolean {
  return (
    conf.mac !== '' ||
    conf.mtu !== 0 ||
    conf.promisc ||
    conf.allmulti !== undefined ||
    conf.txQLen !== undefined
  );
}

/**
 * The reference rejects a config whose top-level `sysctl` object (any key case, like Go's decoder) repeats a key,
 * before anything else is parsed: `duplicated sysctl keys are not allowed`. JSON.parse keeps the last value
 * silently, so the raw text is scanned here. Malformed JSON is left to the normal decoder.
 */
export function checkDuplicateSysctlKeys(text: string): void {
  let i = 0;
  const seen = new Set<string>();
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
  };
  const str = (): string => {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  // skips any value; with `collect`, records the keys of an object value
  const value = (collect: boolean): void => {
    ws();
    const c = text[i];
    if (c === '"') {
      str();
    } else if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = str();
        if (collect) {
          if (seen.has(key)) throw new CniError(ErrorCode.Internal, 'duplicated sysctl keys are not allowed');
          seen.add(key);
        }
        ws();
        i++; // ':'
        value(false);
        ws();
        if (text[i++] !== ',') return;
      }
    } else if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        value(false);
        ws();
        if (text[i++] !== ',') return;
      }
    } else {
      while (i < text.length && !',}] \t\n\r'.includes(text[i] as string)) i++;
    }
  };
  try {
    ws();
    if (text[i] !== '{') return;
    i++;
    ws();
    if (text[i] === '}') return;
    for (;;) {
      ws();
      const key = str();
      ws();
      i++;
      value(key.toLowerCase() === 'sysctl');
      ws();
      if (text[i++] !== ',') return;
    }
  } catch (err) {
    if (CniError.is(err)) throw err;
    // malformed JSON: skel has already rejected it; nothing to add here
  }
}

/**
 * The reference's getSysctlFilename: every '.' becomes '/', then the first `IFNAME` becomes CNI_IFNAME, joined
 * under /proc/sys and cleaned; anything outside /proc/sys/net/ is `invalid net sysctl key: "<key>"`.
 */
export function sysctlFileName(key: string, ifName: string): string {
  const k = key.replaceAll('.', '/').replace('IFNAME', ifName);
  const file = posix.join('/proc/sys', k);
  if (!file.startsWith('/proc/sys/net/')) {
    throw new CniError(ErrorCode.Internal, `invalid net sysctl key: ${JSON.stringify(k)}`);
  }
  return file;
}

/** The allow-list file's regular expressions (non-empty trimmed lines), or undefined when the file is absent. */
export function readAllowlist(file = ALLOWLIST_FILE): string[] | undefined {
  if (!existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CniError(ErrorCode.Internal, `open ${file}: ${errorReason(err)}`);
  }
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
}

/**
 * Every configured key (as written, before `IFNAME` substitution) must match one allow-list expression
 * (unanchored, RE2 syntax). An expression that cannot be translated faithfully fails the ADD.
 */
export function validateSysctls(keys: readonly string[], allowlist: readonly string[] | undefined): void {
  if (!allowlist) return;
  // compiled lazily in order, like the reference: an expression after the first match is never parsed
  const compiled = new Map<number, RegExp>();
  const matches = (n: number, key: string): boolean => {
    let re = compiled.get(n);
    if (!re) {
      try {
        re = re2ToRegExp(allowlist[n] as string);
      } catch (err) {
        if (err instanceof RegexpError) throw new CniError(ErrorCode.Internal, err.message);
        throw err;
      }
      compiled.set(n, re);
    }
    return re.test(key);
  };
  for (const key of keys) {
    if (!allowlist.some((_, n) => matches(n, key))) {
      throw new CniError(
        ErrorCode.Internal,
        `Sysctl ${key} is not allowed. Only the following sysctls are allowed: [${allowlist.join(' ')}]`,
      );
    }
  }
}
