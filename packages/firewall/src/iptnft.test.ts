// The in-process iptables-nft writer's planning, without root: which scripts it takes and which it leaves to
// iptables-restore (the byte-for-byte proof against iptables-restore is plugins/portmap/src/iptnft.kernel.test.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { encodeRule, planScript, versionInBinary } from './iptnft.ts';

const none = () => false;
const names = (args: string[], family: 4 | 6 = 4) => encodeRule(family, args).exprs.map((e) => e.name);

test('encodeRule: native matches, compat matches/targets, a counter before the verdict', () => {
  assert.deepEqual(names(['-s', '10.1.2.2', '-j', 'CNI-abc', '-m', 'comment', '--comment', 'x']), [
    'payload',
    'cmp',
    'match',
    'counter',
    'immediate',
  ]);
  // a prefix that is not byte-aligned is masked; -p first, then -s/-d, then the matches in order
  assert.deepEqual(names(['!', '-d', '224.0.0.0/4', '-j', 'MASQUERADE']), [
    'payload',
    'bitwise',
    'cmp',
    'counter',
    'target',
  ]);
  assert.deepEqual(
    names(['-d', '10.0.0.1', '-p', 'tcp', '--dport', '80', '-j', 'DNAT', '--to-destination', '10.1.2.2:80']),
    ['meta', 'cmp', 'payload', 'cmp', 'payload', 'cmp', 'counter', 'target'],
  );
  assert.deepEqual(encodeRule(4, ['-p', 'sctp', '--dport', '5', '-j', 'ACCEPT']).proto, 132);
  assert.deepEqual(names(['-s', '0.0.0.0/0', '-j', 'ACCEPT']), ['counter', 'immediate']);
  assert.deepEqual(names(['-s', '::/0', '-d', 'fd00::1/64', '-j', 'ACCEPT'], 6), [
    'payload',
    'cmp',
    'counter',
    'immediate',
  ]);
});

test('encodeRule declines what it does not reproduce exactly', () => {
  for (const args of [
    ['-i', 'eth0', '-j', 'ACCEPT'],
    ['-m', 'iprange', '--src-range', '1.1.1.1-1.1.1.2', '-j', 'ACCEPT'],
    ['!', '-p', 'tcp', '-j', 'ACCEPT'],
    ['-p', 'tcp', '!', '--dport', '80', '-j', 'ACCEPT'],
    ['-p', 'tcp', '--dport', '80:90', '-j', 'ACCEPT'],
    ['--dport', '80', '-j', 'ACCEPT'],
    ['-j', 'LOG'],
    ['-j', 'MARK', '--set-mark', '1'],
    ['-m', 'comment', '-j', 'ACCEPT'],
    ['-m', 'comment', '--comment', 'x'.repeat(256), '-j', 'ACCEPT'],
    ['!', '-s', '0.0.0.0/0', '-j', 'ACCEPT'],
    ['-s', '10.0.0.0/255.0.0.0', '-j', 'ACCEPT'],
    ['-s', 'fd00::1', '-j', 'ACCEPT'],
  ])
    assert.throws(() => encodeRule(4, args), Error, args.join(' '));
});

test('planScript: chains, rules, built-in chains created on first use, flush and delete', () => {
  const exists = new Map([
    ['nat', true],
    ['nat CNI-old', true],
  ]);
  const plan = planScript(
    4,
    '*nat\n:CNI-x - [0:0]\n-A CNI-x -j ACCEPT\n-I POSTROUTING 1 -j CNI-x\n-A POSTROUTING -j RETURN\n-F CNI-old\n-X CNI-old\nCOMMIT\n',
    (t, c) => exists.get(c === undefined ? t : `${t} ${c}`) ?? false,
  );
  // NEWCHAIN CNI-x, NEWRULE, NEWCHAIN POSTROUTING (once), NEWRULE ×2, DELRULE (flush), DELRULE + DELCHAIN
  assert.deepEqual(
    plan.map((m) => m.type),
    [3, 6, 3, 6, 6, 8, 8, 5],
  );
  // a missing table is created first
  assert.deepEqual(
    planScript(6, '*filter\n:CNI-y - [0:0]\nCOMMIT\n', none).map((m) => m.type),
    [0, 3],
  );
});

test('planScript declines: -D, inserts below the top, DROP in nat, an existing chain, unknown tables and lines', () => {
  const has = (_t: string, c?: string) => c === undefined || c === 'CNI-x';
  for (const script of [
    '*nat\n-D CNI-x -j ACCEPT\nCOMMIT\n',
    '*nat\n-I CNI-x 2 -j ACCEPT\nCOMMIT\n',
    '*nat\n-A CNI-x -j DROP\nCOMMIT\n',
    '*nat\n:CNI-x - [0:0]\nCOMMIT\n',
    '*nat\n-A CNI-missing -j ACCEPT\nCOMMIT\n',
    '*mangle\n:CNI-z - [0:0]\nCOMMIT\n',
    '*nat\n-F POSTROUTING\nCOMMIT\n',
    '*nat\n-Z\nCOMMIT\n',
    '*nat\n:CNI-z - [0:0]\n',
    ':CNI-z - [0:0]\n',
    '*nat\n-A CNI-x -m comment --comment "unterminated -j ACCEPT\nCOMMIT\n',
    '*nat\n-A CNI-x -m comment --comment "a \\x b" -j ACCEPT\nCOMMIT\n',
    '*nat\n-A CNI-x -m comment --comment a\\b -j ACCEPT\nCOMMIT\n',
  ])
    assert.throws(() => planScript(4, script, has), Error, script);
  // the kernel not answering is not "missing"
  assert.throws(() => planScript(4, '*nat\n:CNI-z - [0:0]\nCOMMIT\n', () => undefined));
});

test('versionInBinary: the one `x.y.z (nf_tables)` string of a binary', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-iptnft-'));
  const f = (name: string, body: string) => {
    writeFileSync(join(dir, name), Buffer.from(body, 'latin1'));
    return join(dir, name);
  };
  assert.equal(versionInBinary(f('a', '\x7fELF\0junk\x001.8.9 (nf_tables)\0more\0')), '1.8.9');
  assert.equal(versionInBinary(f('b', '\0 1.8.10 (nf_tables)\0')), undefined);
  assert.equal(versionInBinary(f('c', '\x001.8.9 (nf_tables)\0\x001.8.10 (nf_tables)\0')), undefined);
  assert.equal(versionInBinary(f('d', 'nothing')), undefined);
  assert.equal(versionInBinary(join(dir, 'missing')), undefined);
});
