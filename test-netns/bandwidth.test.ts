/**
 * bandwidth through the compiled executables, as a runtime runs it: bridge + host-local + bandwidth, then real
 * TCP transfers between the container and the private host namespace, timed at the receiver, in both directions:
 * shaped at 8 Mbit/s they take the time the rate implies; an unshaped container on the same bridge is far faster.
 * DEL in reverse order leaves no IFB and no qdisc behind.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ConfList, Runtime } from '@cnikit/libcni';
import { createNamedNetns, createSandbox, deleteNamedNetns } from '@cnikit/testing';
import { DIST, ensureBuilt } from './dist.ts';

const info = ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-bandwidth-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const RATE = 8_000_000; // bits/s
const BURST = 100_000; // bits
const BYTES = 1_500_000; // 1.5 s at 8 Mbit/s

/** A receiver in `ns` on `port`: resolves with the milliseconds from the connection to the last byte. */
async function sink(
  ns: string,
  port: number,
): Promise<{ done: Promise<{ bytes: number; ms: number }>; kill(): void }> {
  const code = `const s = require('node:net').createServer((c) => {
      const t0 = process.hrtime.bigint(); let n = 0;
      c.on('data', (d) => { n += d.length; });
      c.on('end', () => { console.log(JSON.stringify({ bytes: n, ms: Number(process.hrtime.bigint() - t0) / 1e6 })); process.exit(0); });
    }).listen(${port}, '0.0.0.0', () => console.log('up')); setTimeout(() => process.exit(2), 60000).unref();`;
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const done = new Promise<{ bytes: number; ms: number }>((resolve, reject) => {
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line));
    });
    p.on('exit', (c) => c !== 0 && reject(new Error(`sink exited ${c}`)));
  });
  await new Promise<void>((resolve, reject) => {
    p.stdout.on('data', () => out.includes('up') && resolve());
    p.on('exit', (c) => reject(new Error(`sink exited ${c}`)));
  });
  return { done, kill: () => p.kill() };
}

/** Send BYTES from `ns` to ip:port over one TCP connection. */
function send(ns: string, ip: string, port: number): void {
  const code = `const c = require('node:net').connect(${port}, '${ip}', () => c.end(Buffer.alloc(${BYTES})));
    c.on('close', () => process.exit(0)); c.on('error', (e) => { console.error(e.message); process.exit(1); });`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 0, `sender failed: ${r.stderr}`);
}

async function transfer(fromNs: string, toNs: string, toIp: string, port: number): Promise<number> {
  const s = await sink(toNs, port);
  try {
    send(fromNs, toIp, port);
    const r = await s.done;
    assert.equal(r.bytes, BYTES);
    return r.ms;
  } finally {
    s.kill();
  }
}

describe('bridge + host-local + bandwidth through the binaries, measured shaping', () => {
  assert.ok(info.plugins.includes('bandwidth'), 'bandwidth not built (npm test runs npm run build first)');
  test('8 Mbit/s both ways takes the time the rate implies; unshaped is much faster; DEL leaves nothing', async () => {
    const sb = createSandbox();
    const free = createNamedNetns('cnikit-bw-free');
    try {
      const rt = new Runtime({ path: [DIST], cacheDir: join(scratch, 'cache'), hostNetns: sb.host.name });
      const bridge = {
        type: 'bridge',
        bridge: 'cnibw0',
        isGateway: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: '10.78.1.0/24' }]], dataDir: join(scratch, 'ipam') },
      };
      const shaped: ConfList = {
        cniVersion: '1.0.0',
        name: 'bwtest',
        plugins: [
          bridge,
          { type: 'bandwidth', ingressRate: RATE, ingressBurst: BURST, egressRate: RATE, egressBurst: BURST },
        ],
      };
      const plain: ConfList = { cniVersion: '1.0.0', name: 'bwtest', plugins: [bridge] };
      const a = { containerId: 'bw-a', netns: sb.container.path, ifName: 'eth0' };
      const b = { containerId: 'bw-b', netns: `/run/netns/${free.name}`, ifName: 'eth0' };
      const ra = rt.addNetworkList(shaped, a) as { ips: Array<{ address: string }> };
      const rb = rt.addNetworkList(plain, b) as { ips: Array<{ address: string }> };
      rt.checkNetworkList(shaped, a);
      const ipA = ra.ips[0]!.address.split('/')[0]!;
      const ipB = rb.ips[0]!.address.split('/')[0]!;
      const gw = '10.78.1.1';
      const expected = ((BYTES * 8) / RATE) * 1000;
      const egress = await transfer(sb.container.name, sb.host.name, gw, 19001);
      const ingress = await transfer(sb.host.name, sb.container.name, ipA, 19002);
      const freeOut = await transfer(free.name, sb.host.name, gw, 19003);
      const freeIn = await transfer(sb.host.name, free.name, ipB, 19004);
      process.stderr.write(
        `bandwidth: ${BYTES} bytes at ${RATE / 1e6} Mbit/s (expected ~${expected} ms): egress ${egress.toFixed(0)} ms, ingress ${ingress.toFixed(0)} ms; unshaped ${freeOut.toFixed(0)} / ${freeIn.toFixed(0)} ms\n`,
      );
      // Tolerance: the bucket (burst) lets the first bytes through at once and TCP needs a few RTTs to fill the
      // pipe, so the shaped time lies within 0.8–1.6× the rate's time.
      for (const [what, ms] of [
        ['egress (container → host)', egress],
        ['ingress (host → container)', ingress],
      ] as const) {
        assert.ok(
          ms > expected * 0.8 && ms < expected * 1.6,
          `${what}: ${ms.toFixed(0)} ms, expected ~${expected} ms`,
        );
      }
      assert.ok(freeOut < expected / 4 && freeIn < expected / 4, 'the unshaped container is not limited');
      rt.delNetworkList(shaped, a);
      rt.delNetworkList(plain, b);
      const links = JSON.parse(sb.exec('ip', ['-j', 'link', 'show'], { ns: 'host' }).stdout) as Array<{
        ifname: string;
      }>;
      assert.deepEqual(
        links.map((l) => l.ifname).sort(),
        ['cnibw0', 'lo'],
        'no IFB and no veth left (the bridge stays, like the reference)',
      );
    } finally {
      deleteNamedNetns(free);
      sb.destroy();
    }
  });
});
