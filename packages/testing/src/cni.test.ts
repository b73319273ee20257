import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { catchError, cniCall, cniEnv, cniRunner, expectCniError, expectOk } from './cni.ts';
import { echo } from './testdata/echo-plugin.ts';

const ECHO_SOURCE = { source: join(import.meta.dirname, 'testdata', 'echo-plugin.ts'), exportName: 'echo' };

test('cniEnv: container fields only for ADD/DEL/CHECK; overrides and removals applied last', () => {
  assert.deepEqual(cniEnv('GC', { containerId: 'x' }), { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' });
  assert.deepEqual(cniEnv('ADD', { args: 'A=1', env: { CNI_PATH: undefined, X: 'y' } }), {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'ctr1',
    CNI_NETNS: '',
    CNI_IFNAME: 'eth0',
    CNI_ARGS: 'A=1',
    X: 'y',
  });
});

test('cniRunner in-process: result JSON, defaults merged with per-call options, spec errors asserted', async () => {
  const cni = cniRunner(echo, { netns: '/run/netns/x', ifName: 'net1' });
  const conf = { cniVersion: '1.1.0', name: 'n', type: 'echo' };
  const ok = expectOk(await cni.add(conf, { ifName: 'net2' }));
  assert.deepEqual(ok.interfaces, [{ name: 'net2', sandbox: '/run/netns/x' }]);
  const e = expectCniError(await cni.add(conf, { args: 'FAIL=1' }), 7, 'asked to fail');
  assert.equal(e.details, 'details here');
  await assert.rejects(async () => expectCniError(await cni.add(conf)), /expected a CNI error/);
  assert.match((await catchError(() => Promise.reject(new Error('boom')))).message, /boom/);
});

test('source target: the plugin as a process from source, same outcome as in-process; calls overlap', async () => {
  const conf = { cniVersion: '1.1.0', name: 'n', type: 'echo' };
  const o = { netns: '/run/netns/x', ifName: 'net1' };
  const [inProc, proc] = [await cniCall(echo, 'ADD', conf, o), await cniCall(ECHO_SOURCE, 'ADD', conf, o)];
  assert.deepEqual(proc.json, inProc.json);
  assert.equal(proc.code, 0);
  assert.equal(proc.signal, null);
  expectCniError(await cniCall(ECHO_SOURCE, 'ADD', conf, { ...o, args: 'FAIL=1' }), 7, 'asked to fail');
  // a barrier makes three processes wait for each other
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-barrier-'));
  try {
    const rs = await Promise.all(
      [0, 1, 2].map((i) =>
        cniCall(ECHO_SOURCE, 'ADD', conf, { ...o, ifName: `b${i}`, barrier: { dir, count: 3 } }),
      ),
    );
    assert.deepEqual(
      rs.map((r) => expectOk(r).interfaces?.[0]?.name),
      ['b0', 'b1', 'b2'],
    );
    assert.equal(readdirSync(dir).length, 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await assert.rejects(
    cniCall({ binary: '/bin/true' }, 'ADD', conf, { barrier: { dir: '/tmp', count: 1 } }),
    /barrier needs a source target/,
  );
});

test('process targets: killed after timeoutMs with SIGKILL, reported in signal', async () => {
  const r = await cniCall(
    ECHO_SOURCE,
    'ADD',
    { cniVersion: '1.1.0', name: 'n', type: 'echo' },
    { netns: '/run/netns/x', args: 'HANG=1', timeoutMs: 3000 },
  );
  assert.equal(r.signal, 'SIGKILL');
  assert.equal(r.code, 137);
});
