/**
 * A private Kubernetes "node" for the end-to-end test: Debian's containerd (1.6, CRI plugin) started by the test with
 * its own root, state, socket and config, inside a private network namespace and a private mount namespace. The
 * mount namespace gets a tmpfs on /run (pod netns mounts, shim sockets, /run/cnikit, the xtables lock) and the
 * scratch tree's var/lib/cni bound on /var/lib/cni, so the plugins' state (host-local reservations, containerd's
 * CNI result cache) lands in the scratch tree: the machine's containerd, network namespace, /etc/cni, /var/lib/cni
 * and /run are never touched. A second private network namespace ("client") is joined to the node by a veth pair
 * (node eth0 192.168.77.1/24, client 192.168.77.2/24): hostPort traffic comes from there, as from another machine.
 * Everything runs as argument arrays (no shell); stop() ends only the processes this node started.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { sleep } from '@cnikit/testing';
import { containerdConfig } from '../../scripts/k8s/containerd.ts';
import { type CriClient, criClient } from './cri.ts';

export { buildPauseImage, SANDBOX_IMAGE } from '../../scripts/k8s/images.ts';

export const NODE_IP = '192.168.77.1';
export const CLIENT_IP = '192.168.77.2';
/**
 * The cgroup parent runc puts this run's sandboxes under: one per test process, because stop() kills every process
 * under it and removes it, which must not reach the pods of another run on the same machine.
 */
export const CGROUP_PARENT = `/cnikit-k8s-e2e-${process.pid}`;

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], timeout = 60_000): RunResult {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function must(cmd: string, args: string[], timeout?: number): string {
  const r = run(cmd, args, timeout);
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A process holding fresh namespaces (`unshare … sleep`): its pid names them for nsenter. */
async function holder(unshareArgs: string[]): Promise<ChildProcess> {
  const p = spawn('unshare', [...unshareArgs, 'sleep', '86400'], { stdio: 'ignore' });
  const self = readlinkNs(process.pid, 'net');
  for (let i = 0; i < 200; i++) {
    if (p.exitCode !== null) throw new Error(`unshare ${unshareArgs.join(' ')} exited ${p.exitCode}`);
    try {
      const comm = readFileSync(`/proc/${p.pid}/comm`, 'utf8').trim();
      if (comm === 'sleep' && readlinkNs(p.pid as number, 'net') !== self) return p;
    } catch {
      // not there yet
    }
    await sleep(10);
  }
  p.kill('SIGKILL');
  throw new Error('the namespace holder did not start');
}

function readlinkNs(pid: number, ns: string): string {
  return spawnSync('readlink', [`/proc/${pid}/ns/${ns}`], { encoding: 'utf8' }).stdout.trim();
}

/** Paths of the node's scratch tree (the "host" filesystem the DaemonSet would see through hostPath volumes). */
export interface NodePaths {
  root: string;
  binDir: string;
  confDir: string;
  varLibCni: string;
  containerdRoot: string;
  containerdState: string;
  socket: string;
  config: string;
  log: string;
}

export function nodePaths(root: string): NodePaths {
  return {
    root,
    binDir: join(root, 'host', 'opt', 'cni', 'bin'),
    confDir: join(root, 'host', 'etc', 'cni', 'net.d'),
    varLibCni: join(root, 'host', 'var', 'lib', 'cni'),
    containerdRoot: join(root, 'containerd', 'root'),
    containerdState: join(root, 'containerd', 'state'),
    socket: join(root, 'containerd', 'containerd.sock'),
    config: join(root, 'containerd', 'config.toml'),
    log: join(root, 'containerd', 'containerd.log'),
  };
}

/** A running private node: namespaces, containerd, optionally `cnikit serve`; stop() tears all of it down. */
export class PrivateNode {
  readonly paths: NodePaths;
  private nodeNs?: ChildProcess;
  private clientNs?: ChildProcess;
  private containerd?: ChildProcess;
  private serveProc?: ChildProcess;
  private criConn?: CriClient;

  constructor(root: string) {
    this.paths = nodePaths(root);
  }

  get pid(): number {
    assert.ok(this.nodeNs?.pid, 'node not started');
    return this.nodeNs.pid;
  }

  get clientPid(): number {
    assert.ok(this.clientNs?.pid, 'node not started');
    return this.clientNs.pid;
  }

  /** The node's network namespace, for snapshotNetns(). */
  get netnsPath(): string {
    return `/proc/${this.pid}/ns/net`;
  }

  /** A path of the node's private mount namespace (e.g. /run/cnikit/cnikit.sock on its tmpfs), seen from here. */
  nodeFsPath(path: string): string {
    return `/proc/${this.pid}/root${path}`;
  }

  get cri(): CriClient {
    assert.ok(this.criConn, 'containerd not started');
    return this.criConn;
  }

  /** Run a command in the node's network and mount namespaces. */
  exec(cmd: string, args: string[], timeout?: number): RunResult {
    return run('nsenter', ['-t', String(this.pid), '-n', '-m', '--', cmd, ...args], timeout);
  }

  execOk(cmd: string, args: string[], timeout?: number): string {
    return must('nsenter', ['-t', String(this.pid), '-n', '-m', '--', cmd, ...args], timeout);
  }

  /** Run a command in the client machine's network namespace. */
  clientExec(cmd: string, args: string[], timeout?: number): RunResult {
    return run('nsenter', ['-t', String(this.clientPid), '-n', '--', cmd, ...args], timeout);
  }

  /** Namespaces, mounts, the client link and containerd with the sandbox image (and `images`) imported. */
  async start(pauseArchive: string, images: string[] = []): Promise<void> {
    const p = this.paths;
    for (const d of [p.binDir, p.confDir, p.varLibCni, p.containerdRoot, p.containerdState]) {
      mkdirSync(d, { recursive: true });
    }
    this.nodeNs = await holder(['--net', '--mount', '--propagation', 'private']);
    const pid = String(this.pid);
    must('nsenter', [
      '-t',
      pid,
      '-m',
      '--',
      'mount',
      '-t',
      'tmpfs',
      '-o',
      'mode=755',
      'cnikit-k8s-run',
      '/run',
    ]);
    if (!existsSync('/var/lib/cni')) {
      // a machine without it (no CNI plugin ever ran): a private tmpfs /var/lib holds the mount point instead of
      // creating the directory on the machine
      must('nsenter', ['-t', pid, '-m', '--', 'mount', '-t', 'tmpfs', 'cnikit-k8s-var-lib', '/var/lib']);
      must('nsenter', ['-t', pid, '-m', '--', 'mkdir', '/var/lib/cni']);
    }
    must('nsenter', ['-t', pid, '-m', '--', 'mount', '--bind', p.varLibCni, '/var/lib/cni']);
    this.execOk('ip', ['link', 'set', 'lo', 'up']);
    this.clientNs = await holder(['--net']);
    this.execOk('ip', [
      'link',
      'add',
      'eth0',
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      String(this.clientPid),
    ]);
    this.execOk('ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
    this.execOk('ip', ['link', 'set', 'eth0', 'up']);
    for (const args of [
      ['link', 'set', 'lo', 'up'],
      ['addr', 'add', `${CLIENT_IP}/24`, 'dev', 'eth0'],
      ['link', 'set', 'eth0', 'up'],
    ]) {
      const r = this.clientExec('ip', args);
      assert.equal(r.status, 0, r.stderr);
    }
    writeFileSync(
      p.config,
      containerdConfig({
        root: p.containerdRoot,
        state: p.containerdState,
        socket: p.socket,
        binDir: p.binDir,
        confDir: p.confDir,
      }),
    );
    const log = openSync(p.log, 'a');
    try {
      this.containerd = spawn('nsenter', ['-t', pid, '-n', '-m', '--', 'containerd', '--config', p.config], {
        stdio: ['ignore', log, log],
      });
    } finally {
      closeSync(log);
    }
    for (let i = 0; !existsSync(p.socket); i++) {
      if (this.containerd.exitCode !== null || i > 600) {
        throw new Error(`containerd did not start:\n${readFileSync(p.log, 'utf8').slice(-3000)}`);
      }
      await sleep(50);
    }
    this.criConn = criClient(p.socket);
    for (let i = 0; ; i++) {
      try {
        const c = await this.cri.conditions();
        if (c.RuntimeReady?.status) break;
      } catch (e) {
        if (i > 100) throw e;
      }
      await sleep(100);
    }
    for (const archive of [pauseArchive, ...images]) {
      this.execOk(
        'ctr',
        ['--address', p.socket, '--namespace', 'k8s.io', 'images', 'import', archive],
        300_000,
      );
    }
  }

  /** Wait until the CRI plugin has loaded a network configuration (kubelet's NetworkReady condition). */
  async networkReady(timeoutMs = 30_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const c = await this.cri.conditions();
      if (c.NetworkReady?.status) return;
      if (Date.now() > end) throw new Error(`NetworkReady stays false: ${c.NetworkReady?.message}`);
      await sleep(100);
    }
  }

  /** `cnikit serve` from the installed executable in the node's namespaces, on the default socket. */
  async startServe(
    executable = join(this.paths.binDir, 'cnikit'),
    env: Record<string, string> = {},
  ): Promise<string> {
    const logFile = join(this.paths.root, `serve-${Date.now()}.log`);
    const log = openSync(logFile, 'a');
    try {
      this.serveProc = spawn(
        'nsenter',
        ['-t', String(this.pid), '-n', '-m', '--', executable, 'serve', '--verbose'],
        {
          stdio: ['ignore', log, log],
          env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...env },
        },
      );
    } finally {
      closeSync(log);
    }
    const sock = this.nodeFsPath('/run/cnikit/cnikit.sock');
    for (let i = 0; !existsSync(sock); i++) {
      if (this.serveProc.exitCode !== null || i > 600) {
        throw new Error(`cnikit serve did not start:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
      }
      await sleep(50);
    }
    return logFile;
  }

  async stopServe(): Promise<void> {
    await stopProcess(this.serveProc);
    this.serveProc = undefined;
  }

  /** Remove every sandbox, then stop containerd, leftover shims and sandbox processes, and the namespaces. */
  async stop(): Promise<void> {
    if (this.criConn) {
      try {
        for (const s of await this.cri.listPodSandbox()) {
          await this.cri.stopPodSandbox(s.id).catch(() => undefined);
          await this.cri.removePodSandbox(s.id).catch(() => undefined);
        }
      } catch {
        // containerd is gone already
      }
      this.criConn.close();
      this.criConn = undefined;
    }
    await this.stopServe();
    await stopProcess(this.containerd);
    this.containerd = undefined;
    // shims this containerd started (they name its socket) and sandbox processes in this node's cgroup parent
    for (const pid of ownProcesses(this.paths.socket)) killPid(pid);
    for (const node of [this.nodeNs, this.clientNs]) await stopProcess(node);
    this.nodeNs = undefined;
    this.clientNs = undefined;
    removeCgroupParent();
  }
}

/** The (then empty) cgroup parent runc created for the sandboxes, in every hierarchy; one still in use stays. */
function removeCgroupParent(): void {
  const base = '/sys/fs/cgroup';
  const dirs = [join(base, CGROUP_PARENT)];
  for (const h of readdirSync(base)) dirs.push(join(base, h, CGROUP_PARENT));
  for (const d of dirs) {
    try {
      rmdirSync(d);
    } catch {
      // absent, or not empty (another node of this test still runs)
    }
  }
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

/** Processes whose command line names `socket` (the shims) or whose cgroup is under CGROUP_PARENT (pause). */
function ownProcesses(socket: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const cgroup = readFileSync(`/proc/${name}/cgroup`, 'utf8');
      if (cmdline.includes(socket) || cgroup.includes(`${CGROUP_PARENT}/`)) out.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

async function stopProcess(p: ChildProcess | undefined): Promise<void> {
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
}
