// cnikit-kernel-features: macvlan
// dhcp behind macvlan (the usual DHCP deployment): the container's eth0 and dnsmasq's interface are bridge-mode
// macvlans of one master. Runs in the kernel lab's VM (docs/kernel-lab.md) where this machine's kernel lacks macvlan.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cniCall, eventually, requireKernelFeatures, scaled } from '@cnikit/testing';
import { attach, DhcpDaemon } from './daemon.ts';
import { plugin } from './index.ts';
import { dnsmasqClientId, Lab, ROUTER } from './testenv.ts';

let lab: Lab;
let daemon: DhcpDaemon;
let server: net.Server;
let sock: string;

before(async () => {
  requireKernelFeatures('macvlan');
  lab = new Lab('macvlan');
  await lab.startServer({ t1: 3, t2: 6 });
  sock = join(lab.dir, 'dhcp.sock');
  daemon = new DhcpDaemon({
    settings: { timeoutMs: 2000, resendMaxMs: 2000, resendTimeoutMs: 30_000, broadcast: false },
    hostPrefix: '',
    stateDir: join(lab.dir, 'state'),
    log: () => {},
  });
  server = net.createServer();
  attach(server, daemon, () => {});
  await new Promise<void>((r) => server.listen(sock, r));
});

after(async () => {
  server?.close();
  await daemon?.shutdown();
  await lab?.destroy();
});

test('macvlan: ADD from dnsmasq, renewal at T1, DEL releases', { timeout: scaled(120_000) }, async () => {
  const [c] = lab.addContainers(1);
  const link = (
    lab.ipJson(c!, ['-d', 'link', 'show', 'eth0']) as Array<{ linkinfo?: { info_kind?: string } }>
  )[0];
  assert.equal(link?.linkinfo?.info_kind, 'macvlan');
  const conf = {
    cniVersion: '1.0.0',
    name: 'mvnet',
    type: 'macvlan',
    ipam: { type: 'dhcp', daemonSocketPath: sock },
  };
  const add = await cniCall(plugin, 'ADD', conf, { netns: c!.path, containerId: 'mv-1' });
  assert.equal(add.code, 0, add.stdout);
  const address = add.json.ips[0].address as string;
  assert.match(address, /^10\.77\.0\.\d+\/24$/);
  assert.deepEqual(add.json.routes, [{ dst: '0.0.0.0/0', gw: ROUTER }]);
  const clientId = dnsmasqClientId('mv-1/mvnet/eth0');
  assert.equal(`${lab.leases().find((l) => l.clientId === clientId)?.address}/24`, address);
  assert.equal(spawnSync('ip', ['-n', c!.name, 'addr', 'add', address, 'dev', 'eth0']).status, 0);
  await eventually(() => (daemon.status()[0]?.renewals ?? 0) >= 1, 'renewed at T1', 20_000);
  const del = await cniCall(plugin, 'DEL', conf, { netns: c!.path, containerId: 'mv-1' });
  assert.equal(del.code, 0, del.stdout);
  await eventually(() => !lab.leases().some((l) => l.clientId === clientId), 'released', 10_000);
});
