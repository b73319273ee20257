// scripts/run-tests.mjs fails a run that changed the machine's network state, naming each change
// (scripts/host-state.mjs). Proved here against private namespaces only: the machine's own one is read, never written.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { diffHostState, hostState } from './host-state.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const runner = fileURLToPath(new URL('./run-tests.mjs', import.meta.url));
const names: string[] = [];
function netns(): string {
  const name = `cnikit-hs-${process.pid}-${names.length}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  names.push(name);
  return `/run/netns/${name}`;
}
const inNs = (path: string, ...cmd: string[]) => {
  const r = spawnSync('nsenter', [`--net=${path}`, '--', ...cmd], { encoding: 'utf8' });
  assert.equal(r.status, 0, `${cmd.join(' ')}: ${r.stderr}`);
};
after(() => {
  for (const n of names) spawnSync('ip', ['netns', 'del', n]);
});

describe('host state', () => {
  let ns = '';
  before(() => {
    ns = netns();
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  });

  test('two readings of an untouched namespace are equal: this machine and a private one', () => {
    // (notes allowed: a test running meanwhile may load a kernel module, which adds sysctls everywhere)
    assert.deepEqual(diffHostState(hostState(), hostState()).problems, []);
    const a = hostState(ns);
    assert.equal(a.sysctls['net/ipv4/ip_forward'], '0');
    assert.ok(a.links.includes('lo kind=none UP'), JSON.stringify(a.links));
    assert.deepEqual(diffHostState(a, hostState(ns)), { problems: [], notes: [] });
  });

  test('each kind of change in a private namespace is named: sysctls, links, addresses, routes, rules, firewall', () => {
    const a = hostState(ns);
    inNs(ns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
    inNs(ns, 'sysctl', '-q', '-w', 'net.ipv4.conf.all.rp_filter=2');
    inNs(ns, 'ip', 'link', 'add', 'hs0', 'type', 'veth', 'peer', 'name', 'hs1');
    inNs(ns, 'ip', 'link', 'set', 'hs0', 'up');
    inNs(ns, 'ip', 'addr', 'add', '10.77.0.1/24', 'dev', 'hs0');
    inNs(ns, 'ip', 'route', 'add', '10.78.0.0/16', 'via', '10.77.0.2');
    inNs(ns, 'ip', 'rule', 'add', 'from', '10.77.0.0/24', 'table', '100', 'priority', '100');
    inNs(ns, 'iptables', '-w', '-t', 'nat', '-A', 'POSTROUTING', '-s', '10.77.0.0/24', '-j', 'MASQUERADE');
    inNs(ns, 'nft', 'add', 'table', 'inet', 'hs_test');
    const { problems } = diffHostState(a, hostState(ns));
    const text = problems.join('\n');
    for (const want of [
      'sysctls: net.ipv4.ip_forward: 0 -> 1',
      'sysctls: net.ipv4.conf.all.rp_filter: 0 -> 2',
      'links: added hs0 kind=veth UP',
      'links: added hs1 kind=veth',
      'addresses: added hs0 10.77.0.1/24 scope=global',
      'routes: added -4 dst=10.78.0.0/16 gateway=10.77.0.2 dev=hs0',
      'rules: added -4 {"priority":100,"src":"10.77.0.0","srclen":24,"table":"100"}',
      'iptables: added iptables nat -A POSTROUTING -s 10.77.0.0/24 -j MASQUERADE',
      'nftables: added {"table":{"family":"inet","name":"hs_test"}}',
    ])
      assert.ok(text.includes(want), `${want} in:\n${text}`);
    // hs0's own sysctls (net.ipv4.conf.hs0.*) come with the link: not named one by one
    assert.ok(!problems.some((p) => /conf\.hs[01]/.test(p)), text);
    // the way back is named too
    const b = hostState(ns);
    inNs(ns, 'ip', 'link', 'del', 'hs0');
    inNs(ns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=0');
    const back = diffHostState(b, hostState(ns)).problems;
    assert.ok(back.includes('links: removed hs0 kind=veth UP'), back.join('\n'));
    assert.ok(back.includes('links: removed hs1 kind=veth'), back.join('\n'));
    assert.ok(back.includes('sysctls: net.ipv4.ip_forward: 1 -> 0'), back.join('\n'));
    assert.ok(!back.some((p) => /conf[./]hs[01]/.test(p)), back.join('\n'));
  });

  test('counters and lifetimes are not state: traffic and an address with a lifetime change nothing', () => {
    const counters = (path: string) =>
      spawnSync('nsenter', [`--net=${path}`, '--', 'iptables-save', '-c'], { encoding: 'utf8' }).stdout;
    const p = netns();
    inNs(p, 'ip', 'link', 'set', 'lo', 'up');
    inNs(p, 'iptables', '-w', '-A', 'INPUT', '-i', 'lo', '-j', 'ACCEPT');
    inNs(p, 'ip', 'addr', 'add', '10.79.0.1/8', 'dev', 'lo', 'valid_lft', '1000', 'preferred_lft', '500');
    const a = hostState(p);
    // traffic through the rule (UDP datagrams on lo): its counters move
    const send =
      "const s = require('node:dgram').createSocket('udp4'); let n = 0; " +
      "const go = () => s.send('x', 9, '10.79.0.1', () => (++n < 5 ? go() : s.close())); go();";
    inNs(p, process.execPath, '-e', send);
    spawnSync('sleep', ['1.1']);
    assert.match(counters(p), /^\[[1-9]\d*:\d+\] -A INPUT -i lo -j ACCEPT$/m, 'the counters did move');
    assert.deepEqual(diffHostState(a, hostState(p)).problems, []);
  });
});

describe('run-tests.mjs', () => {
  const run = (netnsPath: string, ...files: string[]) =>
    spawnSync(process.execPath, [runner, ...files], {
      cwd: root,
      encoding: 'utf8',
      // NODE_TEST_CONTEXT would make the inner node --test think it runs inside this file's test and run nothing
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        NODE_TEST_CONTEXT: undefined,
        CNIKIT_TEST_HOST_NETNS: netnsPath,
      },
    });

  test('a test file that changes the watched namespace fails the run, and each change is named', () => {
    const ns = netns();
    const r = run(ns, 'scripts/testdata/run-tests-netns.fixture.ts');
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^ℹ pass 1$/m, 'the test itself passed: the run fails for what it left');
    assert.ok(
      r.stdout.includes(`✖ the tests changed ${ns} (tests must leave it as they found it):`),
      r.stdout,
    );
    assert.match(r.stdout, /^✖ {3}sysctls: net\.ipv4\.ip_forward: 0 -> 1$/m);
    assert.match(r.stdout, /^✖ {3}links: added leftover0 kind=veth$/m);
    assert.match(
      r.stdout,
      /^✖ {3}iptables: added iptables filter -A FORWARD -s 10\.99\.0\.0\/16 -j ACCEPT$/m,
    );
  });

  test('a file that leaves the namespace as it found it passes, and the run says so', () => {
    const ns = netns();
    const r = run(ns, 'scripts/testdata/run-tests-pass.fixture.ts');
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.ok(r.stdout.includes(`ℹ host state: ${ns} unchanged`), r.stdout);
  });
});
