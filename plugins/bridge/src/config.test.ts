import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import {
  canonicalMac,
  collectVlanTrunk,
  loadNetConf,
  parseConf,
  validateForAdd,
  wantsVlanFiltering,
} from './config.ts';

const base = { cniVersion: '1.0.0', name: 'mynet', type: 'bridge' };

function cniErr(fn: () => unknown, code: number, msg: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(CniError.is(e), `expected CniError, got ${String(e)}`);
    assert.equal(e.code, code);
    if (typeof msg === 'string') assert.equal(e.msg, msg);
    else assert.match(e.msg, msg);
    return true;
  });
}

describe('collectVlanTrunk (reference table)', () => {
  test('absent / empty → no VIDs', () => {
    assert.deepEqual(collectVlanTrunk(undefined), []);
    assert.deepEqual(collectVlanTrunk([]), []);
  });
  test('min/max range', () => {
    assert.deepEqual(collectVlanTrunk([{ minID: 100, maxID: 105 }]), [100, 101, 102, 103, 104, 105]);
  });
  test('id only', () => {
    assert.deepEqual(collectVlanTrunk([{ id: 100 }]), [100]);
  });
  test('id + range, de-duplicated and sorted', () => {
    assert.deepEqual(
      collectVlanTrunk([
        { minID: 100, maxID: 103 },
        { id: 50 },
        { id: 101 },
        { minID: 102, maxID: 104, id: 4094 },
      ]),
      [50, 100, 101, 102, 103, 104, 4094],
    );
  });
  const errors: Array<[string, object, string]> = [
    [
      'missing maxID',
      { minID: 100 },
      'minID and maxID should be configured simultaneously, maxID is missing',
    ],
    [
      'missing minID',
      { maxID: 100 },
      'minID and maxID should be configured simultaneously, minID is missing',
    ],
    ['minID negative', { minID: -100, maxID: 105 }, 'incorrect trunk minID parameter'],
    ['minID zero', { minID: 0, maxID: 105 }, 'incorrect trunk minID parameter'],
    ['minID > 4094', { minID: 5000, maxID: 5005 }, 'incorrect trunk minID parameter'],
    ['maxID > 4094', { minID: 100, maxID: 5000 }, 'incorrect trunk maxID parameter'],
    ['maxID negative', { minID: 100, maxID: -1 }, 'incorrect trunk maxID parameter'],
    ['id > 4094', { id: 5000 }, 'incorrect trunk id parameter'],
    ['id negative', { id: -100 }, 'incorrect trunk id parameter'],
    ['maxID < minID', { minID: 500, maxID: 100 }, 'minID is greater than maxID in trunk parameter'],
  ];
  for (const [name, entry, msg] of errors) {
    test(`error: ${name}`, () => cniErr(() => collectVlanTrunk([entry]), 7, msg));
    test(`error through loadNetConf: ${name}`, () =>
      cniErr(() => loadNetConf({ ...base, vlanTrunk: [entry] }, ''), 7, msg));
  }
});

describe('loadNetConf', () => {
  test('defaults', () => {
    const c = loadNetConf(base, '');
    assert.equal(c.bridge, 'cni0');
    assert.equal(c.isGateway, false);
    assert.equal(c.mtu, 0);
    assert.equal(c.vlan, 0);
    assert.deepEqual(c.vlans, []);
    assert.equal(c.vlanTrunkPresent, false);
    assert.equal(c.preserveDefaultVlan, false);
    assert.equal(c.ipamType, '');
    assert.equal(c.mac, '');
    assert.equal(wantsVlanFiltering(c), false);
  });
  test('isDefaultGateway implies isGateway', () => {
    const c = loadNetConf({ ...base, isDefaultGateway: true }, '');
    assert.equal(c.isGateway, true);
  });
  test('keys match case-insensitively like Go', () => {
    const c = loadNetConf(
      { ...base, Bridge: 'br9', ISGATEWAY: true, RuntimeConfig: { MAC: '0a:00:00:00:00:01' } },
      '',
    );
    assert.equal(c.bridge, 'br9');
    assert.equal(c.isGateway, true);
    assert.equal(c.mac, '0a:00:00:00:00:01');
  });
  test('VLAN bounds: 0 and 4094 ok, -100 and 5000 rejected', () => {
    assert.equal(loadNetConf({ ...base, vlan: 0 }, '').vlan, 0);
    assert.equal(loadNetConf({ ...base, vlan: 4094 }, '').vlan, 4094);
    cniErr(
      () => loadNetConf({ ...base, vlan: -100 }, ''),
      7,
      'invalid VLAN ID -100 (must be between 0 and 4094)',
    );
    cniErr(
      () => loadNetConf({ ...base, vlan: 5000 }, ''),
      7,
      'invalid VLAN ID 5000 (must be between 0 and 4094)',
    );
  });
  test('vlan_filtering when vlan set or vlanTrunk present (even empty)', () => {
    assert.equal(wantsVlanFiltering(loadNetConf({ ...base, vlan: 100 }, '')), true);
    assert.equal(wantsVlanFiltering(loadNetConf({ ...base, vlanTrunk: [] }, '')), true);
    assert.equal(wantsVlanFiltering(loadNetConf({ ...base, vlanTrunk: null }, '')), false);
  });
  test('type mismatches name the key', () => {
    cniErr(() => loadNetConf({ ...base, vlan: '100' }, ''), 7, /^failed to load netconf: .*vlan.*expected/);
    cniErr(() => loadNetConf({ ...base, isGateway: 'true' }, ''), 7, /^failed to load netconf: .*isGateway/);
    cniErr(() => loadNetConf({ ...base, vlan: 1.5 }, ''), 7, /^failed to load netconf: .*vlan/);
    cniErr(() => loadNetConf({ ...base, vlanTrunk: [{ id: 'x' }] }, ''), 7, /vlanTrunk\[0\]\.id/);
  });
  test('negative mtu behaves as unset (reference ignores values ≤ 0)', () => {
    assert.equal(loadNetConf({ ...base, mtu: -5 }, '').mtu, 0);
    assert.equal(loadNetConf({ ...base, mtu: 1400 }, '').mtu, 1400);
  });
  test('MAC precedence: runtimeConfig > args.cni > CNI_ARGS', () => {
    const env = 'IgnoreUnknown=1;MAC=0a:00:00:00:00:03';
    assert.equal(loadNetConf(base, env).mac, '0a:00:00:00:00:03');
    assert.equal(
      loadNetConf({ ...base, args: { cni: { mac: '0a:00:00:00:00:02' } } }, env).mac,
      '0a:00:00:00:00:02',
    );
    assert.equal(
      loadNetConf(
        { ...base, args: { cni: { mac: '0a:00:00:00:00:02' } }, runtimeConfig: { mac: '0a:00:00:00:00:01' } },
        env,
      ).mac,
      '0a:00:00:00:00:01',
    );
  });
  test('CNI_ARGS errors (Go LoadArgs rules)', () => {
    assert.throws(() => loadNetConf(base, 'FOO=bar'), /ARGS: unknown args/);
    assert.throws(() => loadNetConf(base, 'MAC'), /ARGS: invalid pair/);
    assert.equal(loadNetConf(base, 'IgnoreUnknown=1;FOO=bar').mac, '');
  });
  test('DNS kept as given', () => {
    assert.deepEqual(loadNetConf({ ...base, dns: { nameservers: ['1.1.1.1'] } }, '').dns, {
      nameservers: ['1.1.1.1'],
    });
  });
});

describe('validateForAdd', () => {
  test('IPAM + disableContainerInterface', () => {
    const c = loadNetConf({ ...base, ipam: { type: 'host-local' }, disableContainerInterface: true }, '');
    cniErr(() => validateForAdd(c), 7, 'cannot use IPAM when DisableContainerInterface flag is set');
  });
  test('disableContainerInterface without IPAM is fine', () => {
    const c = loadNetConf({ ...base, disableContainerInterface: true }, '');
    assert.deepEqual(validateForAdd(c), { mac: '', backend: undefined });
  });
  test('hairpin + promisc', () => {
    const c = loadNetConf({ ...base, hairpinMode: true, promiscMode: true }, '');
    cniErr(() => validateForAdd(c), 7, 'cannot set hairpin mode and promiscuous mode at the same time');
  });
  test('ipMasqBackend values', () => {
    const mk = (b: unknown) =>
      loadNetConf({ ...base, ipMasq: true, ipam: { type: 'host-local' }, ipMasqBackend: b }, '');
    assert.equal(validateForAdd(mk('iptables')).backend, 'iptables');
    assert.equal(validateForAdd(mk('nftables')).backend, 'nftables');
    assert.equal(validateForAdd(mk('auto')).backend, undefined);
    assert.equal(validateForAdd(mk(undefined)).backend, undefined);
    cniErr(() => validateForAdd(mk('ebtables')), 7, 'unknown ipmasq backend "ebtables"');
    // not used without ipMasq: the reference never looks at it then
    assert.equal(validateForAdd(loadNetConf({ ...base, ipMasqBackend: 'bogus' }, '')).backend, undefined);
  });
  test('invalid MAC rejected with the Go message before anything is created', () => {
    cniErr(
      () => validateForAdd(loadNetConf({ ...base, runtimeConfig: { mac: 'zz' } }, '')),
      7,
      'address zz: invalid MAC address',
    );
    assert.equal(
      validateForAdd(loadNetConf({ ...base, args: { cni: { mac: '0A-00-00-00-00-0B' } } }, '')).mac,
      '0a:00:00:00:00:0b',
    );
  });
  test('bridge name validated', () => {
    cniErr(
      () => validateForAdd(loadNetConf({ ...base, bridge: '' }, '')),
      7,
      /invalid bridge name "": name is empty/,
    );
    cniErr(() => validateForAdd(loadNetConf({ ...base, bridge: 'a/b' }, '')), 7, /invalid bridge name/);
    cniErr(
      () => validateForAdd(loadNetConf({ ...base, bridge: 'abcdefghijklmnop' }, '')),
      7,
      /longer than 15/,
    );
    cniErr(
      () => validateForAdd(loadNetConf({ ...base, bridge: '..' }, '')),
      7,
      /invalid bridge name "..": name is . or ../,
    );
    cniErr(
      () => validateForAdd(loadNetConf({ ...base, bridge: 'br 0' }, '')),
      7,
      'invalid bridge name "br 0": name contains / or : or whitespace characters',
    );
  });
});

describe('canonicalMac', () => {
  test('Go ParseMAC 48-bit forms', () => {
    assert.equal(canonicalMac('AA:bb:cc:dd:ee:ff'), 'aa:bb:cc:dd:ee:ff');
    assert.equal(canonicalMac('aa-bb-cc-dd-ee-ff'), 'aa:bb:cc:dd:ee:ff');
    assert.equal(canonicalMac('aabb.ccdd.eeff'), 'aa:bb:cc:dd:ee:ff');
  });
  for (const bad of [
    '',
    'zz',
    'aa:bb:cc:dd:ee',
    'aa:bb-cc:dd:ee:ff',
    'aa:bb:cc:dd:ee:ff:00:11',
    'a:bb:cc:dd:ee:ff',
  ]) {
    test(`rejects ${JSON.stringify(bad)}`, () =>
      cniErr(
        () => canonicalMac(bad),
        7,
        bad === '' ? 'invalid MAC address' : `address ${bad}: invalid MAC address`,
      ));
  }
});

describe('parseConf for STATUS/GC', () => {
  for (const command of ['STATUS', 'GC'] as const) {
    test(`${command}: no VLAN validation, no CNI_ARGS, like the reference STATUS`, () => {
      const c = parseConf(
        { ...base, vlan: 5000, ipam: { type: 'host-local' } },
        { command, args: 'MAC=bogus' },
      );
      assert.deepEqual(
        { name: c.name, ipamType: c.ipamType, ipMasq: c.ipMasq, macspoofchk: c.macspoofchk, mac: c.mac },
        { name: 'mynet', ipamType: 'host-local', ipMasq: false, macspoofchk: false, mac: '' },
      );
    });
    test(`${command}: type errors still reported`, () => {
      cniErr(
        () => parseConf({ ...base, ipam: { type: 5 } }, { command, args: '' }),
        7,
        /^failed to load netconf: .*ipam\.type/,
      );
    });
  }
  test('ADD, DEL and CHECK validate the VLAN', () => {
    for (const command of ['ADD', 'DEL', 'CHECK'] as const) {
      cniErr(() => parseConf({ ...base, vlan: 5000 }, { command, args: '' }), 7, /invalid VLAN ID 5000/);
    }
  });
});
