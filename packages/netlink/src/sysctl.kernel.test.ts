// sysctl inside namespaces this file creates (never the root namespace's values).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { isSysError } from '@cnikit/sys';
import { withNetns } from './netns.ts';
import { sysctlGet, sysctlSet } from './sysctl.ts';

function netnsAdd(): string {
  const name = `cnikit-sys-${process.pid}-sysctl-${Math.random().toString(36).slice(2, 8)}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return name;
}

/**
 * Guard for callbacks that write sysctls which also exist in the root namespace: throws unless the calling thread
 * really is in the namespace at `path`, so a broken withNetns can never change the machine's own values.
 */
function assertInNs(path: string): void {
  const here = statSync('/proc/thread-self/ns/net').ino;
  const want = statSync(path).ino;
  if (here !== want)
    throw new Error(`not inside ${path} (thread netns inode ${here}, want ${want}): refusing to write`);
}

describe('sysctl in a namespace', () => {
  let ns = '';
  let path = '';
  let rootForward = '';
  before(() => {
    ns = netnsAdd();
    path = `/run/netns/${ns}`;
    rootForward = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8');
    const r = spawnSync('ip', ['-n', ns, 'link', 'add', 'v0.100', 'type', 'veth', 'peer', 'name', 'v1'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
  });
  after(() => {
    spawnSync('ip', ['netns', 'del', ns]);
    assert.equal(
      readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8'),
      rootForward,
      'root namespace untouched',
    );
  });

  test('get strips the newline; set writes, reads back, and stays in the namespace', () => {
    const r = withNetns(path, () => {
      assertInNs(path);
      const before = sysctlGet('net.ipv4.ip_forward');
      const next = before === '1' ? '0' : '1';
      const set = sysctlSet('net.ipv4.ip_forward', next);
      return { before, next, set, after: sysctlGet('net/ipv4/ip_forward') };
    });
    assert.match(r.before, /^[01]$/);
    assert.equal(r.set, r.next);
    assert.equal(r.after, r.next);
    // the namespace's value really changed (read through a process in it), the root one did not
    const seen = spawnSync('ip', ['netns', 'exec', ns, 'cat', '/proc/sys/net/ipv4/ip_forward'], {
      encoding: 'utf8',
    });
    assert.equal(seen.stdout, `${r.next}\n`);
    assert.equal(readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8'), rootForward);
  });

  test('numbers are written as text; multi-field values come back as the kernel prints them', () => {
    const r = withNetns(path, () => {
      assertInNs(path);
      return {
        mtu: sysctlSet('net.ipv6.conf.lo.mtu', 1400),
        ports: sysctlSet('net.ipv4.ip_local_port_range', '20000 30000'),
      };
    });
    assert.equal(r.mtu, '1400');
    assert.equal(r.ports, '20000\t30000');
  });

  test('interface names containing dots: dotted form with slashes, or slashed form', () => {
    const r = withNetns(path, () => ({
      set: sysctlSet('net.ipv4.conf.v0/100.forwarding', '1'),
      dotted: sysctlGet('net.ipv4.conf.v0/100.forwarding'),
      slashed: sysctlGet('net/ipv4/conf/v0.100/forwarding'),
      other: sysctlGet('net.ipv4.conf.v1.forwarding'),
    }));
    assert.deepEqual(r, { set: '1', dotted: '1', slashed: '1', other: r.other });
    assert.match(r.other, /^[01]$/);
  });

  test('a missing key is ENOENT with the Go path-error text', () => {
    withNetns(path, () => {
      assert.throws(
        () => sysctlGet('net.ipv4.conf.nosuchif.forwarding'),
        (e: unknown) =>
          isSysError(e) &&
          e.code === 'ENOENT' &&
          e.message === 'open /proc/sys/net/ipv4/conf/nosuchif/forwarding: no such file or directory',
      );
      assert.throws(
        () => sysctlSet('net.ipv4.conf.nosuchif.forwarding', '1'),
        (e: unknown) => isSysError(e) && e.code === 'ENOENT',
      );
    });
  });

  test('an invalid value is EINVAL and leaves the value unchanged', () => {
    withNetns(path, () => {
      const before = sysctlGet('net.ipv4.conf.v1.rp_filter');
      assert.throws(
        () => sysctlSet('net.ipv4.conf.v1.rp_filter', 'not-a-number'),
        (e: unknown) =>
          isSysError(e) && e.code === 'EINVAL' && e.message.includes('/proc/sys/net/ipv4/conf/v1/rp_filter'),
      );
      assert.equal(sysctlGet('net.ipv4.conf.v1.rp_filter'), before);
    });
  });

  test('the interface sysctls are per namespace', () => {
    assert.throws(
      () => sysctlGet('net.ipv4.conf.v1.forwarding'),
      (e: unknown) => isSysError(e) && e.code === 'ENOENT',
    );
  });
});
