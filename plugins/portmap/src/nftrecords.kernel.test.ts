// portmap's nftables backend with its rule records (packages/firewall/src/nftcommit.ts), in a private namespace: ADD
// records the handles of the container's rules from the kernel's notifications, DEL deletes them by handle with no
// listing and no `nft` process; a stale or foreign record, a killed ADD and rules written without cnikit still end
// with exactly that container's rules removed; GC removes the records (and rules) of containers no longer valid.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { markNftRulesPending, nftRulesRecordPath } from '@cnikit/firewall';
import { execStats, handlesDirForFile } from '@cnikit/firewall/testing';
import { nftRuleRequests } from '@cnikit/netlink/testing';
import { sandboxForFile } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import type { PortMapArgs } from './mapping.ts';
import { gcNftRecords, HOSTPORT_NFT_TABLE, nftables, recordUnusedFamilies } from './nftables.ts';

const env = sandboxForFile({ prefix: 'nftbackend-pmrec' });
handlesDirForFile(() => env.dir);
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const NET = 'pmnftrec';
const pm = (i: number): PortMapArgs => ({
  network: NET,
  containerID: `c${i}`,
  containerIP: `10.68.0.${i + 2}/24`,
  mappings: [
    { hostPort: 8000 + i, containerPort: 80, protocol: 'tcp', hostIP: '' },
    { hostPort: 9000 + i, containerPort: 53, protocol: 'udp', hostIP: '' },
  ],
  snat: true,
  masqAll: false,
  markMasqBit: 13,
});
/** 2 dnat rules in hostports + 2 masquerade rules (IPv4 without masqAll). */
const RULES_PER_POD = 4;

/** Rules of the ip cni_hostport table with their handles: comment → ["chain handle", …] (sorted). */
function ownRules(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const r = env.sb.exec('nft', ['-a', 'list', 'table', 'ip', HOSTPORT_NFT_TABLE], { check: false });
  let chain = '';
  for (const line of r.stdout.split('\n')) {
    const c = /^\s*chain (\S+) \{/.exec(line);
    if (c) chain = c[1]!;
    const m = /comment "([^"]*)" # handle (\d+)$/.exec(line);
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), `${chain} ${m[2]}`].sort());
  }
  return out;
}
const recordOf = (i: number) => nftRulesRecordPath('ip', HOSTPORT_NFT_TABLE, `c${i}`, ns)!;
const recorded = (i: number): string[] => {
  const rec = JSON.parse(readFileSync(recordOf(i), 'utf8')) as {
    rules: Array<{ chain: string; handle: string }>;
  };
  return rec.rules.map((r) => `${r.chain} ${BigInt(`0x${r.handle}`)}`).sort();
};
const counters = () => ({
  execs: execStats.count,
  dumps: nftRuleRequests.ruleDumps,
  gets: nftRuleRequests.ruleGets,
});
const delta = (a: ReturnType<typeof counters>) => {
  const b = counters();
  return { execs: b.execs - a.execs, dumps: b.dumps - a.dumps, gets: b.gets - a.gets };
};

describe('portmap nftables rule records', () => {
  test('ADD records the handles of its rules; DEL deletes them by handle: no listing, no nft process', () => {
    for (let i = 0; i < 4; i++) nftables.setup({ ...pm(i), ...ns }, 4);
    const before = ownRules();
    for (let i = 0; i < 4; i++) {
      assert.equal(before.get(`c${i}`)?.length, RULES_PER_POD);
      assert.deepEqual(recorded(i), before.get(`c${i}`), `c${i}: the record holds the kernel's handles`);
    }
    const c = counters();
    assert.deepEqual(nftables.teardown(NET, 'c1', ns), []);
    assert.deepEqual(delta(c), { execs: 0, dumps: 0, gets: RULES_PER_POD }, 'GETRULE by handle only');
    const left = ownRules();
    assert.equal(left.has('c1'), false, 'c1 removed');
    assert.equal(existsSync(recordOf(1)), false, 'its record removed');
    for (const i of [0, 2, 3]) assert.deepEqual(left.get(`c${i}`), before.get(`c${i}`), `c${i} kept`);
    assert.deepEqual(nftables.teardown(NET, 'c1', ns), [], 'a second DEL is fine');
    assert.deepEqual(ownRules(), left);
  });

  test('a re-ADD replaces the rules found through the record: one nft process, nothing listed', () => {
    const old = ownRules().get('c0');
    const c = counters();
    nftables.setup({ ...pm(0), ...ns }, 4);
    assert.deepEqual(delta(c), { execs: 1, dumps: 0, gets: RULES_PER_POD }, 'only `nft -f -`');
    const now = ownRules().get('c0');
    assert.equal(now?.length, RULES_PER_POD, 'replaced, not added to');
    assert.notDeepEqual(now, old, 'new handles');
    assert.deepEqual(recorded(0), now);
  });

  test("a foreign record (another container's handles) is not trusted: the listing removes exactly c2", () => {
    const before = ownRules();
    // c2's record now names c3's rules (as after the table was deleted and re-created by someone else)
    writeFileSync(recordOf(2), readFileSync(recordOf(3), 'utf8').replace('"comment":"c3"', '"comment":"c2"'));
    const c = counters();
    assert.deepEqual(nftables.teardown(NET, 'c2', ns), []);
    const d = delta(c);
    assert.ok(d.execs >= 1, 'the listing (nft) ran');
    const left = ownRules();
    assert.equal(left.has('c2'), false);
    assert.deepEqual(left.get('c3'), before.get('c3'), 'c3 kept');
    assert.deepEqual(left.get('c0'), before.get('c0'));
    assert.equal(existsSync(recordOf(2)), false);
  });

  test('rules written without cnikit (no record) and a stale record (rules gone, re-created by nft): DEL lists', () => {
    const add = (id: string, port: number) =>
      env.sb.exec('nft', [
        'add rule ip cni_hostport hostports tcp dport',
        String(port),
        `dnat to 10.68.0.99:80 comment "${id}"`,
      ]);
    add('c7', 7007);
    add('c7', 7008);
    assert.equal(existsSync(recordOf(7)), false);
    assert.deepEqual(nftables.teardown(NET, 'c7', ns), []);
    assert.equal(ownRules().has('c7'), false, 'found by listing');
    // c3's rules deleted behind cnikit's back and written again (another writer): the record does not hold
    const before = ownRules();
    for (const r of before.get('c3') ?? []) {
      const [chain, handle] = r.split(' ');
      env.sb.exec('nft', ['delete rule ip cni_hostport', chain!, 'handle', handle!]);
    }
    add('c3', 7003);
    assert.deepEqual(nftables.teardown(NET, 'c3', ns), []);
    assert.equal(ownRules().has('c3'), false);
    assert.deepEqual(ownRules().get('c0'), before.get('c0'), 'c0 kept');
  });

  test('an ADD killed after its commit (record left pending): the next ADD lists and replaces, DEL removes all', () => {
    // what a killed ADD leaves: the pending record and the rules of its transaction
    assert.ok(markNftRulesPending('ip', HOSTPORT_NFT_TABLE, 'c5', ns));
    env.sb.exec('nft', [
      'add rule ip cni_hostport hostports tcp dport 8005 dnat to 10.68.0.7:80 comment "c5"',
    ]);
    const c = counters();
    nftables.setup({ ...pm(5), ...ns }, 4);
    assert.ok(delta(c).execs >= 2, 'listed the table, then committed');
    assert.equal(ownRules().get('c5')?.length, RULES_PER_POD, "the killed ADD's rule replaced");
    assert.deepEqual(recorded(5), ownRules().get('c5'));
    // killed again, with the record pending over complete rules
    assert.ok(markNftRulesPending('ip', HOSTPORT_NFT_TABLE, 'c5', ns));
    assert.deepEqual(nftables.teardown(NET, 'c5', ns), []);
    assert.equal(ownRules().has('c5'), false, 'the pending record led to the listing');
    assert.equal(existsSync(recordOf(5)), false);
  });

  test("GC removes the records and recorded rules of this network's containers that are not valid", () => {
    nftables.setup({ ...pm(6), ...ns }, 4);
    nftables.setup({ ...pm(8), ...ns, network: 'othernet' }, 4);
    const before = ownRules();
    gcNftRecords(NET, new Set(['c0']), ns);
    const left = ownRules();
    assert.equal(left.has('c6'), false, 'c6 (not valid) removed');
    assert.equal(existsSync(recordOf(6)), false);
    assert.deepEqual(left.get('c0'), before.get('c0'), 'c0 (valid) kept');
    assert.equal(existsSync(recordOf(0)), true);
    assert.deepEqual(left.get('c8'), before.get('c8'), "another network's container kept");
    assert.equal(existsSync(recordOf(8)), true);
    for (const id of ['c0', 'c8'])
      assert.deepEqual(nftables.teardown(id === 'c8' ? 'othernet' : NET, id, ns), []);
    assert.deepEqual([...ownRules().keys()], []);
  });
  test('the compiled portmap (backend nftables): DEL starts no process and sends GETRULEs by handle, no dump (strace)', () => {
    const bin = join(distBin(), 'portmap');
    assert.ok(existsSync(bin), `${bin} not built (npm run build)`);
    assert.ok(existsSync('/usr/bin/strace'), 'strace is needed (apt-get install strace)');
    const dir = join(env.dir, 'handles-bin');
    const a = pm(9);
    const conf = JSON.stringify({
      cniVersion: '1.0.0',
      name: NET,
      type: 'portmap',
      backend: 'nftables',
      snat: true,
      runtimeConfig: { portMappings: a.mappings },
      prevResult: {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
        ips: [{ address: a.containerIP, interface: 0 }],
      },
    });
    const call = (cmd: 'ADD' | 'DEL') => {
      const out = join(env.dir, `strace-nft.${cmd}`);
      const r = spawnSync(
        'ip',
        [
          'netns',
          'exec',
          env.sb.host.name,
          'strace',
          '-f',
          '-qq',
          '-e',
          'trace=execve,sendto,sendmsg',
          '-o',
          out,
          bin,
        ],
        {
          input: conf,
          encoding: 'utf8',
          env: {
            ...process.env,
            CNIKIT_NFT_HANDLES_DIR: dir,
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'c9',
            CNI_NETNS: '/run/netns/none',
            CNI_IFNAME: 'eth0',
            CNI_PATH: distBin(),
          },
        },
      );
      assert.equal(r.status, 0, `portmap ${cmd}: ${r.stdout}${r.stderr}`);
      return readFileSync(out, 'utf8');
    };
    nftables.setup({ ...pm(0), ...ns }, 4); // another pod in the table
    // a dual-stack or v6 pod: the ip6 table exists; the v4-only c9's DEL must not list it nor ask for it
    nftables.setup({ ...pm(10), containerIP: 'fd68::a/64', ...ns }, 6);
    const add = call('ADD');
    assert.deepEqual(
      readdirSync(dir)
        .map((n) => n.split('.')[1])
        .sort(),
      ['nft-ip', 'nft-ip6'],
      'ADD wrote its ip record and an ip6 record of no rules',
    );
    assert.equal(ownRules().get('c9')?.length, RULES_PER_POD);
    assert.doesNotMatch(add, /execve\("[^"]*nft", \[[^\]]*"list"/, 'ADD listed nothing with nft');
    const del = call('DEL');
    const execs = del.match(/execve\("[^"]+"/g) ?? [];
    assert.equal(execs.length, 1, `DEL started no process besides itself: ${execs.join(' ')}`);
    const gets = del.match(/NFT_MSG_GETRULE, nlmsg_flags=[A-Z_|]+/g) ?? [];
    assert.deepEqual(
      gets,
      Array(RULES_PER_POD).fill('NFT_MSG_GETRULE, nlmsg_flags=NLM_F_REQUEST|NLM_F_ACK'),
      del,
    );
    assert.doesNotMatch(del, /NLM_F_DUMP/);
    assert.doesNotMatch(del, /NFT_MSG_GETTABLE/, 'DEL asked nothing of the ip6 table');
    assert.match(del, /NFT_MSG_DELRULE/);
    assert.equal(ownRules().has('c9'), false, 'c9 removed');
    assert.equal(ownRules().get('c0')?.length, RULES_PER_POD, 'c0 kept');
    assert.deepEqual(readdirSync(dir), [], 'DEL removed the record');
    assert.deepEqual(nftables.teardown(NET, 'c0', ns), []);
    assert.deepEqual(nftables.teardown(NET, 'c10', ns), []);
  });

  test('a record of no rules is written only where there is no record (a pending one stays)', () => {
    const a = { containerID: 'c11', network: NET };
    const path6 = nftRulesRecordPath('ip6', HOSTPORT_NFT_TABLE, 'c11', ns)!;
    assert.ok(markNftRulesPending('ip6', HOSTPORT_NFT_TABLE, 'c11', ns));
    env.sb.runInHost(() => recordUnusedFamilies(a, [4]));
    assert.equal(JSON.parse(readFileSync(path6, 'utf8')).pending, true, 'pending ip6 record kept');
    const path4 = nftRulesRecordPath('ip', HOSTPORT_NFT_TABLE, 'c11', ns)!;
    env.sb.runInHost(() => recordUnusedFamilies(a, [6]));
    assert.deepEqual(JSON.parse(readFileSync(path4, 'utf8')).rules, []);
    const c0 = counters();
    assert.deepEqual(nftables.teardown(NET, 'c11', ns), []);
    assert.equal(delta(c0).execs, 1, 'ip: nothing asked; ip6 (pending): listed');
    assert.equal(existsSync(path4), false);
    assert.equal(existsSync(path6), false);
  });
});
