// Run by scripts/run-tests.kernel.test.ts (not a *.test.ts: the full run never picks it up): a test file that changes
// a "root" sysctl, a link and a firewall rule — in the private namespace CNIKIT_TEST_HOST_NETNS names, never in this
// machine's own one (without that variable it refuses to run).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

test('changes the namespace run-tests watches', () => {
  const ns = process.env.CNIKIT_TEST_HOST_NETNS;
  assert.ok(ns?.startsWith('/run/netns/cnikit-'), `refusing to run outside a test namespace (got ${ns})`);
  const inNs = (...cmd: string[]) => {
    const r = spawnSync('nsenter', [`--net=${ns}`, '--', ...cmd], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${cmd.join(' ')}: ${r.stderr}`);
  };
  inNs('sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
  inNs('ip', 'link', 'add', 'leftover0', 'type', 'veth', 'peer', 'name', 'leftover1');
  inNs('iptables', '-w', '-A', 'FORWARD', '-s', '10.99.0.0/16', '-j', 'ACCEPT');
});
