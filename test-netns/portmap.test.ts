/**
 * portmap through the compiled executables, as a runtime runs it: bridge + host-local + portmap, real TCP and UDP
 * from the private "host" namespace to the container via the host's address and via localhost (hairpin + snat),
 * the UDP forward moving to a second container that takes the same host port (conntrack flush), for both backends;
 * and 64 containers × 4 mappings added and deleted leaving only the shared chains.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { cniRunner, expectOk, tempDir, withSandbox } from '@cnikit/testing';
import { DIST, ensureBuilt, runtime } from './dist.ts';
import { ask, server } from './traffic.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-portmap');
after(() => scratch.remove());

for (const backend of ['iptables', 'nftables'] as const) {
  describe(`bridge + host-local + portmap (${backend}), real traffic`, () => {
    assert.ok(info.plugins.includes('portmap'), 'portmap not built (npm test runs npm run build first)');
    test('TCP and UDP forwarded via the host address and via localhost; UDP follows the host port to a new container', async () => {
      // plugins run as processes from this thread, moved into the sandbox's host namespace (like on a node)
      await withSandbox(
        async (sb) => {
          const second = sb.newContainer();
          const servers: Array<{ kill(): void }> = [];
          try {
            const rt = runtime(join(scratch.path, `cache-${backend}`));
            const list = confListFromObject({
              cniVersion: '1.0.0',
              name: `pm${backend}`,
              plugins: [
                {
                  type: 'bridge',
                  bridge: 'cnipm0',
                  isGateway: true,
                  hairpinMode: true,
                  ipam: {
                    type: 'host-local',
                    ranges: [[{ subnet: '10.79.1.0/24' }]],
                    dataDir: join(scratch.path, `ipam-${backend}`),
                  },
                },
                { type: 'portmap', backend, capabilities: { portMappings: true } },
              ],
            });
            const portMappings = [
              { hostPort: 18080, containerPort: 8080, protocol: 'tcp' },
              { hostPort: 18053, containerPort: 8053, protocol: 'udp' },
            ];
            const a = {
              containerId: 'pm-a',
              netns: sb.container.path,
              ifName: 'eth0',
              capabilityArgs: { portMappings },
            };
            await rt.addNetworkList(list, a);
            servers.push(await server(sb.container.name, 8080, 'A'));
            servers.push(await server(sb.container.name, 8053, 'A'));
            const hostIP = '10.79.1.1'; // the bridge's gateway address: an address of the host
            assert.equal(ask(sb.host.name, 'tcp', hostIP, 18080), 'A', 'TCP via the host address');
            assert.equal(
              ask(sb.host.name, 'tcp', '127.0.0.1', 18080),
              'A',
              'TCP via localhost (route_localnet + masquerade)',
            );
            assert.equal(
              sb.exec('cat', ['/proc/sys/net/ipv4/conf/cnipm0/route_localnet'], { ns: 'host' }).stdout.trim(),
              '1',
              'route_localnet on the host interface that routes to the container',
            );
            assert.equal(ask(sb.host.name, 'udp', hostIP, 18053), 'A', 'UDP via the host address');
            await rt.checkNetworkList(list, a);
            await rt.delNetworkList(list, a);
            assert.equal(ask(sb.host.name, 'tcp', hostIP, 18080), '', 'nothing forwarded after DEL');
            // a second container takes the same host ports; the stale UDP flow (same 5-tuple) must not stick to A
            const b = {
              containerId: 'pm-b',
              netns: second.path,
              ifName: 'eth0',
              capabilityArgs: { portMappings },
            };
            await rt.addNetworkList(list, b);
            servers.push(await server(second.name, 8053, 'B'));
            assert.equal(
              ask(sb.host.name, 'udp', hostIP, 18053),
              'B',
              'UDP reaches the new container (conntrack flushed)',
            );
            await rt.delNetworkList(list, b);
          } finally {
            for (const s of servers) s.kill();
          }
        },
        { enterHost: true },
      );
    });
  });
}

describe('64 containers × 4 mappings through the binary, both backends', () => {
  test('everything added is checked and deleted; only the shared chains stay', async () => {
    // the binary runs straight from this thread, moved into the private host namespace (no `ip netns exec` per call)
    await withSandbox(
      async (sb) => {
        const cni = cniRunner({ binary: join(DIST, 'portmap') }, { ifName: 'eth0', netns: '/run/netns/x' });
        const conf = (i: number, backend: string) => ({
          cniVersion: '1.0.0',
          name: 'pm64',
          type: 'portmap',
          backend,
          runtimeConfig: {
            portMappings: [0, 1, 2, 3].map((k) => ({
              hostPort: 20000 + i * 4 + k,
              containerPort: 80 + k,
              protocol: k % 2 ? 'udp' : 'tcp',
            })),
          },
          prevResult: {
            cniVersion: '1.0.0',
            interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
            ips: [{ address: `10.80.${i >> 8}.${(i % 254) + 1}/16`, interface: 0 }],
          },
        });
        const save = () =>
          sb
            .exec('iptables-save', ['-t', 'nat'], { ns: 'host' })
            .stdout.split('\n')
            .filter((l) => l.startsWith('-A ') || l.startsWith(':CNI'));
        for (const backend of ['iptables', 'nftables']) {
          for (let i = 0; i < 64; i++)
            expectOk(await cni.add(conf(i, backend), { containerId: `c${i}` }), `ADD c${i}`);
          for (let i = 0; i < 64; i += 21)
            expectOk(await cni.check(conf(i, backend), { containerId: `c${i}` }), `CHECK c${i}`);
          for (let i = 0; i < 64; i++)
            expectOk(await cni.del(conf(i, backend), { containerId: `c${i}` }), `DEL c${i}`);
        }
        assert.deepEqual(save().sort(), [
          '-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE',
          '-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000',
          '-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
          '-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ',
          '-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
          ':CNI-HOSTPORT-DNAT - [0:0]',
          ':CNI-HOSTPORT-MASQ - [0:0]',
          ':CNI-HOSTPORT-SETMARK - [0:0]',
        ]);
        const nft = sb.exec('nft', ['list', 'table', 'ip', 'cni_hostport'], { ns: 'host' }).stdout;
        assert.doesNotMatch(nft, /dnat to|masquerade/, 'no per-container nft rule left');
      },
      { enterHost: true },
    );
  });
});
