/**
 * host-local store path safety through the compiled executables (both back-ends: the directory-descriptor paths
 * under /proc/self/fd must work in each), and a reservation written by the Go reference with a 5000-byte container ID
 * (a file larger than 4096 bytes) released by cnikit's DEL.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type CniCommand, cniCall, tempDir } from '@cnikit/testing';
import { ensureBuilt, ensureLinks, GO_CNI, goAvailable, testBackends } from './dist.ts';

const info = ensureBuilt();

async function hostLocal(binary: string, command: CniCommand, dataDir: string, id = 'ctr1') {
  const conf = {
    cniVersion: '1.0.0',
    name: 'net',
    type: 'ipvlan',
    ipam: { type: 'host-local', subnet: '10.88.0.0/24', dataDir },
  };
  const r = await cniCall({ binary }, command, conf, {
    containerId: id,
    netns: '/nonexistent',
    path: '/nonexistent',
    timeoutMs: 30_000,
  });
  return { status: r.code, out: r.stdout, json: r.json };
}

describe('host-local store path safety (executables)', () => {
  for (const backend of testBackends()) {
    test(`${backend}: symlinked network directory and lock are refused, nothing is created outside; ADD/DEL work`, async () => {
      const bin = join(ensureLinks(backend, info), 'host-local');
      using t = tempDir('bb-store');
      const outside = join(t.path, 'outside');
      mkdirSync(outside);
      const d1 = join(t.path, 'd1');
      mkdirSync(d1);
      symlinkSync(outside, join(d1, 'net'));
      const a = await hostLocal(bin, 'ADD', d1);
      assert.equal(a.status, 1, a.out);
      assert.equal(a.json.code, 5);
      assert.match(a.json.msg, /d1\/net is not a directory: it is a symlink, which is never followed/);
      assert.equal((await hostLocal(bin, 'DEL', d1)).json?.code, 5);
      assert.deepEqual(readdirSync(outside), []);

      const d2 = join(t.path, 'd2');
      mkdirSync(join(d2, 'net'), { recursive: true });
      symlinkSync(join(outside, 'lock'), join(d2, 'net', 'lock'));
      const b = await hostLocal(bin, 'ADD', d2);
      assert.equal(b.json?.code, 5, b.out);
      assert.match(b.json.msg, /lock is a symlink, which is never followed/);
      assert.equal(existsSync(join(outside, 'lock')), false, 'the dangling lock target was created');

      const d3 = join(t.path, 'd3');
      const ok = await hostLocal(bin, 'ADD', d3);
      assert.equal(ok.status, 0, ok.out);
      assert.equal(ok.json.ips[0].address, '10.88.0.2/24');
      assert.equal(readFileSync(join(d3, 'net', '10.88.0.2'), 'latin1'), 'ctr1\r\neth0');
      assert.equal(lstatSync(join(d3, 'net', 'lock')).isFile(), true);
      assert.equal((await hostLocal(bin, 'DEL', d3)).status, 0);
      assert.deepEqual(readdirSync(join(d3, 'net')).sort(), ['last_reserved_ip.0', 'lock']);
    });
  }

  test('a reservation the Go host-local wrote for a 5000-byte container ID is released by cnikit DEL', async () => {
    assert.ok(goAvailable('host-local'), `no Go host-local in ${GO_CNI}`);
    using t = tempDir('bb-long');
    const id = `c${'x'.repeat(4999)}`;
    const go = await hostLocal(join(GO_CNI, 'host-local'), 'ADD', t.path, id);
    assert.equal(go.status, 0, go.out);
    const file = join(t.path, 'net', '10.88.0.2');
    assert.ok(statSync(file).size > 4096, 'the reservation is larger than 4096 bytes');
    const del = await hostLocal(join(ensureLinks(info.default, info), 'host-local'), 'DEL', t.path, id);
    assert.equal(del.status, 0, del.out);
    assert.equal(existsSync(file), false, 'the reservation was released');
  });
});
