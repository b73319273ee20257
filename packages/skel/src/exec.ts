/**
 * Running one plugin file, the caller side of the protocol as Go's `pkg/invoke` does it (no registry, no state):
 * `findInPath` (Go `FindInPath`), `spawnPlugin` (one `RawExec.ExecPlugin` attempt: env + stdin, exit status and
 * signals worded like Go), `pluginErr` (a failed plugin's error object, parsed like Go), `parseDelegateResult`
 * (`ExecPluginWithResult`'s result handling) and `decodeVersionInfo` (`GetVersionInfo`'s decoding). The `Invoker`
 * (./invoke.ts) puts them together with the in-process registry and the retries.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { CniError, ErrorCode } from './errors.ts';
import { concatBytes } from './fdio.ts';
import { configVersion, goKind, parseJsonGo } from './gojson.ts';
import { parseResult, toCurrent } from './result.ts';
import { foldKey } from './schema.ts';
import { CURRENT_VERSION as CURRENT, type Result } from './types.ts';
import { goQuote } from './version.ts';

let execStat: { dev: bigint; ino: bigint } | null | undefined;

/** Default same-executable check: same dev+inode as process.execPath. */
export function isRunningExecutable(path: string): boolean {
  if (execStat === undefined) {
    try {
      execStat = statSync(process.execPath, { bigint: true });
    } catch {
      execStat = null;
    }
  }
  if (!execStat) return false;
  try {
    const st = statSync(path, { bigint: true });
    return st.dev === execStat.dev && st.ino === execStat.ino;
  } catch {
    return false;
  }
}

/** Go `invoke.FindInPath`: the first `<dir>/<plugin>` that is a regular file. Throws plain Errors. */
export function findInPath(plugin: string, paths: readonly string[]): string {
  if (plugin === '') throw new Error('no plugin name provided');
  if (plugin.includes('/')) throw new Error(`invalid plugin name: ${plugin}`);
  if (paths.length === 0) throw new Error('no paths provided');
  for (const dir of paths) {
    const full = join(dir, plugin);
    try {
      if (statSync(full).isFile()) return full;
    } catch {
      // not here
    }
  }
  throw new Error(`failed to find plugin ${goQuote(plugin)} in path [${paths.join(' ')}]`);
}

/** Go `filepath.SplitList`: '' → []. */
export function splitPathList(value: string | undefined): string[] {
  return value ? value.split(':') : [];
}

const SIGNALS: Record<string, string> = {
  SIGKILL: 'killed',
  SIGTERM: 'terminated',
  SIGSEGV: 'segmentation fault',
  SIGABRT: 'aborted',
  SIGINT: 'interrupt',
  SIGHUP: 'hangup',
  SIGPIPE: 'broken pipe',
  SIGBUS: 'bus error',
  SIGILL: 'illegal instruction',
  SIGQUIT: 'quit',
};

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  ENOEXEC: 'exec format error',
  ETXTBSY: 'text file busy',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
};

export const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

/** Build the error a failed delegate surfaces as (Go `RawExec.pluginErr`). */
export function pluginErr(errText: string, stdout: Uint8Array, stderr: Uint8Array): CniError {
  if (stdout.length === 0) {
    if (stderr.length === 0)
      return new CniError(ErrorCode.Unknown, `netplugin failed with no error message: ${errText}`);
    return new CniError(
      ErrorCode.Unknown,
      `netplugin failed: ${goQuote(decoder.decode(stderr))}: ${errText}`,
    );
  }
  const text = decoder.decode(stdout);
  const bad = (why: string) =>
    new CniError(
      ErrorCode.Unknown,
      `netplugin failed but error parsing its diagnostic message ${goQuote(text)}: ${why}`,
    );
  const parsed = parseJsonGo(stdout, text);
  if (!parsed.ok) return bad(parsed.error);
  const json = parsed.value;
  if (json === null) return new CniError(ErrorCode.Unknown, '');
  if (typeof json !== 'object' || Array.isArray(json)) {
    return bad(`json: cannot unmarshal ${goKind(json)} into Go value of type types.Error`);
  }
  let code = 0;
  let msg = '';
  let details = '';
  for (const [k, v] of Object.entries(json as Record<string, unknown>)) {
    if (v === null) continue;
    const f = foldKey(k);
    if (f === 'code') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
        return bad(
          `json: cannot unmarshal ${typeof v === 'number' ? `number ${v}` : goKind(v)} into Go struct field Error.code of type uint`,
        );
      }
      code = v;
    } else if (f === 'msg' || f === 'details') {
      if (typeof v !== 'string')
        return bad(`json: cannot unmarshal ${goKind(v)} into Go struct field Error.${f} of type string`);
      if (f === 'msg') msg = v;
      else details = v;
    }
  }
  return new CniError(code, msg, details);
}

export interface RawOutcome {
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** Go's error text when the plugin failed (`exit status 1`), else undefined. */
  failure?: string;
}

/** One attempt at running the plugin file (`busy`: exec failed with "text file busy", worth a retry). */
export async function spawnPlugin(
  path: string,
  stdin: Uint8Array,
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<RawOutcome & { busy?: boolean }> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    let settled = false;
    const fail = (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      const text = (e.code && ERRNO_TEXT[e.code]) ?? e.message;
      resolve({
        stdout: concatBytes(out),
        stderr: concatBytes(err),
        failure: `fork/exec ${path}: ${text}`,
        busy: e.code === 'ETXTBSY',
      });
    };
    let child: ReturnType<typeof spawn>;
    try {
      // some exec failures (ETXTBSY, EACCES) are thrown synchronously by Node
      // like Go's exec.CommandContext: an abort kills the plugin (SIGKILL)
      child = spawn(path, [], {
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
        ...(signal ? { signal, killSignal: 'SIGKILL' } : {}),
      });
    } catch (e) {
      fail(e as NodeJS.ErrnoException);
      return;
    }
    child.stdout!.on('data', (d: Uint8Array) => out.push(d));
    child.stderr!.on('data', (d: Uint8Array) => err.push(d));
    child.stdin!.on('error', () => undefined); // the delegate may not read stdin (EPIPE)
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.name === 'AbortError') return; // reported by 'close' as "signal: killed", like Go
      fail(e);
    });
    child.on('close', (code, signal) => {
      if (settled) return;
      settled = true;
      const failure =
        code === 0 ? undefined : signal ? `signal: ${SIGNALS[signal] ?? signal}` : `exit status ${code ?? 1}`;
      resolve({ stdout: concatBytes(out), stderr: concatBytes(err), ...(failure ? { failure } : {}) });
    });
    child.stdin!.end(stdin);
  });
}

function configVersionOf(stdin: Uint8Array): string {
  const parsed = parseJsonGo(stdin);
  if (!parsed.ok) throw new Error(`decoding version from network config: ${parsed.error}`);
  const json = parsed.value;
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return '0.1.0';
  return configVersion(json as Record<string, unknown>, (kind) => {
    throw new Error(
      `decoding version from network config: json: cannot unmarshal ${kind} into Go struct field .cniVersion of type string`,
    );
  });
}

/** Parse a delegate's ADD output like Go `ExecPluginWithResult` and convert it to the current shape. */
export function parseDelegateResult(stdout: Uint8Array, netconf: Uint8Array): Result {
  const confVersion = configVersionOf(netconf);
  const parsed = parseJsonGo(stdout);
  if (!parsed.ok) throw new Error(`failed to unmarshal raw result: ${parsed.error}`);
  let raw = parsed.value;
  if (raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error(
      `failed to unmarshal raw result: json: cannot unmarshal ${goKind(raw)} into Go value of type map[string]interface {}`,
    );
  }
  const rec = { ...(raw as Record<string, unknown>) };
  let version = confVersion;
  if (typeof rec.cniVersion === 'string' && rec.cniVersion !== '') version = rec.cniVersion;
  else rec.cniVersion = confVersion;
  return toCurrent(parseResult(rec, version));
}

export interface VersionInfo {
  cniVersion: string;
  supportedVersions: string[];
}

/**
 * Decode a VERSION answer like Go `invoke.GetVersionInfo` (`version.PluginDecoder`): an answer without
 * `supportedVersions` is accepted only for cniVersion 0.2.0 (→ 0.1.0, 0.2.0).
 */
export function decodeVersionInfo(out: Uint8Array): VersionInfo {
  const parsed = parseJsonGo(out);
  if (!parsed.ok) throw new Error(`decoding version info: ${parsed.error}`);
  const raw = parsed.value;
  let cniVersion = '';
  let supported: string[] = [];
  if (raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new Error(
      `decoding version info: json: cannot unmarshal ${goKind(raw)} into Go value of type version.pluginInfo`,
    );
  }
  for (const [k, v] of Object.entries((raw ?? {}) as Record<string, unknown>)) {
    if (v === null) continue;
    const f = foldKey(k);
    if (f === 'cniversion') {
      if (typeof v !== 'string') {
        throw new Error(
          `decoding version info: json: cannot unmarshal ${goKind(v)} into Go struct field pluginInfo.cniVersion of type string`,
        );
      }
      cniVersion = v;
    } else if (f === 'supportedversions') {
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' && x !== null)) {
        throw new Error(
          `decoding version info: json: cannot unmarshal ${goKind(v)} into Go struct field pluginInfo.supportedVersions of type []string`,
        );
      }
      supported = v.map((x) => (x === null ? '' : (x as string)));
    }
  }
  if (cniVersion === '') throw new Error('decoding version info: missing field cniVersion');
  if (supported.length === 0) {
    if (cniVersion === '0.2.0') return { cniVersion: CURRENT, supportedVersions: ['0.1.0', '0.2.0'] };
    throw new Error('decoding version info: missing field supportedVersions');
  }
  return { cniVersion, supportedVersions: supported };
}
