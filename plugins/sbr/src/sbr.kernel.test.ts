import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  type CniCommand,
  type CniTarget,
  cniCall,
  createNamedNetns,
  deleteNamedNetns,
  type NamedNetns,
  sandboxForFile,
} from '@cnikit/testing';
import { plugin } from './index.ts';

const GO = '/usr/lib/cni/sbr';
const env = sandboxForFile();

function ip(ns: string, args: string[]): string {
  const r = spawnSync('ip', ['-n', ns, ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Rules and routes of every table, without what differs between two namespaces (ifindex). */
function routingState(ns: string): { rules: unknown; routes: unknown } {
  const rules = JSON.parse(ip(ns, ['-j', 'rule', 'show'])).concat(
    JSON.parse(ip(ns, ['-6', '-j', 'rule', 'show'])),
  );
  const routes = [4, 6].flatMap((f) =>
    (JSON.parse(ip(ns, [`-${f}`, '-j', 'route', 'show', 'table', 'all'])) as Array<Record<string, unknown>>)
      .filter((r) => r.table !== 'local' && r.dst !== 'multicast' && !String(r.dst).startsWith('ff00'))
      .map((r) => ({ ...r, expires: undefined })),
  );
  return { rules, routes };
}

/** A container namespace with eth0 (veth to the sandbox host) as a main plugin would leave it. */
function container(): NamedNetns {
  const c = createNamedNetns('cnikit-sbr');
  const peer = `sb${Math.random().toString(16).slice(2, 10)}`;
  ip(env.sb.host.name, ['link', 'add', peer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', c.name]);
  ip(c.name, ['link', 'set', 'eth0', 'address', '0a:58:0a:09:00:05', 'up']);
  ip(c.name, ['addr', 'add', '10.9.0.5/24', 'dev', 'eth0']);
  ip(c.name, ['addr', 'add', 'fd00:9::5/64', 'dev', 'eth0', 'nodad']);
  ip(c.name, ['route', 'add', 'default', 'via', '10.9.0.1', 'dev', 'eth0']);
  ip(c.name, ['route', 'add', '192.168.77.0/24', 'via', '10.9.0.254', 'dev', 'eth0']);
  ip(c.name, ['-6', 'route', 'add', 'default', 'via', 'fd00:9::1', 'dev', 'eth0']);
  return c;
}

const prevResult = (netns: string) => ({
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'cni0', mac: '0a:00:00:00:00:01' },
    { name: 'eth0', mac: '0a:58:0a:09:00:05', sandbox: netns },
  ],
  ips: [
    { interface: 1, address: '10.9.0.5/24', gateway: '10.9.0.1' },
    { interface: 1, address: 'fd00:9::5/64', gateway: 'fd00:9::1' },
  ],
});

const conf = (netns: string, extra: object = {}) => ({
  cniVersion: '1.0.0',
  name: 'sbrnet',
  type: 'sbr',
  ...extra,
  prevResult: prevResult(netns),
});

async function call(target: CniTarget, cmd: CniCommand, config: object | string, netns: string) {
  return cniCall(target, cmd, config, { netns, containerId: 'sbr1', ifName: 'eth0' });
}

describe('sbr against the real kernel', () => {
  assert.ok(
    existsSync(GO),
    'Go reference plugins not installed in /usr/lib/cni (containernetworking-plugins)',
  );

  test('the same rules and routes as the Go sbr; DEL by the other implementation', async () => {
    const a = container();
    const b = container();
    try {
      const before = routingState(a.name);
      const ours = await call(plugin, 'ADD', conf(a.path), a.path);
      assert.equal(ours.code, 0, ours.stdout + ours.stderr);
      assert.deepEqual(ours.json, prevResult(a.path), 'prevResult passed through');
      const go = await call({ binary: GO }, 'ADD', conf(b.path), b.path);
      assert.equal(go.code, 0, go.stdout + go.stderr);
      const after = routingState(a.name);
      assert.deepEqual(after, routingState(b.name));
      assert.notDeepEqual(after, before);
      assert.equal(ip(a.name, ['route', 'show', 'dev', 'eth0']), '', 'main table emptied of eth0 routes');
      assert.match(ip(a.name, ['rule', 'show']), /from 10\.9\.0\.5 lookup 100/);
      assert.match(ip(a.name, ['-6', 'rule', 'show']), /from fd00:9::5 lookup 101/);
      assert.match(ip(a.name, ['route', 'show', 'table', '100']), /default via 10\.9\.0\.1 dev eth0/);
      assert.match(ip(a.name, ['-6', 'route', 'show', 'table', '101']), /default via fd00:9::1 dev eth0/);
      const check = await call(plugin, 'CHECK', conf(a.path), a.path);
      assert.equal(check.code, 0, check.stdout);
      // DEL crosses over: ours removes Go's rules and the reverse
      const delOurs = await call(plugin, 'DEL', conf(b.path), b.path);
      assert.equal(delOurs.code, 0, delOurs.stdout);
      const delGo = await call({ binary: GO }, 'DEL', conf(a.path), a.path);
      assert.equal(delGo.code, 0, delGo.stdout);
      for (const ns of [a.name, b.name]) assert.doesNotMatch(ip(ns, ['rule', 'show']), /10\.9\.0\.5/);
      assert.deepEqual(routingState(a.name).rules, before.rules);
      assert.deepEqual(routingState(b.name).rules, before.rules);
    } finally {
      deleteNamedNetns(a.name);
      deleteNamedNetns(b.name);
    }
  });

  // The keys below are newer than Debian's Go sbr (1.1.1): the expected state follows the reference at HEAD.
  const rulesAndRoutes = (ns: string) =>
    [
      ip(ns, ['rule', 'show']),
      ip(ns, ['-6', 'rule', 'show']),
      ip(ns, ['-4', 'route', 'show', 'table', 'all']),
      ip(ns, ['-6', 'route', 'show', 'table', 'all']),
    ]
      .join('')
      .split('\n')
      .filter(
        (l) => l && !/\b(local|broadcast|multicast)\b/.test(l) && !/lookup (local|main|default)$/.test(l),
      )
      .map((l) => l.replace(/\s+linkdown|\s+pref medium|\s+$/g, ''));

  for (const [label, extra, expected] of [
    [
      'table: 300 (the rules only, routes untouched)',
      { table: 300 },
      [
        /^\d+:\tfrom 10\.9\.0\.5 lookup 300$/,
        /^\d+:\tfrom fd00:9::5 lookup 300$/,
        /^default via 10\.9\.0\.1 dev eth0$/,
        /^10\.9\.0\.0\/24 dev eth0 proto kernel scope link src 10\.9\.0\.5$/,
        /^192\.168\.77\.0\/24 via 10\.9\.0\.254 dev eth0$/,
        /^fd00:9::\/64 dev eth0 proto kernel metric 256$/,
        /^default via fd00:9::1 dev eth0 metric 1024$/,
      ],
    ],
    [
      'addSourceHints (subnet routes stay in main with a source hint, the others go)',
      { addSourceHints: true },
      [
        /^\d+:\tfrom 10\.9\.0\.5 lookup 100$/,
        /^\d+:\tfrom fd00:9::5 lookup 101$/,
        /^default via 10\.9\.0\.1 dev eth0 table 100$/,
        /^10\.9\.0\.0\/24 dev eth0 table 100 proto kernel scope link src 10\.9\.0\.5$/,
        /^192\.168\.77\.0\/24 via 10\.9\.0\.254 dev eth0 table 100$/,
        /^10\.9\.0\.0\/24 dev eth0 scope link src 10\.9\.0\.5$/,
        /^fd00:9::\/64 dev eth0 table 100 proto kernel metric 256$/,
        /^fd00:9::\/64 dev eth0 table 101 proto kernel metric 256$/,
        /^default via fd00:9::1 dev eth0 table 101 metric 1024$/,
        /^fd00:9::\/64 dev eth0 src fd00:9::5 metric 1024$/,
      ],
    ],
    [
      'gateways (static gateways per family win over the default routes)',
      { gateways: ['10.9.0.254', 'fd00:9::fe'] },
      [
        /^\d+:\tfrom 10\.9\.0\.5 lookup 100$/,
        /^\d+:\tfrom fd00:9::5 lookup 101$/,
        /^default via 10\.9\.0\.254 dev eth0 table 100$/,
        /^10\.9\.0\.0\/24 dev eth0 table 100 proto kernel scope link src 10\.9\.0\.5$/,
        /^192\.168\.77\.0\/24 via 10\.9\.0\.254 dev eth0 table 100$/,
        /^fd00:9::\/64 dev eth0 table 100 proto kernel metric 256$/,
        /^fd00:9::\/64 dev eth0 table 101 proto kernel metric 256$/,
        /^default via fd00:9::fe dev eth0 table 101 metric 1024$/,
      ],
    ],
  ] as const) {
    test(`${label}; DEL removes the rules`, async () => {
      const a = container();
      try {
        const before = routingState(a.name).rules;
        const r = await call(plugin, 'ADD', conf(a.path, extra), a.path);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const lines = rulesAndRoutes(a.name);
        assert.equal(lines.length, expected.length, lines.join('\n'));
        for (const re of expected)
          assert.ok(
            lines.some((l) => re.test(l)),
            `${re} not in:\n${lines.join('\n')}`,
          );
        assert.equal((await call(plugin, 'CHECK', conf(a.path, extra), a.path)).code, 0);
        assert.equal((await call(plugin, 'DEL', conf(a.path, extra), a.path)).code, 0);
        assert.deepEqual(routingState(a.name).rules, before);
      } finally {
        deleteNamedNetns(a.name);
      }
    });
  }

  test('a second interface in the same namespace gets the next free table', async () => {
    const a = container();
    try {
      ip(a.name, ['link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'net1p']);
      ip(a.name, ['link', 'set', 'net1', 'up']);
      ip(a.name, ['addr', 'add', '10.19.0.5/24', 'dev', 'net1']);
      assert.equal((await call(plugin, 'ADD', conf(a.path), a.path)).code, 0);
      const second = {
        ...conf(a.path),
        prevResult: {
          cniVersion: '1.0.0',
          interfaces: [{ name: 'net1', sandbox: a.path }],
          ips: [{ interface: 0, address: '10.19.0.5/24', gateway: '10.19.0.1' }],
        },
      };
      const r = await cniCall(plugin, 'ADD', second, { netns: a.path, containerId: 'sbr1', ifName: 'net1' });
      assert.equal(r.code, 0, r.stdout);
      const rules = ip(a.name, ['rule', 'show']);
      assert.match(rules, /from 10\.9\.0\.5 lookup 100/);
      assert.match(rules, /from 10\.19\.0\.5 lookup 102/); // 101 went to fd00:9::5
      assert.match(ip(a.name, ['route', 'show', 'table', '102']), /default via 10\.19\.0\.1 dev net1/);
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('a failed ADD leaves the namespace as it was (the reference leaves its rule behind)', async () => {
    const a = container();
    try {
      const before = routingState(a.name);
      // an IPv6 gateway that is not a neighbour address of the link: the kernel refuses the default route
      const r = await call(plugin, 'ADD', conf(a.path, { gateways: ['10.9.0.1', 'ff02::1'] }), a.path);
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json.code, 999);
      assert.match(r.json.msg, /^Failed to add default route to ff02::1: /);
      assert.deepEqual(routingState(a.name), before);
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('CHECK fails when a source rule is gone', async () => {
    const a = container();
    try {
      assert.equal((await call(plugin, 'ADD', conf(a.path), a.path)).code, 0);
      ip(a.name, ['rule', 'del', 'from', '10.9.0.5', 'lookup', '100']);
      const r = await call(plugin, 'CHECK', conf(a.path), a.path);
      assert.equal(r.code, 1);
      assert.equal(r.json.code, 999);
      assert.equal(r.json.msg, 'sbr: no source rule for 10.9.0.5/32 on eth0');
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('CHECK fails when the routes ADD moved into its table are gone (SPEC.md §2 CHECK), names the table', async () => {
    const a = container();
    try {
      assert.equal((await call(plugin, 'ADD', conf(a.path), a.path)).code, 0);
      assert.equal((await call(plugin, 'CHECK', conf(a.path), a.path)).code, 0);
      assert.match(ip(a.name, ['route', 'show', 'table', '100']), /default via 10\.9\.0\.1 dev eth0/);
      ip(a.name, ['route', 'del', 'default', 'table', '100']);
      const r = await call(plugin, 'CHECK', conf(a.path), a.path);
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json.code, 999);
      assert.equal(
        r.json.msg,
        'sbr: no default route via 10.9.0.1 in table 100 (the table of 10.9.0.5/32) on eth0',
      );
      // the IPv6 one alone
      ip(a.name, ['route', 'add', 'default', 'via', '10.9.0.1', 'dev', 'eth0', 'table', '100']);
      assert.equal((await call(plugin, 'CHECK', conf(a.path), a.path)).code, 0);
      ip(a.name, ['-6', 'route', 'del', 'default', 'table', '101']);
      const r6 = await call(plugin, 'CHECK', conf(a.path), a.path);
      assert.equal(
        r6.json.msg,
        'sbr: no default route via fd00:9::1 in table 101 (the table of fd00:9::5/128) on eth0',
      );
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('CHECK with `table` set looks at the rules only (ADD adds no routes then)', async () => {
    const a = container();
    try {
      assert.equal((await call(plugin, 'ADD', conf(a.path, { table: 500 }), a.path)).code, 0);
      const r = await call(plugin, 'CHECK', conf(a.path, { table: 500 }), a.path);
      assert.equal(r.code, 0, r.stdout);
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('DEL twice, DEL with the namespace gone, DEL without a namespace: success', async () => {
    const a = container();
    assert.equal((await call(plugin, 'ADD', conf(a.path), a.path)).code, 0);
    assert.equal((await call(plugin, 'DEL', conf(a.path), a.path)).code, 0);
    assert.equal((await call(plugin, 'DEL', conf(a.path), a.path)).code, 0);
    assert.doesNotMatch(ip(a.name, ['rule', 'show']), /10\.9\.0\.5/);
    deleteNamedNetns(a.name);
    const gone = await call(plugin, 'DEL', conf(a.path), a.path);
    assert.equal(gone.code, 0, gone.stdout);
    const none = await call(plugin, 'DEL', conf(a.path), '');
    assert.equal(none.code, 0, none.stdout);
  });

  test('every spec version: prevResult in the config version, passed through unchanged', async () => {
    for (const v of ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
      const a = container();
      try {
        const old = v === '0.1.0' || v === '0.2.0';
        const prev = old
          ? { cniVersion: v, ip4: { ip: '10.9.0.5/24', gateway: '10.9.0.1' } }
          : { ...prevResult(a.path), cniVersion: v };
        const r = await call(
          plugin,
          'ADD',
          { cniVersion: v, name: 'n', type: 'sbr', prevResult: prev },
          a.path,
        );
        assert.equal(r.code, 0, `${v}: ${r.stdout}`);
        assert.equal(r.json.cniVersion, v);
        if (old) assert.equal(r.json.ip4.ip, '10.9.0.5/24');
        else assert.equal(r.json.ips[0].address, '10.9.0.5/24');
        assert.match(ip(a.name, ['rule', 'show']), /from 10\.9\.0\.5 lookup 100/, v);
      } finally {
        deleteNamedNetns(a.name);
      }
    }
  });

  test('bad input: the reference texts, nothing changed', async () => {
    const a = container();
    try {
      const before = routingState(a.name);
      const cases: Array<[object | string, number, RegExp]> = [
        [
          { cniVersion: '1.0.0', name: 'n', type: 'sbr' },
          999,
          /^This plugin must be called as chained plugin$/,
        ],
        [
          { ...conf(a.path), prevResult: { cniVersion: '1.0.0', interfaces: [] } },
          999,
          /^No IP addresses supplied on interface: eth0$/,
        ],
        [
          conf(a.path, { gateways: ['1.1.1.1', '2.2.2.2', '::1'] }),
          999,
          /^gateways list cannot contain more than 2/,
        ],
        [conf(a.path, { gateways: ['nonsense'] }), 999, /^invalid static gateway IP address: nonsense$/],
        [
          conf(a.path, { gateways: ['10.9.0.1', '10.9.0.2'] }),
          999,
          /^gateways list contains multiple IPv4 addresses: 10\.9\.0\.1 and 10\.9\.0\.2$/,
        ],
        [conf(a.path, { table: 'x' }), 7, /^failed to parse network configuration: /],
        [
          conf(a.path, { table: 0 }),
          7,
          /^failed to parse network configuration: table: 0 is not a routing table/,
        ],
        [
          conf(a.path, { table: 255 }),
          7,
          /table: 255 is the kernel's local table: use 1-252 or 256 and above$/,
        ],
      ];
      for (const [c, code, msg] of cases) {
        const r = await call(plugin, 'ADD', c, a.path);
        assert.equal(r.code, 1, r.stdout);
        assert.equal(r.json.code, code, r.stdout);
        assert.match(r.json.msg, msg);
        assert.deepEqual(routingState(a.name), before);
      }
      // DEL of a configuration ADD refuses still succeeds and leaves the local/main rules alone
      for (const table of [0, 255]) {
        const r = await call(plugin, 'DEL', conf(a.path, { table }), a.path);
        assert.equal(r.code, 0, r.stdout);
        assert.deepEqual(routingState(a.name), before);
      }
    } finally {
      deleteNamedNetns(a.name);
    }
  });

  test('GC and STATUS succeed (no state outside the container)', async () => {
    const c = { cniVersion: '1.1.0', name: 'n', type: 'sbr' };
    assert.equal((await cniCall(plugin, 'GC', c)).code, 0);
    assert.equal((await cniCall(plugin, 'STATUS', c)).code, 0);
  });
});
