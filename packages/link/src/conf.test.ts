import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeNetconf, s } from '@cnikit/skel';
import { checkMtu, IPAM_KEYS, linkConfBase, NETCONF_KEYS, stackedLinkConf } from './conf.ts';

describe('the shared configuration keys', () => {
  const schema = s.object({
    ...NETCONF_KEYS,
    master: s.string().default(''),
    mtu: s.int().default(0),
    linkInContainer: s.bool().default(false),
    ...IPAM_KEYS,
  });
  test('defaults, and the decoded base of a stacked link', () => {
    const c = decodeNetconf(schema, { name: 'n', ipam: { type: 'host-local', subnet: 'x' } });
    assert.deepEqual(linkConfBase(c), { cniVersion: '', name: 'n', ipamType: 'host-local', dns: undefined });
    assert.deepEqual(stackedLinkConf({ ...c, master: 'm0', mtu: 1400 }), {
      cniVersion: '',
      name: 'n',
      ipamType: 'host-local',
      dns: undefined,
      master: 'm0',
      mtu: 1400,
      linkInContainer: false,
    });
    assert.equal(linkConfBase(decodeNetconf(schema, {})).ipamType, '');
  });
  test('a bad key reads "failed to load netconf: …", in the schema order', () => {
    assert.throws(() => decodeNetconf(schema, { name: 1, mtu: 'x' }), {
      msg: 'failed to load netconf: config.name: expected string, got number 1',
    });
    assert.throws(() => decodeNetconf(schema, { dns: 1 }), {
      msg: /^failed to load netconf: config.dns: expected object/,
    });
  });
  test('checkMtu: [0, master MTU]', () => {
    checkMtu(0, 1500);
    checkMtu(1500, 1500);
    assert.throws(() => checkMtu(1501, 1500), { message: 'invalid MTU 1501, must be [0, master MTU(1500)]' });
    assert.throws(() => checkMtu(-1, 1500), { message: 'invalid MTU -1, must be [0, master MTU(1500)]' });
  });
});
