import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { before, describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import { cniCall, type NamedNetns, sandboxForFile, scaled } from '@cnikit/testing';
import { plugin } from './index.ts';
import { hostLocal, run } from './testenv.ts';

// A one-shot TCP echo server: prints "listening", then for the first connection "peer <addr>" and echoes.
const SERVER = `
const net = require('node:net');
const [host, port] = process.argv.slice(1);
const srv = net.createServer((s) => {
  console.log('peer ' + s.remoteAddress);
  s.pipe(s);
  s.on('end', () => srv.close());
});
srv.listen(Number(port), host, () => console.log('listening'));
setTimeout(() => process.exit(3), ${scaled(15_000)}).unref();
`;
const CLIENT = `
const net = require('node:net');
const [host, port, msg] = process.argv.slice(1);
const s = net.connect(Number(port), host, () => s.end(msg));
let got = '';
s.on('data', (d) => (got += d));
s.on('close', () => process.stdout.write(got, () => process.exit(0)));
s.on('error', (e) => { console.error(e.message); process.exit(2); });
setTimeout(() => process.exit(4), ${scaled(10_000)}).unref();
`;

function inNs(ns: string | undefined, args: string[]): [string, string[]] {
  return ns ? ['ip', ['netns', 'exec', ns, ...args]] : [args[0]!, args.slice(1)];
}

async function startServer(
  ns: string | undefined,
  host: string,
  port: number,
): Promise<{ peer: Promise<string>; proc: ChildProcess }> {
  const [cmd, args] = inNs(ns, [process.execPath, '-e', SERVER, host, String(port)]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let onPeer: (p: string) => void = () => {};
  const peer = new Promise<string>((r) => (onPeer = r));
  await new Promise<void>((resolve, reject) => {
    proc.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('listening')) resolve();
      const m = /peer (\S+)/.exec(out);
      if (m) onPeer(m[1]!);
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  return { peer, proc };
}

function echo(ns: string, host: string, port: number, msg: string): string {
  const [cmd, args] = inNs(ns, [process.execPath, '-e', CLIENT, host, String(port), msg]);
  return run(cmd, args);
}

const env = sandboxForFile({ enterHost: true, containers: 2 });
let outside: NamedNetns;
before(() => {
  // an "outside" network reached through the host: it has no route back to the container subnet
  outside = env.sb.newContainer();
  nl.createVethPair({ name: 'vout', peerName: 'eth0', peerNetnsPath: outside.path });
  nl.addAddr('vout', '198.51.100.1/24');
  nl.setLinkUp('vout');
  nl.withNetns(outside.path, () => {
    nl.addAddr('eth0', '198.51.100.2/24');
    nl.setLinkUp('eth0');
    nl.setLinkUp('lo');
  });
});

describe('bridge real traffic', () => {
  test('two containers reach each other and the gateway; masquerade towards the outside', async () => {
    const cf = {
      cniVersion: '1.0.0',
      name: 'trnet',
      type: 'bridge',
      bridge: 'brtr',
      isDefaultGateway: true,
      ipMasq: true,
      ipam: hostLocal(env.dir, '10.20.0.0/24'),
    };
    const [c0, c1] = env.sb.containers as [NamedNetns, NamedNetns];
    const r0 = await cniCall(plugin, 'ADD', cf, { netns: c0.path, containerId: 'tr0' });
    const r1 = await cniCall(plugin, 'ADD', cf, { netns: c1.path, containerId: 'tr1' });
    assert.equal(r0.code, 0, r0.stdout);
    assert.equal(r1.code, 0, r1.stdout);
    const ip0 = JSON.parse(r0.stdout).ips[0].address.split('/')[0];
    const ip1 = JSON.parse(r1.stdout).ips[0].address.split('/')[0];
    for (const c of [c0, c1]) run('ip', ['-n', c.name, 'link', 'set', 'lo', 'up']);

    // container → container
    const s1 = await startServer(c1.name, ip1, 7001);
    assert.equal(echo(c0.name, ip1, 7001, 'hello c1'), 'hello c1');
    assert.equal(await s1.peer, ip0);

    // container → gateway (the bridge address in the host namespace)
    const sg = await startServer(undefined, '10.20.0.1', 7002);
    assert.equal(echo(c1.name, '10.20.0.1', 7002, 'hello gw'), 'hello gw');
    assert.equal(await sg.peer, ip1);

    // container → outside through masquerade: the outside sees the host's address
    const so = await startServer(outside.name, '198.51.100.2', 7003);
    assert.equal(echo(c0.name, '198.51.100.2', 7003, 'hello world'), 'hello world');
    assert.equal(await so.peer, '198.51.100.1');

    for (const [c, id] of [
      [c0, 'tr0'],
      [c1, 'tr1'],
    ] as const) {
      const d = await cniCall(plugin, 'DEL', cf, { netns: c.path, containerId: id });
      assert.equal(d.code, 0, d.stdout);
    }
    // after DEL, the outside is unreachable (no interface) and the masquerade rules are gone
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
  });
});
