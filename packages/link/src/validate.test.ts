// pkg/ip ValidateExpectedInterfaceIPs / ValidateExpectedRoute over a fake view: messages are the reference's.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type ExpectedStateView,
  findSandboxInterface,
  type RouteView,
  routeText,
  validateContainerInterface,
  validateExpectedInterfaceIPs,
  validateExpectedRoutes,
} from './validate.ts';

function view(addrs: string[], routes: RouteView[], links = ['eth0']): ExpectedStateView {
  return {
    link: (n) => (links.includes(n) ? { name: n } : undefined),
    addrs: () => addrs.map((cidr) => ({ cidr })),
    routes: (f) => routes.filter((r) => r.family === f),
  };
}
const routes: RouteView[] = [
  { family: 4, dst: '10.1.2.0/24', table: 254 },
  { family: 4, dst: '0.0.0.0/0', gw: '10.1.2.1', table: 254 },
  { family: 4, dst: '192.168.0.0/16', gw: '10.1.2.1', table: 254 },
  { family: 4, dst: '172.16.0.0/12', gw: '10.1.2.1', table: 100 },
  { family: 6, dst: 'fd00::/64', table: 254 },
];
const ok = view(['10.1.2.2/24', 'fd00::5/64'], routes);
const msg = (m: string) => (e: unknown) => {
  assert.ok(e instanceof Error);
  assert.equal(e.message, m);
  return true;
};

describe('validateExpectedInterfaceIPs', () => {
  test('passes when address and subnet route are present (v4 and v6)', () => {
    validateExpectedInterfaceIPs(
      'eth0',
      [{ address: '10.1.2.2/24', gateway: '10.1.2.1' }, { address: 'fd00::5/64' }],
      ok,
    );
    validateExpectedInterfaceIPs('eth0', [], view([], [], []));
  });
  test('errors', () => {
    assert.throws(
      () => validateExpectedInterfaceIPs('eth0', [{ address: 'bogus' }], ok),
      msg('Failed to match addr bogus on interface eth0'),
    );
    assert.throws(
      () => validateExpectedInterfaceIPs('eth1', [{ address: '10.1.2.2/24' }], ok),
      msg('Cannot find container link eth1'),
    );
    assert.throws(
      () => validateExpectedInterfaceIPs('eth0', [{ address: '10.1.2.3/24' }], ok),
      msg('Failed to match addr 10.1.2.3/24 on interface eth0'),
    );
    const noSubnet = view(['10.1.2.2/24'], routes.slice(1));
    assert.throws(
      () => validateExpectedInterfaceIPs('eth0', [{ address: '10.1.2.2/24', gateway: '10.1.2.1' }], noSubnet),
      msg('Failed to find Gateway 10.1.2.1 for interface eth0'),
    );
    assert.throws(
      () => validateExpectedInterfaceIPs('eth0', [{ address: '10.1.2.2/24' }], noSubnet),
      msg('Failed to find Gateway <nil> for interface eth0'),
    );
  });
});

describe('validateExpectedRoutes', () => {
  test('dst + gw match in the main table; default routes by dst only; gw optional', () => {
    validateExpectedRoutes(
      [
        { dst: '192.168.0.0/16', gw: '10.1.2.1' },
        { dst: '192.168.0.0/16' },
        { dst: '0.0.0.0/0', gw: '10.9.9.9' },
      ],
      ok,
    );
  });
  test('errors', () => {
    assert.throws(
      () => validateExpectedRoutes([{ dst: '192.168.0.0/16', gw: '10.1.2.9' }], ok),
      msg('Expected Route {Dst:{IP:192.168.0.0 Mask:ffff0000} GW:10.1.2.9} not found in routing table'),
    );
    assert.throws(
      () => validateExpectedRoutes([{ dst: '172.16.0.0/12' }], ok),
      msg('Expected Route {Dst:{IP:172.16.0.0 Mask:fff00000} GW:<nil>} not found in routing table'),
    );
    assert.throws(
      () => validateExpectedRoutes([{ dst: 'nonsense' }], ok),
      msg('Invalid static route found {Dst:nonsense GW:<nil>}'),
    );
  });
  test('routeText prints like Go %v of types.Route', () => {
    assert.equal(
      routeText({ dst: '10.0.0.0/8', gw: '10.1.2.1' }),
      '{Dst:{IP:10.0.0.0 Mask:ff000000} GW:10.1.2.1}',
    );
    assert.equal(
      routeText({ dst: 'fd00::/64' }),
      '{Dst:{IP:fd00:: Mask:ffffffffffffffff0000000000000000} GW:<nil>}',
    );
  });
});

describe('findSandboxInterface', () => {
  const ifs = [
    { name: 'veth1', mac: 'aa' },
    { name: 'eth0', mac: 'bb', sandbox: '/run/netns/a' },
    { name: 'eth0', mac: 'cc', sandbox: '/run/netns/b' },
  ];
  test('picks the interface by name and sandbox', () => {
    assert.equal(findSandboxInterface(ifs, 'eth0', '/run/netns/b').mac, 'cc');
  });
  test('no match: the reference message with an empty sandbox', () => {
    assert.throws(
      () => findSandboxInterface(ifs, 'eth1', '/run/netns/a'),
      msg("Sandbox in prevResult  doesn't match configured netns: /run/netns/a"),
    );
    assert.throws(
      () => findSandboxInterface(undefined, 'eth0', '/x'),
      msg("Sandbox in prevResult  doesn't match configured netns: /x"),
    );
  });
});

describe('validateContainerInterface', () => {
  const links: Record<string, { kind: string | undefined; mac: string; up: boolean }> = {
    eth0: { kind: 'veth', mac: '0a:00:00:00:00:01', up: true },
    d0: { kind: 'dummy', mac: '0a:00:00:00:00:02', up: false },
  };
  const look = (n: string) => links[n];
  const intf = { name: 'eth0', mac: '0a:00:00:00:00:01', sandbox: '/run/netns/a' };
  test('a matching link passes (kind, MAC, up)', () => {
    validateContainerInterface(intf, { kind: { kind: 'veth', label: 'veth/p2p' }, requireUp: true }, look);
    validateContainerInterface({ ...intf, mac: undefined }, {}, look);
  });
  test('every failure with the reference wording and prefix', () => {
    const p = { prefix: 'ptp: ' };
    assert.throws(
      () => validateContainerInterface({ ...intf, name: '' }, p, look),
      msg('Container interface name missing in prevResult: '),
    );
    assert.throws(
      () => validateContainerInterface({ ...intf, name: 'eth9' }, p, look),
      msg('ptp: Container Interface name in prevResult: eth9 not found'),
    );
    assert.throws(
      () => validateContainerInterface({ ...intf, sandbox: '' }, p, look),
      msg('ptp: Error: Container interface eth0 should not be in host namespace'),
    );
    assert.throws(
      () => validateContainerInterface(intf, { ...p, kind: { kind: 'dummy', label: 'dummy' } }, look),
      msg('Error: Container interface eth0 not of type dummy'),
    );
    assert.throws(
      () => validateContainerInterface({ ...intf, mac: '0a:00:00:00:00:09' }, p, look),
      msg("ptp: Interface eth0 Mac 0a:00:00:00:00:09 doesn't match container Mac: 0a:00:00:00:00:01"),
    );
    assert.throws(
      () => validateContainerInterface({ ...intf, name: 'd0', mac: undefined }, { requireUp: true }, look),
      msg('Interface d0 is down'),
    );
    assert.throws(
      () => validateContainerInterface({ ...intf, mac: '0a:00:00:00:00:09' }, {}, look),
      msg("Interface eth0 Mac 0a:00:00:00:00:09 doesn't match container Mac: 0a:00:00:00:00:01"),
    );
  });
});
