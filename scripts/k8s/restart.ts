/**
 * Stopping and starting parts of a running lab cluster (scripts/k8s/cluster.ts), for failure tests: the control
 * plane's kube-apiserver, and a node's kubelet. Each is started again with the command line it had (read from
 * /proc/PID/cmdline before it is stopped), logging to the same file, and the new process replaces the old one in
 * the cluster's state, so `down` ends it.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type NodeRecord, nodeTree } from './lab-node.ts';
import { alive, type ProcRef, procRef, terminate } from './procs.ts';

/** What of the cluster's state (cluster.ts's ClusterState) these need. */
export interface RestartState {
  controlPlane: { netns: string; dir: string; procs: ProcRef[] };
  nodes: NodeRecord[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cmdline(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
}

/** The running processes whose parent is `pid`. */
function children(pid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(e));
    } catch {
      // gone
    }
  }
  return out;
}

function respawn(argv: string[], log: string): ProcRef {
  const out = openSync(log, 'a');
  const [exe = '', ...args] = argv;
  const p = spawn(exe, args, { stdio: ['ignore', out, out] });
  closeSync(out);
  if (!p.pid) throw new Error(`${argv.join(' ')} did not start`);
  return procRef(p.pid);
}

export interface Restartable {
  /** Stops the process (SIGTERM, then SIGKILL after 10 s); resolves once it is gone. */
  stop(): Promise<void>;
  /** Starts it again with the same command line; resolves once it runs. */
  start(): Promise<void>;
}

/** The control plane's kube-apiserver (`ip netns exec CP kube-apiserver …`). */
export function apiserverOf(s: RestartState, save: () => void): Restartable {
  const index = () => {
    const i = s.controlPlane.procs.findIndex((p) => {
      try {
        return basename(cmdline(p.pid)[0] ?? '') === 'kube-apiserver';
      } catch {
        return false;
      }
    });
    if (i < 0) throw new Error('no kube-apiserver process is running in the control plane');
    return i;
  };
  let saved: { argv: string[]; i: number } | undefined;
  return {
    async stop() {
      const i = index();
      const ref = s.controlPlane.procs[i] as ProcRef;
      saved = { argv: cmdline(ref.pid), i };
      await terminate([ref]);
    },
    async start() {
      if (!saved) throw new Error('the kube-apiserver was not stopped through this handle');
      const ref = respawn(
        ['ip', 'netns', 'exec', s.controlPlane.netns, ...saved.argv],
        join(s.controlPlane.dir, 'logs', 'kube-apiserver.log'),
      );
      s.controlPlane.procs[saved.i] = ref;
      save();
      saved = undefined;
      await sleep(200);
      if (!alive(ref))
        throw new Error('the kube-apiserver exited at once (see control-plane/logs/kube-apiserver.log)');
    },
  };
}

/** A node's kubelet: the recorded process is the labexec → nsenter wrapper; its child is the kubelet. */
export function kubeletOf(s: RestartState, save: () => void, node: string): Restartable {
  const n = s.nodes.find((x) => x.name === node);
  if (!n) throw new Error(`no node ${node}`);
  const index = () => {
    const i = n.procs.findIndex((p) => {
      try {
        const argv = cmdline(p.pid);
        return alive(p) && basename(argv[argv.indexOf('--') + 1] ?? '') === 'kubelet';
      } catch {
        return false;
      }
    });
    if (i < 0) throw new Error(`no kubelet is running on ${node}`);
    return i;
  };
  let saved: { argv: string[]; i: number } | undefined;
  return {
    async stop() {
      const i = index();
      const ref = n.procs[i] as ProcRef;
      // nsenter's own command line, with the cgroup joining of labexec in front of it again
      saved = { argv: [n.labexec, ...n.cgroupProcs, '--', ...cmdline(ref.pid)], i };
      const kids = children(ref.pid).map(procRef);
      await terminate(kids);
      await terminate([ref]);
    },
    async start() {
      if (!saved) throw new Error(`the kubelet of ${node} was not stopped through this handle`);
      const ref = respawn(saved.argv, join(nodeTree(n.dir).logs, 'kubelet.log'));
      n.procs[saved.i] = ref;
      save();
      saved = undefined;
      await sleep(200);
      if (!alive(ref)) throw new Error(`the kubelet of ${node} exited at once (see its kubelet.log)`);
    },
  };
}
