// Byte-level tests of the macvlan/ipvlan/vlan encoders against messages captured from iproute2 6.1 (strace -xx of
// `ip link add … type macvlan|ipvlan|vlan …` in a private namespace; the parent d0 had ifindex 3; sequence number
// zeroed), and of the IFLA_INFO_DATA decoder.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AF_UNSPEC,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINK,
  IFLA_LINKINFO,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  NlBuilder,
  parseAttrs,
  parseMessages,
  RTM_NEWLINK,
} from './nl.ts';
import {
  buildIpvlan,
  buildMacvlan,
  buildVlan,
  decodeLinkDetails,
  IFLA_IPVLAN_FLAGS,
  IFLA_IPVLAN_MODE,
  IFLA_MACVLAN_BC_QUEUE_LEN,
  IFLA_MACVLAN_BC_QUEUE_LEN_USED,
  IFLA_MACVLAN_FLAGS,
  IFLA_MACVLAN_MODE,
  IFLA_VLAN_ID,
  IFLA_VLAN_PROTOCOL,
  MACVLAN_FLAG_NOPROMISC,
} from './sublink.ts';

const iproute2: Record<string, string> = {
  // ip link add m0 link d0 type macvlan mode bridge
  macvlanBridge:
    '000000000000000000000000000000000800050003000000070003006d3000001c0012000b0001006d6163766c616e000c0002000800010004000000',
  // … mode private
  macvlanPrivate:
    '000000000000000000000000000000000800050003000000070003006d3000001c0012000b0001006d6163766c616e000c0002000800010001000000',
  // … mode vepa
  macvlanVepa:
    '000000000000000000000000000000000800050003000000070003006d3000001c0012000b0001006d6163766c616e000c0002000800010002000000',
  // … mode passthru
  macvlanPassthru:
    '000000000000000000000000000000000800050003000000070003006d3000001c0012000b0001006d6163766c616e000c0002000800010008000000',
  // … mode bridge bcqueuelen 100
  macvlanBcQueueLen:
    '000000000000000000000000000000000800050003000000070003006d300000240012000b0001006d6163766c616e001400020008000700640000000800010004000000',
  // ip link add m0 link d0 mtu 1400 address 02:11:22:33:44:55 type macvlan mode bridge
  macvlanMtuMac:
    '0000000000000000000000000000000008000400780500000a00010002112233445500000800050003000000070003006d3000001c0012000b0001006d6163766c616e000c0002000800010004000000',
  // … type macvlan mode passthru nopromisc
  macvlanNopromisc:
    '000000000000000000000000000000000800050003000000070003006d300000240012000b0001006d6163766c616e001400020008000100080000000600020001000000',
  // ip link add i0 link d0 type ipvlan mode l2
  ipvlanL2:
    '0000000000000000000000000000000008000500030000000700030069300000240012000a0001006970766c616e00001400020006000100000000000600020000000000',
  // … mode l3
  ipvlanL3:
    '0000000000000000000000000000000008000500030000000700030069300000240012000a0001006970766c616e00001400020006000100010000000600020000000000',
  // … mode l3s
  ipvlanL3s:
    '0000000000000000000000000000000008000500030000000700030069300000240012000a0001006970766c616e00001400020006000100020000000600020000000000',
  // … mode l2 private
  ipvlanL2Private:
    '0000000000000000000000000000000008000500030000000700030069300000240012000a0001006970766c616e00001400020006000100000000000600020001000000',
  // ip link add v0 link d0 type vlan id 5
  vlan5:
    '00000000000000000000000000000000080005000300000007000300763000001800120008000100766c616e0c0002000600010005000000',
  // ip link add v0 link d0 mtu 1400 type vlan id 4094
  vlan4094Mtu:
    '000000000000000000000000000000000800040078050000080005000300000007000300763000001800120008000100766c616e0c00020006000100fe0f0000',
  // ip link add v0 link d0 type vlan id 0
  vlan0:
    '00000000000000000000000000000000080005000300000007000300763000001800120008000100766c616e0c0002000600010000000000',
};

function check(name: string, b: NlBuilder): void {
  const msg = b.finish(0);
  assert.equal(msg.readUInt32LE(0), msg.length, 'length field');
  assert.equal(msg.readUInt16LE(4), RTM_NEWLINK, 'message type');
  assert.equal(msg.readUInt16LE(6).toString(16), '605', 'header flags (REQUEST|ACK|EXCL|CREATE)');
  assert.equal(msg.subarray(16).toString('hex'), iproute2[name]);
}

describe('stacked link encoders match iproute2 byte for byte', () => {
  test('macvlan modes', () => {
    check('macvlanBridge', buildMacvlan({ name: 'm0', parent: 3, mode: 'bridge' }, 3));
    check('macvlanPrivate', buildMacvlan({ name: 'm0', parent: 3, mode: 'private' }, 3));
    check('macvlanVepa', buildMacvlan({ name: 'm0', parent: 3, mode: 'vepa' }, 3));
    check('macvlanPassthru', buildMacvlan({ name: 'm0', parent: 3, mode: 'passthru' }, 3));
  });
  test('macvlan bcqueuelen, mtu + address, flags', () => {
    check('macvlanBcQueueLen', buildMacvlan({ name: 'm0', parent: 3, mode: 'bridge', bcQueueLen: 100 }, 3));
    check(
      'macvlanMtuMac',
      buildMacvlan({ name: 'm0', parent: 3, mode: 'bridge', mtu: 1400, mac: '02:11:22:33:44:55' }, 3),
    );
    check(
      'macvlanNopromisc',
      buildMacvlan({ name: 'm0', parent: 3, mode: 'passthru', flags: MACVLAN_FLAG_NOPROMISC }, 3),
    );
  });
  test('ipvlan modes and flag', () => {
    check('ipvlanL2', buildIpvlan({ name: 'i0', parent: 3, mode: 'l2' }, 3));
    check('ipvlanL3', buildIpvlan({ name: 'i0', parent: 3, mode: 'l3' }, 3));
    check('ipvlanL3s', buildIpvlan({ name: 'i0', parent: 3, mode: 'l3s' }, 3));
    check('ipvlanL2Private', buildIpvlan({ name: 'i0', parent: 3, mode: 'l2', flag: 'private' }, 3));
  });
  test('vlan id (0, 5, 4094) and mtu', () => {
    check('vlan5', buildVlan({ name: 'v0', parent: 3, id: 5 }, 3));
    check('vlan0', buildVlan({ name: 'v0', parent: 3, id: 0 }, 3));
    check('vlan4094Mtu', buildVlan({ name: 'v0', parent: 3, id: 4094, mtu: 1400 }, 3));
  });
  test('no mode, no bcqueuelen: no IFLA_INFO_DATA at all (kernel default)', () => {
    const msg = buildMacvlan({ name: 'm0', parent: 3 }, 3).finish(0);
    const info = parseAttrs(parseAttrs(msg, 32).get(IFLA_LINKINFO)!);
    assert.equal(info.get(IFLA_INFO_KIND)!.toString(), 'macvlan');
    assert.equal(info.has(IFLA_INFO_DATA), false);
  });
  test('target namespace fd: IFLA_NET_NS_FD beside IFLA_LINK (the parent stays in this namespace)', () => {
    const msg = buildVlan({ name: 'v0', parent: 3, id: 7 }, 3, 9).finish(0);
    const a = parseAttrs(msg, 32);
    assert.equal(a.get(IFLA_NET_NS_FD)!.readUInt32LE(0), 9);
    assert.equal(a.get(IFLA_LINK)!.readUInt32LE(0), 3);
    assert.equal(a.get(IFLA_IFNAME)!.toString('utf8', 0, 2), 'v0');
    assert.equal(a.has(IFLA_MTU), false);
  });
  test('802.1ad protocol is sent big-endian', () => {
    const msg = buildVlan({ name: 'v0', parent: 3, id: 7, protocol: '802.1ad' }, 3).finish(0);
    const data = parseAttrs(parseAttrs(parseAttrs(msg, 32).get(IFLA_LINKINFO)!).get(IFLA_INFO_DATA)!);
    assert.equal(data.get(IFLA_VLAN_PROTOCOL)!.toString('hex'), '88a8');
  });
});

describe('bad input never reaches the kernel', () => {
  const bad = (fn: () => unknown, re: RegExp) =>
    assert.throws(fn, (e: unknown) => (e as { code?: string }).code === 'EINVAL' && re.test(String(e)));
  test('names, ids, modes, mtu, mac, parent', () => {
    bad(() => buildVlan({ name: 'v0', parent: 3, id: 4095 }, 3), /invalid VLAN ID 4095/);
    bad(() => buildVlan({ name: 'v0', parent: 3, id: -1 }, 3), /invalid VLAN ID -1/);
    bad(() => buildVlan({ name: 'v0', parent: 3, id: 1.5 }, 3), /invalid VLAN ID 1.5/);
    bad(
      () => buildMacvlan({ name: 'm0', parent: 3, mode: 'nope' as 'bridge' }, 3),
      /unknown macvlan mode "nope"/,
    );
    bad(() => buildIpvlan({ name: 'i0', parent: 3, mode: 'l4' as 'l2' }, 3), /unknown ipvlan mode "l4"/);
    bad(() => buildMacvlan({ name: 'a-name-that-is-too-long', parent: 3 }, 3), /longer than 15 bytes/);
    bad(() => buildMacvlan({ name: 'a/b', parent: 3 }, 3), /not allowed/);
    bad(() => buildMacvlan({ name: '', parent: 3 }, 3), /empty/);
    bad(() => buildMacvlan({ name: 'm0', parent: 3, mtu: -1 }, 3), /invalid MTU -1/);
    bad(() => buildMacvlan({ name: 'm0', parent: 3, mac: '02:11' }, 3), /02:11/);
    bad(() => buildMacvlan({ name: 'm0', parent: 3, bcQueueLen: -5 }, 3), /invalid bcqueuelen -5/);
    bad(() => buildMacvlan({ name: 'm0', parent: 0 }, 0), /invalid parent index 0/);
  });
});

/** A kernel-style RTM_NEWLINK reply of `kind` with the given IFLA_INFO_DATA. */
function reply(kind: string, data: (b: NlBuilder) => void): ReturnType<typeof parseMessages>[number] {
  const b = new NlBuilder(RTM_NEWLINK, 0).ifinfo(AF_UNSPEC, 7);
  b.attrStr(IFLA_IFNAME, 'x0').attrU32(IFLA_MTU, 1500).attrU32(IFLA_LINK, 3);
  b.begin(IFLA_LINKINFO).attrStr(IFLA_INFO_KIND, kind, false).begin(IFLA_INFO_DATA);
  data(b);
  b.end().end();
  return parseMessages(b.finish(1))[0]!;
}

describe('decodeLinkDetails', () => {
  test('macvlan: mode, flags, broadcast queue lengths', () => {
    const l = decodeLinkDetails(
      reply('macvlan', (b) =>
        b
          .attrU32(IFLA_MACVLAN_MODE, 8)
          .attrU16(IFLA_MACVLAN_FLAGS, 1)
          .attrU32(IFLA_MACVLAN_BC_QUEUE_LEN, 100)
          .attrU32(IFLA_MACVLAN_BC_QUEUE_LEN_USED, 1000),
      ),
    );
    assert.equal(l.kind, 'macvlan');
    assert.equal(l.index, 7);
    assert.equal(l.linkIndex, 3);
    assert.deepEqual(l.macvlan, { mode: 'passthru', flags: 1, bcQueueLen: 100, bcQueueLenUsed: 1000 });
    assert.equal(l.ipvlan, undefined);
    const odd = decodeLinkDetails(reply('macvlan', (b) => b.attrU32(IFLA_MACVLAN_MODE, 32)));
    assert.equal(odd.macvlan?.mode, 'mode-32');
    assert.equal(odd.macvlan?.bcQueueLen, undefined);
  });
  test('ipvlan: mode and flag', () => {
    const l = decodeLinkDetails(
      reply('ipvlan', (b) => b.attrU16(IFLA_IPVLAN_MODE, 2).attrU16(IFLA_IPVLAN_FLAGS, 2)),
    );
    assert.deepEqual(l.ipvlan, { mode: 'l3s', flag: 'vepa' });
    assert.deepEqual(decodeLinkDetails(reply('ipvlan', (b) => b.attrU16(IFLA_IPVLAN_MODE, 0))).ipvlan, {
      mode: 'l2',
      flag: 'bridge',
    });
  });
  test('vlan: id and protocol (network byte order)', () => {
    const l = decodeLinkDetails(
      reply('vlan', (b) =>
        b.attrU16(IFLA_VLAN_ID, 4094).attr(IFLA_VLAN_PROTOCOL, Buffer.from('8100', 'hex')),
      ),
    );
    assert.deepEqual(l.vlan, { id: 4094, protocol: '802.1Q' });
    const ad = decodeLinkDetails(
      reply('vlan', (b) => b.attrU16(IFLA_VLAN_ID, 1).attr(IFLA_VLAN_PROTOCOL, Buffer.from('88a8', 'hex'))),
    );
    assert.deepEqual(ad.vlan, { id: 1, protocol: '802.1ad' });
    const other = decodeLinkDetails(
      reply('vlan', (b) => b.attrU16(IFLA_VLAN_ID, 1).attr(IFLA_VLAN_PROTOCOL, Buffer.from('9100', 'hex'))),
    );
    assert.equal(other.vlan?.protocol, '0x9100');
  });
  test('other kinds carry none of the three', () => {
    const l = decodeLinkDetails(reply('veth', () => {}));
    assert.equal(l.macvlan ?? l.ipvlan ?? l.vlan, undefined);
  });
});
