// Benchmark: create a veth pair (peer placed in a second namespace) + an address + link up + a default route
// inside a fresh namespace, with @cnikit/netlink vs the same with `ip` commands (one spawnSync each) and with
// one `ip -batch`. Namespaces are created and removed outside the timed section.
//   node --conditions=cnikit-source --import tsx bench/netlink.ts [runs=30]
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { addAddr, addRoute, createVethPair, randomVethName, setLinkUp, withNetns } from '@cnikit/netlink';
import { quantile } from './lib/side-by-side.ts';

const runs = Math.max(20, Number(process.argv[2] ?? 30) || 30);

function sh(cmd: string, args: string[], input?: string): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
}

function routeOk(ns: string): boolean {
  const r = spawnSync('ip', ['-n', ns, '-j', 'route', 'show', 'default'], { encoding: 'utf8' });
  return /"gateway":"10.1.2.1"/.test(r.stdout) && /"dev":"eth0"/.test(r.stdout);
}

type Variant = (cont: string, host: string) => void;

const variants: Record<string, Variant> = {
  '@cnikit/netlink': (cont, host) => {
    withNetns(`/run/netns/${cont}`, () => {
      createVethPair({
        name: 'eth0',
        peerName: randomVethName(),
        peerNetnsPath: `/run/netns/${host}`,
        mtu: 1500,
      });
      addAddr('eth0', '10.1.2.2/24');
      setLinkUp('eth0');
      addRoute({ dst: '0.0.0.0/0', gw: '10.1.2.1', dev: 'eth0' });
    });
  },
  'ip (4 execs)': (cont, host) => {
    sh('ip', [
      '-n',
      cont,
      'link',
      'add',
      'eth0',
      'mtu',
      '1500',
      'type',
      'veth',
      'peer',
      'name',
      randomVethName(),
      'netns',
      host,
    ]);
    sh('ip', ['-n', cont, 'addr', 'add', '10.1.2.2/24', 'dev', 'eth0']);
    sh('ip', ['-n', cont, 'link', 'set', 'eth0', 'up']);
    sh('ip', ['-n', cont, 'route', 'add', 'default', 'via', '10.1.2.1', 'dev', 'eth0']);
  },
  'ip -batch (1 exec)': (cont, host) => {
    const batch = [
      `link add eth0 mtu 1500 type veth peer name ${randomVethName()} netns ${host}`,
      'addr add 10.1.2.2/24 dev eth0',
      'link set eth0 up',
      'route add default via 10.1.2.1 dev eth0',
    ].join('\n');
    sh('ip', ['-n', cont, '-batch', '-'], `${batch}\n`);
  },
};

function once(v: Variant): number {
  const tag = `${process.pid}-${randomBytes(3).toString('hex')}`;
  const cont = `cnikit-bench-c-${tag}`;
  const host = `cnikit-bench-h-${tag}`;
  sh('ip', ['netns', 'add', cont]);
  sh('ip', ['netns', 'add', host]);
  try {
    const t0 = process.hrtime.bigint();
    v(cont, host);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (!routeOk(cont)) throw new Error('benchmark step did not produce the expected default route');
    return ms;
  } finally {
    spawnSync('ip', ['netns', 'del', cont]);
    spawnSync('ip', ['netns', 'del', host]);
  }
}

const pct = quantile;

const names = Object.keys(variants);
const samples: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
for (const n of names) once(variants[n]!); // warm-up (loads the addon, page cache for ip)
for (let i = 0; i < runs; i++) {
  // rotate the order so background load hits every variant alike
  for (let j = 0; j < names.length; j++) {
    const n = names[(i + j) % names.length]!;
    samples[n]!.push(once(variants[n]!));
  }
}

const base = pct(samples['@cnikit/netlink']!, 0.5);
console.log(`veth pair (peer in 2nd netns) + address + link up + default route, ${runs} runs each (ms)`);
console.log(
  'variant'.padEnd(22),
  'median'.padStart(8),
  'p10'.padStart(8),
  'p90'.padStart(8),
  '  vs @cnikit/netlink',
);
for (const n of names) {
  const xs = samples[n]!;
  const med = pct(xs, 0.5);
  console.log(
    n.padEnd(22),
    med.toFixed(2).padStart(8),
    pct(xs, 0.1).toFixed(2).padStart(8),
    pct(xs, 0.9).toFixed(2).padStart(8),
    `  ${(med / base).toFixed(1)}x`,
  );
}
