import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import { cniCall, sandboxForFile } from '@cnikit/testing';
import { plugin } from './index.ts';
import { snapshot, withoutBridge } from './testenv.ts';

const env = sandboxForFile({ enterHost: true, containers: 2 });

const conf = (extra: object = {}) => ({
  cniVersion: '1.0.0',
  name: 'l2net',
  type: 'bridge',
  bridge: 'brl2',
  ...extra,
});

describe('bridge L2 (no IPAM)', () => {
  test('ADD creates bridge + veth, container iface up; DEL restores the state', async () => {
    const c = env.sb.containers[0]!.path;
    const before = snapshot();
    const beforeC = snapshot(env.sb.containers[0]!.name);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const res = JSON.parse(r.stdout);
    assert.equal(res.cniVersion, '1.0.0');
    assert.equal(res.interfaces.length, 3);
    assert.equal(res.interfaces[0].name, 'brl2');
    assert.match(res.interfaces[1].name, /^veth[0-9a-f]{8}$/);
    assert.equal(res.interfaces[2].name, 'eth0');
    assert.equal(res.interfaces[2].sandbox, c);
    for (const i of res.interfaces) assert.equal(i.mac.length, 17);
    assert.equal(res.ips, undefined);
    const br = nl.getLink('brl2');
    assert.equal(br?.kind, 'bridge');
    assert.equal(br?.promisc, false);
    const hv = nl.getLink(res.interfaces[1].name);
    assert.equal(hv?.masterIndex, br?.index);
    assert.equal(hv?.operstate, 'up');
    assert.equal(hv?.bridgePort?.hairpin, false);
    assert.equal(hv?.bridgePort?.isolated, false);
    const cl = nl.withNetns(c, () => nl.getLink('eth0'));
    assert.equal(cl?.up, true);
    assert.equal(cl?.kind, 'veth');
    assert.equal(cl?.mac, res.interfaces[2].mac);

    const d = await cniCall(plugin, 'DEL', conf(), { netns: c });
    assert.equal(d.code, 0, d.stdout);
    assert.equal(withoutBridge(snapshot(), 'brl2'), withoutBridge(before, 'brl2'));
    assert.equal(snapshot(env.sb.containers[0]!.name), beforeC);
    // idempotent
    assert.equal((await cniCall(plugin, 'DEL', conf(), { netns: c })).code, 0);
    assert.equal((await cniCall(plugin, 'DEL', conf(), { netns: '' })).code, 0);
    assert.equal(
      (await cniCall(plugin, 'DEL', conf(), { netns: '/run/netns/cnikit-does-not-exist' })).code,
      0,
    );
  });

  for (const version of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    test(`L2 ADD/DEL (${version})`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf({ cniVersion: version });
      const r = await cniCall(plugin, 'ADD', cf, { netns: c });
      assert.equal(r.code, 0, r.stdout);
      const res = JSON.parse(r.stdout);
      assert.equal(res.cniVersion, version);
      assert.deepEqual(
        res.interfaces.map((i: { name: string }) => i.name.replace(/^veth[0-9a-f]{8}$/, 'veth*')),
        ['brl2', 'veth*', 'eth0'],
      );
      assert.equal(nl.withNetns(c, () => nl.getLink('eth0'))?.operstate, 'up');
      assert.equal((await cniCall(plugin, 'DEL', cf, { netns: c })).code, 0);
      assert.equal(
        nl.withNetns(c, () => nl.getLink('eth0')),
        undefined,
      );
    });
  }

  test('0.2.0 L2 ADD fails with cannot convert', async () => {
    const c = env.sb.containers[1]!.path;
    const r = await cniCall(plugin, 'ADD', conf({ cniVersion: '0.2.0' }), { netns: c, ifName: 'eth5' });
    assert.notEqual(r.code, 0);
    assert.match(JSON.parse(r.stdout).msg, /cannot convert: no valid IP addresses/);
    await cniCall(plugin, 'DEL', conf({ cniVersion: '0.2.0' }), { netns: c, ifName: 'eth5' });
  });

  test('CHECK of an L2 config gives a clear error', async () => {
    const c = env.sb.containers[1]!.path;
    const r = await cniCall(
      plugin,
      'CHECK',
      { ...conf(), prevResult: { cniVersion: '1.0.0' } },
      { netns: c },
    );
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).code, 7);
    assert.match(JSON.parse(r.stdout).msg, /CHECK is not supported for a bridge without IPAM/);
  });

  test('existing link that is not a bridge', async () => {
    nl.createVethPair({ name: 'notbr0', peerName: 'notbr0p' });
    try {
      const r = await cniCall(plugin, 'ADD', conf({ bridge: 'notbr0' }), {
        netns: env.sb.containers[1]!.path,
      });
      assert.notEqual(r.code, 0);
      assert.equal(
        JSON.parse(r.stdout).msg,
        'failed to create bridge "notbr0": "notbr0" already exists but is not a bridge',
      );
    } finally {
      nl.deleteLink('notbr0');
    }
  });

  test('existing bridge reused (same ifindex), promisc, hairpin, isolation, MTU, disableContainerInterface', async () => {
    const c = env.sb.containers[1]!.path;
    const pre = nl.createBridge({ name: 'brl2b' });
    const cf = conf({
      bridge: 'brl2b',
      promiscMode: true,
      portIsolation: true,
      mtu: 1400,
      disableContainerInterface: true,
    });
    const r = await cniCall(plugin, 'ADD', cf, { netns: c });
    assert.equal(r.code, 0, r.stdout);
    const res = JSON.parse(r.stdout);
    const br = nl.getLink('brl2b');
    assert.equal(br?.index, pre.index);
    assert.equal(br?.promisc, true);
    const hv = nl.getLink(res.interfaces[1].name);
    assert.equal(hv?.bridgePort?.isolated, true);
    assert.equal(hv?.mtu, 1400);
    const cl = nl.withNetns(c, () => nl.getLink('eth0'));
    assert.equal(cl?.up, false, 'container side stays down');
    assert.equal(cl?.mtu, 1400);
    assert.equal((await cniCall(plugin, 'DEL', cf, { netns: c })).code, 0);
    const cf2 = conf({ bridge: 'brl2b', hairpinMode: true });
    const r2 = await cniCall(plugin, 'ADD', cf2, { netns: c });
    assert.equal(r2.code, 0, r2.stdout);
    assert.equal(nl.getLink(JSON.parse(r2.stdout).interfaces[1].name)?.bridgePort?.hairpin, true);
    assert.equal((await cniCall(plugin, 'DEL', cf2, { netns: c })).code, 0);
    assert.equal(
      nl.withNetns(c, () => nl.getLink('eth0')),
      undefined,
    );
  });

  test('MAC precedence: runtimeConfig > args.cni > CNI_ARGS', async () => {
    const c = env.sb.containers[1]!.path;
    const cases: Array<[object, string | undefined, string]> = [
      [conf(), 'IgnoreUnknown=1;MAC=0a:58:00:00:00:03', '0a:58:00:00:00:03'],
      [conf({ args: { cni: { mac: '0a:58:00:00:00:02' } } }), 'MAC=0a:58:00:00:00:03', '0a:58:00:00:00:02'],
      [
        conf({ args: { cni: { mac: '0a:58:00:00:00:02' } }, RuntimeConfig: { mac: '0a:58:00:00:00:01' } }),
        'MAC=0a:58:00:00:00:03',
        '0a:58:00:00:00:01',
      ],
    ];
    for (const [cf, args, want] of cases) {
      const r = await cniCall(plugin, 'ADD', cf, { netns: c, args });
      assert.equal(r.code, 0, r.stdout);
      assert.equal(JSON.parse(r.stdout).interfaces[2].mac, want);
      assert.equal(nl.withNetns(c, () => nl.getLink('eth0'))?.mac, want);
      assert.equal((await cniCall(plugin, 'DEL', cf, { netns: c, args })).code, 0);
    }
  });

  test('bad input: netns paths, config errors (nothing created), existing container interface kept', async () => {
    const bad = await cniCall(plugin, 'ADD', conf({ bridge: 'brbad' }), { netns: '/tmp' });
    assert.match(JSON.parse(bad.stdout).msg, /^failed to open netns "\/tmp": /);
    const gone = await cniCall(plugin, 'ADD', conf({ bridge: 'brbad' }), {
      netns: '/run/netns/cnikit-nope-nope',
    });
    assert.match(JSON.parse(gone.stdout).msg, /^failed to open netns "\/run\/netns\/cnikit-nope-nope": /);
    const delBad = await cniCall(plugin, 'DEL', conf({ bridge: 'brbad' }), { netns: '/tmp' });
    assert.notEqual(delBad.code, 0, 'DEL on a path that is not a namespace is an error, like the reference');
    for (const [cf, msg] of [
      [conf({ bridge: 'brbad2', vlan: 5000 }), 'invalid VLAN ID 5000 (must be between 0 and 4094)'],
      [
        conf({ bridge: 'brbad2', hairpinMode: true, promiscMode: true }),
        'cannot set hairpin mode and promiscuous mode at the same time',
      ],
      [conf({ bridge: 'brbad2', runtimeConfig: { mac: 'zz' } }), 'address zz: invalid MAC address'],
      [
        conf({ bridge: 'brbad2', vlanTrunk: [{ minID: 10 }] }),
        'minID and maxID should be configured simultaneously, maxID is missing',
      ],
    ] as const) {
      const r = await cniCall(plugin, 'ADD', cf, { netns: env.sb.containers[1]!.path });
      const e = JSON.parse(r.stdout);
      assert.equal(e.code, 7);
      assert.equal(e.msg, msg);
    }
    assert.equal(nl.getLink('brbad2'), undefined, 'nothing created for a bad config');

    const c = env.sb.containers[1]!.path;
    nl.withNetns(c, () => nl.createVethPair({ name: 'eth7', peerName: 'eth7p' }));
    const dup = await cniCall(plugin, 'ADD', conf(), { netns: c, ifName: 'eth7' });
    assert.match(
      JSON.parse(dup.stdout).msg,
      /^container veth name \("eth7"\) peer provided \("veth[0-9a-f]{8}"\) already exists$/,
    );
    assert.ok(
      nl.withNetns(c, () => nl.getLink('eth7')),
      'the pre-existing interface is not removed by the rollback',
    );
    nl.withNetns(c, () => nl.deleteLink('eth7'));
  });
});
