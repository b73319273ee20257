/**
 * bridge + host-local (+ loopback) through the compiled executables, as a runtime runs them: two containers on one
 * bridge exchange TCP traffic, IPAM is delegated in-process inside the multicall binary, DEL restores the host
 * namespace, and the Go reference plugins interoperate with ours (IPAM in either direction).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type CniConfig, confListFromObject, type NetworkConfigList } from '@cnikit/libcni';
import type { Result } from '@cnikit/skel';
import {
  cniCall,
  diffSnapshots,
  expectOk,
  formatDiff,
  type NamedNetns,
  type Sandbox,
  type Snapshot,
  scaled,
  tempDir,
  withSandbox,
} from '@cnikit/testing';
import {
  type Backend,
  DIST,
  ensureBuilt,
  ensureLinks,
  GO_CNI,
  goAvailable,
  runtime,
  testBackends,
} from './dist.ts';

const info = ensureBuilt();
const other: Backend = info.default === 'bun' ? 'sea' : 'bun';
const scratch = tempDir('bb-br');
after(() => scratch.remove());
const haveBridge = info.plugins.includes('bridge') && info.plugins.includes('host-local');
let seq = 0;

/** The conflist of one bridge network (a plain object: `netConf` parses it like a runtime). */
function netObj(subnet: string, br = 'cnibb0') {
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
          dataDir: join(scratch.path, `ipam-${seq}`),
        },
      },
    ],
  };
}
const netConf = (subnet: string, br?: string): NetworkConfigList => confListFromObject(netObj(subnet, br));
const LO = confListFromObject({ cniVersion: '1.0.0', name: 'lo', plugins: [{ type: 'loopback' }] });

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

function addrOf(result: Result): string {
  const ip = result.ips?.[0]?.address;
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
       s.listen(${port}, '${ip}', () => console.log('up')); setTimeout(() => process.exit(2), ${scaled(15_000)}).unref();`,
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
         c.on('error', (e) => { console.error(e.message); process.exit(1); }); setTimeout(() => process.exit(3), ${scaled(10_000)});`,
      ],
      { encoding: 'utf8', timeout: scaled(20_000) },
    );
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  } finally {
    server.kill();
  }
}

async function attachTwo(rt: CniConfig, sb: Sandbox, list: NetworkConfigList, second: NamedNetns) {
  const a = { containerId: `bb-a-${seq}`, netns: sb.container.path, ifName: 'eth0' };
  const b = { containerId: `bb-b-${seq}`, netns: second.path, ifName: 'eth0' };
  await rt.addNetworkList(LO, a);
  await rt.addNetworkList(LO, b);
  const ra = await rt.addNetworkList(list, a);
  const rb = await rt.addNetworkList(list, b);
  return {
    ra,
    rb,
    async detach() {
      await rt.delNetworkList(list, b);
      await rt.delNetworkList(list, a);
      await rt.delNetworkList(LO, b);
      await rt.delNetworkList(LO, a);
    },
  };
}

/** The runtime for `dir`, with its own result cache (plugins run from this thread's namespace: the sandbox host). */
const runtimeFor = (dir: string, cache: string) => runtime(join(scratch.path, cache), dir);

describe('bridge + host-local through the compiled executables', () => {
  assert.ok(haveBridge, 'bridge/host-local not built' + ' (npm test runs npm run build before the tests)');
  test(`two containers talk over TCP; DEL restores the host namespace (${info.default})`, async () => {
    await withSandbox(
      async (sb) => {
        const second = sb.newContainer();
        const rt = runtimeFor(DIST, 'cache-main');
        const list = netConf('10.77.1.0/24');
        // First cycle creates the bridge (which the reference keeps after DEL); the second must leave no trace.
        await (await attachTwo(rt, sb, list, second)).detach();
        await settle(sb, 'cnibb0');
        const before = sb.snapshot('host');
        const { ra, rb, detach } = await attachTwo(rt, sb, list, second);
        // host-local allocates round-robin after the last reserved address (.2/.3 in the first cycle)
        assert.equal(addrOf(ra), '10.77.1.4');
        assert.equal(addrOf(rb), '10.77.1.5');
        assert.equal(await tcpExchange(second.name, sb.container.name, addrOf(rb), 7101), 'echo:ping');
        await detach();
        await settle(sb, 'cnibb0');
        const diff = diffSnapshots(stable(before), stable(sb.snapshot('host')));
        assert.deepEqual(diff, [], formatDiff(diff));
        const leftover = sb.exec('ip', ['-json', 'link', 'show', 'dev', 'eth0'], {
          ns: 'container',
          check: false,
        });
        assert.notEqual(leftover.status, 0, 'container eth0 removed');
      },
      { enterHost: true },
    );
  });

  test('IPAM is delegated in-process when host-local is the same executable (one execve per plugin call)', async () => {
    assert.ok(
      spawnSync('strace', ['-V']).status === 0,
      'strace not installed' + ' (apt-get install strace; .ci/run installs it)',
    );
    await withSandbox(async (sb) => {
      const trace = join(scratch.path, `strace-${seq}`);
      const obj = netObj('10.77.2.0/24', 'cnibb2');
      const conf = { ...obj.plugins[0], name: obj.name, cniVersion: obj.cniVersion };
      const o = { containerId: 'bb-strace', netns: sb.container.path, path: DIST, inNetns: sb.host.name };
      const strace = ['-f', '-qq', '-e', 'trace=execve', '-o', trace, join(DIST, 'bridge')];
      expectOk(await cniCall({ binary: 'strace', args: strace }, 'ADD', conf, o), 'ADD under strace');
      const execs = spawnSync('grep', ['-c', 'execve(', trace], { encoding: 'utf8' }).stdout.trim();
      assert.equal(execs, '1', `expected only the bridge exec, got ${execs}`);
      expectOk(await cniCall({ binary: join(DIST, 'bridge') }, 'DEL', conf, o), 'DEL');
    });
  });

  test('a bridge ADD failing after its in-process host-local changes nothing: no reservation, same cursor', async () => {
    await withSandbox(async (sb) => {
      const dataDir = join(scratch.path, `ipam-fail-${seq++}`);
      const o = { containerId: 'bb-fail', netns: sb.container.path, path: DIST, inNetns: sb.host.name };
      const bridge = { cniVersion: '1.0.0', type: 'bridge', bridge: 'cnibbf', isGateway: true };
      const files = (net: string) => {
        try {
          return readdirSync(join(dataDir, net))
            .filter((f) => f !== 'lock')
            .sort();
        } catch {
          return [];
        }
      };
      // the reliability probe's config: subnet ::/0 (IPAM succeeds, the bridge cannot take the gateway ::1/0)
      const any6 = {
        ...bridge,
        name: 'any6',
        ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: '::/0' }]] },
      };
      const r = await cniCall({ binary: join(DIST, 'bridge') }, 'ADD', any6, o);
      assert.notEqual(r.code, 0, r.stdout);
      assert.match(JSON.parse(r.stdout).msg, /failed to set bridge addr/);
      assert.deepEqual(files('any6'), [], 'no reservation and no last_reserved_ip.0 left');
      // a cursor that existed before the failed ADD keeps its value
      const v4 = (gw?: string) => ({
        ...bridge,
        name: 'v4',
        ipam: {
          type: 'host-local',
          dataDir,
          ranges: [[{ subnet: '10.77.9.0/24', ...(gw ? { gateway: gw } : {}) }]],
        },
      });
      expectOk(await cniCall({ binary: join(DIST, 'bridge') }, 'ADD', v4(), { ...o, containerId: 'bb-ok' }));
      assert.deepEqual(files('v4'), ['10.77.9.2', 'last_reserved_ip.0']);
      // the same subnet with another gateway: the bridge already holds 10.77.9.1/24, the ADD fails after IPAM
      const bad = await cniCall({ binary: join(DIST, 'bridge') }, 'ADD', v4('10.77.9.254'), o);
      assert.notEqual(bad.code, 0, bad.stdout);
      assert.deepEqual(files('v4'), ['10.77.9.2', 'last_reserved_ip.0']);
      assert.equal(readFileSync(join(dataDir, 'v4', 'last_reserved_ip.0'), 'utf8'), '10.77.9.2');
      // and the next ADD gets the address after it, as if the failed one never happened
      const next = expectOk(
        await cniCall({ binary: join(DIST, 'bridge') }, 'ADD', v4(), {
          ...o,
          containerId: 'bb-2',
          ifName: 'eth1',
        }),
      );
      assert.equal(addrOf(next), '10.77.9.3');
    });
  });

  // the other back-end only where the run drives both (npm test; the inner loop builds and tests one)
  if (testBackends().includes(other)) {
    test(`smoke on the ${other} back-end: ADD, CHECK, DEL, DEL again`, async () => {
      await withSandbox(
        async (sb) => {
          const rt = runtimeFor(ensureLinks(other, info), 'cache-other');
          const list = netConf('10.77.3.0/24', 'cnibb3');
          const conf = { containerId: 'bb-other', netns: sb.container.path, ifName: 'eth0' };
          const res = await rt.addNetworkList(list, conf);
          assert.equal(addrOf(res), '10.77.3.2');
          const addrs = sb.exec('ip', ['-json', 'addr', 'show', 'dev', 'eth0'], { ns: 'container' }).stdout;
          assert.match(addrs, /"local":"10\.77\.3\.2"/);
          await rt.checkNetworkList(list, conf);
          await rt.delNetworkList(list, conf);
          await rt.delNetworkList(list, conf);
          assert.notEqual(
            sb.exec('ip', ['link', 'show', 'eth0'], { ns: 'container', check: false }).status,
            0,
          );
        },
        { enterHost: true },
      );
    });
  }

  for (const [label, bridgeFrom, ipamFrom] of [
    ['our bridge with the Go host-local', 'ours', 'go'],
    ['the Go bridge with our host-local', 'go', 'ours'],
  ] as const) {
    test(`interop: ${label}`, async () => {
      assert.ok(
        goAvailable('bridge'),
        `${GO_CNI} not installed` + ' (Debian package containernetworking-plugins; .ci/run installs it)',
      );
      const dir = join(scratch.path, `mix-${bridgeFrom}-${ipamFrom}`);
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
      await withSandbox(
        async (sb) => {
          const second = sb.newContainer();
          const rt = runtimeFor(dir, `cache-${bridgeFrom}`);
          const obj = netObj(
            bridgeFrom === 'ours' ? '10.77.4.0/24' : '10.77.5.0/24',
            bridgeFrom === 'ours' ? 'cnibb4' : 'cnibb5',
          );
          const list = confListFromObject(obj);
          const { rb, detach } = await attachTwo(rt, sb, list, second);
          assert.equal(await tcpExchange(second.name, sb.container.name, addrOf(rb), 7102), 'echo:ping');
          await detach();
          const left = readdirSync(join(obj.plugins[0]!.ipam.dataDir, list.name)).filter((f) =>
            /^\d/.test(f),
          );
          assert.deepEqual(left, [], 'no reservations left');
        },
        { enterHost: true },
      );
    });
  }
});
