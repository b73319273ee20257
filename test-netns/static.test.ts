/**
 * static IPAM through the compiled executables, driven like a runtime: ADD for every spec version (v4 + v6
 * addresses with gateways, routes, DNS), CNI_ARGS IP/GATEWAY, the address precedence (runtimeConfig.ips > args.cni.ips
 * > ipam.addresses + CNI_ARGS IP), CHECK and DEL against the cached result, every bad-input error (spec error object,
 * code, exact message), static as the delegated IPAM of bridge on the real kernel, and the same calls side by side
 * with the Go reference (/usr/lib/cni/static, spec ≤ 1.0.0).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ConfList, type Json, Runtime, type RuntimeConf, RuntimeError } from '@cnikit/libcni';
import { createSandbox } from '@cnikit/testing';
import { type Backend, ensureBuilt, ensureLinks, GO_CNI, goAvailable } from './dist.ts';

const info = ensureBuilt();
const other: Backend = info.default === 'bun' ? 'sea' : 'bun';
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-static-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
const haveStatic = info.plugins.includes('static');
const goStatic = goAvailable('static');

const ALL = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];
const GO_VERSIONS = ALL.filter((v) => v !== '1.1.0'); // Debian's 1.1.1 reference supports up to 1.0.0
const canCheck = (v: string) => v === '0.4.0' || v.startsWith('1.');
const legacy = (v: string) => v === '0.1.0' || v === '0.2.0';
// static never enters the namespace; a path that does not exist proves it
const NETNS = '/run/netns/cnikit-static-never-opened';

let seq = 0;
function runtime(path: string, hostNetns?: string): Runtime {
  return new Runtime({
    path: [path],
    cacheDir: join(scratch, `cache-${seq++}`),
    ...(hostNetns ? { hostNetns } : {}),
  });
}

function rtConf(extra: Partial<RuntimeConf> = {}): RuntimeConf {
  return { containerId: `ctr-static-${seq++}`, netns: NETNS, ifName: 'eth0', ...extra };
}

function staticList(cniVersion: string, ipam: Json, extra: Json = {}): ConfList {
  return {
    cniVersion,
    name: 'static-net',
    plugins: [{ type: 'static', ...extra, ipam: { type: 'static', ...ipam } }],
  };
}

const FULL: Json = {
  addresses: [
    { address: '10.10.0.1/24', gateway: '10.10.0.254' },
    { address: '3ffe:ffff:0:01ff::1/64', gateway: '3ffe:ffff:0::1' },
  ],
  routes: [
    { dst: '0.0.0.0/0' },
    { dst: '192.168.0.0/16', gw: '10.10.5.1' },
    { dst: '::/0', gw: '3ffe:ffff:0:1ff::fe' },
  ],
  dns: {
    nameservers: ['8.8.8.8', '2001:4860:4860::8888'],
    domain: 'example.com',
    search: ['a.example'],
    options: ['ndots:2'],
  },
};
const FULL_DNS = {
  nameservers: ['8.8.8.8', '2001:4860:4860::8888'],
  domain: 'example.com',
  search: ['a.example'],
  options: ['ndots:2'],
};

/** The result FULL must give in each version's shape (canonical address text: 0:01ff → 0:1ff, 0:0::1 → ::1). */
function fullExpected(v: string): Json {
  if (legacy(v)) {
    return {
      cniVersion: v,
      ip4: {
        ip: '10.10.0.1/24',
        gateway: '10.10.0.254',
        routes: [{ dst: '0.0.0.0/0' }, { dst: '192.168.0.0/16', gw: '10.10.5.1' }],
      },
      ip6: {
        ip: '3ffe:ffff:0:1ff::1/64',
        gateway: '3ffe:ffff::1',
        routes: [{ dst: '::/0', gw: '3ffe:ffff:0:1ff::fe' }],
      },
      dns: FULL_DNS,
    };
  }
  const ver = (f: string) => (v.startsWith('0.') ? { version: f } : {});
  return {
    cniVersion: v,
    ips: [
      { ...ver('4'), address: '10.10.0.1/24', gateway: '10.10.0.254' },
      { ...ver('6'), address: '3ffe:ffff:0:1ff::1/64', gateway: '3ffe:ffff::1' },
    ],
    routes: [
      { dst: '0.0.0.0/0' },
      { dst: '192.168.0.0/16', gw: '10.10.5.1' },
      { dst: '::/0', gw: '3ffe:ffff:0:1ff::fe' },
    ],
    dns: FULL_DNS,
  };
}

/** [address, gateway?] pairs of a ≥ 0.3.0 result. */
function ipsOf(result: Json | undefined): string[][] {
  return ((result?.ips ?? []) as Array<{ address: string; gateway?: string }>).map((i) =>
    i.gateway ? [i.address, i.gateway] : [i.address],
  );
}

function catchErr(fn: () => unknown): RuntimeError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RuntimeError) return err;
    throw err;
  }
  assert.fail('expected a plugin error');
}

/** A spec error object on stdout, exit status 1, no stack trace. */
function assertCniError(err: RuntimeError, code: number, msg: string): void {
  assert.equal(err.exitCode, 1, err.message);
  assert.ok(err.cni, `stdout is not an error object: ${err.stdout}`);
  for (const k of Object.keys(err.cni)) assert.ok(['cniVersion', 'code', 'msg', 'details'].includes(k), k);
  assert.equal(err.cni.code, code, `code of ${err.stdout}`);
  assert.equal(err.cni.msg, msg);
  assert.ok(!err.stdout.includes('    at '), 'no stack trace');
}

/** Go 1.1.1 prints an empty "dns": {} for 1.x results; cnikit (like reference HEAD) omits it. */
function normalise(j: Json | undefined): Json | undefined {
  if (!j || typeof j.cniVersion !== 'string' || j.cniVersion.startsWith('0.')) return j;
  const dns = j.dns as Json | undefined;
  if (dns && Object.keys(dns).length === 0) {
    const { dns: _dns, ...rest } = j;
    return rest;
  }
  return j;
}

function suite(backend: Backend, versions: string[]) {
  describe(`static via ${backend}${backend === info.default ? ' (default)' : ' (smoke)'}`, () => {
    assert.ok(haveStatic, 'static not built' + ' (npm test runs npm run build before the tests)');
    const dir = ensureLinks(backend, info);

    for (const v of versions) {
      test(`ADD (v4 + v6, gateways, routes, dns) / CHECK / DEL / DEL again, cniVersion ${v}`, () => {
        const rt = runtime(dir);
        const list = staticList(v, FULL);
        const conf = rtConf();
        const result = rt.addNetworkList(list, conf);
        assert.deepEqual(result, fullExpected(v));
        assert.deepEqual(rt.getCachedResult(list, conf), result, 'cached like libcni');
        if (canCheck(v)) rt.checkNetworkList(list, conf);
        // DEL prints nothing and succeeds; static keeps no state, so DEL again (and DEL with an unknown ID) too
        const del = rt.execRaw(
          rt.findPlugin('static'),
          {
            CNI_COMMAND: 'DEL',
            CNI_CONTAINERID: conf.containerId,
            CNI_NETNS: NETNS,
            CNI_IFNAME: 'eth0',
            CNI_PATH: dir,
          },
          JSON.stringify(rt.buildConfig(list, list.plugins[0]!, conf, canCheck(v) ? result : undefined)),
        );
        assert.equal(del.status, 0, del.stdout);
        assert.equal(del.stdout, '');
        rt.delNetworkList(list, conf);
        assert.equal(rt.getCachedResult(list, conf), undefined);
        rt.delNetworkList(list, rtConf({ containerId: 'never-added', netns: '' }));
      });
    }
  });
}

suite(info.default, ALL);
suite(other, ['0.2.0', '1.1.0']);

describe('static: CNI_ARGS, precedence, CHECK, errors (default back-end)', () => {
  assert.ok(haveStatic, 'static not built' + ' (npm test runs npm run build before the tests)');
  const dir = ensureLinks(info.default, info);

  for (const v of ['0.2.0', '1.0.0', '1.1.0']) {
    test(`CNI_ARGS IP and GATEWAY (${v}): appended to ipam.addresses; GATEWAY only where the subnet contains it`, () => {
      const rt = runtime(dir);
      const args: Array<[string, string]> = [
        ['IgnoreUnknown', '1'],
        ['K8S_POD_NAME', 'ignored'],
        ['IP', '10.10.3.1/24, fd00:3::1/64'],
        ['GATEWAY', '10.10.3.254,fd00:3::fe,192.0.2.1'],
      ];
      if (legacy(v)) {
        // one address per family in 0.1.0/0.2.0: CNI_ARGS only
        const r = rt.addNetworkList(staticList(v, { routes: [{ dst: '0.0.0.0/0' }] }), rtConf({ args }));
        assert.deepEqual(r, {
          cniVersion: v,
          ip4: { ip: '10.10.3.1/24', gateway: '10.10.3.254', routes: [{ dst: '0.0.0.0/0' }] },
          ip6: { ip: 'fd00:3::1/64', gateway: 'fd00:3::fe' },
          dns: {},
        });
        return;
      }
      const list = staticList(v, {
        addresses: [{ address: '10.10.0.1/24' }],
        routes: [{ dst: '0.0.0.0/0' }],
      });
      const conf = rtConf({ args });
      const r = rt.addNetworkList(list, conf);
      // the config address keeps no gateway: CNI_ARGS GATEWAY applies to CNI_ARGS addresses only (reference quirk)
      assert.deepEqual(ipsOf(r), [
        ['10.10.0.1/24'],
        ['10.10.3.1/24', '10.10.3.254'],
        ['fd00:3::1/64', 'fd00:3::fe'],
      ]);
      assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }]);
      rt.checkNetworkList(list, conf);
      rt.delNetworkList(list, conf);
    });
  }

  test('precedence: runtimeConfig.ips (capability) > args.cni.ips > ipam.addresses + CNI_ARGS IP', () => {
    const rt = runtime(dir);
    const ipam = { addresses: [{ address: '10.10.0.9/24', gateway: '10.10.0.254' }] };
    const argsIps = { args: { cni: { ips: ['10.10.0.2/24', 'fd00::2/64'] } } };
    const cniArgs: Array<[string, string]> = [
      ['IP', '10.10.0.3/24'],
      ['GATEWAY', '10.10.0.254'],
    ];
    const capabilityArgs = { ips: ['10.10.0.1/24', 'fd00::1/64'] };
    const withCap = staticList('1.1.0', ipam, { capabilities: { ips: true }, ...argsIps });
    const r1 = rt.addNetworkList(withCap, rtConf({ args: cniArgs, capabilityArgs }));
    assert.deepEqual(ipsOf(r1), [['10.10.0.1/24'], ['fd00::1/64']], 'runtimeConfig.ips replaces everything');
    // the same list without the capability: the runtime does not pass runtimeConfig, args.cni.ips wins
    const noCap = staticList('1.1.0', ipam, argsIps);
    const r2 = rt.addNetworkList(noCap, rtConf({ args: cniArgs, capabilityArgs }));
    assert.deepEqual(
      ipsOf(r2),
      [['10.10.0.2/24'], ['fd00::2/64']],
      'args.cni.ips replaces config + CNI_ARGS',
    );
    const r3 = rt.addNetworkList(staticList('1.1.0', ipam), rtConf({ args: cniArgs, capabilityArgs }));
    assert.deepEqual(ipsOf(r3), [
      ['10.10.0.9/24', '10.10.0.254'],
      ['10.10.0.3/24', '10.10.0.254'],
    ]);
    // an empty runtimeConfig.ips does not replace anything
    const r4 = rt.addNetworkList(withCap, rtConf({ capabilityArgs: { ips: [] } }));
    assert.deepEqual(ipsOf(r4), [['10.10.0.2/24'], ['fd00::2/64']]);
  });

  test('CHECK: matching prevResult passes, a different gateway fails, a missing prevResult fails', () => {
    const rt = runtime(dir);
    const list = staticList('1.0.0', FULL);
    const conf = rtConf();
    const result = rt.addNetworkList(list, conf);
    rt.checkNetworkList(list, conf);
    const base = rt.buildConfig(list, list.plugins[0]!, conf);
    const wrongGw = {
      ...result,
      ips: [{ address: '10.10.0.1/24', gateway: '10.10.0.1' }, ...(result.ips as Json[]).slice(1)],
    };
    assertCniError(
      catchErr(() => rt.invoke('static', 'CHECK', { ...base, prevResult: wrongGw }, conf)),
      999,
      'static: Failed to match addr 10.10.0.1 on interface eth0',
    );
    // an address the prevResult does not carry is not an error (like the reference)
    rt.invoke('static', 'CHECK', { ...base, prevResult: { ...result, ips: [] } }, conf);
    assertCniError(
      catchErr(() => rt.invoke('static', 'CHECK', base, conf)),
      999,
      'Required prevResult missing',
    );
    rt.delNetworkList(list, conf);
  });
});

/** Bad input: [name, cniVersion, ipam (undefined = no ipam key), extra conf keys, CNI_ARGS, code, msg, Go's msg]. */
const BAD: Array<[string, string, Json | undefined, Json, Array<[string, string]>, number, string, string?]> =
  [
    ['no ipam key', '1.0.0', undefined, {}, [], 7, "IPAM config missing 'ipam' key"],
    [
      'address not in CIDR notation',
      '1.0.0',
      { addresses: [{ address: '10.10.0.1' }] },
      {},
      [],
      7,
      "the 'address' field is expected to be in CIDR notation, got: '10.10.0.1'",
    ],
    [
      'CNI_ARGS IP not in CIDR notation',
      '1.0.0',
      {},
      {},
      [['IP', '10.10.0.1']],
      999,
      "the 'ip' field is expected to be in CIDR notation, got: '10.10.0.1'",
    ],
    [
      'CNI_ARGS GATEWAY not an IP (untrimmed item in the message)',
      '1.0.0',
      {},
      {},
      [
        ['IP', '10.10.0.1/24'],
        ['GATEWAY', '10.10.0.254, nope'],
      ],
      999,
      'invalid gateway address:  nope',
    ],
    ['unknown CNI_ARGS key', '1.0.0', {}, {}, [['FOO', '1']], 999, 'ARGS: unknown args ["FOO=1"]'],
    [
      'runtimeConfig.ips entry not in CIDR notation',
      '1.0.0',
      {},
      { runtimeConfig: { ips: ['10.10.0.1'] } },
      [],
      7,
      "an entry in the 'ips' field is NOT in CIDR notation, got: '10.10.0.1'",
    ],
    [
      'args.cni.ips entry not in CIDR notation',
      '1.0.0',
      {},
      { args: { cni: { ips: ['10.10.0.1/24', 'fd00::1'] } } },
      [],
      7,
      "an entry in the 'ips' field is NOT in CIDR notation, got: 'fd00::1'",
    ],
    [
      'two IPv4 addresses with 0.2.0',
      '0.2.0',
      { addresses: [{ address: '10.0.0.1/24' }, { address: '10.0.1.1/24' }] },
      {},
      [],
      7,
      'CNI version 0.2.0 does not support more than 1 address per family',
    ],
    [
      'address gateway not an IP',
      '1.0.0',
      { addresses: [{ address: '10.0.0.1/24', gateway: 'x' }] },
      {},
      [],
      7,
      'invalid IP address: x',
    ],
    [
      'route dst not a CIDR',
      '1.0.0',
      { routes: [{ dst: '10.0.0.0/33' }] },
      {},
      [],
      7,
      'invalid CIDR address: 10.0.0.0/33',
    ],
    [
      'addresses of the wrong JSON type',
      '1.0.0',
      { addresses: '10.0.0.1/24' },
      {},
      [],
      7,
      'ipam.addresses: expected array, got string',
      'json: cannot unmarshal string into Go struct field IPAMConfig.ipam.addresses of type []main.Address',
    ],
    [
      'dns.nameservers of the wrong JSON type',
      '1.0.0',
      { dns: { nameservers: '8.8.8.8' } },
      {},
      [],
      7,
      'ipam.dns.nameservers: expected array, got string',
      'json: cannot unmarshal string into Go struct field DNS.ipam.dns.nameservers of type []string',
    ],
    ['unsupported cniVersion', '9.9.9', {}, {}, [], 1, 'incompatible CNI versions'],
  ];

function badConf(ver: string, ipam: Json | undefined, extra: Json): Json {
  const c: Json = { cniVersion: ver, name: 'static-bad', type: 'static', ...extra };
  if (ipam) c.ipam = { type: 'static', ...ipam };
  return c;
}

describe('static bad input (default back-end): error object, code, exact message', () => {
  assert.ok(haveStatic, 'static not built' + ' (npm test runs npm run build before the tests)');
  const dir = ensureLinks(info.default, info);
  for (const [name, ver, ipam, extra, args, code, msg] of BAD) {
    test(name, () => {
      const rt = runtime(dir);
      const err = catchErr(() => rt.invoke('static', 'ADD', badConf(ver, ipam, extra), rtConf({ args })));
      assertCniError(err, code, msg);
    });
  }
  test('stdin that is not JSON', () => {
    const rt = runtime(dir);
    const r = rt.execRaw(
      rt.findPlugin('static'),
      { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x', CNI_NETNS: NETNS, CNI_IFNAME: 'eth0', CNI_PATH: dir },
      'not json',
    );
    const err = new RuntimeError('static', 'ADD', r.status, r.stdout, r.stderr);
    assertCniError(
      err,
      6,
      "error unmarshall network config: invalid character 'o' in literal null (expecting 'u')",
    );
  });
});

describe('static as the IPAM of bridge (real kernel, in-process delegation)', () => {
  assert.ok(
    haveStatic && info.plugins.includes('bridge'),
    'bridge/static not built' + ' (npm test runs npm run build before the tests)',
  );
  test('the container gets the static v4 + v6 addresses, gateway routes and extra routes; DEL removes them', () => {
    const sb = createSandbox();
    try {
      const rt = runtime(ensureLinks(info.default, info), sb.host.name);
      const list: ConfList = {
        cniVersion: '1.1.0',
        name: 'static-br',
        plugins: [
          {
            type: 'bridge',
            bridge: 'cnist0',
            isGateway: true,
            ipam: {
              type: 'static',
              addresses: [
                { address: '10.88.7.5/24', gateway: '10.88.7.1' },
                { address: 'fd88:7::5/64', gateway: 'fd88:7::1' },
              ],
              routes: [{ dst: '0.0.0.0/0' }, { dst: '198.51.100.0/24', gw: '10.88.7.254' }, { dst: '::/0' }],
              dns: { nameservers: ['10.88.7.53'] },
            },
          },
        ],
      };
      const conf = { containerId: 'ctr-static-br', netns: sb.container.path, ifName: 'eth0' };
      const r = rt.addNetworkList(list, conf);
      assert.deepEqual(
        (r.ips as Array<{ address: string; gateway?: string; interface?: number }>).map((i) => [
          i.address,
          i.gateway,
          i.interface,
        ]),
        [
          ['10.88.7.5/24', '10.88.7.1', 2],
          ['fd88:7::5/64', 'fd88:7::1', 2],
        ],
      );
      assert.deepEqual(r.dns, { nameservers: ['10.88.7.53'] });
      const addrs = JSON.parse(
        sb.exec('ip', ['-json', 'addr', 'show', 'dev', 'eth0'], { ns: 'container' }).stdout,
      ) as Array<{ addr_info: Array<{ local: string; prefixlen: number; scope: string }> }>;
      const global = (addrs[0]?.addr_info ?? [])
        .filter((a) => a.scope === 'global')
        .map((a) => `${a.local}/${a.prefixlen}`);
      assert.deepEqual(global.sort(), ['10.88.7.5/24', 'fd88:7::5/64']);
      const routes4 = sb.exec('ip', ['-4', 'route', 'show'], { ns: 'container' }).stdout;
      assert.match(routes4, /^default via 10\.88\.7\.1 dev eth0/m);
      assert.match(routes4, /^198\.51\.100\.0\/24 via 10\.88\.7\.254 dev eth0/m);
      assert.match(
        sb.exec('ip', ['-6', 'route', 'show'], { ns: 'container' }).stdout,
        /^default via fd88:7::1 dev eth0/m,
      );
      const hostAddrs = sb.exec('ip', ['-o', 'addr', 'show', 'dev', 'cnist0'], { ns: 'host' }).stdout;
      assert.match(hostAddrs, /inet 10\.88\.7\.1\/24/);
      assert.match(hostAddrs, /inet6 fd88:7::1\/64/);
      rt.checkNetworkList(list, conf);
      rt.delNetworkList(list, conf);
      const gone = sb.exec('ip', ['link', 'show', 'dev', 'eth0'], { ns: 'container', check: false });
      assert.notEqual(gone.status, 0, 'container eth0 removed');
    } finally {
      sb.destroy();
    }
  });
});

describe('static side by side with the Go reference', () => {
  assert.ok(haveStatic, 'static not built' + ' (npm test runs npm run build before the tests)');
  assert.ok(
    goStatic,
    `${GO_CNI}/static not installed` + ' (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  const dir = ensureLinks(info.default, info);

  for (const v of GO_VERSIONS) {
    test(`same ADD result and CHECK/DEL outcome (${v})`, () => {
      const list = staticList(v, FULL);
      const conf = rtConf();
      const ours = runtime(dir);
      const go = runtime(GO_CNI);
      const a = ours.addNetworkList(list, conf);
      const b = go.addNetworkList(list, conf);
      assert.deepEqual(normalise(a), normalise(b));
      if (canCheck(v)) {
        ours.checkNetworkList(list, conf);
        go.checkNetworkList(list, conf);
      }
      ours.delNetworkList(list, conf);
      go.delNetworkList(list, conf);
    });
  }

  test('same results for CNI_ARGS, args.cni.ips and runtimeConfig.ips (1.0.0)', () => {
    const ipam = { addresses: [{ address: '10.10.0.9/24' }], routes: [{ dst: '0.0.0.0/0' }] };
    const cniArgs: Array<[string, string]> = [
      ['IP', '10.10.3.1/24, 11.11.0.1/24,fd00::3/64'],
      ['GATEWAY', '11.11.0.9,10.10.3.7'],
    ];
    const lists = [
      staticList('1.0.0', ipam),
      staticList('1.0.0', ipam, { args: { cni: { ips: ['10.10.0.2/24', '::ffff:10.1.2.3/120'] } } }),
      staticList('1.0.0', ipam, { capabilities: { ips: true }, args: { cni: { ips: ['10.10.0.2/24'] } } }),
    ];
    for (const list of lists) {
      const conf = rtConf({ args: cniArgs, capabilityArgs: { ips: ['10.10.0.1/24', '2001:DB8::5/64'] } });
      const a = runtime(dir).addNetworkList(list, conf);
      const b = runtime(GO_CNI).addNetworkList(list, conf);
      assert.deepEqual(normalise(a), normalise(b), JSON.stringify(list.plugins[0]));
    }
  });

  test('same CHECK failure message for a different gateway', () => {
    const list = staticList('1.0.0', FULL);
    const conf = rtConf();
    const rt = runtime(dir);
    const result = rt.addNetworkList(list, conf);
    const cf = {
      ...rt.buildConfig(list, list.plugins[0]!, conf),
      prevResult: { ...result, ips: [{ address: '10.10.0.1/24', gateway: '10.10.0.2' }] },
    };
    const a = catchErr(() => rt.invoke('static', 'CHECK', cf, conf));
    const b = catchErr(() => runtime(GO_CNI).invoke('static', 'CHECK', cf, conf));
    assert.equal(a.cni?.msg, b.cni?.msg);
    assert.equal(a.cni?.code, b.cni?.code);
  });

  for (const [name, ver, ipam, extra, args, code, msg, goMsg] of BAD) {
    test(`same error: ${name}`, () => {
      const conf = badConf(ver, ipam, extra);
      const a = catchErr(() => runtime(dir).invoke('static', 'ADD', conf, rtConf({ args })));
      const b = catchErr(() => runtime(GO_CNI).invoke('static', 'ADD', conf, rtConf({ args })));
      assert.equal(b.exitCode, 1);
      assert.equal(a.cni?.msg, msg);
      assert.equal(b.cni?.msg, goMsg ?? msg, 'Go message');
      // configuration errors: cnikit answers 7 (invalid network config) where the reference answers 999
      assert.equal(b.cni?.code, code === 7 ? 999 : code, 'Go code');
    });
  }

  test('1.1.0: cnikit answers, the reference (≤ 1.0.0) rejects the version', () => {
    const list = staticList('1.1.0', FULL);
    assert.deepEqual(runtime(dir).addNetworkList(list, rtConf()), fullExpected('1.1.0'));
    const b = catchErr(() => runtime(GO_CNI).addNetworkList(list, rtConf()));
    assert.equal(b.cni?.code, 1);
    assert.equal(b.cni?.msg, 'incompatible CNI versions');
  });
});
