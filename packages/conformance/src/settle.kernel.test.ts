/**
 * The kit's fixture links are settled before it snapshots anything: a carrier change reaches the stack through
 * linkwatch (later under load), and a bridge port's state, its operstate and its IPv6 link-local address follow it.
 * A port of an STP bridge stays in listening/learning for two forward delays: the deterministic stand-in for a link
 * the kernel has not finished bringing up.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withSandbox } from '@cnikit/testing';
import { pinBridgeAddress, settleLink } from './harness.ts';
import { nsExec } from './state.ts';

const portState = (out: string) =>
  (JSON.parse(out) as { linkinfo?: { info_slave_data?: { state?: string } } }[])[0]?.linkinfo?.info_slave_data
    ?.state;

test('settleLink returns once the port forwards and the link-local address is there, not before', async () => {
  await withSandbox(async (sb) => {
    nsExec(sb, 'host', 'ip', [
      'link',
      'add',
      'cfsbr0',
      'type',
      'bridge',
      'forward_delay',
      '200',
      'stp_state',
      '1',
    ]);
    nsExec(sb, 'host', 'ip', ['link', 'set', 'cfsbr0', 'up']);
    nsExec(sb, 'host', 'ip', [
      'link',
      'add',
      'cfsh0',
      'type',
      'veth',
      'peer',
      'name',
      'cfsc0',
      'netns',
      sb.container.name,
    ]);
    nsExec(sb, 'host', 'ip', ['link', 'set', 'cfsh0', 'master', 'cfsbr0', 'up']);
    nsExec(sb, sb.container, 'ip', ['link', 'set', 'cfsc0', 'up']);
    const show = () =>
      nsExec(sb, 'host', 'ip', ['-json', '-details', 'address', 'show', 'dev', 'cfsh0']).stdout;
    // the condition the kit waits for does not hold yet right after the link is up
    assert.notEqual(portState(show()), 'forwarding');
    const t0 = Date.now();
    settleLink(sb, 'host', 'cfsh0', 20_000);
    const waited = Date.now() - t0;
    assert.equal(portState(show()), 'forwarding', 'the port forwards when settleLink returns');
    assert.ok(waited >= 1000, `settleLink waited for the STP port (${waited} ms)`);
    const addrs = JSON.parse(show())[0].addr_info as { family: string; scope: string; tentative?: boolean }[];
    assert.ok(
      addrs.some((a) => a.family === 'inet6' && a.scope === 'link' && !a.tentative),
      JSON.stringify(addrs),
    );
    settleLink(sb, sb.container, 'cfsc0', 20_000);
    const c = JSON.parse(
      nsExec(sb, sb.container, 'ip', ['-json', 'address', 'show', 'dev', 'cfsc0']).stdout,
    )[0];
    assert.equal(c.operstate, 'UP');
    // a link that never settles (no carrier: the peer is down) costs the bound, not a hang
    nsExec(sb, sb.container, 'ip', ['link', 'set', 'cfsc0', 'down']);
    const t1 = Date.now();
    settleLink(sb, 'host', 'cfsh0', 300);
    assert.ok(Date.now() - t1 < 5000);
  });
});

const bridgeId = (sb: Parameters<typeof settleLink>[0], name: string) =>
  (
    JSON.parse(nsExec(sb, 'host', 'ip', ['-json', '-details', 'link', 'show', 'dev', name]).stdout) as {
      address: string;
      linkinfo: { info_data: { bridge_id: string } };
    }[]
  ).map((l) => `${l.address} ${l.linkinfo.info_data.bridge_id}`)[0];

test('a fixture bridge keeps its address and STP identity when a port with a lower address comes and goes', async () => {
  await withSandbox(async (sb) => {
    nsExec(sb, 'host', 'ip', ['link', 'add', 'cfsbr1', 'type', 'bridge']);
    pinBridgeAddress(sb, 'cfsbr1');
    const before = bridgeId(sb, 'cfsbr1');
    nsExec(sb, 'host', 'ip', [
      'link',
      'add',
      'cfsh1',
      'address',
      '00:00:00:00:00:01',
      'type',
      'veth',
      'peer',
      'name',
      'cfsp1',
    ]);
    nsExec(sb, 'host', 'ip', ['link', 'set', 'cfsh1', 'master', 'cfsbr1']);
    assert.equal(bridgeId(sb, 'cfsbr1'), before, 'the lowest port does not change the bridge');
    nsExec(sb, 'host', 'ip', ['link', 'del', 'cfsh1']);
    assert.equal(bridgeId(sb, 'cfsbr1'), before);
  });
});
