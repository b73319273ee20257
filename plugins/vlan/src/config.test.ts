import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateContainerInterface } from '@cnikit/link';
import { CniError } from '@cnikit/skel';
import { type VlanLinkView, vlanLinkCheck } from './check-logic.ts';
import { parseConf } from './config.ts';

const add = { command: 'ADD' as const };

describe('vlan parseConf', () => {
  test('every key', () => {
    assert.deepEqual(
      parseConf(
        {
          cniVersion: '0.4.0',
          name: 'n',
          master: 'eth1',
          vlanId: 42,
          mtu: 1400,
          linkInContainer: true,
          ipam: { type: 'static' },
          dns: { search: ['a'] },
        },
        add,
      ),
      {
        cniVersion: '0.4.0',
        name: 'n',
        master: 'eth1',
        vlanId: 42,
        mtu: 1400,
        linkInContainer: true,
        ipamType: 'static',
        dns: { search: ['a'] },
      },
    );
  });
  test('ADD: master required, VLAN ID 0..4094 (the reference texts, code 7)', () => {
    const bad = (raw: object, msg: string) =>
      assert.throws(
        () => parseConf(raw, add),
        (e: unknown) => e instanceof CniError && e.code === 7 && e.msg === msg,
      );
    bad(
      { vlanId: 1 },
      '"master" field is required. It specifies the host interface name to create the VLAN for',
    );
    bad({ master: 'eth0', vlanId: 4095 }, 'invalid VLAN ID 4095 (must be between 0 and 4094 inclusive)');
    bad({ master: 'eth0', vlanId: -1 }, 'invalid VLAN ID -1 (must be between 0 and 4094 inclusive)');
    assert.equal(parseConf({ master: 'eth0', vlanId: 0 }, add).vlanId, 0);
    assert.equal(parseConf({ master: 'eth0', vlanId: 4094 }, add).vlanId, 4094);
  });
  test('DEL, CHECK, GC, STATUS decode only (a DEL always cleans up)', () => {
    for (const command of ['DEL', 'CHECK', 'GC', 'STATUS'] as const)
      assert.equal(parseConf({ vlanId: 5000 }, { command }).vlanId, 5000);
  });
  test('type errors: "failed to load netconf: …"', () => {
    for (const raw of [{ vlanId: '5' }, { mtu: true }, { master: [] }]) {
      assert.throws(
        () => parseConf(raw, add),
        (e: unknown) => e instanceof CniError && e.msg.startsWith('failed to load netconf: '),
      );
    }
  });
});

describe('vlan CHECK logic', () => {
  const link = (o: Partial<VlanLinkView> = {}): VlanLinkView => ({
    name: 'eth0',
    kind: 'vlan',
    mac: '02:00:00:00:00:01',
    mtu: 1500,
    vlan: { id: 42 },
    ...o,
  });
  const intf = { name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/run/netns/c' };
  test('a matching interface passes (MTU 0 = not checked)', () => {
    validateContainerInterface(intf, vlanLinkCheck(42, 0), () => link({ mtu: 1400 }));
    validateContainerInterface(intf, vlanLinkCheck(42, 1500), () => link());
  });
  test('each mismatch with the reference message (its "Tuning" wording included)', () => {
    const fails = (i: typeof intf, id: number, mtu: number, l: VlanLinkView | undefined, msg: string) =>
      assert.throws(() => validateContainerInterface(i, vlanLinkCheck(id, mtu), () => l), { message: msg });
    fails({ ...intf, name: '' }, 42, 0, link(), 'Container interface name missing in prevResult: ');
    fails(intf, 42, 0, undefined, 'vlan: Container Interface name in prevResult: eth0 not found');
    fails(
      { ...intf, sandbox: '' },
      42,
      0,
      link(),
      'vlan: Error: Container interface eth0 should not be in host namespace',
    );
    fails(
      intf,
      42,
      0,
      link({ kind: 'macvlan', vlan: undefined }),
      'Error: Container interface eth0 not of type vlan',
    );
    fails(
      intf,
      42,
      0,
      link({ mac: '02:00:00:00:00:09' }),
      "vlan: Interface eth0 Mac 02:00:00:00:00:01 doesn't match container Mac: 02:00:00:00:00:09",
    );
    fails(intf, 43, 0, link(), 'Error: Tuning link eth0 configured promisc is 43, current value is 42');
    fails(intf, 42, 1400, link(), 'Error: Tuning configured MTU of eth0 is 1400, current value is 1500');
  });
});
