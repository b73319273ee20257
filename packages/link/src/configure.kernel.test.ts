// The Go pkg/ip + pkg/ipam equivalents (configureIface, enableForward, createVethWithRandomPeer,
// delLinkByNameAddr) against the real kernel, verified with `ip -json`.
import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  addAddr,
  createVethWithRandomPeer,
  delLinkByNameAddr,
  getLink,
  setLinkUp,
  sysctlGet,
  withNetns,
} from '@cnikit/netlink';
import { ipJson, withNamedNetns as withTestNs } from '@cnikit/testing';
import { configureIface, enableForward } from './configure.ts';

describe('pkg/ip + pkg/ipam helpers (kernel)', () => {
  test('createVethWithRandomPeer puts the peer in the other namespace; configureIface adds addresses and routes; delLinkByNameAddr returns the global addresses', () =>
    withTestNs(2, (host, ctr) => {
      const hostFd = openSync(host.path, 'r');
      let peer = '';
      try {
        peer = withNetns(ctr.path, () => {
          const r = createVethWithRandomPeer('eth0', 1400, '0a:58:0a:00:00:05', hostFd);
          assert.equal(r.link.name, 'eth0');
          assert.equal(r.link.mtu, 1400);
          assert.equal(r.link.mac, '0a:58:0a:00:00:05');
          return r.peer;
        });
      } finally {
        closeSync(hostFd);
      }
      assert.match(peer, /^veth[0-9a-f]{8}$/);
      const hostLinks = ipJson(host, 'link', 'show', peer);
      assert.equal(hostLinks[0].mtu, 1400);
      withNetns(host.path, () => addAddr(peer, '10.40.0.1/24'));
      withNetns(host.path, () => setLinkUp(peer));

      withNetns(ctr.path, () => {
        configureIface('eth0', {
          interfaces: [{ name: 'br0' }, { name: peer }, { name: 'eth0' }],
          ips: [
            { address: '10.40.0.5/24', gateway: '10.40.0.1', interface: 2 },
            { address: 'fd40::5/64', interface: 2 },
          ],
          routes: [{ dst: '0.0.0.0/0' }, { dst: '10.41.0.0/16', gw: '10.40.0.9', priority: 7 }],
        });
        assert.equal(sysctlGet('net/ipv6/conf/eth0/keep_addr_on_down').trim(), '1');
      });
      const addrs = ipJson(ctr, 'addr', 'show', 'eth0')[0].addr_info.map(
        (a: { local: string; prefixlen: number }) => `${a.local}/${a.prefixlen}`,
      );
      assert.ok(addrs.includes('10.40.0.5/24') && addrs.includes('fd40::5/64'), String(addrs));
      const routes = ipJson(ctr, 'route', 'show');
      assert.ok(
        routes.some(
          (r: { dst: string; gateway?: string }) => r.dst === 'default' && r.gateway === '10.40.0.1',
        ),
      );
      assert.ok(
        routes.some(
          (r: { dst: string; gateway?: string; metric?: number }) =>
            r.dst === '10.41.0.0/16' && r.gateway === '10.40.0.9' && r.metric === 7,
        ),
      );

      // an off-link gateway cannot be added: the error names the route
      assert.throws(
        () =>
          withNetns(ctr.path, () =>
            configureIface('eth0', {
              interfaces: [{ name: 'eth0' }],
              ips: [],
              routes: [{ dst: '10.99.0.0/16', gw: '192.0.2.1' }],
            }),
          ),
        /^Error: failed to add route '10\.99\.0\.0\/16 via 192\.0\.2\.1 dev eth0 metric 0 \(Scope: 0, Table: 0\)': /,
      );
      // an IP entry that points at another interface is rejected
      assert.throws(
        () =>
          withNetns(ctr.path, () =>
            configureIface('eth0', {
              interfaces: [{ name: 'x' }],
              ips: [{ address: '10.40.0.6/24', interface: 0 }],
            }),
          ),
        /invalid interface index/,
      );

      const gone = withNetns(ctr.path, () => delLinkByNameAddr('eth0'));
      assert.deepEqual(gone.sort(), ['10.40.0.5/24', 'fd40::5/64']);
      assert.equal(
        withNetns(ctr.path, () => getLink('eth0')),
        undefined,
      );
      assert.deepEqual(
        withNetns(ctr.path, () => delLinkByNameAddr('eth0')),
        [],
        'absent link: nothing to do',
      );
    }));

  test('enableForward writes 1 in the namespace, never in the root one', () => {
    const rootForward = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8');
    const rootForward6 = readFileSync('/proc/sys/net/ipv6/conf/all/forwarding', 'utf8');
    withTestNs(1, (ns) => {
      withNetns(ns.path, () => {
        // both sysctls exist in the root namespace too: write only when this thread really is in the test one
        const here = statSync('/proc/thread-self/ns/net').ino;
        if (here !== statSync(ns.path).ino)
          throw new Error(
            `withNetns did not enter ${ns.path} (thread netns inode ${here}): refusing to write`,
          );
        assert.equal(sysctlGet('net/ipv4/ip_forward').trim(), '0');
        enableForward(4);
        enableForward(6);
        assert.equal(sysctlGet('net/ipv4/ip_forward').trim(), '1');
        assert.equal(sysctlGet('net/ipv6/conf/all/forwarding').trim(), '1');
        enableForward(4); // already 1: no change
      });
    });
    assert.equal(
      readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8'),
      rootForward,
      'root ip_forward untouched',
    );
    assert.equal(readFileSync('/proc/sys/net/ipv6/conf/all/forwarding', 'utf8'), rootForward6);
  });
});
