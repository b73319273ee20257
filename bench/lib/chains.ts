// The kubelet-style chain the benchmarks time (bridge + host-local with ipMasq, tuning, portmap, bandwidth), one
// definition for every bench that runs it; `dir` holds host-local's and tuning's state for one implementation.
import { join } from 'node:path';

export type Conf = Record<string, unknown>;

export function kubeletChain(o: { bridge: string; subnet: string; dir: string; hostPort: number }): Conf[] {
  return [
    {
      type: 'bridge',
      bridge: o.bridge,
      isGateway: true,
      ipMasq: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: o.subnet }]], dataDir: join(o.dir, 'ipam') },
    },
    {
      type: 'tuning',
      dataDir: join(o.dir, 'tuning'),
      mtu: 1400,
      sysctl: { 'net.ipv4.conf.eth0.arp_ignore': '1' },
    },
    {
      type: 'portmap',
      capabilities: { portMappings: true },
      runtimeConfig: { portMappings: [{ hostPort: o.hostPort, containerPort: 80, protocol: 'tcp' }] },
    },
    {
      type: 'bandwidth',
      ingressRate: 100_000_000,
      ingressBurst: 1_000_000,
      egressRate: 100_000_000,
      egressBurst: 1_000_000,
    },
  ];
}
