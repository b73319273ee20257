// Kernel tests of the jump records (handles.ts): ipMasq ADD records the handle of its POSTROUTING jump, DEL deletes
// it by handle without listing POSTROUTING; a record that does not hold falls back to the listing and never removes
// another container's rule. Everything runs in a private namespace.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { nftRuleRequests } from '@cnikit/netlink/testing';
import { sandboxForFile } from '@cnikit/testing';
import { execStats } from './exec.ts';
import { jumpRecordPath, markNftRulesPending, nftRulesRecordPath } from './handles.ts';
import { gcIPMasq, setupIPMasq, teardownIPMasq } from './ipmasq.ts';
import { formatChainName, nftInstanceComment } from './names.ts';
import { handlesDirForFile } from './testing.ts';

const env = sandboxForFile({ prefix: 'cnikit-delhandles' });
handlesDirForFile(() => env.dir);
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const NET = 'handles-net';
const pod = (i: number) => ({
  ips: [`10.66.0.${i + 2}/24`],
  network: NET,
  ifName: 'eth0',
  containerID: `pod-${i}`,
});
const chainOf = (i: number) => formatChainName(NET, `pod-${i}`);

/** POSTROUTING's rules with their handles (`nft -a`): chain jumped to → handles. */
function postrouting(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const text = env.sb.exec('nft', ['-a', 'list', 'chain', 'ip', 'nat', 'POSTROUTING']).stdout;
  for (const m of text.matchAll(/jump (\S+) # handle (\d+)/g))
    out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  return out;
}
const chainExists = (c: string) =>
  env.sb.exec('nft', ['list', 'chain', 'ip', 'nat', c], { check: false }).status === 0;
const recordOf = (i: number) => jumpRecordPath(4, 'nat', chainOf(i), ns)!;
const readRecord = (i: number) =>
  JSON.parse(readFileSync(recordOf(i), 'utf8')) as {
    v: number;
    jumps: Array<{ from: string; handle: string }>;
  };
const requests = () => ({ ...nftRuleRequests });

describe('ipMasq jump records (iptables-nft)', () => {
  test('ADD records the handle nf_tables gave its POSTROUTING jump; DEL deletes it by handle, no chain listed', () => {
    for (let i = 0; i < 5; i++) setupIPMasq({ backend: 'iptables', ...pod(i), ...ns });
    const rules = postrouting();
    for (let i = 0; i < 5; i++) {
      const rec = readRecord(i);
      assert.equal(rec.v, 1);
      assert.deepEqual(
        rec.jumps.map((j) => ({ from: j.from, handle: BigInt(`0x${j.handle}`).toString() })),
        (rules.get(chainOf(i)) ?? []).map((h) => ({ from: 'POSTROUTING', handle: h })),
        `pod ${i}: the record holds the kernel's handle of its jump`,
      );
    }
    const r0 = requests();
    teardownIPMasq({ ...pod(2), ...ns });
    const r1 = requests();
    assert.equal(r1.ruleDumps - r0.ruleDumps, 0, 'DEL listed no chain');
    assert.equal(r1.ruleGets - r0.ruleGets, 1, 'DEL fetched its one rule by handle');
    const left = postrouting();
    assert.equal(left.has(chainOf(2)), false, 'the jump of pod 2 is gone');
    assert.equal(chainExists(chainOf(2)), false, 'the chain of pod 2 is gone');
    assert.equal(existsSync(recordOf(2)), false, 'the record of pod 2 is gone');
    for (const i of [0, 1, 3, 4])
      assert.deepEqual(left.get(chainOf(i)), rules.get(chainOf(i)), `pod ${i} kept`);
    // idempotent: a second DEL finds nothing and changes nothing
    teardownIPMasq({ ...pod(2), ...ns });
    assert.deepEqual(postrouting(), left);
  });

  test("a stale record (another pod's handle, a deleted rule) falls back to the listing and removes only this pod's rule", () => {
    const before = postrouting();
    // pod 0's record now names pod 1's jump: the by-handle check sees a jump to another chain and declines
    const rec0 = readRecord(0);
    const rec1 = readRecord(1);
    writeFileSync(recordOf(0), JSON.stringify({ v: 1, jumps: rec1.jumps }));
    const r0 = requests();
    teardownIPMasq({ ...pod(0), ...ns });
    const r1 = requests();
    assert.ok(r1.ruleDumps - r0.ruleDumps >= 1, 'the stale record led to the listing');
    const left = postrouting();
    assert.equal(left.has(chainOf(0)), false, 'pod 0 removed');
    assert.equal(chainExists(chainOf(0)), false);
    assert.deepEqual(left.get(chainOf(1)), before.get(chainOf(1)), "pod 1's rule (the stale handle) kept");
    assert.equal(existsSync(recordOf(0)), false);
    // pod 3's record names a handle that no longer exists (pod 0's deleted jump)
    writeFileSync(recordOf(3), JSON.stringify({ v: 1, jumps: rec0.jumps }));
    teardownIPMasq({ ...pod(3), ...ns });
    const left2 = postrouting();
    assert.equal(left2.has(chainOf(3)), false, 'pod 3 removed');
    assert.deepEqual(left2.get(chainOf(1)), before.get(chainOf(1)));
    assert.deepEqual(left2.get(chainOf(4)), before.get(chainOf(4)));
  });

  test('a jump nobody recorded (another writer): the kernel refuses the by-handle transaction, the listing removes both', () => {
    // a second jump to pod 4's chain made by iptables itself (as the Go plugin would on a repeated ADD)
    const c = chainOf(4);
    const add = env.sb.exec('iptables', ['-t', 'nat', '-A', 'POSTROUTING', '-s', '10.66.0.6', '-j', c], {
      check: false,
    });
    assert.equal(add.status, 0, add.stderr);
    assert.equal(postrouting().get(c)?.length, 2);
    const keep = postrouting().get(chainOf(1));
    const r0 = requests();
    teardownIPMasq({ ...pod(4), ...ns });
    const r1 = requests();
    assert.equal(r1.ruleGets - r0.ruleGets, 1, 'the recorded jump was fetched');
    assert.ok(r1.ruleDumps - r0.ruleDumps >= 1, 'then POSTROUTING was listed');
    assert.equal(postrouting().has(c), false, 'both jumps gone');
    assert.equal(chainExists(c), false);
    assert.deepEqual(postrouting().get(chainOf(1)), keep);
  });

  test('an ADD by iptables-restore (CNIKIT_IPTABLES_RESTORE=exec) leaves no record, and removes an older one', () => {
    setupIPMasq({ backend: 'iptables', ...pod(7), ...ns });
    assert.equal(existsSync(recordOf(7)), true);
    teardownIPMasq({ ...pod(7), ...ns });
    const saved = process.env.CNIKIT_IPTABLES_RESTORE;
    process.env.CNIKIT_IPTABLES_RESTORE = 'exec';
    try {
      writeFileSync(recordOf(7), JSON.stringify({ v: 1, jumps: readRecordSafe(1) }));
      setupIPMasq({ backend: 'iptables', ...pod(7), ...ns });
    } finally {
      if (saved === undefined) delete process.env.CNIKIT_IPTABLES_RESTORE;
      else process.env.CNIKIT_IPTABLES_RESTORE = saved;
    }
    assert.equal(existsSync(recordOf(7)), false, 'no record after an exec ADD');
    assert.equal(postrouting().get(chainOf(7))?.length, 1);
    const r0 = requests();
    teardownIPMasq({ ...pod(7), ...ns });
    assert.ok(requests().ruleDumps - r0.ruleDumps >= 1, 'DEL listed POSTROUTING');
    assert.equal(postrouting().has(chainOf(7)), false);
    assert.ok(postrouting().has(chainOf(1)), 'pod 1 kept');
  });

  test('a DEL killed after its transaction leaves a record of deleted rules: the next DEL removes the record', () => {
    setupIPMasq({ backend: 'iptables', ...pod(8), ...ns });
    const rec = readFileSync(recordOf(8), 'utf8');
    teardownIPMasq({ ...pod(8), ...ns });
    writeFileSync(recordOf(8), rec); // as if the process died between the transaction and the unlink
    teardownIPMasq({ ...pod(8), ...ns });
    assert.equal(existsSync(recordOf(8)), false);
    assert.ok(postrouting().has(chainOf(1)), 'pod 1 kept');
  });

  test('GC that removes a stale chain removes its record; the kept pod keeps its record', () => {
    const a = { ips: ['10.66.1.2/24'], network: 'handles-gc', ifName: 'eth0', containerID: 'gc-a' };
    const b = { ...a, ips: ['10.66.1.3/24'], containerID: 'gc-b' };
    setupIPMasq({ backend: 'iptables', ...a, ...ns });
    setupIPMasq({ backend: 'iptables', ...b, ...ns });
    const pa = jumpRecordPath(4, 'nat', formatChainName('handles-gc', 'gc-a'), ns)!;
    const pb = jumpRecordPath(4, 'nat', formatChainName('handles-gc', 'gc-b'), ns)!;
    assert.ok(existsSync(pa) && existsSync(pb));
    gcIPMasq('handles-gc', [{ containerID: 'gc-b', ifName: 'eth0' }], ns);
    assert.equal(existsSync(pa), false, "the GC'd pod's record is gone");
    assert.equal(existsSync(pb), true, "the valid pod's record stays");
    assert.equal(postrouting().has(formatChainName('handles-gc', 'gc-a')), false);
    const r0 = requests();
    teardownIPMasq({ ...b, ...ns });
    assert.equal(requests().ruleDumps - r0.ruleDumps, 0, 'the kept record still serves its DEL');
    assert.equal(existsSync(pb), false);
  });
});

function readRecordSafe(i: number) {
  try {
    return readRecord(i).jumps;
  } catch {
    return [{ from: 'POSTROUTING', handle: '0000000000000001' }];
  }
}

describe('ipMasq rule records (nftables backend)', () => {
  const NNET = 'handles-nft';
  const npod = (i: number) => ({
    ips: [`10.69.0.${i + 2}/24`, `fd69::${i + 2}/64`],
    network: NNET,
    ifName: 'eth0',
    containerID: `npod-${i}`,
  });
  const commentOf = (i: number) => nftInstanceComment(NNET, 'eth0', `npod-${i}`);
  const nrecordOf = (i: number) => nftRulesRecordPath('inet', 'cni_plugins_masquerade', commentOf(i), ns)!;
  /** masq_checks' rules: comment → sorted handles. */
  function masqChecks(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    const text = env.sb.exec('nft', [
      '-a',
      'list',
      'chain',
      'inet',
      'cni_plugins_masquerade',
      'masq_checks',
    ]).stdout;
    for (const m of text.matchAll(/comment "([^"]*)" # handle (\d+)/g))
      out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!].sort());
    return out;
  }
  const recorded = (i: number) =>
    (JSON.parse(readFileSync(nrecordOf(i), 'utf8')) as { rules: Array<{ handle: string }> }).rules
      .map((r) => String(BigInt(`0x${r.handle}`)))
      .sort();
  const counters = () => ({
    execs: execStats.count,
    dumps: nftRuleRequests.ruleDumps,
    gets: nftRuleRequests.ruleGets,
  });

  test("ADD records its rules' handles; re-ADD and DEL use them: no listing (DEL: no nft process either)", () => {
    for (let i = 0; i < 4; i++) setupIPMasq({ backend: 'nftables', ...npod(i), ...ns });
    const before = masqChecks();
    for (let i = 0; i < 4; i++) {
      assert.equal(before.get(commentOf(i))?.length, 2, 'one rule per address');
      assert.deepEqual(recorded(i), before.get(commentOf(i)));
    }
    let c = counters();
    setupIPMasq({ backend: 'nftables', ...npod(0), ...ns });
    assert.deepEqual(
      {
        execs: execStats.count - c.execs,
        dumps: nftRuleRequests.ruleDumps - c.dumps,
        gets: nftRuleRequests.ruleGets - c.gets,
      },
      { execs: 1, dumps: 0, gets: 2 },
      're-ADD: the earlier rules checked by handle, one nft -f -',
    );
    assert.equal(masqChecks().get(commentOf(0))?.length, 2, 'replaced, not duplicated');
    c = counters();
    teardownIPMasq({ ...npod(1), ...ns });
    assert.equal(execStats.count - c.execs, 0, 'no tool process');
    assert.equal(nftRuleRequests.ruleDumps - c.dumps, 0, 'no chain listed');
    const left = masqChecks();
    assert.equal(left.has(commentOf(1)), false);
    assert.equal(existsSync(nrecordOf(1)), false);
    for (const i of [2, 3]) assert.deepEqual(left.get(commentOf(i)), before.get(commentOf(i)));
  });

  test('a foreign or pending record falls back to the listing; GC removes the records of invalid attachments', () => {
    const before = masqChecks();
    writeFileSync(
      nrecordOf(2),
      readFileSync(nrecordOf(3), 'utf8').replace(JSON.stringify(commentOf(3)), JSON.stringify(commentOf(2))),
    );
    teardownIPMasq({ ...npod(2), ...ns });
    let left = masqChecks();
    assert.equal(left.has(commentOf(2)), false, 'npod-2 removed by the listing');
    assert.deepEqual(left.get(commentOf(3)), before.get(commentOf(3)), 'npod-3 kept');
    // a killed ADD: pending record and a rule of its transaction; the next ADD lists and replaces
    assert.ok(markNftRulesPending('inet', 'cni_plugins_masquerade', commentOf(5), ns));
    env.sb.exec('nft', [
      `add rule inet cni_plugins_masquerade masq_checks ip saddr 10.69.0.7 masquerade comment "${commentOf(5)}"`,
    ]);
    setupIPMasq({ backend: 'nftables', ...npod(5), ...ns });
    assert.equal(masqChecks().get(commentOf(5))?.length, 2, "the killed ADD's rule replaced");
    gcIPMasq(NNET, [{ containerID: 'npod-0', ifName: 'eth0' }], ns);
    left = masqChecks();
    assert.deepEqual([...left.keys()], [commentOf(0)]);
    assert.equal(existsSync(nrecordOf(3)), false, 'GC removed the record of npod-3');
    assert.equal(existsSync(nrecordOf(5)), false);
    assert.equal(existsSync(nrecordOf(0)), true);
    teardownIPMasq({ ...npod(0), ...ns });
    assert.deepEqual([...masqChecks().keys()], []);
  });
});
