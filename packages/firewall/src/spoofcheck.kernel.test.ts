// gcSpoofCheck (moved from the bridge plugin) against real nftables in a private namespace.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sandboxForFile } from '@cnikit/testing';
import { nftList } from './nftables.ts';
import { gcSpoofCheck, iifnameOf, setupSpoofCheck } from './spoofcheck.ts';

const env = sandboxForFile();
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const refIDsOf = () =>
  nftList(['chain', 'bridge', 'nat', 'PREROUTING'], ns)
    .rules.map((r) => r.comment ?? '')
    .filter((c) => c.startsWith('macspoofchk-'))
    .map((c) => c.slice('macspoofchk-'.length))
    .sort();
const chainsOf = () =>
  nftList(['table', 'bridge', 'nat'], ns)
    .chains.map((c) => c.name)
    .sort();

describe('gcSpoofCheck', () => {
  test('removes only checks that are neither valid nor on an existing interface', () => {
    env.sb.exec('ip', ['link', 'add', 'vgcA', 'type', 'veth', 'peer', 'name', 'vgcAp']);
    // live: interface exists (kept though not valid); valid: interface gone but valid; stale: both gone
    setupSpoofCheck({ iface: 'vgcA', mac: '0a:58:0a:00:00:02', refID: 'live-eth0', ...ns });
    setupSpoofCheck({ iface: 'vgcGone1', mac: '0a:58:0a:00:00:03', refID: 'valid-eth0', ...ns });
    setupSpoofCheck({ iface: 'vgcGone2', mac: '0a:58:0a:00:00:04', refID: 'stale-eth0', ...ns });
    assert.deepEqual(refIDsOf(), ['live-eth0', 'stale-eth0', 'valid-eth0']);

    gcSpoofCheck(new Set(['valid-eth0']), ns);
    assert.deepEqual(refIDsOf(), ['live-eth0', 'valid-eth0']);
    const chains = chainsOf();
    assert.ok(chains.includes('cni-br-iface-live-eth0-mac'));
    assert.ok(chains.includes('cni-br-iface-valid-eth0'));
    assert.ok(!chains.includes('cni-br-iface-stale-eth0'));
    assert.ok(!chains.includes('cni-br-iface-stale-eth0-mac'));

    // without opts: the calling thread's namespace (as the bridge plugin calls it)
    env.sb.exec('ip', ['link', 'del', 'vgcA']);
    env.sb.runInHost(() => gcSpoofCheck(new Set(['valid-eth0'])));
    assert.deepEqual(refIDsOf(), ['valid-eth0']);
    gcSpoofCheck(new Set(), ns);
    assert.deepEqual(refIDsOf(), []);
    assert.deepEqual(chainsOf(), ['PREROUTING']);
  });
});

test('iifnameOf reads the iifname match of an nft JSON rule', () => {
  const expr = [
    { match: { op: '==', left: { meta: { key: 'iifname' } }, right: 'veth1' } },
    { jump: { target: 'x' } },
  ];
  assert.equal(iifnameOf(expr), 'veth1');
  assert.equal(iifnameOf([{ jump: { target: 'x' } }]), undefined);
  assert.equal(iifnameOf([{ match: { left: { meta: { key: 'oifname' } }, right: 'veth1' } }]), undefined);
});
