// Kernel tests of the spoof check's rule records (spoofcheck.ts + handles.ts): setup records the handles of its rules,
// teardown deletes the PREROUTING jump by handle and both per-port chains in one nf_tables transaction without
// listing the table or starting nft; a missing or stale record falls back to the listing and never removes another
// port's objects; GC removes the records. Everything runs in a private namespace.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { nftRuleRequests } from '@cnikit/netlink/testing';
import { sandboxForFile } from '@cnikit/testing';
import { execStats } from './exec.ts';
import { nftRulesRecordPath } from './handles.ts';
import { gcSpoofCheck, setupSpoofCheck, spoofCheckNames, teardownSpoofCheck } from './spoofcheck.ts';
import { handlesDirForFile } from './testing.ts';

const env = sandboxForFile({ prefix: 'cnikit-spoofdel' });
handlesDirForFile(() => env.dir);
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const ref = (i: number) => `spoofpod-${i}-eth0`;
const setup = (i: number) =>
  setupSpoofCheck({
    iface: `vsp${i}`,
    mac: `0a:58:0a:00:01:${(i + 2).toString(16).padStart(2, '0')}`,
    refID: ref(i),
    ...ns,
  });
const recordPath = (i: number) => nftRulesRecordPath('bridge', 'nat', spoofCheckNames(ref(i)).comment, ns)!;
const readRecord = (i: number) =>
  JSON.parse(readFileSync(recordPath(i), 'utf8')) as {
    v: number;
    comment: string;
    rules: Array<{ chain: string; handle: string }>;
  };

/** PREROUTING's jumps (`nft -a`): chain jumped to → handles. */
function prerouting(): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const text = env.sb.exec('nft', ['-a', 'list', 'chain', 'bridge', 'nat', 'PREROUTING']).stdout;
  for (const m of text.matchAll(/jump (\S+) comment "[^"]*" # handle (\d+)/g))
    out.set(m[1]!, [...(out.get(m[1]!) ?? []), Number(m[2])]);
  return out;
}
const chains = () =>
  new Set(
    [...env.sb.exec('nft', ['list', 'table', 'bridge', 'nat']).stdout.matchAll(/chain (\S+) \{/g)].map(
      (m) => m[1]!,
    ),
  );
/** The objects of port `i`: its jump count in PREROUTING and whether each of its chains exists. */
function objectsOf(i: number) {
  const { ifaceChain, macChain } = spoofCheckNames(ref(i));
  const c = chains();
  return { jumps: prerouting().get(ifaceChain)?.length ?? 0, iface: c.has(ifaceChain), mac: c.has(macChain) };
}
const PRESENT = { jumps: 1, iface: true, mac: true };
const ABSENT = { jumps: 0, iface: false, mac: false };
const counts = () => ({ ...nftRuleRequests, execs: execStats.count });
const delta = (a: ReturnType<typeof counts>) => {
  const b = counts();
  return {
    ruleDumps: b.ruleDumps - a.ruleDumps,
    ruleGets: b.ruleGets - a.ruleGets,
    execs: b.execs - a.execs,
  };
};

describe('spoof check records (bridge nat)', () => {
  test('setup records the handles of its 4 rules, one nft process, no listing', () => {
    for (let i = 0; i < 4; i++) {
      const c0 = counts();
      setup(i);
      const d = delta(c0);
      assert.equal(d.execs, 1, 'setup ran only `nft -f -` (no `nft -j list`)');
      assert.equal(d.ruleDumps, 0);
    }
    const jumps = prerouting();
    for (let i = 0; i < 4; i++) {
      const { ifaceChain, comment } = spoofCheckNames(ref(i));
      const rec = readRecord(i);
      assert.equal(rec.comment, comment);
      assert.equal(rec.rules.length, 4);
      const base = rec.rules.filter((r) => r.chain === 'PREROUTING');
      assert.equal(base.length, 1);
      assert.deepEqual([Number.parseInt(base[0]!.handle, 16)], jumps.get(ifaceChain));
    }
  });

  test('repeated setup replaces its jump through the record (no listing, no duplicate)', () => {
    const before = prerouting().get(spoofCheckNames(ref(1)).ifaceChain);
    const c0 = counts();
    setup(1);
    const d = delta(c0);
    assert.equal(d.execs, 1);
    assert.equal(d.ruleDumps, 0);
    assert.ok(d.ruleGets >= 1, 'the recorded rules were checked by handle');
    const afterJumps = prerouting().get(spoofCheckNames(ref(1)).ifaceChain);
    assert.equal(afterJumps?.length, 1);
    assert.notDeepEqual(afterJumps, before);
    assert.deepEqual(
      [Number.parseInt(readRecord(1).rules.find((r) => r.chain === 'PREROUTING')!.handle, 16)],
      afterJumps,
    );
  });

  test('teardown deletes exactly this port’s jump and chains by handle: no dump, no nft process', () => {
    const c0 = counts();
    teardownSpoofCheck(ref(2), ns);
    const d = delta(c0);
    assert.deepEqual(d, { ruleDumps: 0, ruleGets: 1, execs: 0 });
    assert.deepEqual(objectsOf(2), ABSENT);
    for (const i of [0, 1, 3]) assert.deepEqual(objectsOf(i), PRESENT, `port ${i} intact`);
    assert.equal(existsSync(recordPath(2)), false, 'record removed');
    teardownSpoofCheck(ref(2), ns); // already gone: fine
  });

  test('no record (setup by the Go plugin or an older cnikit): teardown lists, removes only its own', () => {
    setup(2);
    unlinkSync(recordPath(2));
    const c0 = counts();
    teardownSpoofCheck(ref(2), ns);
    assert.ok(delta(c0).execs >= 2, 'listed the table and ran nft -f -');
    assert.deepEqual(objectsOf(2), ABSENT);
    for (const i of [0, 1, 3]) assert.deepEqual(objectsOf(i), PRESENT);
  });

  test('stale record (its handle now held by another port’s jump): the comment check refuses, the listing is used', () => {
    setup(2);
    const rec = readRecord(2);
    const other = prerouting().get(spoofCheckNames(ref(3)).ifaceChain)![0]!;
    for (const r of rec.rules) if (r.chain === 'PREROUTING') r.handle = other.toString(16).padStart(16, '0');
    writeFileSync(recordPath(2), JSON.stringify(rec));
    const c0 = counts();
    teardownSpoofCheck(ref(2), ns);
    assert.ok(delta(c0).ruleGets >= 1);
    assert.deepEqual(objectsOf(2), ABSENT);
    for (const i of [0, 1, 3]) assert.deepEqual(objectsOf(i), PRESENT, `port ${i} intact`);
    assert.equal(existsSync(recordPath(2)), false);
  });

  test('a jump to its chain that nobody recorded: the kernel refuses the chain deletion, the listing removes both', () => {
    setup(2);
    const { ifaceChain, comment } = spoofCheckNames(ref(2));
    env.sb.exec('nft', [
      'add rule bridge nat PREROUTING iifname "vsp2x" jump',
      ifaceChain,
      `comment "${comment}"`,
    ]);
    assert.equal(prerouting().get(ifaceChain)?.length, 2);
    teardownSpoofCheck(ref(2), ns);
    assert.deepEqual(objectsOf(2), ABSENT);
    for (const i of [0, 1, 3]) assert.deepEqual(objectsOf(i), PRESENT);
  });

  test('a pending record (an ADD killed in its transaction): the listing is used', () => {
    setup(2);
    writeFileSync(
      recordPath(2),
      JSON.stringify({ v: 1, comment: spoofCheckNames(ref(2)).comment, pending: true }),
    );
    teardownSpoofCheck(ref(2), ns);
    assert.deepEqual(objectsOf(2), ABSENT);
    assert.equal(existsSync(recordPath(2)), false);
    for (const i of [0, 1, 3]) assert.deepEqual(objectsOf(i), PRESENT);
  });

  test('GC tears the stale ports down through their records and removes the records', () => {
    // no interface vsp* exists in the namespace: every port not valid is stale
    gcSpoofCheck(new Set([ref(0)]), ns);
    assert.deepEqual(objectsOf(0), PRESENT);
    for (const i of [1, 3]) {
      assert.deepEqual(objectsOf(i), ABSENT);
      assert.equal(existsSync(recordPath(i)), false, `record ${i} removed`);
    }
    assert.equal(existsSync(recordPath(0)), true);
    teardownSpoofCheck(ref(0), ns);
    assert.deepEqual([...chains()], ['PREROUTING']);
  });
});
