/**
 * Out-of-process helpers for the host-local tests and benchmark: how to run our host-local as a separate
 * process (the built multicall binary `dist-bin/host-local` when present, else an esbuild bundle of
 * src/run.ts run by node, else node + tsx), and the Go reference when installed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../../..');
export const GO_HOST_LOCAL = '/usr/lib/cni/host-local';
export const NATIVE_ADDON = join(repoRoot, 'packages/sys/build/Release/cnikit_sys.node');

export interface Cmd {
  /** What it is, for messages: 'binary' | 'bundle' | 'tsx' | 'go'. */
  kind: string;
  file: string;
  args: string[];
  env: Record<string, string>;
}

let cached: Cmd | undefined;

/** Our host-local as an executable command (binary > bundle > tsx). */
export function ourHostLocal(): Cmd {
  if (cached) return cached;
  const bin = join(repoRoot, 'dist-bin/host-local');
  if (existsSync(bin) && process.env.CNIKIT_TEST_NO_BINARY !== '1') {
    cached = { kind: 'binary', file: bin, args: [], env: {} };
    return cached;
  }
  const out = join(mkdtempSync(join(tmpdir(), 'cnikit-hl-bundle-')), 'host-local.mjs');
  const esbuild = join(repoRoot, 'node_modules/.bin/esbuild');
  const r = spawnSync(
    esbuild,
    [
      join(here, 'run.ts'),
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      `--outfile=${out}`,
      '--log-level=error',
      '--banner:js=import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);',
    ],
    { cwd: repoRoot, encoding: 'utf8' },
  );
  if (r.status === 0 && existsSync(out)) {
    cached = {
      kind: 'bundle',
      file: process.execPath,
      args: [out],
      env: { CNIKIT_NATIVE_PATH: NATIVE_ADDON },
    };
  } else {
    cached = {
      kind: 'tsx',
      file: process.execPath,
      args: ['--import', 'tsx', join(here, 'run.ts')],
      env: {},
    };
  }
  return cached;
}

export function goHostLocal(): Cmd | undefined {
  return existsSync(GO_HOST_LOCAL) ? { kind: 'go', file: GO_HOST_LOCAL, args: [], env: {} } : undefined;
}

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function cniEnv(command: string, id: string, ifname = 'eth0', extra: Record<string, string> = {}) {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: '/var/run/netns/none',
    CNI_IFNAME: ifname,
    CNI_PATH: '/usr/lib/cni',
    ...extra,
  };
}

/** Run a command asynchronously with the given env and stdin. `killAfterMs` sends SIGKILL after that delay. */
export function exec(
  cmd: Cmd,
  env: Record<string, string>,
  stdin: string,
  killAfterMs?: number,
): Promise<ExecResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd.file, cmd.args, { env: { ...env, ...cmd.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    let timer: NodeJS.Timeout | undefined;
    if (killAfterMs !== undefined) timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}

/** Synchronous variant (benchmarks). */
export function execSync(cmd: Cmd, env: Record<string, string>, stdin: string): ExecResult {
  const r = spawnSync(cmd.file, cmd.args, { env: { ...env, ...cmd.env }, input: stdin, encoding: 'utf8' });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}
