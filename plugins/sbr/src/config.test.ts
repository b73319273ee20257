import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkTable, ipConfigsFor, parseConf, staticGateways } from './config.ts';
import { nextFreeTable } from './routing.ts';

test('parseConf: the keys and their defaults; a wrong type keeps the reference prefix', () => {
  assert.deepEqual(parseConf({ cniVersion: '1.0.0', name: 'n', type: 'sbr' }), { addSourceHints: false });
  assert.deepEqual(parseConf({ table: 5, gateways: ['10.0.0.1'], addSourceHints: true }), {
    table: 5,
    gateways: ['10.0.0.1'],
    addSourceHints: true,
  });
  assert.throws(
    () => parseConf({ addSourceHints: 'yes' }),
    /^CniError: failed to parse network configuration: /,
  );
  for (const [table, why] of [
    [-1, 'table: -1 is less than the minimum 0'],
    [2 ** 32, 'table: 4294967296 is greater than the maximum 4294967295'],
  ] as const)
    assert.throws(() => parseConf({ table }), {
      code: 7,
      message: `failed to parse network configuration: ${why}`,
    });
});

test('checkTable: ADD refuses table 0 (RT_TABLE_UNSPEC) and 255 (local), code 7, and takes the others', () => {
  for (const t of [undefined, 1, 100, 252, 253, 254, 256, 0xffffffff])
    assert.doesNotThrow(() => checkTable(t));
  for (const [t, why] of [
    [0, '0 is not a routing table (RT_TABLE_UNSPEC)'],
    [255, "255 is the kernel's local table"],
  ] as const)
    assert.throws(() => checkTable(t), {
      code: 7,
      message: `failed to parse network configuration: table: ${why}: use 1-252 or 256 and above`,
    });
});

test('staticGateways: one per family, the reference messages', () => {
  assert.deepEqual(staticGateways(undefined), {});
  assert.deepEqual(staticGateways(['fd00::1', '10.0.0.1']), { v4: '10.0.0.1', v6: 'fd00::1' });
  assert.throws(() => staticGateways(['1.1.1.1', '::1', '::2']), {
    message: 'gateways list cannot contain more than 2 entries (one IPv4, one IPv6)',
  });
  assert.throws(() => staticGateways(['::1', '::2']), {
    message: 'gateways list contains multiple IPv6 addresses: ::1 and ::2',
  });
  assert.throws(() => staticGateways(['300.1.1.1']), {
    message: 'invalid static gateway IP address: 300.1.1.1',
  });
});

test('ipConfigsFor: addresses of the interface, or without (or out-of-range) interface index', () => {
  const prev = {
    cniVersion: '1.1.0',
    interfaces: [{ name: 'br0' }, { name: 'eth0', sandbox: '/run/netns/x' }],
    ips: [
      { interface: 0, address: '10.0.0.9/24' },
      { interface: 1, address: '10.0.0.5/24' },
      { address: '10.0.1.5/24' },
      { interface: 7, address: '10.0.2.5/24' },
    ],
  };
  assert.deepEqual(
    ipConfigsFor('eth0', prev).map((i) => i.address),
    ['10.0.0.5/24', '10.0.1.5/24', '10.0.2.5/24'],
  );
  assert.throws(() => ipConfigsFor('eth0', { cniVersion: '1.1.0' }), {
    message: 'No IP addresses supplied on interface: eth0',
  });
});

test('nextFreeTable skips every table in use', () => {
  assert.equal(nextFreeTable(new Set([254, 255]), 100), 100);
  assert.equal(nextFreeTable(new Set([100, 101, 103]), 100), 102);
});
