/** static IPAM: the reference's scenarios (static_test.go) through the skel seam, for every spec version. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ALL_VERSIONS } from '@cnikit/skel';
import { type CniCommand, cniRunner } from '@cnikit/testing';
import { plugin } from './index.ts';

const st = cniRunner(plugin, { containerId: 'dummy', netns: '/some/where', path: '/opt/cni/bin' });
const call = (conf: unknown, command: CniCommand = 'ADD', args?: string) =>
  st.call(command, conf, args === undefined ? {} : { args });

function net(ver: string, ipam: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) {
  const c: Record<string, unknown> = {
    cniVersion: ver,
    name: 'mynet',
    type: 'ipvlan',
    master: 'foo0',
    ...extra,
  };
  if (ipam) c.ipam = { type: 'static', ...ipam };
  return c;
}

const multi = (v: string) => !['0.1.0', '0.2.0'].includes(v);
const ipsOf = (j: { ips?: Array<{ address: string; gateway?: string }> }) =>
  (j.ips ?? []).map((x) => (x.gateway ? [x.address, x.gateway] : [x.address]));

for (const ver of ALL_VERSIONS) {
  describe(`[${ver}] static`, () => {
    test('allocates and releases addresses with ADD/DEL (routes incl. ECMP, dns)', async () => {
      const conf = net(ver, {
        addresses: [
          { address: '10.10.0.1/24', gateway: '10.10.0.254' },
          { address: '3ffe:ffff:0:01ff::1/64', gateway: '3ffe:ffff:0::1' },
        ],
        routes: [
          { dst: '0.0.0.0/0' },
          { dst: '192.168.0.0/16', gw: '10.10.5.1' },
          { dst: '192.168.0.0/16', gw: '10.10.5.2' },
          { dst: '3ffe:ffff:0:01ff::1/64' },
        ],
        dns: { nameservers: ['8.8.8.8'], domain: 'example.com', search: ['example.com'] },
      });
      const r = await call(conf);
      assert.equal(r.code, 0, r.stdout);
      if (multi(ver)) {
        assert.deepEqual(ipsOf(r.json), [
          ['10.10.0.1/24', '10.10.0.254'],
          ['3ffe:ffff:0:1ff::1/64', '3ffe:ffff::1'],
        ]);
        assert.deepEqual(r.json.routes, [
          { dst: '0.0.0.0/0' },
          { dst: '192.168.0.0/16', gw: '10.10.5.1' },
          { dst: '192.168.0.0/16', gw: '10.10.5.2' },
          { dst: '3ffe:ffff:0:1ff::1/64' },
        ]);
        if (ver.startsWith('0.')) assert.match(r.stdout, /"version":/);
      } else {
        assert.equal(r.json.ip4.ip, '10.10.0.1/24');
        assert.equal(r.json.ip4.gateway, '10.10.0.254');
        assert.equal(r.json.ip6.ip, '3ffe:ffff:0:1ff::1/64');
      }
      assert.deepEqual(r.json.dns, {
        nameservers: ['8.8.8.8'],
        domain: 'example.com',
        search: ['example.com'],
      });
      const del = await call(conf, 'DEL');
      assert.equal(del.code, 0);
      assert.equal(del.stdout, '');
    });

    test("doesn't error when passed an unknown ID on DEL (config not even read)", async () => {
      const r = await call({ cniVersion: ver, name: 'mynet', type: 'static' }, 'DEL');
      assert.equal(r.code, 0, r.stdout);
    });

    test('CNI_ARGS IP + GATEWAY', async () => {
      const r = await call(
        net(ver, { routes: [{ dst: '0.0.0.0/0' }] }),
        'ADD',
        'IP=10.10.0.1/24;GATEWAY=10.10.0.254',
      );
      assert.equal(r.code, 0, r.stdout);
      if (multi(ver)) {
        assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24', '10.10.0.254']]);
        assert.deepEqual(r.json.routes, [{ dst: '0.0.0.0/0' }]);
      } else {
        assert.equal(r.json.ip4.gateway, '10.10.0.254');
      }
    });

    test('multiple CNI_ARGS IPs; GATEWAY only where the subnet contains it', async () => {
      const r = await call(net(ver, {}), 'ADD', 'IP=10.10.0.1/24,11.11.0.1/24;GATEWAY=10.10.0.254');
      if (!multi(ver)) {
        assert.equal(r.json.msg, `CNI version ${ver} does not support more than 1 address per family`);
        return;
      }
      assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24', '10.10.0.254'], ['11.11.0.1/24']]);
    });

    test('runtimeConfig IPs', async () => {
      const conf = net(
        ver,
        {
          routes: [
            { dst: '0.0.0.0/0', gw: '10.10.0.254' },
            { dst: '3ffe:ffff:0:01ff::1/64', gw: '3ffe:ffff:0::1' },
          ],
        },
        { capabilities: { ips: true }, RuntimeConfig: { ips: ['10.10.0.1/24', '3ffe:ffff:0:01ff::1/64'] } },
      );
      const r = await call(conf);
      assert.equal(r.code, 0, r.stdout);
      if (multi(ver)) assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24'], ['3ffe:ffff:0:1ff::1/64']]);
    });

    test('args IPs', async () => {
      const conf = net(ver, {}, { args: { cni: { ips: ['10.10.0.1/24', '3ffe:ffff:0:01ff::1/64'] } } });
      const r = await call(conf);
      assert.equal(r.code, 0, r.stdout);
      if (multi(ver)) assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24'], ['3ffe:ffff:0:1ff::1/64']]);
    });

    test('runtimeConfig beats args beats CNI_ARGS (and CNI_ARGS gateways are lost)', async () => {
      const conf = net(
        ver,
        { addresses: [{ address: '10.10.0.9/24' }] },
        {
          capabilities: { ips: true },
          RuntimeConfig: { ips: ['10.10.0.1/24', '3ffe:ffff:0:01ff::1/64'] },
          args: { cni: { ips: ['10.10.0.2/24', '3ffe:ffff:0:01ff::2/64'] } },
        },
      );
      const r = await call(conf, 'ADD', 'IP=10.10.0.3/24,11.11.0.3/24;GATEWAY=10.10.0.254');
      if (!multi(ver)) {
        // one address per family after the replacement: fine even for 0.1.0/0.2.0
        assert.equal(r.json.ip4.ip, '10.10.0.1/24');
        assert.equal(r.json.ip4.gateway, undefined);
        return;
      }
      assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24'], ['3ffe:ffff:0:1ff::1/64']]);
      const r2 = await call({ ...conf, RuntimeConfig: undefined }, 'ADD', 'IP=10.10.0.3/24');
      assert.deepEqual(ipsOf(r2.json), [['10.10.0.2/24'], ['3ffe:ffff:0:1ff::2/64']]);
    });

    test('missing ipam key errors even when args / runtimeConfig carry IPs', async () => {
      const a = await call(net(ver, undefined), 'ADD', 'IP=10.10.0.1/24;GATEWAY=10.10.0.254');
      assert.equal(a.json.msg, "IPAM config missing 'ipam' key");
      const b = await call(net(ver, undefined, { RuntimeConfig: { ips: ['10.10.0.1/24'] } }));
      assert.equal(b.json.msg, "IPAM config missing 'ipam' key");
      assert.equal(b.json.code, 7);
    });
  });
}

describe('static errors (reference messages)', () => {
  const ipStr = '10.10.0.1';
  test('invalid CIDR via ipam config', async () => {
    const r = await call(net('1.0.0', { addresses: [{ address: ipStr }] }));
    assert.deepEqual(r.json, {
      code: 7,
      msg: `the 'address' field is expected to be in CIDR notation, got: '${ipStr}'`,
    });
  });
  test('invalid CIDR via CNI_ARGS', async () => {
    const r = await call(net('1.0.0', {}), 'ADD', `IP=${ipStr}`);
    assert.deepEqual(r.json, {
      code: 999,
      msg: `the 'ip' field is expected to be in CIDR notation, got: '${ipStr}'`,
    });
  });
  test('invalid CIDR via args', async () => {
    const r = await call(net('1.0.0', {}, { args: { cni: { ips: [ipStr] } } }));
    assert.deepEqual(r.json, {
      code: 7,
      msg: `an entry in the 'ips' field is NOT in CIDR notation, got: '${ipStr}'`,
    });
  });
  test('invalid CIDR via runtimeConfig', async () => {
    const r = await call(net('1.0.0', {}, { runtimeConfig: { ips: [ipStr] } }));
    assert.deepEqual(r.json, {
      code: 7,
      msg: `an entry in the 'ips' field is NOT in CIDR notation, got: '${ipStr}'`,
    });
  });
  test('invalid gateway via CNI_ARGS keeps the untrimmed item', async () => {
    const r = await call(net('1.0.0', {}), 'ADD', 'IP=10.10.0.1/24;GATEWAY=10.10.0.254, nope');
    assert.deepEqual(r.json, { code: 999, msg: 'invalid gateway address:  nope' });
  });
  test('invalid gateway / route in config', async () => {
    const a = await call(net('1.0.0', { addresses: [{ address: '10.0.0.1/24', gateway: 'x' }] }));
    assert.equal(a.json.msg, 'invalid IP address: x');
    const b = await call(net('1.0.0', { routes: [{ dst: '10.0.0.0/33' }] }));
    assert.equal(b.json.msg, 'invalid CIDR address: 10.0.0.0/33');
  });
  test('CNI_ARGS unknown key', async () => {
    const r = await call(net('1.0.0', {}), 'ADD', 'FOO=1');
    assert.deepEqual(r.json, { code: 999, msg: 'ARGS: unknown args ["FOO=1"]' });
  });
  test('zero addresses is not an error; host bits are kept; mapped IPv4 prints as IPv4', async () => {
    const r = await call(net('1.1.0', {}));
    assert.equal(r.code, 0);
    assert.equal(r.json.ips, undefined);
    const m = await call(net('1.1.0', { addresses: [{ address: '::ffff:10.1.2.3/120' }] }));
    assert.deepEqual(ipsOf(m.json), [['10.1.2.3/24']]);
  });
  test('CNI_ARGS GATEWAY does not apply to config addresses (reference quirk)', async () => {
    const r = await call(
      net('1.1.0', { addresses: [{ address: '10.10.0.1/24' }] }),
      'ADD',
      'GATEWAY=10.10.0.254',
    );
    assert.deepEqual(ipsOf(r.json), [['10.10.0.1/24']]);
  });
});

describe('static CHECK', () => {
  const prev = (ips: Array<{ address: string; gateway?: string }>) => ({
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/some/where' }],
    ips: ips.map((x) => ({ ...x, interface: 0 })),
  });
  const conf = (extra: Record<string, unknown>) =>
    net(
      '1.0.0',
      { addresses: [{ address: '10.10.0.1/24', gateway: '10.10.0.254' }, { address: '10.10.1.1/24' }] },
      extra,
    );

  test('requires prevResult', async () => {
    const r = await call(conf({}), 'CHECK');
    assert.deepEqual(r.json, { code: 999, msg: 'Required prevResult missing' });
  });
  test('matching addresses and gateways pass; missing addresses are not an error', async () => {
    const r = await call(
      conf({ prevResult: prev([{ address: '10.10.0.1/24', gateway: '10.10.0.254' }]) }),
      'CHECK',
    );
    assert.equal(r.code, 0, r.stdout);
    const r2 = await call(
      conf({ prevResult: prev([{ address: '10.10.1.1/24', gateway: '10.10.1.99' }]) }),
      'CHECK',
    );
    assert.equal(r2.code, 0, r2.stdout);
  });
  test('prevResult is found whatever the key case ("PrevResult"), like Go', async () => {
    const ok = await call(
      conf({ PrevResult: prev([{ address: '10.10.0.1/24', gateway: '10.10.0.254' }]) }),
      'CHECK',
    );
    assert.equal(ok.code, 0, ok.stdout);
    const bad = await call(
      conf({ PrevResult: prev([{ address: '10.10.0.1/24', gateway: '10.10.0.1' }]) }),
      'CHECK',
    );
    assert.deepEqual(bad.json, {
      code: 999,
      msg: 'static: Failed to match addr 10.10.0.1 on interface eth0',
    });
  });
  test('prevResult: null counts as missing', async () => {
    const r = await call(conf({ prevResult: null }), 'CHECK');
    assert.deepEqual(r.json, { code: 999, msg: 'Required prevResult missing' });
  });
  test('a different gateway fails', async () => {
    const r = await call(
      conf({ prevResult: prev([{ address: '10.10.0.1/24', gateway: '10.10.0.1' }]) }),
      'CHECK',
    );
    assert.deepEqual(r.json, { code: 999, msg: 'static: Failed to match addr 10.10.0.1 on interface eth0' });
  });
});
