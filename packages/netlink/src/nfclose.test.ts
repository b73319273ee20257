/**
 * closeAfterTask: in the warm service (the resident mark) the background closer waits for an RCU grace period before
 * it closes an nfnetlink socket; in a cold plugin process it does not, since that process exits right after its call
 * and its exit would wait for the thread's membarrier(2) (a cold bridge or portmap ADD 5-11 ms longer). Observed with
 * strace on a child process: the membarrier calls it makes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../..', import.meta.url));

function membarriers(resident: boolean): number {
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-nfclose-'));
  try {
    const probe = join(dir, 'probe.ts');
    const sys = fileURLToPath(new URL('../../sys/src/index.ts', import.meta.url));
    const nfclose = fileURLToPath(new URL('./nfclose.ts', import.meta.url));
    writeFileSync(
      probe,
      [
        `import { NetlinkSocket } from ${JSON.stringify(sys)};`,
        `import { closeAfterTask } from ${JSON.stringify(nfclose)};`,
        resident ? `(globalThis as Record<symbol, unknown>)[Symbol.for('cnikit.resident')] = true;` : '',
        // NETLINK_NETFILTER; the process stays long enough for the thread to close it
        'closeAfterTask(NetlinkSocket.open(12));',
        'setTimeout(() => {}, 300);',
        '',
      ].join('\n'),
    );
    const r = spawnSync(
      'strace',
      ['-f', '-qq', '-e', 'trace=membarrier', process.execPath, '--import', 'tsx', probe],
      {
        cwd: root,
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, r.stderr);
    return (r.stderr.match(/membarrier\(/g) ?? []).length;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a cold process closes its nfnetlink sockets without waiting for a grace period', () => {
  assert.equal(membarriers(false), 0);
});

test('the warm service waits for one grace period before closing them', () => {
  assert.equal(membarriers(true), 1);
});
