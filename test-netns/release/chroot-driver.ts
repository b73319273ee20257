/**
 * Runs INSIDE a private mount namespace (`unshare --mount --propagation private`, started by
 * release.release.test.ts), so every mount made here disappears with this process and the cached root stays as it
 * was:
 *
 *   node … chroot-driver.ts <debian-root> <tarball>   → one JSON report on stdout
 *
 * The tarball is extracted with `tar -C <root>/opt/cni/bin -xzf` (a tmpfs there) the way a node operator does it;
 * then, with everything run by the root's own tools under chroot (its iproute2, iptables, nft — no Node.js there):
 * every plugin's VERSION, `cnikit --version`, and a bridge + host-local + portmap chain (ADD, CHECK, DEL, each
 * plugin its own process as a runtime runs it) between two network namespaces created in the root. The kernel state
 * after ADD and after DEL is captured for the test to check.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const [root, tarball] = process.argv.slice(2) as [string, string];
const BIN = '/opt/cni/bin';
const HOST_NS = 'relh';
const CTR_NS = 'relc';

interface Out {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function sh(cmd: string, args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Out {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, {
    input: opts.input ?? '',
    encoding: 'utf8',
    env: opts.env ?? { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    maxBuffer: 64 << 20,
  });
  return {
    status: r.status,
    stdout: r.stdout ?? '',
    stderr: `${r.stderr ?? ''}${r.error ? String(r.error) : ''}`,
    ms: performance.now() - t0,
  };
}

function must(cmd: string, args: string[]): string {
  const r = sh(cmd, args);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A command of the Debian root, under chroot. */
const inRoot = (args: string[], opts: { input?: string; env?: Record<string, string> } = {}) =>
  sh('/usr/sbin/chroot', [root, ...args], opts);

// the root as a mount point of its own (`ip netns exec` in the chroot makes "/" a slave mount), then its mounts
must('mount', ['--bind', root, root]);
for (const [dir, mount] of [
  ['proc', ['-t', 'proc', 'proc']],
  ['sys', ['-t', 'sysfs', 'sys']],
  ['dev', ['--rbind', '/dev']],
  ['run', ['-t', 'tmpfs', '-o', 'mode=0755', 'run']],
  ['tmp', ['-t', 'tmpfs', '-o', 'mode=1777', 'tmp']],
  ['var/lib/cni', ['-t', 'tmpfs', '-o', 'mode=0755', 'cni']],
  ['opt/cni/bin', ['-t', 'tmpfs', '-o', 'mode=0755', 'bin']],
] as const) {
  mkdirSync(join(root, dir), { recursive: true });
  must('mount', [...mount, join(root, dir)]);
}
must('tar', ['-C', join(root, BIN), '-xzf', tarball]);

const files = readdirSync(join(root, BIN)).sort();
const mainIno = statSync(join(root, BIN, 'cnikit')).ino;
const links = files.filter((f) => f !== 'cnikit' && statSync(join(root, BIN, f)).ino === mainIno);
const plugins = links.filter((f) => f !== 'cnitool');
const report: Record<string, unknown> = {
  files,
  links,
  nodeInRoot: ['usr/bin/node', 'usr/local/bin/node', 'usr/bin/nodejs'].filter((p) => {
    try {
      statSync(join(root, p));
      return true;
    } catch {
      return false;
    }
  }),
};

report.version = inRoot([`${BIN}/cnikit`, '--version']);
report.VERSION = Object.fromEntries(
  plugins.map((p) => [
    p,
    inRoot([`${BIN}/${p}`], { input: '{"cniVersion":"1.0.0"}', env: { CNI_COMMAND: 'VERSION' } }),
  ]),
);

must('chroot', [root, 'ip', 'netns', 'add', HOST_NS]);
must('chroot', [root, 'ip', 'netns', 'add', CTR_NS]);
try {
  must('chroot', [root, 'ip', '-n', HOST_NS, 'link', 'set', 'lo', 'up']);
  const env = (cmd: string) => ({
    CNI_COMMAND: cmd,
    CNI_CONTAINERID: 'release-test-1',
    CNI_NETNS: `/run/netns/${CTR_NS}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: BIN,
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
  });
  /** One plugin process in the host namespace, through the root's `ip netns exec`, like a runtime's exec. */
  const plugin = (name: string, cmd: string, conf: object) =>
    inRoot(['ip', 'netns', 'exec', HOST_NS, `${BIN}/${name}`], {
      input: JSON.stringify(conf),
      env: env(cmd),
    });
  const bridge = {
    cniVersion: '1.0.0',
    name: 'relnet',
    type: 'bridge',
    bridge: 'relbr0',
    isGateway: true,
    ipMasq: true,
    ipam: { type: 'host-local', ranges: [[{ subnet: '10.99.0.0/24' }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
  const portmap = {
    cniVersion: '1.0.0',
    name: 'relnet',
    type: 'portmap',
    capabilities: { portMappings: true },
    runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: 'tcp' }] },
  };
  const state = () => ({
    addr: inRoot(['ip', '-n', CTR_NS, '-json', 'addr', 'show']).stdout,
    route: inRoot(['ip', '-n', CTR_NS, '-json', 'route', 'show']).stdout,
    hostLinks: inRoot(['ip', '-n', HOST_NS, '-json', 'link', 'show']).stdout,
    iptables: inRoot(['ip', 'netns', 'exec', HOST_NS, 'iptables-save']).stdout,
    nft: inRoot(['ip', 'netns', 'exec', HOST_NS, 'nft', 'list', 'ruleset']).stdout,
    ipam: (() => {
      try {
        return readdirSync(join(root, 'var/lib/cni/networks/relnet')).sort();
      } catch {
        return [];
      }
    })(),
  });
  const addBridge = plugin('bridge', 'ADD', bridge);
  let prev: unknown = {};
  try {
    prev = JSON.parse(addBridge.stdout);
  } catch {
    prev = {};
  }
  const addPortmap = plugin('portmap', 'ADD', { ...portmap, prevResult: prev });
  let final: unknown = prev;
  try {
    final = JSON.parse(addPortmap.stdout);
  } catch {
    final = prev;
  }
  const afterAdd = state();
  const checkBridge = plugin('bridge', 'CHECK', { ...bridge, prevResult: final });
  const checkPortmap = plugin('portmap', 'CHECK', { ...portmap, prevResult: final });
  const delPortmap = plugin('portmap', 'DEL', { ...portmap, prevResult: final });
  const delBridge = plugin('bridge', 'DEL', { ...bridge, prevResult: final });
  const afterDel = state();
  const delAgain = plugin('bridge', 'DEL', bridge);
  report.chain = {
    addBridge,
    addPortmap,
    afterAdd,
    checkBridge,
    checkPortmap,
    delPortmap,
    delBridge,
    afterDel,
    delAgain,
  };
} finally {
  sh('chroot', [root, 'ip', 'netns', 'del', CTR_NS]);
  sh('chroot', [root, 'ip', 'netns', 'del', HOST_NS]);
}
process.stdout.write(`${JSON.stringify(report)}\n`);
