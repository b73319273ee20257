/**
 * Network-namespace sandboxes for plugin tests (part of the public SDK).
 *
 * ```ts
 * import { withSandbox, diffSnapshots } from '@cnikit/testing';
 *
 * await withSandbox(async (sb) => {
 *   const before = sb.snapshot('host');
 *   sb.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);          // runs in the host netns
 *   const after = sb.snapshot('host');
 *   assert.deepEqual(diffSnapshots(before, after).map((d) => d.section), ['links']);
 * });
 * ```
 *
 * A sandbox is a pair of private named network namespaces, a "host" (plays the node's root
 * namespace: put bridges, host veths, iptables/nft rules here) and a "container" (pass its `path`
 * as CNI_NETNS). Both have `lo` up. They live under /run/netns as `cnikit-<role>-<pid>-<rand>`,
 * and `destroy()` removes them even after failures — it is idempotent and is also run for every
 * sandbox still alive when the process exits (or gets SIGINT/SIGTERM). Needs root.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import { type Sync, withNetns } from '@cnikit/netlink';
import { enterNetns, tempDir } from './cni.ts';
import { type Snapshot, type SnapshotOptions, snapshotNetns } from './snapshot.ts';
import { scaled } from './timescale.ts';

export interface NamedNetns {
  /** Name under /run/netns (usable with `ip netns exec` / `ip -n`). */
  name: string;
  /** `/run/netns/<name>`: what CNI_NETNS and withNetns take. */
  path: string;
}

export type SandboxRole = 'host' | 'container';

export interface ExecOptions {
  /** Which namespace (default `host`). */
  ns?: SandboxRole | NamedNetns;
  /** Text written to stdin. */
  input?: string;
  /** Extra environment variables (merged over process.env). */
  env?: Record<string, string | undefined>;
  /** Throw when the command exits non-zero (default true). */
  check?: boolean;
  /** Milliseconds before the command is killed (default 60 s). */
  timeoutMs?: number;
  /**
   * Start the command once from this thread switched into the namespace, instead of through `ip netns exec` (which
   * also gives the command a private mount namespace with /sys remounted for the namespace, at the cost of a second
   * process start: ~0.4 s under the kernel lab's TCG). For ip, tc, iptables, nft, which do not read /sys.
   */
  direct?: boolean;
}

export interface ExecResult {
  status: number;
  stdout: string;
  stderr: string;
}

export interface Sandbox {
  readonly host: NamedNetns;
  readonly container: NamedNetns;
  /** Every container namespace of the sandbox: `container` first, then those `newContainer()` added. */
  readonly containers: readonly NamedNetns[];
  /** One more container namespace (`lo` up), removed with the sandbox. */
  newContainer(): NamedNetns;
  /** Run `fn` synchronously with the calling thread inside the host namespace (withNetns). */
  runInHost<T>(fn: () => Sync<T>): T;
  /** Run `fn` synchronously with the calling thread inside the container namespace. */
  runInContainer<T>(fn: () => Sync<T>): T;
  /** Run a command inside a namespace (`ip netns exec <name> cmd args…`; no shell). */
  exec(cmd: string, args?: readonly string[], opts?: ExecOptions): ExecResult;
  /** Capture the kernel state of a namespace (default `host`), for before/after comparisons. */
  snapshot(ns?: SandboxRole | NamedNetns, opts?: SnapshotOptions): Snapshot;
  /** Remove both namespaces (idempotent; never throws for "already gone"). */
  destroy(): void;
  readonly destroyed: boolean;
}

const live = new Set<Sandbox>();
/** Temporary directories of sandboxForFile still in use: removed with the sandboxes when the process ends. */
const liveDirs = new Set<() => void>();
let hooksInstalled = false;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  const end = () => {
    destroyAllSandboxes();
    for (const remove of liveDirs) remove();
  };
  process.on('exit', end);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      end();
      process.kill(process.pid, sig);
    });
  }
}

/** Destroy every sandbox of this process that is still alive (also run automatically at exit). */
export function destroyAllSandboxes(): void {
  for (const sb of [...live]) {
    try {
      sb.destroy();
    } catch {
      // best effort at exit
    }
  }
}

function ip(args: string[], check = true): ExecResult {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: scaled(30_000) });
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    throw new Error(
      code === 'ENOENT' ? 'ip not found in PATH: install it (Debian package "iproute2")' : r.error.message,
    );
  }
  const res = { status: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
  if (check && res.status !== 0) throw new Error(`ip ${args.join(' ')} failed: ${res.stderr.trim()}`);
  return res;
}

/** A fresh named network namespace with `lo` up. */
export function createNamedNetns(prefix = 'cnikit-ns'): NamedNetns {
  if (!/^[A-Za-z0-9_.-]{1,40}$/.test(prefix))
    throw new TypeError(`invalid netns name prefix ${JSON.stringify(prefix)}`);
  const name = `${prefix}-${process.pid}-${randomBytes(3).toString('hex')}`;
  ip(['netns', 'add', name]);
  try {
    ip(['-n', name, 'link', 'set', 'lo', 'up']);
  } catch (e) {
    ip(['netns', 'del', name], false);
    throw e;
  }
  return { name, path: `/run/netns/${name}` };
}

/** Runs synchronous `fn` with `count` fresh named namespaces, removing them afterwards, also on failure. */
export function withNamedNetns<T>(count: number, fn: (...ns: NamedNetns[]) => T, prefix = 'cnikit-ns'): T {
  const made: NamedNetns[] = [];
  try {
    for (let i = 0; i < count; i++) made.push(createNamedNetns(prefix));
    return fn(...made);
  } finally {
    for (const ns of made) deleteNamedNetns(ns);
  }
}

/** Remove a named namespace; "already gone" is fine. */
export function deleteNamedNetns(ns: NamedNetns | string): void {
  const name = typeof ns === 'string' ? ns : ns.name;
  const r = ip(['netns', 'del', name], false);
  if (r.status !== 0 && !/No such file|Cannot remove namespace file/.test(r.stderr)) {
    throw new Error(`ip netns del ${name} failed: ${r.stderr.trim()}`);
  }
}

export interface SandboxOptions {
  /**
   * Start of the namespace names (default `cnikit`): `<prefix>-host-<pid>-<hex>`, `<prefix>-container-<pid>-<hex>`,
   * so a project's leftovers are recognisable. Letters, digits, `_`, `.`, `-`; at most 30 characters.
   */
  prefix?: string;
}

/** Create a sandbox: two private namespaces, "host" and "container". Remember to destroy() it. */
export function createSandbox(opts: SandboxOptions = {}): Sandbox {
  const prefix = opts.prefix ?? 'cnikit';
  if (!/^[A-Za-z0-9_.-]{1,30}$/.test(prefix))
    throw new TypeError(`invalid sandbox name prefix ${JSON.stringify(prefix)}`);
  installExitHooks();
  const host = createNamedNetns(`${prefix}-host`);
  let container: NamedNetns;
  try {
    container = createNamedNetns(`${prefix}-container`);
  } catch (e) {
    deleteNamedNetns(host);
    throw e;
  }
  let destroyed = false;
  const containers: NamedNetns[] = [container];
  const pick = (ns: SandboxRole | NamedNetns | undefined): NamedNetns =>
    ns === undefined || ns === 'host' ? host : ns === 'container' ? container : ns;
  const sb: Sandbox = {
    host,
    container,
    containers,
    newContainer() {
      if (destroyed) throw new Error('sandbox already destroyed');
      const ns = createNamedNetns(`${prefix}-container`);
      containers.push(ns);
      return ns;
    },
    get destroyed() {
      return destroyed;
    },
    runInHost: (fn) => withNetns(host.path, () => fn()),
    runInContainer: (fn) => withNetns(container.path, () => fn()),
    exec(cmd, args = [], opts = {}) {
      if (destroyed) throw new Error('sandbox already destroyed');
      const target = pick(opts.ns);
      const spawnOpts = {
        encoding: 'utf8',
        input: opts.input ?? '',
        env: { ...process.env, ...opts.env },
        timeout: scaled(opts.timeoutMs ?? 60_000),
        maxBuffer: 256 * 1024 * 1024,
      } as const;
      const r = opts.direct
        ? withNetns(target.path, () => spawnSync(cmd, args, spawnOpts))
        : spawnSync('ip', ['netns', 'exec', target.name, cmd, ...args], spawnOpts);
      if (r.error) throw r.error;
      const res = { status: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
      if ((opts.check ?? true) && res.status !== 0) {
        throw new Error(
          `${cmd} ${args.join(' ')} (in ${target.name}) exited ${res.status}: ${res.stderr.trim()}`,
        );
      }
      return res;
    },
    snapshot(ns, opts) {
      if (destroyed) throw new Error('sandbox already destroyed');
      return snapshotNetns(pick(ns).path, opts);
    },
    destroy() {
      if (destroyed) return;
      const errors: string[] = [];
      for (const ns of [...containers, host]) {
        try {
          deleteNamedNetns(ns);
        } catch (e) {
          errors.push((e as Error).message);
        }
      }
      destroyed = true;
      live.delete(sb);
      if (errors.length) throw new Error(errors.join('\n'));
    },
  };
  live.add(sb);
  return sb;
}

/**
 * Run `fn` with a fresh sandbox and destroy it afterwards, whether `fn` succeeds or fails. `enterHost` moves the
 * calling (main) thread into the sandbox's host namespace for the duration of `fn` (see `sandboxForFile`).
 */
export async function withSandbox<T>(
  fn: (sb: Sandbox) => T | Promise<T>,
  opts: { enterHost?: boolean } & SandboxOptions = {},
): Promise<T> {
  const sb = createSandbox(opts);
  try {
    const inHost = opts.enterHost ? enterNetns(sb.host.path) : undefined;
    try {
      return await fn(sb);
    } finally {
      inHost?.restore();
    }
  } finally {
    sb.destroy();
  }
}

/**
 * The sandbox of one test file, as node:test hooks: `before` creates it and, with `enterHost`, moves the file's
 * main thread into its host namespace (in-process plugin calls and every program they spawn then run there, like
 * a plugin on a node); `after` moves the thread back and destroys the sandbox, also when tests failed.
 *
 * `containers: n` creates n container namespaces up front (`sb.containers`); `dir` is a private temporary
 * directory (e.g. an IPAM dataDir) removed in `after` (or with the namespaces if the process ends first).
 *
 * ```ts
 * const env = sandboxForFile({ enterHost: true, containers: 2 });
 * test('…', async () => { env.sb.exec('ip', ['link']); cni.add(conf, { netns: env.sb.containers[1]!.path }); });
 * ```
 */
export function sandboxForFile(opts: { enterHost?: boolean; containers?: number } & SandboxOptions = {}): {
  readonly sb: Sandbox;
  readonly dir: string;
} {
  let sb: Sandbox | undefined;
  let inHost: { restore(): void } | undefined;
  let dir: ReturnType<typeof tempDir> | undefined;
  before(() => {
    sb = createSandbox(opts);
    for (let i = 1; i < (opts.containers ?? 1); i++) sb.newContainer();
    dir = tempDir('sandbox');
    liveDirs.add(dir.remove);
    if (opts.enterHost) inHost = enterNetns(sb.host.path);
  });
  after(() => {
    try {
      inHost?.restore();
    } finally {
      if (dir) liveDirs.delete(dir.remove);
      dir?.remove();
      sb?.destroy();
    }
  });
  const alive = <T>(v: T | undefined): T => {
    if (v === undefined)
      throw new Error("sandboxForFile: the sandbox exists only while the file's tests run");
    return v;
  };
  return {
    get sb(): Sandbox {
      return alive(sb);
    },
    get dir(): string {
      return alive(dir).path;
    },
  };
}
