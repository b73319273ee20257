/**
 * bandwidth against the real kernel: a private host namespace (the test's main thread lives there; bandwidth
 * works in the runtime's namespace) and a container namespace joined by a veth pair. Qdiscs, filters and IFBs are
 * read back with `tc -j` / `ip -j`, and the Go bandwidth (/usr/lib/cni) runs side by side for interop.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { tickInUsec } from '@cnikit/netlink';
import { cniRunner, expectCniError, expectOk, sandboxForFile } from '@cnikit/testing';
import { tbfParams } from './config.ts';
import { plugin } from './index.ts';
import { ifbDeviceName, ownerAlias } from './names.ts';

// biome-ignore lint/suspicious/noExplicitAny: result JSON of every spec version under test
type J = any;

const GO = '/usr/lib/cni/bandwidth';
const NET = 'bwnet';
const env = sandboxForFile({ enterHost: true });

// biome-ignore lint/suspicious/noExplicitAny: parsed JSON under test
const json = (cmd: string, args: string[], ns: 'host' | 'container' = 'host'): any[] => {
  const out = env.sb.exec(cmd, args, { ns }).stdout.trim();
  return out ? JSON.parse(out) : [];
};
const qdiscs = (dev: string) => json('tc', ['-j', '-raw', 'qdisc', 'show', 'dev', dev]);
const link = (dev: string) => json('ip', ['-j', '-d', 'link', 'show', dev])[0];
const linkExists = (dev: string, ns: 'host' | 'container' = 'host') =>
  env.sb.exec('ip', ['link', 'show', dev], { ns, check: false }).status === 0;
const ifbs = () => json('ip', ['-j', '-d', 'link', 'show', 'type', 'ifb']).map((l) => l.ifname as string);

/** A fresh veth: `hv<n>` in the host namespace, `eth0` in the container. */
let seq = 0;
function freshVeth(mtu = 1500, peer = 'eth0'): string {
  env.sb.exec('ip', ['link', 'del', peer], { ns: 'container', check: false });
  const host = `hv${seq++}`;
  env.sb.exec('ip', [
    'link',
    'add',
    host,
    'mtu',
    String(mtu),
    'type',
    'veth',
    'peer',
    'name',
    peer,
    'netns',
    env.sb.container.name,
  ]);
  env.sb.exec('ip', ['link', 'set', host, 'up']);
  env.sb.exec('ip', ['link', 'set', peer, 'up'], { ns: 'container' });
  return host;
}

function prev(v: string, host: string) {
  return {
    cniVersion: v,
    interfaces: [
      { name: host, mac: '02:00:00:00:00:01' },
      { name: 'eth0', mac: '02:00:00:00:00:02', sandbox: env.sb.container.path },
    ],
    ips: [{ ...(v.startsWith('0.') ? { version: '4' } : {}), address: '10.1.2.2/24', interface: 1 }],
  };
}

const LIMITS = {
  ingressRate: 8_000_000,
  ingressBurst: 800_000,
  egressRate: 16_000_000,
  egressBurst: 1_600_000,
};
function conf(host: string, extra: Record<string, unknown> = LIMITS, v = '1.0.0') {
  return { cniVersion: v, name: NET, type: 'bandwidth', prevResult: prev(v, host), ...extra };
}

const ours = () => cniRunner(plugin, { netns: env.sb.container.path, containerId: 'ctr1', ifName: 'eth0' });
const go = () =>
  cniRunner({ binary: GO }, { netns: env.sb.container.path, containerId: 'ctr1', ifName: 'eth0' });
const IFB = ifbDeviceName(NET, 'ctr1');

afterEach(() => {
  for (const l of ifbs()) env.sb.exec('ip', ['link', 'del', l]);
});

/** The TBF parameters the kernel reports, as Go's netlink reads them (rate bytes/s, limit bytes, buffer ticks). */
function tbfOf(dev: string): { rate: number; limit: number; buffer: number } | undefined {
  const q = qdiscs(dev).find((x) => x.kind === 'tbf');
  if (!q) return undefined;
  return { rate: q.options.rate, limit: q.options.limit, buffer: Number.parseInt(q.options.burst_raw, 16) };
}

describe('bandwidth ADD', () => {
  for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`ingress and egress shaping, spec ${v}`, async () => {
      const host = freshVeth(1400);
      const r = expectOk<J>(await ours().add(conf(host, LIMITS, v)));
      assert.equal(r.cniVersion, v);
      assert.equal(r.interfaces.length, 3);
      const ifb = link(IFB);
      assert.deepEqual(r.interfaces[2], { name: IFB, mac: ifb.address });
      assert.equal(ifb.mtu, 1400, 'IFB MTU = host veth MTU');
      assert.equal(ifb.txqlen ?? 0, 0);
      assert.ok(ifb.flags.includes('UP'), 'IFB up');
      assert.equal(ifb.ifalias, ownerAlias(NET));
      const tick = tickInUsec();
      assert.deepEqual(tbfOf(host), tbfParams(LIMITS.ingressRate, LIMITS.ingressBurst, tick));
      assert.deepEqual(tbfOf(IFB), tbfParams(LIMITS.egressRate, LIMITS.egressBurst, tick));
      assert.deepEqual(
        qdiscs(host).map((q) => [q.kind, q.handle]),
        [
          ['tbf', '1:'],
          ['ingress', 'ffff:'],
        ],
      );
      const filters = json('tc', ['-j', 'filter', 'show', 'dev', host, 'parent', 'ffff:']);
      const u32 = filters.find((f) => f.options?.actions);
      assert.equal(u32.kind, 'u32');
      assert.equal(u32.protocol, 'all');
      assert.equal(u32.pref, 1);
      assert.equal(u32.options.flowid, '1:1');
      assert.deepEqual(
        u32.options.actions.map((a: Record<string, unknown>) => [
          a.kind,
          a.mirred_action,
          a.to_dev,
          a.control_action,
        ]),
        [
          ['mirred', 'redirect', IFB, { type: 'stolen' }],
          ['mirred', 'redirect', IFB, { type: 'pass' }],
        ],
      );
      expectOk<J>(await ours().del(conf(host, LIMITS, v)));
      assert.ok(!linkExists(IFB), 'DEL removes the IFB');
    });
  }

  test('the kernel state equals the Go plugin’s for the same config (upstream vector and a large one)', async () => {
    for (const limits of [
      { ingressRate: 8, ingressBurst: 8, egressRate: 16, egressBurst: 8 },
      LIMITS,
      {
        ingressRate: 40_000_000_000,
        ingressBurst: 4_000_000,
        egressRate: 1_000_000,
        egressBurst: 4_294_967_295,
      },
    ]) {
      const states: string[] = [];
      for (const runner of [ours(), go()]) {
        const host = freshVeth();
        expectOk<J>(await runner.add(conf(host, limits, '0.4.0')));
        const norm = (s: string) => s.replaceAll(host, 'HOST').replace(/"(handle|parent)":"[^"]*"/g, '$&');
        const q = [...qdiscs(host), ...qdiscs(IFB)].map((x) => ({
          kind: x.kind,
          handle: x.handle,
          options: x.options,
        }));
        const f = json('tc', ['-j', 'filter', 'show', 'dev', host, 'parent', 'ffff:']).map((x) => {
          for (const a of x.options?.actions ?? []) {
            delete a.index;
            delete a.ref;
            delete a.bind;
          }
          return x;
        });
        states.push(norm(JSON.stringify({ q, f, mtu: link(IFB).mtu })));
        expectOk<J>(await runner.del(conf(host, limits, '0.4.0')));
      }
      assert.equal(states[0], states[1], `same qdiscs/filters as Go for ${JSON.stringify(limits)}`);
    }
  });

  test('ingress disabled: no TBF on the host veth; egress disabled: no IFB', async () => {
    let host = freshVeth();
    let r = expectOk<J>(await ours().add(conf(host, { egressRate: 1_000_000, egressBurst: 100_000 })));
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['noqueue', 'ingress'],
    );
    assert.ok(linkExists(IFB));
    assert.equal(r.interfaces.length, 3);
    expectOk<J>(await ours().del(conf(host)));
    host = freshVeth();
    r = expectOk<J>(await ours().add(conf(host, { ingressRate: 1_000_000, ingressBurst: 100_000 })));
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['tbf'],
    );
    assert.ok(!linkExists(IFB));
    assert.equal(r.interfaces.length, 2);
  });

  test('no bandwidth (absent or all zero): prevResult passes through untouched', async () => {
    for (const extra of [{}, { ingressRate: 0, ingressBurst: 0, egressRate: 0, egressBurst: 0 }]) {
      const host = freshVeth();
      const c = conf(host, extra);
      const r = expectOk<J>(await ours().add(c));
      assert.deepEqual(r.interfaces, c.prevResult.interfaces);
      assert.deepEqual(
        qdiscs(host).map((q) => q.kind),
        ['noqueue'],
      );
      assert.deepEqual(ifbs(), []);
    }
  });

  test('runtimeConfig.bandwidth is used only when no top-level key is present; containerd’s capitalised keys', async () => {
    const tick = tickInUsec();
    let host = freshVeth();
    const rc = { ingressRate: 2_000_000, ingressBurst: 400_000, egressRate: 3_000_000, egressBurst: 600_000 };
    expectOk<J>(await ours().add(conf(host, { runtimeConfig: { bandwidth: rc } })));
    assert.deepEqual(tbfOf(host), tbfParams(rc.ingressRate, rc.ingressBurst, tick));
    assert.deepEqual(tbfOf(IFB), tbfParams(rc.egressRate, rc.egressBurst, tick));
    expectOk<J>(await ours().del(conf(host)));

    host = freshVeth();
    expectOk<J>(await ours().add(conf(host, { ingressRate: 0, runtimeConfig: { bandwidth: rc } })));
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['noqueue'],
      'a top-level key (even 0) wins over runtimeConfig',
    );

    host = freshVeth();
    const containerd = {
      IngressRate: 2_000_000,
      IngressBurst: 4_294_967_295,
      EgressRate: 3_000_000,
      EgressBurst: 4_294_967_295,
    };
    const c = conf(host, { RuntimeConfig: { bandwidth: containerd } });
    expectOk<J>(await ours().add(c));
    assert.deepEqual(tbfOf(IFB)?.rate, 375_000);
    assert.deepEqual(tbfOf(host)?.rate, 250_000);
    assert.equal(tbfOf(host)?.limit, tbfParams(2_000_000, 4_294_967_295, tick).limit);
    const oursTbf = tbfOf(host);
    // The Go plugin computes the same values (and the kernel clamps a 4 GiB-bit bucket the same way for both).
    const goHost = freshVeth();
    expectOk<J>(
      await go().add(conf(goHost, { RuntimeConfig: { bandwidth: containerd } }, '0.4.0'), {
        containerId: 'ctr2',
      }),
    );
    assert.deepEqual(tbfOf(goHost), oursTbf);
    expectOk<J>(await go().del(conf(goHost, {}, '0.4.0'), { containerId: 'ctr2' }));
  });

  test('invalid rate/burst combinations and values: the reference’s messages, nothing created', async () => {
    const host = freshVeth();
    const cases: Array<[Record<string, unknown>, number, RegExp]> = [
      [{ ingressRate: 1000 }, 999, /^if rate is set, burst must also be set$/],
      [{ egressBurst: 1000 }, 999, /^if burst is set, rate must also be set$/],
      [{ egressRate: 1000, egressBurst: 34_359_738_360 }, 999, /^burst cannot be more than 4GB$/],
      [{ runtimeConfig: { bandwidth: { ingressRate: 5 } } }, 999, /^if rate is set, burst must also be set$/],
      [{ ingressRate: -1, ingressBurst: 10 }, 7, /^failed to parse network configuration: ingressRate/],
      [{ ingressRate: '1000', ingressBurst: 10 }, 7, /^failed to parse network configuration: ingressRate/],
      [{ egressRate: 1.5, egressBurst: 10 }, 7, /^failed to parse network configuration: egressRate/],
    ];
    for (const [extra, code, msg] of cases) {
      expectCniError(await ours().add(conf(host, extra)), code, msg);
      // DEL validates too, like the reference
      expectCniError(await ours().del(conf(host, extra)), code, msg);
    }
    // 4 GiB − 16 bits is accepted (upstream validateRateAndBurst vector)
    expectOk<J>(await ours().add(conf(host, { egressRate: 1_000_000, egressBurst: 34_359_738_352 })));
    expectOk<J>(await ours().del(conf(host)));
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['noqueue', 'ingress'],
    );
  });

  test('prevResult required; host interface selection errors', async () => {
    const host = freshVeth();
    const { prevResult: _p, ...noPrev } = conf(host);
    expectCniError(await ours().add(noPrev), 999, /^must be called as chained plugin$/);
    expectCniError(await ours().check(noPrev), 999, /^must be called as a chained plugin$/);
    const c = conf(host);
    expectCniError(
      await ours().add({ ...c, prevResult: { ...c.prevResult, interfaces: [] } }),
      999,
      /^no interfaces provided$/,
    );
    expectCniError(
      await ours().add({ ...c, prevResult: { ...c.prevResult, interfaces: [c.prevResult.interfaces[1]] } }),
      999,
      /^no veth peer of container interface found in host ns$/,
    );
    // the peer listed with a sandbox does not count
    expectCniError(
      await ours().add({
        ...c,
        prevResult: {
          ...c.prevResult,
          interfaces: [{ name: host, sandbox: '/x' }, c.prevResult.interfaces[1]],
        },
      }),
      999,
      /^no veth peer of container interface found in host ns$/,
    );
    expectCniError(
      await ours().add(c, { ifName: 'eth9' }),
      999,
      /^container interface eth9 has no veth peer: could not look up "eth9": Link not found$/,
    );
    env.sb.exec('ip', ['link', 'add', 'br9', 'type', 'bridge'], { ns: 'container' });
    expectCniError(
      await ours().add(c, { ifName: 'br9' }),
      999,
      /^container interface br9 has no veth peer: interface "br9" was not a veth interface$/,
    );
    expectCniError(
      await ours().add(c, { netns: '/run/netns/nonexistent-bw' }),
      999,
      /^failed to open netns "\/run\/netns\/nonexistent-bw": /,
    );
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['noqueue'],
    );
    assert.deepEqual(ifbs(), []);
  });

  test('a failed ADD removes what it created and leaves a foreign device alone', async () => {
    const host = freshVeth();
    env.sb.exec('ip', ['link', 'add', IFB, 'type', 'ifb']); // someone else's device with the IFB's name
    expectCniError(await ours().add(conf(host)), 999, /^adding link: file exists$/);
    assert.deepEqual(
      qdiscs(host).map((q) => q.kind),
      ['noqueue'],
      'the ingress TBF added before the failure is gone',
    );
    assert.ok(linkExists(IFB), 'the pre-existing device is not ours to delete');
    assert.equal(link(IFB).ifalias, undefined);
    // a root qdisc that is already there: the ADD fails before the IFB exists
    env.sb.exec('ip', ['link', 'del', IFB]);
    env.sb.exec('tc', [
      'qdisc',
      'add',
      'dev',
      host,
      'root',
      'handle',
      '1:',
      'tbf',
      'rate',
      '1mbit',
      'burst',
      '10k',
      'latency',
      '10ms',
    ]);
    expectCniError(await ours().add(conf(host)), 999, /^create qdisc: file exists$/);
    assert.deepEqual(ifbs(), []);
    assert.equal(tbfOf(host)?.rate, 125_000, 'the existing qdisc stays');
  });
});

describe('bandwidth DEL', () => {
  test('removes the IFB with a 0.3.0 config, without netns or prevResult; idempotent', async () => {
    const host = freshVeth();
    expectOk<J>(await ours().add(conf(host, LIMITS, '0.3.0')));
    assert.ok(linkExists(IFB));
    const { prevResult: _p, ...noPrev } = conf(host, LIMITS, '0.3.0');
    expectOk<J>(await ours().del(noPrev, { netns: '' }));
    assert.ok(!linkExists(IFB));
    expectOk<J>(await ours().del(noPrev, { netns: '' }));
    expectOk<J>(await ours().del(conf(host, LIMITS, '0.3.0')));
  });

  test('a device with the IFB’s name that is not an IFB is left alone', async () => {
    env.sb.exec('ip', ['link', 'add', IFB, 'type', 'bridge']);
    expectOk<J>(await ours().del(conf('x')));
    assert.ok(linkExists(IFB));
    env.sb.exec('ip', ['link', 'del', IFB]);
  });
});

describe('bandwidth CHECK', () => {
  test('passes after ADD, fails after a change behind its back, with the reference’s messages', async () => {
    const host = freshVeth();
    const c = conf(host);
    expectOk<J>(await ours().add(c));
    expectOk<J>(await ours().check(c));
    expectOk<J>(await go().check({ ...c, cniVersion: '1.0.0' }), 'the Go CHECK agrees');
    expectCniError(
      await ours().check(conf(host, { ...LIMITS, ingressRate: 9_000_000 })),
      999,
      /^Rate doesn't match$/,
    );
    expectCniError(
      await ours().check(conf(host, { ...LIMITS, ingressBurst: 900_000 })),
      999,
      /^Limit doesn't match$/,
    );
    expectCniError(
      await ours().check(conf(host, { ...LIMITS, egressRate: 17_000_000 })),
      999,
      /^Rate doesn't match$/,
    );
    env.sb.exec('tc', ['qdisc', 'del', 'dev', host, 'root']);
    // the reference passes here (its walk stops at the first non-TBF qdisc); a missing TBF is an error for cnikit
    expectCniError(await ours().check(c), 999, /^Failed to find qdisc$/);
    env.sb.exec('ip', ['link', 'del', IFB]);
    expectCniError(
      await ours().check(conf(host, { egressRate: 1000, egressBurst: 1000 })),
      999,
      /^get ifb device: Link not found$/,
    );
  });

  test('no bandwidth configured: success once the host veth is found (Go 1.1.1 crashes here)', async () => {
    const host = freshVeth();
    expectOk<J>(await ours().check(conf(host, {})));
    const c = conf(host, {});
    expectCniError(
      await ours().check({ ...c, prevResult: { ...c.prevResult, interfaces: [] } }),
      999,
      /^no interfaces provided$/,
    );
  });

  test('Failed to find qdisc when the host veth has none', async () => {
    const host = freshVeth();
    env.sb.exec('tc', ['qdisc', 'add', 'dev', host, 'root', 'pfifo_fast']);
    expectCniError(
      await ours().check(conf(host, { ingressRate: 1000, ingressBurst: 1000 })),
      999,
      /^Failed to find qdisc$/,
    );
  });
});

describe('bandwidth interop with the Go plugin', () => {
  test('ADD by Go, CHECK and DEL by cnikit', async () => {
    const host = freshVeth();
    const c = conf(host, LIMITS, '0.4.0');
    const r = expectOk<J>(await go().add(c));
    assert.equal(r.interfaces[2].name, IFB);
    expectOk<J>(await ours().check(c));
    expectOk<J>(await ours().del(c));
    assert.ok(!linkExists(IFB));
  });

  test('ADD by cnikit, CHECK and DEL by Go', async () => {
    const host = freshVeth();
    const c = conf(host, LIMITS, '0.4.0');
    expectOk<J>(await ours().add(c));
    expectOk<J>(await go().check(c));
    expectOk<J>(await go().del(c));
    assert.ok(!linkExists(IFB));
  });
});

describe('bandwidth GC and STATUS', () => {
  test('GC deletes this network’s IFBs of attachments that are not valid, and nothing else', async () => {
    const hosts: string[] = [];
    for (const id of ['a', 'b', 'c']) {
      // named at creation: renaming an up link fails with EBUSY before Linux 6.2 (the lab's 6.1)
      const host = freshVeth(1500, `e${id}`);
      hosts.push(host);
      expectOk<J>(await ours().add(conf(host), { containerId: id, ifName: `e${id}` }));
    }
    // another network's IFB and a Go-made one (no alias) must survive
    const other = freshVeth();
    expectOk<J>(await ours().add({ ...conf(other), name: 'othernet' }, { containerId: 'a' }));
    const goHost = freshVeth();
    expectOk<J>(await go().add(conf(goHost, LIMITS, '0.4.0'), { containerId: 'g' }));
    const gcConf = {
      cniVersion: '1.1.0',
      name: NET,
      type: 'bandwidth',
      'cni.dev/valid-attachments': [{ containerID: 'b', ifname: 'eb' }],
    };
    expectOk<J>(await ours().gc(gcConf));
    assert.deepEqual(
      ifbs().sort(),
      [ifbDeviceName(NET, 'b'), ifbDeviceName('othernet', 'a'), ifbDeviceName(NET, 'g')].sort(),
    );
    expectOk<J>(await ours().status({ cniVersion: '1.1.0', name: NET, type: 'bandwidth' }));
  });

  test('VERSION lists 0.3.0 and later', async () => {
    const r = expectOk<J>(await ours().version());
    assert.deepEqual(r.supportedVersions, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });
});
