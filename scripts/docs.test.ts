/**
 * The documentation against the repository: every relative link and every backticked repository path in README.md,
 * docs/**\/*.md, plugins/*\/README.md, packages/*\/README.md (and every path the tarball's README names) exists; the
 * README's plugin tables list exactly the plugins the build links into dist-bin (scripts/build.ts's
 * `discoverPlugins`), its counts of plugins agree, its SDK package list is the public workspace packages;
 * docs/release.md's list of outputs is what `npm run release` writes; README.md and docs/testing.md give the same
 * durations for `npm run test:vm` and `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { discoverPlugins } from './build.ts';
import { imageIndexName } from './image.ts';
import { ROOT } from './readme-snippets.ts';
import { ARCHES, releaseVersion, sbomName, tarballName, tarballReadme } from './release.ts';

const read = (rel: string) => readFileSync(join(ROOT, rel), 'utf8');

function markdownUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir))
    .sort()
    .flatMap((n) => {
      const rel = `${dir}/${n}`;
      if (statSync(join(ROOT, rel)).isDirectory()) return markdownUnder(rel);
      return n.endsWith('.md') ? [rel] : [];
    });
}

const readmesOf = (dir: string) =>
  readdirSync(join(ROOT, dir))
    .sort()
    .map((n) => `${dir}/${n}/README.md`)
    .filter((rel) => existsSync(join(ROOT, rel)));

/** Every markdown file the check covers. */
export const DOCS = [
  'README.md',
  ...markdownUnder('docs'),
  ...readmesOf('plugins'),
  ...readmesOf('packages'),
];

/** Top-level directories whose paths a doc may name (`scripts/x.ts`, `docs/y.md`, `test-netns/…`). */
const TOP = ['scripts', 'docs', 'test-netns', 'packages', 'plugins', 'bench', 'deploy', '.ci'];
const TOP_RE = TOP.map((t) => t.replace('.', '\\.')).join('|');
const PATH_RE = new RegExp(`(?:^|[\\s(=\`])((?:${TOP_RE})/[^\\s\`)'",;]*)`, 'g');

/**
 * The repository paths in a text, as named: placeholders (`<arch>`, `*`, `…`, `{a,b}`, `$X`) are not paths, and
 * `plugins/main/…`, `plugins/meta/…`, `plugins/ipam/…` are the Go reference repository's layout (cnikit's plugins
 * are flat under plugins/).
 */
export function repoPaths(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(PATH_RE)) {
    const p = (m[1] ?? '').replace(/[.:]+$/, '').split('#')[0] ?? '';
    if (/[<>*{}…$[\]]/.test(p) || /^plugins\/(main|meta|ipam)\//.test(p)) continue;
    out.push(p);
  }
  return out;
}

/** Markdown text without its fenced code blocks (their contents are commands and file trees, not references). */
const prose = (md: string) => md.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '');

/** The relative link targets of a markdown text (no URL scheme, not a bare #anchor), without their anchors. */
export function relativeLinks(md: string): string[] {
  return [...prose(md).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] ?? '')
    .filter((t) => !/^[a-z][a-z0-9+.-]*:|^#/i.test(t))
    .map((t) => t.split('#')[0] ?? '');
}

/** The inline code spans of a markdown text outside fenced blocks. */
const codeSpans = (md: string) => [...prose(md).matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? '');

/** The section of `md` under the heading `heading` (up to the next heading of the same or a higher level). */
function section(md: string, heading: string): string {
  const level = /^#+/.exec(heading)?.[0].length ?? 2;
  const at = md.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `heading ${JSON.stringify(heading)}`);
  const rest = md.slice(at + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

const WORDS =
  'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty'.split(
    ' ',
  );
const number = (s: string) => (/^\d+$/.test(s) ? Number(s) : WORDS.indexOf(s.toLowerCase()));
const PLUGINS = discoverPlugins().map((p) => p.dir);

describe('docs name what exists', () => {
  test('every relative link and backticked repository path exists', () => {
    const missing: string[] = [];
    for (const doc of DOCS) {
      const md = read(doc);
      for (const link of relativeLinks(md)) {
        if (link === '') continue;
        const target = join(ROOT, dirname(doc), decodeURIComponent(link));
        if (!existsSync(target)) missing.push(`${doc}: link ${link}`);
      }
      for (const span of codeSpans(md)) {
        for (const p of repoPaths(span)) if (!existsSync(join(ROOT, p))) missing.push(`${doc}: \`${p}\``);
      }
    }
    assert.ok(DOCS.length > 30, `${DOCS.length} docs`);
    assert.deepEqual(missing, [], 'paths the docs name that do not exist');
  });

  test("the tarball's README names only paths of the repository", () => {
    const readme = tarballReadme({
      version: releaseVersion(),
      arch: 'amd64',
      commit: '0'.repeat(40),
      plugins: PLUGINS,
    });
    const paths = repoPaths(readme);
    assert.ok(paths.includes('docs/warm-mode.md'), paths.join(' '));
    assert.deepEqual(
      paths.filter((p) => !existsSync(join(ROOT, p))),
      [],
    );
  });

  test('the checker finds a missing path, link and reference-repository path', () => {
    assert.deepEqual(repoPaths('see docs/warm.md) and `scripts/install --warm`'), [
      'docs/warm.md',
      'scripts/install',
    ]);
    assert.deepEqual(
      repoPaths('(reference: `plugins/main/tap`), `release/<arch>`, `test-netns/*.test.ts`'),
      [],
    );
    assert.deepEqual(relativeLinks('[a](docs/x.md#y) [b](https://e.org) [c](#z)\n```\n[d](no.md)\n```\n'), [
      'docs/x.md',
    ]);
  });
});

describe('README.md agrees with the build and the packages', () => {
  const readme = read('README.md');

  test('the plugin tables list exactly the plugins built into dist-bin', () => {
    const rows = [...section(readme, '## Plugins').matchAll(/^\| ([a-z][\w-]*) \|/gm)].map((m) => m[1] ?? '');
    const names = rows.filter((n) => n !== 'plugin');
    assert.deepEqual([...names].sort(), PLUGINS, 'README plugin tables vs plugins/*/src/index.ts');
    assert.equal(new Set(names).size, names.length, 'each plugin once');
    for (const n of names)
      assert.ok(existsSync(join(ROOT, 'docs', 'plugins', `${n}.md`)), `docs/plugins/${n}.md`);
  });

  test("the README's counts of plugins and hard links are the build's", () => {
    const counts = [
      ...readme.matchAll(/The (\w+) plugins are hard links/g),
      ...readme.matchAll(/of cnikit's (\w+) plugins/g),
      ...readme.matchAll(/a hard link per plugin \((\w+)/g),
    ].map((m) => m[1] ?? '');
    assert.equal(counts.length, 3, `the three counts in README.md: ${counts}`);
    for (const c of counts) assert.equal(number(c), PLUGINS.length, `"${c}" plugins`);
  });

  test("the SDK package lists (README.md, docs/sdk.md's table) are the public workspace packages", () => {
    const listed = [...section(readme, '## The SDK packages (npm)').matchAll(/`(@cnikit\/[\w-]+)`/g)].map(
      (m) => m[1] ?? '',
    );
    const table = [
      ...section(read('docs/sdk.md'), '## The SDK packages (npm)').matchAll(/^\| (.*?) \|/gm),
    ].flatMap((m) => [...(m[1] ?? '').matchAll(/`(@cnikit\/[\w-]+)`/g)].map((n) => n[1] ?? ''));
    const published = readdirSync(join(ROOT, 'packages'))
      .map((d) => join(ROOT, 'packages', d, 'package.json'))
      .filter(existsSync)
      .map((f) => JSON.parse(readFileSync(f, 'utf8')) as { name: string; private?: boolean })
      .filter((p) => p.private !== true)
      .map((p) => p.name)
      .sort();
    assert.deepEqual([...listed].sort(), published, "README.md's list");
    assert.deepEqual([...table].sort(), published, "docs/sdk.md's table");
  });

  test('README.md and docs/testing.md give the same durations for test:vm and test:k8s', () => {
    const testing = read('docs/testing.md');
    for (const script of ['test:vm', 'test:k8s']) {
      const line = readme.split('\n').find((l) => l.startsWith(`npm run ${script} `));
      const inReadme = line && /~([\d–-]+ min)/.exec(line)?.[1];
      assert.ok(inReadme, `README.md's \`npm run ${script}\` line gives a duration (~N min): ${line}`);
      const at = testing.indexOf(`\`npm run ${script}\` runs`);
      assert.ok(at >= 0, `docs/testing.md describes \`npm run ${script}\``);
      const inTesting = /about ([\d–-]+ min)/.exec(testing.slice(at, testing.indexOf('. ', at)))?.[1];
      assert.equal(inTesting, inReadme, `docs/testing.md's duration of ${script}`);
    }
  });
});

describe('docs/release.md lists what `npm run release` writes', () => {
  const md = read('docs/release.md');
  const block = /```\n(release\/[\s\S]*?)```/.exec(section(md, '## What `npm run release` makes'))?.[1] ?? '';
  const v = releaseVersion();

  test('every artifact SHA256SUMS covers, and its count', () => {
    const lines = block.split('\n').filter((l) => l.startsWith('release/'));
    const named = lines
      .map((l) => (l.split(/\s+/)[0] ?? '').replace(/^release\//, ''))
      .filter((n) => n !== 'SHA256SUMS')
      .flatMap((n) => (n.includes('<arch>') ? ARCHES.map((a) => n.replaceAll('<arch>', a)) : [n]))
      .map((n) => n.replaceAll('<version>', v));
    const made = [...ARCHES.flatMap((a) => [tarballName(a, v), sbomName(a, v)]), imageIndexName(v)];
    assert.deepEqual([...named].sort(), [...made].sort(), 'the files of release/ (scripts/release.ts)');
    const sums = /release\/SHA256SUMS .*for the (\w+) files above/.exec(block)?.[1] ?? '';
    assert.equal(number(sums), made.length, `SHA256SUMS "for the ${sums} files above"`);
    const repro = /all (\w+) files byte-identical/.exec(md)?.[1] ?? '';
    assert.equal(number(repro), made.length + 1, `reproducibility: "all ${repro} files" (with SHA256SUMS)`);
  });
});

/**
 * The cold VERSION figures a page gives itself instead of citing docs/benchmarks.md's start-up table: a line that
 * says "cold VERSION" with a millisecond figure (a signed one, +1.8 ms, is a difference and allowed), and the cold
 * column of a table row for VERSION holding one.
 */
export function ownColdVersionFigures(md: string): string[] {
  const bad: string[] = [];
  const figure = /(?:^|[^+−\-\d.])\d+(?:[.,]\d+)?(?:[–-]\d+(?:\.\d+)?)? ?ms\b/;
  const cells = (l: string) =>
    l
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
  let coldColumns: number[] = [];
  for (const line of prose(md).split('\n')) {
    if (!line.startsWith('|')) coldColumns = [];
    else if (coldColumns.length === 0 && !/^\|[\s|:-]+\|$/.test(line)) {
      coldColumns = cells(line).flatMap((c, i) => (/^cold\b/i.test(c) || /\bcold$/i.test(c) ? [i] : []));
      if (coldColumns.length === 0) coldColumns = [-1];
      continue;
    } else if (/^\|\s*(cold )?VERSION\b/.test(line)) {
      const row = cells(line);
      if (coldColumns.some((i) => i >= 0 && figure.test(row[i] ?? ''))) bad.push(line);
      continue;
    }
    if (/cold VERSION/i.test(line) && figure.test(line.slice(line.search(/cold VERSION/i)))) bad.push(line);
  }
  return bad;
}

describe('one cold VERSION figure: docs/benchmarks.md', () => {
  // the pages that quote the cold start-up (they once gave 4.6–9.5 ms, ~5–9 ms and 51 ms for the same call)
  const QUOTING = ['README.md', 'docs/warm-mode.md', 'docs/observability.md', 'packages/warm/README.md'];

  test('README.md, warm-mode.md, observability.md and the warm README cite the start-up table, with no figure of their own', () => {
    assert.match(read('docs/benchmarks.md'), /^## Cold start-up$/m, 'the table they link to');
    for (const rel of QUOTING) {
      const md = read(rel);
      assert.match(md, /benchmarks\.md#cold-start-up\)/, `${rel} links docs/benchmarks.md#cold-start-up`);
      assert.deepEqual(ownColdVersionFigures(md), [], `${rel}: cold VERSION figures of its own`);
    }
  });

  test('the check finds a figure of its own in prose and in a table', () => {
    assert.equal(ownColdVersionFigures('a cold VERSION takes 51 ms here').length, 1);
    assert.equal(ownColdVersionFigures('cold VERSION: ~5–9 ms').length, 1);
    assert.equal(ownColdVersionFigures('cold VERSION +0.6 / +1.8 ms (a difference)').length, 0);
    const table = ['| call | warm | cold | Go |', '| --- | --- | --- | --- |'];
    assert.equal(
      ownColdVersionFigures([...table, '| VERSION (loopback) | 0.89 ms | 4.8 ms | 1.7 ms |'].join('\n'))
        .length,
      1,
    );
    assert.equal(
      ownColdVersionFigures(
        [...table, '| VERSION (loopback) | 0.89 ms | see [x](benchmarks.md#cold-start-up) | 1.7 ms |'].join(
          '\n',
        ),
      ).length,
      0,
    );
    assert.equal(
      ownColdVersionFigures([...table, '| loopback ADD | 1.43 ms | 7.5 ms | 2.1 ms |'].join('\n')).length,
      0,
    );
  });
});
