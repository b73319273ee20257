/**
 * TypeScript snippets of the README files, for the tests that compile and run them:
 * - `sdkQuickStart()`: the SDK quick start, the first ```ts block between `<!-- sdk:start -->` and `<!-- sdk:end -->`
 *   in the top-level README (packages/skel/src/readme.test.ts, scripts/packages.test.ts);
 * - `exampleBlock(markdown)`: the first ```ts block under a package README's `## Example` heading;
 * - `tsBlocks(markdown)`: every ```ts block, in order;
 * - `markedExamples(markdown)`: the ```json blocks marked `<!-- example: KIND -->` (docs/plugins/*.md).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Every ```ts fenced block of a markdown text, in order. */
export function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
}

/** The SDK quick start of the top-level README. */
export function sdkQuickStart(readme = readFileSync(join(ROOT, 'README.md'), 'utf8')): string {
  const start = readme.indexOf('<!-- sdk:start -->');
  const end = readme.indexOf('<!-- sdk:end -->');
  assert.ok(start >= 0 && end > start, 'README has the sdk markers');
  const block = tsBlocks(readme.slice(start, end))[0];
  assert.ok(block, 'a ```ts block in the SDK section');
  return block;
}

/** The first ```ts block under the `## Example` heading of a package README. */
export function exampleBlock(markdown: string, what = 'README'): string {
  const at = markdown.search(/^## Example\b/m);
  assert.ok(at >= 0, `${what} has an "## Example" section`);
  const next = markdown.slice(at + 3).search(/^## /m);
  const section = next < 0 ? markdown.slice(at) : markdown.slice(at, at + 3 + next);
  const block = tsBlocks(section)[0];
  assert.ok(block, `${what}: a \`\`\`ts block under "## Example"`);
  return block;
}

/**
 * The "Write your own plugin" walk-through (between `<!-- plugin-howto:start -->` and `<!-- plugin-howto:end -->`):
 * its ```json block (tsconfig.json) and its ```ts blocks by the file each names on its first line (`// src/x.ts`).
 */
export function howtoFiles(markdown: string): { tsconfig: string; files: Record<string, string> } {
  const start = markdown.indexOf('<!-- plugin-howto:start -->');
  const end = markdown.indexOf('<!-- plugin-howto:end -->');
  assert.ok(start >= 0 && end > start, 'the plugin-howto markers');
  const section = markdown.slice(start, end);
  const json = /```json\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(json, 'a ```json block (tsconfig.json) in the walk-through');
  const files: Record<string, string> = {};
  for (const block of tsBlocks(section)) {
    const name = /^\/\/ ((?:src|test)\/[\w.-]+\.ts)\n/.exec(block)?.[1];
    assert.ok(name, `a walk-through block names its file on its first line:\n${block.slice(0, 80)}`);
    files[name] = block;
  }
  return { tsconfig: json, files };
}

/** A fenced block marked for the docs tests by an `<!-- example: KIND -->` comment on the line before it. */
export interface MarkedExample {
  /** `conflist` (a network configuration list), `config` (one plugin's network configuration), `runtimeConfig`. */
  kind: string;
  /** The block's text. */
  text: string;
  /** 1-based line of the marker comment. */
  line: number;
}

/** Every marked example of a markdown text, in order (`<!-- example: KIND -->` then a ```json block). */
export function markedExamples(markdown: string): MarkedExample[] {
  const out: MarkedExample[] = [];
  for (const m of markdown.matchAll(/<!-- example: ([\w-]+) -->\n(```[^\n]*)\n([\s\S]*?)```/g)) {
    const line = markdown.slice(0, m.index).split('\n').length;
    assert.equal(m[2], '```json', `line ${line}: the block after an example marker is a \`\`\`json block`);
    out.push({ kind: m[1] ?? '', text: m[3] ?? '', line });
  }
  const markers = markdown.match(/<!-- example:/g)?.length ?? 0;
  assert.equal(
    out.length,
    markers,
    'every `<!-- example: … -->` marker is directly followed by a fenced block',
  );
  return out;
}
