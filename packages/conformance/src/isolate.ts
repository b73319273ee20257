/**
 * The kit's private mount namespace: plugins keep state under /var/lib/cni, and the kit must neither read nor change
 * the machine's. The kit runs itself again under `unshare --mount --propagation private` (util-linux), and in there
 * mounts a fresh directory on /var/lib/cni (when the machine has none, on /var/lib, which then holds only that
 * directory — in this mount namespace only) and another on /run/cni (daemon sockets). Every process the kit starts inherits the namespace; the machine's
 * mounts and files are never touched, and the namespace ends with the kit.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Set in the re-run kit: the mount namespace it must be in (the inode, as /proc/self/ns/mnt reads). */
export const ISOLATED_ENV = 'CNIKIT_CONFORMANCE_MNTNS';

function mountNs(pid: string | number = 'self'): string {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return '';
  }
}

/** True when this process runs in the private mount namespace a parent kit created for it. */
export function isIsolated(env: NodeJS.ProcessEnv = process.env): boolean {
  const want = env[ISOLATED_ENV];
  return !!want && want === mountNs() && mountNs() !== mountNs(1);
}

/**
 * Run `cmd args` in a new private mount namespace with ISOLATED_ENV set (the child checks it with isIsolated after
 * calling `privateStateDir`). Resolves to the exit code.
 */
export function runIsolated(
  cmd: string,
  args: readonly string[],
  opts: { stdio?: 'inherit' | 'pipe'; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', cmd, ...args], {
      stdio: opts.stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : 'inherit',
      env: { ...(opts.env ?? process.env), [ISOLATED_ENV]: 'pending' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) =>
      reject(
        (e as NodeJS.ErrnoException).code === 'ENOENT'
          ? new Error('unshare not found: install util-linux (the kit needs a private mount namespace)')
          : e,
      ),
    );
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}

/**
 * In the new mount namespace (ISOLATED_ENV is `pending`): mount a private directory on /var/lib/cni. Returns the
 * directory and a cleanup. Throws when this process is not in a mount namespace of its own.
 */
export function privateStateDir(env: NodeJS.ProcessEnv = process.env): { dir: string; cleanup(): void } {
  if (env[ISOLATED_ENV] !== 'pending' || mountNs() === mountNs(1) || !mountNs())
    throw new Error('not in a private mount namespace (run through `cnikit conformance`)');
  const base = mkdtempSync(join(tmpdir(), 'cnikit-conformance-state-'));
  const mount = (args: string[]) => {
    const r = spawnSync('mount', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount ${args.join(' ')} failed: ${r.stderr || r.error?.message}`);
  };
  if (existsSync('/var/lib/cni')) {
    mount(['--bind', base, '/var/lib/cni']);
  } else {
    mkdirSync(join(base, 'cni'));
    mount(['--bind', base, '/var/lib']);
  }
  // /run/cni too: daemons' sockets (dhcp's /run/cni/dhcp.sock) are the kit's own, never a daemon of the machine's,
  // and two kits can run daemons side by side (the directory is made on the machine when missing, empty)
  const run = mkdtempSync(join(tmpdir(), 'cnikit-conformance-run-'));
  mkdirSync('/run/cni', { recursive: true });
  mount(['--bind', run, '/run/cni']);
  env[ISOLATED_ENV] = mountNs();
  return {
    dir: '/var/lib/cni',
    cleanup() {
      rmSync(base, { recursive: true, force: true });
      rmSync(run, { recursive: true, force: true });
    },
  };
}
