#!/usr/bin/env node
// The kernel lab: run one command as root inside a VM with Debian's stock kernel (docs/kernel-lab.md).
//
//   npm run vm -- <command> [args…]            e.g.  npm run vm -- ip link add d0 type dummy
//   node scripts/vm.mjs [--arch amd64|arm64] [--] <command> [args…]
//
// The VM (qemu, TCG) sees this machine's root filesystem read-only (virtio-9p) under a writable in-memory overlay:
// nothing it writes reaches the host. The command runs in the current directory with the caller's environment,
// its stdout/stderr arrive on ours, and its exit status is ours. /proc, /sys, /dev, /run, /tmp are mounted, the
// kernel's modules are loadable (modprobe) and the link/qdisc/classifier/netfilter modules tests need are loaded at
// boot. First use installs qemu and downloads the kernel and busybox-static packages from Debian, then caches them
// (CNIKIT_VM_CACHE; default /var/cache/cnikit/vm as root, so `npm ci` keeps it, else node_modules/.cache/cnikit-vm).
//
// Environment: CNIKIT_VM_MEM (MiB, default 3072), CNIKIT_VM_CPUS (default: all), CNIKIT_VM_VERBOSE=1 (kernel console
// on stderr), CNIKIT_VM_TIMEOUT (seconds, default none), CNIKIT_VM_ARCH (amd64 | arm64, default: the machine's),
// CNIKIT_VM_TIME_SCALE (default 10 under TCG): the command sees CNIKIT_TEST_TIME_SCALE = the caller's value (default 1)
// times this factor, which every wall-clock bound of the tests goes through (scaled() of @cnikit/testing).
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Per-architecture facts: Debian package names, qemu binary and machine, console device. */
export const ARCHES = {
  amd64: {
    qemu: 'qemu-system-x86_64',
    qemuPackage: 'qemu-system-x86',
    machine: ['-machine', 'pc', '-cpu', 'max', '-bios', 'qboot.rom'],
    console: 'ttyS0',
    kernelMeta: 'linux-image-amd64',
  },
  arm64: {
    qemu: 'qemu-system-aarch64',
    qemuPackage: 'qemu-system-arm',
    machine: ['-machine', 'virt', '-cpu', 'max'],
    console: 'ttyAMA0',
    kernelMeta: 'linux-image-arm64',
  },
};

/** Modules loaded at boot (the rest autoload on first use: modprobe and modules.alias are in place). */
const BOOT_MODULES = [
  'dummy',
  '8021q',
  'macvlan',
  'macvtap',
  'ipvlan',
  'ipvtap',
  'vrf',
  'bridge',
  'br_netfilter',
  'veth',
  'tun',
  'nf_conntrack',
  'nf_nat',
  'nf_tables',
  'nf_conntrack_netlink',
];
/** Loaded first in the initramfs: what mounting the host's filesystem over virtio-9p under an overlay needs. */
const INITRAMFS_MODULES = ['virtio_pci', 'virtio_mmio', 'virtio_console', '9pnet_virtio', '9p', 'overlay'];

function die(msg) {
  process.stderr.write(`vm: ${msg}\n`);
  process.exit(125);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${(r.stderr ?? '').trim()}`);
  return r.stdout ?? '';
}

function hostArch() {
  return process.arch === 'arm64' ? 'arm64' : 'amd64';
}

// ---------- cache preparation (first use) ----------

function aptInstall(pkg) {
  if (process.getuid?.() !== 0) die(`${pkg} is not installed; run as root once, or: apt-get install ${pkg}`);
  process.stderr.write(`vm: installing ${pkg} (first use)\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const args = ['-y', '-qq', '--no-install-recommends', '-o', 'DPkg::Lock::Timeout=600', 'install', pkg];
  let r = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env });
  if (r.status !== 0) {
    spawnSync('apt-get', ['-qq', '-o', 'DPkg::Lock::Timeout=600', 'update'], { stdio: 'inherit', env });
    r = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (r.status !== 0) die(`apt-get install ${pkg} failed`);
}

function onPath(cmd) {
  return (process.env.PATH ?? '/usr/bin:/bin').split(':').some((d) => d && existsSync(join(d, cmd)));
}

/**
 * apt options for another architecture's packages: a private package list in the cache (no change to this machine's
 * apt configuration, no `dpkg --add-architecture`).
 */
function aptOptions(cache, arch) {
  if (arch === hostArch()) return [];
  const d = join(cache, 'apt');
  for (const sub of ['lists/partial', 'cache/archives/partial']) mkdirSync(join(d, sub), { recursive: true });
  if (!existsSync(join(d, 'status'))) writeFileSync(join(d, 'status'), '');
  const opts = [`APT::Architecture=${arch}`, `APT::Architectures=${arch}`, `Dir::State::Lists=${d}/lists`];
  opts.push(`Dir::Cache=${d}/cache`, `Dir::State::Status=${d}/status`);
  const args = opts.flatMap((o) => ['-o', o]);
  if (!readdirSync(join(d, 'lists')).some((f) => f.endsWith('_Packages')))
    run('apt-get', [...args, '-qq', 'update']);
  return args;
}

/** Name of the versioned kernel package the meta package depends on (linux-image-6.1.0-N-<arch>). */
function resolveKernelPackage(spec, apt) {
  const out = run('apt-cache', [...apt, 'depends', spec.kernelMeta]);
  const m = /Depends: (linux-image-[0-9][^\s]*)/.exec(out);
  if (!m) die(`cannot tell which kernel package ${spec.kernelMeta} depends on:\n${out}`);
  return m[1];
}

function aptDownload(pkgs, dir, apt) {
  const r = spawnSync('apt-get', [...apt, 'download', ...pkgs], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) {
    spawnSync('apt-get', [...apt, '-qq', 'update'], { stdio: 'inherit' });
    run('apt-get', [...apt, 'download', ...pkgs], { cwd: dir });
  }
  const debs = readdirSync(dir).filter((f) => f.endsWith('.deb'));
  return (pkg) => {
    const f = debs.find((d) => d.startsWith(`${pkg}_`));
    if (!f) die(`apt-get download ${pkg} produced no .deb`);
    return join(dir, f);
  };
}

// ---------- cpio (newc) writer for the initramfs ----------

class Cpio {
  chunks = [];
  ino = 1;
  entry(name, mode, data = Buffer.alloc(0), rdev = [0, 0]) {
    const nameBuf = Buffer.from(`${name}\0`);
    const fields = [this.ino++, mode, 0, 0, 1, 0, data.length, 0, 0, rdev[0], rdev[1], nameBuf.length, 0];
    const header = Buffer.from(`070701${fields.map((f) => f.toString(16).padStart(8, '0')).join('')}`);
    this.chunks.push(header, nameBuf, Buffer.alloc((4 - ((header.length + nameBuf.length) % 4)) % 4));
    this.chunks.push(data, Buffer.alloc((4 - (data.length % 4)) % 4));
  }
  dir(name) {
    this.entry(name, 0o040755);
  }
  file(name, data, perm = 0o644) {
    this.entry(name, 0o100000 | perm, Buffer.isBuffer(data) ? data : Buffer.from(data));
  }
  symlink(name, target) {
    this.entry(name, 0o120777, Buffer.from(target));
  }
  chardev(name, major, minor) {
    this.entry(name, 0o020600, Buffer.alloc(0), [major, minor]);
  }
  finish() {
    this.entry('TRAILER!!!', 0);
    const out = Buffer.concat(this.chunks);
    return Buffer.concat([out, Buffer.alloc((512 - (out.length % 512)) % 512)]);
  }
}

/** Transitive dependencies from modules.dep, dependencies first. */
function moduleClosure(modDir, names) {
  const deps = new Map();
  for (const line of readFileSync(join(modDir, 'modules.dep'), 'utf8').split('\n')) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    deps.set(
      line.slice(0, i),
      line
        .slice(i + 1)
        .trim()
        .split(/\s+/)
        .filter(Boolean),
    );
  }
  const byName = new Map();
  for (const p of deps.keys()) byName.set(p.replace(/^.*\//, '').replace(/\.ko(\.[a-z]+)?$/, ''), p);
  const order = [];
  const seen = new Set();
  const visit = (p) => {
    if (seen.has(p)) return;
    seen.add(p);
    for (const d of deps.get(p) ?? []) visit(d);
    order.push(p);
  };
  for (const n of names) {
    const p = byName.get(n) ?? byName.get(n.replace(/-/g, '_'));
    if (p) visit(p); // absent: built into the kernel
  }
  return order;
}

const INIT = `#!/bin/busybox sh
# Stage 1 (initramfs): mount the host's root filesystem read-only over virtio-9p, under a tmpfs overlay.
/bin/busybox --install -s /bin
export PATH=/bin
fail() { echo "vm init: $*" >&2; poweroff -f; }
mkdir -p /proc /sys /dev /lower /ovl /newroot
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod "/$m" 2>/dev/null; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /lower || fail "9p mount failed"
mount -t tmpfs -o mode=0755 ovl /ovl && mkdir /ovl/upper /ovl/work || fail "tmpfs failed"
mount -t overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work overlay /newroot || fail "overlay failed"
mount -t tmpfs -o mode=0755,nosuid,nodev run /newroot/run || fail "no /run in the host filesystem"
mkdir -p /newroot/run/cnikit-vm && cp /bin/busybox /stage2.sh /lab.sh /job.sh /newroot/run/cnikit-vm/ || fail "copy failed"
[ -f /systemd.sh ] && { cp /systemd.sh /newroot/run/cnikit-vm/ || fail "copy failed"; }
umount /proc /sys /dev
exec switch_root /newroot /run/cnikit-vm/busybox sh /run/cnikit-vm/stage2.sh
`;

const STAGE2 = `# Stage 2 (overlay root): mounts, modules, then the command; its status goes to the cnikit.status port.
B=/run/cnikit-vm/busybox
off() { $B sync; $B poweroff -f; }
$B mount -t proc proc /proc; $B mount -t sysfs sysfs /sys; $B mount -t devtmpfs dev /dev
$B mkdir -p /dev/pts /dev/shm /dev/mqueue /run/netns /run/lock /tmp
$B mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts; $B mount -t tmpfs -o mode=1777 shm /dev/shm
# /tmp is the host's, copy-on-write like the rest, on the same mount as the repository: a test may hard-link
# dist-bin/ files into a temporary directory (a separate tmpfs would make that EXDEV)
$B mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
$B mount -t bpf bpf /sys/fs/bpf 2>/dev/null
$B mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
. /run/cnikit-vm/lab.sh
$B mkdir -p "/lib/modules/$KVER" && $B mount --bind "$MODDIR" "/lib/modules/$KVER"
$B hostname cnikit-vm
echo "vm: stage 2 $($B cat /proc/uptime)" >/dev/kmsg
port() { for p in /sys/class/virtio-ports/*; do [ "$($B cat $p/name)" = "$1" ] && echo /dev/\${p##*/}; done; }
OUT=$(port cnikit.stdout); ERR=$(port cnikit.stderr); ST=$(port cnikit.status)
[ -n "$ST" ] || { echo "vm: no status port" >&2; off; }
if [ "$FOREIGN" = 1 ]; then
  # this machine's programs are of another architecture: busybox's modprobe, sh and ip
  $B ln -s $B /run/cnikit-vm/modprobe && echo /run/cnikit-vm/modprobe >/proc/sys/kernel/modprobe
  MP="$B modprobe"; SH="$B sh"
else
  MP=/sbin/modprobe; SH=/bin/sh
fi
$MP ifb numifbs=0 2>/dev/null
$MP -a -q $MODULES 2>/dev/null
echo "vm: modules loaded $($B cat /proc/uptime)" >/dev/kmsg
$B ip link set lo up
# --systemd: systemd becomes PID 1 and runs the command as a service (systemd.sh)
[ -f /run/cnikit-vm/systemd.sh ] && . /run/cnikit-vm/systemd.sh
$B env -i $SH -c '. /run/cnikit-vm/job.sh; run' </dev/null >"$OUT" 2>"$ERR"
echo "exit $?" >"$ST"
off
`;

/**
 * --systemd (runInVm's systemd option): stage 2 execs this machine's systemd as PID 1 with a target of its own,
 * cnikit-vm.target, whose one service runs the command (ports and status as without it) and then powers off. The
 * units live in /run/systemd/system (the VM's runtime unit directory), so nothing of the host's /etc is changed and
 * none of its enabled services start (only what sysinit.target, basic.target and sockets.target pull in).
 * systemd-tmpfiles-setup is masked: Debian's tmp.conf would empty /tmp, the host's /tmp seen copy-on-write.
 */
const SYSTEMD = `# sourced by stage 2 (PID 1, busybox sh) when the VM runs the command under systemd
[ -x /lib/systemd/systemd ] || { echo "vm: no /lib/systemd/systemd on this machine" >&2; echo "exit 125" >"$ST"; off; }
U=/run/systemd/system
$B mkdir -p $U
for m in systemd-tmpfiles-setup.service systemd-tmpfiles-clean.timer systemd-tmpfiles-clean.service; do
  $B ln -sf /dev/null $U/$m
done
printf '%s\\n' "OUT=$OUT" "ERR=$ERR" "ST=$ST" "SH=$SH" >/run/cnikit-vm/ports.sh
$B cat >/run/cnikit-vm/systemd-job.sh <<'JOB'
B=/run/cnikit-vm/busybox
. /run/cnikit-vm/ports.sh
echo "vm: the command starts under systemd $($B cat /proc/uptime)" >/dev/kmsg
$B env -i $SH -c '. /run/cnikit-vm/job.sh; run' </dev/null >"$OUT" 2>"$ERR"
echo "exit $?" >"$ST"
$B sync; $B poweroff -f
JOB
$B cat >$U/cnikit-vm.target <<'UNIT'
[Unit]
Description=cnikit kernel lab: the command under systemd
Requires=basic.target sockets.target
Wants=cnikit-vm-job.service
After=basic.target sockets.target
AllowIsolate=yes
UNIT
$B cat >$U/cnikit-vm-job.service <<'UNIT'
[Unit]
Description=cnikit kernel lab: the command
After=basic.target sockets.target

[Service]
Type=oneshot
ExecStart=/run/cnikit-vm/busybox sh /run/cnikit-vm/systemd-job.sh
StandardInput=null
StandardOutput=journal
StandardError=journal
TimeoutStartSec=infinity
UNIT
echo "vm: systemd as PID 1 $($B cat /proc/uptime)" >/dev/kmsg
exec /lib/systemd/systemd --unit=cnikit-vm.target --show-status=false
`;

function quote(s) {
  return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

/** The per-run settings of stage 2 (lab.sh). */
function labScript(lab) {
  const lines = [
    `KVER=${quote(lab.kver)}`,
    `MODDIR=${quote(lab.modDir)}`,
    `MODULES=${quote(lab.bootModules.join(' '))}`,
    `FOREIGN=${lab.arch === hostArch() ? 0 : 1}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** The command (job.sh): the caller's environment, then run() enters the directory and execs the command. */
function jobScript(argv, cwd, env, binds_, keepLinks_) {
  const lines = [];
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) continue;
    if (
      /^(PWD|OLDPWD|SHLVL|_|XDG_RUNTIME_DIR|DBUS_SESSION_BUS_ADDRESS|SSH_AUTH_SOCK|INVOCATION_ID|JOURNAL_STREAM)$/.test(
        k,
      )
    )
      continue;
    lines.push(`export ${k}=${quote(v)}`);
  }
  // files bound over others inside the VM only (runInVm's binds: e.g. tsx's entry replaced by the TypeScript cache)
  const binds = (binds_ ?? [])
    .map(([from, to]) => `/run/cnikit-vm/busybox mount --bind ${quote(from)} ${quote(to)} || exit 125; `)
    .join('');
  // trees whose hard links must stay one file when written to (runInVm's keepLinks): the overlay copies a lower file
  // up on its first write or link() and thereby splits it from its other names (9p offers no file handles, so no
  // index=on); a copy made in the VM (GNU cp -a keeps hard links) is all upper from the start
  const keep = (keepLinks_ ?? [])
    .map((p) => {
      const [dir, tmp] = [quote(p), quote(`${p}.cnikit-vm-links`)];
      return `if [ -e ${dir} ]; then cp -a ${dir} ${tmp} && rm -rf ${dir} && mv ${tmp} ${dir} || exit 125; fi; `;
    })
    .join('');
  lines.push(`run() { ${binds}${keep}cd ${quote(cwd)} || exit 125; exec ${argv.map(quote).join(' ')}; }`);
  return `${lines.join('\n')}\n`;
}

/**
 * The uncompressed ELF kernel inside a bzImage: qemu boots it through its PVH entry point, which skips the
 * decompressor — 15-20 s of a boot under TCG. Without it (no xz, another format) the bzImage is booted.
 */
function extractVmlinux(bzImage, out) {
  const data = readFileSync(bzImage);
  const at = data.indexOf(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]));
  if (at < 0) return;
  const r = spawnSync('xz', ['-dc', '--single-stream'], { input: data.subarray(at), maxBuffer: 1 << 30 });
  if (r.status === 0 && r.stdout.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46])))
    writeFileSync(out, r.stdout);
}

/** Makes sure qemu, the kernel, its modules and the base initramfs are in the cache; returns their paths. */
export function prepareLab(arch = process.env.CNIKIT_VM_ARCH || hostArch()) {
  const spec = ARCHES[arch];
  if (!spec) die(`unknown architecture ${arch} (amd64 | arm64)`);
  const cache = resolve(
    process.env.CNIKIT_VM_CACHE ||
      (process.getuid?.() === 0
        ? '/var/cache/cnikit/vm'
        : join(repoRoot, 'node_modules', '.cache', 'cnikit-vm')),
    arch,
  );
  mkdirSync(cache, { recursive: true });
  if (!onPath(spec.qemu)) aptInstall(spec.qemuPackage);
  let ready = readdirSync(cache).filter((d) => existsSync(join(cache, d, 'ready')));
  if (ready.length === 0) {
    const apt = aptOptions(cache, arch);
    const pkg = resolveKernelPackage(spec, apt);
    const t0 = Date.now();
    process.stderr.write(`vm: downloading ${pkg} and busybox-static (first use)\n`);
    const tmp = mkdtempSync(join(cache, '.prep-'));
    try {
      const dl = join(tmp, 'deb');
      mkdirSync(dl);
      const deb = aptDownload([pkg, 'busybox-static'], dl, apt);
      const root = join(tmp, 'root');
      mkdirSync(root);
      // Everything but hardware drivers nobody tests here (half the package, twice as fast to unpack).
      const tarFile = join(tmp, 'kernel.tar');
      const fd = openSync(tarFile, 'w');
      const fsys = spawnSync('dpkg-deb', ['--fsys-tarfile', deb(pkg)], { stdio: ['ignore', fd, 'inherit'] });
      closeSync(fd);
      if (fsys.status !== 0) die(`unpacking ${pkg} failed`);
      run('tar', ['-x', '-f', tarFile, '-C', root, ...UNPACK_EXCLUDES]);
      rmSync(tarFile);
      run('dpkg-deb', ['-x', deb('busybox-static'), join(tmp, 'busybox')]);
      const kver = readdirSync(join(root, 'lib', 'modules'))[0];
      run('depmod', ['-b', root, kver]);
      const kernelFile = readdirSync(join(root, 'boot')).find((f) => f.startsWith('vmlinu'));
      const modDir = join(root, 'lib', 'modules', kver);
      const cpio = new Cpio();
      for (const d of ['bin', 'dev', 'lib', 'proc', 'sys']) cpio.dir(d);
      cpio.chardev('dev/console', 5, 1);
      cpio.chardev('dev/null', 1, 3);
      cpio.file('bin/busybox', readFileSync(join(tmp, 'busybox', 'bin', 'busybox')), 0o755);
      const mods = moduleClosure(modDir, INITRAMFS_MODULES);
      const dirs = new Set();
      for (const m of mods) {
        const parts = `lib/${m}`.split('/');
        for (let i = 2; i < parts.length; i++) {
          const d = parts.slice(0, i).join('/');
          if (!dirs.has(d)) cpio.dir(d);
          dirs.add(d);
        }
        cpio.file(`lib/${m}`, readFileSync(join(modDir, m)));
      }
      cpio.file('modules.order', mods.map((m) => `lib/${m}`).join('\n'));
      writeFileSync(join(tmp, 'initramfs.cpio'), cpio.finish());
      renameSync(join(root, 'boot', kernelFile), join(tmp, 'kernel'));
      if (arch === 'amd64') extractVmlinux(join(tmp, 'kernel'), join(tmp, 'vmlinux'));
      writeFileSync(join(tmp, 'kver'), kver);
      rmSync(dl, { recursive: true, force: true });
      rmSync(join(tmp, 'busybox'), { recursive: true, force: true });
      writeFileSync(join(tmp, 'ready'), `${pkg}\n`);
      try {
        renameSync(tmp, join(cache, pkg));
      } catch {
        rmSync(tmp, { recursive: true, force: true }); // another run prepared it at the same time
      }
      process.stderr.write(`vm: ${pkg} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
    ready = readdirSync(cache).filter((d) => existsSync(join(cache, d, 'ready')));
  }
  const dir = join(cache, ready.sort().at(-1));
  const kver = readFileSync(join(dir, 'kver'), 'utf8').trim();
  const modDir = join(dir, 'root', 'lib', 'modules', kver);
  const bootModules = [...BOOT_MODULES];
  return {
    arch,
    spec,
    dir,
    kver,
    modDir,
    kernel: existsSync(join(dir, 'vmlinux')) ? join(dir, 'vmlinux') : join(dir, 'kernel'),
    bootModules,
  };
}

export const UNPACK_EXCLUDES = [
  'drivers/gpu',
  'drivers/media',
  'drivers/infiniband',
  'drivers/net/wireless',
  'drivers/staging',
  'drivers/scsi',
  'drivers/usb',
  'drivers/iio',
  'drivers/hid',
  'drivers/input',
  'drivers/bluetooth',
  'sound',
].map((d) => `--exclude=*/kernel/${d}/*`);

/** The accelerator qemu is given (CNIKIT_VM_ACCEL; TCG unless asked: this machine has no usable /dev/kvm). */
export function vmAccel(env = process.env) {
  return env.CNIKIT_VM_ACCEL || 'tcg,thread=multi';
}

/**
 * The bounds' factor under TCG: process-heavy kernel tests ran 5-10x slower than on the host (2026-11-26, load 15-25),
 * a Node start 8-15x, and one with the tsx loader 20-35x; a bound is a ceiling, not an estimate.
 */
export const TCG_TIME_SCALE = 10;

function positive(name, raw, fallback) {
  if (raw === undefined || String(raw).trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) die(`${name}=${JSON.stringify(raw)}: expected a positive number`);
  return n;
}

/**
 * CNIKIT_TEST_TIME_SCALE inside the VM: the caller's factor (default 1) times the lab's (CNIKIT_VM_TIME_SCALE;
 * default TCG_TIME_SCALE, 2 with KVM), so the tests' timeouts (scaled() of @cnikit/testing) stretch with emulation.
 */
export function vmTimeScale(env = process.env) {
  const caller = positive('CNIKIT_TEST_TIME_SCALE', env.CNIKIT_TEST_TIME_SCALE, 1);
  const lab = positive(
    'CNIKIT_VM_TIME_SCALE',
    env.CNIKIT_VM_TIME_SCALE,
    vmAccel(env).startsWith('kvm') ? 2 : TCG_TIME_SCALE,
  );
  return caller * lab;
}

/**
 * Boots the VM, runs argv in it and resolves to its exit status.
 * Options: cwd, env (default process.env), stdout/stderr (writable streams, default ours), arch, binds ([from, to]
 * pairs of host paths: `from` is bound over `to` inside the VM only, before the command starts), keepLinks (host
 * directories copied into the VM's writable layer before the command starts, so that their hard links stay one file
 * when a test writes to or hard-links one of them: the overlay would otherwise split the name it copies up from the
 * others, e.g. dist-bin/bridge from dist-bin/host-local, and the executable would stop recognising its other names),
 * systemd (true: this machine's systemd runs as PID 1 and starts the command as a service once sockets.target and
 * basic.target are reached; see SYSTEMD).
 */
export async function runInVm(argv, opts = {}) {
  // Under heavy load a TCG guest can panic before userspace (e.g. its early timer check): boot once more then.
  const first = await bootOnce(argv, opts, true);
  if (first !== RETRY) return first;
  return bootOnce(argv, opts, false);
}

const RETRY = Symbol('retry');

async function bootOnce(argv, opts, mayRetry) {
  const lab = prepareLab(opts.arch);
  const cwd = opts.cwd ?? process.cwd();
  const env = opts.env ?? process.env;
  const work = mkdtempSync(join(tmpdir(), 'cnikit-vm-'));
  const job = new Cpio();
  job.file('init', INIT, 0o755);
  job.file('stage2.sh', STAGE2, 0o644);
  job.file('lab.sh', labScript(lab));
  if (opts.systemd) job.file('systemd.sh', SYSTEMD, 0o644);
  job.file(
    'job.sh',
    jobScript(
      argv,
      cwd,
      { ...env, CNIKIT_TEST_TIME_SCALE: String(vmTimeScale(env)) },
      opts.binds,
      opts.keepLinks,
    ),
  );
  const initrd = join(work, 'initrd');
  writeFileSync(initrd, Buffer.concat([readFileSync(join(lab.dir, 'initramfs.cpio')), job.finish()]));
  const verbose = process.env.CNIKIT_VM_VERBOSE === '1';
  const mem = process.env.CNIKIT_VM_MEM || '3072';
  const cpus = process.env.CNIKIT_VM_CPUS || String(Math.min(availableParallelism(), 8));
  const qargs = [
    ...lab.spec.machine,
    '-accel',
    vmAccel(),
    '-m',
    mem,
    '-smp',
    cpus,
    '-nodefaults',
    '-no-user-config',
    '-display',
    'none',
    '-no-reboot',
    '-kernel',
    lab.kernel,
    '-initrd',
    initrd,
    '-append',
    `console=${lab.spec.console} loglevel=${verbose ? 7 : 3} panic=-1 no_timer_check mitigations=off rdinit=/init`,
    '-chardev',
    'stdio,id=con,signal=off',
    '-serial',
    'chardev:con',
    '-fsdev',
    'local,id=hostfs,path=/,security_model=passthrough,readonly=on,multidevs=remap',
    '-device',
    'virtio-9p-pci,fsdev=hostfs,mount_tag=host',
    '-device',
    'virtio-serial-pci',
    '-chardev',
    `socket,id=out,path=${join(work, 'out.sock')}`,
    '-device',
    'virtserialport,chardev=out,name=cnikit.stdout',
    '-chardev',
    `socket,id=err,path=${join(work, 'err.sock')}`,
    '-device',
    'virtserialport,chardev=err,name=cnikit.stderr',
    '-chardev',
    `socket,id=st,path=${join(work, 'st.sock')}`,
    '-device',
    'virtserialport,chardev=st,name=cnikit.status',
    '-device',
    'virtio-rng-pci',
    '-nic',
    'none',
  ];
  const out = opts.stdout ?? process.stdout;
  const err = opts.stderr ?? process.stderr;
  let status = '';
  let forwarded = false;
  let killed = false;
  // One unix socket per port; qemu connects to each at start-up, and the connections close when it exits.
  const servers = [];
  const streamsDone = [];
  const listen = (name, onData) =>
    new Promise((ok, fail) => {
      const server = createServer((conn) => {
        conn.on('data', onData);
        streamsDone.push(new Promise((r) => conn.on('close', r)));
        server.close();
      });
      servers.push(server);
      server.on('error', fail);
      server.listen(join(work, `${name}.sock`), ok);
    });
  await Promise.all([
    listen('out', (c) => {
      forwarded = true;
      out.write(c);
    }),
    listen('err', (c) => {
      forwarded = true;
      err.write(c);
    }),
    listen('st', (c) => {
      status += c.toString();
    }),
  ]);
  const child = spawn(lab.spec.qemu, qargs, { stdio: ['ignore', 'pipe', 'pipe'] });
  let consoleLog = '';
  const keep = (chunk) => {
    consoleLog = (consoleLog + chunk.toString()).slice(-20000);
    if (verbose) process.stderr.write(chunk);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const kill = () => {
    killed = true;
    child.kill('SIGKILL');
  };
  process.once('SIGINT', kill);
  process.once('SIGTERM', kill);
  const timeout = Number(process.env.CNIKIT_VM_TIMEOUT || 0);
  const timer = timeout > 0 ? setTimeout(kill, timeout * 1000) : undefined;
  return new Promise((resolvePromise) => {
    child.on('close', async (code, signal) => {
      await Promise.all(streamsDone);
      for (const server of servers) server.close();
      if (timer) clearTimeout(timer);
      process.off('SIGINT', kill);
      process.off('SIGTERM', kill);
      rmSync(work, { recursive: true, force: true });
      const m = /exit (\d+)/.exec(status);
      if (m) return resolvePromise(Number(m[1]));
      if (mayRetry && !killed && !forwarded && /Kernel panic/.test(consoleLog)) {
        err.write(
          `vm: the kernel panicked before the command started; booting again\n${consoleLog.slice(0, 300)}\n`,
        );
        return resolvePromise(RETRY);
      }
      err.write(
        `vm: the VM ended without the command's status (qemu ${signal ?? `exit ${code}`}); console:\n${consoleLog}\n`,
      );
      resolvePromise(125);
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opts = {};
  while (args.length && args[0].startsWith('--')) {
    const a = args.shift();
    if (a === '--') break;
    if (a === '--systemd') opts.systemd = true;
    else if (a === '--arch') opts.arch = args.shift();
    else if (a.startsWith('--arch=')) opts.arch = a.slice(7);
    else die(`unknown option ${a}`);
  }
  if (args.length === 0) die('usage: npm run vm -- <command> [args…]   (docs/kernel-lab.md)');
  runInVm(args, opts).then((code) => process.exit(code));
}
