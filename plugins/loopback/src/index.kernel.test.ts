import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type CniCommand, cniRunner, sandboxForFile } from '@cnikit/testing';
import { plugin } from './index.ts';

// the sandbox's container namespace plays the container (its lo starts down, as in a new namespace)
const fixture = sandboxForFile();
before(() => fixture.sb.exec('ip', ['link', 'set', 'lo', 'down'], { ns: 'container' }));
const nsName = () => fixture.sb.container.name;
const nsPath = () => fixture.sb.container.path;

function ip(...args: string[]): string {
  return fixture.sb.exec('ip', args, { ns: 'container' }).stdout;
}
function loFlags(): string[] {
  return (JSON.parse(ip('-json', 'link', 'show', 'lo')) as Array<{ flags: string[] }>)[0]?.flags ?? [];
}
const lo = cniRunner(plugin, { path: '/nonexistent', args: 'none' });
/** One in-process call into the container namespace (or `netns`). */
const call = (command: CniCommand, stdin: string, netns = nsPath()) => lo.call(command, stdin, { netns });
const conf = (v: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ cniVersion: v, name: 'lo-test', type: 'loopback', ...extra });

describe('loopback in a real namespace', () => {
  for (const v of ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`ADD/CHECK/DEL/DEL (cniVersion ${v})`, async () => {
      assert.ok(!loFlags().includes('UP'));
      const add = await call('ADD', conf(v));
      assert.equal(add.code, 0, add.stdout + add.stderr);
      assert.ok(loFlags().includes('UP'));
      const res = JSON.parse(add.stdout);
      assert.equal(res.cniVersion, v);
      if (v === '0.1.0' || v === '0.2.0') {
        assert.equal(res.ip4.ip, '127.0.0.1/8');
        assert.equal(res.ip6.ip, '::1/128');
      } else {
        assert.deepEqual(res.interfaces, [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: nsPath() }]);
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
        const chk = await call('CHECK', conf(v, { prevResult: res }));
        assert.equal(chk.code, 0, chk.stdout);
      }
      const del = await call('DEL', conf(v));
      assert.equal(del.code, 0, del.stdout);
      assert.ok(!loFlags().includes('UP'));
      const del2 = await call('DEL', conf(v));
      assert.equal(del2.code, 0, del2.stdout);
      if (canCheck) {
        const chk = await call('CHECK', conf(v, { prevResult: res }));
        assert.equal(chk.code, 1);
        assert.equal(JSON.parse(chk.stdout).msg, 'loopback interface is down');
      }
    });
  }

  test('CHECK fails when an address of the result is gone from lo (SPEC.md §2 CHECK), names it', async () => {
    const add = await call('ADD', conf('1.0.0'));
    assert.equal(add.code, 0, add.stdout);
    const res = JSON.parse(add.stdout);
    try {
      assert.equal((await call('CHECK', conf('1.0.0', { prevResult: res }))).code, 0);
      ip('addr', 'del', '::1/128', 'dev', 'lo');
      assert.ok(!ip('-6', 'addr', 'show', 'dev', 'lo').includes('::1/128'));
      assert.ok(loFlags().includes('UP'));
      const chk = await call('CHECK', conf('1.0.0', { prevResult: res }));
      assert.equal(chk.code, 1, chk.stdout);
      const err = JSON.parse(chk.stdout);
      assert.equal(err.code, 999);
      assert.equal(err.msg, 'loopback interface lacks address ::1/128 of prevResult');
      ip('addr', 'add', '::1/128', 'dev', 'lo');
      assert.equal((await call('CHECK', conf('1.0.0', { prevResult: res }))).code, 0);
      ip('addr', 'del', '127.0.0.1/8', 'dev', 'lo');
      const chk4 = await call('CHECK', conf('1.0.0', { prevResult: res }));
      assert.equal(JSON.parse(chk4.stdout).msg, 'loopback interface lacks address 127.0.0.1/8 of prevResult');
    } finally {
      for (const a of ['127.0.0.1/8', '::1/128'])
        fixture.sb.exec('ip', ['addr', 'add', a, 'dev', 'lo'], { ns: 'container', check: false });
      assert.equal((await call('DEL', conf('1.0.0'))).code, 0);
    }
  });

  test('CHECK in a chain ignores the addresses prevResult puts on other interfaces', async () => {
    const prev = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: nsPath() }],
      ips: [{ address: '10.1.0.5/24', interface: 0 }],
    };
    assert.equal((await call('ADD', conf('1.0.0', { prevResult: prev }))).code, 0);
    try {
      const chk = await call('CHECK', conf('1.0.0', { prevResult: prev }));
      assert.equal(chk.code, 0, chk.stdout);
    } finally {
      assert.equal((await call('DEL', conf('1.0.0'))).code, 0);
    }
  });

  test('ADD with prevResult returns it unchanged', async () => {
    const prev = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: nsPath() }],
      ips: [{ address: '10.1.0.5/24', interface: 0 }],
      dns: {},
    };
    const add = await call('ADD', conf('1.0.0', { prevResult: prev }));
    assert.equal(add.code, 0, add.stdout);
    const { dns: _dns, ...prevNoDns } = prev;
    const { dns: _d2, ...gotNoDns } = JSON.parse(add.stdout);
    assert.deepEqual(gotNoDns, prevNoDns);
    assert.ok(loFlags().includes('UP'));
  });

  test('ADD with a non-loopback address on lo fails naming it', async () => {
    ip('addr', 'add', '10.9.8.7/32', 'dev', 'lo');
    try {
      const add = await call('ADD', conf('1.0.0'));
      assert.equal(add.code, 1);
      assert.deepEqual(JSON.parse(add.stdout), {
        code: 999,
        msg: 'loopback interface found with non-loopback address "10.9.8.7"',
      });
    } finally {
      ip('addr', 'del', '10.9.8.7/32', 'dev', 'lo');
    }
  });

  test('DEL succeeds with empty CNI_NETNS and with a namespace that is gone', async () => {
    const a = await call('DEL', conf('1.0.0'), '');
    assert.equal(a.code, 0, a.stdout);
    const b = await call('DEL', conf('1.0.0'), `/run/netns/${nsName()}-gone`);
    assert.equal(b.code, 0, b.stdout);
    // the empty mount-point file left behind when a namespace was unmounted but its file not removed
    const leftover = join(tmpdir(), `cnikit-lo-leftover-${process.pid}`);
    writeFileSync(leftover, '');
    try {
      const c = await call('DEL', conf('1.0.0'), leftover);
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
        const r = await call('DEL', conf('1.0.0'), p);
        assert.equal(r.code, 1, `${p}: ${r.stdout}`);
        assert.match(JSON.parse(r.stdout).msg, /FS magic|not a network namespace/, p);
      }
    } finally {
      rmSync(file, { force: true });
    }
  });

  test('ADD into a missing namespace is an error', async () => {
    const r = await call('ADD', conf('1.0.0'), `/run/netns/${nsName()}-gone`);
    assert.equal(r.code, 1);
    assert.match(JSON.parse(r.stdout).msg, /no such file/i);
  });

  test('ADD into a file that is not a namespace is an error', async () => {
    const r = await call('ADD', conf('1.0.0'), '/etc/hostname');
    assert.equal(r.code, 1);
    assert.match(JSON.parse(r.stdout).msg, /FS magic|not a network namespace/);
  });
});
