/**
 * Real traffic between the namespaces of a black-box test: small Node programs started with `ip netns exec` (never
 * a shell), talking only to addresses inside the test's own namespaces, each bounded in time.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { scaled, timeScale } from '@cnikit/testing';

/** A server in `ns` answering every TCP connection and UDP datagram on `port` with `name`; stopped by kill(). */
export async function server(ns: string, port: number, name: string): Promise<{ kill(): void }> {
  const code = `const net = require('node:net'), dgram = require('node:dgram');
    const t = net.createServer((c) => c.end(${JSON.stringify(name)})).listen(${port}, '0.0.0.0');
    const u = dgram.createSocket('udp4'); u.on('message', (m, r) => u.send(${JSON.stringify(name)}, r.port, r.address));
    u.bind(${port}, '0.0.0.0', () => console.log('up')); setTimeout(() => process.exit(2), ${scaled(60_000)}).unref();`;
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    p.stdout.on('data', (d: Buffer) => d.toString().includes('up') && resolve());
    p.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return { kill: () => p.kill() };
}

/** One TCP connection or one UDP datagram (from a fixed source port) from `ns` to ip:port; what came back or ''. */
export function ask(ns: string, proto: 'tcp' | 'udp', ip: string, port: number): string {
  const code =
    proto === 'tcp'
      ? `const c = require('node:net').connect(${port}, '${ip}'); let b = '';
         c.on('data', (d) => b += d); c.on('end', () => { process.stdout.write(b); process.exit(0); });
         c.on('error', () => process.exit(0)); setTimeout(() => process.exit(0), ${scaled(3000)});`
      : `const s = require('node:dgram').createSocket('udp4');
         s.bind(40123, () => s.send('ping', ${port}, '${ip}'));
         s.on('message', (m) => { process.stdout.write(m.toString()); process.exit(0); }); setTimeout(() => process.exit(0), ${scaled(1500)});`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: scaled(10_000),
  });
  return r.stdout;
}

/** From `ns`, one TCP connection to each address at once; what each answered ('' = no connection in 1 s, scaled). */
export function reach(ns: string, ips: string[], port: number): string[] {
  const code = `const net = require('node:net');
    const one = (ip) => new Promise((res) => { let b = ''; const c = net.connect(${port}, ip);
      const t = setTimeout(() => { c.destroy(); res(''); }, ${scaled(1000)});
      c.on('data', (d) => b += d); c.on('end', () => { clearTimeout(t); res(b); });
      c.on('error', () => { clearTimeout(t); res(''); }); });
    Promise.all(${JSON.stringify(ips)}.map(one)).then((r) => { process.stdout.write(JSON.stringify(r)); process.exit(0); });`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: scaled(10_000),
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as string[];
}

/** A receiver in `ns` on `port`: `done` resolves with the bytes and milliseconds from connection to last byte. */
async function sink(
  ns: string,
  port: number,
): Promise<{ done: Promise<{ bytes: number; ms: number }>; kill(): void }> {
  const code = `const s = require('node:net').createServer((c) => {
      const t0 = process.hrtime.bigint(); let n = 0;
      c.on('data', (d) => { n += d.length; });
      c.on('end', () => { console.log(JSON.stringify({ bytes: n, ms: Number(process.hrtime.bigint() - t0) / 1e6 })); process.exit(0); });
    }).listen(${port}, '0.0.0.0', () => console.log('up')); setTimeout(() => process.exit(2), ${scaled(60_000)}).unref();`;
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

/**
 * Send `bytes` over one TCP connection from `fromNs` to toIp:port, received by a sink started in `toNs`; returns
 * the milliseconds the receiver saw from the connection to the last byte.
 */
export async function transfer(
  fromNs: string,
  toNs: string,
  toIp: string,
  port: number,
  bytes: number,
): Promise<number> {
  const s = await sink(toNs, port);
  try {
    const code = `const c = require('node:net').connect(${port}, '${toIp}', () => c.end(Buffer.alloc(${bytes})));
      c.on('close', () => process.exit(0)); c.on('error', (e) => { console.error(e.message); process.exit(1); });`;
    const r = spawnSync('ip', ['netns', 'exec', fromNs, process.execPath, '-e', code], {
      encoding: 'utf8',
      timeout: scaled(30_000),
    });
    assert.equal(r.status, 0, `sender failed: ${r.stderr}`);
    const got = await s.done;
    assert.equal(got.bytes, bytes);
    return got.ms;
  } finally {
    s.kill();
  }
}

/**
 * The rate (bits/s) the shaping tests set: 8 Mbit/s, divided by the time scale in the kernel lab. An unshaped transfer
 * is CPU-bound and TCG makes it ~10× slower, while a shaped one takes the same wall time, so at 8 Mbit/s the two came
 * within 2× of each other there (509 ms unshaped against 1000 ms shaped at load ~10); at a tenth of the rate they
 * stay as far apart as on the host.
 */
export const SHAPING_RATE = Math.round(8_000_000 / timeScale());

/**
 * Assert that a transfer shaped at `rateBits` took the time the rate implies: the bucket lets the first bytes
 * through at once and TCP needs a few round trips to fill the pipe, so 0.8–1.6× of bytes·8/rate.
 */
export function assertShaped(what: string, ms: number, bytes: number, rateBits: number): void {
  const expected = ((bytes * 8) / rateBits) * 1000;
  assert.ok(
    ms > expected * 0.8 && ms < expected * 1.6,
    `${what}: ${ms.toFixed(0)} ms, expected ~${expected.toFixed(0)} ms (0.8–1.6×)`,
  );
}

/**
 * Assert that a transfer was not shaped at `rateBits`: under half the time the rate implies, well below
 * {@link assertShaped}'s floor of 0.8× (an unshaped megabyte takes ~10-30 ms here, ~250-500 ms in the kernel lab's
 * TCG: see {@link SHAPING_RATE}).
 */
export function assertUnshaped(what: string, ms: number, bytes: number, rateBits: number): void {
  const expected = ((bytes * 8) / rateBits) * 1000;
  assert.ok(
    ms < expected / 2,
    `${what} is not shaped: ${ms.toFixed(0)} ms, expected < ${(expected / 2).toFixed(0)} ms`,
  );
}
