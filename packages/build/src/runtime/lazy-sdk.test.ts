// What a cold call of a plugin that never delegates loads: not skel's caller side (invoke.ts, exec.ts). Bun's code
// splitting assigns a module to the chunk of every entry that reaches it through static imports, re-exports
// included (it does not drop a package index's unused re-exports), so a plugin or the multicall path importing
// '@cnikit/skel' loads the Invoker and the exec code; they import '@cnikit/skel/plugin' (docs/benchmarks.md).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, describe, test } from 'node:test';
import * as skel from '@cnikit/skel';
import * as invoke from '@cnikit/skel/invoke';
import * as plugin from '@cnikit/skel/plugin';
import { entrySource, findBun } from '../build.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..', '..');
const SKEL = join(ROOT, 'packages/skel/src');
const CALLER_SIDE = ['invoke.ts', 'exec.ts', 'index.ts'].map((f) => join(SKEL, f));
/** The plugins of the kubelet-style chain that never delegate. */
const NO_DELEGATION = ['loopback', 'tuning', 'bandwidth', 'portmap'];

/** A workspace package's subpath, resolved as the bundler resolves it with the cnikit-source condition. */
function resolvePackage(spec: string): string | undefined {
  const m = /^(@cnikit\/[^/]+)(\/.*)?$/.exec(spec);
  if (!m) return undefined;
  const dir = join(ROOT, 'packages', m[1]!.slice('@cnikit/'.length));
  if (!existsSync(join(dir, 'package.json'))) return undefined;
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const target = pkg.exports?.[`.${m[2] ?? ''}`]?.['cnikit-source'];
  return target ? join(dir, target) : undefined;
}

/** The modules a module reaches through static imports and re-exports (`import type` / `export type` left out). */
function staticGraph(file: string): Set<string> {
  const seen = new Set<string>();
  const walk = (f: string) => {
    if (seen.has(f)) return;
    seen.add(f);
    const src = readFileSync(f, 'utf8');
    for (const m of src.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) walk(join(dirname(f), spec));
      else {
        const r = resolvePackage(spec);
        if (r) walk(r);
      }
    }
  };
  walk(file);
  return seen;
}

describe('@cnikit/skel/plugin: the plugin side without delegation', () => {
  test('exports what the index exports, the same objects, except the delegation functions', () => {
    for (const [k, v] of Object.entries(plugin)) assert.equal((skel as Record<string, unknown>)[k], v, k);
    const only = Object.keys(skel).filter((k) => !(k in plugin));
    for (const k of ['Invoker', 'delegateAdd', 'execPlugin', 'findInPath', 'registerInProcess'])
      assert.ok(only.includes(k), k);
    // what the index has beyond it is the caller side's, nothing else
    for (const k of only)
      assert.equal((invoke as Record<string, unknown>)[k], (skel as Record<string, unknown>)[k], k);
    for (const k of ['runPlugin', 'dispatch', 'CniError', 'decode', 'formatResult', 'startSpan'])
      assert.ok(k in plugin, k);
  });

  test('the multicall path and the plugins that never delegate do not reach invoke.ts, exec.ts or the index', () => {
    const roots = [
      join(import.meta.dirname, 'multicall.ts'),
      ...NO_DELEGATION.map((p) => join(ROOT, 'plugins', p, 'src/index.ts')),
    ];
    for (const r of roots) {
      const reached = [...staticGraph(r)].filter((f) => CALLER_SIDE.includes(f));
      assert.deepEqual(
        reached.map((f) => relative(ROOT, f)),
        [],
        relative(ROOT, r),
      );
    }
    // the walk does see the caller side where it is imported: bridge delegates its IPAM
    assert.ok(staticGraph(join(ROOT, 'plugins/bridge/src/index.ts')).has(join(SKEL, 'invoke.ts')));
  });
});

describe('bundled as the build bundles it (Bun.build, code splitting)', () => {
  const work = mkdtempSync(join(tmpdir(), 'cnikit-lazy-sdk-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  test('the chunks a loopback, tuning, bandwidth or portmap call loads hold no invoke.ts / exec.ts; bridge’s do', () => {
    // every plugin, as the executable has them: the chunks depend on which entries reach a module
    const names = readdirSync(join(ROOT, 'plugins')).filter((p) =>
      existsSync(join(ROOT, 'plugins', p, 'src/index.ts')),
    );
    const entry = join(work, 'entry.ts');
    writeFileSync(
      entry,
      entrySource(
        names.map((name) => ({ name, entry: join(ROOT, 'plugins', name, 'src/index.ts') })),
        {
          backend: 'bun',
          addonSha: '0'.repeat(64),
          // the entry points the build adds (they reach the caller side too)
          extras: {
            tool: resolvePackage('@cnikit/libcni'),
            serve: resolvePackage('@cnikit/warm/serve'),
            conformance: resolvePackage('@cnikit/conformance'),
            installCni: resolvePackage('@cnikit/warm/install-cni'),
          },
        },
      ),
    );
    const out = join(work, 'out');
    const script = join(work, 'split.ts');
    writeFileSync(
      script,
      `const r = await Bun.build({ entrypoints: [${JSON.stringify(entry)}], outdir: ${JSON.stringify(out)},
        splitting: true, format: 'esm', target: 'bun', minify: false, conditions: ['cnikit-source'], throw: false });
      if (!r.success) { for (const l of r.logs) console.error(String(l)); process.exit(1); }\n`,
    );
    const r = spawnSync(findBun(), [script], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const chunks = new Map<string, { imports: string[]; modules: string[]; text: string }>();
    for (const f of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const text = readFileSync(join(out, f), 'utf8');
      chunks.set(f, {
        text,
        imports: [...text.matchAll(/^(?:import|export)\s[^;]*?from\s*"\.\/([^"]+)"/gms)].map((m) => m[1]!),
        modules: [...text.matchAll(/^\/\/ ((?:packages|plugins)\/\S+)$/gm)].map((m) => m[1]!),
      });
    }
    const closure = (roots: string[]) => {
      const seen = new Set<string>();
      const walk = (c: string) => {
        if (seen.has(c)) return;
        seen.add(c);
        for (const i of chunks.get(c)?.imports ?? []) walk(i);
      };
      for (const c of roots) walk(c);
      return new Set([...seen].flatMap((c) => chunks.get(c)?.modules ?? []));
    };
    const top = readFileSync(join(out, 'entry.js'), 'utf8');
    // the multicall chunk (startup.ts's import) and each plugin's (its lazy require in the plugin list)
    const multicall = /import\("\.\/(chunk-[a-z0-9]+\.js)"\), full\(\)/.exec(top)?.[1];
    assert.ok(multicall, 'the multicall chunk in the entry');
    const pluginChunk = (name: string) => {
      const c = new RegExp(
        `name: "${name}", load: \\(\\) => pick\\(import\\.meta\\.require\\("\\./(chunk-[a-z0-9]+\\.js)"`,
      ).exec(top)?.[1];
      assert.ok(c, name);
      return c;
    };
    const invoke = ['packages/skel/src/invoke.ts', 'packages/skel/src/exec.ts'];
    for (const name of NO_DELEGATION) {
      const mods = closure(['entry.js', multicall, pluginChunk(name)]);
      assert.ok(mods.has('packages/skel/src/dispatch.ts') && mods.has(`plugins/${name}/src/index.ts`), name);
      assert.deepEqual(
        invoke.filter((m) => mods.has(m)),
        [],
        name,
      );
    }
    const bridge = closure(['entry.js', multicall, pluginChunk('bridge')]);
    assert.deepEqual(
      invoke.filter((m) => bridge.has(m)),
      invoke,
    );
  });
});
