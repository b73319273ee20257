// The validators over the real kernel view (currentNetnsView) of a private namespace.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withNetns } from '@cnikit/netlink';
import { ipRun, withNamedNetns as withTestNs } from '@cnikit/testing';
import { addrViews, routeViews, validateExpectedInterfaceIPs, validateExpectedRoutes } from './validate.ts';

test('currentNetnsView: addresses, subnet routes, gateway routes and ECMP hops', () =>
  withTestNs(1, (ns) => {
    const ip = (...a: string[]) => ipRun(ns, ...a);
    ip('link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
    ip('link', 'set', 'eth0', 'up');
    ip('link', 'set', 'eth1', 'up');
    ip('addr', 'add', '10.50.0.2/24', 'dev', 'eth0');
    ip('addr', 'add', '10.60.0.2/24', 'dev', 'eth1');
    ip('route', 'add', '192.168.0.0/16', 'via', '10.50.0.1');
    ip('route', 'add', '172.16.0.0/12', 'nexthop', 'via', '10.50.0.1', 'nexthop', 'via', '10.60.0.1');
    withNetns(ns.path, () => {
      assert.ok(addrViews('eth0').some((a) => a.cidr === '10.50.0.2/24'));
      assert.ok(!addrViews('eth0').some((a) => a.cidr === '10.60.0.2/24'));
      const ecmp = routeViews(4).filter((r) => r.dst === '172.16.0.0/12');
      assert.deepEqual(ecmp.map((r) => r.gw).sort(), ['10.50.0.1', '10.60.0.1']);
      validateExpectedInterfaceIPs('eth0', [{ address: '10.50.0.2/24', gateway: '10.50.0.1' }]);
      validateExpectedRoutes([
        { dst: '192.168.0.0/16', gw: '10.50.0.1' },
        { dst: '172.16.0.0/12', gw: '10.60.0.1' },
      ]);
      assert.throws(
        () => validateExpectedInterfaceIPs('eth0', [{ address: '10.50.0.3/24' }]),
        /^Error: Failed to match addr 10\.50\.0\.3\/24 on interface eth0$/,
      );
      assert.throws(
        () => validateExpectedInterfaceIPs('eth9', [{ address: '10.50.0.2/24' }]),
        /Cannot find container link eth9/,
      );
      assert.throws(
        () => validateExpectedRoutes([{ dst: '192.168.0.0/16', gw: '10.50.0.9' }]),
        /Expected Route \{Dst:\{IP:192\.168\.0\.0 Mask:ffff0000\} GW:10\.50\.0\.9\} not found in routing table/,
      );
    });
  }));
