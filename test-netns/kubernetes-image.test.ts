/**
 * The DaemonSet's image, run with podman the way deploy/kubernetes/daemonset.yaml runs it: the image is built from
 * dist-bin by scripts/image.ts (what `npm run release` does with the release executable; gzip -1 here for time),
 * loaded with `podman load` into a private store, and each container gets the DaemonSet's command, environment
 * (downward API node name, ConfigMap keys) and mounts, with every hostPath mapped into a scratch "host" tree and the
 * ConfigMap volume laid out as the kubelet does (..data symlink).
 *
 * Two differences from a node, both forced by this machine: the pods get no network (--network none instead of
 * hostNetwork: nothing here may touch the machine's root namespace), and "the host" whose pid 1 cnikit-hostns
 * enters is a podman container whose root is the scratch host tree (it shares its pid namespace with the serve
 * container, as hostPID shares the node's). This runc cannot set RLIMIT_NPROC/NOFILE above the current ones, so
 * every container gets --ulimit values below them; runc is named (podman would take crun when both are there).
 *
 * Checked: install-cni installs the executable, the client and a hard link per plugin, renders the conflist from
 * the ConfigMap with the node name and subnet and writes it last; a second run changes nothing; the serve container
 * runs the host tree's executable in the host mount namespace and answers on the hostPath socket: the readiness
 * probe passes, and a plugin name installed on the host, run as a runtime would, is served warm (loopback ADD in a
 * private network namespace through the service, state checked).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stableStateFile } from '@cnikit/testing';
import { parseAllDocuments } from 'yaml';
import { buildImage } from '../scripts/image.ts';
import { releaseVersion } from '../scripts/release.ts';
import { distBin } from './dist.ts';

const ROOT = join(import.meta.dirname, '..');
const DIST = distBin();
const VERSION = releaseVersion(ROOT);
const work = mkdtempSync(join(tmpdir(), 'cnikit-k8s-image-'));
const HOST = join(work, 'host');
const CM = join(work, 'configmap');
const IMG = join(work, 'img');
const EXE = join(IMG, 'cnikit');
const CLIENT = join(IMG, 'cnikit-client');
const tag = `${process.pid}`;
const PODMAN = [
  '--root',
  join(work, 'storage'),
  '--runroot',
  join(work, 'run'),
  '--storage-driver',
  'overlay',
  '--runtime',
  'runc',
];
const LIMITS = ['--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096'];
const NETNS = `cnikit-k8s-${tag}`;
let ref = '';

function note(msg: string): void {
  process.stderr.write(`[k8s-image] ${msg}\n`);
}

function sh(cmd: string, args: readonly string[], o: { input?: string; env?: NodeJS.ProcessEnv } = {}) {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, {
    input: o.input ?? '',
    env: o.env ?? process.env,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    timeout: 300_000,
  });
  return {
    status: r.status,
    stdout: r.stdout ?? '',
    stderr: `${r.stderr ?? ''}${r.error ?? ''}`,
    ms: performance.now() - t0,
  };
}

const podman = (...args: string[]) => sh('podman', [...PODMAN, ...args]);

interface Mount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}
interface Container {
  name: string;
  image: string;
  command: string[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string }; configMapKeyRef?: { key: string } };
  }[];
  volumeMounts?: Mount[];
  securityContext?: { privileged?: boolean };
  readinessProbe: { exec: { command: string[] } };
  livenessProbe?: { exec: { command: string[] } };
}
const yamlDocs = (f: string) =>
  parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'kubernetes', f), 'utf8')).map((d) => d.toJS());
const ds = yamlDocs('daemonset.yaml')[0] as {
  spec: {
    template: {
      spec: {
        initContainers: Container[];
        containers: Container[];
        volumes: { name: string; hostPath?: { path: string }; configMap?: { name: string } }[];
      };
    };
  };
};
const cm = yamlDocs('configmap.yaml')[0] as { data: Record<string, string> };
// no API server here to give the node its spec.podCIDR: the ConfigMap override a one-node cluster would set
cm.data['pod-cidr'] = '10.244.0.0/24';
const pod = ds.spec.template.spec;
const byName = (list: Container[], name: string) => list.find((c) => c.name === name) as Container;

/** podman arguments for a container's mounts and environment, as the kubelet would set them up. */
function podArgs(c: Container): string[] {
  const args: string[] = [];
  for (const m of c.volumeMounts ?? []) {
    const v = pod.volumes.find((x) => x.name === m.name);
    assert.ok(v, `volume ${m.name}`);
    const src = v.hostPath ? join(HOST, v.hostPath.path) : CM;
    mkdirSync(src, { recursive: true });
    args.push('-v', `${src}:${m.mountPath}${m.readOnly ? ':ro' : ''}`);
  }
  // what the kubelet gives: the pod's fields, the ConfigMap's keys (optional ones may be absent), and a value with
  // $(VAR) references to the variables defined before it
  const fields: Record<string, string> = {
    'spec.nodeName': 'node-1',
    'metadata.uid': 'pod-uid-1',
    'status.hostIP': '192.0.2.10',
  };
  const set: Record<string, string> = {};
  for (const e of c.env ?? []) {
    const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
    const key = e.valueFrom?.configMapKeyRef?.key;
    const v =
      e.value !== undefined
        ? e.value.replace(/\$\(([A-Za-z_]\w*)\)/g, (ref, n: string) => set[n] ?? ref)
        : fieldPath !== undefined
          ? fields[fieldPath]
          : key !== undefined
            ? cm.data[key]
            : undefined;
    assert.ok(
      fieldPath === undefined || v !== undefined,
      `${e.name}: field ${fieldPath} has no stand-in here`,
    );
    if (v === undefined) continue;
    set[e.name] = v;
    args.push('-e', `${e.name}=${v}`);
  }
  if (c.securityContext?.privileged) args.push('--privileged');
  return args;
}

before(() => {
  assert.ok(existsSync(join(DIST, 'cnikit')), 'dist-bin/cnikit: run npm run build first');
  // private copies: others may rebuild dist-bin/ while this runs
  mkdirSync(IMG);
  copyFileSync(join(DIST, 'cnikit'), EXE);
  copyFileSync(join(DIST, 'warm', 'cnikit-client'), CLIENT);
  // the kubelet's ConfigMap volume: files are symlinks into ..data, itself a symlink to a timestamped directory
  mkdirSync(join(CM, '..2026_11_26_00_00_00.1'), { recursive: true });
  for (const [k, v] of Object.entries(cm.data)) writeFileSync(join(CM, '..2026_11_26_00_00_00.1', k), v);
  symlinkSync('..2026_11_26_00_00_00.1', join(CM, '..data'));
  const items = pod.volumes.find((v) => v.configMap)?.configMap;
  assert.ok(items);
  symlinkSync('..data/10-cnikit.conflist', join(CM, '10-cnikit.conflist'));
  const t0 = performance.now();
  const image = buildImage({
    arch: { name: 'amd64', cc: 'cc', objdump: 'objdump' },
    exe: EXE,
    client: CLIENT,
    license: join(ROOT, 'LICENSE'),
    version: VERSION,
    epoch: 1_764_115_200,
    work,
    out: work,
    level: 1,
  });
  note(`image built in ${((performance.now() - t0) / 1000).toFixed(1)} s (${image.bytes} bytes at gzip -1)`);
  const load = podman('load', '-i', image.file);
  assert.equal(load.status, 0, load.stderr);
  note(`podman load: ${(load.ms / 1000).toFixed(1)} s`);
  ref = image.ref;
});

after(async () => {
  // the serve container first (it shares the node's namespaces: `rm -a` refuses the node while it exists), then the
  // node, whose pid 1 (sleep) ignores SIGTERM: killed outright if anything is left of it
  const nodePid = Number(podman('inspect', `cnikit-node-${tag}`, '--format', '{{.State.Pid}}').stdout.trim());
  podman('rm', '-f', '-t', '0', `cnikit-serve-${tag}`);
  podman('rm', '-f', '-t', '0', `cnikit-node-${tag}`);
  let left = '';
  try {
    left = readFileSync(`/proc/${nodePid}/cmdline`, 'utf8');
  } catch {}
  if (nodePid > 0 && left === '/usr/bin/sleep\u0000600\u0000') process.kill(nodePid, 'SIGKILL');
  podman('rm', '-f', '-a', '-t', '0');
  podman('rmi', '-a', '-f');
  sh('ip', ['netns', 'del', NETNS]);
  // conmon runs `podman … container cleanup` after a container exits, which mounts the store again: wait until no
  // process of this store is left, then unmount whatever is still mounted under the scratch tree (deepest first)
  const ours = () =>
    readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(work);
        } catch {
          return false;
        }
      });
  // a late cleanup can create the store again after it is removed: repeat until the tree stays gone for a second
  for (let round = 0; round < 10 && existsSync(work); round++) {
    for (let i = 0; i < 100 && ours().length > 0; i++) await new Promise((r) => setTimeout(r, 200));
    const mounts = readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[1] ?? '')
      .filter((m) => m.startsWith(`${work}/`))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) sh('umount', ['-l', m]);
    rmSync(work, { recursive: true, force: true });
    await new Promise((r) => setTimeout(r, 1000));
  }
  assert.equal(existsSync(work), false, `${work} is left behind`);
});

describe('the image run as the DaemonSet runs it (podman)', () => {
  test('podman loads the archive under the name the DaemonSet uses', () => {
    for (const c of [...pod.initContainers, ...pod.containers]) assert.equal(c.image, ref);
    const r = podman('image', 'inspect', ref, '--format', '{{.Architecture}} {{.Os}}');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'amd64 linux');
  });

  test('install-cni: files installed, links correct, conflist rendered and written last; idempotent', () => {
    const init = byName(pod.initContainers, 'install-cni');
    const r = podman('run', '--rm', '--network', 'none', ...LIMITS, ...podArgs(init), ref, ...init.command);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    note(`install-cni in the container: ${(r.ms / 1000).toFixed(1)} s (podman run included)`);
    const bin = join(HOST, 'opt/cni/bin');
    assert.ok(readFileSync(join(bin, 'cnikit')).equals(readFileSync(EXE)));
    assert.ok(readFileSync(join(bin, 'cnikit-client')).equals(readFileSync(CLIENT)));
    const plugins = sh(EXE, ['--list']).stdout.split('\n').filter(Boolean);
    assert.ok(plugins.includes('bridge') && plugins.includes('host-local'));
    const clientIno = statSync(join(bin, 'cnikit-client')).ino;
    for (const p of plugins)
      assert.equal(statSync(join(bin, p)).ino, clientIno, `${p} is a link to the client`);
    assert.equal(statSync(join(bin, 'cnitool')).ino, statSync(join(bin, 'cnikit')).ino);
    const confPath = join(HOST, 'etc/cni/net.d/10-cnikit.conflist');
    const conf = JSON.parse(readFileSync(confPath, 'utf8'));
    assert.equal(conf.plugins[0].ipam.ranges[0][0].subnet, cm.data['pod-cidr']);
    // no mtu key (the shipped ConfigMap leaves it to the template's default, the agent being off)
    assert.equal(conf.plugins[0].mtu, Number(cm.data.mtu ?? 1500));
    const confTime = statSync(confPath).mtimeMs;
    for (const f of readdirSync(bin))
      assert.ok(statSync(join(bin, f)).mtimeMs <= confTime, `${f} after the conflist`);
    assert.match(r.stdout, /write +\/host\/etc\/cni\/net\.d\/10-cnikit\.conflist: render/);
    // the pod restarts (a node reboot, an eviction): nothing changes
    const again = podman(
      'run',
      '--rm',
      '--network',
      'none',
      ...LIMITS,
      ...podArgs(init),
      ref,
      ...init.command,
    );
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /\nno changes\n/);
  });

  test('serve: the host executable in the host mount namespace answers on the hostPath socket', async () => {
    // "the node": a container whose root is the scratch host tree, with this machine's /usr (the dynamic loader, ip,
    // iptables, nft) and /etc/alternatives (which iptables backend the node uses); privileged like a node's root
    const links: [string, string][] = [
      ['bin', 'usr/bin'],
      ['sbin', 'usr/sbin'],
      ['lib', 'usr/lib'],
      ['lib64', 'usr/lib64'],
    ];
    for (const [l, t] of links) if (!existsSync(join(HOST, l))) symlinkSync(t, join(HOST, l));
    for (const d of ['usr', 'proc', 'sys', 'dev', 'tmp', 'etc', 'run/cnikit', 'run/netns', 'var/lib/cni'])
      mkdirSync(join(HOST, d), { recursive: true });
    // the node's /run/netns is this machine's (a runtime's netns paths resolve in the host mount namespace)
    assert.equal(sh('ip', ['netns', 'add', NETNS]).status, 0);
    const node = `cnikit-node-${tag}`;
    const n = podman(
      'run',
      '-d',
      '--name',
      node,
      '--network',
      'none',
      ...LIMITS,
      '-v',
      '/usr:/usr:ro',
      '-v',
      '/etc/alternatives:/etc/alternatives:ro',
      '--privileged',
      '-v',
      `${join(HOST, 'run/cnikit')}:/run/cnikit`,
      '-v',
      '/run/netns:/run/netns:rslave',
      '--rootfs',
      HOST,
      '/usr/bin/sleep',
      '600',
    );
    assert.equal(n.status, 0, n.stderr);
    const serve = byName(pod.containers, 'serve');
    const s = podman(
      'run',
      '-d',
      '--name',
      `cnikit-serve-${tag}`,
      '--network',
      `container:${node}`,
      '--pid',
      `container:${node}`,
      ...LIMITS,
      ...podArgs(serve),
      ref,
      ...serve.command,
    );
    assert.equal(s.status, 0, s.stderr);
    // the readiness probe, exactly as the kubelet runs it (exec in the serve container)
    let probe = podman('exec', `cnikit-serve-${tag}`, ...serve.readinessProbe.exec.command);
    for (let i = 0; i < 60 && probe.status !== 0; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      probe = podman('exec', `cnikit-serve-${tag}`, ...serve.readinessProbe.exec.command);
    }
    const logs = podman('logs', `cnikit-serve-${tag}`);
    assert.equal(
      probe.status,
      0,
      `${probe.stdout}${probe.stderr}\nserve logs:\n${logs.stdout}${logs.stderr}`,
    );
    assert.match(probe.stdout, /^ok: cnikit service pid \d+ on \/run\/cnikit\/cnikit\.sock/m);
    // the service is the host tree's executable running in the node's mount namespace (what cold execs see)
    const pidOf = (name: string) =>
      Number(podman('inspect', name, '--format', '{{.State.Pid}}').stdout.trim());
    const servePid = pidOf(`cnikit-serve-${tag}`);
    const nodePid = pidOf(node);
    assert.ok(servePid > 0 && nodePid > 0);
    assert.equal(
      readlinkSync(`/proc/${servePid}/ns/mnt`),
      readlinkSync(`/proc/${nodePid}/ns/mnt`),
      'serve runs in the host mount namespace',
    );
    assert.equal(statSync(`/proc/${servePid}/exe`).ino, statSync(join(HOST, 'opt/cni/bin/cnikit')).ino);
    const socket = join(HOST, 'run/cnikit/cnikit.sock');
    assert.ok(statSync(socket).isSocket());
    const check = sh(EXE, ['serve', '--check', '--socket', socket]);
    assert.equal(check.status, 0, check.stdout + check.stderr);
    // a runtime on the node execs /opt/cni/bin/loopback (the client): loopback ADD in a private netns, served warm
    const env = {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      CNIKIT_SOCKET: socket,
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'k8s-image-test',
      CNI_NETNS: `/run/netns/${NETNS}`,
      CNI_IFNAME: 'lo',
      CNI_PATH: join(HOST, 'opt/cni/bin'),
    };
    const input = '{"cniVersion":"1.1.0","name":"lo","type":"loopback"}';
    const add = sh(join(HOST, 'opt/cni/bin/loopback'), [], { env, input });
    assert.equal(add.status, 0, add.stdout + add.stderr);
    assert.equal(JSON.parse(add.stdout).interfaces[0].name, 'lo');
    const lo = JSON.parse(sh('ip', ['-n', NETNS, '-json', 'link', 'show', 'lo']).stdout);
    assert.ok(lo[0].flags.includes('UP'), 'loopback is up in the container namespace');
    // …and it is the service that runs it: the same client file without a cold executable beside it (no
    // fallback possible) gives the same answer for DEL
    const solo = join(work, 'solo');
    mkdirSync(solo);
    linkSync(join(HOST, 'opt/cni/bin/cnikit-client'), join(solo, 'loopback'));
    const del = sh(join(solo, 'loopback'), [], { env: { ...env, CNI_COMMAND: 'DEL' }, input });
    assert.equal(del.status, 0, del.stdout + del.stderr);
    const down = JSON.parse(sh('ip', ['-n', NETNS, '-json', 'link', 'show', 'lo']).stdout);
    assert.ok(!down[0].flags.includes('UP'), 'DEL through the service took loopback down');
    const noService = sh(join(solo, 'loopback'), [], {
      env: { ...env, CNIKIT_SOCKET: join(work, 'nothing.sock') },
      input,
    });
    assert.notEqual(noService.status, 0, 'without the service and without a cold executable the call fails');
    // the liveness probe, as the kubelet runs it
    const live = podman('exec', `cnikit-serve-${tag}`, ...(serve.livenessProbe?.exec.command ?? ['false']));
    assert.equal(live.status, 0, live.stdout + live.stderr);
  });

  test('the node state after ADD is the same byte for byte whether the in-cluster service or a cold exec ran it', () => {
    // a runtime on the node: the installed plugin name exec'd in the node's namespaces (podman exec into "the
    // node"), once with the service (warm) and once with the client told to find none (cold: it execs cnikit)
    const node = `cnikit-node-${tag}`;
    const conf = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'k8s-pod-network',
      type: 'bridge',
      bridge: 'cni0',
      isGateway: true,
      ipMasq: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.7.0/24' }]] },
    });
    const call = (command: string, socket: string, exe: string) =>
      spawnSync(
        'podman',
        [
          ...PODMAN,
          'exec',
          '-i',
          ...['-e', `CNI_COMMAND=${command}`, '-e', 'CNI_CONTAINERID=k8s-state', '-e', 'CNI_IFNAME=eth0'],
          ...[
            '-e',
            `CNI_NETNS=/run/netns/${NETNS}`,
            '-e',
            'CNI_PATH=/opt/cni/bin',
            '-e',
            `CNIKIT_SOCKET=${socket}`,
          ],
          node,
          exe,
        ],
        { input: conf, encoding: 'utf8', timeout: 120_000 },
      );
    const inNode = (...args: string[]) => {
      const r = podman('exec', node, ...args);
      assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const files = (dir: string): string[] =>
      existsSync(dir)
        ? readdirSync(dir, { recursive: true, encoding: 'utf8' })
            .sort()
            .map((f) => {
              const p = join(dir, f);
              return statSync(p).isFile() ? `${f}: ${stableStateFile(f, readFileSync(p, 'utf8'))}` : `${f}/`;
            })
        : [];
    // the node's state a plugin call leaves; IPv6 link-local addresses are left out (they follow each new
    // interface's random MAC, whoever creates it)
    const snapshot = () => ({
      varLibCni: files(join(HOST, 'var/lib/cni')),
      iptables: inNode('/usr/sbin/iptables-save')
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .map((l) => l.replace(/\[\d+:\d+\]/, '')),
      bridge: JSON.parse(inNode('/usr/sbin/ip', '-j', 'addr', 'show', 'cni0')).map(
        (l: { ifname: string; addr_info: { local: string; prefixlen: number }[] }) => ({
          ifname: l.ifname,
          addrs: l.addr_info
            .filter((a) => !a.local.startsWith('fe80:'))
            .map((a) => `${a.local}/${a.prefixlen}`),
        }),
      ),
      container: JSON.parse(sh('ip', ['-n', NETNS, '-j', 'addr', 'show', 'eth0']).stdout).map(
        (l: { addr_info: { local: string; prefixlen: number }[] }) =>
          l.addr_info.filter((a) => !a.local.startsWith('fe80:')).map((a) => `${a.local}/${a.prefixlen}`),
      ),
    });
    const clean = () => {
      rmSync(join(HOST, 'var/lib/cni'), { recursive: true, force: true });
      mkdirSync(join(HOST, 'var/lib/cni'));
      podman('exec', node, '/usr/sbin/ip', 'link', 'del', 'cni0');
    };
    const run = (socket: string, exe: string) => {
      clean();
      const add = call('ADD', socket, exe);
      assert.equal(add.status, 0, `${add.stdout}${add.stderr}`);
      const state = snapshot();
      const del = call('DEL', socket, exe);
      assert.equal(del.status, 0, `${del.stdout}${del.stderr}`);
      return { result: JSON.parse(add.stdout), state };
    };
    // warm: the client under a name with no cold executable beside it, so only the service can have answered;
    // cold: the installed name with the client pointed at no service, so it execs /opt/cni/bin/cnikit
    mkdirSync(join(HOST, 'solo'), { recursive: true });
    linkSync(join(HOST, 'opt/cni/bin/cnikit-client'), join(HOST, 'solo/bridge'));
    const warm = run('/run/cnikit/cnikit.sock', '/solo/bridge');
    const cold = run('/run/cnikit/none.sock', '/opt/cni/bin/bridge');
    assert.ok(
      warm.state.varLibCni.some((l) => l.startsWith('networks/k8s-pod-network/10.244.7.2: k8s-state')),
    );
    assert.ok(warm.state.iptables.some((l) => l.includes('CNI-') && l.includes('MASQUERADE')));
    assert.deepEqual(warm.state, cold.state);
    assert.deepEqual(warm.result.ips, cold.result.ips);
  });
});
