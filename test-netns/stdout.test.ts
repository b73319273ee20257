/**
 * Stdout on /dev/null is a destination the caller chose (a shell's `>/dev/null` opens it write-only,
 * Python's subprocess.DEVNULL and `1<>/dev/null` read-write), not a closed stdout: the executables exit 0 and an ADD
 * stays, as with Go's plugins. Only a write that fails — here a read-only /dev/null (`1</dev/null`, EBADF) — means the
 * result was not delivered: ADD is rolled back and exits 1 with the error on stderr; DEL prints nothing and succeeds.
 * Both back-ends, every plugin's VERSION, host-local's ADD/DEL (its reservation files show whether ADD stayed).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type CniCommand, cniCall } from '@cnikit/testing';
import { ensureBuilt, ensureLinks, GO_CNI, goAvailable } from './dist.ts';

const info = ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-stdout-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const REDIRECTS = {
  'write-only': '>/dev/null',
  'read-write': '1<>/dev/null',
  'read-only': '1</dev/null',
} as const;
type Mode = keyof typeof REDIRECTS;

/** The plugin started by sh with fd 1 redirected; its stdout never reaches us, its stderr and exit code do. */
async function runWith(binary: string, mode: Mode, command: CniCommand, conf: unknown, id = 'stdout-test') {
  return cniCall({ binary: 'sh', args: ['-c', `exec "$0" ${REDIRECTS[mode]}`, binary] }, command, conf, {
    containerId: id,
    netns: '/nonexistent/netns',
    path: '/nonexistent',
    timeoutMs: 20_000,
  });
}

const hostLocal = (dataDir: string, cniVersion = '1.1.0') => ({
  cniVersion,
  name: 'stdoutnet',
  type: 'host-local',
  ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: '10.77.0.0/24' }]] },
});
const reservations = (dataDir: string) =>
  existsSync(join(dataDir, 'stdoutnet'))
    ? readdirSync(join(dataDir, 'stdoutnet')).filter((f) => /^10\./.test(f))
    : [];

describe('stdout on /dev/null, through the executables', () => {
  for (const backend of ['bun', 'sea'] as const) {
    const dir = () => ensureLinks(backend, info);
    test(`${backend}: VERSION of every plugin exits 0 on a write-only or read-write /dev/null, 1 on a read-only one`, async () => {
      for (const plugin of info.plugins) {
        for (const mode of ['write-only', 'read-write'] as const) {
          const r = await runWith(join(dir(), plugin), mode, 'VERSION', '');
          assert.equal(r.code, 0, `${plugin} ${mode}: ${r.stderr}`);
          assert.equal(r.stderr, '', `${plugin} ${mode}`);
        }
        const ro = await runWith(join(dir(), plugin), 'read-only', 'VERSION', '');
        assert.equal(ro.code, 1, `${plugin} read-only`);
        assert.match(ro.stderr, /could not write the error to stdout/, plugin);
      }
    });
    for (const mode of ['write-only', 'read-write'] as const) {
      test(`${backend}: host-local ADD on a ${mode} /dev/null stays (exit 0), DEL removes it (exit 0)`, async () => {
        const data = mkdtempSync(join(scratch, `${backend}-${mode}-`));
        const add = await runWith(join(dir(), 'host-local'), mode, 'ADD', hostLocal(data));
        assert.equal(add.code, 0, add.stderr);
        assert.equal(add.stderr, '');
        assert.deepEqual(reservations(data), ['10.77.0.2']);
        const del = await runWith(join(dir(), 'host-local'), mode, 'DEL', hostLocal(data));
        assert.equal(del.code, 0, del.stderr);
        assert.deepEqual(reservations(data), []);
      });
    }
    test(`${backend}: host-local ADD on a read-only /dev/null is rolled back (exit 1, error on stderr); DEL exits 0`, async () => {
      const data = mkdtempSync(join(scratch, `${backend}-ro-`));
      const add = await runWith(join(dir(), 'host-local'), 'read-only', 'ADD', hostLocal(data));
      assert.equal(add.code, 1);
      assert.match(add.stderr, /failed to write the result to stdout/);
      assert.match(add.stderr, /the ADD was rolled back/);
      assert.deepEqual(reservations(data), []);
      // a reservation made with a working stdout is released by a DEL whose stdout is read-only: DEL prints nothing
      // (the rolled-back ADD's allocation cursor, last_reserved_ip, stays advanced: the next ADD takes .3)
      const ok = await runWith(join(dir(), 'host-local'), 'write-only', 'ADD', hostLocal(data));
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(reservations(data).length, 1);
      const del = await runWith(join(dir(), 'host-local'), 'read-only', 'DEL', hostLocal(data));
      assert.equal(del.code, 0, del.stderr);
      assert.deepEqual(reservations(data), []);
    });
  }

  test('the Go reference behaves the same on a write-only and a read-write /dev/null (VERSION and ADD exit 0)', async () => {
    assert.ok(goAvailable('host-local'), `no Go host-local in ${GO_CNI}`);
    for (const mode of ['write-only', 'read-write'] as const) {
      const data = mkdtempSync(join(scratch, `go-${mode}-`));
      assert.equal((await runWith(join(GO_CNI, 'host-local'), mode, 'VERSION', '')).code, 0, mode);
      // Debian's Go plugins (1.1.1) speak up to spec 1.0.0
      const add = await runWith(join(GO_CNI, 'host-local'), mode, 'ADD', hostLocal(data, '1.0.0'));
      assert.equal(add.code, 0, `${mode}: ${add.stderr}`);
      assert.deepEqual(reservations(data), ['10.77.0.2']);
    }
  });
});
