/**
 * The examples of the plugin pages (docs/plugins/*.md), run as an operator would run them: every ```json block marked
 * `<!-- example: conflist -->` is written to a temporary NETCONFPATH and driven through dist-bin/cnitool (ADD, CHECK,
 * DEL) against a fresh container namespace, with the page's `<!-- example: runtimeConfig -->` block as CAP_ARGS.
 * This file's main thread enters a private "host" namespace (sandboxForFile), so bridges, IFBs and iptables rules
 * land there, never in the machine's namespace. The examples are used as written except for on-disk state: every
 * plugin and IPAM config that keeps state gets a `dataDir` under the test's directory, and cnitool's cache is there
 * too. After ADD the kernel state is checked (the result's addresses on the container interface, and what the page
 * says the plugin does); after DEL that it is gone again.
 *
 * A page may also mark a single plugin's configuration (`<!-- example: config -->`): it is loaded with libcni's
 * loader as a conflist of one plugin, and run like a conflist when the plugin's kernel features exist here.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { confListFromBytes, confListFromConf, pluginConfFromBytes } from '@cnikit/libcni';
import { type NamedNetns, sandboxForFile, scaled } from '@cnikit/testing';
import { markedExamples } from '../scripts/readme-snippets.ts';
import { DIST, ensureBuilt, ROOT } from './dist.ts';

ensureBuilt();
const file = sandboxForFile({ enterHost: true });

const PAGES = join(ROOT, 'docs', 'plugins');
/** The pages that must carry a complete conflist example. */
const REQUIRED = ['bridge', 'host-local', 'static', 'portmap', 'tuning', 'bandwidth', 'firewall', 'loopback'];

type Json = Record<string, unknown>;

interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

function cnitool(args: string[], netDir: string, capArgs?: string): Run {
  const r = spawnSync(join(DIST, 'cnitool'), args, {
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      NETCONFPATH: netDir,
      CNI_PATH: DIST,
      CNI_CACHE_DIR: join(file.dir, 'cache'),
      // firewall's auto-detection must never find the machine's firewalld
      DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${join(file.dir, 'no-bus')}`,
      ...(capArgs ? { CAP_ARGS: capArgs } : {}),
    },
    timeout: scaled(60_000),
  });
  if (r.error) throw r.error;
  return { status: r.status ?? 128, stdout: r.stdout, stderr: r.stderr };
}

function ok(r: Run, what: string): Run {
  assert.equal(r.status, 0, `${what} failed (exit ${r.status}): ${r.stdout}${r.stderr}`);
  return r;
}

/** The example with on-disk state moved under the test's directory (the only change made to it). */
function isolated(conflist: Json, page: string): Json {
  const dir = join(file.dir, 'state', page);
  const plugins = (conflist.plugins as Json[]).map((p) => {
    const q: Json = { ...p };
    if ((p.type === 'tuning' || p.type === 'firewall') && q.dataDir === undefined)
      q.dataDir = join(dir, String(p.type));
    const ipam = p.ipam as Json | undefined;
    if (ipam?.type === 'host-local' && ipam.dataDir === undefined)
      q.ipam = { ...ipam, dataDir: join(dir, 'ipam') };
    return q;
  });
  return { ...conflist, plugins };
}

interface IpAddr {
  ifname: string;
  mtu: number;
  flags: string[];
  link_index?: number;
  addr_info: Array<{ local: string; prefixlen: number }>;
}

const ipJson = <T>(args: string[]): T => {
  const r = spawnSync('ip', ['-j', ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `ip ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout || '[]') as T;
};
const addrsIn = (ns: NamedNetns) => ipJson<IpAddr[]>(['-n', ns.name, 'addr']);
const hostLinks = () => ipJson<IpAddr[]>(['addr']);
const iptablesSave = (table: string) =>
  spawnSync('iptables-save', ['-t', table], { encoding: 'utf8' }).stdout;

interface ResultIp {
  address: string;
  interface?: number;
}
interface Result {
  interfaces?: Array<{ name: string; sandbox?: string }>;
  ips?: ResultIp[];
}

/** Each result address that belongs to an interface in the container, as `ifname → [address/prefix]`. */
function containerAddresses(result: Result): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const ip of result.ips ?? []) {
    const intf = ip.interface === undefined ? undefined : result.interfaces?.[ip.interface];
    if (!intf?.sandbox) continue;
    out.set(intf.name, [...(out.get(intf.name) ?? []), ip.address]);
  }
  return out;
}

const v4Of = (result: Result) => {
  const a = result.ips?.find((ip) => !ip.address.includes(':'))?.address;
  assert.ok(a, `an IPv4 address in the result: ${JSON.stringify(result)}`);
  return a.split('/')[0] as string;
};
const hostVeth = (result: Result) => {
  const v = result.interfaces?.find((i) => !i.sandbox && i.name.startsWith('veth'))?.name;
  assert.ok(v, `a host veth in the result: ${JSON.stringify(result)}`);
  return v;
};

interface PageChecks {
  /** After ADD (and CHECK): what the page says the example does. */
  added(result: Result, ns: NamedNetns, state: string): void;
  /** After DEL. */
  deleted(result: Result, ns: NamedNetns, state: string): void;
}

/** What each page's example promises, checked in the kernel (and on disk). */
const CHECKS: Record<string, PageChecks> = {
  bridge: {
    added() {
      const br = hostLinks().find((l) => l.ifname === 'cni0');
      assert.ok(br, 'cni0 in the host namespace');
      assert.ok(br.addr_info.some((a) => `${a.local}/${a.prefixlen}` === '10.88.0.1/16'));
    },
    deleted() {
      assert.ok(
        hostLinks().some((l) => l.ifname === 'cni0'),
        'the bridge stays',
      );
    },
  },
  'host-local': {
    added(result, _ns, state) {
      const files = readdirSync(join(state, 'ipam', 'dualstack')).sort();
      assert.deepEqual(
        (result.ips ?? []).map((ip) => ip.address).sort(),
        ['10.22.0.10/24', 'fd00:22::2/64'],
        'the first address of each range set',
      );
      for (const ip of ['10.22.0.10', 'fd00:22::2'])
        assert.ok(files.includes(ip), `reservation ${ip}: ${files}`);
    },
    deleted(_result, _ns, state) {
      const left = readdirSync(join(state, 'ipam', 'dualstack')).filter((f) => /^[\d.]+$|:/.test(f));
      assert.deepEqual(left, [], 'reservations released');
    },
  },
  static: {
    added(result) {
      assert.deepEqual(
        (result.ips ?? []).map((ip) => ip.address),
        ['10.10.0.7/24'],
        'runtimeConfig.ips replaces ipam.addresses',
      );
    },
    deleted() {},
  },
  portmap: {
    added(result) {
      const nat = iptablesSave('nat');
      assert.match(
        nat,
        new RegExp(`--dport 8080 .*--to-destination ${v4Of(result).replaceAll('.', '\\.')}:80`),
      );
      assert.match(nat, /-p udp .*--dport 5353 /);
    },
    deleted() {
      assert.doesNotMatch(iptablesSave('nat'), /--dport (8080|5353) /);
    },
  },
  tuning: {
    added(_result, ns) {
      const eth0 = addrsIn(ns).find((l) => l.ifname === 'eth0');
      assert.ok(eth0);
      assert.equal(eth0.mtu, 1400);
      assert.ok(eth0.flags.includes('PROMISC'), `flags ${eth0.flags}`);
      const r = file.sb.exec('cat', ['/proc/sys/net/ipv4/conf/eth0/arp_filter'], { ns });
      assert.equal(r.stdout.trim(), '1');
    },
    deleted(_result, _ns, state) {
      assert.deepEqual(
        readdirSync(join(state, 'tuning')).filter((f) => f.endsWith('.json')),
        [],
        'backup removed',
      );
    },
  },
  bandwidth: {
    added(result) {
      const qd = JSON.parse(
        spawnSync('tc', ['-j', 'qdisc', 'show', 'dev', hostVeth(result)], { encoding: 'utf8' }).stdout,
      ) as Array<{ kind: string; root?: boolean; options?: { rate?: number } }>;
      const tbf = qd.find((q) => q.kind === 'tbf');
      assert.ok(tbf, `a tbf on the host veth: ${JSON.stringify(qd)}`);
      assert.equal(tbf.options?.rate, 10_000_000 / 8, '10 Mbit/s (tc -j gives bytes/s)');
      const ifbs = ipJson<IpAddr[]>(['link', 'show', 'type', 'ifb']).map((l) => l.ifname);
      assert.equal(ifbs.filter((n) => /^bwp[0-9a-f]{12}$/.test(n)).length, 1, `one IFB: ${ifbs}`);
    },
    deleted() {
      const ifbs = ipJson<IpAddr[]>(['link', 'show', 'type', 'ifb']).map((l) => l.ifname);
      assert.deepEqual(
        ifbs.filter((n) => n.startsWith('bwp')),
        [],
        'the IFB is gone',
      );
    },
  },
  firewall: {
    added(result) {
      const filter = iptablesSave('filter');
      const ip = v4Of(result);
      assert.ok(filter.includes(`-A CNI-FORWARD -s ${ip}/32 -j ACCEPT`), filter);
      assert.ok(
        filter.includes(`-A CNI-FORWARD -d ${ip}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`),
      );
      assert.match(filter, /^:CNI-ISOLATION-STAGE-1 /m);
    },
    deleted(result) {
      assert.ok(!iptablesSave('filter').includes(`${v4Of(result)}/32`), 'the pod rules are gone');
    },
  },
  ptp: {
    added(result) {
      const ip = v4Of(result);
      const routes = ipJson<Array<{ dst: string; dev: string }>>(['route', 'show', ip]);
      assert.ok(
        routes.some((r) => r.dev === hostVeth(result)),
        `host route to ${ip} via the host veth: ${JSON.stringify(routes)}`,
      );
    },
    deleted(result) {
      assert.deepEqual(ipJson(['route', 'show', v4Of(result)]), [], 'the host route is gone');
    },
  },
  tap: {
    added(_result, ns) {
      const links = ipJson<Array<{ ifname: string; linkinfo?: { info_kind?: string } }>>([
        '-n',
        ns.name,
        '-d',
        'link',
      ]);
      assert.equal(links.find((l) => l.ifname === 'eth0')?.linkinfo?.info_kind, 'tun', 'eth0 is a tap');
    },
    deleted() {},
  },
  loopback: {
    added(_result, ns) {
      const lo = addrsIn(ns).find((l) => l.ifname === 'lo');
      assert.ok(lo?.flags.includes('UP'), `lo up: ${lo?.flags}`);
    },
    deleted(_result, ns) {
      const lo = addrsIn(ns).find((l) => l.ifname === 'lo');
      assert.ok(!lo?.flags.includes('UP'), `lo down: ${lo?.flags}`);
    },
  },
};

/** Plugins whose kernel features this machine's kernel lacks (docs/kernel-lab.md): their examples are only loaded. */
const KERNEL_LAB = new Set(['macvlan', 'ipvlan', 'vlan', 'dummy', 'vrf']);
/** Plugins whose examples need hardware or a daemon (a PCI device, a DHCP server): only loaded. */
const NOT_HERE = new Set(['host-device', 'dhcp']);

interface Page {
  name: string;
  conflists: Array<{ line: number; list: Json }>;
  runtimeConfig?: string;
}

/** Complete configurations outside any marker, loaded with libcni's loader only. */
const loadedOnly: string[] = [];

function loadPages(): Page[] {
  return readdirSync(PAGES)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => {
      const name = f.replace(/\.md$/, '');
      const text = readFileSync(join(PAGES, f), 'utf8');
      const examples = markedExamples(text);
      // the page's other ```json blocks: a complete network configuration (cniVersion, name, type) must load too
      for (const m of text.matchAll(/(<!-- example: [\w-]+ -->\n)?```json\n([\s\S]*?)```/g)) {
        if (m[1]) continue;
        const conf = JSON.parse(m[2] ?? '') as Json;
        if (conf.cniVersion !== undefined && conf.name !== undefined && conf.type !== undefined) {
          const list = confListFromConf(pluginConfFromBytes(m[2] ?? ''));
          assert.equal(list.plugins.length, 1, `docs/plugins/${f}: ${conf.type}`);
          loadedOnly.push(`${name}: ${conf.type}`);
        }
      }
      const conflists: Page['conflists'] = [];
      let runtimeConfig: string | undefined;
      for (const ex of examples) {
        const what = `docs/plugins/${f}:${ex.line}`;
        if (ex.kind === 'conflist') {
          // libcni's loader: what a runtime does with the file
          confListFromBytes(ex.text);
          conflists.push({ line: ex.line, list: JSON.parse(ex.text) as Json });
        } else if (ex.kind === 'config') {
          const list = confListFromConf(pluginConfFromBytes(ex.text));
          assert.equal(list.plugins.length, 1, what);
          const conf = JSON.parse(ex.text) as Json;
          const { cniVersion, name: net, ...plugin } = conf;
          conflists.push({ line: ex.line, list: { cniVersion, name: net, plugins: [plugin] } });
        } else if (ex.kind === 'runtimeConfig') {
          assert.equal(runtimeConfig, undefined, `${what}: one runtimeConfig example per page`);
          JSON.parse(ex.text);
          runtimeConfig = JSON.stringify(JSON.parse(ex.text));
        } else {
          assert.fail(
            `${what}: unknown example kind ${JSON.stringify(ex.kind)} (conflist, config, runtimeConfig)`,
          );
        }
      }
      return { name, conflists, runtimeConfig };
    });
}

const pages = loadPages();

describe('plugin page examples (docs/plugins/*.md)', () => {
  test('each of the first eight plugins has a conflist example; every complete example loads with libcni', () => {
    for (const name of REQUIRED) {
      const page = pages.find((p) => p.name === name);
      assert.ok(
        page && page.conflists.length > 0,
        `docs/plugins/${name}.md has a <!-- example: conflist --> block`,
      );
      assert.ok(CHECKS[name], `kernel checks for ${name}`);
    }
    // the pages whose single configurations cannot run here (kernel lab features, a PCI device) still load
    assert.deepEqual(loadedOnly, [
      'dummy: dummy',
      'host-device: host-device',
      'ipvlan: ipvlan',
      'macvlan: macvlan',
      'vlan: vlan',
    ]);
  });

  for (const page of pages) {
    for (const { line, list } of page.conflists) {
      const types = (list.plugins as Json[]).map((p) => String(p.type));
      // loaded above; their own tests run them (in the kernel lab, docs/kernel-lab.md, for the kernel features)
      if (types.some((t) => KERNEL_LAB.has(t) || NOT_HERE.has(t))) continue;
      test(`docs/plugins/${page.name}.md:${line}: ${types.join(' + ')} through cnitool (ADD, CHECK, DEL)`, () => {
        const ns = file.sb.newContainer();
        const netDir = join(file.dir, 'net.d', `${page.name}-${line}`);
        const state = join(file.dir, 'state', page.name);
        mkdirSync(netDir, { recursive: true });
        mkdirSync(state, { recursive: true });
        writeFileSync(join(netDir, '10-example.conflist'), JSON.stringify(isolated(list, page.name)));
        const net = String(list.name);

        const add = ok(cnitool(['add', net, ns.path], netDir, page.runtimeConfig), 'add');
        const result = JSON.parse(add.stdout) as Result;
        const inNs = addrsIn(ns);
        for (const [ifname, addrs] of containerAddresses(result)) {
          const link = inNs.find((l) => l.ifname === ifname);
          assert.ok(link, `${ifname} in the container after ADD`);
          const have = link.addr_info.map((a) => `${a.local}/${a.prefixlen}`);
          for (const a of addrs) assert.ok(have.includes(a), `${a} on ${ifname}: ${have}`);
        }
        CHECKS[page.name]?.added(result, ns, state);

        ok(cnitool(['check', net, ns.path], netDir, page.runtimeConfig), 'check');
        ok(cnitool(['del', net, ns.path], netDir, page.runtimeConfig), 'del');

        const after = addrsIn(ns).map((l) => l.ifname);
        for (const ifname of containerAddresses(result).keys()) {
          if (ifname !== 'lo') assert.ok(!after.includes(ifname), `${ifname} gone after DEL: ${after}`);
        }
        CHECKS[page.name]?.deleted(result, ns, state);
        const cache = join(file.dir, 'cache', 'results');
        assert.deepEqual(
          existsSync(cache) ? readdirSync(cache).filter((f) => f.startsWith(`${net}-`)) : [],
          [],
          'cached result removed',
        );
      });
    }
  }
});
