/**
 * The kit's pure parts, without root: check selection, the output formats (table, JSON, JUnit), the reproduction
 * line, the error-object rules, the prevResult comparison, result shapes and the iptables undo script.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CHECKS, selectChecks } from './catalog.ts';
import { usage } from './cli.ts';
import {
  type CallRecord,
  capabilitySamples,
  errorObjectProblems,
  Kit,
  type Report,
  SAMPLE_CAPABILITY_ARGS,
} from './kit.ts';
import { formatJson, formatJunit, formatTable, reproLine, shellQuote } from './report.ts';
import { droppedFromPrev, iptablesUndo, resultAddresses, resultShape } from './state.ts';

const call: CallRecord = {
  plugin: '/opt/cni/bin/x',
  env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'c1', CNI_IFNAME: 'eth0' },
  stdin: `{"name":"it's","cniVersion":"1.0.0"}`,
  code: 1,
  stdout: '{"code": 100,\n "msg": "boom <&>"}',
  stderr: '',
};

const report: Report = {
  plugin: '/opt/cni/bin/x',
  type: 'x',
  network: 'net',
  cniVersion: '1.0.0',
  supportedVersions: ['1.0.0'],
  suppliedRuntimeConfig: [],
  results: [
    {
      id: 'version.output',
      status: 'pass',
      detail: 'echoes 1.0.0',
      title: 't1',
      spec: '§2 VERSION',
      durationMs: 5,
    },
    {
      id: 'del.twice',
      status: 'fail',
      detail: 'expected: the second DEL to succeed\nactual: exit 1',
      title: 'DEL twice succeeds',
      spec: '§2 DEL',
      durationMs: 1500,
      repro: [call],
    },
    {
      id: 'gc.valid-attachments',
      status: 'skip',
      detail: 'GC needs 1.1.0',
      title: 't3',
      spec: '§2 GC',
      durationMs: 0,
    },
  ],
  counts: { pass: 1, fail: 1, skip: 1 },
  durationMs: 1505,
};

test('check IDs are unique and --only takes IDs and prefixes', () => {
  assert.equal(new Set(CHECKS.map((c) => c.id)).size, CHECKS.length);
  assert.deepEqual(
    selectChecks(['env.']).map((c) => c.id),
    ['env.command', 'env.containerid', 'env.netns', 'env.ifname'],
  );
  assert.deepEqual(
    selectChecks(['del.twice', 'add.1.*']).map((c) => c.id),
    ['add.1.0.0', 'add.1.1.0', 'del.twice'],
  );
  assert.equal(selectChecks(undefined).length, CHECKS.length);
  assert.throws(() => selectChecks(['del.thrice']), /unknown check "del\.thrice"/);
  for (const c of CHECKS) {
    assert.ok(c.spec.length > 0 && c.explain.length > 40, c.id);
    assert.ok(usage().includes(`  ${c.id} — ${c.title}`), `usage explains ${c.id}`);
  }
});

test('the reproduction line quotes for a shell and shortens a huge stdin', () => {
  assert.equal(shellQuote('eth0'), 'eth0');
  assert.equal(shellQuote(`it's`), `'it'\\''s'`);
  assert.equal(
    reproLine(call),
    `printf '%s' '{"name":"it'\\''s","cniVersion":"1.0.0"}' | env -i CNI_COMMAND=DEL CNI_CONTAINERID=c1 CNI_IFNAME=eth0 /opt/cni/bin/x`,
  );
  const big = reproLine({ ...call, stdin: 'A'.repeat(10_000) });
  assert.match(big, /\(stdin shortened: 10000 bytes in all, the first 200 shown\)$/);
  assert.ok(big.length < 600);
});

test('table, JSON list and JUnit XML', () => {
  const table = formatTable(report);
  assert.match(table, /^del\.twice\s+FAIL\s+§2 DEL\s+expected: the second DEL to succeed$/m);
  assert.match(table, /^1 passed, 1 failed, 1 skipped \(1\.5 s\)$/m);
  assert.match(
    table,
    /FAIL del\.twice — DEL twice succeeds \(§2 DEL\)\n {2}expected: .*\n {2}actual: exit 1\n {2}reproduce:\n {4}printf/,
  );
  assert.match(table, /it answered: exit 1; stdout \{"code":100,"msg":"boom <&>"\}/);
  const list = JSON.parse(formatJson(report));
  assert.deepEqual(
    list.map((x: { id: string; status: string }) => [x.id, x.status]),
    [
      ['version.output', 'pass'],
      ['del.twice', 'fail'],
      ['gc.valid-attachments', 'skip'],
    ],
  );
  assert.deepEqual(list[1].repro, [{ env: call.env, stdin: call.stdin, plugin: call.plugin }]);
  const xml = formatJunit([report]);
  assert.match(
    xml,
    /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="cnikit conformance" tests="3" failures="1" errors="0" skipped="1">/,
  );
  assert.match(xml, /<testcase classname="conformance\.x" name="version\.output" time="0\.005"\/>/);
  assert.match(xml, /<skipped message="GC needs 1\.1\.0"\/>/);
  assert.match(
    xml,
    /<failure message="DEL twice succeeds \(§2 DEL\)" type="conformance">expected: the second DEL/,
  );
  assert.match(xml, /boom &lt;&amp;&gt;/);
  assert.doesNotMatch(xml, /boom <&>/);
});

test('the table says which runtimeConfig the kit supplied for declared capabilities', () => {
  assert.doesNotMatch(formatTable(report), /runtimeConfig supplied/);
  const table = formatTable({
    ...report,
    suppliedRuntimeConfig: [{ type: 'portmap', capability: 'portMappings', value: [{ hostPort: 1 }] }],
  });
  assert.match(
    table,
    /^runtimeConfig supplied by the kit for declared capabilities the list gives none for: portmap portMappings=\[\{"hostPort":1\}\]$/m,
  );
});

test('capability samples: supplied for declared capabilities without runtimeConfig; an unknown one is refused', () => {
  assert.deepEqual(capabilitySamples({ type: 'portmap' }), {});
  assert.deepEqual(capabilitySamples({ type: 'portmap', capabilities: { portMappings: true } }), {
    portMappings: SAMPLE_CAPABILITY_ARGS.portMappings,
  });
  // the list's own runtimeConfig wins; a capability switched off gets nothing
  assert.deepEqual(
    capabilitySamples({
      type: 'portmap',
      capabilities: { portMappings: true, bandwidth: false },
      runtimeConfig: { portMappings: [{ hostPort: 9, containerPort: 9, protocol: 'udp' }] },
    }),
    {},
  );
  assert.throws(
    () => capabilitySamples({ type: 'mine', capabilities: { 'example.com/thing': true } }),
    /the plugin "mine" declares the capability "example\.com\/thing" and the list gives no runtimeConfig for it; .*add "runtimeConfig": \{"example\.com\/thing": …\}/,
  );
  // the kit refuses to start on it (exit 2 from the CLI), instead of passing a plugin it never exercised
  assert.throws(
    () =>
      new Kit({
        plugin: '/nonexistent/mine',
        config: {
          cniVersion: '1.0.0',
          name: 'n',
          plugins: [{ type: 'mine', capabilities: { 'example.com/thing': true } }],
        },
      }),
    /declares the capability "example\.com\/thing"/,
  );
});

test('error objects: one JSON object with code and msg, no stack trace', () => {
  assert.deepEqual(errorObjectProblems({ code: 1, stdout: '{"code":7,"msg":"bad","details":"x"}' }), []);
  assert.deepEqual(
    errorObjectProblems({ code: 1, stdout: '{"cniVersion":"1.0.0","code":7,"msg":"bad"}' }),
    [],
  );
  assert.deepEqual(errorObjectProblems({ code: 0, stdout: '{"code":7,"msg":"bad"}' }), ['exit status 0']);
  assert.deepEqual(errorObjectProblems({ code: 1, stdout: '' }), ['nothing on stdout']);
  assert.deepEqual(errorObjectProblems({ code: 1, stdout: '{"code":"7","msg":"x","extra":1}' }), [
    'the error object has no numeric code',
    'the error object has other keys: extra',
  ]);
  assert.deepEqual(
    errorObjectProblems({ code: 2, stdout: 'panic: runtime error\n\ngoroutine 1 [running]:\n' }),
    [
      'a stack trace on stdout',
      'stdout is not one JSON object: "panic: runtime error\\n\\ngoroutine 1 [running]:\\n"',
    ],
  );
  assert.deepEqual(
    errorObjectProblems({
      code: 1,
      stdout: '{"code":999,"msg":"Error: x\\n    at f (/a/b.js:1:2)"}\n',
    }),
    [],
    'a stack trace inside a JSON string is text the plugin chose, not a trace printed on stdout',
  );
});

test('prevResult pass-through, result shapes and addresses', () => {
  const prev = {
    interfaces: [{ name: 'br0' }, { name: 'eth0', sandbox: '/run/netns/c' }],
    ips: [{ address: '10.0.0.2/24', interface: 1 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
    dns: { nameservers: ['10.0.0.53'] },
  };
  assert.deepEqual(droppedFromPrev(prev, { ...prev, interfaces: [...prev.interfaces, { name: 'x' }] }), []);
  assert.deepEqual(droppedFromPrev(prev, { cniVersion: '1.0.0', interfaces: [{ name: 'br0' }] }), [
    'interface eth0 (sandbox /run/netns/c)',
    'address 10.0.0.2/24',
    'route 0.0.0.0/0 via 10.0.0.1',
    'dns nameserver 10.0.0.53',
  ]);
  const a = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'veth1' }, { name: 'eth0', sandbox: '/x' }],
    ips: [{ address: '10.0.0.2/24', interface: 1 }],
  };
  const b = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'veth2' }, { name: 'eth0', sandbox: '/x' }],
    ips: [{ address: '10.0.0.3/24', interface: 1 }],
  };
  assert.deepEqual(resultShape(a), resultShape(b));
  assert.notDeepEqual(resultShape(a), resultShape({ ...b, ips: [{ address: 'fd00::3/64', interface: 1 }] }));
  assert.deepEqual(
    resultAddresses({
      ips: [{ address: '10.0.0.2/24' }, { address: '127.0.0.1/8' }, { address: '::1/128' }],
    }),
    ['10.0.0.2'],
  );
});

test('iptables undo: rules ADD added go, chains it created are flushed and removed, old rules stay', () => {
  const before = [
    '*nat',
    ':POSTROUTING ACCEPT [0:0]',
    '-A POSTROUTING -j OLD',
    'COMMIT',
    '*filter',
    ':FORWARD ACCEPT [0:0]',
    'COMMIT',
    '',
  ].join('\n');
  const after = [
    '*nat',
    ':POSTROUTING ACCEPT [0:0]',
    ':CNI-abc - [0:0]',
    '-A POSTROUTING -j OLD',
    '-A POSTROUTING -s 10.0.0.2/32 -m comment --comment "name: \\"net\\" id: \\"c1\\"" -j CNI-abc',
    '-A CNI-abc -d 10.0.0.0/24 -j ACCEPT',
    'COMMIT',
    '*filter',
    ':FORWARD ACCEPT [0:0]',
    'COMMIT',
    '',
  ].join('\n');
  assert.equal(
    iptablesUndo(before, after),
    '*nat\n-D POSTROUTING -s 10.0.0.2/32 -m comment --comment "name: \\"net\\" id: \\"c1\\"" -j CNI-abc\n-F CNI-abc\n-X CNI-abc\nCOMMIT\n',
  );
  assert.equal(iptablesUndo(after, after), '');
});

test('docs/conformance.md lists every check with its spec section', () => {
  const doc = readFileSync(new URL('../../../docs/conformance.md', import.meta.url), 'utf8');
  for (const c of CHECKS)
    assert.ok(doc.includes(`| \`${c.id}\` | ${c.title} | [${c.spec}]`), `docs: ${c.id}`);
});
