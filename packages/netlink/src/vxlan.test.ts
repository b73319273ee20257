// Byte-level tests of the vxlan RTM_NEWLINK: the message as buildVxlan made it before its head (MTU, ADDRESS, IFNAME,
// IFLA_LINKINFO with the kind) came from sublink.ts's newLinkMessage, sequence number 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildVxlan } from './vxlan.ts';

test('buildVxlan: IPv4 VTEP on an underlay device, MTU and MAC', () => {
  const o = {
    name: 'cnikit.1',
    vni: 1,
    port: 8472,
    local: '192.168.240.2',
    mtu: 1450,
    mac: '02:00:00:00:00:01',
  };
  assert.equal(
    buildVxlan(o, 2).finish(0).toString('hex'),
    '800000001000050600000000000000000000000000000000000000000000000008000400aa0500000a00010002000000000100000d0003' +
      '00636e696b69742e31000000003c0012000900010076786c616e0000002c0002000800010001000000080003000200000008000400c0a8' +
      'f002050007000000000006000f0021180000',
  );
});

test('buildVxlan: IPv6 VTEP, no device, learning on', () => {
  const o = { name: 'vx6', vni: 16777215, port: 4789, local: 'fd00::2', learning: true };
  assert.equal(
    buildVxlan(o, undefined).finish(0).toString('hex'),
    '68000000100005060000000000000000000000000000000000000000000000000800030076783600400012000900010076786c616e000000' +
      '3000020008000100ffffff0014001100fd000000000000000000000000000002050007000100000006000f0012b50000',
  );
});

test('buildVxlan: a bad MAC is refused with the message of the other link builders', () => {
  assert.throws(
    () => buildVxlan({ name: 'vx0', vni: 1, port: 4789, local: '10.0.0.1', mac: 'nope' }, undefined),
    /nope/,
  );
});
