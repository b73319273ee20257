/**
 * A plugin started with stdin closed (`<&-`) answers like the reference — code 5 `error reading from stdin: read
 * /dev/stdin: bad file descriptor` — although Node and Bun reopen the closed fd 0 on /dev/null at start-up (read-write,
 * which tells it from a /dev/null given on purpose, read-only, which still gets code 6 like the reference). Every
 * plugin, through both back-ends, compared with the Go binary where one is installed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type CniCommand, cniCall } from '@cnikit/testing';
import { ensureBuilt, ensureLinks, GO_CNI, goAvailable } from './dist.ts';

const info = ensureBuilt();

const CLOSED = { code: 5, msg: 'error reading from stdin: read /dev/stdin: bad file descriptor' };
const EMPTY = { code: 6, msg: 'error unmarshall network config: unexpected end of JSON input' };

/** The plugin started by bash with its stdin redirected (`<&-` closes it, `</dev/null` replaces it). */
async function runWith(
  binary: string,
  redirect: string,
  command: CniCommand,
): Promise<{ status: number; json: unknown }> {
  const r = await cniCall({ binary: 'bash', args: ['-c', `exec "$0" ${redirect}`, binary] }, command, '', {
    containerId: 'stdin-test',
    netns: '/proc/self/ns/net',
    path: '/nonexistent',
    timeoutMs: 20_000,
  });
  return { status: r.code, json: r.json ?? { unparsable: r.stdout, stderr: r.stderr } };
}

describe('closed stdin vs /dev/null stdin, through the executables', () => {
  for (const backend of ['bun', 'sea'] as const) {
    test(`${backend}: every plugin answers <&- with code 5 and </dev/null with code 6 (ADD, DEL, CHECK)`, async () => {
      const dir = ensureLinks(backend, info);
      for (const plugin of info.plugins) {
        for (const command of ['ADD', 'DEL', 'CHECK'] as const) {
          const closed = await runWith(join(dir, plugin), '<&-', command);
          assert.equal(closed.status, 1, `${plugin} ${command} <&-`);
          assert.deepEqual(closed.json, CLOSED, `${plugin} ${command} <&-`);
          const empty = await runWith(join(dir, plugin), '</dev/null', command);
          assert.equal(empty.status, 1, `${plugin} ${command} </dev/null`);
          assert.deepEqual(empty.json, EMPTY, `${plugin} ${command} </dev/null`);
        }
      }
    });
  }

  test('the Go reference answers the same (the texts above are its own)', async () => {
    const plugins = info.plugins.filter((p) => goAvailable(p));
    assert.ok(plugins.length > 0, `no Go plugin in ${GO_CNI}`);
    for (const plugin of plugins) {
      assert.deepEqual((await runWith(join(GO_CNI, plugin), '<&-', 'ADD')).json, CLOSED, plugin);
      assert.deepEqual((await runWith(join(GO_CNI, plugin), '</dev/null', 'ADD')).json, EMPTY, plugin);
    }
  });
});
