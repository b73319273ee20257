import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isSysError } from '@cnikit/sys';
import { sysctlNormalName, sysctlPath } from './sysctl.ts';

describe('sysctl names (Go toNormalName)', () => {
  test('dotted names: dots and slashes swap', () => {
    assert.equal(sysctlNormalName('net.ipv4.ip_forward'), 'net/ipv4/ip_forward');
    assert.equal(sysctlNormalName('net.ipv4.conf.eth0/100.forwarding'), 'net/ipv4/conf/eth0.100/forwarding');
    assert.equal(sysctlNormalName('net.ipv6.conf.a/b/c.accept_ra'), 'net/ipv6/conf/a.b.c/accept_ra');
  });

  test('slashed names are used verbatim (dots kept)', () => {
    assert.equal(sysctlNormalName('net/ipv4/conf/eth0.100/forwarding'), 'net/ipv4/conf/eth0.100/forwarding');
    assert.equal(sysctlNormalName('net/ipv4/ip_forward'), 'net/ipv4/ip_forward');
  });

  test('the first separator decides', () => {
    assert.equal(sysctlNormalName('net/ipv4.x'), 'net/ipv4.x');
    assert.equal(sysctlNormalName('net.ipv4/x'), 'net/ipv4.x');
    assert.equal(sysctlNormalName('kernel'), 'kernel');
  });

  test('paths live under /proc/sys', () => {
    assert.equal(sysctlPath('net.ipv4.ip_forward'), '/proc/sys/net/ipv4/ip_forward');
    assert.equal(
      sysctlPath('net.ipv6.conf.eth0/10.disable_ipv6'),
      '/proc/sys/net/ipv6/conf/eth0.10/disable_ipv6',
    );
  });

  test('names that would leave /proc/sys or are empty are rejected with EINVAL', () => {
    for (const bad of [
      '',
      'net/../../etc/passwd',
      '../etc/shadow',
      'net//ipv4',
      'net/ipv4/',
      '/net/ipv4',
      'net..x',
    ]) {
      assert.throws(
        () => sysctlPath(bad),
        (e: unknown) => isSysError(e) && e.code === 'EINVAL' && /sysctl/.test(e.message),
        JSON.stringify(bad),
      );
    }
  });
});
