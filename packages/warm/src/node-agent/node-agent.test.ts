/**
 * The node agent's pure parts: configuration checks (each bad value names its ConfigMap key), the route plan
 * (host-gw on the same link, VXLAN otherwise, problems instead of half routes), what it keeps of a Node object, and
 * the masquerade rules.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, parseNodeAgentConfig } from './config.ts';
import { vtepMacFor, vxlanName } from './kernel.ts';
import { jumpRules, MASQ_CHAIN, masqueradeRules } from './masquerade.ts';
import { type PeerNode, peerFromNode, plan, VTEP_MAC_ANNOTATION } from './plan.ts';

const base = { NODE_NAME: 'n1', CNIKIT_CLUSTER_CIDR: '10.244.0.0/16, fd00:10:244::/56' };

test('config: defaults (auto, VNI 1, port 8472, non-masquerade = cluster CIDR, /readyz on 127.0.0.1:9809)', () => {
  const c = parseNodeAgentConfig(base);
  assert.equal(c.mode, 'auto');
  assert.deepEqual(c.vxlan, { id: 1, port: 8472, mtu: undefined });
  assert.deepEqual(c.clusterCidrs, ['10.244.0.0/16', 'fd00:10:244::/56']);
  assert.deepEqual(c.nonMasqueradeCidrs, c.clusterCidrs);
  assert.equal(c.masquerade, true);
  assert.deepEqual(c.health, { host: '127.0.0.1', port: 9809 });
  assert.equal(c.resyncMs, 30_000);
  const d = parseNodeAgentConfig({
    ...base,
    CNIKIT_NODE_AGENT_MODE: 'vxlan',
    CNIKIT_VXLAN_ID: '42',
    CNIKIT_VXLAN_PORT: '4789',
    CNIKIT_VXLAN_MTU: '1400',
    CNIKIT_NON_MASQUERADE_CIDRS: '10.0.0.0/8 192.168.0.0/16',
    CNIKIT_NODE_AGENT_HEALTH: '[::1]:9900',
  });
  assert.deepEqual(d.vxlan, { id: 42, port: 4789, mtu: 1400 });
  assert.deepEqual(d.nonMasqueradeCidrs, ['10.0.0.0/8', '192.168.0.0/16']);
  assert.deepEqual(d.health, { host: '::1', port: 9900 });
});

test('config: every bad value is an error naming its ConfigMap key and variable', () => {
  for (const [env, key] of [
    [{ CNIKIT_NODE_AGENT_MODE: 'bgp' }, 'node-agent-mode'],
    [{ CNIKIT_VXLAN_ID: '0' }, 'vxlan-id'],
    [{ CNIKIT_VXLAN_ID: '16777216' }, 'vxlan-id'],
    [{ CNIKIT_VXLAN_ID: '1.5' }, 'vxlan-id'],
    [{ CNIKIT_VXLAN_PORT: '65536' }, 'vxlan-port'],
    [{ CNIKIT_VXLAN_MTU: '500' }, 'vxlan-mtu'],
    [{ CNIKIT_CLUSTER_CIDR: '10.244.0.0/33' }, 'cluster-cidr'],
    [{ CNIKIT_CLUSTER_CIDR: '' }, 'cluster-cidr'],
    [{ CNIKIT_NON_MASQUERADE_CIDRS: '10.0.0.0/8,nope' }, 'non-masquerade-cidrs'],
    [{ CNIKIT_MASQUERADE: 'maybe' }, 'masquerade'],
    [{ CNIKIT_NODE_AGENT_RESYNC_SECONDS: '0' }, 'node-agent-resync-seconds'],
    [{ CNIKIT_NODE_AGENT_HEALTH: 'localhost' }, 'node-agent-health'],
    [{ NODE_NAME: '' }, 'NODE_NAME'],
  ] as const) {
    assert.throws(
      () => parseNodeAgentConfig({ ...base, ...env }),
      (e: unknown) =>
        e instanceof ConfigError && e.key === key && e.message.startsWith(`ConfigMap key ${key}`),
      JSON.stringify(env),
    );
  }
  assert.match(
    (() => {
      try {
        parseNodeAgentConfig({ ...base, CNIKIT_VXLAN_ID: '16777216' });
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    })(),
    /^ConfigMap key vxlan-id \(CNIKIT_VXLAN_ID\): 16777216 is out of range \(1\.\.16777215\)$/,
  );
  // masquerading off needs no cluster CIDR
  assert.equal(parseNodeAgentConfig({ NODE_NAME: 'n', CNIKIT_MASQUERADE: 'off' }).masquerade, false);
});

const peer = (name: string, i: number, ip4: string, ip6: string, mac?: string): PeerNode => ({
  name,
  podCidrs: [`10.244.${i}.0/24`, `fd00:10:244:${i}::/64`],
  internalIps: [ip4, ip6],
  vtepMac: mac,
});
const self = peer('n1', 1, '192.168.50.11', 'fd00:50::11');
const sameLink = peer('n2', 2, '192.168.50.12', 'fd00:50::12', '02:00:00:00:00:02');
const otherLink = peer('n3', 3, '192.168.61.13', 'fd00:61::13', '02:00:00:00:00:03');
const underlay = { prefixes: ['192.168.50.11/24', 'fd00:50::11/64'], vtepFamily: 4 as const };

test('plan: host-gw for peers on the link, VXLAN (route onlink via the CIDR’s first address, neighbour, FDB) otherwise', () => {
  const p = plan(self, [self, sameLink, otherLink], 'auto', underlay);
  assert.deepEqual(
    p.routes.map((r) => `${r.dst} ${r.via} ${r.gw}`),
    [
      '10.244.2.0/24 underlay 192.168.50.12',
      'fd00:10:244:2::/64 underlay fd00:50::12',
      '10.244.3.0/24 vxlan 10.244.3.0',
      'fd00:10:244:3::/64 vxlan fd00:10:244:3::',
    ],
  );
  assert.deepEqual(p.fdb, [{ node: 'n3', mac: '02:00:00:00:00:03', dst: '192.168.61.13' }]);
  assert.deepEqual(
    p.neigh.map((n) => `${n.ip} ${n.mac}`),
    ['10.244.3.0 02:00:00:00:00:03', 'fd00:10:244:3:: 02:00:00:00:00:03'],
  );
  assert.deepEqual(p.problems, []);
  // vxlan mode: everything through the device
  const v = plan(self, [self, sameLink, otherLink], 'vxlan', underlay);
  assert.ok(v.routes.every((r) => r.via === 'vxlan'));
  assert.equal(v.fdb.length, 2);
  // host-gw mode: the peer off the link is a problem, not a route
  const h = plan(self, [self, sameLink, otherLink], 'host-gw', underlay);
  assert.equal(h.routes.length, 2);
  assert.equal(h.problems.length, 2);
  assert.match(h.problems[0] as string, /node n3: no InternalIP of IPv4 on this node's link/);
});

test('plan: peers without VTEP MAC, with a CIDR overlapping ours or another peer’s, or a bad CIDR get no route', () => {
  const noMac = { ...otherLink, vtepMac: undefined };
  const overlap = { ...peer('n4', 1, '192.168.50.14', 'fd00:50::14'), podCidrs: ['10.244.1.128/25'] };
  const dup = { ...peer('n5', 2, '192.168.50.15', 'fd00:50::15'), podCidrs: ['10.244.2.0/24'] };
  const bad = { ...peer('n6', 6, '192.168.50.16', 'fd00:50::16'), podCidrs: ['nope'] };
  const p = plan(self, [sameLink, noMac, overlap, dup, bad], 'auto', underlay);
  assert.deepEqual(
    p.routes.map((r) => r.dst),
    ['10.244.2.0/24', 'fd00:10:244:2::/64'],
  );
  assert.equal(p.fdb.length, 0);
  assert.deepEqual(
    p.problems.map((x) => x.replace(/:.*/, '')),
    ['node n3', 'node n3', 'node n4', 'node n5', 'node n6'],
  );
  assert.match(p.problems[0] as string, new RegExp(`no ${VTEP_MAC_ANNOTATION} annotation yet`));
});

test('peerFromNode keeps name, pod CIDRs, InternalIPs and a well-formed VTEP MAC only', () => {
  const p = peerFromNode({
    metadata: {
      name: 'x',
      annotations: { [VTEP_MAC_ANNOTATION]: '02:AA:bb:cc:dd:ee', other: 'y'.repeat(10_000) },
    },
    spec: { podCIDR: '10.244.9.0/24', podCIDRs: ['10.244.9.0/24', 'fd00:10:244:9::/64'], taints: [] },
    status: {
      addresses: [
        { type: 'Hostname', address: 'x' },
        { type: 'InternalIP', address: '192.168.50.19' },
        { type: 'ExternalIP', address: '198.51.100.9' },
        { type: 'InternalIP', address: 'not-an-ip' },
      ],
      images: [{ names: ['big'] }],
    },
  });
  assert.deepEqual(p, {
    name: 'x',
    podCidrs: ['10.244.9.0/24', 'fd00:10:244:9::/64'],
    internalIps: ['192.168.50.19'],
    vtepMac: '02:aa:bb:cc:dd:ee',
  });
  assert.equal(
    peerFromNode({ metadata: { name: 'y', annotations: { [VTEP_MAC_ANNOTATION]: 'zz' } } })?.vtepMac,
    undefined,
  );
  assert.deepEqual(peerFromNode({ metadata: { name: 'z' }, spec: { podCIDR: '10.244.3.0/24' } })?.podCidrs, [
    '10.244.3.0/24',
  ]);
  assert.equal(peerFromNode({ kind: 'Status' }), undefined);
});

test('VTEP MAC is stable per node and locally administered unicast; device name cnikit.<vni> fits IFNAMSIZ', () => {
  const m = vtepMacFor('node-a');
  assert.equal(m, vtepMacFor('node-a'));
  assert.notEqual(m, vtepMacFor('node-b'));
  const first = Number.parseInt(m.slice(0, 2), 16);
  assert.equal(first & 0x03, 0x02);
  assert.ok(vxlanName(16_777_215).length <= 15);
});

test('masquerade: RETURN for each non-masquerade CIDR of the family, then MASQUERADE; jumps from the node’s pod CIDRs', () => {
  const r4 = masqueradeRules(4, ['10.244.0.0/16', 'fd00:10:244::/56', '172.16.0.0/12']);
  assert.deepEqual(
    r4.map((r) =>
      r
        .filter((a) => a !== '-m' && a !== 'comment')
        .join(' ')
        .replace(/--comment .* -j/, '-j'),
    ),
    ['-d 10.244.0.0/16 -j RETURN', '-d 172.16.0.0/12 -j RETURN', '-j MASQUERADE'],
  );
  assert.equal(masqueradeRules(6, ['10.244.0.0/16', 'fd00:10:244::/56']).length, 2);
  const j = jumpRules(4, ['10.244.1.0/24', 'fd00:10:244:1::/64']);
  assert.equal(j.length, 1);
  assert.deepEqual(j[0]?.slice(0, 6), ['-s', '10.244.1.0/24', '-m', 'addrtype', '!', '--dst-type']);
  assert.equal(j[0]?.at(-1), MASQ_CHAIN);
});
