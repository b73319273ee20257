// scripts/run-tests.mjs: the project allows no skipped test, so a skip fails the run (with the count in the summary);
// each file's end is announced on stderr as it happens, with what failed in it (scripts/test-progress.mjs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  labRows,
  NO_CONFORMANCE_ROW,
  pluginNames,
  pluginTestFiles,
  pluginTests,
  SHARED,
} from './plugin-tests.mjs';

const runner = fileURLToPath(new URL('./run-tests.mjs', import.meta.url));
const fixture = (name: string) => `scripts/testdata/run-tests-${name}.fixture.ts`;
const run = (...files: string[]) =>
  spawnSync(process.execPath, [runner, ...files], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    // NODE_TEST_CONTEXT would make the inner node --test think it runs inside this file's test and run nothing
    env: { ...process.env, NODE_OPTIONS: '', NODE_TEST_CONTEXT: undefined },
  });

test('a skipped test fails the run: exit 1, the summary counts it and says why', () => {
  const r = run(fixture('skip'));
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^ℹ pass 1$/m);
  assert.match(r.stdout, /^ℹ skipped 1$/m);
  assert.match(r.stdout, /^✖ 1 test\(s\) skipped or todo: the project allows none/m);
});

test('without skips the same run passes: exit 0, skipped 0, no complaint', () => {
  const r = run(fixture('pass'));
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ℹ skipped 0$/m);
  assert.doesNotMatch(r.stdout, /skipped or todo/);
});

test('each file is announced on stderr when it ends, in completion order, with its mark and the count', () => {
  // the slow file is listed first and ends last (it waits for the other two processes to be gone)
  const pids = mkdtempSync(join(tmpdir(), 'cnikit-fixture-pids-'));
  process.env.CNIKIT_FIXTURE_PIDS = pids;
  let r: ReturnType<typeof run>;
  try {
    r = run(fixture('slow'), fixture('fail'), fixture('pass'));
  } finally {
    delete process.env.CNIKIT_FIXTURE_PIDS;
    rmSync(pids, { recursive: true, force: true });
  }
  assert.equal(r.status, 1, r.stdout + r.stderr);
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('▸ file '));
  assert.equal(lines.length, 3, r.stderr);
  assert.match(
    lines[2] ?? '',
    /^▸ file 3\/3 ✔ scripts\/testdata\/run-tests-slow\.fixture\.ts \(\d+\.\d s; \d+ s into the run\)$/,
  );
  const fail = lines.find((l) => l.includes('run-tests-fail'));
  assert.match(fail ?? '', /^▸ file [12]\/3 ✖ /);
  // under it, what failed, with the first line of the error (before the slow file's line: not held back)
  const after = r.stderr.split('\n').slice(r.stderr.split('\n').indexOf(fail ?? '') + 1);
  assert.match(after[0] ?? '', /^ {4}✖ fails: Expected values to be strictly equal:$/);
  assert.match(after[1] ?? '', /^▸ file /);
  assert.match(lines.find((l) => l.includes('run-tests-pass')) ?? '', /^▸ file [12]\/3 ✔ /);
  // the spec reporter's output stays on stdout, without these lines
  assert.match(r.stdout, /^ℹ fail 1$/m);
  assert.doesNotMatch(r.stdout, /▸ file/);
});

test('CNIKIT_TEST_POOL=1 (what --k8s does): each file its own node --test, every file reported, the counts summed', () => {
  const r = spawnSync(process.execPath, [runner, fixture('slow'), fixture('fail'), fixture('pass')], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      NODE_TEST_CONTEXT: undefined,
      CNIKIT_TEST_POOL: '1',
      CNIKIT_TEST_CONCURRENCY: '2',
    },
  });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^ℹ 3 file\(s\), 2 at a time, longest first: /m);
  const lines = r.stdout.split('\n').filter((l) => /^ℹ file \d\/3 /.test(l));
  assert.equal(lines.length, 3, r.stdout);
  assert.match(lines.find((l) => l.includes('run-tests-fail')) ?? '', /^ℹ file [1-3]\/3 ✖ /);
  assert.match(lines.find((l) => l.includes('run-tests-slow')) ?? '', /^ℹ file [1-3]\/3 ✔ .*: \d+\.\d s /);
  // the last block sums the three files' counts
  const total = r.stdout.slice(r.stdout.lastIndexOf('all of them:'));
  assert.match(total, /^ℹ tests 3$/m);
  assert.match(total, /^ℹ pass 2$/m);
  assert.match(total, /^ℹ fail 1$/m);
});

test('host state diff: a module default link or a new sysctl key is a note; a changed value or a new link is not', async () => {
  const { diffHostState } = await import('./host-state.mjs');
  const empty = { links: [], addresses: [], routes: [], rules: [], iptables: [], nftables: [] };
  const before = { ...empty, links: ['lo kind=none UP'], sysctls: { 'net/ipv4/ip_forward': '0' } };
  const after = {
    ...empty,
    links: ['lo kind=none UP', 'sit0 kind=sit', 'veth9 kind=veth'],
    sysctls: {
      'net/ipv4/ip_forward': '1',
      'net/bridge/bridge-nf-call-iptables': '1',
      'net/ipv4/conf/veth9/forwarding': '0',
    },
  };
  const d = diffHostState(before, after);
  assert.deepEqual(d.problems, ['links: added veth9 kind=veth', 'sysctls: net.ipv4.ip_forward: 0 -> 1']);
  assert.deepEqual(d.notes, [
    'links: sit0 kind=sit appeared (created by a kernel module a test loaded, in every namespace)',
    'sysctls: net.bridge.bridge-nf-call-iptables = 1 appeared (a kernel module was loaded)',
  ]);
  // a module link that a test brought UP is a change
  assert.deepEqual(
    diffHostState(before, { ...after, links: [...before.links, 'sit0 kind=sit UP'], sysctls: before.sysctls })
      .problems,
    ['links: added sit0 kind=sit UP'],
  );
});

describe('--plugin NAME: the inner loop (scripts/plugin-tests.mjs)', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));

  test('every plugin has its own tests and a conformance row; every file the map names exists', () => {
    const names = pluginNames(root);
    assert.equal(
      names.length,
      readdirSync(join(root, 'plugins')).length,
      'every plugins/<name> has src/index.ts',
    );
    for (const p of names) {
      const t = pluginTests(root, p);
      assert.ok(t.unit.length + t.kernel.length > 0, `${p}: no test under plugins/${p}/`);
      if (p in NO_CONFORMANCE_ROW)
        assert.equal(t.conformance, undefined, `${p} has a row: drop it from NO_CONFORMANCE_ROW`);
      else assert.ok(t.conformance, `${p}: no test-netns/conformance/${p}.conflist`);
      for (const f of pluginTestFiles(root, p)) assert.ok(existsSync(join(root, f)), `${p}: ${f}`);
    }
    assert.deepEqual(pluginTests(root, 'bridge').blackBox, ['test-netns/bridge.test.ts']);
    assert.deepEqual(pluginTests(root, 'host-local').blackBox, ['test-netns/host-local-store.test.ts']);
    assert.deepEqual(pluginTests(root, 'macvlan').blackBox, ['test-netns/stacked.test.ts']);
    assert.equal(pluginTests(root, 'macvlan').conformance?.file, 'test-netns/conformance-lab.test.ts');
    assert.equal(pluginTests(root, 'bridge').conformance?.file, 'test-netns/conformance.test.ts');
  });

  test('every black-box file is one plugin’s (by name or marker) or listed as shared, with why', () => {
    const all = readdirSync(join(root, 'test-netns'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.test.ts') && !f.endsWith('.release.test.ts') && !f.endsWith('.k8s.test.ts'))
      .map((f) => `test-netns/${f}`);
    const claimed = new Set(pluginNames(root).flatMap((p) => pluginTests(root, p).blackBox));
    assert.deepEqual(
      all.filter((f) => !claimed.has(f) && !(f in SHARED)),
      [],
      'name it test-netns/<plugin>[-…].test.ts, give it a `// cnikit-test-plugins:` line, or add it to SHARED',
    );
    for (const f of Object.keys(SHARED)) assert.ok(existsSync(join(root, f)), `SHARED names a missing ${f}`);
    assert.deepEqual(
      [...claimed].filter((f) => f in SHARED),
      [],
    );
  });

  test('the lab rows read from conformance-matrix.ts are its LAB_ROWS', async () => {
    const { LAB_ROWS } = await import('../test-netns/conformance-matrix.ts');
    assert.deepEqual(labRows(root), Object.keys(LAB_ROWS).sort());
  });

  test("a new plugin's files are found without a list: its directory, its black-box names, its marker, its row", () => {
    const r = mkdtempSync(join(tmpdir(), 'cnikit-plugin-tests-'));
    try {
      const put = (p: string, text = '') => {
        mkdirSync(dirname(join(r, p)), { recursive: true });
        writeFileSync(join(r, p), text);
      };
      put('plugins/newp/src/index.ts');
      put('plugins/newp/src/config.test.ts');
      put('plugins/newp/src/newp.kernel.test.ts');
      put('plugins/other/src/index.ts');
      put('test-netns/newp.test.ts');
      put('test-netns/newp-extra.test.ts');
      put('test-netns/newpx.test.ts');
      put(
        'test-netns/multi.test.ts',
        '// cnikit-kernel-features: dummy\n// cnikit-test-plugins: other newp\n',
      );
      put('test-netns/conformance/newp.conflist', '{}');
      put(
        'test-netns/conformance-matrix.ts',
        "export const LAB_ROWS: Record<string, string[]> = {\n  newp: ['dummy'],\n};\n",
      );
      assert.deepEqual(pluginNames(r), ['newp', 'other']);
      assert.deepEqual(pluginTests(r, 'newp'), {
        unit: ['plugins/newp/src/config.test.ts'],
        kernel: ['plugins/newp/src/newp.kernel.test.ts'],
        blackBox: ['test-netns/multi.test.ts', 'test-netns/newp-extra.test.ts', 'test-netns/newp.test.ts'],
        conformance: { file: 'test-netns/conformance-lab.test.ts', row: 'newp' },
      });
      assert.equal(pluginTests(r, 'other').conformance, undefined);
    } finally {
      rmSync(r, { recursive: true, force: true });
    }
  });

  test('an unknown plugin is refused with the list of names (exit 2), before anything is built or run', () => {
    const r = spawnSync(process.execPath, [runner, '--plugin', 'nope'], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '', NODE_TEST_CONTEXT: undefined },
    });
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /--plugin "nope": no such plugin \(plugins\/<name>\/src\/index\.ts\): bandwidth, bridge,/,
    );
  });
});
