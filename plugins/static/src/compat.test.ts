/** static vs the Go reference binary (Debian 1.1.1, spec ≤ 1.0.0): same inputs → same results and messages. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import { cniCall } from '@cnikit/testing';
import { plugin } from './index.ts';

const GO = '/usr/lib/cni/static';

// biome-ignore lint/suspicious/noExplicitAny: JSON under comparison
function normalise(j: any): any {
  // 1.1.1 prints an empty "dns": {} that HEAD (and cnikit) omit for 1.x results
  if (
    j &&
    typeof j === 'object' &&
    j.dns &&
    Object.keys(j.dns).length === 0 &&
    !j.cniVersion?.startsWith('0.')
  ) {
    const { dns: _dns, ...rest } = j;
    return rest;
  }
  return j;
}

const cases: Array<[string, Record<string, unknown>, string?, string?]> = [
  [
    'addresses, routes, dns',
    {
      addresses: [{ address: '10.10.0.1/24', gateway: '10.10.0.254' }, { address: '3ffe:ffff:0:01ff::1/64' }],
      routes: [
        { dst: '0.0.0.0/0' },
        { dst: '192.168.0.0/16', gw: '10.10.5.1' },
        { dst: '192.168.0.0/16', gw: '10.10.5.2' },
      ],
      dns: { nameservers: ['8.8.8.8'], domain: 'example.com', search: ['a', 'b'], options: ['ndots:1'] },
    },
  ],
  [
    'CNI_ARGS IPs and gateways',
    { addresses: [{ address: '10.10.0.1/24' }] },
    'IP=10.10.3.1/24, 11.11.0.1/24;GATEWAY=11.11.0.9,10.10.3.7',
  ],
  ['bad CNI_ARGS ip', {}, 'IP=10.10.3.1'],
  ['bad CNI_ARGS gateway', {}, 'IP=10.10.3.1/24;GATEWAY=x'],
  ['unknown CNI_ARGS', {}, 'FOO=1'],
  ['bad address', { addresses: [{ address: '10.0.0.1' }] }],
  [
    'host bits and mapped text kept',
    { addresses: [{ address: '::ffff:10.1.2.3/120' }, { address: '2001:DB8::5/64' }] },
  ],
  [
    'too many for 0.2.0',
    { addresses: [{ address: '10.0.0.1/24' }, { address: '10.0.1.1/24' }] },
    undefined,
    '0.2.0',
  ],
  [
    '0.2.0 ok',
    { addresses: [{ address: '10.0.0.1/24', gateway: '10.0.0.254' }, { address: 'fd00::1/64' }] },
    undefined,
    '0.2.0',
  ],
  [
    '0.4.0',
    { addresses: [{ address: '10.0.0.1/24', gateway: '10.0.0.254' }, { address: 'fd00::1/64' }] },
    undefined,
    '0.4.0',
  ],
];

describe('static vs Go reference', () => {
  assert.ok(
    existsSync(GO),
    'Go static not installed (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  for (const [name, ipam, args, ver] of cases) {
    test(name, async () => {
      const conf = JSON.stringify({
        cniVersion: ver ?? '1.0.0',
        name: 'n',
        type: 'static',
        ipam: { type: 'static', ...ipam },
      });
      const o = { containerId: 'a', netns: '/x', path: '/x', ...(args ? { args } : {}) };
      const go = await cniCall({ binary: GO }, 'ADD', conf, o);
      const ours = await cniCall(plugin, 'ADD', conf, o);
      assert.equal(ours.code === 0, go.code === 0, `Go: ${go.stdout}\nours: ${ours.stdout}`);
      const jGo = normalise(JSON.parse(go.stdout));
      const jOurs = normalise(JSON.parse(ours.stdout));
      if (go.code === 0) assert.deepEqual(jOurs, jGo);
      else assert.equal(jOurs.msg, jGo.msg);
    });
  }
});

describe('static CHECK vs Go reference', () => {
  assert.ok(
    existsSync(GO),
    'Go static not installed (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  const prev = (gw: string) => ({
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/x' }],
    ips: [{ address: '10.10.0.1/24', gateway: gw, interface: 0 }],
  });
  const cases: Array<[string, Record<string, unknown>]> = [
    ['matching', { prevResult: prev('10.10.0.254') }],
    ['gateway differs', { prevResult: prev('10.10.0.1') }],
    ['no prevResult', {}],
  ];
  for (const [name, extra] of cases) {
    test(name, async () => {
      const conf = JSON.stringify({
        cniVersion: '1.0.0',
        name: 'n',
        type: 'static',
        ipam: { type: 'static', addresses: [{ address: '10.10.0.1/24', gateway: '10.10.0.254' }] },
        ...extra,
      });
      const o = { containerId: 'a', netns: '/x', path: '/x' };
      const go = await cniCall({ binary: GO }, 'CHECK', conf, o);
      const ours = await cniCall(plugin, 'CHECK', conf, o);
      assert.equal(ours.code === 0, go.code === 0, `Go: ${go.stdout}\nours: ${ours.stdout}`);
      if (go.code !== 0) assert.equal(JSON.parse(ours.stdout).msg, JSON.parse(go.stdout).msg);
    });
  }
});
