// The network state of the machine that a test run must leave as it found it (scripts/run-tests.mjs takes it before
// and after the whole run and fails naming what changed): links (name, kind, UP, master), addresses, routes, policy
// rules, the iptables/ip6tables rules, the nftables ruleset and every readable sysctl under net.ipv4, net.ipv6,
// net.bridge and net.core (ip_forward, conf.*.forwarding/rp_filter/proxy_arp/route_localnet/accept_ra/…, the
// bridge-nf-call ones). Only stable fields are kept: no counters, no lifetimes or expiry, no nft handles, no IPv6
// temporary (privacy) addresses, so two snapshots of an untouched namespace are equal.
//
// hostState()            the namespace this process is in (the machine's, for the top-level run)
// hostState(NETNS_PATH)  another namespace (a test's private one): this file re-run inside it through nsenter
//
// Plain JavaScript on purpose: run-tests.mjs imports it in the process that runs the whole suite.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
/** The sysctl trees recorded (relative to /proc/sys). */
export const SYSCTL_TREES = ['net/ipv4', 'net/ipv6', 'net/bridge', 'net/core'];

/**
 * Links a kernel module creates in EVERY namespace, the machine's included, when a test in a private namespace
 * first loads it (ifb: ifb0/ifb1, dummy: dummy0, bonding: bond0, the tunnel modules' fallback devices). They are
 * reported as a note, not as a change a test made.
 */
const MODULE_LINKS =
  /^(ifb\d+|dummy0|bond0|sit0|tunl0|gre0|gretap0|erspan0|ip6tnl0|ip6gre0|ip_vti0|ip6_vti0|teql0) /;

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (r.error?.code === 'ENOENT') return '';
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.trim()}`);
  return r.stdout;
}

function json(cmd, args) {
  const out = run(cmd, args).trim();
  return out === '' ? [] : JSON.parse(out);
}

/** JSON with sorted keys, so equal objects print equally. */
function stable(v) {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

function strip(v, keys) {
  if (Array.isArray(v)) return v.map((x) => strip(x, keys));
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !keys.has(k))
        .map(([k, x]) => [k, strip(x, keys)]),
    );
  return v;
}

function links() {
  return json('ip', ['-json', '-details', 'link', 'show'])
    .map((l) => {
      const kind = l.linkinfo?.info_kind ?? 'none';
      const up = (l.flags ?? []).includes('UP') ? ' UP' : '';
      return `${l.ifname} kind=${kind}${up}${l.master ? ` master=${l.master}` : ''}`;
    })
    .sort();
}

function addresses() {
  return json('ip', ['-json', 'address', 'show'])
    .flatMap((l) =>
      (l.addr_info ?? [])
        .filter((a) => !a.temporary)
        .map((a) => `${l.ifname} ${a.local}/${a.prefixlen} scope=${a.scope ?? '-'}`),
    )
    .sort();
}

const ROUTE_FIELDS = [
  'type',
  'dst',
  'gateway',
  'dev',
  'table',
  'protocol',
  'scope',
  'prefsrc',
  'metric',
  'nhid',
];

function routes() {
  const out = [];
  for (const fam of ['-4', '-6']) {
    for (const r of json('ip', ['-json', fam, 'route', 'show', 'table', 'all'])) {
      const fields = ROUTE_FIELDS.filter((f) => r[f] !== undefined).map((f) => `${f}=${r[f]}`);
      if (r.nexthops) fields.push(`nexthops=${stable(r.nexthops.map((n) => [n.gateway, n.dev, n.weight]))}`);
      out.push(`${fam} ${fields.join(' ')}`);
    }
  }
  return out.sort();
}

function rules() {
  return ['-4', '-6']
    .flatMap((fam) => json('ip', ['-json', fam, 'rule', 'show']).map((r) => `${fam} ${stable(r)}`))
    .sort();
}

/**
 * iptables-save without what changes on its own or only says "nothing here": comments, counters, and the tables and
 * built-in chains a module creates empty with policy ACCEPT. Rules, user chains and other policies stay.
 */
function iptables(tool) {
  const out = [];
  let table = '';
  for (const line of run(tool, []).split('\n')) {
    if (line === '' || line.startsWith('#') || line === 'COMMIT') continue;
    if (line.startsWith('*')) {
      table = line.slice(1);
      continue;
    }
    const l = line.replace(/ \[\d+:\d+\]$/, '').replace(/^\[\d+:\d+\] /, '');
    if (/^:[A-Z]+ ACCEPT$/.test(l)) continue;
    out.push(`${tool.replace('-save', '')} ${table} ${l}`);
  }
  return out.sort();
}

function nftables() {
  const out = run('nft', ['-j', 'list', 'ruleset']).trim();
  if (out === '') return [];
  const volatile = new Set(['handle', 'expires', 'metainfo']);
  return (JSON.parse(out).nftables ?? [])
    .filter((o) => !('metainfo' in o))
    .map((o) =>
      stable(strip(o, volatile))
        .replace(/"bytes":\d+/g, '"bytes":0')
        .replace(/"packets":\d+/g, '"packets":0'),
    )
    .sort();
}

function sysctls() {
  const out = {};
  const walk = (rel) => {
    const p = join('/proc/sys', rel);
    let entries;
    try {
      entries = readdirSync(p, { withFileTypes: true });
    } catch {
      return; // the tree is not there (net/bridge without br_netfilter)
    }
    for (const e of entries) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else {
        try {
          if ((statSync(join('/proc/sys', r)).mode & 0o444) === 0) continue; // write-only (route/flush)
          out[r] = readFileSync(join('/proc/sys', r), 'utf8').trim().replace(/\s+/g, ' ');
        } catch {
          // unreadable (stable_secret before it is set): not state to compare
        }
      }
    }
  };
  for (const t of SYSCTL_TREES) walk(t);
  return out;
}

/** The state of the namespace this process is in. */
function collect() {
  return {
    links: links(),
    addresses: addresses(),
    routes: routes(),
    rules: rules(),
    iptables: [...iptables('iptables-save'), ...iptables('ip6tables-save')],
    nftables: nftables(),
    sysctls: sysctls(),
  };
}

/** The state of the namespace at `netns` (a path such as /run/netns/x), or of this process's one. */
export function hostState(netns) {
  if (!netns) return collect();
  const r = spawnSync('nsenter', [`--net=${netns}`, '--', process.execPath, SELF, '--print'], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.status !== 0)
    throw new Error(`cannot read the state of ${netns}: ${(r.error?.message ?? r.stderr).trim()}`);
  return JSON.parse(r.stdout);
}

/**
 * What changed between two states: `problems` (a test changed the namespace: each line names the object and the
 * change) and `notes` (kernel side effects of loading a module: its default links, the sysctls it adds).
 */
export function diffHostState(before, after) {
  const problems = [];
  const notes = [];
  for (const section of ['links', 'addresses', 'routes', 'rules', 'iptables', 'nftables']) {
    const a = new Set(before[section]);
    const b = new Set(after[section]);
    for (const l of before[section]) if (!b.has(l)) problems.push(`${section}: removed ${l}`);
    for (const l of after[section]) {
      if (a.has(l)) continue;
      if (section === 'links' && MODULE_LINKS.test(l) && !l.includes(' UP'))
        notes.push(`links: ${l} appeared (created by a kernel module a test loaded, in every namespace)`);
      else problems.push(`${section}: added ${l}`);
    }
  }
  const gone = new Set(
    before.links.map((l) => l.split(' ')[0]).filter((n) => !after.links.some((l) => l.startsWith(`${n} `))),
  );
  // keys are paths under /proc/sys (a link name may hold dots); shown the way sysctl(8) names them
  const show = (k) => k.replaceAll('/', '.');
  for (const [k, v] of Object.entries(after.sysctls)) {
    const was = before.sysctls[k];
    if (was === undefined) {
      // a new link's own sysctls come with it (reported as the link); a module's new ones are only a note
      if (!/\/(conf|neigh)\/[^/]+\//.test(k) || /\/(conf|neigh)\/(all|default)\//.test(k))
        notes.push(`sysctls: ${show(k)} = ${v} appeared (a kernel module was loaded)`);
    } else if (was !== v) problems.push(`sysctls: ${show(k)}: ${was} -> ${v}`);
  }
  for (const k of Object.keys(before.sysctls)) {
    if (k in after.sysctls) continue;
    const m = /\/(?:conf|neigh)\/([^/]+)\//.exec(k);
    if (m && gone.has(m[1])) continue; // the link is gone: reported as the link
    problems.push(`sysctls: ${show(k)} disappeared (was ${before.sysctls[k]})`);
  }
  return { problems, notes };
}

if (process.argv[1] === SELF && process.argv[2] === '--print') {
  process.stdout.write(JSON.stringify(collect()));
}
