/**
 * Hardening found by probing the binaries from outside (issue "Hardening"), checked through the compiled executables:
 * - a configuration whose IPAM delegation leads back to the plugin itself (`"ipam": {"type": "bridge"}` in a bridge
 *   config) recursed in-process until memory ran out; it must end at once with a configuration error and leave no
 *   interface behind;
 * - a failed bridge + host-local ADD must change nothing, last_reserved_ip included.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniRunner, createSandbox, enterNetns, expectCniError, expectOk, tempDir } from '@cnikit/testing';
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

describe('a failed bridge + host-local ADD changes nothing', () => {
  test('requested address outside the range: no veth, no reservation, last_reserved_ip not advanced', async () => {
    const sb = createSandbox();
    const inHost = enterNetns(sb.host.path);
    const data = tempDir('bb-failed-add');
    try {
      const cni = cniRunner(
        { binary: join(DIST, 'bridge') },
        { netns: sb.container.path, path: DIST, containerId: 'fa' },
      );
      const conf = (ips?: string[]) => ({
        cniVersion: '1.0.0',
        name: 'fanet',
        type: 'bridge',
        bridge: 'cnifa0',
        ipam: { type: 'host-local', ranges: [[{ subnet: '10.81.0.0/24' }]], dataDir: data.path },
        ...(ips ? { args: { cni: { ips } } } : {}),
      });
      expectOk(await cni.add(conf()), 'first ADD');
      expectOk(await cni.del(conf()), 'first DEL');
      const store = join(data.path, 'fanet');
      const last = readFileSync(join(store, 'last_reserved_ip.0'), 'utf8');
      const before = sb.snapshot('host').links.filter((l) => !l.includes('cnifa0'));
      expectCniError(
        await cni.add(conf(['10.99.0.5'])),
        999,
        /failed to allocate all requested IPs: 10\.99\.0\.5/,
      );
      assert.equal(
        readFileSync(join(store, 'last_reserved_ip.0'), 'utf8'),
        last,
        'last_reserved_ip unchanged',
      );
      assert.deepEqual(
        readdirSync(store).filter((n) => n !== 'lock' && !n.startsWith('last_reserved_ip.')),
        [],
        'no reservation left',
      );
      assert.deepEqual(
        sb.snapshot('host').links.filter((l) => !l.includes('cnifa0')),
        before,
        'no host veth left',
      );
      assert.doesNotMatch(
        sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout,
        /eth0/,
        'no container eth0',
      );
    } finally {
      inHost.restore();
      sb.destroy();
      data.remove();
    }
  });
});
