import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateContainerInterface } from '@cnikit/link';
import { CniError } from '@cnikit/skel';
import { type IpvlanLinkView, ipvlanLinkCheck } from './check-logic.ts';
import { chainedMaster, modeFromString, parseConf } from './config.ts';

describe('ipvlan parseConf', () => {
  test('defaults and every key', () => {
    assert.deepEqual(parseConf({ name: 'n' }), {
      cniVersion: '',
      name: 'n',
      master: '',
      mode: '',
      mtu: 0,
      linkInContainer: false,
      ipamType: '',
      dns: undefined,
    });
    const c = parseConf({
      cniVersion: '1.1.0',
      name: 'n',
      master: 'eth1',
      mode: 'l3s',
      mtu: 1400,
      linkInContainer: true,
      ipam: { type: 'host-local' },
      dns: { domain: 'x' },
    });
    assert.equal(c.master, 'eth1');
    assert.equal(c.mode, 'l3s');
    assert.equal(c.mtu, 1400);
    assert.equal(c.linkInContainer, true);
    assert.equal(c.ipamType, 'host-local');
    assert.deepEqual(c.dns, { domain: 'x' });
  });
  test('type errors: "failed to load netconf: …"', () => {
    for (const raw of [{ mtu: 'x' }, { mode: 3 }, { linkInContainer: 1 }, { ipam: 'static' }]) {
      assert.throws(
        () => parseConf(raw),
        (e: unknown) => e instanceof CniError && e.msg.startsWith('failed to load netconf: '),
      );
    }
  });
});

describe('ipvlan modes and the chained master', () => {
  test('modeFromString', () => {
    assert.equal(modeFromString(''), 'l2');
    assert.equal(modeFromString('l2'), 'l2');
    assert.equal(modeFromString('l3'), 'l3');
    assert.equal(modeFromString('l3s'), 'l3s');
    assert.throws(() => modeFromString('l4'), { message: 'unknown ipvlan mode: "l4"' });
  });
  test('chainedMaster: prevResult with exactly one named interface', () => {
    assert.equal(chainedMaster(undefined), undefined);
    assert.equal(chainedMaster({ cniVersion: '1.0.0', interfaces: [{ name: 'eth1' }] }), 'eth1');
    const msg = { message: 'chained master failure. PrevResult lacks a single named interface' };
    assert.throws(() => chainedMaster({ cniVersion: '1.0.0' }), msg);
    assert.throws(() => chainedMaster({ cniVersion: '1.0.0', interfaces: [{ name: '' }] }), msg);
    assert.throws(
      () => chainedMaster({ cniVersion: '1.0.0', interfaces: [{ name: 'a' }, { name: 'b' }] }),
      msg,
    );
  });
});

describe('ipvlan CHECK logic', () => {
  const link = (o: Partial<IpvlanLinkView> = {}): IpvlanLinkView => ({
    name: 'eth0',
    kind: 'ipvlan',
    mac: '02:00:00:00:00:01',
    ipvlan: { mode: 'l2' },
    ...o,
  });
  const intf = { name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/run/netns/c' };
  test('a matching interface passes', () =>
    validateContainerInterface(intf, ipvlanLinkCheck('l2'), () => link()));
  test('each mismatch with the reference message', () => {
    const fails = (i: typeof intf, mode: string, l: IpvlanLinkView | undefined, msg: string) =>
      assert.throws(() => validateContainerInterface(i, ipvlanLinkCheck(mode), () => l), { message: msg });
    fails({ ...intf, name: '' }, '', link(), 'Container interface name missing in prevResult: ');
    fails(intf, '', undefined, 'Container Interface name in prevResult: eth0 not found');
    fails(
      { ...intf, sandbox: '' },
      '',
      link(),
      'Error: Container interface eth0 should not be in host namespace',
    );
    fails(
      intf,
      '',
      link({ kind: 'macvlan', ipvlan: undefined }),
      'Error: Container interface eth0 not of type ipvlan',
    );
    fails(intf, 'l3', link(), 'Container IPVlan mode l2 does not match expected value: l3');
    fails(intf, 'x', link(), 'unknown ipvlan mode: "x"');
    fails(
      intf,
      'l2',
      link({ mac: '02:00:00:00:00:09' }),
      "Interface eth0 Mac 02:00:00:00:00:01 doesn't match container Mac: 02:00:00:00:00:09",
    );
  });
});
