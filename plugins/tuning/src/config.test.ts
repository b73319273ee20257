import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CniError } from '@cnikit/skel';
import { formatBackup, parseBackup } from './backup.ts';
import { checkDuplicateSysctlKeys, decodeConf, sysctlFileName, validateSysctls } from './config.ts';

describe('tuning config', () => {
  test('MAC precedence: args.cni > runtimeConfig > CNI_ARGS > mac', () => {
    const base = { name: 'n', mac: 'c2:00:00:00:00:01' };
    assert.equal(decodeConf(base, '').mac, 'c2:00:00:00:00:01');
    assert.equal(decodeConf(base, 'MAC=c2:00:00:00:00:02').mac, 'c2:00:00:00:00:02');
    const rc = { ...base, runtimeConfig: { mac: 'c2:00:00:00:00:03' } };
    assert.equal(decodeConf(rc, 'MAC=c2:00:00:00:00:02').mac, 'c2:00:00:00:00:03');
    assert.equal(
      decodeConf({ ...rc, args: { cni: { mac: 'c2:00:00:00:00:04' } } }, 'MAC=x').mac,
      'c2:00:00:00:00:04',
    );
    assert.throws(() => decodeConf(base, 'FOO=1'), /ARGS: unknown args/);
    assert.equal(decodeConf(base, 'IgnoreUnknown=1;FOO=1').mac, 'c2:00:00:00:00:01');
  });

  test('args.cni overrides every attribute and merges sysctls, also without a top-level sysctl', () => {
    const c = decodeConf(
      {
        name: 'n',
        sysctl: { 'net.a': '1', 'net.b': '2' },
        mtu: 1400,
        args: {
          cni: {
            sysctl: { 'net.b': '3', 'net.c': '4' },
            promisc: true,
            mtu: 1300,
            allmulti: false,
            txQLen: 7,
          },
        },
      },
      '',
    );
    assert.deepEqual(c.sysctl, [
      ['net.a', '1'],
      ['net.b', '3'],
      ['net.c', '4'],
    ]);
    assert.deepEqual(
      [c.promisc, c.mtu, c.allmulti, c.txQLen, c.dataDir],
      [true, 1300, false, 7, '/run/cni/tuning'],
    );
    assert.deepEqual(decodeConf({ name: 'n', args: { cni: { sysctl: { 'net.x': '1' } } } }, '').sysctl, [
      ['net.x', '1'],
    ]);
  });

  test('a value of the wrong type is error 7 naming the key', () => {
    assert.throws(
      () => decodeConf({ name: 'n', sysctl: { 'net.a': 1 } }, ''),
      (e: CniError) => e.code === 7 && /sysctl/.test(e.msg),
    );
  });

  test('duplicated sysctl keys are rejected from the raw text (any key case of "sysctl"), others are not', () => {
    const dup = '{"name":"n","Sysctl":{"net.a":"1", "net.a" : "2"}}';
    assert.throws(() => checkDuplicateSysctlKeys(dup), /duplicated sysctl keys are not allowed/);
    assert.throws(() => checkDuplicateSysctlKeys('{"sysctl":{"net\\u002ea":"1","net.a":"2"}}'), /duplicated/);
    checkDuplicateSysctlKeys(
      '{"name":"n","sysctl":{"net.a":"1","net.b":"2"},"x":{"k":1,"k":2},"y":[1,{"a":"}"}]}',
    );
    checkDuplicateSysctlKeys('not json');
  });

  test('sysctl file names: dots → slashes, then the first IFNAME, cleaned, must stay under /proc/sys/net/', () => {
    assert.equal(
      sysctlFileName('net.ipv4.conf.IFNAME.arp_filter', 'eth0.100'),
      '/proc/sys/net/ipv4/conf/eth0.100/arp_filter',
    );
    assert.equal(sysctlFileName('net/core/somaxconn', 'eth0'), '/proc/sys/net/core/somaxconn');
    assert.throws(
      () => sysctlFileName('kernel.hostname', 'eth0'),
      /invalid net sysctl key: "kernel\/hostname"/,
    );
    // '..' cannot escape: its dots are turned into slashes first
    assert.equal(sysctlFileName('net/../kernel/x', 'eth0'), '/proc/sys/net/kernel/x');
    assert.throws(() => sysctlFileName('IFNAME/kernel/x', '..'), /invalid net sysctl key: "\.\.\/kernel\/x"/);
  });

  test('allow-list: unanchored match of the key as written; message lists the expressions', () => {
    validateSysctls(['net.ipv4.conf.IFNAME.arp_filter'], undefined);
    validateSysctls(['net.ipv4.conf.IFNAME.arp_filter'], ['^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$']);
    assert.throws(
      () => validateSysctls(['net.core.somaxconn'], ['^net\\.ipv4\\.', 'ipv6']),
      /^Error: Sysctl net.core.somaxconn is not allowed. Only the following sysctls are allowed: \[\^net\\.ipv4\\. ipv6\]$|Sysctl net.core.somaxconn is not allowed. Only the following sysctls are allowed: \[\^net\\.ipv4\\. ipv6\]/,
    );
    // compiled lazily like Go: an invalid expression after the first match is never parsed
    validateSysctls(['net.a'], ['net', '(']);
    assert.throws(() => validateSysctls(['x.a'], ['net', '(']), /error parsing regexp: missing closing \)/);
  });

  test('backup file: Go MarshalIndent with one space, reference key order, only the changed attributes', () => {
    assert.equal(
      formatBackup({ txQLen: 1000, allmulti: false, mtu: 1500, promisc: false, mac: '5e:07:b9:a0:c6:e1' }),
      '{\n "mac": "5e:07:b9:a0:c6:e1",\n "promisc": false,\n "mtu": 1500,\n "allmulti": false,\n "txQLen": 1000\n}',
    );
    assert.equal(formatBackup({ mtu: 9000 }), '{\n "mtu": 9000\n}');
    assert.deepEqual(parseBackup('{"MTU":1500,"Promisc":true,"other":1}'), { mtu: 1500, promisc: true });
    assert.equal(parseBackup('{"mtu":"x"}'), undefined);
    assert.equal(parseBackup('{'), undefined);
  });
});
