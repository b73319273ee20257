/**
 * bandwidth through the compiled executables, as a runtime runs it: bridge + host-local + bandwidth, then real
 * TCP transfers between the container and the private host namespace, timed at the receiver, in both directions:
 * shaped at 8 Mbit/s (a tenth of it in the kernel lab: SHAPING_RATE) they take the time the rate implies; an
 * unshaped container on the same bridge is far faster. DEL in reverse order leaves no IFB and no qdisc behind.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { sandboxForFile } from '@cnikit/testing';
import { ensureBuilt, runtime } from './dist.ts';
import { assertShaped, assertUnshaped, SHAPING_RATE, transfer } from './traffic.ts';

const info = ensureBuilt();
// plugins run as processes from this file's main thread, inside the sandbox's host namespace (like on a node)
const env = sandboxForFile({ enterHost: true, containers: 2 });

const RATE = SHAPING_RATE; // bits/s
const BURST = 100_000; // bits
const BYTES = 1_500_000; // 1.5 s at 8 Mbit/s (15 s in the kernel lab)

describe('bridge + host-local + bandwidth through the binaries, measured shaping', () => {
  assert.ok(info.plugins.includes('bandwidth'), 'bandwidth not built (npm test runs npm run build first)');
  test('shaped both ways takes the time the rate implies; unshaped is much faster; DEL leaves nothing', async () => {
    const { sb, dir } = env;
    const free = sb.containers[1]!;
    const rt = runtime(join(dir, 'cache'));
    const bridge = {
      type: 'bridge',
      bridge: 'cnibw0',
      isGateway: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.78.1.0/24' }]], dataDir: join(dir, 'ipam') },
    };
    const shaped = confListFromObject({
      cniVersion: '1.0.0',
      name: 'bwtest',
      plugins: [
        bridge,
        { type: 'bandwidth', ingressRate: RATE, ingressBurst: BURST, egressRate: RATE, egressBurst: BURST },
      ],
    });
    const plain = confListFromObject({ cniVersion: '1.0.0', name: 'bwtest', plugins: [bridge] });
    const a = { containerId: 'bw-a', netns: sb.container.path, ifName: 'eth0' };
    const b = { containerId: 'bw-b', netns: free.path, ifName: 'eth0' };
    const ra = await rt.addNetworkList(shaped, a);
    const rb = await rt.addNetworkList(plain, b);
    await rt.checkNetworkList(shaped, a);
    const ipA = ra.ips![0]!.address.split('/')[0]!;
    const ipB = rb.ips![0]!.address.split('/')[0]!;
    const gw = '10.78.1.1';
    const expected = ((BYTES * 8) / RATE) * 1000;
    const egress = await transfer(sb.container.name, sb.host.name, gw, 19001, BYTES);
    const ingress = await transfer(sb.host.name, sb.container.name, ipA, 19002, BYTES);
    const freeOut = await transfer(free.name, sb.host.name, gw, 19003, BYTES);
    const freeIn = await transfer(sb.host.name, free.name, ipB, 19004, BYTES);
    process.stderr.write(
      `bandwidth: ${BYTES} bytes at ${RATE / 1e6} Mbit/s (expected ~${expected} ms): egress ${egress.toFixed(0)} ms, ingress ${ingress.toFixed(0)} ms; unshaped ${freeOut.toFixed(0)} / ${freeIn.toFixed(0)} ms\n`,
    );
    assertShaped('egress (container → host)', egress, BYTES, RATE);
    assertShaped('ingress (host → container)', ingress, BYTES, RATE);
    assertUnshaped('egress of the unshaped container', freeOut, BYTES, RATE);
    assertUnshaped('ingress of the unshaped container', freeIn, BYTES, RATE);
    await rt.delNetworkList(shaped, a);
    await rt.delNetworkList(plain, b);
    const links = JSON.parse(sb.exec('ip', ['-j', 'link', 'show'], { ns: 'host' }).stdout) as Array<{
      ifname: string;
    }>;
    assert.deepEqual(
      links.map((l) => l.ifname).sort(),
      ['cnibw0', 'lo'],
      'no IFB and no veth left (the bridge stays, like the reference)',
    );
  });
});
