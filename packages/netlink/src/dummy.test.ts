// buildDummy: the RTM_NEWLINK for a dummy link (the kernel side runs in the kernel lab: plugins/dummy).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildDummy } from './link.ts';
import {
  attrNested,
  attrStr,
  attrU32,
  IFLA_ADDRESS,
  IFLA_IFNAME,
  IFLA_INFO_KIND,
  IFLA_LINKINFO,
  IFLA_MTU,
  NLM_F_CREATE,
  NLM_F_EXCL,
  parseAttrs,
  RTM_NEWLINK,
} from './nl.ts';

test('buildDummy: name, kind dummy, optional MTU and MAC, exclusive create', () => {
  const m = buildDummy('dm0', { mtu: 1400, mac: '0a:00:00:00:00:01' }).finish(1);
  assert.equal(m.readUInt16LE(4), RTM_NEWLINK);
  const flags = m.readUInt16LE(6);
  assert.equal(flags & (NLM_F_CREATE | NLM_F_EXCL), NLM_F_CREATE | NLM_F_EXCL);
  const attrs = parseAttrs(m, 16 + 16);
  assert.equal(attrStr(attrs, IFLA_IFNAME), 'dm0');
  assert.equal(attrU32(attrs, IFLA_MTU), 1400);
  assert.equal(attrs.get(IFLA_ADDRESS)?.toString('hex'), '0a0000000001');
  assert.equal(attrStr(attrNested(attrs, IFLA_LINKINFO)!, IFLA_INFO_KIND), 'dummy');
  const plain = parseAttrs(buildDummy('dm1').finish(2), 32);
  assert.equal(plain.has(IFLA_MTU), false);
  assert.equal(plain.has(IFLA_ADDRESS), false);
  assert.throws(() => buildDummy('x'.repeat(16)), /longer than 15 bytes/);
});
