/**
 * loopback through the compiled executables, driven like a runtime (@cnikit/libcni CniConfig): the plugins run as
 * processes from this thread, moved into a private "host" namespace, against a private container namespace; results
 * are cached and DEL gets them back.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject, PluginError } from '@cnikit/libcni';
import { toCurrent } from '@cnikit/skel';
import {
  catchError,
  cniCall,
  deleteNamedNetns,
  expectCniError,
  expectOk,
  type Sandbox,
  tempDir,
  withSandbox,
} from '@cnikit/testing';
import {
  type Backend,
  ensureBuilt,
  ensureLinks,
  GO_CNI,
  goAvailable,
  runtime,
  testBackends,
} from './dist.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-lo');
after(() => scratch.remove());

function loFlags(sb: Sandbox): string[] {
  const out = sb.exec('ip', ['-json', 'link', 'show', 'lo'], { ns: 'container' }).stdout;
  return (JSON.parse(out) as Array<{ flags: string[] }>)[0]?.flags ?? [];
}

function list(cniVersion: string, plugins = [{ type: 'loopback' }]) {
  return confListFromObject({ cniVersion, name: 'cni-loopback', plugins });
}

/** A result as the runtime sees it (JSON, as Go marshals it). */
// biome-ignore lint/suspicious/noExplicitAny: result JSON under test
const plain = (r: unknown): any => JSON.parse(JSON.stringify(r));

/** The runtime for `dir`, with its own result cache (plugins run from this thread's namespace: the sandbox host). */
const runtimeFor = (dir: string, cache: string) => runtime(join(scratch.path, cache), dir);

function suite(backend: Backend, versions: string[]) {
  describe(`loopback via ${backend}${backend === info.default ? ' (default)' : ' (smoke)'}`, () => {
    const dir = ensureLinks(backend, info);

    for (const v of versions) {
      test(`ADD / CHECK / DEL / DEL again, cniVersion ${v}`, async () => {
        await withSandbox(
          async (sb) => {
            sb.exec('ip', ['link', 'set', 'lo', 'down'], { ns: 'container' });
            assert.ok(!loFlags(sb).includes('UP'));
            const rt = runtimeFor(dir, `cache-${backend}-${v}`);
            const conf = { containerId: 'ctr-lo-1', netns: sb.container.path, ifName: 'eth0' };
            const raw = await rt.addNetworkListRaw(list(v), conf);
            const result = plain(raw);
            assert.ok(loFlags(sb).includes('UP'), 'lo is UP after ADD');
            assert.equal(result.cniVersion, v);
            if (v.startsWith('0.1') || v.startsWith('0.2')) {
              assert.equal(result.ip4.ip, '127.0.0.1/8');
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
            assert.deepEqual(
              plain(await rt.getNetworkListCachedResult(list(v), conf)),
              plain(toCurrent(raw)),
              'result cached like libcni',
            );
            const canCheck = v === '0.4.0' || v.startsWith('1.');
            if (canCheck) await rt.checkNetworkList(list(v), conf);
            await rt.delNetworkList(list(v), conf);
            assert.ok(!loFlags(sb).includes('UP'), 'lo is DOWN after DEL');
            assert.equal(
              await rt.getNetworkListCachedResult(list(v), conf),
              undefined,
              'cache entry removed',
            );
            await rt.delNetworkList(list(v), conf); // DEL again: idempotent
            assert.ok(!loFlags(sb).includes('UP'));
            if (canCheck) {
              const cached = { cniVersion: v, interfaces: [{ name: 'lo', sandbox: sb.container.path }] };
              // the plugin's own CHECK with this prevResult (the config a runtime builds: name and cniVersion injected)
              const r = await cniCall(
                { binary: join(dir, 'loopback') },
                'CHECK',
                { type: 'loopback', name: 'cni-loopback', cniVersion: v, prevResult: cached },
                { containerId: conf.containerId, netns: conf.netns, ifName: conf.ifName, path: dir },
              );
              expectCniError(r, 999, 'loopback interface is down');
            }
          },
          { enterHost: true },
        );
      });
    }

    test('DEL after the container namespace is gone, and with no CNI_NETNS, succeeds', async () => {
      await withSandbox(
        async (sb) => {
          const rt = runtimeFor(dir, `cache-gone-${backend}`);
          const conf = { containerId: 'ctr-lo-2', netns: sb.container.path, ifName: 'eth0' };
          await rt.addNetworkList(list('1.0.0'), conf);
          deleteNamedNetns(sb.container);
          await rt.delNetworkList(list('1.0.0'), conf);
          await rt.delNetworkList(list('1.0.0'), { ...conf, netns: '' });
        },
        { enterHost: true },
      );
    });
  });
}

suite(info.default, ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
// the other back-end only where the run drives both (npm test; the inner loop builds and tests one)
const other = info.default === 'bun' ? 'sea' : 'bun';
if (testBackends().includes(other)) suite(other, ['1.0.0']);

describe('loopback chains', () => {
  test('a chained loopback passes prevResult through unchanged; non-loopback address is reported', async () => {
    await withSandbox(
      async (sb) => {
        const dir = ensureLinks(info.default, info);
        const rt = runtimeFor(dir, 'cache-chain');
        const conf = { containerId: 'ctr-chain', netns: sb.container.path, ifName: 'eth0' };
        const o = { containerId: conf.containerId, netns: conf.netns, ifName: conf.ifName, path: dir };
        const bin = { binary: join(dir, 'loopback') };
        // the first step alone, and the second step given the first one's result, exactly as printed
        const lone = { type: 'loopback', name: 'cni-loopback', cniVersion: '1.0.0' };
        const first = expectOk(await cniCall(bin, 'ADD', lone, o));
        const second = expectOk(await cniCall(bin, 'ADD', { ...lone, prevResult: first }, o));
        assert.deepEqual(second, first, 'second plugin returns its prevResult');
        // the chain through the runtime ends with that same result
        const l = list('1.0.0', [{ type: 'loopback' }, { type: 'loopback' }]);
        const final = plain(await rt.addNetworkListRaw(l, conf));
        assert.deepEqual(final, first);
        await rt.checkNetworkList(l, conf);
        await rt.delNetworkList(l, conf);
        assert.ok(!loFlags(sb).includes('UP'));

        sb.exec('ip', ['addr', 'add', '192.0.2.9/32', 'dev', 'lo'], { ns: 'container' });
        const err = await catchError<PluginError>(() => rt.addNetworkList(list('1.0.0'), conf));
        assert.ok(err instanceof PluginError, String(err));
        assert.equal(err.code, 999);
        assert.equal(err.msg, 'loopback interface found with non-loopback address "192.0.2.9"');
      },
      { enterHost: true },
    );
  });

  test('same result as the Go reference loopback (1.0.0)', async () => {
    assert.ok(
      goAvailable(),
      `${GO_CNI}/loopback not installed` +
        ' (Debian package containernetworking-plugins; .ci/run installs it)',
    );
    await withSandbox(
      async (sb) => {
        const conf = { containerId: 'ctr-go', netns: sb.container.path, ifName: 'eth0' };
        const ours = runtimeFor(ensureLinks(info.default, info), 'c-ours');
        const go = runtimeFor(GO_CNI, 'c-go');
        const a = plain(await ours.addNetworkListRaw(list('1.0.0'), conf));
        const b = plain(await go.addNetworkListRaw(list('1.0.0'), conf));
        const strip = ({ dns: _dns, ...rest }: Record<string, unknown>) => rest;
        assert.deepEqual(strip(a), strip(b));
        await go.delNetworkList(list('1.0.0'), conf);
        assert.ok(!loFlags(sb).includes('UP'));
        await ours.delNetworkList(list('1.0.0'), conf);
      },
      { enterHost: true },
    );
  });
});
