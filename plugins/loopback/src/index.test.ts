import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { isLoopbackIp, loopbackResult, pickAddresses, plugin } from './index.ts';

describe('loopback (pure)', () => {
  test('plugin shape', () => {
    assert.equal(plugin.name, 'loopback');
    assert.equal(typeof plugin.add, 'function');
    assert.equal(typeof plugin.del, 'function');
    assert.equal(typeof plugin.check, 'function');
    assert.equal(plugin.gc, undefined);
    assert.equal(plugin.status, undefined);
  });

  test('isLoopbackIp: text through @cnikit/ip isLoopback (cases tested there)', () => {
    for (const ip of ['127.0.0.1', '::1', '::FFFF:127.0.0.2']) assert.equal(isLoopbackIp(ip), true, ip);
    for (const ip of ['10.0.0.1', '::2', 'not-an-ip', '']) assert.equal(isLoopbackIp(ip), false, ip);
  });

  test('pickAddresses takes the first address of each family', () => {
    const got = pickAddresses([
      { family: 6, ip: '::1', prefixLen: 128 },
      { family: 4, ip: '127.0.0.1', prefixLen: 8 },
      { family: 4, ip: '127.0.0.2', prefixLen: 32 },
    ]);
    assert.deepEqual(got, { v4: '127.0.0.1/8', v6: '::1/128' });
    assert.deepEqual(pickAddresses([]), { v4: undefined, v6: undefined });
  });

  test('a non-loopback address is an error naming it', () => {
    assert.throws(
      () =>
        pickAddresses([
          { family: 4, ip: '127.0.0.1', prefixLen: 8 },
          { family: 4, ip: '10.1.2.3', prefixLen: 8 },
        ]),
      (err: unknown) =>
        err instanceof CniError &&
        err.code === 999 &&
        err.msg === 'loopback interface found with non-loopback address "10.1.2.3"',
    );
    assert.throws(
      () => pickAddresses([{ family: 6, ip: 'fd00::1', prefixLen: 64 }]),
      /non-loopback address "fd00::1"/,
    );
  });

  test('result shape matches the reference', () => {
    assert.deepEqual(loopbackResult('1.0.0', '/run/netns/x', { v4: '127.0.0.1/8', v6: '::1/128' }), {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: '/run/netns/x' }],
      ips: [
        { interface: 0, address: '127.0.0.1/8' },
        { interface: 0, address: '::1/128' },
      ],
    });
    assert.deepEqual(loopbackResult('0.4.0', '/n', {}), {
      cniVersion: '0.4.0',
      interfaces: [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: '/n' }],
    });
  });
});
