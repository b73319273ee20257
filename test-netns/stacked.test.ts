// cnikit-kernel-features: macvlan ipvlan vlan
// cnikit-test-plugins: macvlan ipvlan vlan
/**
 * macvlan, ipvlan and vlan through the compiled executables (dist-bin), as a runtime runs them, in private
 * namespaces (in the kernel lab: this machine's kernel has none of the three link types):
 *   - interop with the Go reference plugins (/usr/lib/cni, Debian 1.1.1) both ways: ADD by one implementation,
 *     CHECK and DEL by the other, same kernel state after either ADD;
 *   - two containers on one macvlan master talk to each other and to the "outside" (a namespace on the master's
 *     wire);
 *   - a Multus-style second interface: net1 (macvlan + static IPAM) beside bridge's eth0, both through libcni.
 * `run-tests --plugin NAME` runs NAME's cases only (CNIKIT_TEST_PLUGINS, pluginSelected of @cnikit/testing).
 * The sandbox's host namespace plays the node; its master `m0` is a veth whose peer is in the outside namespace.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import {
  cniCall,
  createNamedNetns,
  deleteNamedNetns,
  expectOk,
  pluginSelected,
  sandboxForFile,
  scaled,
} from '@cnikit/testing';
import { DIST, ensureBuilt, GO_CNI, goAvailable, runtime } from './dist.ts';

const info = ensureBuilt();
const env = sandboxForFile({ enterHost: true, containers: 3 });
const c = (i: number) => env.sb.containers[i]!;
let outside = '';

// biome-ignore lint/suspicious/noExplicitAny: ip -json output
type J = any;
function ip(ns: string | undefined, args: string[]): string {
  const r = spawnSync('ip', ns ? ['-n', ns, ...args] : args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}
/** What an attachment leaves in a container: every link but lo with kind, mode/id, MTU, MAC, addresses, routes. */
function containerState(ns: string): string {
  const links = (JSON.parse(ip(ns, ['-d', '-j', 'addr', 'show'])) as J[])
    .filter((l) => l.ifname !== 'lo')
    .map((l) => ({
      name: l.ifname,
      kind: l.linkinfo?.info_kind,
      mode: l.linkinfo?.info_data?.mode,
      id: l.linkinfo?.info_data?.id,
      mtu: l.mtu,
      mac: l.address,
      up: l.flags.includes('UP'),
      addrs: (l.addr_info as J[]).filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`),
    }));
  const routes = ip(ns, ['route', 'show', 'table', 'main']).trim().split('\n').sort();
  return JSON.stringify({ links, routes });
}
const PORT = 7411;
/**
 * What `addr`'s server answers to one TCP connection from `ns` ('' when none); generous timeouts (the kernel lab is
 * an emulated CPU). Servers answer with their own name (traffic.ts).
 */
function talk(ns: string, addr: string): string {
  const code = `const c = require('node:net').connect(${PORT}, '${addr}'); let b = '';
    c.on('data', (d) => b += d); c.on('end', () => { process.stdout.write(b); process.exit(0); });
    c.on('error', () => process.exit(0)); setTimeout(() => process.exit(0), ${scaled(15_000)});`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    encoding: 'utf8',
    timeout: scaled(120_000),
  });
  return r.stdout ?? '';
}
const servers: Array<{ kill(): void }> = [];
/**
 * A TCP server in `ns` on PORT answering every connection with `name`, alive until killed (traffic.ts's servers exit
 * after a minute, shorter than this file takes in the kernel lab).
 */
async function serve(ns: string, name: string): Promise<{ kill(): void }> {
  const code = `require('node:net').createServer((c) => c.end(${JSON.stringify(name)}))
    .listen(${PORT}, '0.0.0.0', () => console.log('up'));
    setTimeout(() => process.exit(2), 3600000).unref();`;
  const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    p.stdout.on('data', (d: Buffer) => d.toString().includes('up') && resolve());
    p.on('exit', (c) => reject(new Error(`server in ${ns} exited ${c}`)));
  });
  return { kill: () => p.kill() };
}

before(() => {
  outside = createNamedNetns('cnikit-stk-out').name;
  ip(undefined, ['link', 'add', 'm0', 'type', 'veth', 'peer', 'name', 'm0p', 'netns', outside]);
  ip(undefined, ['link', 'set', 'm0', 'up']);
  ip(undefined, ['addr', 'add', '10.76.0.2/24', 'dev', 'm0']);
  ip(undefined, ['route', 'add', 'default', 'via', '10.76.0.1']);
  ip(outside, ['link', 'set', 'm0p', 'up']);
  ip(outside, ['addr', 'add', '10.76.0.1/24', 'dev', 'm0p']);
  ip(outside, ['link', 'add', 'link', 'm0p', 'name', 'm0p.42', 'type', 'vlan', 'id', '42']);
  ip(outside, ['link', 'set', 'm0p.42', 'up']);
  ip(outside, ['addr', 'add', '10.77.0.1/24', 'dev', 'm0p.42']);
});
before(async () => {
  // the outside answers on its plain and its vlan 42 address
  servers.push(await serve(outside, 'outside'));
});
after(() => {
  for (const x of servers) x.kill();
  if (outside) deleteNamedNetns(outside);
});
// a failed test must not leave its interfaces to the next one
afterEach(() => {
  for (const ns of env.sb.containers)
    for (const name of ['eth0', 'net1']) spawnSync('ip', ['-n', ns.name, 'link', 'del', name]);
});

const staticIpam = (address: string) => ({
  type: 'static',
  addresses: [{ address, gateway: address.startsWith('10.77.') ? '10.77.0.1' : '10.76.0.1' }],
  // with its gateway: Debian's Go 1.1.1 CHECK cannot match a route without one (it fails on its own ADD then)
  routes: [{ dst: '10.90.0.0/16', gw: address.startsWith('10.77.') ? '10.77.0.1' : '10.76.0.1' }],
});
const confs: Record<string, (address: string) => object> = {
  macvlan: (a) => ({
    cniVersion: '1.0.0',
    name: 'stk-mv',
    type: 'macvlan',
    master: 'm0',
    mode: 'bridge',
    ipam: staticIpam(a),
  }),
  ipvlan: (a) => ({
    cniVersion: '1.0.0',
    name: 'stk-ipv',
    type: 'ipvlan',
    master: 'm0',
    mode: 'l2',
    ipam: staticIpam(a),
  }),
  vlan: (a) => ({
    cniVersion: '1.0.0',
    name: 'stk-vl',
    type: 'vlan',
    master: 'm0',
    vlanId: 42,
    mtu: 1400,
    ipam: staticIpam(a),
  }),
};

describe('interop with the Go reference plugins, both ways', () => {
  before(() => {
    assert.ok(info.plugins.includes('macvlan'), 'dist-bin has no macvlan: npm run build');
    for (const p of ['macvlan', 'ipvlan', 'vlan', 'static'])
      assert.ok(goAvailable(p), `${GO_CNI}/${p} missing: install containernetworking-plugins`);
  });
  const impls = {
    cnikit: { binary: join(DIST, 'x'), path: DIST },
    go: { binary: join(GO_CNI, 'x'), path: GO_CNI },
  };
  for (const plugin of ['macvlan', 'ipvlan', 'vlan'].filter((p) => pluginSelected(p))) {
    test(`${plugin}: ADD by Go, CHECK/DEL by cnikit; ADD by cnikit, CHECK/DEL by Go; same state`, async () => {
      const address = plugin === 'vlan' ? '10.77.0.20/24' : '10.76.0.20/24';
      const cf = confs[plugin]!(address);
      const states: string[] = [];
      for (const [adder, other] of [
        ['go', 'cnikit'],
        ['cnikit', 'go'],
      ] as const) {
        const a = { binary: join(impls[adder].path, plugin) };
        const b = { binary: join(impls[other].path, plugin) };
        const o = (impl: 'go' | 'cnikit') => ({ netns: c(0).path, path: impls[impl].path });
        const res = expectOk<J>(await cniCall(a, 'ADD', cf, o(adder)), `${adder} ADD`);
        assert.equal(res.interfaces[0].name, 'eth0');
        states.push(containerState(c(0).name));
        // traffic to the outside: through the macvlan/ipvlan on m0, tagged 42 for the vlan
        const outsideAddr = plugin === 'vlan' ? '10.77.0.1' : '10.76.0.1';
        // the address was another MAC's a moment ago (the other implementation's macvlan): forget it
        ip(outside, ['neigh', 'flush', 'all']);
        assert.equal(talk(c(0).name, outsideAddr), 'outside', `${adder} ${plugin}: outside reachable`);
        expectOk<J>(await cniCall(b, 'CHECK', { ...cf, prevResult: res }, o(other)), `${other} CHECK`);
        expectOk<J>(await cniCall(a, 'CHECK', { ...cf, prevResult: res }, o(adder)), `${adder} CHECK`);
        expectOk<J>(await cniCall(b, 'DEL', cf, o(other)), `${other} DEL`);
        assert.equal(
          containerState(c(0).name),
          JSON.stringify({ links: [], routes: [''] }),
          `${other} DEL leaves nothing`,
        );
        expectOk<J>(await cniCall(a, 'DEL', cf, o(adder)), `${adder} DEL again`);
      }
      // the MAC of a macvlan/vlan is random per ADD: compare everything else
      const noMac = (s: string) => s.replace(/"mac":"[0-9a-f:]+"/g, '"mac":"*"');
      assert.equal(noMac(states[1]!), noMac(states[0]!));
    });
  }
});

// macvlan's (with bridge's primary interface in the second): `--plugin ipvlan`/`vlan` leave them out
if (pluginSelected('macvlan')) {
  describe('two containers on one macvlan master', () => {
    test('they reach each other and the outside; DEL leaves both clean', async () => {
      const mv = { binary: join(DIST, 'macvlan') };
      const cf = (a: string) => confs.macvlan!(a);
      for (const [i, a] of ['10.76.0.30/24', '10.76.0.31/24'].entries())
        expectOk<J>(
          await cniCall(mv, 'ADD', cf(a), { netns: c(i).path, path: DIST, containerId: `two-${i}` }),
        );
      servers.push(await serve(c(0).name, 'c0'), await serve(c(1).name, 'c1'));
      assert.equal(talk(c(0).name, '10.76.0.31'), 'c1', 'c0 → c1');
      assert.equal(talk(c(1).name, '10.76.0.30'), 'c0', 'c1 → c0');
      assert.equal(talk(c(0).name, '10.76.0.1'), 'outside', 'c0 → outside');
      assert.equal(talk(c(1).name, '10.76.0.1'), 'outside', 'c1 → outside');
      for (const x of servers.splice(1)) x.kill();
      // the outside learnt both containers' MACs on its wire
      const neigh = ip(outside, ['neigh', 'show', 'dev', 'm0p']);
      for (const [i, a] of ['10.76.0.30', '10.76.0.31'].entries()) {
        const mac = (JSON.parse(ip(c(i).name, ['-j', 'link', 'show', 'eth0'])) as J[])[0].address;
        assert.match(neigh, new RegExp(`${a.replace(/\./g, '\\.')} lladdr ${mac}`));
      }
      for (const [i, a] of ['10.76.0.30/24', '10.76.0.31/24'].entries()) {
        expectOk<J>(
          await cniCall(mv, 'DEL', cf(a), { netns: c(i).path, path: DIST, containerId: `two-${i}` }),
        );
        assert.equal(containerState(c(i).name), JSON.stringify({ links: [], routes: [''] }));
      }
    });
  });

  describe('Multus-style second interface through libcni', () => {
    test('eth0 = bridge + host-local, net1 = macvlan + static; CHECK, DEL of both', async () => {
      const cni = runtime(join(env.dir, 'cache'));
      const primary = confListFromObject({
        cniVersion: '1.0.0',
        name: 'podnet',
        plugins: [
          {
            type: 'bridge',
            bridge: 'cnistk0',
            isGateway: true,
            ipam: {
              type: 'host-local',
              routes: [{ dst: '0.0.0.0/0' }],
              ranges: [[{ subnet: '10.78.0.0/24' }]],
              dataDir: join(env.dir, 'ipam'),
            },
          },
        ],
      });
      const lan = confListFromObject({
        cniVersion: '1.0.0',
        name: 'lan',
        plugins: [
          {
            type: 'macvlan',
            master: 'm0',
            mode: 'bridge',
            capabilities: { mac: true },
            ipam: { type: 'static', addresses: [{ address: '10.76.0.40/24' }] },
          },
        ],
      });
      const rt0 = { containerId: 'pod1', netns: c(2).path, ifName: 'eth0' };
      const rt1 = { ...rt0, ifName: 'net1', capabilityArgs: { mac: '02:42:0a:4c:00:28' } };
      const r0 = await cni.addNetworkList(primary, rt0);
      const r1 = await cni.addNetworkList(lan, rt1);
      assert.equal((r1 as J).interfaces[0].name, 'net1');
      assert.equal((r1 as J).interfaces[0].mac, '02:42:0a:4c:00:28');
      assert.equal((r0 as J).ips[0].address.startsWith('10.78.0.'), true);
      const state = JSON.parse(containerState(c(2).name)) as J;
      assert.deepEqual(
        state.links.map((l: J) => [l.name, l.kind]),
        [
          ['eth0', 'veth'],
          ['net1', 'macvlan'],
        ],
      );
      assert.deepEqual(state.links[1].addrs, ['10.76.0.40/24']);
      assert.equal(state.links[1].mac, '02:42:0a:4c:00:28');
      // the default route stays on eth0; net1 reaches its own wire
      assert.match(state.routes.join('\n'), /default via 10\.78\.0\.1 dev eth0/);
      assert.equal(talk(c(2).name, '10.76.0.1'), 'outside', 'net1 → outside');
      await cni.checkNetworkList(primary, rt0);
      await cni.checkNetworkList(lan, rt1);
      await cni.delNetworkList(lan, rt1);
      await cni.delNetworkList(primary, rt0);
      assert.equal(containerState(c(2).name), JSON.stringify({ links: [], routes: [''] }));
    });
  });
}
