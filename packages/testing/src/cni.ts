/**
 * The one plugin-test fixture (Go's testutils.CmdAdd/CmdDel/CmdCheck + NewNS): run a CNI verb against a plugin
 * object in-process or against a compiled executable, with a typed environment, and inspect the outcome.
 *
 * ```ts
 * const cni = cniRunner(plugin, { netns: sb.container.path, path: '/usr/lib/cni' });
 * const r = await cni.add(conf);                     // { code, stdout, stderr, json }
 * expectCniError(await cni.add(bad), 7, /missing/);  // asserts one spec error object
 * const bin = cniRunner({ binary: 'dist-bin/tuning' }, { netns: … });   // same calls through the executable
 * const src = cniRunner({ source: 'plugins/bridge/src/index.ts' });      // a process running the plugin from source
 * ```
 *
 * Process targets (`binary`, `source`) run asynchronously, so calls can overlap (`Promise.all`); each child inherits
 * the network namespace of the calling (main) thread, e.g. a sandbox's host entered with `enterNetns`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { type AnyPlugin, invokeInProcess, type Result } from '@cnikit/skel';
import { setns } from '@cnikit/sys';
import { scaled } from './timescale.ts';

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';

export interface CniCallOptions {
  /** CNI_CONTAINERID (default `ctr1`). */
  containerId?: string;
  /** CNI_NETNS (default empty). */
  netns?: string;
  /** CNI_IFNAME (default `eth0`). */
  ifName?: string;
  /** CNI_ARGS (unset by default). */
  args?: string;
  /** CNI_PATH (default `/usr/lib/cni`). */
  path?: string;
  /** Extra variables, applied last (a value of `undefined` removes the variable). */
  env?: Record<string, string | undefined>;
  /** Binary targets only: run the executable inside this named namespace (`ip netns exec`). */
  inNetns?: string;
  /** Process targets only: milliseconds before the process is killed with SIGKILL (default 60 s; scaled: {@link scaled}). */
  timeoutMs?: number;
  /**
   * Process targets only: a start barrier shared by `count` processes, so that concurrent calls really overlap:
   * every process waits, before reading its request, until all `count` have started (files in the directory
   * `dir`, which must exist). Needs a `source` target (the executable has no barrier).
   */
  barrier?: { dir: string; count: number };
}

export interface CniOutcome {
  /** Exit code (0 = success; 128 + n when killed by signal n, which is then in `signal`). */
  code: number;
  /** Process targets: the signal that ended the process, else null. */
  signal?: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, or undefined when empty. */
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
  json: any;
}

/** The CNI_* environment of one call. GC, STATUS and VERSION get only CNI_COMMAND and CNI_PATH, like a runtime sends. */
export function cniEnv(command: CniCommand, o: CniCallOptions = {}): Record<string, string> {
  const env: Record<string, string> = { CNI_COMMAND: command, CNI_PATH: o.path ?? '/usr/lib/cni' };
  if (command === 'ADD' || command === 'DEL' || command === 'CHECK') {
    env.CNI_CONTAINERID = o.containerId ?? 'ctr1';
    env.CNI_NETNS = o.netns ?? '';
    env.CNI_IFNAME = o.ifName ?? 'eth0';
    if (o.args !== undefined) env.CNI_ARGS = o.args;
  }
  for (const [k, v] of Object.entries(o.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

function outcome(code: number, stdout: string, stderr: string, signal?: NodeJS.Signals | null): CniOutcome {
  let json: unknown;
  if (stdout.trim()) {
    try {
      json = JSON.parse(stdout);
    } catch {
      json = undefined;
    }
  }
  return signal === undefined ? { code, stdout, stderr, json } : { code, stdout, stderr, json, signal };
}

/**
 * What a call runs: a plugin object (in-process through skel's dispatcher), a compiled executable (argv0 = its
 * path; also the Go reference plugins; `args` for a wrapper such as `unshare … <plugin>`), or a process running a plugin from source: `source` is a module path
 * (absolute, or relative to the working directory) whose export `exportName` (default `plugin`) is the Plugin —
 * node + tsx with the cnikit-source condition, through this package's plugin-main.ts.
 */
export type CniTarget =
  | AnyPlugin
  | { binary: string; args?: readonly string[] }
  | { source: string; exportName?: string };

// resolved when a source target runs (not at import: a bundle, e.g. `cnikit conformance`, has no import.meta.dirname)
const pluginMain = () => join(import.meta.dirname, 'plugin-main.ts');
const SIGNALS: Partial<Record<NodeJS.Signals, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGABRT: 6 };

function processCommand(
  target: { binary: string; args?: readonly string[] } | { source: string; exportName?: string },
  o: CniCallOptions,
): { cmd: string; args: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  let cmd: string;
  let args: string[];
  if ('binary' in target) {
    if (o.barrier) throw new TypeError('cniCall: a start barrier needs a source target');
    [cmd, args] = [target.binary, [...(target.args ?? [])]];
  } else {
    const mod = isAbsolute(target.source) ? target.source : resolve(target.source);
    [cmd, args] = [process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', pluginMain()]];
    env.CNIKIT_TEST_PLUGIN_MODULE = mod;
    env.CNIKIT_TEST_PLUGIN_EXPORT = target.exportName ?? 'plugin';
    if (o.barrier) env.CNIKIT_TEST_BARRIER = `${o.barrier.count}:${o.barrier.dir}`;
  }
  if (o.inNetns) [cmd, args] = ['ip', ['netns', 'exec', o.inNetns, cmd, ...args]];
  return { cmd, args, env };
}

function runProcess(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  stdin: string,
  timeoutMs: number,
): Promise<CniOutcome> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', fail);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done(outcome(code ?? 128 + (signal ? (SIGNALS[signal] ?? 0) : 0), stdout, stderr, signal));
    });
    child.stdin.on('error', () => {}); // a plugin that exits without reading stdin
    child.stdin.end(stdin);
  });
}

export interface CniRunner {
  call(command: CniCommand, conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  add(conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  del(conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  check(conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  gc(conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  status(conf: unknown, o?: CniCallOptions): Promise<CniOutcome>;
  version(o?: CniCallOptions): Promise<CniOutcome>;
}

/** Run one verb. `conf` is an object (serialised) or the exact stdin text. */
export async function cniCall(
  target: CniTarget,
  command: CniCommand,
  conf: unknown,
  o: CniCallOptions = {},
): Promise<CniOutcome> {
  const stdin = typeof conf === 'string' ? conf : conf === undefined ? '' : JSON.stringify(conf);
  const env = cniEnv(command, o);
  if (!('binary' in target) && !('source' in target)) {
    const r = await invokeInProcess(target, env, stdin);
    return outcome(r.code, r.stdout, r.stderr);
  }
  const p = processCommand(target, o);
  const fullEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...p.env, ...env };
  return runProcess(p.cmd, p.args, fullEnv, stdin, scaled(o.timeoutMs ?? 60_000));
}

/** A runner bound to one target with default call options (each call may override them). */
export function cniRunner(target: CniTarget, defaults: CniCallOptions = {}): CniRunner {
  const call = (command: CniCommand, conf: unknown, o: CniCallOptions = {}) =>
    cniCall(target, command, conf, { ...defaults, ...o, env: { ...defaults.env, ...o.env } });
  return {
    call,
    add: (conf, o) => call('ADD', conf, o),
    del: (conf, o) => call('DEL', conf, o),
    check: (conf, o) => call('CHECK', conf, o),
    gc: (conf, o) => call('GC', conf, o),
    status: (conf, o) => call('STATUS', conf, o),
    version: (o) => call('VERSION', '', o),
  };
}

/**
 * Assert a successful call and return its parsed stdout, typed as a current (1.x) result unless you name another
 * type (`expectOk<VersionInfo>(r)`, `expectOk<Result020>(r)`); undefined when the verb prints nothing (DEL, CHECK).
 */
export function expectOk<T = Result>(r: CniOutcome, what = 'CNI call'): T {
  assert.equal(r.code, 0, `${what} failed (exit ${r.code}): ${r.stdout}${r.stderr}`);
  return r.json as T;
}

/**
 * Assert that a call failed with exactly one spec error object on stdout (code, msg[, details]) and no stack
 * trace, optionally with this code and a msg equal to / matching `msg`. Returns the error object.
 */
export function expectCniError(
  r: CniOutcome,
  code?: number,
  msg?: string | RegExp,
): { code: number; msg: string; details?: string } {
  assert.notEqual(r.code, 0, `expected a CNI error, got success: ${r.stdout}`);
  assert.ok(
    r.json && typeof r.json === 'object',
    `stdout is not one JSON error object: ${JSON.stringify(r.stdout)}`,
  );
  const e = r.json as { code: number; msg: string; details?: string };
  assert.deepEqual(
    Object.keys(e).filter((k) => !['code', 'msg', 'details'].includes(k)),
    [],
    'error object has only code/msg/details',
  );
  assert.equal(typeof e.code, 'number');
  assert.equal(typeof e.msg, 'string');
  assert.doesNotMatch(r.stdout, /\n\s+at .+\(.*:\d+:\d+\)/, 'no stack trace on stdout');
  if (code !== undefined) assert.equal(e.code, code, `error code (msg: ${e.msg})`);
  if (typeof msg === 'string') assert.equal(e.msg, msg);
  else if (msg) assert.match(e.msg, msg);
  return e;
}

/** Await `fn` and return what it threw; fails when it did not throw. */
export async function catchError<E = Error>(fn: () => unknown): Promise<E> {
  try {
    await fn();
  } catch (err) {
    return err as E;
  }
  assert.fail('expected an error, none was thrown');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Poll `cond` every 50 ms for up to `ms` ({@link scaled}); fail with `what` if it never holds (asynchronous
 * kernel work).
 */
export async function eventually(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const wait = scaled(ms);
  for (const end = Date.now() + wait; !cond(); await sleep(50)) {
    if (Date.now() > end) assert.fail(`${what} (waited ${wait / 1000} s)`);
  }
}

/**
 * Move the calling thread (the test's main thread) into a namespace until `restore()`: in-process plugin
 * calls are async, so they cannot run inside `withNetns`; a test file enters its private "host" namespace
 * this way (child processes spawned meanwhile inherit it). `restore()` is idempotent.
 */
export function enterNetns(path: string): { restore(): void } {
  const orig = openSync('/proc/thread-self/ns/net', 'r');
  try {
    const fd = openSync(path, 'r');
    try {
      setns(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    closeSync(orig);
    throw err;
  }
  let done = false;
  return {
    restore() {
      if (done) return;
      done = true;
      try {
        setns(orig);
      } finally {
        closeSync(orig);
      }
    },
  };
}

/** A temporary directory removed on dispose (`using dir = tempDir('tag')`) or by `remove()`. */
export function tempDir(tag = 'test'): { path: string; remove(): void; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), `cnikit-${tag}-`));
  const remove = () => rmSync(path, { recursive: true, force: true });
  return { path, remove, [Symbol.dispose]: remove };
}
