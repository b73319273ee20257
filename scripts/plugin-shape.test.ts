// The shape of a plugin (docs/plugin-shape.md), checked for every directory under plugins/ with a package.json, so
// a new plugin is held to it the moment it arrives: the files, the exports, the verbs' names, the docs page with an
// example conflist and the conformance conflist. Also: no issue numbers in code comments (the history is in git).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { confListFromBytes, confListFromConf, pluginConfFromBytes } from '@cnikit/libcni';
import { NO_CONFORMANCE_ROW } from './plugin-tests.mjs';

const ROOT = join(import.meta.dirname, '..');
const PLUGINS = readdirSync(join(ROOT, 'plugins'))
  .filter((d) => existsSync(join(ROOT, 'plugins', d, 'package.json')))
  .sort();
const VERBS = ['add', 'del', 'check', 'gc', 'status'] as const;
/** A verb in its own file is one worth a file; a shorter one lives in index.ts. */
const VERB_FILE_MIN_LINES = 30;

const read = (...p: string[]) => readFileSync(join(ROOT, ...p), 'utf8');
const isTest = (f: string) => f.endsWith('.test.ts');

/** The relative imports of a source file (static, re-exports and dynamic), as file names in the same directory. */
function localImports(text: string): string[] {
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'\.\/([\w.-]+\.ts)'/g)].map((m) => m[1] ?? '');
}

/** The files reachable from `start` over relative imports inside `dir`. */
function reachable(dir: string, start: string): Set<string> {
  const seen = new Set<string>();
  const todo = [start];
  while (todo.length) {
    const f = todo.pop() ?? '';
    if (seen.has(f) || !existsSync(join(dir, f))) continue;
    seen.add(f);
    todo.push(...localImports(readFileSync(join(dir, f), 'utf8')));
  }
  return seen;
}

interface ConflistLike {
  plugins?: Array<{ type?: string; ipam?: { type?: string } }>;
}
const loaded = (l: { plugins: Array<{ raw: Record<string, unknown> }> }): ConflistLike => ({
  plugins: l.plugins.map((p) => p.raw as { type?: string; ipam?: { type?: string } }),
});
const names = (c: ConflistLike, plugin: string) =>
  (c.plugins ?? []).some((p) => p.type === plugin || p.ipam?.type === plugin);

test('every plugin directory is one (18 and any that arrive)', () => {
  assert.ok(PLUGINS.length >= 18, `${PLUGINS.length} plugins: ${PLUGINS}`);
});

for (const name of PLUGINS) {
  const dir = join(ROOT, 'plugins', name);
  const src = join(dir, 'src');

  describe(`plugins/${name}`, () => {
    test('holds package.json and src/ (and at most a README.md of developer notes); a private package', () => {
      const stray = readdirSync(dir).filter((f) => !['package.json', 'src', 'README.md'].includes(f));
      assert.deepEqual(stray, [], `stray entries in plugins/${name}`);
      const pkg = JSON.parse(read('plugins', name, 'package.json'));
      assert.equal(pkg.name, `@cnikit/plugin-${name}`);
      assert.equal(pkg.private, true);
      assert.deepEqual(pkg.exports, { '.': './src/index.ts' });
    });

    test('src/index.ts exports `plugin` named after the directory, its decoder config.ts `parseConf`', async () => {
      const index = await import(pathToFileURL(join(src, 'index.ts')).href);
      const config = await import(pathToFileURL(join(src, 'config.ts')).href);
      assert.equal(typeof config.parseConf, 'function', 'config.ts exports parseConf');
      assert.equal(index.plugin?.name, name, 'index.ts exports plugin, named after the directory');
      assert.equal(index.plugin.conf, config.parseConf, 'plugin.conf is parseConf of config.ts');
    });

    test('verbs named after themselves (`add`, not `add: cmdAdd`)', async () => {
      const index = await import(pathToFileURL(join(src, 'index.ts')).href);
      for (const verb of VERBS) {
        const handler = index.plugin[verb];
        if (handler) assert.equal(handler.name, verb, `plugin.${verb} is a function named ${verb}`);
      }
      const text = read('plugins', name, 'src', 'index.ts');
      const literal = text.slice(text.indexOf('export const plugin'));
      const body = literal.slice(0, literal.indexOf('\n};') + 3);
      assert.doesNotMatch(
        body,
        /^ {2}(add|del|check|gc|status)\s*:/m,
        'shorthand verbs in the plugin object',
      );
    });

    test('no stray files in src/: each is reachable from index.ts, a test, testenv.ts, or a verb worth a file', () => {
      const files = readdirSync(src);
      const fromIndex = reachable(src, 'index.ts');
      for (const f of files) {
        if (f === 'testdata') {
          // fixtures and helpers of the plugin's tests (as in the packages): never part of the plugin
          const used = [...fromIndex].filter((p) => p.replace(/^\.\//, '').startsWith('testdata/'));
          assert.deepEqual(used, [], 'index.ts reaches nothing under src/testdata/');
          continue;
        }
        assert.match(f, /^[a-z0-9][\w.-]*\.ts$/, `src/${f}: only TypeScript sources`);
        if (isTest(f)) continue;
        if (f === 'testenv.ts') {
          assert.ok(!fromIndex.has(f), 'testenv.ts (test helpers) is not part of the plugin');
          continue;
        }
        assert.ok(
          fromIndex.has(f),
          `src/${f} is neither imported by index.ts (directly or not) nor testenv.ts`,
        );
        const verb = VERBS.find((v) => f === `${v}.ts`);
        if (verb) {
          const text = readFileSync(join(src, f), 'utf8');
          assert.match(text, new RegExp(`export (async )?function ${verb}\\(`), `${f} exports ${verb}()`);
          const lines = text.split('\n').filter((l) => l.trim() !== '').length;
          assert.ok(lines >= VERB_FILE_MIN_LINES, `${f}: ${lines} lines, inline it in index.ts`);
        }
        assert.doesNotMatch(f, /^(verbs|cmd|gcstatus|testlab|zz)/, `src/${f}: a name outside the shape`);
      }
    });

    test('docs/plugins/<name>.md exists with an example conflist naming the plugin', () => {
      const page = join(ROOT, 'docs', 'plugins', `${name}.md`);
      assert.ok(existsSync(page), `docs/plugins/${name}.md`);
      const blocks = [...readFileSync(page, 'utf8').matchAll(/```json\n([\s\S]*?)```/g)].map(
        (m) => m[1] ?? '',
      );
      // what a runtime loads (libcni's loader): a conflist, or a complete configuration of one plugin
      const conflists = blocks.flatMap((b): ConflistLike[] => {
        try {
          const doc = JSON.parse(b) as Record<string, unknown>;
          if (Array.isArray(doc.plugins)) return [loaded(confListFromBytes(b))];
          if (doc.cniVersion !== undefined && doc.name !== undefined && doc.type !== undefined)
            return [loaded(confListFromConf(pluginConfFromBytes(b)))];
        } catch {
          // a fragment (a key's value, a result): not an example conflist
        }
        return [];
      });
      assert.ok(
        conflists.some((c) => names(c, name)),
        `docs/plugins/${name}.md has a \`\`\`json conflist (or complete network configuration) with a plugin of type ${name} (or ipam.type ${name})`,
      );
    });

    test('test-netns/conformance has its conflist', () => {
      if (name in NO_CONFORMANCE_ROW) {
        assert.ok(
          !existsSync(join(ROOT, 'test-netns', 'conformance', `${name}.conflist`)),
          'a row and an exemption',
        );
        return;
      }
      const file = join(ROOT, 'test-netns', 'conformance', `${name}.conflist`);
      assert.ok(existsSync(file), `test-netns/conformance/${name}.conflist`);
      assert.ok(names(JSON.parse(readFileSync(file, 'utf8')), name), `${name}.conflist names ${name}`);
    });
  });
}

describe('code comments', () => {
  test('cite no issue numbers (the history is in git)', () => {
    const files = execFileSync(
      'git',
      ['ls-files', '--', '*.ts', '*.mjs', '*.js', '*.c', '*.h', '*.sh', ':!:**/node_modules/**'],
      { cwd: ROOT, encoding: 'utf8' },
    )
      .split('\n')
      .filter((f) => f && existsSync(join(ROOT, f)));
    const hits: string[] = [];
    for (const f of files) {
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const comment = /(?:\/\/|\/\*|^\s*\*)(.*)$/.exec(line)?.[1];
          if (comment && /(?:^|[\s(])(?:#\d|[Ii]ssues? #?\d)/.test(comment))
            hits.push(`${f}:${i + 1}: ${line.trim()}`);
        });
    }
    assert.deepEqual(hits, []);
  });
});
