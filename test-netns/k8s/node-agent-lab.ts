/**
 * A small lab for the node agent: the control plane's namespace (scripts/k8s/control-plane.ts) doubles as the
 * underlay hub and router (a bridge per underlay subnet, forwarding on, the `kubernetes` Service address 10.96.0.1:443
 * DNATed to the apiserver's 127.0.0.1:6443), "nodes" are network namespaces with a veth into one of its bridges, each
 * node has one "pod" namespace (a veth, the node's pod gateway .1, the pod .2, dual stack), and an "outside"
 * namespace sits beyond the hub (203.0.113.0/24). The agent runs as `cnikit serve --node-agent` inside a node
 * namespace with a service-account token made by the TokenRequest API for the ServiceAccount of rbac.yaml.
 * Everything is argument arrays (no shell) and is removed by destroy().
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRoutes, withNetns } from '@cnikit/netlink';
import type { ControlPlane } from '../../scripts/k8s/control-plane.ts';
import { DIST, ROOT } from '../dist.ts';

export const CLUSTER_CIDR = '10.244.0.0/16,fd00:10:244::/56';
export const OUTSIDE_IP = '203.0.113.2';
export const ECHO_PORT = 7171;

export function sh(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, timeout: 60_000 });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${r.stderr}${r.error ?? ''}`);
  return r.stdout;
}

export const ipn = (ns: string, ...args: string[]) => sh('ip', ['-n', ns, ...args]);

export interface LabNode {
  name: string;
  ns: string;
  podNs: string;
  ip4: string;
  ip6: string;
  pod4: string;
  pod6: string;
  podCidrs: [string, string];
  agent?: ChildProcess;
}

export class Lab {
  readonly cp: ControlPlane;
  readonly tag: string;
  readonly dir: string;
  readonly nodes = new Map<string, LabNode>();
  readonly namespaces: string[] = [];
  token = '';

  constructor(cp: ControlPlane, tag: string, dir: string) {
    this.cp = cp;
    this.tag = tag;
    this.dir = dir;
  }

  kubectl(args: string[], input?: string): string {
    const r = this.cp.kubectl(args, input);
    if (r.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }

  /** The hub: bridges for the underlay subnets, forwarding, the Service DNAT, the outside namespace. */
  setupHub(): void {
    const hub = this.cp.netns;
    for (const [br, v4, v6] of [
      ['br50', '192.168.50.1/24', 'fd00:50::1/64'],
      ['br61', '192.168.61.1/24', 'fd00:61::1/64'],
    ] as const) {
      ipn(hub, 'link', 'add', br, 'type', 'bridge');
      ipn(hub, 'link', 'set', br, 'up');
      ipn(hub, 'addr', 'add', v4, 'dev', br);
      ipn(hub, 'addr', 'add', v6, 'dev', br, 'nodad');
      sh('ip', ['netns', 'exec', hub, 'sysctl', '-qw', `net.ipv4.conf.${br}.route_localnet=1`]);
    }
    sh('ip', ['netns', 'exec', hub, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    sh('ip', ['netns', 'exec', hub, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1']);
    sh('ip', [
      'netns',
      'exec',
      hub,
      'iptables',
      '-w',
      '-t',
      'nat',
      '-A',
      'PREROUTING',
      '-d',
      '10.96.0.1/32',
      '-p',
      'tcp',
      '--dport',
      '443',
      '-j',
      'DNAT',
      '--to-destination',
      '127.0.0.1:6443',
    ]);
    const out = `${this.tag}-out`;
    this.addNs(out);
    ipn(hub, 'link', 'add', 'out0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', out);
    ipn(hub, 'addr', 'add', '203.0.113.1/24', 'dev', 'out0');
    ipn(hub, 'link', 'set', 'out0', 'up');
    ipn(out, 'addr', 'add', `${OUTSIDE_IP}/24`, 'dev', 'eth0');
    ipn(out, 'link', 'set', 'eth0', 'up');
    ipn(out, 'link', 'set', 'lo', 'up');
    ipn(out, 'route', 'add', 'default', 'via', '203.0.113.1');
  }

  addNs(ns: string): void {
    sh('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
  }

  /** A node namespace on bridge `br` (br50: 192.168.50.0/24, br61: 192.168.61.0/24) with its pod namespace. */
  addNode(name: string, i: number, br: 'br50' | 'br61' = 'br50'): LabNode {
    const net = br === 'br50' ? 50 : 61;
    const ns = `${this.tag}-${name}`;
    const podNs = `${ns}-pod`;
    const n: LabNode = {
      name,
      ns,
      podNs,
      ip4: `192.168.${net}.${10 + i}`,
      ip6: `fd00:${net}::${10 + i}`,
      pod4: `10.244.${i}.2`,
      pod6: `fd00:10:244:${i}::2`,
      podCidrs: [`10.244.${i}.0/24`, `fd00:10:244:${i}::/64`],
    };
    this.addNs(ns);
    this.addNs(podNs);
    const hub = this.cp.netns;
    const port = `p-${name}`.slice(0, 15);
    ipn(hub, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
    ipn(hub, 'link', 'set', port, 'master', br);
    ipn(hub, 'link', 'set', port, 'up');
    ipn(ns, 'link', 'set', 'lo', 'up');
    ipn(ns, 'link', 'set', 'eth0', 'up');
    ipn(ns, 'addr', 'add', `${n.ip4}/24`, 'dev', 'eth0');
    ipn(ns, 'addr', 'add', `${n.ip6}/64`, 'dev', 'eth0', 'nodad');
    ipn(ns, 'route', 'add', 'default', 'via', `192.168.${net}.1`);
    ipn(ns, 'route', 'add', 'default', 'via', `fd00:${net}::1`);
    sh('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    sh('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1']);
    ipn(ns, 'link', 'add', 'vpod', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', podNs);
    ipn(ns, 'link', 'set', 'vpod', 'up');
    ipn(ns, 'addr', 'add', `10.244.${i}.1/24`, 'dev', 'vpod');
    ipn(ns, 'addr', 'add', `fd00:10:244:${i}::1/64`, 'dev', 'vpod', 'nodad');
    ipn(podNs, 'link', 'set', 'lo', 'up');
    ipn(podNs, 'link', 'set', 'eth0', 'up');
    ipn(podNs, 'addr', 'add', `${n.pod4}/24`, 'dev', 'eth0');
    ipn(podNs, 'addr', 'add', `${n.pod6}/64`, 'dev', 'eth0', 'nodad');
    ipn(podNs, 'route', 'add', 'default', 'via', `10.244.${i}.1`);
    ipn(podNs, 'route', 'add', 'default', 'via', `fd00:10:244:${i}::1`);
    this.nodes.set(name, n);
    return n;
  }

  /** The Node object (status with the InternalIPs is accepted on create; no kubelet, no controller manager). */
  createNodeObject(n: LabNode): void {
    this.kubectl(
      ['create', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: n.name },
        spec: { podCIDR: n.podCidrs[0], podCIDRs: n.podCidrs },
        status: {
          addresses: [
            { type: 'InternalIP', address: n.ip4 },
            { type: 'InternalIP', address: n.ip6 },
            { type: 'Hostname', address: n.name },
          ],
        },
      }),
    );
  }

  /** rbac.yaml applied, and a token of its ServiceAccount (TokenRequest API) for the agents. */
  serviceAccount(): void {
    this.kubectl(['apply', '-f', join(ROOT, 'deploy/kubernetes/rbac.yaml')]);
    const r = JSON.parse(
      this.kubectl(
        ['create', '--raw', '/api/v1/namespaces/kube-system/serviceaccounts/cnikit/token', '-f', '-'],
        JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 7200 },
        }),
      ),
    ) as { status: { token: string } };
    this.token = r.status.token;
    writeFileSync(join(this.dir, 'token'), this.token, { mode: 0o600 });
  }

  agentEnv(n: LabNode, extra: Record<string, string>): Record<string, string> {
    return {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      NODE_NAME: n.name,
      CNIKIT_NODE_AGENT: 'on',
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      KUBERNETES_SERVICE_PORT: '443',
      CNIKIT_SA_TOKEN_FILE: join(this.dir, 'token'),
      CNIKIT_SA_CA_FILE: join(this.cp.pki, 'ca.crt'),
      CNIKIT_CLUSTER_CIDR: CLUSTER_CIDR,
      CNIKIT_NODE_AGENT_RESYNC_SECONDS: '2',
      CNIKIT_METRICS_ADDRESS: '127.0.0.1:9808',
      ...extra,
    };
  }

  /** `cnikit serve --node-agent` in the node's namespace; its log in dir/<node>.log. */
  startAgent(n: LabNode, extra: Record<string, string> = {}): ChildProcess {
    const d = join(this.dir, n.name);
    mkdirSync(d, { recursive: true, mode: 0o700 });
    const log = openSync(join(this.dir, `${n.name}.log`), 'a');
    const p = spawn(
      'ip',
      [
        'netns',
        'exec',
        n.ns,
        join(DIST, 'cnikit'),
        'serve',
        '--socket',
        join(d, 'cnikit.sock'),
        '--node-agent',
      ],
      { stdio: ['ignore', log, log], env: this.agentEnv(n, extra) },
    );
    closeSync(log);
    n.agent = p;
    return p;
  }

  async stopAgent(n: LabNode, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const p = n.agent;
    n.agent = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise<void>((r) => p.once('exit', () => r()));
    // `ip netns exec` execs the program: the pid is the agent's
    p.kill(signal);
    const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(t);
  }

  log(n: LabNode): string {
    try {
      return readFileSync(join(this.dir, `${n.name}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  /** GET http://127.0.0.1:PORT/PATH inside the node's namespace: [status, body]. */
  http(n: LabNode, port: number, path: string): [number, string] {
    const r = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        n.ns,
        'curl',
        '-s',
        '-m',
        '3',
        '-w',
        '\n%{http_code}',
        `http://127.0.0.1:${port}${path}`,
      ],
      { encoding: 'utf8', timeout: 10_000 },
    );
    const out = r.stdout ?? '';
    const i = out.lastIndexOf('\n');
    return [Number(out.slice(i + 1)) || 0, out.slice(0, i)];
  }

  /** Destinations of the agent's routes in the node's namespace, read in-process (netlink: no process start). */
  routeDsts(n: LabNode): Set<string> {
    return withNetns(
      `/run/netns/${n.ns}`,
      () =>
        new Set(
          listRoutes()
            .filter((r) => r.protocol === 157)
            .map((r) => r.dst),
        ),
    );
  }

  /** The agent's routes (protocol 157) in the node's namespace: "dst via gw dev". */
  routes(n: LabNode): string[] {
    const out: string[] = [];
    for (const f of ['-4', '-6']) {
      const j = JSON.parse(sh('ip', ['-n', n.ns, '-json', f, 'route', 'show', 'proto', '157'])) as Array<{
        dst: string;
        gateway?: string;
        dev: string;
      }>;
      for (const r of j) out.push(`${r.dst} via ${r.gateway} dev ${r.dev}`);
    }
    return out.sort();
  }

  /**
   * `from` reaches `to`'s pod at `ip` over UDP and TCP with its own pod address as the source (no ICMP: the machine
   * has no ping); needs startEchoes().
   */
  reaches(from: LabNode, ip: string): boolean {
    const src = ip.includes(':') ? from.pod6 : from.pod4;
    return (
      askSource(from.podNs, ip, ECHO_PORT) === src && askSource(from.podNs, ip, ECHO_PORT, 'tcp') === src
    );
  }

  readonly echoes = new Map<string, { kill(): void }>();

  /** A whoami server in every pod namespace that has none yet. */
  async startEchoes(): Promise<void> {
    for (const n of this.nodes.values())
      if (!this.echoes.has(n.podNs)) this.echoes.set(n.podNs, await whoami(n.podNs, ECHO_PORT));
  }

  async destroy(): Promise<void> {
    for (const e of this.echoes.values()) e.kill();
    for (const n of this.nodes.values()) await this.stopAgent(n, 'SIGKILL');
    for (const ns of this.namespaces.reverse()) spawnSync('ip', ['netns', 'del', ns]);
  }
}

/**
 * A server in `ns` on `port` (TCP and UDP, IPv4 and IPv6) answering with the source address it saw: the reply
 * proves the path both ways and says whether the source was rewritten.
 */
export async function whoami(ns: string, port: number): Promise<{ kill(): void }> {
  const code = `const d = require('node:dgram'), net = require('node:net');
    for (const [t, a] of [['udp4', '0.0.0.0'], ['udp6', '::']]) {
      const s = d.createSocket(t === 'udp6' ? { type: t, ipv6Only: true } : t);
      s.on('message', (m, r) => s.send(r.address, r.port, r.address));
      s.bind(${port}, a, () => console.log('up ' + t));
    }
    net.createServer((c) => c.end(c.remoteAddress.replace(/^::ffff:/, ''))).listen(${port}, '::', () => console.log('up tcp'));
    setTimeout(() => process.exit(2), 600000).unref();`;
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let ups = 0;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => {
      p.kill();
      reject(new Error(`whoami in ${ns} did not start`));
    }, 10_000);
    p.once('exit', () => clearTimeout(t));
    p.stdout.on('data', (b: Buffer) => {
      ups += (b.toString().match(/up /g) ?? []).length;
      if (ups >= 3) {
        clearTimeout(t);
        resolve();
      }
    });
    p.on('exit', (c) => reject(new Error(`whoami exited ${c}`)));
  });
  return { kill: () => p.kill() };
}

/** One UDP datagram (or one TCP connection) from `ns` to ip:port; the source address the server saw, or ''. */
export function askSource(ns: string, ip: string, port: number, proto: 'udp' | 'tcp' = 'udp'): string {
  const code =
    proto === 'udp'
      ? `const s = require('node:dgram').createSocket('${ip.includes(':') ? 'udp6' : 'udp4'}');
    s.on('message', (m) => { process.stdout.write(m.toString()); process.exit(0); });
    s.send('who', ${port}, '${ip}'); setTimeout(() => process.exit(0), 2000);`
      : `const c = require('node:net').connect(${port}, '${ip}'); let b = '';
    c.on('data', (d) => b += d); c.on('end', () => { process.stdout.write(b); process.exit(0); });
    c.on('error', () => process.exit(0)); setTimeout(() => process.exit(0), 2000);`;
  return spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: 10_000,
  }).stdout;
}

/** `count` UDP datagrams from `ns` to ip:port every `intervalMs`; how many were answered. */
export function udpStream(
  ns: string,
  ip: string,
  port: number,
  count: number,
  intervalMs: number,
): Promise<number> {
  const code = `const s = require('node:dgram').createSocket('${ip.includes(':') ? 'udp6' : 'udp4'}');
    let got = 0, sent = 0; s.on('message', () => got++);
    const t = setInterval(() => { if (sent++ >= ${count}) { clearInterval(t); setTimeout(() => { console.log(got); process.exit(0); }, 500); } else s.send('x', ${port}, '${ip}'); }, ${intervalMs});`;
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  return new Promise((resolve) => p.once('exit', () => resolve(Number(out.trim()) || 0)));
}
