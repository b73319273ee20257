import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type * as nl from '@cnikit/netlink';
import { findReturned } from './move.ts';
import type { SavedDevice } from './state.ts';

const link = (o: Partial<nl.Link>): nl.Link =>
  ({ index: 5, name: 'x', mac: '', alias: undefined, ...o }) as nl.Link;
const nic: SavedDevice = {
  device: 'enp3s0',
  mac: '0a:00:00:00:00:01',
  up: true,
  addrs: [],
  mtu: 1500,
  permMac: '00:15:5d:0a:0b:0c',
  parentBus: 'pci',
  parentDev: '0000:03:00.0',
};

describe('findReturned: which host link is the device of an attachment whose namespace died', () => {
  test('the permanent MAC finds it whatever the container did to its MAC and alias', () => {
    const l = link({ name: 'net1', mac: '02:99:99:99:99:99', permMac: '00:15:5D:0A:0B:0C' });
    assert.equal(findReturned([link({ name: 'eth0', mac: nic.mac }), l], nic), l);
  });
  test('the parent bus device finds it (bus and address must both match)', () => {
    const l = link({ name: 'dev3', mac: '02:99:99:99:99:99', parentBus: 'pci', parentDev: '0000:03:00.0' });
    const other = link({ name: 'dev4', parentBus: 'auxiliary', parentDev: '0000:03:00.0' });
    assert.equal(findReturned([other, l], nic), l);
    assert.equal(findReturned([other], nic), undefined);
  });
  test('a link that never left (its own name, no alias) is not taken', () => {
    assert.equal(
      findReturned([link({ name: 'enp3s0', permMac: nic.permMac, mac: nic.mac })], nic),
      undefined,
    );
    const aliased = link({ name: 'enp3s0', permMac: nic.permMac, alias: 'enp3s0' });
    assert.equal(
      findReturned([aliased], nic),
      aliased,
      'its alias says it was moved (a kill before the move)',
    );
  });
  test('without hardware identifiers (virtual devices, older state files): MAC of ADD and alias', () => {
    const veth: SavedDevice = { device: 'hd0', mac: '0a:72:00:00:00:01', up: true, addrs: [] };
    const l = link({ name: 'net1', mac: '0A:72:00:00:00:01', alias: 'hd0' });
    assert.equal(findReturned([link({ name: 'net2', mac: veth.mac }), l], veth), l);
    assert.equal(findReturned([link({ name: 'net1', mac: veth.mac, alias: 'other' })], veth), undefined);
    assert.equal(
      findReturned([link({ name: 'net1', mac: '0a:72:00:00:00:02', alias: 'hd0' })], veth),
      undefined,
    );
  });
});
