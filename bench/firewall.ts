// Firewall micro-benchmarks, inside a private netns sandbox (never the root namespace).
//   node --conditions=cnikit-source --import tsx bench/firewall.ts [rounds]
// Compares one iptables-restore per call with one iptables exec per rule (what go-iptables does:
// -N, then -C and -A per rule), and times the high-level helpers for both backends.
import {
  IptablesBatch,
  runTool,
  setupIPMasq,
  setupSpoofCheck,
  teardownIPMasq,
  teardownSpoofCheck,
} from '@cnikit/firewall';
// the exec counter is not part of the public API: import it from the module (same instance as the package's)
import { execStats } from '@cnikit/firewall/testing';
import { createSandbox } from '@cnikit/testing';
import { quantile } from './lib/side-by-side.ts';

const rounds = Number(process.argv[2] ?? 10);
const N = 10;
const sb = createSandbox();
const ns = { netns: sb.host.path };

const median = (xs: number[]) => quantile(xs, 0.5);

function time(fn: () => void): { ms: number; execs: number } {
  const e0 = execStats.count;
  const t0 = performance.now();
  fn();
  return { ms: performance.now() - t0, execs: execStats.count - e0 };
}

function bench(name: string, fn: () => void, cleanup?: () => void): void {
  const ms: number[] = [];
  let execs = 0;
  for (let i = 0; i < rounds; i++) {
    const r = time(fn);
    ms.push(r.ms);
    execs = r.execs;
    cleanup?.();
  }
  console.log(`${name.padEnd(58)} ${median(ms).toFixed(1).padStart(7)} ms  (${execs} tool runs)`);
}

const rule = (i: number) => [
  '-s',
  `10.77.0.${i}`,
  '-m',
  'comment',
  '--comment',
  `bench ${i}`,
  '-j',
  'ACCEPT',
];
const dropChain = () => new IptablesBatch(4, ns).deleteChain('filter', 'CNI-BENCH').commit();

try {
  console.log(`median of ${rounds} rounds, in netns ${sb.host.name}`);
  bench(
    `${N} rules: one iptables-save + one iptables-restore`,
    () => {
      const b = new IptablesBatch(4, ns).ensureChain('filter', 'CNI-BENCH');
      for (let i = 0; i < N; i++) b.appendUnique('filter', 'CNI-BENCH', rule(i));
      b.commit();
    },
    dropChain,
  );
  bench(
    `${N} rules: iptables -N, then -C and -A per rule`,
    () => {
      runTool('iptables', ['--wait', '-t', 'filter', '-N', 'CNI-BENCH'], ns);
      for (let i = 0; i < N; i++) {
        runTool('iptables', ['--wait', '-t', 'filter', '-C', 'CNI-BENCH', ...rule(i)], ns);
        runTool('iptables', ['--wait', '-t', 'filter', '-A', 'CNI-BENCH', ...rule(i)], ns);
      }
    },
    dropChain,
  );
  bench(
    `${N} rules: iptables -N, then -A per rule`,
    () => {
      runTool('iptables', ['--wait', '-t', 'filter', '-N', 'CNI-BENCH'], ns);
      for (let i = 0; i < N; i++)
        runTool('iptables', ['--wait', '-t', 'filter', '-A', 'CNI-BENCH', ...rule(i)], ns);
    },
    dropChain,
  );
  // Re-apply of an already present set: read only.
  {
    const b = () => {
      const x = new IptablesBatch(4, ns).ensureChain('filter', 'CNI-BENCH');
      for (let i = 0; i < N; i++) x.appendUnique('filter', 'CNI-BENCH', rule(i));
      return x;
    };
    b().commit();
    bench(`${N} rules already present (idempotent re-apply)`, () => b().commit());
    dropChain();
  }
  const masq = {
    ips: ['10.1.2.2/24', 'fd00::2/64'],
    network: 'mynet',
    ifName: 'eth0',
    containerID: 'abc',
    ...ns,
  };
  for (const backend of ['iptables', 'nftables'] as const) {
    bench(
      `ipmasq setup v4+v6 (${backend})`,
      () => setupIPMasq({ backend, ...masq }),
      () => teardownIPMasq(masq),
    );
    bench(
      `ipmasq teardown v4+v6 (${backend} rules present)`,
      () => teardownIPMasq(masq),
      () => setupIPMasq({ backend, ...masq }),
    );
    teardownIPMasq(masq);
  }
  const spoof = { iface: 'veth1234', mac: '0a:58:0a:f4:00:02', refID: 'abc-eth0', ...ns };
  bench(
    'spoof check setup',
    () => setupSpoofCheck(spoof),
    () => teardownSpoofCheck(spoof.refID, ns),
  );
  bench(
    'spoof check teardown',
    () => teardownSpoofCheck(spoof.refID, ns),
    () => setupSpoofCheck(spoof),
  );
} finally {
  sb.destroy();
}
