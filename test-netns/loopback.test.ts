/**
 * loopback through the compiled executables, driven like a runtime: the plugin runs inside a private "host"
 * namespace (`ip netns exec`) against a private container namespace; results are cached and DEL gets them back.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ConfList, Runtime, RuntimeError } from '@cnikit/libcni';
import { createSandbox, type Sandbox } from '@cnikit/testing';
import { type Backend, ensureBuilt, ensureLinks, GO_CNI, goAvailable } from './dist.ts';

const info = ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-lo-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

function loFlags(sb: Sandbox): string[] {
  const out = sb.exec('ip', ['-json', 'link', 'show', 'lo'], { ns: 'container' }).stdout;
  return (JSON.parse(out) as Array<{ flags: string[] }>)[0]?.flags ?? [];
}

function list(cniVersion: string, plugins = [{ type: 'loopback' }]): ConfList {
  return { cniVersion, name: 'cni-loopback', plugins };
}

function suite(backend: Backend, versions: string[]) {
  describe(`loopback via ${backend}${backend === info.default ? ' (default)' : ' (smoke)'}`, () => {
    const dir = ensureLinks(backend, info);

    for (const v of versions) {
      test(`ADD / CHECK / DEL / DEL again, cniVersion ${v}`, () => {
        const sb = createSandbox();
        try {
          sb.exec('ip', ['link', 'set', 'lo', 'down'], { ns: 'container' });
          assert.ok(!loFlags(sb).includes('UP'));
          const rt = new Runtime({
            path: [dir],
            cacheDir: join(scratch, `cache-${backend}-${v}`),
            hostNetns: sb.host.name,
          });
          const conf = { containerId: 'ctr-lo-1', netns: sb.container.path, ifName: 'eth0' };
          const result = rt.addNetworkList(list(v), conf);
          assert.ok(loFlags(sb).includes('UP'), 'lo is UP after ADD');
          assert.equal(result.cniVersion, v);
          if (v.startsWith('0.1') || v.startsWith('0.2')) {
            assert.equal((result.ip4 as { ip: string }).ip, '127.0.0.1/8');
          } else {
            assert.deepEqual(result.interfaces, [
              { name: 'lo', mac: '00:00:00:00:00:00', sandbox: sb.container.path },
            ]);
            assert.deepEqual(
              (result.ips as Array<{ address: string; interface: number }>).map((i) => [
                i.address,
                i.interface,
              ]),
              [
                ['127.0.0.1/8', 0],
                ['::1/128', 0],
              ],
            );
          }
          assert.deepEqual(rt.getCachedResult(list(v), conf), result, 'result cached like libcni');
          const canCheck = v === '0.4.0' || v.startsWith('1.');
          if (canCheck) rt.checkNetworkList(list(v), conf);
          rt.delNetworkList(list(v), conf);
          assert.ok(!loFlags(sb).includes('UP'), 'lo is DOWN after DEL');
          assert.equal(rt.getCachedResult(list(v), conf), undefined, 'cache entry removed');
          rt.delNetworkList(list(v), conf); // DEL again: idempotent
          assert.ok(!loFlags(sb).includes('UP'));
          if (canCheck) {
            const cached = { cniVersion: v, interfaces: [{ name: 'lo', sandbox: sb.container.path }] };
            const err = catchErr(() =>
              rt.invoke(
                'loopback',
                'CHECK',
                { ...rt.buildConfig(list(v), { type: 'loopback' }, conf), prevResult: cached },
                conf,
              ),
            );
            assert.equal(err.cni?.code, 999);
            assert.equal(err.cni?.msg, 'loopback interface is down');
          }
        } finally {
          sb.destroy();
        }
      });
    }

    test('DEL after the container namespace is gone, and with no CNI_NETNS, succeeds', () => {
      const sb = createSandbox();
      try {
        const rt = new Runtime({
          path: [dir],
          cacheDir: join(scratch, `cache-gone-${backend}`),
          hostNetns: sb.host.name,
        });
        const conf = { containerId: 'ctr-lo-2', netns: sb.container.path, ifName: 'eth0' };
        rt.addNetworkList(list('1.0.0'), conf);
        spawnSync('ip', ['netns', 'del', sb.container.name]);
        rt.delNetworkList(list('1.0.0'), conf);
        rt.delNetworkList(list('1.0.0'), { ...conf, netns: '' });
      } finally {
        sb.destroy();
      }
    });
  });
}

function catchErr(fn: () => unknown): RuntimeError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RuntimeError) return err;
    throw err;
  }
  assert.fail('expected a plugin error');
}

suite(info.default, ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
suite(info.default === 'bun' ? 'sea' : 'bun', ['1.0.0']);

describe('loopback chains', () => {
  test('a chained loopback passes prevResult through unchanged; non-loopback address is reported', () => {
    const sb = createSandbox();
    try {
      const rt = new Runtime({
        path: [ensureLinks(info.default, info)],
        cacheDir: join(scratch, 'cache-chain'),
        hostNetns: sb.host.name,
      });
      const conf = { containerId: 'ctr-chain', netns: sb.container.path, ifName: 'eth0' };
      const steps: Array<[string, unknown]> = [];
      const l = list('1.0.0', [{ type: 'loopback' }, { type: 'loopback' }]);
      const final = rt.addNetworkList(l, conf, (t, r) => steps.push([t, r]));
      assert.equal(steps.length, 2);
      assert.deepEqual(steps[1]?.[1], steps[0]?.[1], 'second plugin returns its prevResult');
      assert.deepEqual(final, steps[0]?.[1]);
      rt.checkNetworkList(l, conf);
      rt.delNetworkList(l, conf);
      assert.ok(!loFlags(sb).includes('UP'));

      sb.exec('ip', ['addr', 'add', '192.0.2.9/32', 'dev', 'lo'], { ns: 'container' });
      const err = catchErr(() => rt.addNetworkList(list('1.0.0'), conf));
      assert.equal(err.cni?.code, 999);
      assert.equal(err.cni?.msg, 'loopback interface found with non-loopback address "192.0.2.9"');
    } finally {
      sb.destroy();
    }
  });

  test('same result as the Go reference loopback (1.0.0)', () => {
    assert.ok(
      goAvailable(),
      `${GO_CNI}/loopback not installed` +
        ' (Debian package containernetworking-plugins; .ci/run installs it)',
    );
    const sb = createSandbox();
    try {
      const conf = { containerId: 'ctr-go', netns: sb.container.path, ifName: 'eth0' };
      const ours = new Runtime({
        path: [ensureLinks(info.default, info)],
        cacheDir: join(scratch, 'c-ours'),
        hostNetns: sb.host.name,
      });
      const go = new Runtime({ path: [GO_CNI], cacheDir: join(scratch, 'c-go'), hostNetns: sb.host.name });
      const a = ours.addNetworkList(list('1.0.0'), conf);
      const b = go.addNetworkList(list('1.0.0'), conf);
      const strip = ({ dns: _dns, ...rest }: Record<string, unknown>) => rest;
      assert.deepEqual(strip(a), strip(b));
      go.delNetworkList(list('1.0.0'), conf);
      assert.ok(!loFlags(sb).includes('UP'));
      ours.delNetworkList(list('1.0.0'), conf);
    } finally {
      sb.destroy();
    }
  });
});
