/**
 * Property-based hardening suite (issue "Hardening"): every plugin's dispatcher — each plugins/<name>/src/index.ts
 * found at run time, so plugins added later are included without touching this file — is driven in-process with
 * generated configurations and environments: malformed JSON and random bytes, wrong types for known keys, unknown and
 * missing versions, missing or odd CNI_* variables, long names, odd interface names, prevResults of the wrong shape.
 *
 * 1. Output contract, for every verb: exit 1 ⇒ stdout is exactly one spec error object (`code`, `msg`, optional
 *    `details`, `cniVersion` allowed) and nothing else; exit 0 ⇒ ADD printed one result in a known version, VERSION
 *    its version object, the other verbs nothing; no stack trace on stdout or stderr; no other exit code.
 * 2. A failed ADD changes nothing: kernel state of the sandbox's host and container namespaces (snapshot before and
 *    after) and every state directory (a temp dataDir for host-local, tuning, firewall) are unchanged. The only
 *    state a failed ADD may leave is what the reference also leaves and other attachments share: the bridge device a
 *    bridge config names (created before anything can fail, shared by every attachment and raced for by concurrent
 *    ADDs, so never removed by one of them), its gateway address and route, forwarding sysctls, and an empty store
 *    directory with its `lock` file (the lock must exist before it can be taken; it holds no state). And when the
 *    ADD fails after its IPAM delegate succeeded (bridge → host-local), the delegate's DEL releases the address but
 *    last_reserved_ip.N stays advanced, as in the reference: DEL cannot know the previous value, the file is a
 *    round-robin hint rather than an allocation, and moving it back on DEL would make the next ADD reuse an address
 *    just released, which the round-robin exists to avoid. host-local's own failed ADDs leave it unchanged.
 *
 * Everything runs inside a private sandbox (the test thread enters its host namespace; CNI_NETNS is only ever the
 * sandbox's container or host namespace or a path that is not a namespace), and every dataDir is pinned to a temp
 * directory, so generated input can never reach the machine's own namespace or state. IPAM delegations run in-process
 * (every discovered plugin is registered). Bounded: fixed numRuns (the whole file took 400-550 s in npm test on 2
 * cores, 3938 s under the kernel lab's TCG with 24 kernel runs per plugin: the before/after snapshots' process starts
 * dominate, so the lab runs 8); the seed is
 * printed at the start and with any failure (fast-check) and can be replayed with CNIKIT_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ALL_VERSIONS, invokeInProcess, type Plugin, parseResult, registerInProcess } from '@cnikit/skel';
import {
  diffSnapshots,
  formatDiff,
  type Snapshot,
  sandboxForFile,
  stableStateFile,
  tempDir,
  timeScale,
} from '@cnikit/testing';
import fc from 'fast-check';
import { ROOT } from './dist.ts';

const SEED = process.env.CNIKIT_PROPERTY_SEED
  ? Number(process.env.CNIKIT_PROPERTY_SEED)
  : Date.now() % 2 ** 31;
/** CNIKIT_PROPERTY_SCALE=<n> multiplies the runs for a longer local search. */
const SCALE = Math.max(1, Number(process.env.CNIKIT_PROPERTY_SCALE ?? 1) || 1);
const CONTRACT_RUNS = 200 * SCALE; // per plugin
// Per plugin. Under the kernel lab's TCG (timeScale() > 1) a third of them: there every run's before/after snapshots
// cost ~8x their host time, and the lab's purpose is the second kernel, not a longer search.
const KERNEL_RUNS = (timeScale() > 1 ? 8 : 24) * SCALE;

// ---------------------------------------------------------------------------------------------------------------
// Plugin discovery

const PLUGINS_DIR = join(ROOT, 'plugins');
const NAMES = readdirSync(PLUGINS_DIR)
  .filter((n) => existsSync(join(PLUGINS_DIR, n, 'src', 'index.ts')))
  .sort();
const loaded = new Map<string, Plugin>();
const importErrors = new Map<string, string>();
for (const name of NAMES) {
  try {
    const mod = (await import(pathToFileURL(join(PLUGINS_DIR, name, 'src', 'index.ts')).href)) as {
      plugin?: Plugin;
    };
    if (!mod.plugin || typeof mod.plugin !== 'object') throw new Error('it exports no `plugin` object');
    loaded.set(name, mod.plugin);
    registerInProcess(mod.plugin, { anyPath: true });
  } catch (err) {
    importErrors.set(name, err instanceof Error ? err.message : String(err));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sandbox and state directories

// the sandbox; this file's main thread lives in its host namespace while the tests run
const fixture = sandboxForFile({ enterHost: true });
const data = tempDir('property');
const DATA = join(data.path, 'data'); // every dataDir of every generated config
const CNI_PATH = join(data.path, 'bin'); // one empty file per plugin: delegations resolve, then run in-process
const NOT_NS = join(data.path, 'not-a-netns');

before(() => {
  mkdirSync(DATA);
  mkdirSync(CNI_PATH);
  for (const n of NAMES) writeFileSync(join(CNI_PATH, n), '', { mode: 0o755 });
  writeFileSync(NOT_NS, '');
  // no IPv6 duplicate address detection in the sandbox: a link-local address leaving its tentative state between two
  // snapshots would look like a change
  for (const ns of ['host', 'container'] as const) {
    for (const k of ['all', 'default'])
      fixture.sb.exec('sysctl', ['-qw', `net.ipv6.conf.${k}.accept_dad=0`], { ns });
  }
  containerEth0();
  process.stderr.write(`property.kernel.test: seed ${SEED} (replay with CNIKIT_PROPERTY_SEED=${SEED})\n`);
});

/** An interface the chained plugins (tuning, bandwidth, portmap, firewall) can find in the container: eth0. */
function containerEth0(): void {
  fixture.sb.exec('ip', ['link', 'del', 'eth0'], { ns: 'container', check: false });
  fixture.sb.exec('ip', ['link', 'del', 'eth0peer'], { ns: 'container', check: false });
  fixture.sb.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0peer'], {
    ns: 'container',
  });
  fixture.sb.exec('ip', ['link', 'set', 'eth0peer', 'up'], { ns: 'container' });
  fixture.sb.exec('ip', ['addr', 'add', '10.77.0.5/24', 'dev', 'eth0'], { ns: 'container' });
  fixture.sb.exec('ip', ['link', 'set', 'eth0', 'up'], { ns: 'container' });
}

after(() => data.remove());

// ---------------------------------------------------------------------------------------------------------------
// Generators

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Conf = { [k: string]: Json };

const prevResult = (): Json => ({
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'cnipb0' },
    { name: 'vethprop' },
    { name: 'eth0', sandbox: fixture.sb.container.path },
  ],
  ips: [{ address: '10.77.0.5/24', gateway: '10.77.0.1', interface: 2 }],
});

const ipam = (): Json => ({ type: 'host-local', ranges: [[{ subnet: '10.77.0.0/24' }]], dataDir: DATA });

/** A plausible configuration per plugin (unknown plugins get the common keys only). */
function template(plugin: string): Conf {
  const base: Conf = { cniVersion: '1.0.0', name: 'pnet', type: plugin };
  switch (plugin) {
    case 'bridge':
      return {
        ...base,
        bridge: 'cnipb0',
        isGateway: true,
        ipMasq: true,
        macspoofchk: true,
        mtu: 1400,
        ipam: ipam(),
      };
    case 'host-local':
      return { ...base, type: 'ipvlan', ipam: ipam() };
    case 'static':
      return { ...base, type: 'ipvlan', ipam: { type: 'static', addresses: [{ address: '10.78.0.2/24' }] } };
    case 'tuning':
      return {
        ...base,
        sysctl: { 'net.ipv4.conf.eth0.arp_notify': '1' },
        mtu: 1300,
        promisc: true,
        dataDir: DATA,
        prevResult: prevResult(),
      };
    case 'portmap':
      return {
        ...base,
        capabilities: { portMappings: true },
        runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: 'tcp' }] },
        snat: true,
        prevResult: prevResult(),
      };
    case 'bandwidth':
      return {
        ...base,
        ingressRate: 1_000_000,
        ingressBurst: 100_000,
        egressRate: 1_000_000,
        egressBurst: 100_000,
        prevResult: prevResult(),
      };
    case 'firewall':
      return { ...base, backend: 'iptables', dataDir: DATA, prevResult: prevResult() };
    default:
      return { ...base, prevResult: prevResult() };
  }
}

/** Every key path of a template (objects only; arrays are replaced as a whole), plus an unknown key. */
function paths(conf: Conf): string[][] {
  const out: string[][] = [['zzUnknownKey'], ['prevResult'], ['runtimeConfig'], ['args']];
  const walk = (o: Conf, prefix: string[]) => {
    for (const [k, v] of Object.entries(o)) {
      out.push([...prefix, k]);
      if (v && typeof v === 'object' && !Array.isArray(v) && k !== 'prevResult') walk(v, [...prefix, k]);
    }
  };
  walk(conf, []);
  return out;
}

const DELETE = Symbol('delete');
const longName = (n: number) => fc.constant('n'.repeat(n));
const oddString = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '.',
    '..',
    'a/b',
    '-x',
    'x'.repeat(16),
    'ü',
    '\u0000',
    'eth0 ',
    '10.77.0.0/33',
    'fd00::/130',
  ),
  longName(300),
  fc.string({ maxLength: 24 }),
);
const versionValue = fc.oneof(
  fc.constantFrom(...ALL_VERSIONS),
  fc.constantFrom('', '0.0.1', '0.5.0', '1.2.0', '9.9.9', '1.0', 'v1.0.0', '1.0.0 '),
);
const wrongShapeResult = fc.oneof(
  fc.constantFrom<Json>(
    null,
    'x',
    42,
    [],
    { ips: 'x' },
    { ips: [{ address: 'junk' }] },
    { ips: [{ address: '10.77.0.5/24', interface: 7 }] },
    { interfaces: [{ name: 1 }] },
    { interfaces: 'eth0', ips: [] },
    { cniVersion: '0.1.0', ip4: { ip: 'x' } },
    { cniVersion: 'nope', ips: [] },
    { routes: [{ dst: 'x' }] },
    { dns: { nameservers: 'x' } },
  ),
  fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
);
/** A value of the wrong type or an odd value of the right type for any key. */
const badValue = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom<Json>(null, true, false, 0, -1, 1.5, 65536, 2 ** 40, [], {}, [1, 'a'], {
      a: 1,
    }),
  },
  { weight: 3, arbitrary: oddString as fc.Arbitrary<Json> },
  { weight: 1, arbitrary: versionValue as fc.Arbitrary<Json> },
  { weight: 1, arbitrary: wrongShapeResult },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json> },
);

type Mutation = [string[], Json | typeof DELETE];

/**
 * Values of the right type that fail late — after the plugin has started changing things — which is where a rollback
 * can miss something.
 */
function deepMutations(plugin: string): Mutation[] {
  const full = [[{ subnet: '10.77.0.0/30' }]]; // one usable address: the second ADD finds none
  const hl: Mutation[] = [
    [['ipam', 'ranges'], full],
    [['ipam', 'ranges'], [[{ subnet: '10.77.0.0/24', rangeStart: '10.77.0.250', rangeEnd: '10.77.0.10' }]]],
    [
      ['ipam', 'ranges'],
      [[{ subnet: '10.77.0.0/24' }], [{ subnet: '10.77.0.0/25' }]],
    ],
    [['ipam', 'routes'], [{ dst: '0.0.0.0/0', gw: 'junk' }]],
    [['ipam', 'resolvConf'], '/nonexistent/resolv.conf'],
    [['args'], { cni: { ips: ['10.99.0.1'] } }],
    [['args'], { cni: { ips: ['10.77.0.1'] } }],
    [['runtimeConfig'], { ips: ['10.77.0.7', '10.77.0.8'] }],
  ];
  const prevWrong: Mutation[] = [
    [
      ['prevResult'],
      { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: fixture.sb.container.path }], ips: [] },
    ],
    [
      ['prevResult'],
      {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'nosuch0', sandbox: fixture.sb.container.path }],
        ips: [{ address: '10.77.0.5/24', interface: 0 }],
      },
    ],
    [['prevResult'], { cniVersion: '1.0.0', ips: [{ address: 'fd00::5/64' }] }],
    [['prevResult'], { cniVersion: '0.2.0', ip4: { ip: '10.77.0.5/24' } }],
  ];
  switch (plugin) {
    case 'bridge':
      return [
        ...hl,
        [['mtu'], 70000],
        [['mtu'], 100],
        [['vlan'], 5000],
        [['vlan'], 10],
        [['vlanTrunk'], [{ minID: 10, maxID: 5 }]],
        [['ipMasqBackend'], 'bogus'],
        [['ipMasqBackend'], 'nftables'],
        [['isDefaultGateway'], true],
        [['macspoofchk'], false],
        [['hairpinMode'], true],
        [['ipam', 'type'], 'nosuch-ipam'],
        [['ipam', 'type'], 'static'],
        [['ipam'], { type: 'static', addresses: [{ address: 'junk' }] }],
        [['ipam'], { type: 'bridge' }],
        [['bridge'], 'x'.repeat(16)],
        [['dns'], { nameservers: 'x' }],
      ];
    case 'host-local':
    case 'static':
      return plugin === 'static'
        ? [
            [['ipam', 'addresses'], [{ address: '10.78.0.2/24', gateway: 'junk' }]],
            [['ipam', 'addresses'], [{ address: '10.78.0.2' }]],
            [['ipam', 'routes'], [{ dst: 'junk' }]],
            [['ipam', 'dns'], { nameservers: [1] }],
            [['args'], { cni: { ips: ['junk'] } }],
          ]
        : hl;
    case 'tuning':
      return [
        ...prevWrong,
        [['mtu'], 70000],
        [['mtu'], 10],
        [['mac'], 'zz:zz'],
        [['mac'], '01:00:00:00:00:01'],
        [['txQLen'], -1],
        [['sysctl'], { 'net.ipv4.conf.eth0.arp_notify': '1', 'net.ipv4.conf.eth0.nosuchkey': '1' }],
        [['sysctl'], { 'net.ipv4.conf.eth0.arp_notify': '1', 'net/../../x': '1' }],
        [['sysctl'], { 'net.core.somaxconn': '1' }],
        [['sysctl'], { 'net.ipv4.conf.eth0.rp_filter': 'junk' }],
      ];
    case 'portmap':
      return [
        ...prevWrong,
        [['runtimeConfig'], { portMappings: [{ hostPort: 0, containerPort: 80, protocol: 'tcp' }] }],
        [['runtimeConfig'], { portMappings: [{ hostPort: 18081, containerPort: 80, protocol: 'xyz' }] }],
        [
          ['runtimeConfig'],
          { portMappings: [{ hostPort: 18082, containerPort: 80, protocol: 'tcp', hostIP: 'junk' }] },
        ],
        [['runtimeConfig'], { portMappings: [{ hostPort: 18083, containerPort: 70000, protocol: 'udp' }] }],
        [['markMasqBit'], 40],
        [['externalSetMarkChain'], 'NOSUCH-CHAIN'],
        [['backend'], 'bogus'],
        [['backend'], 'nftables'],
        [['conditionsV4'], ['-m', 'nosuchmatch']],
      ];
    case 'bandwidth':
      return [
        ...prevWrong,
        [['ingressRate'], 2 ** 40],
        [['ingressBurst'], 0],
        [['egressRate'], 1],
        [['egressBurst'], 2 ** 40],
        [['runtimeConfig'], { bandwidth: { ingressRate: -1, ingressBurst: 1 } }],
      ];
    case 'firewall':
      return [
        ...prevWrong,
        [['backend'], 'bogus'],
        [['iptablesAdminChainName'], 'X'.repeat(40)],
        [['iptablesAdminChainName'], 'bad chain'],
        [['ingressPolicy'], 'bogus'],
        [['ingressPolicy'], 'same-bridge'],
      ];
    default:
      return prevWrong;
  }
}

function mutations(plugin: string, max: number): fc.Arbitrary<Mutation[]> {
  const ps = paths(template(plugin));
  const generic = fc.tuple(
    fc.constantFrom(...ps),
    fc.oneof({ weight: 1, arbitrary: fc.constant(DELETE) }, { weight: 5, arbitrary: badValue }),
  ) as fc.Arbitrary<Mutation>;
  const deep = deepMutations(plugin);
  const mutation = deep.length
    ? fc.oneof({ weight: 2, arbitrary: generic }, { weight: 3, arbitrary: fc.constantFrom(...deep) })
    : generic;
  return fc.array(mutation, { minLength: 1, maxLength: max });
}

/** Every dataDir that could be used is the temp one (a missing or string dataDir would mean a default path). */
function pinDataDirs(conf: unknown): void {
  if (!conf || typeof conf !== 'object' || Array.isArray(conf)) return;
  const c = conf as Conf;
  if (!('dataDir' in c) || typeof c.dataDir === 'string') c.dataDir = DATA;
  if (c.ipam && typeof c.ipam === 'object' && !Array.isArray(c.ipam)) {
    const i = c.ipam as Conf;
    if (!('dataDir' in i) || typeof i.dataDir === 'string') i.dataDir = DATA;
  }
}

function applyMutations(plugin: string, ms: Mutation[]): Conf {
  const conf = template(plugin);
  for (const [path, value] of ms) {
    let o: Conf = conf;
    for (const k of path.slice(0, -1)) {
      const next = o[k];
      if (!next || typeof next !== 'object' || Array.isArray(next)) {
        o = {};
        break;
      }
      o = next as Conf;
    }
    const last = path[path.length - 1]!;
    if (value === DELETE) delete o[last];
    else o[last] = structuredClone(value);
  }
  pinDataDirs(conf);
  return conf;
}

function stdinFor(plugin: string): fc.Arbitrary<string | Uint8Array> {
  const mutated = mutations(plugin, 3).map((ms) => JSON.stringify(applyMutations(plugin, ms)));
  return fc.oneof(
    { weight: 6, arbitrary: mutated },
    { weight: 1, arbitrary: mutated.chain((s) => fc.nat(s.length).map((n) => s.slice(0, n))) }, // truncated JSON
    {
      weight: 1,
      arbitrary: fc.constantFrom('', '{}', '[]', 'null', '"x"', '{"cniVersion":"1.0.0"}', '{"a":1}{"b":2}'),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }) },
  );
}

const VERBS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'];
const ABSENT = undefined;

function envArb(): fc.Arbitrary<Record<string, string>> {
  const opt = (arb: fc.Arbitrary<string>) => fc.option(arb, { nil: ABSENT, freq: 20 });
  return fc
    .record({
      CNI_COMMAND: opt(
        fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...VERBS) }, fc.constantFrom('', 'add', 'X')),
      ),
      CNI_CONTAINERID: opt(
        fc.oneof(
          { weight: 15, arbitrary: fc.constantFrom('pc1', 'pc2') },
          fc.constantFrom(
            '',
            'a'.repeat(128),
            'a'.repeat(129),
            'b'.repeat(5000),
            'bad/id',
            '-x',
            '..',
            'ü',
            'a b',
          ),
        ),
      ),
      CNI_NETNS: opt(
        fc.oneof(
          { weight: 15, arbitrary: fc.constant(fixture.sb.container.path) },
          fc.constantFrom(
            fixture.sb.host.path,
            '/nonexistent/netns',
            '',
            'relative/ns',
            '/',
            NOT_NS,
            '/dev/null',
          ),
        ),
      ),
      CNI_IFNAME: opt(
        fc.oneof(
          { weight: 15, arbitrary: fc.constantFrom('eth0', 'eth1') },
          fc.constantFrom('', 'a'.repeat(15), 'a'.repeat(16), 'a/b', '.', '..', 'e th', 'eth:0', 'lo', 'ü'),
        ),
      ),
      CNI_ARGS: fc.option(
        fc.constantFrom(
          '',
          'IgnoreUnknown=1',
          'IP=10.77.0.9',
          'IP=junk',
          'K8S_POD_NAME=x;IgnoreUnknown=1',
          '=;;',
          'a',
        ),
        { nil: ABSENT, freq: 2 },
      ),
      CNI_PATH: fc.option(fc.constantFrom(CNI_PATH, '', '/nonexistent'), { nil: CNI_PATH, freq: 4 }),
    })
    .map(
      (e) => Object.fromEntries(Object.entries(e).filter(([, v]) => v !== ABSENT)) as Record<string, string>,
    );
}

// ---------------------------------------------------------------------------------------------------------------
// The output contract

const STACK = /^\s+at .*(\(.*:\d+:\d+\)|:\d+:\d+)\s*$/m;

function checkContract(command: string | undefined, code: number, stdout: string, stderr: string): void {
  assert.ok(code === 0 || code === 1, `exit code ${code}`);
  assert.doesNotMatch(stdout, STACK, 'stack trace on stdout');
  assert.doesNotMatch(stderr, STACK, 'stack trace on stderr');
  if (code === 1) {
    const doc = JSON.parse(stdout); // exactly one JSON document: trailing text would throw
    assert.ok(doc && typeof doc === 'object' && !Array.isArray(doc), 'error is an object');
    const extra = Object.keys(doc).filter((k) => !['code', 'msg', 'details', 'cniVersion'].includes(k));
    assert.deepEqual(extra, [], 'only code, msg, details, cniVersion');
    assert.ok(Number.isInteger(doc.code) && doc.code >= 1, `code ${doc.code}`);
    assert.ok(typeof doc.msg === 'string' && doc.msg !== '', 'a message');
    if ('details' in doc) assert.equal(typeof doc.details, 'string');
    return;
  }
  if (command === 'ADD') {
    const doc = JSON.parse(stdout);
    assert.ok(doc && typeof doc === 'object' && !Array.isArray(doc), 'result is an object');
    assert.ok(ALL_VERSIONS.includes(doc.cniVersion), `result version ${doc.cniVersion}`);
    assert.equal('code' in doc, false, 'a success is not an error object');
    parseResult(doc); // a result of its own version, as a runtime would decode it
  } else if (command === 'VERSION') {
    const doc = JSON.parse(stdout);
    assert.ok(Array.isArray(doc.supportedVersions), 'supportedVersions');
  } else {
    assert.equal(stdout, '', `${command} prints nothing on success`);
  }
}

function show(x: unknown): string {
  const s =
    typeof x === 'string'
      ? x
      : x instanceof Uint8Array
        ? `bytes ${Buffer.from(x).toString('hex')}`
        : JSON.stringify(x);
  return s.length > 600 ? `${s.slice(0, 600)}…` : s;
}

// ---------------------------------------------------------------------------------------------------------------
// State comparison

/** Every file under the dataDir: path → mode and content (symlinks shown as such). */
function storeState(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string, rel: string) => {
    for (const n of readdirSync(dir).sort()) {
      const p = join(dir, n);
      const r = rel ? `${rel}/${n}` : n;
      const st = lstatSync(p);
      if (st.isDirectory()) {
        out.set(`${r}/`, (st.mode & 0o7777).toString(8));
        walk(p, r);
      } else {
        out.set(
          r,
          `${(st.mode & 0o7777).toString(8)} ${st.isFile() ? stableStateFile(r, readFileSync(p, 'latin1')) : 'special'}`,
        );
      }
    }
  };
  walk(DATA, '');
  return out;
}

/**
 * host-local's listing index (a cache beside the network directories) describing a network directory this ADD
 * created and that holds only its lock: what a failed ADD that listed the new directory leaves.
 */
function isNewDirIndex(k: string, v: string, newDirs: ReadonlySet<string>): boolean {
  if (!/^\.cnikit-index-[0-9a-f]+$/.test(k)) return false;
  try {
    const ix = JSON.parse(v.slice(v.indexOf(' ') + 1)) as {
      dir?: string;
      names?: string[];
      files?: unknown[];
    };
    return (
      typeof ix.dir === 'string' &&
      newDirs.has(`${relative(DATA, ix.dir)}/`) &&
      ix.files?.length === 0 &&
      JSON.stringify(ix.names) === '["lock"]'
    );
  } catch {
    return false;
  }
}

/**
 * Store differences (host-local's listing index compared without its directory's device, inode and mtime: a failed
 * ADD that created and removed a file refreshes the cache's sentinel), except a new network directory holding only its empty lock file, and — when `pointer` — a
 * changed last_reserved_ip.N (see the header).
 */
function storeDiff(before: Map<string, string>, after: Map<string, string>, pointer: boolean): string[] {
  const diff: string[] = [];
  const isPointer = (k: string) => pointer && /^[^/]+\/last_reserved_ip\.\d+$/.test(k);
  for (const [k, v] of before) {
    if (after.get(k) !== v && !(isPointer(k) && after.has(k)))
      diff.push(`- ${k}: ${show(v)} → ${show(after.get(k))}`);
  }
  const created = [...after.keys()].filter((k) => !before.has(k));
  const newDirs = new Set(created.filter((k) => k.endsWith('/') && !k.slice(0, -1).includes('/')));
  for (const k of created) {
    if (newDirs.has(k)) {
      const inside = created.filter((c) => c !== k && c.startsWith(k));
      if (inside.length === 1 && inside[0] === `${k}lock` && after.get(`${k}lock`)!.endsWith(' ')) continue;
      diff.push(`+ ${k} with ${show(inside)}`);
      continue;
    }
    const top = `${k.split('/')[0]}/`;
    if (newDirs.has(top) && k === `${top}lock`) continue;
    if (isNewDirIndex(k, after.get(k)!, newDirs)) continue;
    if (!newDirs.has(top) && !isPointer(k)) diff.push(`+ ${k}: ${show(after.get(k))}`);
  }
  return diff;
}

const SHARED_SYSCTL = /^net\/ipv[46]\/(ip_forward|conf\/all\/forwarding)\b/;

/**
 * Not state: a bridge's running timers (gc_timer counts down continuously), and its carrier, which follows its ports a
 * moment after they come or go (the ports themselves are compared).
 */
const TIMERS = /"(gc|hello|tcn|topology_change)_timer":[0-9.]+,?/g;
function stable(s: Snapshot): Snapshot {
  return {
    ...s,
    links: s.links.map((l) =>
      l
        .replace(TIMERS, '')
        .replace('"NO-CARRIER",', '')
        .replace(/"operstate":"[A-Z]+",?/, ''),
    ),
    routes: s.routes.map((l) => l.replace('"flags":["linkdown"]', '"flags":[]')),
  };
}

/** nftables tables and base chains (with a hook) are shared anchors, created once and kept, as by the reference. */
const SHARED_NFT = /^\{"(table|chain)":\{/;

/** Kernel differences, except the shared state a failed bridge ADD may leave (see the header). */
function kernelDiff(before: Snapshot, after: Snapshot, bridge: string | undefined): string {
  const diff = diffSnapshots(stable(before), stable(after))
    .map((d) => {
      const keep = (l: string) => {
        if (d.section === 'sysctls' && SHARED_SYSCTL.test(l)) return false;
        if (
          d.section === 'nftables' &&
          SHARED_NFT.test(l) &&
          (l.startsWith('{"table"') || l.includes('"hook":'))
        ) {
          return false;
        }
        if (!bridge) return true;
        const b = JSON.stringify(bridge);
        switch (d.section) {
          case 'links':
            return !l.includes(`"ifname":${b}`);
          case 'addresses':
            return !l.startsWith(`${bridge} `);
          case 'routes':
          case 'tc':
            return !l.includes(`"dev":${b}`);
          case 'sysctls':
            return !l.includes(`/${bridge}/`);
          default:
            return true;
        }
      };
      return { ...d, removed: d.removed.filter(keep), added: d.added.filter(keep) };
    })
    .filter((d) => d.removed.length || d.added.length);
  return formatDiff(diff);
}

function bridgeOf(plugin: string, stdin: string | Uint8Array): string | undefined {
  if (plugin !== 'bridge' || typeof stdin !== 'string') return undefined;
  try {
    const c = JSON.parse(stdin);
    return typeof c?.bridge === 'string' ? c.bridge : 'cni0';
  } catch {
    return undefined;
  }
}

function snapshots(): { host: Snapshot; container: Snapshot } {
  return { host: fixture.sb.snapshot('host'), container: fixture.sb.snapshot('container') };
}

// ---------------------------------------------------------------------------------------------------------------

describe('discovered plugins', () => {
  test('every plugins/*/src/index.ts imports and exports a plugin', () => {
    assert.ok(NAMES.length >= 7, `plugins found: ${NAMES.join(', ')}`);
    for (const name of ['bridge', 'host-local', 'tuning', 'portmap', 'loopback', 'static']) {
      assert.ok(NAMES.includes(name), `${name} discovered`);
    }
    assert.deepEqual(
      [...importErrors].map(([n, e]) => `plugins/${n}/src/index.ts: ${e}`),
      [],
      'plugins that fail to import',
    );
  });
});

describe('property: the output contract of every plugin, every verb', () => {
  for (const name of NAMES) {
    test(`${name}: exit 1 ⇒ one spec error object; exit 0 ⇒ the verb's output; never a stack trace`, async () => {
      const plugin = loaded.get(name);
      assert.ok(plugin, `plugins/${name}/src/index.ts did not import: ${importErrors.get(name)}`);
      await fc.assert(
        fc.asyncProperty(envArb(), stdinFor(name), async (env, stdin) => {
          const r = await invokeInProcess(plugin, env, stdin);
          try {
            checkContract(env.CNI_COMMAND, r.code, r.stdout, r.stderr);
          } catch (err) {
            throw new Error(
              `${(err as Error).message}\n  env: ${show(env)}\n  stdin: ${show(stdin)}\n  exit ${r.code}\n  stdout: ${show(r.stdout)}\n  stderr: ${show(r.stderr)}`,
            );
          }
          if (r.code === 0 && env.CNI_COMMAND === 'ADD') {
            await invokeInProcess(plugin, { ...env, CNI_COMMAND: 'DEL' }, stdin); // keep the sandbox small
          }
        }),
        { numRuns: CONTRACT_RUNS, seed: SEED, endOnFailure: true },
      );
    });
  }
});

describe('property: a failed ADD leaves the kernel and the store unchanged', () => {
  for (const name of NAMES) {
    test(`${name}: failed ADDs change no namespace and no state file`, async () => {
      const plugin = loaded.get(name);
      assert.ok(plugin, `plugins/${name}/src/index.ts did not import: ${importErrors.get(name)}`);
      containerEth0(); // a DEL of the contract part may have removed it (as a DEL of eth0 should)
      const env = fc.record({
        CNI_COMMAND: fc.constant('ADD'),
        CNI_CONTAINERID: fc.constantFrom('kp1', 'kp1', 'kp1', 'kp2', 'kp2', 'kp2', 'a'.repeat(129)),
        CNI_NETNS: fc.oneof(
          { weight: 6, arbitrary: fc.constant(fixture.sb.container.path) },
          fc.constantFrom('/nonexistent/netns', NOT_NS),
        ),
        CNI_IFNAME: fc.constantFrom('eth1', 'eth1', 'eth1', 'eth1', 'eth0', 'eth2', 'a'.repeat(16)),
        CNI_PATH: fc.constant(CNI_PATH),
        CNI_ARGS: fc.constantFrom(
          '',
          'IgnoreUnknown=1;IP=10.77.0.9',
          'IgnoreUnknown=1;IP=10.99.0.1',
          'IP=junk',
        ),
      });
      const conf = mutations(name, 2).map((ms) => JSON.stringify(applyMutations(name, ms)));
      // the baseline: one successful ADD + DEL of the template (creates the shared bridge, the store directory)
      const okEnv = {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'kp0',
        CNI_NETNS: fixture.sb.container.path,
        CNI_IFNAME: 'eth1',
      };
      const tmpl = JSON.stringify(template(name));
      await invokeInProcess(plugin, { ...okEnv, CNI_PATH }, tmpl);
      await invokeInProcess(plugin, { ...okEnv, CNI_PATH, CNI_COMMAND: 'DEL' }, tmpl);
      let base = snapshots();
      let store = storeState();
      let failed = 0;
      await fc.assert(
        fc.asyncProperty(env, conf, async (e, stdin) => {
          const r = await invokeInProcess(plugin, e, stdin);
          if (r.code === 0) {
            // not a failure: undo it and take a new baseline
            await invokeInProcess(plugin, { ...e, CNI_COMMAND: 'DEL' }, stdin);
            base = snapshots();
            store = storeState();
            return;
          }
          failed++;
          const now = snapshots();
          const bridge = bridgeOf(name, stdin);
          const problems = [
            kernelDiff(base.host, now.host, bridge) &&
              `host namespace:\n${kernelDiff(base.host, now.host, bridge)}`,
            kernelDiff(base.container, now.container, undefined) &&
              `container namespace:\n${kernelDiff(base.container, now.container, undefined)}`,
            ...storeDiff(store, storeState(), name !== 'host-local').map((l) => `store: ${l}`),
          ].filter(Boolean);
          // the next iteration compares against what is there now (an allowed shared change stays)
          base = now;
          store = storeState();
          if (problems.length > 0) {
            throw new Error(
              `failed ADD changed state\n${problems.join('\n')}\n  env: ${show(e)}\n  stdin: ${show(stdin)}\n  error: ${show(r.stdout)}`,
            );
          }
        }),
        { numRuns: KERNEL_RUNS, seed: SEED, endOnFailure: true },
      );
      assert.ok(failed > 0, 'some generated ADDs failed (the property was exercised)');
    });
  }
});
