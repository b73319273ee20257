// A second reporter for scripts/run-tests.mjs: one line on stderr per test file as soon as the file finishes, and
// under a failed file's line the tests that failed in it, each with the first line of its error.
//
// Node's spec reporter prints a file's results only after every file before it in the list (declaration order), so a
// slow early file hides all progress of a long run (the kernel lab's `npm run test:vm`), failures included. The
// `test:complete` events come in completion order: this reporter prints them, with the file's time and how many files
// are done (CNIKIT_TEST_FILES, set by run-tests, gives the total). The spec reporter's output is unchanged.
import { relative } from 'node:path';

/** The first line of what made a test fail (a suite that failed only through its tests is left out). */
function reason(error) {
  if (!error || error.failureType === 'subtestsFailed') return undefined;
  const cause = error.cause ?? error;
  const text =
    typeof cause === 'object' && cause !== null && 'message' in cause ? cause.message : String(cause);
  return (
    String(text)
      .split('\n')
      .find((l) => l.trim() !== '') ?? String(error.failureType ?? 'failed')
  );
}

export default async function* progress(source) {
  const total = process.env.CNIKIT_TEST_FILES ?? '?';
  const start = Date.now();
  let done = 0;
  const failed = new Map(); // file → lines for its failed tests
  for await (const event of source) {
    if (event.type !== 'test:complete') continue;
    const { name, file, nesting, details } = event.data;
    // a file's own entry: nesting 0 and named after the file (a top-level test inside it has its own name)
    if (nesting !== 0 || !file || name !== file) {
      const why = details.passed ? undefined : reason(details.error);
      if (file && why !== undefined) {
        const lines = failed.get(file) ?? [];
        lines.push(`    ✖ ${name}: ${why.slice(0, 300)}\n`);
        failed.set(file, lines);
      }
      continue;
    }
    done += 1;
    const mark = details.passed ? '✔' : '✖';
    const took = (details.duration_ms / 1000).toFixed(1);
    const at = ((Date.now() - start) / 1000).toFixed(0);
    yield `▸ file ${done}/${total} ${mark} ${relative(process.cwd(), file)} (${took} s; ${at} s into the run)\n`;
    for (const line of failed.get(file) ?? []) yield line;
    failed.delete(file);
  }
}
