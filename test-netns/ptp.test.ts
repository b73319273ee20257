/**
 * kind's pod network (kindnetd writes ptp + host-local + portmap) through the compiled executables, driven by libcni
 * like a runtime: two pods routed through the host, a published port reachable from the host and from the other pod,
 * and DEL leaving the host as it was (but for the shared portmap chains and forwarding).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { diffSnapshots, formatDiff, SNAPSHOT_SECTIONS, tempDir, withSandbox } from '@cnikit/testing';
import { ensureBuilt, runtime } from './dist.ts';
import { ask, server } from './traffic.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-ptp');
after(() => scratch.remove());

const SECTIONS = SNAPSHOT_SECTIONS.filter((s) => s !== 'sysctls');
/** iptables-nft creates the nat table with its base chains when portmap adds its chains; those stay, like with Go. */
const SHARED =
  /CNI-HOSTPORT|CNI portfwd|^\*nat$|^:(PREROUTING|INPUT|OUTPUT|POSTROUTING) ACCEPT|^COMMIT$|"table":"nat"|"table":\{"family":"ip6?","name":"nat"/;

describe('kindnetd-style conflist (ptp + host-local + portmap), all cnikit, through the binaries', () => {
  for (const p of ['ptp', 'host-local', 'portmap'])
    assert.ok(info.plugins.includes(p), `${p} not built (npm test runs npm run build first)`);

  test('pods talk through the host, a published port answers, DEL leaves the host as before', async () => {
    await withSandbox(
      async (sb) => {
        const second = sb.newContainer();
        const servers: Array<{ kill(): void }> = [];
        try {
          const rt = runtime(join(scratch.path, 'cache'));
          // what kindnetd writes to /etc/cni/net.d/10-kindnet.conflist (spec 0.3.1: no CHECK)
          const list = confListFromObject({
            cniVersion: '0.3.1',
            name: 'kindnet',
            plugins: [
              {
                type: 'ptp',
                ipMasq: false,
                ipam: {
                  type: 'host-local',
                  dataDir: join(scratch.path, 'cni-ipam-state'),
                  routes: [{ dst: '0.0.0.0/0' }],
                  ranges: [[{ subnet: '10.77.0.0/24' }]],
                },
                mtu: 1500,
              },
              { type: 'portmap', capabilities: { portMappings: true } },
            ],
          });
          const before = sb.snapshot('host', { sections: SECTIONS });
          const a = {
            containerId: 'kind-a',
            netns: sb.container.path,
            ifName: 'eth0',
            capabilityArgs: { portMappings: [{ hostPort: 18091, containerPort: 8080, protocol: 'tcp' }] },
          };
          const b = { containerId: 'kind-b', netns: second.path, ifName: 'eth0' };
          const ra = await rt.addNetworkList(list, a);
          const rb = await rt.addNetworkList(list, b);
          const ipA = ra.ips![0]!.address.split('/')[0]!;
          const ipB = rb.ips![0]!.address.split('/')[0]!;
          assert.equal(ra.ips![0]!.gateway, '10.77.0.1');
          // ptp: one veth per pod, the gateway as /32 on each host end, a host route per pod
          const hostRoutes = sb.exec('ip', ['-4', 'route', 'show']).stdout;
          for (const ip of [ipA, ipB])
            assert.match(
              hostRoutes,
              new RegExp(`^${ip.replaceAll('.', '\\.')} dev veth\\w+ scope host`, 'm'),
            );

          servers.push(await server(sb.container.name, 8080, 'A'));
          servers.push(await server(second.name, 8080, 'B'));
          assert.equal(ask(second.name, 'tcp', ipA, 8080), 'A', 'B → A routed through the host');
          assert.equal(ask(sb.container.name, 'tcp', ipB, 8080), 'B', 'A → B routed through the host');
          assert.equal(ask(sb.host.name, 'tcp', ipA, 8080), 'A', 'host → A over its veth');
          assert.equal(ask(sb.host.name, 'tcp', '10.77.0.1', 18091), 'A', 'published port from the host');
          assert.equal(ask(second.name, 'tcp', '10.77.0.1', 18091), 'A', 'published port from the other pod');
          for (const s of servers.splice(0)) s.kill();

          await rt.delNetworkList(list, b);
          await rt.delNetworkList(list, a);
          assert.equal(ask(sb.host.name, 'tcp', '10.77.0.1', 18091), '', 'nothing published after DEL');
          const left = diffSnapshots(before, sb.snapshot('host', { sections: SECTIONS }))
            .map((d) => ({ ...d, added: d.added.filter((l) => !SHARED.test(l)) }))
            .filter((d) => d.removed.length || d.added.length);
          assert.deepEqual(left, [], `left behind in the host:\n${formatDiff(left)}`);
        } finally {
          for (const s of servers) s.kill();
        }
      },
      { enterHost: true },
    );
  });
});
