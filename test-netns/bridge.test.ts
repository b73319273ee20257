/**
 * bridge + host-local (+ loopback) through the compiled executables, as a runtime runs them: two containers on one
 * bridge exchange TCP traffic, IPAM is delegated in-process inside the multicall binary, DEL restores the host
 * namespace, and the Go reference plugins interoperate with ours (IPAM in either direction).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ConfList, type Json, Runtime } from '@cnikit/libcni';
import {
  createNamedNetns,
  createSandbox,
  deleteNamedNetns,
  diffSnapshots,
  formatDiff,
  type Sandbox,
  type Snapshot,
} from '@cnikit/testing';
import { type Backend, DIST, ensureBuilt, ensureLinks, GO_CNI, goAvailable } from './dist.ts';

const info = ensureBuilt();
const other: Backend = info.default === 'bun' ? 'sea' : 'bun';
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-br-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
const haveBridge = info.plugins.includes('bridge') && info.plugins.includes('host-local');
let seq = 0;

function netConf(subnet: string, br = 'cnibb0'): ConfList {
  return {
    cniVersion: '1.0.0',
    name: `bbnet${seq++}`,
    plugins: [
      {
        type: 'bridge',
        bridge: br,
        isGateway: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: join(scratch, `ipam-${seq}`),
        },
      },
    ],
  };
}
const LO: ConfList = { cniVersion: '1.0.0', name: 'lo', plugins: [{ type: 'loopback' }] };

/** Drop the bridge's running timers (gc_timer etc.), which @cnikit/testing's snapshot still includes. */
function stable(snap: Snapshot): Snapshot {
  const out = { ...snap };
  out.links = snap.links.map((l) => l.replace(/"[a-z_]*_timer":[0-9.]+,?/g, ''));
  return out;
}

/**
 * Wait until the host namespace is quiescent after the last port left the bridge: IPv6 DAD finished (the bridge's
 * link-local) and the bridge dropped its carrier (the kernel does both asynchronously).
 */
async function settle(sb: Sandbox, bridge: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const tentative = sb.exec('ip', ['-6', 'addr', 'show', 'tentative'], { ns: 'host' }).stdout.trim();
    const flags =
      (
        JSON.parse(sb.exec('ip', ['-json', 'link', 'show', 'dev', bridge], { ns: 'host' }).stdout) as Array<{
          flags: string[];
        }>
      )[0]?.flags ?? [];
    if (!tentative && flags.includes('NO-CARRIER')) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

function addrOf(result: Json): string {
  const ip = (result.ips as Array<{ address: string }>)[0]?.address;
  assert.ok(ip, `no address in ${JSON.stringify(result)}`);
  return ip.split('/')[0] as string;
}

/** TCP echo: server in `serverNs` on ip:port, client in `clientNs`; returns what the client received. */
async function tcpExchange(serverNs: string, clientNs: string, ip: string, port: number): Promise<string> {
  const server = spawn(
    'ip',
    [
      'netns',
      'exec',
      serverNs,
      process.execPath,
      '-e',
      `const s = require('node:net').createServer((c) => c.on('data', (d) => { c.end('echo:' + d); s.close(); }));
       s.listen(${port}, '${ip}', () => console.log('up')); setTimeout(() => process.exit(2), 15000).unref();`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout.on('data', (d: Buffer) => d.toString().includes('up') && resolve());
      server.on('exit', (c) => reject(new Error(`server exited ${c}`)));
    });
    const r = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        clientNs,
        process.execPath,
        '-e',
        `const c = require('node:net').connect(${port}, '${ip}', () => c.write('ping')); let b = '';
         c.on('data', (d) => b += d); c.on('end', () => { process.stdout.write(b); process.exit(0); });
         c.on('error', (e) => { console.error(e.message); process.exit(1); }); setTimeout(() => process.exit(3), 10000);`,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  } finally {
    server.kill();
  }
}

function attachTwo(rt: Runtime, sb: Sandbox, list: ConfList, second: { name: string; path: string }) {
  const a = { containerId: `bb-a-${seq}`, netns: sb.container.path, ifName: 'eth0' };
  const b = { containerId: `bb-b-${seq}`, netns: second.path, ifName: 'eth0' };
  rt.addNetworkList(LO, a);
  rt.addNetworkList(LO, b);
  const ra = rt.addNetworkList(list, a);
  const rb = rt.addNetworkList(list, b);
  return {
    ra,
    rb,
    detach() {
      rt.delNetworkList(list, b);
      rt.delNetworkList(list, a);
      rt.delNetworkList(LO, b);
      rt.delNetworkList(LO, a);
    },
  };
}

describe('bridge + host-local through the compiled executables', () => {
  assert.ok(haveBridge, 'bridge/host-local not built' + ' (npm test runs npm run build before the tests)');
  test(`two containers talk over TCP; DEL restores the host namespace (${info.default})`, async () => {
    const sb = createSandbox();
    const second = createNamedNetns('cnikit-container2');
    try {
      const rt = new Runtime({
        path: [DIST],
        cacheDir: join(scratch, 'cache-main'),
        hostNetns: sb.host.name,
      });
      const list = netConf('10.77.1.0/24');
      // First cycle creates the bridge (which the reference keeps after DEL); the second must leave no trace.
      attachTwo(rt, sb, list, second).detach();
      await settle(sb, 'cnibb0');
      const before = sb.snapshot('host');
      const { ra, rb, detach } = attachTwo(rt, sb, list, second);
      // host-local allocates round-robin after the last reserved address (.2/.3 in the first cycle)
      assert.equal(addrOf(ra), '10.77.1.4');
      assert.equal(addrOf(rb), '10.77.1.5');
      assert.equal(await tcpExchange(second.name, sb.container.name, addrOf(rb), 7101), 'echo:ping');
      detach();
      await settle(sb, 'cnibb0');
      const diff = diffSnapshots(stable(before), stable(sb.snapshot('host')));
      assert.deepEqual(diff, [], formatDiff(diff));
      const leftover = sb.exec('ip', ['-json', 'link', 'show', 'dev', 'eth0'], {
        ns: 'container',
        check: false,
      });
      assert.notEqual(leftover.status, 0, 'container eth0 removed');
    } finally {
      deleteNamedNetns(second);
      sb.destroy();
    }
  });

  test('IPAM is delegated in-process when host-local is the same executable (one execve per plugin call)', () => {
    assert.ok(
      spawnSync('strace', ['-V']).status === 0,
      'strace not installed' + ' (apt-get install strace; .ci/run installs it)',
    );
    const sb = createSandbox();
    try {
      const trace = join(scratch, `strace-${seq}`);
      const list = netConf('10.77.2.0/24', 'cnibb2');
      const conf = JSON.stringify({ ...list.plugins[0], name: list.name, cniVersion: list.cniVersion });
      const env = {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'bb-strace',
        CNI_NETNS: sb.container.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH: DIST,
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      };
      const r = spawnSync(
        'ip',
        [
          'netns',
          'exec',
          sb.host.name,
          'strace',
          '-f',
          '-qq',
          '-e',
          'trace=execve',
          '-o',
          trace,
          join(DIST, 'bridge'),
        ],
        { env, input: conf, encoding: 'utf8' },
      );
      assert.equal(r.status, 0, r.stdout + r.stderr);
      const execs = spawnSync('grep', ['-c', 'execve(', trace], { encoding: 'utf8' }).stdout.trim();
      assert.equal(execs, '1', `expected only the bridge exec, got ${execs}`);
      const del = spawnSync('ip', ['netns', 'exec', sb.host.name, join(DIST, 'bridge')], {
        env: { ...env, CNI_COMMAND: 'DEL' },
        input: conf,
        encoding: 'utf8',
      });
      assert.equal(del.status, 0, del.stdout);
    } finally {
      sb.destroy();
    }
  });

  test(`smoke on the ${other} back-end: ADD, CHECK, DEL, DEL again`, () => {
    const sb = createSandbox();
    try {
      const rt = new Runtime({
        path: [ensureLinks(other, info)],
        cacheDir: join(scratch, 'cache-other'),
        hostNetns: sb.host.name,
      });
      const list = netConf('10.77.3.0/24', 'cnibb3');
      const conf = { containerId: 'bb-other', netns: sb.container.path, ifName: 'eth0' };
      const res = rt.addNetworkList(list, conf);
      assert.equal(addrOf(res), '10.77.3.2');
      const addrs = sb.exec('ip', ['-json', 'addr', 'show', 'dev', 'eth0'], { ns: 'container' }).stdout;
      assert.match(addrs, /"local":"10\.77\.3\.2"/);
      rt.checkNetworkList(list, conf);
      rt.delNetworkList(list, conf);
      rt.delNetworkList(list, conf);
      assert.notEqual(sb.exec('ip', ['link', 'show', 'eth0'], { ns: 'container', check: false }).status, 0);
    } finally {
      sb.destroy();
    }
  });

  for (const [label, bridgeFrom, ipamFrom] of [
    ['our bridge with the Go host-local', 'ours', 'go'],
    ['the Go bridge with our host-local', 'go', 'ours'],
  ] as const) {
    test(`interop: ${label}`, async () => {
      assert.ok(
        goAvailable('bridge'),
        `${GO_CNI} not installed` + ' (Debian package containernetworking-plugins; .ci/run installs it)',
      );
      const dir = join(scratch, `mix-${bridgeFrom}-${ipamFrom}`);
      mkdirSync(dir, { recursive: true });
      const from = (who: 'ours' | 'go', name: string) =>
        who === 'ours' ? join(DIST, name) : join(GO_CNI, name);
      if (!readdirSync(dir).length) {
        // our binary must be a hard link (the multicall name comes from the link); Go's can be a symlink
        for (const [name, who] of [
          ['bridge', bridgeFrom],
          ['host-local', ipamFrom],
          ['loopback', 'ours'],
        ] as const) {
          if (who === 'ours') linkSync(from(who, name), join(dir, name));
          else symlinkSync(from(who, name), join(dir, name));
        }
      }
      const sb = createSandbox();
      const second = createNamedNetns('cnikit-container2');
      try {
        const rt = new Runtime({
          path: [dir],
          cacheDir: join(scratch, `cache-${bridgeFrom}`),
          hostNetns: sb.host.name,
        });
        const list = netConf(
          bridgeFrom === 'ours' ? '10.77.4.0/24' : '10.77.5.0/24',
          bridgeFrom === 'ours' ? 'cnibb4' : 'cnibb5',
        );
        const { rb, detach } = attachTwo(rt, sb, list, second);
        assert.equal(await tcpExchange(second.name, sb.container.name, addrOf(rb), 7102), 'echo:ping');
        detach();
        const ipamDir = (list.plugins[0] as unknown as { ipam: { dataDir: string } }).ipam.dataDir;
        const left = readdirSync(join(ipamDir, list.name)).filter((f) => /^\d/.test(f));
        assert.deepEqual(left, [], 'no reservations left');
      } finally {
        deleteNamedNetns(second);
        sb.destroy();
      }
    });
  }
});
