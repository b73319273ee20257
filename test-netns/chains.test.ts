/**
 * Whole conflists of a real node, every plugin cnikit's, run through the compiled executables by libcni like a
 * runtime: two containers, real TCP between them, a published port reachable from the (private) host namespace,
 * shaping measured, CHECK, and DEL in reverse order leaving the host as it was except for the state the reference
 * plugins share on purpose (the bridge and its gateway address, the shared portmap/firewall chains, forwarding).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { diffSnapshots, formatDiff, SNAPSHOT_SECTIONS, tempDir, withSandbox } from '@cnikit/testing';
import { ensureBuilt, runtime } from './dist.ts';
import { ask, assertShaped, assertUnshaped, SHAPING_RATE, server, transfer } from './traffic.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-chains');
after(() => scratch.remove());

const RATE = SHAPING_RATE;
const BYTES = 1_000_000;
/**
 * The nat and filter tables themselves: iptables-nft creates them with their base chains when the shared chains
 * are added.
 */
const BASE_TABLES =
  /^\*(nat|filter)$|^:(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) ACCEPT|^COMMIT$|"table":"(nat|filter)"|"table":\{"family":"ip6?","name":"(nat|filter)"/;
/** Every snapshot section but the sysctls. */
const SECTIONS = SNAPSHOT_SECTIONS.filter((s) => s !== 'sysctls');

interface Chain {
  name: string;
  /** The conflist's plugins after bridge + host-local. */
  plugins: Array<{ type: string } & Record<string, unknown>>;
  /** What the runtime passes as capability arguments for the shaped, published container. */
  capabilityArgs: Record<string, unknown>;
  shaped: boolean;
  /** Chain-specific state to find in the host while both containers are up (iptables-save of the host). */
  whileUp?: (iptablesSave: string, ipA: string, ipB: string) => void;
  /** Lines that may stay in the host after both DELs (shared state the reference keeps too). */
  shared: RegExp;
}

const mappings = [{ hostPort: 18090, containerPort: 8080, protocol: 'tcp' }];
const bandwidth = { ingressRate: RATE, ingressBurst: 100_000, egressRate: RATE, egressBurst: 100_000 };
const CHAINS: Chain[] = [
  {
    name: 'kubelet',
    plugins: [
      { type: 'portmap', capabilities: { portMappings: true }, snat: true },
      { type: 'bandwidth', capabilities: { bandwidth: true } },
      { type: 'tuning', sysctl: { 'net.core.somaxconn': '512' }, dataDir: join(scratch.path, 'tuning') },
    ],
    capabilityArgs: { portMappings: mappings, bandwidth },
    shaped: true,
    shared: /"ifname":"cnichain0"|^cnichain0 |"dev":"cnichain0"|CNI-HOSTPORT|CNI portfwd/,
  },
  {
    // podman's default conflist (87-podman-bridge.conflist): the firewall plugin with its default (auto) backend
    name: 'podman',
    plugins: [
      { type: 'portmap', capabilities: { portMappings: true } },
      { type: 'firewall', dataDir: join(scratch.path, 'firewall') },
      {
        type: 'tuning',
        sysctl: { 'net.core.somaxconn': '512' },
        dataDir: join(scratch.path, 'tuning-podman'),
      },
    ],
    capabilityArgs: { portMappings: mappings },
    shaped: false,
    whileUp: (save, ipA, ipB) => {
      for (const ip of [ipA, ipB]) {
        assert.ok(save.includes(`-A CNI-FORWARD -s ${ip}/32 -j ACCEPT`), `firewall rule for ${ip}`);
      }
      assert.match(save, /-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD/);
    },
    shared:
      /"ifname":"cnichain0"|^cnichain0 |"dev":"cnichain0"|CNI-HOSTPORT|CNI portfwd|CNI-FORWARD|CNI-ADMIN|CNI firewall plugin/,
  },
];

for (const chain of CHAINS) {
  describe(`${chain.name}-style conflist, all cnikit, through the binaries`, () => {
    for (const p of chain.plugins) {
      assert.ok(
        info.plugins.includes(p.type as string),
        `${p.type} not built (npm test runs npm run build first)`,
      );
    }
    test('two containers talk, a published port answers from the host, CHECK passes, DEL leaves the host as before', async () => {
      // plugins run as processes from this thread, moved into the sandbox's host namespace (like on a node)
      await withSandbox(
        async (sb) => {
          const second = sb.newContainer();
          const servers: Array<{ kill(): void }> = [];
          try {
            const rt = runtime(join(scratch.path, `cache-${chain.name}`));
            const list = confListFromObject({
              cniVersion: '1.0.0',
              name: `chain-${chain.name}`,
              plugins: [
                {
                  type: 'bridge',
                  bridge: 'cnichain0',
                  isGateway: true,
                  ipMasq: true,
                  hairpinMode: true,
                  ipam: {
                    type: 'host-local',
                    ranges: [[{ subnet: '10.76.1.0/24' }]],
                    dataDir: join(scratch.path, `ipam-${chain.name}`),
                  },
                },
                ...chain.plugins,
              ],
            });
            const before = sb.snapshot('host', { sections: SECTIONS });
            const a = {
              containerId: `${chain.name}-a`,
              netns: sb.container.path,
              ifName: 'eth0',
              capabilityArgs: chain.capabilityArgs,
            };
            const b = { containerId: `${chain.name}-b`, netns: second.path, ifName: 'eth0' };
            const ra = await rt.addNetworkList(list, a);
            const rb = await rt.addNetworkList(list, b);
            await rt.checkNetworkList(list, a);
            await rt.checkNetworkList(list, b);
            const ipA = ra.ips![0]!.address.split('/')[0]!;
            const ipB = rb.ips![0]!.address.split('/')[0]!;
            const gw = '10.76.1.1';

            servers.push(await server(sb.container.name, 8080, 'A'));
            servers.push(await server(second.name, 8080, 'B'));
            assert.equal(ask(second.name, 'tcp', ipA, 8080), 'A', 'B → A over the bridge');
            assert.equal(ask(sb.container.name, 'tcp', ipB, 8080), 'B', 'A → B over the bridge');
            assert.equal(ask(sb.host.name, 'tcp', gw, 18090), 'A', 'published port via the host address');
            assert.equal(
              ask(second.name, 'tcp', gw, 18090),
              'A',
              'published port from another container (hairpin)',
            );
            assert.equal(
              sb.exec('cat', ['/proc/sys/net/core/somaxconn'], { ns: 'container' }).stdout.trim(),
              '512',
              'tuning sysctl in the container',
            );
            if (chain.shaped) {
              assert.ok(
                (ra.interfaces ?? []).some((i) => i.name.startsWith('bwp')),
                'the IFB is in the result',
              );
              assertShaped(
                'egress of A',
                await transfer(sb.container.name, sb.host.name, gw, 19011, BYTES),
                BYTES,
                RATE,
              );
              assertShaped(
                'ingress of A',
                await transfer(sb.host.name, sb.container.name, ipA, 19012, BYTES),
                BYTES,
                RATE,
              );
              assertUnshaped(
                'egress of B',
                await transfer(second.name, sb.host.name, gw, 19013, BYTES),
                BYTES,
                RATE,
              );
            }
            chain.whileUp?.(sb.exec('iptables-save', [], { ns: 'host' }).stdout, ipA, ipB);
            for (const s of servers.splice(0)) s.kill();

            await rt.delNetworkList(list, b);
            await rt.delNetworkList(list, a);
            assert.equal(ask(sb.host.name, 'tcp', gw, 18090), '', 'nothing published after DEL');
            const left = diffSnapshots(before, sb.snapshot('host', { sections: SECTIONS }));
            const unexpected = left
              .map((d) => ({
                ...d,
                removed: d.removed,
                added: d.added.filter((l) => !chain.shared.test(l) && !BASE_TABLES.test(l)),
              }))
              .filter((d) => d.removed.length || d.added.length);
            assert.deepEqual(unexpected, [], `left behind in the host:\n${formatDiff(unexpected)}`);
          } finally {
            for (const s of servers) s.kill();
          }
        },
        { enterHost: true },
      );
    });
  });
}
