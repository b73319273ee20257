// A second reporter for scripts/run-tests.mjs: one line on stderr per test file as soon as the file finishes.
//
// Node's spec reporter prints a file's results only after every file before it in the list (declaration order), so a
// slow early file hides all progress of a long run (the kernel lab's `npm run test:vm`). The file-level
// `test:complete` event comes in completion order: this reporter prints it, with the file's time and how many files
// are done (CNIKIT_TEST_FILES, set by run-tests, gives the total). The spec reporter's output is unchanged.
import { relative } from 'node:path';

export default async function* progress(source) {
  const total = process.env.CNIKIT_TEST_FILES ?? '?';
  const start = Date.now();
  let done = 0;
  for await (const event of source) {
    if (event.type !== 'test:complete') continue;
    const { name, file, nesting, details } = event.data;
    // a file's own entry: nesting 0 and named after the file (a top-level test inside it has its own name)
    if (nesting !== 0 || !file || name !== file) continue;
    done += 1;
    const mark = details.passed ? '✔' : '✖';
    const took = (details.duration_ms / 1000).toFixed(1);
    const at = ((Date.now() - start) / 1000).toFixed(0);
    yield `▸ file ${done}/${total} ${mark} ${relative(process.cwd(), file)} (${took} s; ${at} s into the run)\n`;
  }
}
