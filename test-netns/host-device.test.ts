/**
 * host-device through the compiled executable, as a runtime runs it (@cnikit/libcni), in a private "host"
 * namespace: a device the kernel hands back when a container namespace dies without DEL (emulated: a veth end moved
 * back under its container-side name before the namespace is removed; a real veth would die with it, its peer keeps
 * this one alive) comes back by DEL, or by GC when the runtime lost its cache; and an ADD SIGKILLed at any moment
 * never loses the device.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { beforeEach, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { cniCall, deleteNamedNetns, sandboxForFile } from '@cnikit/testing';
import { DIST, ensureBuilt, runtime } from './dist.ts';

const info = ensureBuilt();
const env = sandboxForFile({ enterHost: true, containers: 1 });

// biome-ignore lint/suspicious/noExplicitAny: ip -json output
type J = any;
const hostLink = (name: string): J | undefined =>
  (JSON.parse(env.sb.exec('ip', ['-j', '-d', 'addr', 'show'], { ns: 'host' }).stdout) as J[]).find(
    (l) => l.ifname === name,
  );
const host = (args: string[]) => env.sb.exec('ip', args, { ns: 'host' });

const MAC = '0a:73:00:00:00:01';
function makeDevice(): void {
  host(['link', 'add', 'bb0', 'address', MAC, 'mtu', '1400', 'type', 'veth', 'peer', 'name', 'bb0p']);
  host(['addr', 'add', '192.168.91.7/24', 'dev', 'bb0']);
  host(['link', 'set', 'bb0', 'up']);
  host(['link', 'set', 'bb0p', 'up']);
}

/** Back in the host under its name, with its MAC, MTU, address, up, no alias; not under the container name. */
function assertBack(what: string): void {
  const l = hostLink('bb0');
  assert.ok(l, `${what}: bb0 is back in the host`);
  assert.equal(l.address, MAC, what);
  assert.equal(l.mtu, 1400, what);
  assert.ok(l.flags.includes('UP'), `${what}: up`);
  assert.equal(l.ifalias, undefined, what);
  assert.deepEqual(
    l.addr_info.filter((a: J) => a.scope !== 'link').map((a: J) => `${a.local}/${a.prefixlen}`),
    ['192.168.91.7/24'],
    what,
  );
  assert.equal(hostLink('net1'), undefined, `${what}: no net1 in the host`);
}

const plugin = () => ({ type: 'host-device', device: 'bb0', dataDir: join(env.dir, 'state') });
const list = () => confListFromObject({ cniVersion: '1.1.0', name: 'bbhd', plugins: [plugin()] });

describe('host-device through the binary', () => {
  assert.ok(info.plugins.includes('host-device'), 'host-device not built');
  beforeEach(() => {
    for (const n of ['bb0', 'bb0p', 'net1'])
      env.sb.exec('ip', ['link', 'del', n], { ns: 'host', check: false });
    makeDevice();
  });

  for (const verb of ['DEL', 'GC'] as const)
    test(`the namespace died without DEL, the container had changed MTU and state: ${verb} brings the device back`, async () => {
      const cn = env.sb.newContainer();
      const rt = runtime(join(env.dir, `cache-${verb}`));
      const att = { containerId: `bb-${verb}`, netns: cn.path, ifName: 'net1' };
      const r = await rt.addNetworkList(list(), att);
      assert.equal(r.interfaces?.[0]?.mac, MAC);
      env.sb.exec('ip', ['link', 'set', 'net1', 'down', 'mtu', '1280'], { ns: cn });
      env.sb.exec('ip', ['link', 'set', 'net1', 'netns', env.sb.host.name], { ns: cn });
      deleteNamedNetns(cn);
      assert.equal(hostLink('net1')?.ifalias, 'bb0', 'returned under its container-side name, alias kept');
      if (verb === 'DEL') await rt.delNetworkList(list(), att);
      // a runtime that lost its cache: GC reaches the plugin with no valid attachment
      else await runtime(join(env.dir, 'cache-empty')).gcNetworkList(list(), { validAttachments: [] });
      assertBack(verb);
    });

  test('ADD SIGKILLed at 12 moments inside it: DEL, then a fresh ADD and DEL, always find the device', async (t) => {
    const bin = { binary: join(DIST, 'host-device') };
    const stdin = { ...plugin(), cniVersion: '1.1.0', name: 'bbhd' };
    const o = { netns: env.sb.container.path, ifName: 'net1', containerId: 'bb-kill', path: DIST };
    let span = Infinity;
    for (let i = 0; i < 2; i++) {
      const t0 = performance.now();
      assert.equal((await cniCall(bin, 'ADD', stdin, o)).code, 0);
      span = Math.min(span, performance.now() - t0);
      assert.equal((await cniCall(bin, 'DEL', stdin, o)).code, 0);
    }
    // delays spread over 5-90 % of the fastest ADD seen; an ADD that still finished first (a faster run) is retried
    // at the next moment, up to 36 tries, so that 12 kills land inside ADDs
    let killed = 0;
    let tries = 0;
    for (; killed < 12 && tries < 36; tries++) {
      const delay = Math.max(1, span * (0.05 + (0.85 * (tries % 12)) / 11));
      const t0 = performance.now();
      const k = await cniCall(bin, 'ADD', stdin, { ...o, timeoutMs: delay });
      if (k.signal === 'SIGKILL') killed++;
      else span = Math.min(span, performance.now() - t0); // it finished first: the next moments are earlier
      const what = `kill at ${delay.toFixed(0)} ms`;
      assert.equal((await cniCall(bin, 'DEL', stdin, o)).code, 0, what);
      assertBack(what);
      assert.equal((await cniCall(bin, 'ADD', stdin, o)).code, 0, `${what}: fresh ADD`);
      assert.equal((await cniCall(bin, 'DEL', stdin, o)).code, 0, `${what}: DEL`);
      assertBack(`${what}, after a fresh ADD and DEL`);
    }
    t.diagnostic(`one ADD took ${span.toFixed(0)} ms; ${killed} of ${tries} were killed`);
    assert.ok(killed >= 12, `only ${killed} of ${tries} ADDs were killed`);
  });
});
