import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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

  for (const v of ['0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`ADD/CHECK/DEL/DEL (cniVersion ${v})`, async () => {
      assert.ok(!loFlags().includes('UP'));
      const add = await invokeInProcess(plugin, env('ADD'), conf(v));
      assert.equal(add.code, 0, add.stdout + add.stderr);
      assert.ok(loFlags().includes('UP'));
      const res = JSON.parse(add.stdout);
      assert.equal(res.cniVersion, v);
      assert.deepEqual(res.interfaces, [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: nsPath }]);
      const addrs = res.ips.map((i: { address: string; interface: number }) => [i.address, i.interface]);
      assert.deepEqual(addrs, [
        ['127.0.0.1/8', 0],
        ['::1/128', 0],
      ]);
      if (v !== '0.3.1') {
        const chk = await invokeInProcess(plugin, env('CHECK'), conf(v, { prevResult: res }));
        assert.equal(chk.code, 0, chk.stdout);
      }
      const del = await invokeInProcess(plugin, env('DEL'), conf(v));
      assert.equal(del.code, 0, del.stdout);
      assert.ok(!loFlags().includes('UP'));
      const del2 = await invokeInProcess(plugin, env('DEL'), conf(v));
      assert.equal(del2.code, 0, del2.stdout);
      if (v !== '0.3.1') {
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
    assert.deepEqual(JSON.parse(add.stdout), prev);
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
