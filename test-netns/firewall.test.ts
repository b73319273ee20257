// cnikit-kernel-features: br_netfilter
/**
 * firewall through the compiled executables, as a runtime runs it: bridge + host-local + firewall for two networks
 * (two bridges in one private "host" namespace, two containers on each), with real TCP connections between the
 * containers: `same-bridge` lets containers of one bridge talk and blocks the other bridge; `isolated` blocks
 * both. Removing one isolation rule by hand restores the path it blocked (the block is the plugin's doing).
 * ADD → CHECK → DEL leaves only the shared chains, jumps and bridge isolation rules. And the binary against a real
 * firewalld (private bus, firewalld in the sandbox namespace): auto-detected, sources bound, CHECK, DEL.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { withFirewalld } from '@cnikit/firewall';
import { confListFromObject } from '@cnikit/libcni';
import {
  type NamedNetns,
  requireKernelFeatures,
  startFirewalld,
  startPrivateSystemBus,
  tempDir,
  withSandbox,
} from '@cnikit/testing';
import { DIST, ensureBuilt, runtime } from './dist.ts';
import { reach, server } from './traffic.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-firewall');
after(() => scratch.remove());

const PORT = 7070;

for (const policy of ['same-bridge', 'isolated'] as const) {
  describe(`bridge + host-local + firewall, ingressPolicy ${policy}, real TCP`, () => {
    assert.ok(info.plugins.includes('firewall'), 'firewall not built (npm test runs npm run build first)');
    test('reachability between containers of the same and of the other bridge; ADD → CHECK → DEL', async () => {
      requireKernelFeatures('br_netfilter'); // the marker line sends this file to the kernel lab where it is missing
      // plugins run as processes from this thread, moved into the sandbox's host namespace (like on a node)
      await withSandbox(
        async (sb) => {
          const ctrs: Array<{ name: string; ns: NamedNetns; net: 'foo' | 'bar'; ip?: string }> = [];
          const servers: Array<{ kill(): void }> = [];
          try {
            // br_netfilter's switch is per namespace: bridged traffic goes through FORWARD (what `isolated` relies on)
            sb.exec('sysctl', ['-qw', 'net.bridge.bridge-nf-call-iptables=1'], { ns: 'host' });
            const rt = runtime(join(scratch.path, `cache-${policy}`));
            const list = (net: 'foo' | 'bar') =>
              confListFromObject({
                cniVersion: '1.0.0',
                name: `fw${net}`,
                plugins: [
                  {
                    type: 'bridge',
                    bridge: net === 'foo' ? 'fwbr0' : 'fwbr1',
                    isGateway: true,
                    ipam: {
                      type: 'host-local',
                      ranges: [[{ subnet: net === 'foo' ? '10.80.1.0/24' : '10.80.2.0/24' }]],
                      routes: [{ dst: '0.0.0.0/0' }],
                      dataDir: join(scratch.path, `ipam-${policy}`),
                    },
                  },
                  {
                    type: 'firewall',
                    backend: 'iptables',
                    ingressPolicy: policy,
                    dataDir: join(scratch.path, `fw-${policy}`),
                  },
                ],
              });
            for (const [name, net] of [
              ['a1', 'foo'],
              ['a2', 'foo'],
              ['b1', 'bar'],
              ['b2', 'bar'],
            ] as const) {
              const ns = sb.newContainer();
              const c: (typeof ctrs)[number] = { name, ns, net };
              ctrs.push(c);
              const r = await rt.addNetworkList(list(net), {
                containerId: `fw-${name}`,
                netns: ns.path,
                ifName: 'eth0',
              });
              c.ip = String(r.ips![0]!.address).split('/')[0];
              servers.push(await server(ns.name, PORT, name));
            }
            const ips = ctrs.map((c) => c.ip as string);
            const expected = (from: (typeof ctrs)[number]) =>
              ctrs.map((to) =>
                to === from ? to.name : to.net === from.net && policy === 'same-bridge' ? to.name : '',
              );
            for (const from of ctrs) {
              assert.deepEqual(
                reach(from.ns.name, ips, PORT),
                expected(from),
                `${policy}: from ${from.name} to ${ctrs.map((c) => c.name).join(', ')}`,
              );
            }
            for (const c of ctrs)
              await rt.checkNetworkList(list(c.net), {
                containerId: `fw-${c.name}`,
                netns: c.ns.path,
                ifName: 'eth0',
              });
            // remove the rules that block traffic into the bridges (both ways: replies are blocked too) and, for
            // `isolated`, inside fwbr0: a1 reaches everyone again
            for (const br of ['fwbr0', 'fwbr1']) {
              sb.exec(
                'iptables',
                [
                  '-D',
                  'CNI-ISOLATION-STAGE-2',
                  '-o',
                  br,
                  '-m',
                  'comment',
                  '--comment',
                  'CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)',
                  '-j',
                  'DROP',
                ],
                { ns: 'host' },
              );
            }
            if (policy === 'isolated') {
              sb.exec(
                'iptables',
                [
                  '-D',
                  'CNI-ISOLATION-STAGE-1',
                  '-i',
                  'fwbr0',
                  '-o',
                  'fwbr0',
                  '-m',
                  'comment',
                  '--comment',
                  'CNI firewall plugin rules (ingressPolicy: isolated)',
                  '-j',
                  'DROP',
                ],
                { ns: 'host' },
              );
            }
            assert.deepEqual(
              reach(ctrs[0]!.ns.name, ips, PORT),
              ['a1', 'a2', 'b1', 'b2'],
              'reachable once the isolation rules are gone',
            );
            for (const c of ctrs)
              await rt.delNetworkList(list(c.net), {
                containerId: `fw-${c.name}`,
                netns: c.ns.path,
                ifName: 'eth0',
              });
            const save = sb.exec('iptables-save', ['-t', 'filter'], { ns: 'host' }).stdout;
            const rules = save.split('\n').filter((l) => l.startsWith('-A ') || l.startsWith(':CNI'));
            assert.ok(
              !rules.some((l) => l.includes('10.80.')),
              `no per-address rule left:\n${rules.join('\n')}`,
            );
            const DEF =
              '-m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)"';
            const pol = `-m comment --comment "CNI firewall plugin rules (ingressPolicy: ${policy})"`;
            assert.deepEqual(rules, [
              ':CNI-ADMIN - [0:0]',
              ':CNI-FORWARD - [0:0]',
              ':CNI-ISOLATION-STAGE-1 - [0:0]',
              ':CNI-ISOLATION-STAGE-2 - [0:0]',
              `-A FORWARD ${DEF} -j CNI-ISOLATION-STAGE-1`,
              '-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
              '-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN',
              ...(policy === 'isolated' ? [`-A CNI-ISOLATION-STAGE-1 -i fwbr1 -o fwbr1 ${pol} -j DROP`] : []),
              `-A CNI-ISOLATION-STAGE-1 -i fwbr1 ! -o fwbr1 ${pol} -j CNI-ISOLATION-STAGE-2`,
              `-A CNI-ISOLATION-STAGE-1 -i fwbr0 ! -o fwbr0 ${pol} -j CNI-ISOLATION-STAGE-2`,
              `-A CNI-ISOLATION-STAGE-1 ${DEF} -j RETURN`,
              `-A CNI-ISOLATION-STAGE-2 ${DEF} -j RETURN`,
            ]);
          } finally {
            for (const s of servers) s.kill();
          }
        },
        { enterHost: true },
      );
    });
  });
}

describe('bridge + host-local + firewall against a real firewalld (auto-detected)', () => {
  test('the binary binds the container address to the zone, CHECK passes, DEL unbinds it', async () => {
    await withSandbox(
      async (sb) => {
        const bus = await startPrivateSystemBus();
        try {
          const fw = await startFirewalld({ netns: sb.host, bus });
          try {
            const rt = runtime(join(scratch.path, 'cache-fwd'), DIST, { ...process.env, ...bus.env });
            const list = confListFromObject({
              cniVersion: '1.1.0',
              name: 'fwd',
              plugins: [
                {
                  type: 'bridge',
                  bridge: 'fwdbr0',
                  ipam: {
                    type: 'host-local',
                    ranges: [[{ subnet: '10.81.1.0/24' }]],
                    dataDir: join(scratch.path, 'ipam-fwd'),
                  },
                },
                { type: 'firewall', firewalldZone: 'internal', dataDir: join(scratch.path, 'fw-fwd') },
              ],
            });
            const a = { containerId: 'fwd-a', netns: sb.container.path, ifName: 'eth0' };
            const r = await rt.addNetworkList(list, a);
            const ip = String(r.ips![0]!.address).split('/')[0];
            assert.deepEqual(await withFirewalld({ address: bus.address }, (f) => f.getSources('internal')), [
              `${ip}/32`,
            ]);
            assert.match(
              sb.exec('nft', ['list', 'ruleset'], { ns: 'host' }).stdout,
              new RegExp(`ip saddr ${ip} goto filter_FWD_internal`),
            );
            assert.doesNotMatch(
              sb.exec('iptables-save', ['-t', 'filter'], { ns: 'host' }).stdout,
              /CNI-FORWARD/,
            );
            await rt.checkNetworkList(list, a);
            await rt.delNetworkList(list, a);
            assert.deepEqual(
              await withFirewalld({ address: bus.address }, (f) => f.getSources('internal')),
              [],
            );
          } finally {
            await fw.stop();
          }
        } finally {
          await bus.stop();
        }
      },
      { enterHost: true },
    );
  });
});
