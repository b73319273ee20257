import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError, type Result } from '@cnikit/skel';
import { type CheckEnv, checkAttachment, type LinkView, type RouteView, routeText } from './check-logic.ts';

const NS = '/run/netns/c1';

function world(): {
  host: Map<string, LinkView>;
  cont: Map<string, LinkView>;
  addrs: string[];
  routes: RouteView[];
} {
  return {
    host: new Map<string, LinkView>([
      [
        'cni0',
        { name: 'cni0', index: 5, kind: 'bridge', mac: '0a:00:00:00:00:05', promisc: false, masterIndex: 0 },
      ],
      [
        'veth1234abcd',
        {
          name: 'veth1234abcd',
          index: 7,
          kind: 'veth',
          mac: '0a:00:00:00:00:07',
          promisc: false,
          masterIndex: 5,
          peerIndex: 2,
        },
      ],
      [
        'eth9',
        { name: 'eth9', index: 9, kind: 'dummy', mac: '0a:00:00:00:00:09', promisc: false, masterIndex: 0 },
      ],
    ]),
    cont: new Map<string, LinkView>([
      [
        'eth0',
        {
          name: 'eth0',
          index: 2,
          kind: 'veth',
          mac: '0a:00:00:00:00:02',
          promisc: false,
          masterIndex: 0,
          peerIndex: 7,
        },
      ],
    ]),
    addrs: ['10.1.2.2/24', 'fe80::1/64'],
    routes: [
      { family: 4, dst: '10.1.2.0/24', table: 254 },
      { family: 4, dst: '0.0.0.0/0', gw: '10.1.2.1', table: 254 },
      { family: 4, dst: '192.168.0.0/16', gw: '10.1.2.1', table: 254 },
    ],
  };
}

function envOf(w: ReturnType<typeof world>): CheckEnv {
  return {
    hostLink: (n) => w.host.get(n),
    containerLink: (n) => w.cont.get(n),
    containerAddrs: () => w.addrs.map((cidr) => ({ cidr })),
    containerRoutes: (f) => w.routes.filter((r) => r.family === f),
  };
}

function prev(): Result {
  return {
    cniVersion: '1.1.0',
    interfaces: [
      { name: 'cni0', mac: '0a:00:00:00:00:05' },
      { name: 'veth1234abcd', mac: '0a:00:00:00:00:07' },
      { name: 'eth0', mac: '0a:00:00:00:00:02', sandbox: NS },
    ],
    ips: [{ interface: 2, address: '10.1.2.2/24', gateway: '10.1.2.1' }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.2.1' }, { dst: '192.168.0.0/16' }],
  };
}

const args = { bridge: 'cni0', promiscMode: false, ifName: 'eth0', netns: NS };

function expectMsg(fn: () => void, msg: string): void {
  assert.throws(fn, (e: unknown) => {
    // bridge's own checks throw CniError 999; pkg/ip's validators (@cnikit/link) a plain Error that
    // the SDK prints as 999 with the same message
    assert.ok(CniError.is(e) || e instanceof Error);
    assert.equal(CniError.is(e) ? e.msg : (e as Error).message, msg);
    return true;
  });
}

describe('CHECK validation', () => {
  test('a consistent attachment passes', () => {
    checkAttachment(envOf(world()), args, prev());
  });
  test('bridge missing from prevResult', () => {
    const p = prev();
    p.interfaces = p.interfaces!.slice(1);
    expectMsg(() => checkAttachment(envOf(world()), args, p), 'Interface name missing ');
  });
  test('bridge not in kernel', () => {
    const w = world();
    w.host.delete('cni0');
    expectMsg(() => checkAttachment(envOf(w), args, prev()), 'Interface name cni0 not found');
  });
  test('bridge in a sandbox', () => {
    const p = prev();
    p.interfaces![0]!.sandbox = '/x';
    expectMsg(() => checkAttachment(envOf(world()), args, p), 'Interface cni0 should not be in sandbox');
  });
  test('bridge not a bridge', () => {
    const w = world();
    w.host.get('cni0')!.kind = 'dummy';
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'Interface cni0 does not have link type of bridge',
    );
  });
  test('bridge MAC mismatch', () => {
    const p = prev();
    p.interfaces![0]!.mac = '0a:00:00:00:00:99';
    expectMsg(
      () => checkAttachment(envOf(world()), args, p),
      "Bridge interface cni0 Mac doesn't match: 0a:00:00:00:00:99",
    );
  });
  test('promisc mismatch (trailing space like the reference)', () => {
    expectMsg(
      () => checkAttachment(envOf(world()), { ...args, promiscMode: true }, prev()),
      "Bridge interface cni0 configured Promisc Mode true doesn't match current state: false ",
    );
  });
  test('sandbox mismatch', () => {
    expectMsg(
      () => checkAttachment(envOf(world()), { ...args, netns: '/run/netns/other' }, prev()),
      "Sandbox in prevResult  doesn't match configured netns: /run/netns/other",
    );
  });
  test('container iface gone', () => {
    const w = world();
    w.cont.delete('eth0');
    expectMsg(() => checkAttachment(envOf(w), args, prev()), 'Interface name eth0 not found');
  });
  test('container iface not veth', () => {
    const w = world();
    w.cont.get('eth0')!.kind = 'macvlan';
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'Error: Container interface eth0 not of type veth',
    );
  });
  test('container MAC mismatch', () => {
    const w = world();
    w.cont.get('eth0')!.mac = '0a:00:00:00:00:03';
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      "Interface eth0 Mac 0a:00:00:00:00:02 doesn't match container Mac: 0a:00:00:00:00:03",
    );
  });
  test('host veth MAC mismatch', () => {
    const p = prev();
    p.interfaces![1]!.mac = '0a:00:00:00:00:99';
    expectMsg(
      () => checkAttachment(envOf(world()), args, p),
      "Interface veth1234abcd Mac doesn't match: 0a:00:00:00:00:99 not found",
    );
  });
  test('host veth not enslaved → not found', () => {
    const w = world();
    w.host.get('veth1234abcd')!.masterIndex = 0;
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'CNI veth created for bridge cni0 was not found',
    );
  });
  test('host veth of another pair → not found; non-veth interfaces skipped', () => {
    const w = world();
    w.host.get('veth1234abcd')!.peerIndex = 3;
    const p = prev();
    p.interfaces!.push({ name: 'eth9' });
    expectMsg(() => checkAttachment(envOf(w), args, p), 'CNI veth created for bridge cni0 was not found');
  });
  test('address missing', () => {
    const w = world();
    w.addrs = ['10.1.2.3/24'];
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'Failed to match addr 10.1.2.2/24 on interface eth0',
    );
  });
  test('subnet route missing', () => {
    const w = world();
    w.routes = w.routes.filter((r) => r.dst !== '10.1.2.0/24');
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'Failed to find Gateway 10.1.2.1 for interface eth0',
    );
  });
  test('route missing / wrong gateway; default route matched by dst only', () => {
    const w = world();
    w.routes = w.routes.filter((r) => r.dst !== '192.168.0.0/16');
    expectMsg(
      () => checkAttachment(envOf(w), args, prev()),
      'Expected Route {Dst:{IP:192.168.0.0 Mask:ffff0000} GW:<nil>} not found in routing table',
    );
    const p = prev();
    p.routes = [{ dst: '192.168.0.0/16', gw: '10.1.2.9' }];
    expectMsg(
      () => checkAttachment(envOf(world()), args, p),
      'Expected Route {Dst:{IP:192.168.0.0 Mask:ffff0000} GW:10.1.2.9} not found in routing table',
    );
    p.routes = [{ dst: '0.0.0.0/0', gw: '10.1.2.9' }];
    checkAttachment(envOf(world()), args, p);
  });
  test('routes in other tables do not count', () => {
    const w = world();
    w.routes = w.routes.map((r) => (r.dst === '192.168.0.0/16' ? { ...r, table: 100 } : r));
    assert.throws(() => checkAttachment(envOf(w), args, prev()), /not found in routing table/);
  });
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
