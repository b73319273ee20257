import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { masqBackend, parseConf } from './config.ts';
import { checkAddresses, containerPlan, familiesOf, hostPlan } from './plan.ts';

describe('ptp plan', () => {
  const ips = [
    { address: '10.1.2.5/24', gateway: '10.1.2.1' },
    { address: 'fd00:1::5/64', gateway: 'fd00:1::1' },
  ];
  test('container: prefix routes replaced by a link route to the gateway and the prefix via it', () => {
    assert.deepEqual(containerPlan('eth0', ips), {
      remove: [
        { dst: '10.1.2.0/24', dev: 'eth0', scope: 'nowhere' },
        { dst: 'fd00:1::/64', dev: 'eth0', scope: 'nowhere' },
      ],
      add: [
        { dst: '10.1.2.1/32', dev: 'eth0', scope: 'link', src: '10.1.2.5' },
        { dst: '10.1.2.0/24', gw: '10.1.2.1', dev: 'eth0', scope: 'universe', src: '10.1.2.5' },
        { dst: 'fd00:1::1/128', dev: 'eth0', scope: 'link', src: 'fd00:1::5' },
        { dst: 'fd00:1::/64', gw: 'fd00:1::1', dev: 'eth0', scope: 'universe', src: 'fd00:1::5' },
      ],
    });
  });
  test('host: gateway /32 /128 addresses and host routes to the container addresses', () => {
    assert.deepEqual(hostPlan('veth1', ips), {
      addrs: ['10.1.2.1/32', 'fd00:1::1/128'],
      routes: [
        { dst: '10.1.2.5/32', dev: 'veth1', scope: 'host' },
        { dst: 'fd00:1::5/128', dev: 'veth1', scope: 'host' },
      ],
    });
  });
  test('families once each, in order', () => {
    assert.deepEqual(familiesOf([...ips, { address: '10.1.3.5/24', gateway: '10.1.3.1' }]), [4, 6]);
  });
  test('an address without gateway, or with a gateway of the other family, is refused before any change', () => {
    assert.throws(
      () => checkAddresses([{ address: '10.1.2.5/24' }]),
      /has no gateway: ptp routes through it/,
    );
    assert.throws(
      () => checkAddresses([{ address: '10.1.2.5/24', gateway: 'fd00::1' }]),
      /of another address family/,
    );
    assert.throws(
      () => checkAddresses([{ address: 'nope', gateway: '10.1.2.1' }]),
      /invalid IP address "nope"/,
    );
  });
});

describe('ptp config', () => {
  test('defaults and keys', () => {
    assert.deepEqual(parseConf({ cniVersion: '1.0.0', name: 'n', type: 'ptp' }), {
      cniVersion: '1.0.0',
      name: 'n',
      ipMasq: false,
      ipMasqBackend: undefined,
      mtu: 0,
      ipamType: '',
      dns: undefined,
    });
    const c = parseConf({
      name: 'n',
      ipMasq: true,
      ipMasqBackend: 'nftables',
      mtu: 1400,
      ipam: { type: 'host-local' },
      dns: { nameservers: ['1.1.1.1'] },
    });
    assert.equal(c.mtu, 1400);
    assert.equal(c.ipamType, 'host-local');
    assert.deepEqual(c.dns, { nameservers: ['1.1.1.1'] });
    assert.equal(masqBackend(c), 'nftables');
    assert.equal(parseConf({ mtu: -5 }).mtu, 0);
  });
  test('type errors: "failed to load netconf: …" code 7', () => {
    for (const bad of [{ mtu: 'x' }, { ipMasq: 'yes' }, { ipMasqBackend: 3 }, { ipam: [] }]) {
      const e = (() => {
        try {
          parseConf(bad);
        } catch (err) {
          return err;
        }
      })();
      assert.ok(CniError.is(e), JSON.stringify(bad));
      assert.equal(e.code, 7);
      assert.match(e.msg, /^failed to load netconf: config\./);
    }
  });
  test('masquerade backend: only iptables/nftables (no "auto", unlike bridge), ignored without ipMasq', () => {
    const base = parseConf({ ipMasq: true });
    assert.equal(masqBackend(base), undefined);
    assert.throws(() => masqBackend({ ...base, ipMasqBackend: 'auto' }), /unknown ipmasq backend "auto"/);
    assert.equal(masqBackend({ ...base, ipMasq: false, ipMasqBackend: 'auto' }), undefined);
  });
});
