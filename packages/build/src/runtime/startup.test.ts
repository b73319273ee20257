import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { invokeInProcess } from '@cnikit/skel';
import { ALL_VERSIONS } from '@cnikit/skel/version-call';
import { distBin } from '../../../../test-netns/dist.ts';
import { tableVersions, versionTable } from './first.ts';
import type { LazyPlugin } from './multicall.ts';
import { versionOnly } from './startup.ts';

const meta = { about: 'a', versions: ['1.0.0'] };
const lazy = (name: string, m: LazyPlugin['meta'] | null = meta): LazyPlugin => ({
  name,
  load: () => {
    throw new Error('not loaded on the start-up path');
  },
  ...(m ? { meta: m } : {}),
});
const plugins = [lazy('bridge'), lazy('loopback', { about: 'l', versions: ['0.4.0'] })];
const call = (argv0: string, args: string[] = [], env: Record<string, string> = { CNI_COMMAND: 'VERSION' }) =>
  versionOnly(plugins, {}, { env, argv0, execPath: '/opt/cni/bin/cnikit', args });

describe('the start-up path (runtime/startup.ts): which invocations it answers without the SDK', () => {
  test('VERSION of a plugin by its link name or as `cnikit <plugin>`: the recorded metadata', () => {
    assert.deepEqual(call('/opt/cni/bin/bridge'), meta);
    assert.deepEqual(call('loopback'), { about: 'l', versions: ['0.4.0'] });
    assert.deepEqual(call('/opt/cni/bin/cnikit', ['bridge']), meta);
  });

  test('everything else goes to the multicall entry: other commands, unknown names, the words of cnikit', () => {
    assert.equal(call('/opt/cni/bin/bridge', [], { CNI_COMMAND: 'ADD' }), undefined);
    assert.equal(call('/opt/cni/bin/bridge', [], {}), undefined, 'a bare invocation prints the about text');
    assert.equal(call('/opt/cni/bin/nope'), undefined);
    assert.equal(call('/opt/cni/bin/cnikit', ['nope']), undefined);
    assert.equal(call('/opt/cni/bin/cnikit'), undefined);
    for (const word of ['serve', 'conformance', 'install-cni', 'tool'])
      assert.equal(call('/opt/cni/bin/cnikit', [word, 'bridge']), undefined, word);
    assert.equal(call('/opt/cni/bin/cnitool', ['bridge']), undefined, 'cnitool');
    // a plugin without recorded metadata is evaluated by the multicall entry
    assert.equal(
      versionOnly(
        [lazy('x', null)],
        {},
        { env: { CNI_COMMAND: 'VERSION' }, argv0: 'x', execPath: 'x', args: [] },
      ),
      undefined,
    );
  });
});

describe('the first module (runtime/first.ts): the VERSION calls its table answers', () => {
  const recorded: Record<string, NonNullable<LazyPlugin['meta']>> = {
    bridge: { about: 'b', versions: ['0.4.0', '1.0.0'] },
    loopback: { about: 'l' },
    none: { about: 'n', versions: [] as string[] },
    'we\tird': { about: 'w', versions: ['1.0.0'] },
    odd: { about: 'o', versions: ['1,0'] },
    star: { about: 's', versions: ['*'] },
    cnitool: { about: 'c' },
    cnikit: { about: 'k', versions: ['1.1.0'] },
  };
  const table = versionTable(recorded);
  const sources = Object.entries(recorded).map(([name, m]) => lazy(name, m));
  sources.push(lazy('bare', null));

  test('the table: one constant string of the names and versions; names or versions it cannot hold are left out', () => {
    assert.equal(
      table,
      '\nbridge\t0.4.0,1.0.0\nloopback\t*\nnone\t\ncnikit\t1.1.0',
      'weird names, commas, a literal *, cnitool and plugins without metadata go to the start-up path',
    );
    assert.deepEqual(tableVersions(table, 'VERSION', '/opt/cni/bin/bridge', '/opt/cni/bin/bridge', 0), [
      '0.4.0',
      '1.0.0',
    ]);
    assert.equal(tableVersions(table, 'VERSION', 'loopback', '/x/cnikit', 0), ALL_VERSIONS);
    assert.deepEqual(tableVersions(table, 'VERSION', 'none', 'none', 0), []);
    assert.deepEqual(tableVersions(table, 'VERSION', 'cnikit', 'cnikit', 0), ['1.1.0']);
  });

  test('it answers a subset of what the start-up path answers, with the same versions (argv0, links, multicall, tool)', () => {
    const names = [...Object.keys(recorded), 'bare', 'nope', '', 'bridge\t0.4.0,1.0.0\nloopback', 'ridge'];
    const paths = (n: string) => [n, `/opt/cni/bin/${n}`, `./${n}`];
    let answered = 0;
    for (const command of ['VERSION', 'ADD', undefined])
      for (const n of names)
        for (const argv0 of paths(n))
          for (const exe of ['/opt/cni/bin/cnikit', '/opt/cni/bin/cnitool', `/opt/cni/bin/${n}`])
            for (const args of [[], ['bridge'], ['serve'], ['tool'], ['--list']]) {
              const env = command ? { CNI_COMMAND: command } : {};
              const full = versionOnly(sources, {}, { env, argv0, execPath: exe, args });
              const fast = tableVersions(table, command, argv0, exe, args.length);
              if (fast === undefined) continue;
              answered++;
              const label = JSON.stringify({ command, argv0, exe, args });
              assert.ok(full, `the table answers what the start-up path would not: ${label}`);
              assert.deepEqual(fast, full.versions ?? ALL_VERSIONS, label);
            }
    assert.equal(
      answered,
      4 * 3 * 2,
      'the recorded plugins by link name, not under cnitool, with no arguments',
    );
  });
});

/** The modules a module loads at run time (static imports and re-exports, `import type` left out), resolved. */
function runtimeImports(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms)) {
    const spec = m[1]!;
    if (spec.startsWith('node:')) out.push(spec);
    else if (spec.startsWith('.')) out.push(join(dirname(file), spec));
    else if (spec === '@cnikit/skel/version-call') out.push(join(SKEL, 'version-call.ts'));
    else if (spec === '@cnikit/sys/names') out.push(join(ROOT, 'packages/sys/src/names.ts'));
    else out.push(spec); // any other package: the assertion below names it
  }
  return out;
}
const ROOT = join(import.meta.dirname, '..', '..', '..', '..');
const SKEL = join(ROOT, 'packages/skel/src');

describe('what the start-up path loads', () => {
  const reached = (file: string) => {
    const seen = new Set<string>();
    const walk = (f: string) => {
      if (seen.has(f)) return;
      seen.add(f);
      if (!f.startsWith('node:') && f.startsWith('/')) for (const i of runtimeImports(f)) walk(i);
    };
    walk(join(import.meta.dirname, file));
    return [...seen].map((f) => (f.startsWith('/') ? relative(ROOT, f) : f)).sort();
  };
  // each further module is bytecode the cold VERSION call executes (docs/benchmarks.md, Cold start-up)
  const skelVersion = [
    'packages/skel/src/fdraw.ts',
    'packages/skel/src/fold.ts',
    'packages/skel/src/types.ts',
    'packages/skel/src/version-call.ts',
    'packages/sys/src/names.ts',
  ];
  test('first.ts (the entry chunk) reaches only select/names and the dependency-free VERSION modules of skel', () => {
    assert.deepEqual(reached('first.ts'), [
      'node:fs',
      'packages/build/src/runtime/first.ts',
      'packages/build/src/runtime/select.ts',
      ...skelVersion,
    ]);
  });
  test('entry.ts (in the entry chunk too) reaches nothing but the addon key names: the rest is behind import()', () => {
    assert.deepEqual(reached('entry.ts'), [
      'packages/build/src/runtime/entry.ts',
      'packages/build/src/runtime/keys.ts',
    ]);
  });
  test('startup.ts (what a VERSION the table does not answer runs) reaches the same modules', () => {
    assert.deepEqual(reached('startup.ts'), [
      'node:fs',
      'packages/build/src/runtime/select.ts',
      'packages/build/src/runtime/startup.ts',
      ...skelVersion,
    ]);
  });
});

describe('the compiled start-up path answers VERSION as the dispatcher does', () => {
  test('byte for byte: echoed, case-folded, HTML-escaped, broken, BOM, empty, closed and non-object stdins', async () => {
    const exe = join(distBin(), 'loopback');
    const stdins = [
      '{"cniVersion":"1.0.0"}',
      '{"CNIVERSION":"0.4.0","cniVersion":null}',
      '{"cniVersion":"<&>\u2028"}',
      '{"cniVersion":"0.3.1"} trailing',
      '\ufeff{"cniVersion":"1.0.0"}',
      '',
      '[1]',
      '{"cniVersion":""}',
      `{"x":"${'a'.repeat(200_000)}","cniVersion":"0.4.0"}`,
    ];
    // loopback records no versions: the dispatcher answers with every version then
    const p = { name: 'loopback', add: async () => ({}), del: async () => {}, check: async () => {} };
    for (const input of stdins) {
      const want = await invokeInProcess(p as never, { CNI_COMMAND: 'VERSION' }, input);
      const r = spawnSync(exe, [], { input, env: { CNI_COMMAND: 'VERSION' }, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, want.stdout, input.slice(0, 40));
    }
    // the table's answer (a link name, no arguments) and the start-up path's (`cnikit <plugin>`, a symlink's
    // argv0 that is no plugin name) are the same bytes, for a plugin with recorded versions too
    const dir = mkdtempSync(join(tmpdir(), 'startupin-'));
    try {
      symlinkSync(join(distBin(), 'cnikit'), join(dir, 'renamed'));
      for (const input of stdins.slice(0, 4)) {
        const run = (file: string, args: string[], argv0?: string) =>
          spawnSync(file, args, { input, env: { CNI_COMMAND: 'VERSION' }, encoding: 'utf8', argv0 });
        const viaTable = run(join(distBin(), 'bridge'), []);
        assert.equal(viaTable.status, 0, viaTable.stderr);
        assert.match(viaTable.stdout, /"supportedVersions":\["0\.1\.0"/);
        for (const other of [
          run(join(distBin(), 'cnikit'), ['bridge']),
          run(join(dir, 'renamed'), ['bridge']),
          run(join(distBin(), 'bridge'), [], 'not-a-plugin'),
        ])
          assert.equal(other.stdout, viaTable.stdout, input.slice(0, 40));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // a closed stdin (fd 0 reopened read-write on /dev/null by the runtime) gets the current version
    const closed = spawnSync('sh', ['-c', `exec "$0" <&-`, exe], {
      env: { CNI_COMMAND: 'VERSION' },
      encoding: 'utf8',
    });
    assert.equal(closed.status, 0, closed.stderr);
    assert.equal(JSON.parse(closed.stdout).cniVersion, '1.1.0');
  });
});
