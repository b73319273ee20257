/**
 * An arm64 VM for the release test: Debian's linux-image-arm64 under qemu-system-aarch64 (TCG, `virt` machine),
 * booted with a small initramfs (the root's static busybox and the modules for 9p, bridge and veth) that mounts
 *
 *   the Debian 12 arm64 root (roots.ts: kernel, modules, busybox-static, iproute2 and their libraries) read-only
 *   over virtio-9p as /, with tmpfs on /run, /tmp and /var/lib/cni, and
 *   a job directory of this machine read-write over virtio-9p as /job: the release tarball (/job/release.tgz, for
 *   the job to extract into /opt/cni/bin, a tmpfs), the job script /job/job.sh, and /job/out where the job writes
 *   what the test checks,
 *
 * then runs `busybox sh /job/job.sh` chrooted into that root and powers off. The kernel lab (scripts/vm.mjs) shares
 * this machine's amd64 root, whose tools an arm64 kernel cannot run; this VM brings its own arm64 userland instead.
 * The job script and the initramfs init are busybox sh: they run inside the VM, where no Node.js exists.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Modules the init loads (with their dependencies from modules.dep, dependencies first). */
export const VM_MODULES = ['virtio_pci', '9pnet_virtio', '9p', 'bridge', 'veth'];

/** Transitive closure of `names` in modules.dep, dependencies first (paths relative to the modules directory). */
export function moduleOrder(modulesDep: string, names: readonly string[]): string[] {
  const deps = new Map<string, string[]>();
  for (const line of modulesDep.split('\n')) {
    const i = line.indexOf(':');
    if (i > 0)
      deps.set(
        line.slice(0, i),
        line
          .slice(i + 1)
          .trim()
          .split(/\s+/)
          .filter(Boolean),
      );
  }
  const byName = new Map(
    [...deps.keys()].map((p) => [p.replace(/^.*\//, '').replace(/\.ko(\.\w+)?$/, ''), p]),
  );
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (p: string) => {
    if (seen.has(p)) return;
    seen.add(p);
    for (const d of deps.get(p) ?? []) visit(d);
    order.push(p);
  };
  for (const n of names) {
    const p = byName.get(n) ?? byName.get(n.replace(/-/g, '_'));
    if (p) visit(p); // not in modules.dep: built into the kernel
  }
  return order;
}

const INIT = `#!/bin/busybox sh
B=/bin/busybox
$B mkdir -p /proc /sys /dev /newroot
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in $($B cat /modules.order); do $B insmod "/$m" || echo "init: insmod $m failed"; done
$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root /newroot || echo "init: no root"
$B mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 job /newroot/job || echo "init: no job dir"
$B mount -t proc proc /newroot/proc
$B mount -t sysfs sys /newroot/sys
$B mount -t devtmpfs dev /newroot/dev
for d in run tmp var/lib/cni opt/cni/bin; do $B mount -t tmpfs -o mode=0755 t "/newroot/$d"; done
echo "cnikit-vm: up $($B cut -d' ' -f1 /proc/uptime)"
$B chroot /newroot /bin/busybox sh /job/job.sh >/newroot/job/out/job.log 2>&1
echo "$?" >/newroot/job/out/status
$B sync
$B umount /newroot/job
$B poweroff -f
`;

export interface VmRun {
  /** Exit status of job.sh (from /job/out/status), or null when the VM ended without one. */
  status: number | null;
  /** The job's output directory (files written by job.sh), on this machine. */
  out: string;
  /** Wall time from qemu's start to its exit, and to the init's "up" line (kernel boot + modules + mounts). */
  wallMs: number;
  bootMs: number | null;
  console: string;
  cleanup(): void;
}

/**
 * Boots the VM with `tarball` as /job/release.tgz and `jobScript` as /job/job.sh (plus `files` in /job).
 * Resolves when qemu exits (the job powers the VM off) or after `timeoutMs` (qemu killed).
 */
export async function runArm64Vm(o: {
  root: string;
  tarball: string;
  jobScript: string;
  files?: Record<string, string>;
  timeoutMs?: number;
  memMiB?: number;
}): Promise<VmRun> {
  const work = mkdtempSync(join(tmpdir(), 'cnikit-arm64-vm-'));
  const job = join(work, 'job');
  const out = join(job, 'out');
  mkdirSync(out, { recursive: true });
  copyFileSync(o.tarball, join(job, 'release.tgz'));
  writeFileSync(join(job, 'job.sh'), o.jobScript);
  for (const [name, text] of Object.entries(o.files ?? {})) writeFileSync(join(job, name), text);

  // initramfs: init, busybox, the modules
  const kver = readdirSync(join(o.root, 'lib', 'modules'))
    .sort()
    .at(-1) as string;
  const modDir = join(o.root, 'lib', 'modules', kver);
  const mods = moduleOrder(readFileSync(join(modDir, 'modules.dep'), 'utf8'), VM_MODULES);
  const ird = join(work, 'initramfs');
  mkdirSync(join(ird, 'bin'), { recursive: true });
  writeFileSync(join(ird, 'init'), INIT);
  chmodSync(join(ird, 'init'), 0o755);
  copyFileSync(join(o.root, 'bin', 'busybox'), join(ird, 'bin', 'busybox'));
  chmodSync(join(ird, 'bin', 'busybox'), 0o755);
  for (const m of mods) {
    mkdirSync(dirname(join(ird, 'mods', m)), { recursive: true });
    copyFileSync(join(modDir, m), join(ird, 'mods', m));
  }
  writeFileSync(join(ird, 'modules.order'), `${mods.map((m) => `mods/${m}`).join('\n')}\n`);
  const list = ['init', 'bin', 'bin/busybox', 'modules.order', ...listTree(ird, 'mods')].join('\n');
  const initrd = join(work, 'initrd.cpio');
  const cpio = spawnSync('cpio', ['--quiet', '-o', '-H', 'newc', '-F', initrd], {
    cwd: ird,
    input: `${list}\n`,
  });
  if (cpio.status !== 0) throw new Error(`cpio: ${cpio.stderr}`);
  const kernel = readdirSync(join(o.root, 'boot'))
    .filter((f) => f.startsWith('vmlinuz-'))
    .sort()
    .at(-1) as string;

  const args = [
    '-machine',
    'virt',
    '-cpu',
    'max,pauth-impdef=on',
    '-accel',
    'tcg,thread=multi',
    '-smp',
    '2',
    '-m',
    String(o.memMiB ?? 1536),
    '-nographic',
    '-nodefaults',
    '-no-user-config',
    '-no-reboot',
    '-serial',
    'stdio',
    '-kernel',
    join(o.root, 'boot', kernel),
    '-initrd',
    initrd,
    '-append',
    'console=ttyAMA0 loglevel=3 panic=-1 rdinit=/init',
    '-fsdev',
    `local,id=root,path=${o.root},security_model=none,readonly=on`,
    '-device',
    'virtio-9p-pci,fsdev=root,mount_tag=root',
    '-fsdev',
    `local,id=job,path=${job},security_model=none`,
    '-device',
    'virtio-9p-pci,fsdev=job,mount_tag=job',
    '-nic',
    'none',
  ];
  const t0 = performance.now();
  let bootMs: number | null = null;
  let consoleText = '';
  const child = spawn('qemu-system-aarch64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const onData = (d: Buffer) => {
    consoleText += d.toString();
    if (bootMs === null && consoleText.includes('cnikit-vm: up')) bootMs = performance.now() - t0;
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 600_000);
  await new Promise<void>((resolve) => child.on('close', () => resolve()));
  clearTimeout(timer);
  const wallMs = performance.now() - t0;
  let status: number | null = null;
  try {
    status = Number(readFileSync(join(out, 'status'), 'utf8').trim());
  } catch {
    status = null;
  }
  return {
    status,
    out,
    wallMs,
    bootMs,
    console: consoleText,
    cleanup: () => rmSync(work, { recursive: true, force: true }),
  };
}

function listTree(base: string, rel: string): string[] {
  const out = [rel];
  for (const e of readdirSync(join(base, rel), { withFileTypes: true })) {
    const p = `${rel}/${e.name}`;
    if (e.isDirectory()) out.push(...listTree(base, p));
    else out.push(p);
  }
  return out;
}
