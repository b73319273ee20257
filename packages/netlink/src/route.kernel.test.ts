// Routes against the real kernel, verified with `ip -json route`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addAddr } from './addr.ts';
import { createVethPair, getLinkOrThrow, setLinkUp } from './link.ts';
import { type Sync, withNetns } from './netns.ts';
import { addRoute, delRoute, listRoutes, replaceRoute } from './route.ts';
import type { NetlinkError } from './rtnl.ts';
import { ipJson, type TestNs, withTestNs } from './testns.ts';

function inNs<T>(ns: TestNs, fn: () => Sync<T>): T {
  return withNetns(ns.path, fn);
}

/** eth0 (up, carrier) with 10.1.2.3/24 and 2001:db8::3/64 (nodad). */
function setup(ns: TestNs): number {
  return inNs(ns, () => {
    createVethPair({ name: 'eth0', peerName: 'peer0' });
    setLinkUp('peer0');
    setLinkUp('eth0');
    addAddr('eth0', '10.1.2.3/24');
    addAddr('eth0', '2001:db8::3/64', { noDad: true });
    return getLinkOrThrow('eth0').index;
  });
}

describe('routes (kernel)', () => {
  test('IPv4 route with table, metric, src, mtu, advmss; list; EEXIST; replace; delete', () =>
    withTestNs(1, (ns) => {
      const idx = setup(ns);
      const spec = {
        dst: '10.9.0.0/16',
        gw: '10.1.2.1',
        dev: 'eth0',
        table: 100,
        priority: 50,
        src: '10.1.2.3',
        mtu: 1400,
        advmss: 1360,
      };
      inNs(ns, () => addRoute(spec));
      const j = ipJson(ns, 'route', 'show', 'table', '100');
      assert.equal(j.length, 1);
      assert.equal(j[0].dst, '10.9.0.0/16');
      assert.equal(j[0].gateway, '10.1.2.1');
      assert.equal(j[0].dev, 'eth0');
      assert.equal(j[0].metric, 50);
      assert.equal(j[0].prefsrc, '10.1.2.3');
      assert.deepEqual(j[0].metrics, [{ mtu: 1400, advmss: 1360 }]);
      const mine = inNs(ns, () => listRoutes({ table: 100 }));
      assert.deepEqual(
        mine.map((r) => ({ ...r })),
        [
          {
            family: 4,
            dst: '10.9.0.0/16',
            gw: '10.1.2.1',
            linkIndex: idx,
            scope: 0,
            table: 100,
            priority: 50,
            src: '10.1.2.3',
            protocol: 3,
            type: 1,
            flags: 0,
            mtu: 1400,
            advmss: 1360,
            multipath: undefined,
          },
        ],
      );
      assert.equal(
        inNs(ns, () => listRoutes()).some((r) => r.table === 100),
        false,
        'default listing is the main table only',
      );
      assert.ok(
        inNs(ns, () => listRoutes({ table: 0 })).some((r) => r.table === 100 && r.dst === '10.9.0.0/16'),
      );
      assert.throws(
        () => inNs(ns, () => addRoute(spec)),
        (e: NetlinkError) =>
          e.code === 'EEXIST' &&
          e.message ===
            'failed to add route 10.9.0.0/16 via 10.1.2.1 dev eth0 table 100 metric 50: file exists',
      );
      inNs(ns, () =>
        replaceRoute({ dst: '10.9.0.0/16', gw: '10.1.2.254', dev: 'eth0', table: 100, priority: 50 }),
      );
      const r2 = ipJson(ns, 'route', 'show', 'table', '100');
      assert.equal(r2.length, 1, 'replaced, not added');
      assert.equal(r2[0].gateway, '10.1.2.254');
      assert.equal(r2[0].metrics, undefined);
      inNs(ns, () => delRoute({ dst: '10.9.0.0/16', table: 100 }));
      assert.deepEqual(ipJson(ns, 'route', 'show', 'table', '100'), []);
      assert.throws(() => inNs(ns, () => delRoute({ dst: '10.9.0.0/16', table: 100 })), {
        code: 'ESRCH',
        message: /failed to delete route 10.9.0.0\/16 table 100: no such process/,
      });
    }));

  test('default route, scope link and host routes, table >= 256, gateway unreachable', () =>
    withTestNs(1, (ns) => {
      setup(ns);
      inNs(ns, () => {
        addRoute({ dst: '0.0.0.0/0', gw: '10.1.2.1', dev: 'eth0' });
        addRoute({ dst: '192.168.7.0/24', dev: 'eth0', scope: 'link' });
        addRoute({ dst: '192.168.8.8/32', dev: 'eth0', scope: 'host', table: 1000 });
      });
      const main = ipJson(ns, 'route', 'show');
      assert.ok(
        main.some((r: { dst: string; gateway: string }) => r.dst === 'default' && r.gateway === '10.1.2.1'),
      );
      assert.ok(
        main.some((r: { dst: string; scope: string }) => r.dst === '192.168.7.0/24' && r.scope === 'link'),
      );
      const t1000 = ipJson(ns, 'route', 'show', 'table', '1000');
      assert.equal(t1000[0].dst, '192.168.8.8');
      assert.equal(t1000[0].scope, 'host');
      const mine = inNs(ns, () => listRoutes({ family: 4 }));
      assert.equal(mine.find((r) => r.dst === '0.0.0.0/0')?.gw, '10.1.2.1');
      assert.equal(mine.find((r) => r.dst === '192.168.7.0/24')?.scope, 253);
      assert.equal(inNs(ns, () => listRoutes({ table: 1000 }))[0]?.table, 1000);
      // Go's RouteAddEcmp (create without exclusivity): a second gateway for the same IPv4 destination
      inNs(ns, () => {
        addRoute({ dst: '10.60.0.0/16', gw: '10.1.2.1', dev: 'eth0' }, { exclusive: false });
        addRoute({ dst: '10.60.0.0/16', gw: '10.1.2.2', dev: 'eth0' }, { exclusive: false });
      });
      const gws = ipJson(ns, 'route', 'show', '10.60.0.0/16')
        .map((r: { gateway: string }) => r.gateway)
        .sort();
      assert.deepEqual(gws, ['10.1.2.1', '10.1.2.2']);
      assert.deepEqual(
        inNs(ns, () => listRoutes({ family: 4 }))
          .filter((r) => r.dst === '10.60.0.0/16')
          .map((r) => r.gw)
          .sort(),
        ['10.1.2.1', '10.1.2.2'],
      );
      assert.throws(() => inNs(ns, () => addRoute({ dst: '10.60.0.0/16', gw: '10.1.2.2', dev: 'eth0' })), {
        code: 'EEXIST',
      });
      assert.throws(() => inNs(ns, () => addRoute({ dst: '10.50.0.0/16', gw: '172.16.0.1' })), {
        code: 'ENETUNREACH',
      });
      assert.throws(() => inNs(ns, () => addRoute({ dst: '10.50.0.0/16', dev: 'nope0' })), {
        code: 'ENODEV',
      });
    }));

  test('IPv6 routes: add, ECMP with exclusive:false, list by link, delete', () =>
    withTestNs(1, (ns) => {
      const idx = setup(ns);
      inNs(ns, () => {
        addRoute({ dst: '2001:db8:1::/48', gw: '2001:db8::1', dev: 'eth0', priority: 10 });
        addRoute({ dst: '::/0', gw: '2001:db8::1', dev: 'eth0' });
        addRoute({ dst: '2001:db8:2::/48', gw: '2001:db8::1', dev: 'eth0' }, { exclusive: false });
        addRoute({ dst: '2001:db8:2::/48', gw: '2001:db8::2', dev: 'eth0' }, { exclusive: false });
      });
      const j = ipJson(ns, '-6', 'route', 'show');
      const r1 = j.find((r: { dst: string }) => r.dst === '2001:db8:1::/48');
      assert.equal(r1.gateway, '2001:db8::1');
      assert.equal(r1.metric, 10);
      assert.ok(j.some((r: { dst: string }) => r.dst === 'default'));
      const ecmp = j.find((r: { dst: string }) => r.dst === '2001:db8:2::/48');
      assert.equal(ecmp.nexthops.length, 2);
      const mine = inNs(ns, () => listRoutes({ family: 6, link: 'eth0' }));
      assert.equal(mine.find((r) => r.dst === '2001:db8:1::/48')?.priority, 10);
      assert.equal(mine.find((r) => r.dst === '::/0')?.gw, '2001:db8::1');
      const m = mine.find((r) => r.dst === '2001:db8:2::/48');
      assert.deepEqual(m?.multipath?.map((h) => [h.gw, h.linkIndex]).sort(), [
        ['2001:db8::1', idx],
        ['2001:db8::2', idx],
      ]);
      assert.throws(
        () =>
          inNs(ns, () => addRoute({ dst: '2001:db8:1::/48', gw: '2001:db8::1', dev: 'eth0', priority: 10 })),
        { code: 'EEXIST' },
      );
      inNs(ns, () => delRoute({ dst: '2001:db8:1::/48', dev: 'eth0', priority: 10 }));
      assert.equal(
        ipJson(ns, '-6', 'route', 'show').some((r: { dst: string }) => r.dst === '2001:db8:1::/48'),
        false,
      );
      assert.throws(() => inNs(ns, () => delRoute({ dst: '2001:db8:1::/48' })), { code: 'ESRCH' });
    }));
});
