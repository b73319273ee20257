import { join } from 'node:path';
import { DhcpDaemon } from './daemon.ts';
import { Lab } from './testlab.ts';

const N = 200;
const lab = new Lab();
await lab.startServer({ leaseTime: '1h', range: '10.77.1.1,10.77.250.254,255.255.0.0' });
const daemon = new DhcpDaemon({
  settings: { timeoutMs: 2000, resendMaxMs: 4000, resendTimeoutMs: 60000, broadcast: false },
  hostPrefix: '',
  stateDir: join(lab.dir, 'state'),
  log: () => {},
});
try {
  const cs = lab.addContainers(N);
  const config = { cniVersion: '1.0.0', name: 'dhnet', type: 'macvlan', ipam: { type: 'dhcp' } };
  const t = performance.now();
  const done: number[] = [];
  await Promise.all(
    cs.map((c, i) =>
      daemon
        .allocate({ containerId: `d${i}`, netns: c.path, ifName: 'eth0', args: '', config })
        .then(() => done.push(performance.now() - t)),
    ),
  );
  done.sort((a, b) => a - b);
  console.log(
    'direct allocate',
    (performance.now() - t).toFixed(0),
    'p10/p50/p90',
    done[20]?.toFixed(0),
    done[100]?.toFixed(0),
    done[180]?.toFixed(0),
  );
  const log = lab.serverLog();
  for (const k of ['DHCPDISCOVER', 'DHCPREQUEST', 'DHCPNAK']) console.log(k, log.split(k).length - 1);
} finally {
  await daemon.shutdown();
  await lab.destroy();
}
