/**
 * Test-only process entry: runs the bridge plugin from source (`node --import tsx testmain.ts`), after
 * an optional start barrier (CNIKIT_TEST_BARRIER=<file>: print "ready" on stderr, wait for the file)
 * so that concurrent invocations really overlap.
 */
import { existsSync } from 'node:fs';
import { runPlugin } from '@cnikit/skel';
import { plugin } from './index.ts';

const barrier = process.env.CNIKIT_TEST_BARRIER;
if (barrier) {
  process.stderr.write('ready\n');
  const cell = new Int32Array(new SharedArrayBuffer(4));
  while (!existsSync(barrier)) Atomics.wait(cell, 0, 0, 1);
}
await runPlugin(plugin);
