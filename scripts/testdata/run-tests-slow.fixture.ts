// scripts/run-tests.test.ts: a file that finishes after run-tests-pass.fixture.ts although it is listed first.
// With CNIKIT_FIXTURE_PIDS (a directory where the pass and fail fixtures write their pids) it ends only once both
// of those processes are gone: on a loaded machine starting a file can take longer than any fixed wait.
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('takes a while', async () => {
  await sleep(1500);
  const dir = process.env.CNIKIT_FIXTURE_PIDS;
  if (!dir) return;
  for (const end = Date.now() + 120_000; Date.now() < end; await sleep(50)) {
    const pids = readdirSync(dir);
    if (pids.length >= 2 && pids.every((p) => !existsSync(`/proc/${p}`))) break;
  }
  await sleep(1000); // the runner announces a file after its process ended
});
