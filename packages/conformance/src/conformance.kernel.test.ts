/**
 * The kit against plugins written for these tests (src/testdata/toy: plain JavaScript, no SDK): the correct plugin
 * passes every check that applies to it; each deliberate defect is failed with the right check ID, and only with the
 * IDs that defect explains. Runs the kit as a user would: through `runConformance` (a child process in its own
 * mount namespace) and through the CLI (exit status, --json, --junit).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { scaled } from '@cnikit/testing';
import {
  CHECKS,
  type ConformanceOptions,
  type Report,
  runConformance as runKit,
  SAMPLE_CAPABILITY_ARGS,
} from './index.ts';

const TESTDATA = fileURLToPath(new URL('./testdata/', import.meta.url));
const TOY = join(TESTDATA, 'toy');
const TOY_CHAIN = join(TESTDATA, 'toy-chain');
const BIN = fileURLToPath(new URL('./bin.ts', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'cnikit-conformance-test-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** The kit's per-call timeout (its default, 30 s) stretched like every bound of the tests (the kernel lab's VM). */
const CALL_TIMEOUT_S = scaled(30_000) / 1000;
const runConformance = (o: ConformanceOptions) => runKit({ timeoutSeconds: CALL_TIMEOUT_S, ...o });

function toyList(plugin: Record<string, unknown> = {}, chain?: Record<string, unknown>) {
  return {
    cniVersion: '1.1.0',
    name: 'toynet',
    plugins: [{ type: 'toy', ...plugin }, ...(chain ? [{ type: 'toy-chain', mode: 'chain', ...chain }] : [])],
  };
}

const failed = (r: Report) =>
  r.results
    .filter((x) => x.status === 'fail')
    .map((x) => x.id)
    .sort();
const byId = (r: Report, id: string) => {
  const x = r.results.find((c) => c.id === id);
  assert.ok(x, `${id} in the report`);
  return x;
};

describe('the kit against plugins written for the tests', () => {
  test('a correct plugin passes every check that applies to it (add.prevresult: skipped, it is first)', async () => {
    const r = await runConformance({ plugin: TOY, config: toyList(), concurrency: 4 });
    assert.deepEqual(
      failed(r),
      [],
      JSON.stringify(
        r.results.filter((x) => x.status === 'fail'),
        null,
        2,
      ),
    );
    assert.deepEqual(
      r.results.map((x) => x.id),
      CHECKS.map((c) => c.id),
    );
    assert.deepEqual(
      r.results.filter((x) => x.status === 'skip').map((x) => x.id),
      ['add.prevresult'],
    );
    assert.match(byId(r, 'check.tampered').detail, /deleted the container link\(s\) eth0: CHECK failed/);
    assert.match(
      byId(r, 'gc.valid-attachments').detail,
      /kept [1-9]\d* line\(s\) of A, removed [1-9]\d* of B/,
    );
    assert.deepEqual(r.supportedVersions, ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });

  test('a DEL that fails the second time: del.twice (and del.without-add, the same bug)', async () => {
    const r = await runConformance({
      plugin: TOY,
      config: toyList({ defect: 'del-twice' }),
      only: ['del.*', 'check.after-add'],
    });
    assert.deepEqual(failed(r), ['del.twice', 'del.without-add']);
    const d = byId(r, 'del.twice');
    assert.match(d.detail, /expected: the second DEL to succeed\nactual: exit 1; stdout .*nothing to delete/);
    // the failure carries the exact call: DEL with the environment and stdin that reproduce it
    const call = d.repro?.[0];
    assert.equal(call?.env.CNI_COMMAND, 'DEL');
    assert.match(call?.env.CNI_CONTAINERID ?? '', /^cfm-[0-9a-f]{8}$/);
    assert.equal(JSON.parse(call?.stdin ?? '{}').defect, 'del-twice');
    assert.equal(byId(r, 'del.cleanup').status, 'pass');
  });

  test('a failed ADD that leaves a veth on the host: add.failure-clean (and add.ifname-exists), with the leftover link', async () => {
    const r = await runConformance({ plugin: TOY, config: toyList({ defect: 'leak' }), only: ['add.*'] });
    // the same bug makes the ADD that must fail because eth0 exists leave its veth too
    assert.deepEqual(failed(r), ['add.failure-clean', 'add.ifname-exists']);
    const d = byId(r, 'add.failure-clean').detail;
    assert.match(d, /CNI_NETNS names no namespace: the failed ADD leaves host, container/);
    assert.match(d, /\[host links\]\n\+ \{.*"ifname":"cfv[0-9a-f]{8}p?"/);
    assert.match(d, /a DEL afterwards does remove it/);
  });

  test('an error printed as a stack trace: stdin.malformed', async () => {
    const r = await runConformance({
      plugin: TOY,
      config: toyList({ defect: 'stack-trace' }),
      only: ['stdin.*', 'env.*'],
    });
    assert.deepEqual(failed(r), ['stdin.malformed']);
    assert.match(
      byId(r, 'stdin.malformed').detail,
      /truncated JSON on stdin: [^\n]*\nactual: a stack trace on stdout; stdout is not one JSON object/,
    );
  });

  test('a result in the wrong version: add.<v> for every version but the one it prints', async () => {
    const r = await runConformance({
      plugin: TOY,
      config: toyList({ defect: 'wrong-version' }),
      only: ['add.0.2.0', 'add.0.4.0', 'add.1.0.0', 'add.1.1.0'],
    });
    assert.deepEqual(failed(r), ['add.0.2.0', 'add.0.4.0', 'add.1.1.0']);
    assert.match(
      byId(r, 'add.0.4.0').detail,
      /cniVersion is "1\.0\.0", the request asked for "0\.4\.0"\ndoes not parse as a 0\.4\.0 result/,
    );
    assert.equal(byId(r, 'add.1.0.0').status, 'pass');
  });

  test('a chained plugin that drops prevResult: add.prevresult, naming what is missing', async () => {
    const good = await runConformance({
      plugin: TOY_CHAIN,
      config: toyList({}, {}),
      only: ['add.prevresult'],
    });
    assert.equal(byId(good, 'add.prevresult').status, 'pass', byId(good, 'add.prevresult').detail);
    const r = await runConformance({
      plugin: TOY_CHAIN,
      config: toyList({}, { defect: 'drop-prev' }),
      only: ['add.prevresult', 'add.ifname-exists'],
    });
    assert.deepEqual(failed(r), ['add.prevresult']);
    assert.match(
      byId(r, 'add.prevresult').detail,
      /missing: interface cfv[0-9a-f]{8}, interface eth0 \(sandbox /,
    );
    assert.match(byId(r, 'add.prevresult').detail, /address 10\.123\.0\.\d+\/24/);
    assert.equal(byId(r, 'add.ifname-exists').status, 'skip');
  });
});

describe('configurations the kit must not pass unexercised', () => {
  test('a declared capability without runtimeConfig: the kit supplies a sample, says so, and the plugin is exercised', async () => {
    const r = await runConformance({
      plugin: TOY_CHAIN,
      config: toyList({}, { capabilities: { portMappings: true } }),
      only: ['version.config', 'check.tampered', 'del.cleanup'],
    });
    assert.deepEqual(failed(r), [], JSON.stringify(r.results, null, 2));
    const tampered = byId(r, 'check.tampered');
    assert.equal(tampered.status, 'pass', tampered.detail);
    assert.match(tampered.detail, /toy-chain.*CHECK failed with code 100/s);
    assert.deepEqual(r.suppliedRuntimeConfig, [
      { type: 'toy-chain', capability: 'portMappings', value: SAMPLE_CAPABILITY_ARGS.portMappings },
    ]);
    assert.match(
      byId(r, 'version.config').detail,
      /runtimeConfig supplied by the kit for declared capabilities the list gives none for: toy-chain portMappings=\[\{"hostPort":18080/,
    );
  });

  test('a configuration in a version the plugin does not support: one failure up front, the checks that need it skipped', async () => {
    const r = await runConformance({
      plugin: TOY,
      config: { ...toyList(), cniVersion: '9.9.9' },
      concurrency: 2,
    });
    assert.deepEqual(failed(r), ['version.config'], JSON.stringify(r.results, null, 2));
    assert.match(
      byId(r, 'version.config').detail,
      /cniVersion 9\.9\.9 is not one the plugin supports \(VERSION lists 0\.1\.0, .*, 1\.1\.0\)/,
    );
    const dependents = [
      'add.ifname-exists',
      'add.failure-clean',
      'check.after-add',
      'check.tampered',
      'del.twice',
      'del.without-add',
      'del.netns-gone',
      'del.cleanup',
      'concurrency',
      'determinism',
    ];
    for (const id of dependents) {
      const x = byId(r, id);
      assert.equal(x.status, 'skip', `${id}: ${x.detail}`);
      assert.match(x.detail, /^version\.config failed: the configuration's cniVersion 9\.9\.9 /, id);
    }
    // the checks that pick their own version, and the dispatcher's, still run
    for (const id of ['add.1.1.0', 'add.0.4.0', 'env.containerid', 'stdin.malformed', 'gc.valid-attachments'])
      assert.equal(byId(r, id).status, 'pass', `${id}: ${byId(r, id).detail}`);
  });
});

describe('fixtures and what the kit leaves behind', () => {
  test('a plugin that creates the CNI_NETNS path it gets (like Go sbr 1.1.1): every such file is gone afterwards', async () => {
    const log = join(tmp, 'locks.log');
    const r = await runConformance({
      plugin: TOY,
      config: toyList({ defect: 'netns-lock', lockLog: log }),
      only: ['add.failure-clean', 'del.netns-gone'],
    });
    assert.deepEqual(failed(r), [], JSON.stringify(r.results, null, 2));
    const made = readFileSync(log, 'utf8').trim().split('\n');
    // the path of no namespace (add.failure-clean) and the removed container's path (del.netns-gone)
    assert.ok(
      made.some((p) => /^\/run\/netns\/cnikit-conformance-gone-[0-9a-f]{6}$/.test(p)),
      made.join(', '),
    );
    assert.ok(made.length >= 2, made.join(', '));
    for (const p of made) assert.equal(existsSync(p), false, `${p} was left behind`);
  });

  test('host links, daemons and declared skips: a plugin that needs a master and a daemon passes with them', async () => {
    const needs = { requireHostLink: 'cfmtoypar0', requireFile: '/run/cni/toy.sock' };
    const without = await runConformance({ plugin: TOY, config: toyList(needs), only: ['add.1.1.0'] });
    assert.deepEqual(failed(without), ['add.1.1.0']);
    assert.match(byId(without, 'add.1.1.0').detail, /master cfmtoypar0 not found/);
    const r = await runConformance({
      plugin: TOY,
      config: toyList(needs),
      only: ['add.1.1.0', 'del.*', 'concurrency'],
      fixtures: {
        hostLinks: [{ name: 'cfmtoypar0', type: 'bridge', addresses: ['10.124.0.1/24'] }],
        // a daemon that makes its "socket" after a moment (readyPath is waited for)
        daemons: [
          {
            argv: [
              process.execPath,
              '-e',
              "setTimeout(() => require('fs').writeFileSync('/run/cni/toy.sock', ''), 300); setInterval(() => {}, 1000)",
            ],
            readyPath: '/run/cni/toy.sock',
          },
        ],
        skip: { concurrency: 'the toy shares one master' },
      },
    });
    assert.deepEqual(failed(r), [], JSON.stringify(r.results, null, 2));
    assert.equal(byId(r, 'add.1.1.0').status, 'pass');
    assert.equal(byId(r, 'del.cleanup').status, 'pass');
    const skip = byId(r, 'concurrency');
    assert.equal(skip.status, 'skip');
    assert.equal(skip.detail, 'declared by the fixtures: the toy shares one master');
    // the daemon ran in the kit's private /run/cni, never the machine's
    assert.equal(existsSync('/run/cni/toy.sock'), false);
  });

  test('a container link: CNI_IFNAME exists in every container before the plugin runs', async () => {
    const r = await runConformance({
      plugin: TOY,
      config: toyList(),
      only: ['add.ifname-exists', 'add.1.0.0'],
      fixtures: {
        hostLinks: [{ name: 'cfmtoybr0', type: 'bridge' }],
        containerLink: { master: 'cfmtoybr0' },
      },
    });
    // the toy creates eth0 itself, so with eth0 already there its ADD fails (as it must); the kit does not ask it to
    // fail for an interface the fixtures made
    assert.deepEqual(failed(r), ['add.1.0.0']);
    assert.equal(byId(r, 'add.ifname-exists').status, 'skip');
    assert.match(byId(r, 'add.1.0.0').detail, /container interface eth0 already exists/);
    assert.match(
      byId(r, 'add.ifname-exists').detail,
      /the fixtures make eth0 in every container \(containerLink\)/,
    );
  });
});

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...process.execArgv, BIN, ...args, '--timeout', String(CALL_TIMEOUT_S)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

describe('the CLI', () => {
  test('a failure: exit 1, --json is the list of {id, status, detail}, --junit has the failure; a pass: exit 0', async () => {
    const conf = join(tmp, 'leak.conflist');
    writeFileSync(conf, JSON.stringify(toyList({ defect: 'leak' })));
    const junit = join(tmp, 'report.xml');
    const r = await cli([
      '--plugin',
      TOY,
      '--config',
      conf,
      '--only',
      'add.failure-clean,version.output',
      '--json',
      '--junit',
      junit,
    ]);
    assert.equal(r.code, 1, r.stderr);
    const list = JSON.parse(r.stdout) as Array<{ id: string; status: string; detail: string }>;
    assert.deepEqual(
      list.map((x) => [x.id, x.status]),
      [
        ['version.output', 'pass'],
        ['add.failure-clean', 'fail'],
      ],
    );
    assert.ok(list.every((x) => typeof x.detail === 'string' && x.detail.length > 0));
    const xml = readFileSync(junit, 'utf8');
    assert.match(xml, /<testsuites name="cnikit conformance" tests="2" failures="1" errors="0" skipped="0">/);
    assert.match(
      xml,
      /<testcase classname="conformance\.toy" name="add\.failure-clean" time="[\d.]+">\n\s+<failure /,
    );
    assert.match(xml, /reproduce: printf &apos;%s&apos; &apos;\{&quot;type&quot;:&quot;toy&quot;/);

    const okConf = join(tmp, 'ok.conflist');
    writeFileSync(okConf, JSON.stringify(toyList()));
    const ok = await cli(['--plugin', TOY, '--config', okConf, '--only', 'del.twice']);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /^del\.twice\s+PASS\s+§2 DEL\s+both DELs succeeded$/m);
    assert.match(ok.stdout, /^1 passed, 0 failed, 0 skipped/m);
  });

  test('--help explains every check; usage errors exit 2', async () => {
    const list = join(tmp, 'usage.conflist');
    writeFileSync(list, JSON.stringify(toyList()));
    const badFixtures = join(tmp, 'bad-fixtures.json');
    writeFileSync(badFixtures, JSON.stringify({ hostLinks: [{ name: 'x0', type: 'dummy' }], bogus: 1 }));
    const help = await cli(['--help']);
    assert.equal(help.code, 0);
    for (const c of CHECKS) assert.ok(help.stdout.includes(`  ${c.id} — `), `--help explains ${c.id}`);
    for (const f of ['--host-link NAME:TYPE', '--container-link MASTER', '--skip ID=WHY', '--fixtures FILE'])
      assert.ok(help.stdout.includes(f), `--help explains ${f}`);
    for (const args of [
      ['--config', 'x'],
      ['--plugin', TOY],
      ['--plugin', '/nonexistent/plugin', '--config', 'x'],
      ['--plugin', TOY, '--config', join(tmp, 'missing.conflist')],
      ['--plugin', TOY, '--config', TOY, '--only', 'no.such.check'],
      ['--bogus'],
      ['--plugin', TOY, '--config', list, '--host-link', 'eth0'],
      ['--plugin', TOY, '--config', list, '--host-link', 'a-name-longer-than-15:dummy'],
      ['--plugin', TOY, '--config', list, '--skip', 'concurrency'],
      ['--plugin', TOY, '--config', list, '--skip', 'no.such=reason'],
      ['--plugin', TOY, '--config', list, '--container-link', 'br0'],
      ['--plugin', TOY, '--config', list, '--fixtures', join(tmp, 'missing.json')],
      ['--plugin', TOY, '--config', list, '--fixtures', badFixtures],
    ]) {
      const r = await cli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
    }
  });
});
