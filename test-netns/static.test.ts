/**
 * static IPAM through the compiled executables, driven like a runtime: ADD for every spec version (v4 + v6
 * addresses with gateways, routes, DNS), CNI_ARGS IP/GATEWAY, the address precedence (runtimeConfig.ips > args.cni.ips
 * > ipam.addresses + CNI_ARGS IP), CHECK and DEL against the cached result, every bad-input error (spec error object,
 * code, exact message), static as the delegated IPAM of bridge on the real kernel, and the same calls side by side
 * with the Go reference (/usr/lib/cni/static, spec ≤ 1.0.0).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject, PluginError, type RuntimeConf } from '@cnikit/libcni';
import { toCurrent } from '@cnikit/skel';
import {
  type CniCommand,
  type CniOutcome,
  catchError,
  cniCall,
  expectCniError,
  expectOk,
  tempDir,
  withSandbox,
} from '@cnikit/testing';
import {
  type Backend,
  ensureBuilt,
  ensureLinks,
  GO_CNI,
  goAvailable,
  runtime,
  testBackends,
} from './dist.ts';

const info = ensureBuilt();
const other: Backend = info.default === 'bun' ? 'sea' : 'bun';
const scratch = tempDir('bb-static');
after(() => scratch.remove());
const haveStatic = info.plugins.includes('static');
const goStatic = goAvailable('static');

const ALL = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];
const GO_VERSIONS = ALL.filter((v) => v !== '1.1.0'); // Debian's 1.1.1 reference supports up to 1.0.0
const canCheck = (v: string) => v === '0.4.0' || v.startsWith('1.');
const legacy = (v: string) => v === '0.1.0' || v === '0.2.0';
// static never enters the namespace; a path that does not exist proves it
const NETNS = '/run/netns/cnikit-static-never-opened';

// biome-ignore lint/suspicious/noExplicitAny: JSON under test
type Json = Record<string, any>;

let seq = 0;
/** The runtime (every plugin exec'd from `path`), with a fresh result cache. */
const runtimeFor = (path: string) => runtime(join(scratch.path, `cache-${seq++}`), path);

function rtConf(extra: Partial<RuntimeConf> = {}): RuntimeConf {
  return { containerId: `ctr-static-${seq++}`, netns: NETNS, ifName: 'eth0', ...extra };
}

/** A conflist with one static plugin, as a plain object (`list()` parses it like a runtime). */
function staticList(cniVersion: string, ipam: Json, extra: Json = {}) {
  return {
    cniVersion,
    name: 'static-net',
    plugins: [{ type: 'static', ...extra, ipam: { type: 'static', ...ipam } } as Json],
  };
}
const list = (obj: ReturnType<typeof staticList>) => confListFromObject(obj);

/** A result as the runtime sees it (JSON, as Go marshals it). */
const plain = (r: unknown): Json => JSON.parse(JSON.stringify(r));

/**
 * The configuration a runtime gives the list's only plugin (Go buildOneConfig: name, cniVersion, prevResult and
 * runtimeConfig for the declared capabilities).
 */
function pluginConf(obj: ReturnType<typeof staticList>, rt?: RuntimeConf, prevResult?: Json): Json {
  const p = obj.plugins[0]!;
  const conf: Json = { ...p, name: obj.name, cniVersion: obj.cniVersion };
  if (prevResult) conf.prevResult = prevResult;
  const rc: Json = {};
  for (const [cap, on] of Object.entries((p.capabilities ?? {}) as Record<string, boolean>)) {
    if (on && rt?.capabilityArgs && cap in rt.capabilityArgs) rc[cap] = rt.capabilityArgs[cap];
  }
  if (Object.keys(rc).length) conf.runtimeConfig = rc;
  return conf;
}

/** One call of the static executable in `dir`, with the environment a runtime gives it for `rt`. */
function invoke(dir: string, command: CniCommand, conf: unknown, rt: RuntimeConf): Promise<CniOutcome> {
  return cniCall({ binary: join(dir, 'static') }, command, conf, {
    containerId: rt.containerId,
    netns: rt.netns,
    ifName: rt.ifName,
    args: (rt.args ?? []).map(([k, v]) => `${k}=${v}`).join(';'),
    path: dir,
  });
}

/** A spec error object on stdout, exit status 1, no stack trace; returns it. */
function assertCniError(r: CniOutcome, code: number, msg: string) {
  assert.equal(r.code, 1, `exit status (stdout: ${r.stdout})`);
  return expectCniError(r, code, msg);
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
      test(`ADD (v4 + v6, gateways, routes, dns) / CHECK / DEL / DEL again, cniVersion ${v}`, async () => {
        const rt = runtimeFor(dir);
        const obj = staticList(v, FULL);
        const conf = rtConf();
        // exactly as the plugin prints it, and as the runtime reads it
        assert.deepEqual(expectOk(await invoke(dir, 'ADD', pluginConf(obj, conf), conf)), fullExpected(v));
        const raw = await rt.addNetworkListRaw(list(obj), conf);
        const result = plain(raw);
        assert.deepEqual(result, fullExpected(v));
        assert.deepEqual(
          plain(await rt.getNetworkListCachedResult(list(obj), conf)),
          plain(toCurrent(raw)),
          'cached like libcni',
        );
        if (canCheck(v)) await rt.checkNetworkList(list(obj), conf);
        // DEL prints nothing and succeeds; static keeps no state, so DEL again (and DEL with an unknown ID) too
        const del = await invoke(dir, 'DEL', pluginConf(obj, conf, canCheck(v) ? result : undefined), conf);
        assert.equal(del.code, 0, del.stdout);
        assert.equal(del.stdout, '');
        await rt.delNetworkList(list(obj), conf);
        assert.equal(await rt.getNetworkListCachedResult(list(obj), conf), undefined);
        await rt.delNetworkList(list(obj), rtConf({ containerId: 'never-added', netns: '' }));
      });
    }
  });
}

suite(info.default, ALL);
// the other back-end only where the run drives both (npm test; the inner loop builds and tests one)
if (testBackends().includes(other)) suite(other, ['0.2.0', '1.1.0']);

describe('static: CNI_ARGS, precedence, CHECK, errors (default back-end)', () => {
  assert.ok(haveStatic, 'static not built' + ' (npm test runs npm run build before the tests)');
  const dir = ensureLinks(info.default, info);

  for (const v of ['0.2.0', '1.0.0', '1.1.0']) {
    test(`CNI_ARGS IP and GATEWAY (${v}): appended to ipam.addresses; GATEWAY only where the subnet contains it`, async () => {
      const rt = runtimeFor(dir);
      const args: Array<[string, string]> = [
        ['IgnoreUnknown', '1'],
        ['K8S_POD_NAME', 'ignored'],
        ['IP', '10.10.3.1/24, fd00:3::1/64'],
        ['GATEWAY', '10.10.3.254,fd00:3::fe,192.0.2.1'],
      ];
      if (legacy(v)) {
        // one address per family in 0.1.0/0.2.0: CNI_ARGS only
        const r = plain(
          await rt.addNetworkListRaw(
            list(staticList(v, { routes: [{ dst: '0.0.0.0/0' }] })),
            rtConf({ args }),
          ),
        );
        assert.deepEqual(r, {
          cniVersion: v,
          ip4: { ip: '10.10.3.1/24', gateway: '10.10.3.254', routes: [{ dst: '0.0.0.0/0' }] },
          ip6: { ip: 'fd00:3::1/64', gateway: 'fd00:3::fe' },
          dns: {},
        });
        return;
      }
      const l = list(
        staticList(v, {
          addresses: [{ address: '10.10.0.1/24' }],
          routes: [{ dst: '0.0.0.0/0' }],
        }),
      );
      const conf = rtConf({ args });
      const r = plain(await rt.addNetworkListRaw(l, conf));
      // the config address keeps no gateway: CNI_ARGS GATEWAY applies to CNI_ARGS addresses only (reference quirk)
      assert.deepEqual(ipsOf(r), [
        ['10.10.0.1/24'],
        ['10.10.3.1/24', '10.10.3.254'],
        ['fd00:3::1/64', 'fd00:3::fe'],
      ]);
      assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }]);
      await rt.checkNetworkList(l, conf);
      await rt.delNetworkList(l, conf);
    });
  }

  test('precedence: runtimeConfig.ips (capability) > args.cni.ips > ipam.addresses + CNI_ARGS IP', async () => {
    const rt = runtimeFor(dir);
    const ipam = { addresses: [{ address: '10.10.0.9/24', gateway: '10.10.0.254' }] };
    const argsIps = { args: { cni: { ips: ['10.10.0.2/24', 'fd00::2/64'] } } };
    const cniArgs: Array<[string, string]> = [
      ['IP', '10.10.0.3/24'],
      ['GATEWAY', '10.10.0.254'],
    ];
    const capabilityArgs = { ips: ['10.10.0.1/24', 'fd00::1/64'] };
    const withCap = list(staticList('1.1.0', ipam, { capabilities: { ips: true }, ...argsIps }));
    const r1 = plain(await rt.addNetworkListRaw(withCap, rtConf({ args: cniArgs, capabilityArgs })));
    assert.deepEqual(ipsOf(r1), [['10.10.0.1/24'], ['fd00::1/64']], 'runtimeConfig.ips replaces everything');
    // the same list without the capability: the runtime does not pass runtimeConfig, args.cni.ips wins
    const noCap = list(staticList('1.1.0', ipam, argsIps));
    const r2 = plain(await rt.addNetworkListRaw(noCap, rtConf({ args: cniArgs, capabilityArgs })));
    assert.deepEqual(
      ipsOf(r2),
      [['10.10.0.2/24'], ['fd00::2/64']],
      'args.cni.ips replaces config + CNI_ARGS',
    );
    const r3 = plain(
      await rt.addNetworkListRaw(list(staticList('1.1.0', ipam)), rtConf({ args: cniArgs, capabilityArgs })),
    );
    assert.deepEqual(ipsOf(r3), [
      ['10.10.0.9/24', '10.10.0.254'],
      ['10.10.0.3/24', '10.10.0.254'],
    ]);
    // an empty runtimeConfig.ips does not replace anything
    const r4 = plain(await rt.addNetworkListRaw(withCap, rtConf({ capabilityArgs: { ips: [] } })));
    assert.deepEqual(ipsOf(r4), [['10.10.0.2/24'], ['fd00::2/64']]);
  });

  test('CHECK: matching prevResult passes, a different gateway fails, a missing prevResult fails', async () => {
    const rt = runtimeFor(dir);
    const obj = staticList('1.0.0', FULL);
    const conf = rtConf();
    const result = plain(await rt.addNetworkListRaw(list(obj), conf));
    await rt.checkNetworkList(list(obj), conf);
    const base = pluginConf(obj, conf);
    const wrongGw = {
      ...result,
      ips: [{ address: '10.10.0.1/24', gateway: '10.10.0.1' }, ...(result.ips as Json[]).slice(1)],
    };
    assertCniError(
      await invoke(dir, 'CHECK', { ...base, prevResult: wrongGw }, conf),
      999,
      'static: Failed to match addr 10.10.0.1 on interface eth0',
    );
    // an address the prevResult does not carry is not an error (like the reference)
    expectOk(await invoke(dir, 'CHECK', { ...base, prevResult: { ...result, ips: [] } }, conf));
    assertCniError(await invoke(dir, 'CHECK', base, conf), 999, 'Required prevResult missing');
    await rt.delNetworkList(list(obj), conf);
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
    test(name, async () => {
      assertCniError(await invoke(dir, 'ADD', badConf(ver, ipam, extra), rtConf({ args })), code, msg);
    });
  }
  test('stdin that is not JSON', async () => {
    assertCniError(
      await invoke(dir, 'ADD', 'not json', rtConf({ containerId: 'x' })),
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
  test('the container gets the static v4 + v6 addresses, gateway routes and extra routes; DEL removes them', async () => {
    // the plugins run as processes from this thread, moved into the sandbox's host namespace
    await withSandbox(
      async (sb) => {
        const rt = runtimeFor(ensureLinks(info.default, info));
        const l = confListFromObject({
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
                routes: [
                  { dst: '0.0.0.0/0' },
                  { dst: '198.51.100.0/24', gw: '10.88.7.254' },
                  { dst: '::/0' },
                ],
                dns: { nameservers: ['10.88.7.53'] },
              },
            },
          ],
        });
        const conf = { containerId: 'ctr-static-br', netns: sb.container.path, ifName: 'eth0' };
        const r = plain(await rt.addNetworkListRaw(l, conf));
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
        await rt.checkNetworkList(l, conf);
        await rt.delNetworkList(l, conf);
        const gone = sb.exec('ip', ['link', 'show', 'dev', 'eth0'], { ns: 'container', check: false });
        assert.notEqual(gone.status, 0, 'container eth0 removed');
      },
      { enterHost: true },
    );
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
    test(`same ADD result and CHECK/DEL outcome (${v})`, async () => {
      const obj = staticList(v, FULL);
      const conf = rtConf();
      // as printed by each plugin
      const printed = async (d: string) => expectOk(await invoke(d, 'ADD', pluginConf(obj, conf), conf));
      assert.deepEqual(normalise(await printed(dir)), normalise(await printed(GO_CNI)));
      // and through the runtime: ADD, CHECK against the cache, DEL
      const ours = runtimeFor(dir);
      const go = runtimeFor(GO_CNI);
      const a = plain(await ours.addNetworkListRaw(list(obj), conf));
      const b = plain(await go.addNetworkListRaw(list(obj), conf));
      assert.deepEqual(normalise(a), normalise(b));
      if (canCheck(v)) {
        await ours.checkNetworkList(list(obj), conf);
        await go.checkNetworkList(list(obj), conf);
      }
      await ours.delNetworkList(list(obj), conf);
      await go.delNetworkList(list(obj), conf);
    });
  }

  test('same results for CNI_ARGS, args.cni.ips and runtimeConfig.ips (1.0.0)', async () => {
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
    for (const obj of lists) {
      const conf = rtConf({ args: cniArgs, capabilityArgs: { ips: ['10.10.0.1/24', '2001:DB8::5/64'] } });
      const printed = async (d: string) => expectOk(await invoke(d, 'ADD', pluginConf(obj, conf), conf));
      assert.deepEqual(
        normalise(await printed(dir)),
        normalise(await printed(GO_CNI)),
        JSON.stringify(obj.plugins[0]),
      );
      const a = plain(await runtimeFor(dir).addNetworkListRaw(list(obj), conf));
      const b = plain(await runtimeFor(GO_CNI).addNetworkListRaw(list(obj), conf));
      assert.deepEqual(normalise(a), normalise(b), JSON.stringify(obj.plugins[0]));
    }
  });

  test('same CHECK failure message for a different gateway', async () => {
    const obj = staticList('1.0.0', FULL);
    const conf = rtConf();
    const result = plain(await runtimeFor(dir).addNetworkListRaw(list(obj), conf));
    const cf = {
      ...pluginConf(obj, conf),
      prevResult: { ...result, ips: [{ address: '10.10.0.1/24', gateway: '10.10.0.2' }] },
    };
    const a = expectCniError(await invoke(dir, 'CHECK', cf, conf));
    const b = expectCniError(await invoke(GO_CNI, 'CHECK', cf, conf));
    assert.equal(a.msg, b.msg);
    assert.equal(a.code, b.code);
  });

  for (const [name, ver, ipam, extra, args, code, msg, goMsg] of BAD) {
    test(`same error: ${name}`, async () => {
      const conf = badConf(ver, ipam, extra);
      const a = expectCniError(await invoke(dir, 'ADD', conf, rtConf({ args })));
      const rb = await invoke(GO_CNI, 'ADD', conf, rtConf({ args }));
      assert.equal(rb.code, 1);
      const b = rb.json as { code: number; msg: string };
      assert.equal(a.msg, msg);
      assert.equal(b.msg, goMsg ?? msg, 'Go message');
      // configuration errors: cnikit answers 7 (invalid network config) where the reference answers 999
      assert.equal(b.code, code === 7 ? 999 : code, 'Go code');
    });
  }

  test('1.1.0: cnikit answers, the reference (≤ 1.0.0) rejects the version', async () => {
    const l = list(staticList('1.1.0', FULL));
    assert.deepEqual(plain(await runtimeFor(dir).addNetworkListRaw(l, rtConf())), fullExpected('1.1.0'));
    const b = await catchError<PluginError>(() => runtimeFor(GO_CNI).addNetworkList(l, rtConf()));
    assert.ok(b instanceof PluginError, String(b));
    assert.equal(b.code, 1);
    assert.equal(b.msg, 'incompatible CNI versions');
  });
});
