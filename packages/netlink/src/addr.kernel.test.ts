// Addresses and DAD against the real kernel, verified with `ip -json addr`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addAddr, delAddr, listAddrs, waitDadSettled } from './addr.ts';
import { createVethPair, getLinkOrThrow } from './link.ts';
import { type Sync, withNetns } from './netns.ts';
import type { NetlinkError } from './rtnl.ts';
import { sysctlSet } from './sysctl.ts';
import { ip, ipJson, type TestNs, withTestNs } from './testns.ts';

function inNs<T>(ns: TestNs, fn: () => Sync<T>): T {
  return withNetns(ns.path, fn);
}

// biome-ignore lint/suspicious/noExplicitAny: iproute2 JSON
function addrInfo(ns: TestNs, dev: string): any[] {
  return ipJson(ns, 'addr', 'show', 'dev', dev)[0]?.addr_info ?? [];
}

describe('addresses (kernel)', () => {
  test('IPv4: add (broadcast computed), list, EEXIST, delete, delete missing', () =>
    withTestNs(1, (ns) => {
      inNs(ns, () => {
        createVethPair({ name: 'eth0', peerName: 'peer0' });
        addAddr('eth0', '10.1.2.3/24');
        addAddr('eth0', '10.9.9.9/31');
      });
      const info = addrInfo(ns, 'eth0').filter((a) => a.family === 'inet');
      assert.deepEqual(
        info.map((a) => [a.local, a.prefixlen, a.broadcast]),
        [
          ['10.1.2.3', 24, '10.1.2.255'],
          ['10.9.9.9', 31, undefined],
        ],
      );
      const mine = inNs(ns, () => listAddrs({ link: 'eth0', family: 4 }));
      assert.deepEqual(
        mine.map((a) => [a.cidr, a.broadcast, a.family]),
        [
          ['10.1.2.3/24', '10.1.2.255', 4],
          ['10.9.9.9/31', undefined, 4],
        ],
      );
      assert.equal(mine[0]!.linkIndex, inNs(ns, () => getLinkOrThrow('eth0')).index);
      assert.throws(
        () => inNs(ns, () => addAddr('eth0', '10.1.2.3/24')),
        (e: NetlinkError) =>
          e.code === 'EEXIST' && e.message === 'failed to add address 10.1.2.3/24 to eth0: file exists',
      );
      assert.throws(() => inNs(ns, () => addAddr('nope0', '10.1.2.3/24')), { code: 'ENODEV' });
      assert.throws(() => inNs(ns, () => addAddr('eth0', '10.1.2.3')), { code: 'EINVAL' });
      inNs(ns, () => delAddr('eth0', '10.1.2.3/24'));
      assert.deepEqual(
        addrInfo(ns, 'eth0')
          .filter((a) => a.family === 'inet')
          .map((a) => a.local),
        ['10.9.9.9'],
      );
      assert.throws(() => inNs(ns, () => delAddr('eth0', '10.1.2.3/24')), {
        code: 'EADDRNOTAVAIL',
        message: /failed to delete address 10.1.2.3\/24 from eth0/,
      });
      // whole-namespace listing and family filters
      const all = inNs(ns, () => listAddrs());
      assert.ok(all.some((a) => a.cidr === '127.0.0.1/8'));
      assert.ok(inNs(ns, () => listAddrs({ family: 6 })).every((a) => a.family === 6));
    }));

  test('IPv6 with nodad is never tentative; without it, DAD runs and waitDadSettled waits it out', () =>
    withTestNs(1, (ns) => {
      ip(ns, 'link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'd1');
      // short DAD so the test is quick
      for (const dev of ['d0', 'd1']) ip(ns, 'link', 'set', dev, 'up');
      inNs(ns, () => {
        addAddr('d0', '2001:db8::10/64', { noDad: true });
        addAddr('d0', '2001:db8::11/64');
      });
      const info = addrInfo(ns, 'd0').filter((a) => a.family === 'inet6' && a.scope === 'global');
      const nodad = info.find((a) => a.local === '2001:db8::10');
      assert.ok(nodad);
      assert.ok(!nodad.tentative, 'nodad address is not tentative');
      const mine = inNs(ns, () => listAddrs({ link: 'd0', family: 6 }));
      assert.equal(mine.find((a) => a.ip === '2001:db8::10')?.tentative, false);
      assert.equal(
        mine.find((a) => a.ip === '2001:db8::11')?.tentative,
        true,
        'DAD (1 s by default) still running',
      );
      const started = Date.now();
      inNs(ns, () => waitDadSettled('d0', 5000));
      const after = inNs(ns, () => listAddrs({ link: 'd0', family: 6 }));
      assert.ok(after.every((a) => !a.tentative));
      assert.ok(
        addrInfo(ns, 'd0').every((a) => !a.tentative),
        'ip agrees no address is tentative',
      );
      assert.ok(Date.now() - started < 5000);
    }));

  test('waitDadSettled: DADFAILED is an error', () =>
    withTestNs(2, (a, b) => {
      inNs(a, () => createVethPair({ name: 'e0', peerName: 'e1', peerNetnsPath: b.path }));
      for (const [ns, dev] of [
        [a, 'e0'],
        [b, 'e1'],
      ] as const) {
        ip(ns, 'link', 'set', dev, 'up');
      }
      // the same address on both ends: the second DAD detects the first
      ip(b, 'addr', 'add', '2001:db8::77/64', 'dev', 'e1', 'nodad');
      // wait for carrier so DAD probes flow
      inNs(a, () => {
        const until = Date.now() + 3000;
        while (getLinkOrThrow('e0').operstate !== 'up' && Date.now() < until);
        addAddr('e0', '2001:db8::77/64');
      });
      assert.throws(
        () => inNs(a, () => waitDadSettled('e0', 5000)),
        (e: Error) => e.message === 'link e0 has address 2001:db8::77/64 in DADFAILED state',
      );
      assert.ok(addrInfo(a, 'e0').some((x) => x.local === '2001:db8::77' && x.dadfailed));
    }));

  test('waitDadSettled: timeout is an error only when the link is oper-up', () =>
    withTestNs(1, (ns) => {
      ip(ns, 'link', 'add', 't0', 'type', 'veth', 'peer', 'name', 't1');
      // very slow DAD: many probes, 10 s apart
      for (const dev of ['t0', 't1']) {
        ip(ns, 'link', 'set', dev, 'up');
      }
      inNs(ns, () => {
        sysctlSet('net.ipv6.conf.t0.dad_transmits', 50);
        sysctlSet('net.ipv6.neigh.t0.retrans_time_ms', 10000);
      });
      inNs(ns, () => {
        const until = Date.now() + 3000;
        while (getLinkOrThrow('t0').operstate !== 'up' && Date.now() < until);
        addAddr('t0', '2001:db8::99/64');
      });
      assert.ok(inNs(ns, () => listAddrs({ link: 't0', family: 6 })).some((x) => x.tentative));
      const t0 = Date.now();
      assert.throws(
        () => inNs(ns, () => waitDadSettled('t0', 300)),
        (e: Error) => e.message === 'link t0 still has tentative addresses after 0 seconds',
      );
      assert.ok(Date.now() - t0 >= 290);
      // same situation with the link down (no carrier): not an error
      ip(ns, 'link', 'set', 't1', 'down');
      ip(ns, 'link', 'add', 'u0', 'type', 'veth', 'peer', 'name', 'u1');
      ip(ns, 'link', 'set', 'u0', 'up'); // u1 stays down: u0 has no carrier
      inNs(ns, () => sysctlSet('net.ipv6.conf.u0.dad_transmits', 50));
      inNs(ns, () => addAddr('u0', '2001:db8::98/64'));
      assert.ok(inNs(ns, () => listAddrs({ link: 'u0', family: 6 })).some((x) => x.tentative));
      inNs(ns, () => waitDadSettled('u0', 200));
      assert.throws(() => inNs(ns, () => waitDadSettled('gone0', 200)), { code: 'ENODEV' });
    }));
});
