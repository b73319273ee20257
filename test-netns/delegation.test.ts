/**
 * A configuration whose IPAM delegation leads back to the plugin itself (`"ipam": {"type": "bridge"}` in a bridge
 * config) recursed in-process until memory ran out; it must end at once with a configuration error and leave no
 * interface behind.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniRunner, createSandbox, enterNetns, expectCniError } from '@cnikit/testing';
import { DIST, ensureBuilt } from './dist.ts';

ensureBuilt();

describe('delegation cycles through the compiled executable', () => {
  test('bridge delegating its IPAM to bridge: code 7 within seconds, no veth left', async () => {
    const sb = createSandbox();
    const inHost = enterNetns(sb.host.path);
    try {
      const cni = cniRunner(
        { binary: join(DIST, 'bridge') },
        { netns: sb.container.path, path: DIST, containerId: 'cyc', timeoutMs: 20_000 },
      );
      const before = sb.snapshot('host').links;
      const t0 = Date.now();
      const r = await cni.add({
        cniVersion: '1.0.0',
        name: 'cyc',
        type: 'bridge',
        bridge: 'cnicyc0',
        ipam: { type: 'bridge' },
      });
      expectCniError(
        r,
        7,
        /delegation cycle: plugin "bridge" is reached again through its own delegation \(bridge → bridge\)/,
      );
      assert.ok(Date.now() - t0 < 10_000, `answered in ${Date.now() - t0} ms`);
      const links = sb.snapshot('host').links.filter((l) => !l.includes('cnicyc0'));
      assert.deepEqual(links, before, 'no host veth left');
      const ctr = sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout;
      assert.doesNotMatch(ctr, /eth0/, 'no container interface left');
    } finally {
      inHost.restore();
      sb.destroy();
    }
  });
});
