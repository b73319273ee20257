/**
 * The lab cluster's cgroup subtrees: in every cgroup hierarchy mounted on the machine (v1 controllers, named ones,
 * the v2 one) a directory under the cgroup this process is in, so nothing is created at the root of a hierarchy
 * this process is not itself at, and all of it is removed (deepest first) when the cluster stops.
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

export interface Hierarchy {
  /** Where it is mounted on the machine, e.g. /sys/fs/cgroup/memory. */
  mount: string;
  /** The filesystem type: cgroup (v1) or cgroup2. */
  fstype: 'cgroup' | 'cgroup2';
  /** The mount options that name it: "memory", "none,name=systemd", "" for v2. */
  options: string;
  /** This process's cgroup in it, e.g. /process_api/…. */
  own: string;
}

export function hierarchies(): Hierarchy[] {
  const own = new Map<string, string>();
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n')) {
    const m = line.match(/^\d+:([^:]*):(.*)$/);
    if (m) own.set(m[1] ?? '', m[2] ?? '/');
  }
  const out: Hierarchy[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n')) {
    const [pre = '', post = ''] = line.split(' - ');
    const [fstype, , superOpts = ''] = post.split(' ');
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') continue;
    const mount = pre.split(' ')[4] ?? '';
    const key =
      fstype === 'cgroup2'
        ? ''
        : superOpts
            .split(',')
            .filter(
              (o) => o !== 'rw' && o !== 'ro' && !o.startsWith('release_agent') && o !== 'clone_children',
            )
            .filter((o) => !['noprefix', 'xattr', 'cpuset_v2_mode'].includes(o))
            .join(',');
    const path = own.get(key);
    if (path === undefined) continue;
    const options = fstype === 'cgroup2' ? '' : /^name=/.test(key) ? `none,${key}` : key;
    out.push({ mount, fstype, options, own: path });
  }
  return out;
}

/** Creates rel (a/b) under this process's cgroup in every hierarchy; returns the directories made, top first. */
export function makeSubtree(rel: string, hs = hierarchies()): string[] {
  const made: string[] = [];
  for (const h of hs) {
    let dir = join(h.mount, h.own);
    for (const part of rel.split('/')) {
      const parent = dir;
      dir = join(dir, part);
      if (!existsSync(dir)) {
        mkdirSync(dir);
        made.push(dir);
        // a v1 cpuset child has no CPUs nor memory nodes until given its parent's
        for (const f of ['cpuset.cpus', 'cpuset.mems']) {
          if (existsSync(join(dir, f))) writeFileSync(join(dir, f), readFileSync(join(parent, f)));
        }
      }
    }
  }
  return made;
}

/** The cgroup.procs files of rel in every hierarchy (for scripts/k8s/labexec.c). */
export function procsFiles(rel: string, hs = hierarchies()): string[] {
  return hs.map((h) => join(h.mount, h.own, rel, 'cgroup.procs'));
}

/** The directory of rel in each hierarchy. */
export function subtreeDirs(rel: string, hs = hierarchies()): string[] {
  return hs.map((h) => join(h.mount, h.own, rel));
}

function removeTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir)) {
    const sub = join(dir, e);
    if (statSync(sub).isDirectory()) removeTree(sub);
  }
  rmdirSync(dir);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Removes each directory and every cgroup below it, retrying while the last processes leave (EBUSY). */
export async function removeSubtrees(dirs: string[], timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (const d of dirs) {
    for (;;) {
      try {
        removeTree(d);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EBUSY' || Date.now() > end) throw e;
        await sleep(100);
      }
    }
  }
}
