import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { IFF_MULTI_QUEUE, IFF_NO_PI, IFF_TAP, IFF_VNET_HDR } from '@cnikit/sys';
import { parseConf, tapFlags } from './config.ts';

describe('tap config', () => {
  test('keys, defaults and MAC precedence (runtimeConfig > CNI_ARGS > mac)', () => {
    const c = parseConf({
      name: 'n',
      owner: 0,
      group: 4294967295,
      multiQueue: true,
      bridge: 'br0',
      mtu: 9000,
    });
    assert.equal(c.owner, 0);
    assert.equal(c.group, 4294967295);
    assert.equal(c.multiQueue, true);
    assert.equal(c.bridge, 'br0');
    assert.equal(c.mtu, 9000);
    assert.equal(c.mac, '');
    const req = { args: 'IgnoreUnknown=1;MAC=0a:00:00:00:00:02', command: 'ADD' as const };
    assert.equal(parseConf({ mac: '0A:00:00:00:00:01' }, { ...req, args: '' }).mac, '0a:00:00:00:00:01');
    assert.equal(parseConf({ mac: '0a:00:00:00:00:01' }, req).mac, '0a:00:00:00:00:02');
    assert.equal(
      parseConf({ mac: '0a:00:00:00:00:01', runtimeConfig: { mac: '0a:00:00:00:00:03' } }, req).mac,
      '0a:00:00:00:00:03',
    );
    // DEL does not validate the MAC (it is not used)
    assert.equal(parseConf({ mac: 'zz' }, { args: '', command: 'DEL' }).mac, 'zz');
    assert.throws(
      () => parseConf({ mac: 'zz' }, { args: '', command: 'ADD' }),
      /invalid args zz for MAC addr/,
    );
    assert.throws(() => parseConf({ group: 4294967296 }), /failed to load netconf: config\.group/);
  });
  test('TUNSETIFF flags as the reference gets them', () => {
    const base = { selinuxContext: '', multiQueue: false, owner: undefined, group: undefined };
    assert.equal(tapFlags(base), IFF_TAP | IFF_NO_PI);
    assert.equal(tapFlags({ ...base, multiQueue: true }), IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE);
    assert.equal(tapFlags({ ...base, owner: 1 }), IFF_TAP | IFF_NO_PI);
    assert.equal(tapFlags({ ...base, owner: 1, group: 2 }), IFF_TAP | IFF_VNET_HDR);
    assert.equal(
      tapFlags({ ...base, owner: 1, group: 2, multiQueue: true }),
      IFF_TAP | IFF_VNET_HDR | IFF_MULTI_QUEUE | IFF_NO_PI,
    );
    assert.equal(tapFlags({ ...base, owner: 1, group: 2, selinuxContext: 'x' }), IFF_TAP | IFF_NO_PI);
  });
});
