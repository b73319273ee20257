import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { invokeInProcess } from '@cnikit/skel';
import { plugin } from './index.ts';

const ns = `cnikit-lo-${process.pid}-${randomBytes(3).toString('hex')}`;
const nsPath = `/run/netns/${ns}`;

function ip(...args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}
function loFlags(): string[] {
  return (
    (JSON.parse(ip('-n', ns, '-json', 'link', 'show', 'lo')) as Array<{ flags: string[] }>)[0]?.flags ?? []
  );
}
function env(command: string, netns = nsPath): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'ctr1',
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/nonexistent',
    CNI_ARGS: 'none',
  };
}
const conf = (v: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ cniVersion: v, name: 'lo-test', type: 'loopback', ...extra });

describe('loopback in a real namespace', () => {
  before(() => ip('netns', 'add', ns));
  after(() => spawnSync('ip', ['netns', 'del', ns]));

  for (const v of ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`ADD/CHECK/DEL/DEL (cniVersion ${v})`, async () => {
      assert.ok(!loFlags().includes('UP'));
      const add = await invokeInProcess(plugin, env('ADD'), conf(v));
      assert.equal(add.code, 0, add.stdout + add.stderr);
      assert.ok(loFlags().includes('UP'));
      const res = JSON.parse(add.stdout);
      assert.equal(res.cniVersion, v);
      if (v === '0.1.0' || v === '0.2.0') {
        assert.equal(res.ip4.ip, '127.0.0.1/8');
        assert.equal(res.ip6.ip, '::1/128');
      } else {
        assert.deepEqual(res.interfaces, [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: nsPath }]);
        const addrs = res.ips.map((i: { address: string; interface: number; version?: string }) => [
          i.address,
          i.interface,
          i.version,
        ]);
        const old = v.startsWith('0.');
        assert.deepEqual(addrs, [
          ['127.0.0.1/8', 0, old ? '4' : undefined],
          ['::1/128', 0, old ? '6' : undefined],
        ]);
      }
      const canCheck = v === '0.4.0' || v.startsWith('1.');
      if (canCheck) {
        const chk = await invokeInProcess(plugin, env('CHECK'), conf(v, { prevResult: res }));
        assert.equal(chk.code, 0, chk.stdout);
      }
      const del = await invokeInProcess(plugin, env('DEL'), conf(v));
      assert.equal(del.code, 0, del.stdout);
      assert.ok(!loFlags().includes('UP'));
      const del2 = await invokeInProcess(plugin, env('DEL'), conf(v));
      assert.equal(del2.code, 0, del2.stdout);
      if (canCheck) {
        const chk = await invokeInProcess(plugin, env('CHECK'), conf(v, { prevResult: res }));
        assert.equal(chk.code, 1);
        assert.equal(JSON.parse(chk.stdout).msg, 'loopback interface is down');
      }
    });
  }

  test('ADD with prevResult returns it unchanged', async () => {
    const prev = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: nsPath }],
      ips: [{ address: '10.1.0.5/24', interface: 0 }],
      dns: {},
    };
    const add = await invokeInProcess(plugin, env('ADD'), conf('1.0.0', { prevResult: prev }));
    assert.equal(add.code, 0, add.stdout);
    const { dns: _dns, ...prevNoDns } = prev;
    const { dns: _d2, ...gotNoDns } = JSON.parse(add.stdout);
    assert.deepEqual(gotNoDns, prevNoDns);
    assert.ok(loFlags().includes('UP'));
  });

  test('ADD with a non-loopback address on lo fails naming it', async () => {
    ip('-n', ns, 'addr', 'add', '10.9.8.7/32', 'dev', 'lo');
    try {
      const add = await invokeInProcess(plugin, env('ADD'), conf('1.0.0'));
      assert.equal(add.code, 1);
      assert.deepEqual(JSON.parse(add.stdout), {
        code: 999,
        msg: 'loopback interface found with non-loopback address "10.9.8.7"',
      });
    } finally {
      ip('-n', ns, 'addr', 'del', '10.9.8.7/32', 'dev', 'lo');
    }
  });

  test('DEL succeeds with empty CNI_NETNS and with a namespace that is gone', async () => {
    const e = env('DEL', '');
    const a = await invokeInProcess(plugin, e, conf('1.0.0'));
    assert.equal(a.code, 0, a.stdout);
    const b = await invokeInProcess(plugin, env('DEL', `/run/netns/${ns}-gone`), conf('1.0.0'));
    assert.equal(b.code, 0, b.stdout);
    // the empty mount-point file left behind when a namespace was unmounted but its file not removed
    const leftover = join(tmpdir(), `cnikit-lo-leftover-${process.pid}`);
    writeFileSync(leftover, '');
    try {
      const c = await invokeInProcess(plugin, env('DEL', leftover), conf('1.0.0'));
      assert.equal(c.code, 0, c.stdout);
    } finally {
      rmSync(leftover, { force: true });
    }
  });

  test('DEL on a non-empty file, a directory or another namespace type is an error (not "gone")', async () => {
    const file = join(tmpdir(), `cnikit-lo-notns-${process.pid}`);
    writeFileSync(file, 'x');
    try {
      for (const p of [file, tmpdir(), '/proc/self/ns/mnt']) {
        const r = await invokeInProcess(plugin, env('DEL', p), conf('1.0.0'));
        assert.equal(r.code, 1, `${p}: ${r.stdout}`);
        assert.match(JSON.parse(r.stdout).msg, /FS magic|not a network namespace/, p);
      }
    } finally {
      rmSync(file, { force: true });
    }
  });

  test('ADD into a missing namespace is an error', async () => {
    const r = await invokeInProcess(plugin, env('ADD', `/run/netns/${ns}-gone`), conf('1.0.0'));
    assert.equal(r.code, 1);
    assert.match(JSON.parse(r.stdout).msg, /no such file/i);
  });

  test('ADD into a file that is not a namespace is an error', async () => {
    const r = await invokeInProcess(plugin, env('ADD', '/etc/hostname'), conf('1.0.0'));
    assert.equal(r.code, 1);
    assert.match(JSON.parse(r.stdout).msg, /FS magic|not a network namespace/);
  });
});
