import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { DEFAULT_DATA_DIR, parseConf, SPECIFY_EITHER } from './config.ts';
import { findHostLink } from './sysfs.ts';

const err = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e;
  }
  assert.fail('no error');
};

describe('host-device config', () => {
  test('keys and defaults', () => {
    const c = parseConf(
      {
        name: 'n',
        device: 'eth1',
        hwaddr: 'aa:bb:cc:dd:ee:ff',
        runtimeConfig: { deviceID: '0000:01:00.0' },
        ipam: { type: 'static' },
      },
      { command: 'ADD' },
    );
    assert.equal(c.device, 'eth1');
    assert.equal(c.hwaddr, 'aa:bb:cc:dd:ee:ff');
    assert.equal(c.deviceID, '0000:01:00.0');
    assert.equal(c.ipamType, 'static');
    assert.equal(c.dataDir, DEFAULT_DATA_DIR);
    assert.equal(c.dpdkMode, false);
    // Go fills the untagged DPDKMode field from a "dpdkmode" key (case-insensitively)
    assert.equal(parseConf({ device: 'x', dpdkmode: true }).dpdkMode, true);
  });
  test('a device key is needed for ADD/CHECK/DEL, not for GC/STATUS', () => {
    for (const command of ['ADD', 'CHECK', 'DEL'] as const) {
      const e = err(() => parseConf({ name: 'n' }, { command }));
      assert.ok(CniError.is(e));
      assert.equal(e.msg, SPECIFY_EITHER);
    }
    for (const command of ['GC', 'STATUS'] as const)
      assert.equal(parseConf({ name: 'n' }, { command }).device, '');
    assert.equal(parseConf({ runtimeConfig: { deviceID: 'x' } }, { command: 'ADD' }).deviceID, 'x');
  });
  test('type errors', () => {
    const e = err(() => parseConf({ pciBusID: 5 }));
    assert.ok(CniError.is(e));
    assert.equal(e.code, 7);
    assert.match(e.msg, /^failed to load netconf: config\.pciBusID: expected string/);
  });
});

describe('host-device lookup precedence (no sysfs needed)', () => {
  const links = () => [
    { name: 'eth1', mac: 'aa:bb:cc:dd:ee:01' },
    { name: 'eth2', mac: 'aa:bb:cc:dd:ee:02' },
  ];
  const exists = (n: string) => links().some((l) => l.name === n);
  const sel = { device: '', hwaddr: '', kernelpath: '', pciBusID: '', auxDevice: '' };
  test('device wins over hwaddr; hwaddr matches case-insensitively', () => {
    assert.equal(
      findHostLink({ ...sel, device: 'eth1', hwaddr: 'AA:BB:CC:DD:EE:02' }, links, exists),
      'eth1',
    );
    assert.equal(findHostLink({ ...sel, hwaddr: 'AA:BB:CC:DD:EE:02' }, links, exists), 'eth2');
  });
  test('reference errors', () => {
    assert.throws(() => findHostLink({ ...sel, device: 'eth9' }, links, exists), /^Error: Link not found$/);
    assert.throws(() => findHostLink(sel, links, exists), /failed to find physical interface/);
    assert.throws(
      () => findHostLink({ ...sel, kernelpath: 'sys/devices/x' }, links, exists),
      /kernel device path "sys\/devices\/x" must be absolute and begin with \/sys\/devices\//,
    );
  });
});
