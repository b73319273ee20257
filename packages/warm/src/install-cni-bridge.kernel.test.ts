// install-cni's stale bridge address removal (a node's podCIDR changed) against a real bridge in a private
// namespace, and the conflist parsing it relies on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sandboxForFile } from '@cnikit/testing';
import { bridgeSubnets, dropStaleBridgeAddresses } from './install-cni-bridge.ts';

const env = sandboxForFile({ enterHost: true });

const conflist = (bridge: string | undefined, ranges: string[][], ipamType = 'host-local') => ({
  cniVersion: '1.0.0',
  name: 'k8s',
  plugins: [
    {
      type: 'bridge',
      ...(bridge ? { bridge } : {}),
      ipam: { type: ipamType, ranges: ranges.map((set) => set.map((subnet) => ({ subnet }))) },
    },
    { type: 'portmap' },
  ],
});

const addrs = (dev: string) =>
  env.sb
    .exec('ip', ['-o', 'addr', 'show', 'dev', dev, 'scope', 'global'])
    .stdout.split('\n')
    .map((l) => l.split(/\s+/)[3])
    .filter((x) => x !== undefined)
    .sort();

test('bridgeSubnets: host-local ranges (and a legacy subnet) per bridge, cni0 by default; other IPAMs and plugins ignored', () => {
  assert.deepEqual(
    [...bridgeSubnets(conflist(undefined, [['10.244.5.0/24'], ['fd00:10:244:5::/64']]))],
    [['cni0', ['10.244.5.0/24', 'fd00:10:244:5::/64']]],
  );
  assert.deepEqual(
    [...bridgeSubnets(conflist('cbr1', [['10.1.0.0/24', '10.2.0.0/24']]))],
    [['cbr1', ['10.1.0.0/24', '10.2.0.0/24']]],
  );
  assert.deepEqual(
    [
      ...bridgeSubnets({
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', subnet: '10.3.0.0/16' } }],
      }),
    ],
    [['cni0', ['10.3.0.0/16']]],
  );
  assert.equal(bridgeSubnets(conflist(undefined, [['10.244.5.0/24']], 'dhcp')).size, 0);
  for (const bad of [null, 'x', {}, { plugins: 'x' }, { plugins: [null, { type: 'bridge', ipam: {} }] }])
    assert.equal(bridgeSubnets(bad).size, 0, JSON.stringify(bad));
});

test('a bridge left with the previous podCIDR: its old gateways go, addresses in the new ranges stay', () => {
  const sb = env.sb;
  sb.exec('ip', ['link', 'add', 'cni0', 'type', 'bridge']);
  sb.exec('ip', ['addr', 'add', '10.244.2.1/24', 'dev', 'cni0']);
  sb.exec('ip', ['addr', 'add', '10.244.5.1/24', 'dev', 'cni0']);
  sb.exec('ip', ['addr', 'add', 'fd00:10:244:2::1/64', 'dev', 'cni0', 'nodad']);
  const lines: string[] = [];
  const n = dropStaleBridgeAddresses(conflist(undefined, [['10.244.5.0/24'], ['fd00:10:244:5::/64']]), (l) =>
    lines.push(l),
  );
  assert.equal(n, 2);
  assert.deepEqual(addrs('cni0'), ['10.244.5.1/24']);
  assert.deepEqual(lines, [
    "cni0: address 10.244.2.1/24 is outside the node's pod CIDRs (10.244.5.0/24): removed (the node's podCIDR changed)",
    "cni0: address fd00:10:244:2::1/64 is outside the node's pod CIDRs (fd00:10:244:5::/64): removed (the node's podCIDR changed)",
  ]);
  // again: nothing left to do
  assert.equal(
    dropStaleBridgeAddresses(conflist(undefined, [['10.244.5.0/24']]), () => {}),
    0,
  );
  sb.exec('ip', ['link', 'del', 'cni0']);
});

test('left alone: a family without a range, a link that is not a bridge, no link at all', () => {
  const sb = env.sb;
  sb.exec('ip', ['link', 'add', 'cni0', 'type', 'bridge']);
  sb.exec('ip', ['addr', 'add', '10.244.5.1/24', 'dev', 'cni0']);
  sb.exec('ip', ['addr', 'add', 'fd00:99::1/64', 'dev', 'cni0', 'nodad']);
  assert.equal(
    dropStaleBridgeAddresses(conflist(undefined, [['10.244.5.0/24']]), () => {}),
    0,
  );
  assert.deepEqual(addrs('cni0'), ['10.244.5.1/24', 'fd00:99::1/64']);
  sb.exec('ip', ['link', 'del', 'cni0']);
  // a veth named like the conflist's bridge
  sb.exec('ip', ['link', 'add', 'cbr9', 'type', 'veth', 'peer', 'name', 'cbr9p']);
  sb.exec('ip', ['addr', 'add', '10.9.9.1/24', 'dev', 'cbr9']);
  assert.equal(
    dropStaleBridgeAddresses(conflist('cbr9', [['10.244.5.0/24']]), () => {}),
    0,
  );
  assert.deepEqual(addrs('cbr9'), ['10.9.9.1/24']);
  sb.exec('ip', ['link', 'del', 'cbr9']);
  assert.equal(
    dropStaleBridgeAddresses(conflist('nosuch0', [['10.244.5.0/24']]), () => {}),
    0,
  );
});
