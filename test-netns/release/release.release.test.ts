/**
 * The release artifacts, end to end (`npm run test:release`; slow, so not part of `npm test`):
 *
 *   - `npm run release` twice into two directories: every artifact byte-identical; `sha256sum -c SHA256SUMS`
 *     passes, and fails for a tarball with one byte changed;
 *   - the tarball's shape: flat, `cnikit` the one regular executable, a hard link per plugin of this tree and
 *     cnitool, the warm client, LICENSE, README.md; owner 0/0, mtime = the commit date, gzip without name or time;
 *     the SBOM lists every plugin package and the Bun runtime;
 *   - amd64 in a minimal Debian 12 root without Node.js (roots.ts), extracted with `tar -C /opt/cni/bin -xzf`: every
 *     plugin's VERSION and a bridge + host-local + portmap chain (ADD, CHECK, DEL, DEL again) in private namespaces,
 *     with the kernel and firewall state checked after ADD and after DEL (chroot-driver.ts);
 *   - arm64 under qemu-user (qemu-aarch64-static, Debian's cross libc): every plugin's VERSION (identical to
 *     amd64's), `--version`, `--native-selftest`, and the in-process unit tests that need no namespace and start no
 *     process, run by the linux-aarch64 Bun with the release's arm64 addon;
 *   - arm64 in a VM (arm64-vm.ts: Debian's arm64 kernel under qemu-system-aarch64, TCG): every plugin's VERSION and a
 *     bridge + host-local ADD/CHECK/DEL on a real arm64 kernel, its state checked.
 * The timings go to stderr (`[release-test] …`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { discoverPlugins } from '../../scripts/build.ts';
import { imageIndexName } from '../../scripts/image.ts';
import { ARM64_SYSROOT, releaseVersion, sbomName, sourceInfo, tarballName } from '../../scripts/release.ts';
import { runArm64Vm } from './arm64-vm.ts';
import { amd64Root, arm64Root } from './roots.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const VERSION = releaseVersion(ROOT);
const PLUGINS = discoverPlugins(ROOT).map((p) => p.dir);
const work = mkdtempSync(join(tmpdir(), 'cnikit-release-test-'));
const outA = join(work, 'a');
const outB = join(work, 'b');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';

function note(msg: string): void {
  process.stderr.write(`[release-test] ${msg}\n`);
}

function sh(cmd: string, args: string[], o: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}) {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, {
    input: o.input ?? '',
    env: o.env ?? { PATH },
    cwd: o.cwd,
    encoding: 'utf8',
    maxBuffer: 256 << 20,
    timeout: 1_800_000,
  });
  return {
    status: r.status,
    stdout: r.stdout ?? '',
    stderr: `${r.stderr ?? ''}${r.error ?? ''}`,
    ms: performance.now() - t0,
  };
}

function releaseInto(out: string): number {
  const r = sh(
    process.execPath,
    ['--conditions=cnikit-source', '--import', 'tsx', 'scripts/release.ts', '--out', out],
    {
      cwd: ROOT,
      env: process.env,
    },
  );
  assert.equal(r.status, 0, `npm run release failed:\n${r.stderr}`);
  return r.ms;
}

const tgz = (arch: string, dir = outA) => join(dir, tarballName(arch as 'amd64', VERSION));

/** Extract a tarball with tar (as a node operator would) into a fresh directory. */
function extract(arch: string): string {
  const dir = join(work, `x-${arch}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  const r = sh('tar', ['-C', dir, '-xzf', tgz(arch)]);
  assert.equal(r.status, 0, r.stderr);
  return dir;
}

before(() => {
  const a = releaseInto(outA);
  note(`npm run release (amd64 + arm64): ${(a / 1000).toFixed(1)} s`);
  const b = releaseInto(outB);
  note(`second run: ${(b / 1000).toFixed(1)} s`);
});

after(() => rmSync(work, { recursive: true, force: true }));

describe('release artifacts', () => {
  test('two runs of one tree give byte-identical artifacts', () => {
    const names = readdirSync(outA).sort();
    assert.deepEqual(names, readdirSync(outB).sort());
    assert.deepEqual(
      names,
      [
        'SHA256SUMS',
        sbomName('amd64', VERSION),
        tarballName('amd64', VERSION),
        sbomName('arm64', VERSION),
        tarballName('arm64', VERSION),
        imageIndexName(VERSION),
      ].sort(),
    );
    const differ = names.filter((n) => !readFileSync(join(outA, n)).equals(readFileSync(join(outB, n))));
    assert.deepEqual(differ, [], `artifacts that differ between two runs: ${differ.join(', ')}`);
    for (const arch of ['amd64', 'arm64'])
      note(`${tarballName(arch as 'amd64', VERSION)}: ${statSync(tgz(arch)).size} bytes`);
  });

  test('sha256sum -c SHA256SUMS passes, and fails for a changed byte', () => {
    const ok = sh('sha256sum', ['-c', 'SHA256SUMS'], { cwd: outA });
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.equal(ok.stdout.split('\n').filter((l) => l.endsWith(': OK')).length, 5, ok.stdout);
    const bad = join(work, 'bad');
    mkdirSync(bad);
    for (const n of readdirSync(outA)) copyFileSync(join(outA, n), join(bad, n));
    const victim = join(bad, tarballName('arm64', VERSION));
    const bytes = readFileSync(victim);
    const at = bytes.length >> 1;
    bytes[at] = (bytes[at] as number) ^ 0xff;
    writeFileSync(victim, bytes);
    const r = sh('sha256sum', ['-c', 'SHA256SUMS'], { cwd: bad });
    assert.notEqual(r.status, 0);
    assert.match(r.stdout, new RegExp(`${tarballName('arm64', VERSION).replace(/\./g, '\\.')}: FAILED`));
  });

  for (const arch of ['amd64', 'arm64']) {
    test(`${arch} tarball: flat, one executable with a hard link per plugin and cnitool, owner 0, commit-date mtime`, () => {
      const list = sh('tar', ['--numeric-owner', '--full-time', '-tvzf', tgz(arch)]);
      assert.equal(list.status, 0, list.stderr);
      const lines = list.stdout.trim().split('\n');
      const entries = lines.map((l) => {
        const m = /^(\S+) (\d+)\/(\d+)\s+\d+ (\S+ \S+) (\S+)(?: link to (\S+))?$/.exec(l);
        assert.ok(m, `unexpected tar line: ${l}`);
        return {
          mode: m[1] as string,
          uid: m[2],
          gid: m[3],
          time: m[4] as string,
          name: m[5] as string,
          link: m[6],
        };
      });
      assert.equal(entries[0]?.name, 'cnikit');
      assert.equal(entries[0]?.mode, '-rwxr-xr-x');
      const links = entries
        .filter((e) => e.mode.startsWith('h'))
        .map((e) => e.name)
        .sort();
      assert.deepEqual(links, [...PLUGINS, 'cnitool'].sort());
      for (const e of entries.filter((e) => e.mode.startsWith('h'))) assert.equal(e.link, 'cnikit');
      const files = entries
        .filter((e) => e.mode.startsWith('-'))
        .map((e) => e.name)
        .sort();
      assert.deepEqual(files, ['LICENSE', 'README.md', 'cnikit', 'cnikit-client']);
      assert.ok(
        entries.every((e) => !e.name.includes('/')),
        'flat: no directories',
      );
      const epoch = sourceInfo(ROOT).epoch;
      const when = new Date(epoch * 1000)
        .toISOString()
        .replace('T', ' ')
        .replace(/\.000Z$/, '');
      for (const e of entries) {
        assert.equal(`${e.uid}/${e.gid}`, '0/0', e.name);
        assert.equal(e.time, when, e.name);
      }
      // gzip header: no file name flag, MTIME 0
      const head = readFileSync(tgz(arch)).subarray(0, 10);
      assert.equal((head[3] as number) & 0x08, 0, 'FNAME set');
      assert.equal(head.readUInt32LE(4), 0, 'gzip MTIME set');
      // the ELF machine of the executable and the client
      const dir = extract(arch);
      for (const f of ['cnikit', 'cnikit-client']) {
        const elf = readFileSync(join(dir, f)).subarray(0, 20);
        assert.equal(elf.readUInt16LE(18), arch === 'amd64' ? 62 : 183, `${f} e_machine`);
      }
      assert.equal(
        statSync(join(dir, 'bridge')).ino,
        statSync(join(dir, 'cnikit')).ino,
        'tar -x keeps the hard links',
      );
      const sbom = JSON.parse(readFileSync(join(outA, sbomName(arch as 'amd64', VERSION)), 'utf8'));
      assert.equal(sbom.bomFormat, 'CycloneDX');
      const names = new Set(sbom.components.map((c: { name: string }) => c.name));
      for (const p of PLUGINS) assert.ok(names.has(`@cnikit/plugin-${p}`), `SBOM lacks @cnikit/plugin-${p}`);
      assert.ok(names.has(arch === 'amd64' ? '@oven/bun-linux-x64' : '@oven/bun-linux-aarch64'));
      assert.ok(!names.has('esbuild') && !names.has('typescript'), 'build tools are not bundled');
      const floor = sbom.metadata.component.properties.find(
        (p: { name: string }) => p.name === 'cnikit:glibc-floor',
      );
      note(`${arch}: glibc floor ${floor?.value}`);
      assert.match(floor?.value ?? '', /^2\.\d+$/);
    });
  }
});

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}
interface ChrootState {
  addr: string;
  route: string;
  hostLinks: string;
  iptables: string;
  nft: string;
  ipam: string[];
}

describe('amd64 in a minimal Debian 12 root without Node.js', () => {
  let report: {
    files: string[];
    links: string[];
    nodeInRoot: string[];
    version: { status: number; stdout: string };
    VERSION: Record<string, { status: number; stdout: string; stderr: string; ms: number }>;
    chain: Record<
      'addBridge' | 'addPortmap' | 'checkBridge' | 'checkPortmap' | 'delPortmap' | 'delBridge' | 'delAgain',
      Run
    > &
      Record<'afterAdd' | 'afterDel', ChrootState>;
  };
  before(() => {
    const root = amd64Root();
    const r = sh(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        process.execPath,
        '--conditions=cnikit-source',
        '--import',
        'tsx',
        join(import.meta.dirname, 'chroot-driver.ts'),
        root,
        tgz('amd64'),
      ],
      { env: process.env, cwd: ROOT },
    );
    assert.equal(r.status, 0, r.stderr);
    report = JSON.parse(r.stdout);
  });

  test('the root has no Node.js; tar -x gives every plugin as a hard link', () => {
    assert.deepEqual(report.nodeInRoot, []);
    assert.deepEqual(report.links.sort(), [...PLUGINS, 'cnitool'].sort());
    assert.match(
      report.version.stdout,
      new RegExp(`^cnikit ${VERSION.replace(/\./g, '\\.')}\ncommit: [0-9a-f]{40}`),
    );
    assert.match(report.version.stdout, /^architecture: linux\/amd64$/m);
  });

  test('every plugin answers VERSION as the spec wants', () => {
    assert.deepEqual(Object.keys(report.VERSION).sort(), [...PLUGINS].sort());
    for (const [p, v] of Object.entries(report.VERSION)) {
      assert.equal(v.status, 0, `${p}: ${v.stderr}`);
      const j = JSON.parse(v.stdout);
      assert.equal(typeof j.cniVersion, 'string', p);
      assert.ok(Array.isArray(j.supportedVersions) && j.supportedVersions.length > 0, p);
    }
  });

  test('bridge + host-local + portmap: ADD, CHECK, DEL and DEL again, state checked', () => {
    const c = report.chain;
    assert.equal(c.addBridge.status, 0, c.addBridge.stdout + c.addBridge.stderr);
    const ip = JSON.parse(c.addBridge.stdout).ips[0].address as string;
    assert.match(ip, /^10\.99\.0\.\d+\/24$/);
    assert.equal(c.addPortmap.status, 0, c.addPortmap.stdout + c.addPortmap.stderr);
    const addrs = JSON.parse(c.afterAdd.addr) as Array<{
      ifname: string;
      addr_info: Array<{ local: string }>;
    }>;
    const eth0 = addrs.find((a) => a.ifname === 'eth0');
    assert.ok(eth0, 'eth0 in the container namespace');
    assert.ok(eth0.addr_info.some((a) => `${a.local}/24` === ip));
    const hostLinks = JSON.parse(c.afterAdd.hostLinks) as Array<{ ifname: string }>;
    assert.ok(
      hostLinks.some((l) => l.ifname === 'relbr0'),
      'bridge relbr0',
    );
    const fw = `${c.afterAdd.iptables}\n${c.afterAdd.nft}`;
    assert.match(fw, /CNI-HOSTPORT-DNAT/);
    assert.match(fw, /18080/);
    assert.ok(
      c.afterAdd.ipam.includes(ip.split('/')[0] as string),
      `host-local reservation: ${c.afterAdd.ipam}`,
    );
    assert.equal(c.checkBridge.status, 0, c.checkBridge.stdout + c.checkBridge.stderr);
    assert.equal(c.checkPortmap.status, 0, c.checkPortmap.stdout + c.checkPortmap.stderr);
    assert.equal(c.delPortmap.status, 0, c.delPortmap.stdout + c.delPortmap.stderr);
    assert.equal(c.delBridge.status, 0, c.delBridge.stdout + c.delBridge.stderr);
    assert.ok(!(JSON.parse(c.afterDel.addr) as Array<{ ifname: string }>).some((a) => a.ifname === 'eth0'));
    assert.doesNotMatch(`${c.afterDel.iptables}\n${c.afterDel.nft}`, /18080/);
    assert.ok(!c.afterDel.ipam.includes(ip.split('/')[0] as string), 'reservation released');
    assert.equal(c.delAgain.status, 0, `DEL is idempotent: ${c.delAgain.stdout}`);
    note(`amd64 chroot: bridge ADD ${c.addBridge.ms.toFixed(0)} ms, DEL ${c.delBridge.ms.toFixed(0)} ms`);
  });
});

/**
 * Left out by name: libcni's api tests execute plugin files (processes); netlink's netns tests read nsfs/procfs
 * files, which qemu-user emulates for its own process only.
 */
const NOT_IN_QEMU_USER = new Set(['packages/libcni/src/api.test.ts', 'packages/netlink/src/netns.test.ts']);

/** Unit test files that run on the target in one Bun process: no namespace, no child process, no kernel. */
function inProcessUnitTests(): string[] {
  const files: string[] = [];
  for (const base of ['packages', 'plugins']) {
    for (const d of readdirSync(join(ROOT, base)).sort()) {
      const src = join(ROOT, base, d, 'src');
      if (!existsSync(src)) continue;
      for (const f of readdirSync(src).sort()) {
        if (!f.endsWith('.test.ts') || f.endsWith('.kernel.test.ts') || f.endsWith('.release.test.ts'))
          continue;
        if (NOT_IN_QEMU_USER.has(`${base}/${d}/src/${f}`)) continue;
        const text = readFileSync(join(src, f), 'utf8');
        if (
          /node:child_process|spawn|execFile|process\.execPath|ensureBuilt|cniRunner|withSandbox|sandboxForFile|ip netns|Go reference|SIGKILL/.test(
            text,
          )
        )
          continue;
        files.push(join(base, d, 'src', f));
      }
    }
  }
  return files;
}

describe('arm64 under qemu-user', () => {
  const qemu = ['qemu-aarch64-static', '-L', ARM64_SYSROOT];
  test('every plugin answers VERSION exactly as on amd64; --version, --native-selftest', () => {
    const a = extract('amd64');
    const b = extract('arm64');
    let total = 0;
    for (const p of PLUGINS) {
      const env = { PATH, CNI_COMMAND: 'VERSION' };
      const x = sh(join(a, p), [], { input: '{"cniVersion":"1.0.0"}', env });
      const y = sh(qemu[0] as string, [...qemu.slice(1), join(b, p)], {
        input: '{"cniVersion":"1.0.0"}',
        env,
      });
      assert.equal(y.status, 0, `${p}: ${y.stderr}`);
      assert.equal(y.stdout, x.stdout, p);
      JSON.parse(y.stdout);
      total += y.ms;
    }
    note(
      `arm64 VERSION under qemu-user: ${(total / PLUGINS.length).toFixed(0)} ms per plugin (${PLUGINS.length} plugins)`,
    );
    const v = sh(qemu[0] as string, [...qemu.slice(1), join(b, 'cnikit'), '--version']);
    assert.equal(v.status, 0, v.stderr);
    assert.match(v.stdout, /^architecture: linux\/arm64$/m);
    assert.match(v.stdout, /^back-end: bun \d/m);
    const s = sh(qemu[0] as string, [...qemu.slice(1), join(b, 'cnikit'), '--native-selftest']);
    assert.equal(s.status, 0, s.stderr);
    assert.match(s.stdout, /"tid":\d+/);
  });

  test('the in-process unit tests pass under the linux-aarch64 Bun with the arm64 addon', () => {
    const files = inProcessUnitTests();
    assert.ok(files.length >= 10, `only ${files.length} unit test files selected`);
    const bunDir = readdirSync(join(ROOT, 'node_modules', '.cache', 'cnikit-release')).find((d) =>
      d.startsWith('@oven+bun-linux-aarch64-'),
    );
    assert.ok(bunDir, 'the release fetched the linux-aarch64 Bun');
    const bun = join(ROOT, 'node_modules', '.cache', 'cnikit-release', bunDir, 'package', 'bin', 'bun');
    const r = sh(
      qemu[0] as string,
      [
        ...qemu.slice(1),
        bun,
        'test',
        '--timeout=120000',
        '--conditions=cnikit-source',
        ...files.map((f) => `./${f}`),
      ],
      {
        cwd: ROOT,
        env: {
          PATH,
          HOME: work,
          CNIKIT_NATIVE_PATH: join(ROOT, 'build', 'release', 'arm64', 'cnikit_sys.node'),
        },
      },
    );
    const out = r.stdout + r.stderr;
    const pass = Number(/(\d+) pass/.exec(out)?.[1] ?? 0);
    const fail = Number(/(\d+) fail/.exec(out)?.[1] ?? -1);
    note(
      `arm64 unit tests under qemu-user: ${files.length} files, ${pass} pass, ${fail} fail, ${(r.ms / 1000).toFixed(1)} s`,
    );
    assert.equal(fail, 0, out.slice(-4000));
    assert.equal(r.status, 0, out.slice(-4000));
    assert.ok(pass > 100, `${pass} tests passed`);
  });
});

describe('arm64 in a VM (Debian arm64 kernel, qemu-system-aarch64)', () => {
  test('every plugin answers VERSION; bridge + host-local ADD, CHECK, DEL on a real arm64 kernel', async () => {
    const root = arm64Root();
    const conf = {
      cniVersion: '1.0.0',
      name: 'relnet',
      type: 'bridge',
      bridge: 'relbr0',
      isGateway: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.77.0.0/24' }]], routes: [{ dst: '0.0.0.0/0' }] },
    };
    const confText = JSON.stringify(conf);
    const job = [
      'B=/bin/busybox',
      'O=/job/out',
      'export PATH=/usr/sbin:/usr/bin:/sbin:/bin',
      'up() { $B cut -d" " -f1 /proc/uptime; }',
      "# busybox sh runs its own applets first: the root's iproute2 by path",
      'IP=/bin/ip',
      '$IP link set lo up',
      '$IP netns add h && $IP netns add c && $IP -n h link set lo up || exit 10',
      's=$(up); $B tar -C /opt/cni/bin -xzf /job/release.tgz || exit 11; echo "extract $s $(up)" >>$O/times',
      '$B ls -li /opt/cni/bin >$O/ls.txt',
      'echo "version-start $(up)" >>$O/times',
      `for p in ${PLUGINS.join(' ')}; do`,
      '  echo \'{"cniVersion":"1.0.0"}\' | CNI_COMMAND=VERSION /opt/cni/bin/$p >$O/VERSION-$p.json 2>$O/VERSION-$p.err',
      '  echo $? >$O/VERSION-$p.status',
      'done',
      'echo "version-end $(up)" >>$O/times',
      '/opt/cni/bin/cnikit --version >$O/version.txt 2>&1',
      'export CNI_CONTAINERID=vm1 CNI_NETNS=/run/netns/c CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin',
      'cni() {',
      '  s=$(up); CNI_COMMAND=$1 $IP netns exec h /opt/cni/bin/bridge <$2 >$O/$3.json 2>$O/$3.err; echo $? >$O/$3.status',
      '  echo "$3 $s $(up)" >>$O/times',
      '}',
      'cni ADD /job/conf.json add',
      '$IP -n c -json addr show >$O/addr-add.json',
      '$IP -n h -json link show >$O/hostlinks-add.json',
      'ls /var/lib/cni/networks/relnet >$O/ipam-add.txt 2>&1',
      'cat /job/conf-head.txt $O/add.json /job/conf-tail.txt >/tmp/check.json',
      'cni CHECK /tmp/check.json check',
      'cni DEL /tmp/check.json del',
      '$IP -n c -json addr show >$O/addr-del.json',
      'ls /var/lib/cni/networks/relnet >$O/ipam-del.txt 2>&1',
      'cni DEL /job/conf.json del2',
      'exit 0',
      '',
    ].join('\n');
    const vm = await runArm64Vm({
      root,
      tarball: tgz('arm64'),
      jobScript: job,
      files: {
        'conf.json': confText,
        'conf-head.txt': `${confText.slice(0, -1)},"prevResult":`,
        'conf-tail.txt': '}',
      },
    });
    try {
      const read = (f: string) => readFileSync(join(vm.out, f), 'utf8');
      assert.equal(
        vm.status,
        0,
        `VM job: ${vm.status}\n${vm.console.slice(-3000)}\n${existsSync(join(vm.out, 'job.log')) ? read('job.log') : ''}`,
      );
      // busybox tar on arm64 recreated the hard links: every plugin name shares cnikit's inode
      const inode = new Map(
        read('ls.txt')
          .trim()
          .split('\n')
          .map((l) => l.trim().split(/\s+/))
          .map((f) => [f.at(-1) as string, f[0] as string]),
      );
      for (const p of [...PLUGINS, 'cnitool'])
        assert.equal(inode.get(p), inode.get('cnikit'), `${p} is a hard link`);
      for (const p of PLUGINS) {
        assert.equal(read(`VERSION-${p}.status`).trim(), '0', `${p}: ${read(`VERSION-${p}.err`)}`);
        assert.ok(Array.isArray(JSON.parse(read(`VERSION-${p}.json`)).supportedVersions), p);
      }
      assert.match(read('version.txt'), /^architecture: linux\/arm64$/m);
      assert.equal(read('add.status').trim(), '0', read('add.json') + read('add.err'));
      const ip = JSON.parse(read('add.json')).ips[0].address as string;
      assert.match(ip, /^10\.77\.0\.\d+\/24$/);
      const eth0 = (
        JSON.parse(read('addr-add.json')) as Array<{ ifname: string; addr_info: Array<{ local: string }> }>
      ).find((a) => a.ifname === 'eth0');
      assert.ok(
        eth0?.addr_info.some((a) => `${a.local}/24` === ip),
        'eth0 has the address',
      );
      assert.ok(
        (JSON.parse(read('hostlinks-add.json')) as Array<{ ifname: string }>).some(
          (l) => l.ifname === 'relbr0',
        ),
      );
      assert.ok(
        read('ipam-add.txt')
          .split('\n')
          .includes(ip.split('/')[0] as string),
      );
      assert.equal(read('check.status').trim(), '0', read('check.json') + read('check.err'));
      assert.equal(read('del.status').trim(), '0', read('del.json') + read('del.err'));
      assert.ok(
        !(JSON.parse(read('addr-del.json')) as Array<{ ifname: string }>).some((a) => a.ifname === 'eth0'),
      );
      assert.ok(
        !read('ipam-del.txt')
          .split('\n')
          .includes(ip.split('/')[0] as string),
      );
      assert.equal(read('del2.status').trim(), '0', 'DEL again');
      const times = Object.fromEntries(
        read('times')
          .trim()
          .split('\n')
          .map((l) => l.split(' '))
          .map(([k, a, b]) => [k, b === undefined ? Number(a) : Number(b) - Number(a)]),
      ) as Record<string, number>;
      note(
        `arm64 VM: boot ${((vm.bootMs ?? 0) / 1000).toFixed(1)} s, whole run ${(vm.wallMs / 1000).toFixed(1)} s; ` +
          `VERSION ${(((times['version-end'] ?? 0) - (times['version-start'] ?? 0)) / PLUGINS.length).toFixed(2)} s per plugin; ` +
          `ADD ${times.add?.toFixed(2)} s, CHECK ${times.check?.toFixed(2)} s, DEL ${times.del?.toFixed(2)} s`,
      );
    } finally {
      vm.cleanup();
    }
  });
});
