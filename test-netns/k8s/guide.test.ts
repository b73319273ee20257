// The operator's guide's shell blocks as the lab-cluster test reads them (guide.ts): every ```sh block of
// docs/kubernetes.md is named, the commands the lab test does not run as written are in the guide, and the reader
// refuses an unnamed shell block, a name used twice, a name before a block that is not shell.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../dist.ts';
import { guideBlocks, guideCoverage, NOT_RUN, REWRITTEN, RUN_ELSEWHERE, runnable } from './guide.ts';

test("docs/kubernetes.md's shell blocks: named, placed, the not-run and rewritten lists exact", () => {
  const blocks = guideBlocks();
  const ids = blocks.map((b) => b.id);
  for (const id of [
    'image',
    'install',
    'upgrade',
    'rollback',
    'uninstall',
    'to-go',
    'from-go',
    'gc',
    'metrics',
  ])
    assert.ok(ids.includes(id), `block ${id} in ${ids.join(' ')}`);
  assert.equal(blocks.find((b) => b.id === 'image')?.place, 'node');
  assert.equal(blocks.find((b) => b.id === 'install')?.place, 'admin');
  assert.deepEqual(
    blocks.find((b) => b.id === 'install')?.commands[0],
    'kubectl apply -k deploy/kubernetes/',
  );
  // every listed command is one of the guide's, so a run that ran all else covers the guide
  const ran = new Map(
    blocks.map((b) => [b.id, new Set(b.commands.filter((c) => runnable(c) !== undefined))] as const),
  );
  assert.deepEqual(guideCoverage(blocks, ran), []);
  // a block left to another test file is a block of the guide, and that file runs it
  for (const [id, file] of Object.entries(RUN_ELSEWHERE)) {
    assert.ok(ids.includes(id), `RUN_ELSEWHERE names ${id}, which the guide does not have`);
    assert.ok(
      readFileSync(join(ROOT, file), 'utf8').includes(`runGuideBlock(c(), '${id}'`),
      `${file} runs ${id}`,
    );
  }
  assert.ok(
    Object.keys(NOT_RUN).length + Object.keys(REWRITTEN).length <= 3,
    'the exception list stays small',
  );
  // and a command missing from a run, or a listed command gone from the guide, is reported
  const first = blocks[0];
  assert.ok(first);
  const less = new Map(ran);
  less.set(first.id, new Set());
  assert.match(guideCoverage(blocks, less).join('\n'), /not run and not listed/);
  const without = blocks.map((b) => ({ ...b, commands: b.commands.filter((c) => !(c in NOT_RUN)) }));
  assert.match(guideCoverage(without, ran).join('\n'), /listed but not in the guide: podman load/);
});

test('the reader joins continued lines, skips comments, and refuses unnamed or duplicate shell blocks', () => {
  const md = [
    '<!-- guide: a -->',
    '```sh',
    '# on each node',
    'ctr images ls   # a comment',
    'skopeo copy x \\',
    '  y',
    '```',
    '',
    '```',
    'not a shell block',
    '```',
  ].join('\n');
  assert.deepEqual(guideBlocks(md), [
    { id: 'a', place: 'node', commands: ['ctr images ls   # a comment', 'skopeo copy x y'], line: 2 },
  ]);
  assert.throws(() => guideBlocks('```sh\nls\n```\n'), /without a <!-- guide: ID --> comment/);
  assert.throws(
    () => guideBlocks('<!-- guide: a -->\n```sh\nls\n```\n<!-- guide: a -->\n```sh\nls\n```\n'),
    /block a twice/,
  );
  assert.throws(() => guideBlocks('<!-- guide: a -->\n```json\n{}\n```\n'), /not ```sh/);
  assert.throws(() => guideBlocks('<!-- guide: a -->\n```bash\nls\n```\n'), /shell blocks are ```sh/);
});
