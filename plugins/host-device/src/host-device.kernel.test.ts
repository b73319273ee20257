import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, beforeEach, describe, test } from 'node:test';
import { ALL_VERSIONS } from '@cnikit/skel';
import {
  cniCall,
  deleteNamedNetns,
  diffSnapshots,
  expectCniError,
  formatDiff,
  sandboxForFile,
  tempDir,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';
import { sysfs } from './sysfs.ts';

const DIST = distBin();
const GO = '/usr/lib/cni/host-device';
const env = sandboxForFile({ enterHost: true, containers: 2 });

// biome-ignore lint/suspicious/noExplicitAny: ip -json output
type J = any;
const link = (ns: 'host' | number, name: string): J | undefined =>
  (
    JSON.parse(
      env.sb.exec('ip', ['-j', '-d', 'addr', 'show'], { ns: ns === 'host' ? 'host' : env.sb.containers[ns]! })
        .stdout,
    ) as J[]
  ).find((l) => l.ifname === name);
const addrs = (l: J) =>
  (l?.addr_info ?? []).filter((a: J) => a.scope !== 'link').map((a: J) => `${a.local}/${a.prefixlen}`);
const host = (args: string[]) => env.sb.exec('ip', args);

/** A veth end in the host with two addresses, up: the "physical" device of the tests. */
function makeDevice(name: string, mac: string): void {
  host(['link', 'add', name, 'address', mac, 'type', 'veth', 'peer', 'name', `${name}p`]);
  host(['addr', 'add', '192.168.90.7/24', 'dev', name]);
  host(['addr', 'add', 'fd90::7/64', 'dev', name, 'nodad']);
  host(['link', 'set', name, 'up']);
  host(['link', 'set', `${name}p`, 'up']);
}

/**
 * The host's snapshot without what IPv6 redoes on its own after a link moves or its peer changes carrier (link-local
 * addresses, their DAD state, their local and multicast routes): everything else must be identical.
 */
function stableHost() {
  const snap = env.sb.snapshot('host');
  snap.addresses = snap.addresses.filter((l) => !l.includes('"scope":"link"'));
  snap.routes = snap.routes.filter((l) => !/"dst":"(fe80:|ff00::\/8)/.test(l));
  return snap;
}

const states = () => {
  const d = join(env.dir, 'state', 'hdnet');
  return existsSync(d) ? readdirSync(d) : [];
};
const conf = (extra: object = {}): J => ({
  cniVersion: '1.0.0',
  name: 'hdnet',
  type: 'host-device',
  dataDir: join(env.dir, 'state'),
  ...extra,
});
const staticIpam = (routes: object[] = []) => ({
  type: 'static',
  addresses: [{ address: '10.72.0.5/24', gateway: '10.72.0.1' }],
  routes,
});
const call = (cmd: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS', c: object, o: object = {}) =>
  cniCall(plugin, cmd, c, {
    path: DIST,
    netns: env.sb.containers[0]!.path,
    ifName: 'net1',
    containerId: 'hd1',
    ...o,
  });

/** The device is back in the host under its name, with its addresses, up, and no alias. */
function assertBack(name: string, mac: string): void {
  const l = link('host', name);
  assert.ok(l, `${name} is back in the host`);
  assert.equal(l.address, mac);
  assert.ok(l.flags.includes('UP'), 'up again');
  assert.equal(l.ifalias, undefined);
  assert.deepEqual(addrs(l).sort(), ['192.168.90.7/24', 'fd90::7/64']);
  assert.equal(link(0, 'net1'), undefined);
}

describe('host-device on the real kernel (in-process)', () => {
  beforeEach(() => {
    // a failed test may leave a device under its container-side name (net1, dev7) or only its peer
    for (const n of ['hd0', 'hd1', 'net1', 'dev7', 'hd0p', 'hd1p'])
      env.sb.exec('ip', ['link', 'del', n], { check: false });
    for (const c of env.sb.containers)
      env.sb.exec('ip', ['-n', c.name, 'link', 'del', 'net1'], { check: false });
  });

  test('by name, L2: moved in renamed (alias = original name), up; DEL puts it back with its addresses', async () => {
    makeDevice('hd0', '0a:72:00:00:00:01');
    const c = conf({ device: 'hd0' });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(r.json, {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'net1', mac: '0a:72:00:00:00:01', sandbox: env.sb.containers[0]!.path }],
    });
    assert.equal(link('host', 'hd0'), undefined);
    const l = link(0, 'net1');
    assert.equal(l.ifalias, 'hd0');
    assert.ok(l.flags.includes('UP'));
    assert.deepEqual(addrs(l), []);
    assert.deepEqual(states(), ['hd1-net1']);
    assert.equal((await call('CHECK', { ...c, prevResult: r.json })).code, 0);
    const d = await call('DEL', c);
    assert.equal(d.code, 0, d.stdout);
    assertBack('hd0', '0a:72:00:00:00:01');
    assert.deepEqual(states(), []);
    assert.equal((await call('DEL', c)).code, 0, 'DEL again: nothing to do');
  });

  test('by an alternative name longer than 15 bytes: the alias and DEL use the real name', async () => {
    makeDevice('hd0', '0a:72:00:00:00:0b');
    host(['link', 'property', 'add', 'dev', 'hd0', 'altname', 'hostdevice-altname-0']);
    const c = conf({ device: 'hostdevice-altname-0' });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(link(0, 'net1').ifalias, 'hd0');
    assert.equal((await call('DEL', c)).code, 0);
    assertBack('hd0', '0a:72:00:00:00:0b');
  });

  test('with IPAM (static): addresses and routes in the container, CHECK, every spec version', async () => {
    makeDevice('hd0', '0a:72:00:00:00:02');
    for (const v of ALL_VERSIONS) {
      const c = conf({ cniVersion: v, device: 'hd0', ipam: staticIpam([{ dst: '10.99.0.0/16' }]) });
      const r = await call('ADD', c);
      assert.equal(r.code, 0, `${v}: ${r.stdout}`);
      assert.equal(r.json.cniVersion, v);
      if (v.startsWith('0.1') || v.startsWith('0.2')) assert.equal(r.json.ip4.ip, '10.72.0.5/24');
      else {
        assert.deepEqual(r.json.ips, [
          {
            address: '10.72.0.5/24',
            gateway: '10.72.0.1',
            interface: 0,
            ...(v === '0.3.0' || v === '0.3.1' || v === '0.4.0' ? { version: '4' } : {}),
          },
        ]);
        assert.equal(r.json.interfaces[0].mac, '0a:72:00:00:00:02');
      }
      const l = link(0, 'net1');
      assert.deepEqual(addrs(l), ['10.72.0.5/24']);
      assert.match(
        env.sb.exec('ip', ['route', 'show', '10.99.0.0/16'], { ns: env.sb.containers[0]! }).stdout,
        /via 10\.72\.0\.1 dev net1/,
      );
      if (!['0.1.0', '0.2.0', '0.3.0', '0.3.1'].includes(v)) {
        const chk = await call('CHECK', { ...c, prevResult: r.json });
        assert.equal(chk.code, 0, `${v}: ${chk.stdout}`);
      }
      assert.equal((await call('DEL', c)).code, 0);
      assertBack('hd0', '0a:72:00:00:00:02');
    }
  });

  test('CHECK after tampering: the reference messages', async () => {
    makeDevice('hd0', '0a:72:00:00:00:03');
    const c = conf({ device: 'hd0', ipam: staticIpam() });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout);
    const check = (p: J) => call('CHECK', { ...c, prevResult: p });
    expectCniError(await call('CHECK', c), 999, 'Required prevResult missing');
    const mac = structuredClone(r.json);
    mac.interfaces[0].mac = '0a:00:00:00:00:99';
    expectCniError(
      await check(mac),
      999,
      "Interface net1 Mac 0a:00:00:00:00:99 doesn't match container Mac: 0a:72:00:00:00:03",
    );
    const other = structuredClone(r.json);
    other.interfaces[0].sandbox = '/run/netns/x';
    expectCniError(
      await check(other),
      999,
      `Sandbox in prevResult  doesn't match configured netns: ${env.sb.containers[0]!.path}`,
    );
    env.sb.exec('ip', ['addr', 'del', '10.72.0.5/24', 'dev', 'net1'], { ns: env.sb.containers[0]! });
    expectCniError(await check(r.json), 999, 'Failed to match addr 10.72.0.5/24 on interface net1');
    assert.equal((await call('DEL', c)).code, 0);
    assertBack('hd0', '0a:72:00:00:00:03');
  });

  test('by hwaddr; errors for an unknown device, a bad MAC, no device key, a bad netns', async () => {
    makeDevice('hd1', '0a:72:00:00:00:04');
    const c = conf({ hwaddr: '0A:72:00:00:00:04' });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout);
    assert.equal(link(0, 'net1').ifalias, 'hd1');
    assert.equal((await call('DEL', c)).code, 0);
    assertBack('hd1', '0a:72:00:00:00:04');

    const before = stableHost();
    expectCniError(
      await call('ADD', conf({ device: 'nope0' })),
      999,
      'failed to find host device: Link not found',
    );
    expectCniError(
      await call('ADD', conf({ hwaddr: '0a:72:00:00:00:77' })),
      999,
      'failed to find host device: failed to find physical interface',
    );
    expectCniError(
      await call('ADD', conf({ hwaddr: 'zz' })),
      999,
      'failed to find host device: failed to parse MAC address "zz": address zz: invalid MAC address',
    );
    expectCniError(
      await call('ADD', conf({ kernelpath: '/tmp/x' })),
      999,
      'failed to find host device: kernel device path "/tmp/x" must be absolute and begin with /sys/devices/',
    );
    for (const verb of ['ADD', 'DEL', 'CHECK'] as const)
      expectCniError(
        await call(verb, conf()),
        7,
        'specify either "device", "hwaddr", "kernelpath" or "pciBusID"',
      );
    expectCniError(
      await call('ADD', conf({ device: 7 })),
      7,
      /^failed to load netconf: config\.device: expected string/,
    );
    expectCniError(
      await call('ADD', conf({ device: 'hd1' }), { netns: '/run/netns/none' }),
      999,
      /^failed to open netns "\/run\/netns\/none"/,
    );
    assert.equal(formatDiff(diffSnapshots(before, stableHost())), '');
    assert.equal((await call('STATUS', conf({ cniVersion: '1.1.0' }))).code, 0, 'STATUS needs no device key');
  });

  describe('sysfs lookups against a fake tree (no PCI or auxiliary device can exist in a test namespace)', () => {
    const fake = tempDir('hd-sysfs');
    const root = fake.path;
    after(() => {
      sysfs.root = '/sys';
      fake.remove();
    });
    const pci = (addr: string, driver: string, net: string | undefined, virtio = false) => {
      const dev = join(root, 'devices', 'pci0000:00', addr);
      const netParent = virtio ? join(dev, 'virtio3') : dev;
      if (net) mkdirSync(join(netParent, 'net', net), { recursive: true });
      else mkdirSync(dev, { recursive: true });
      mkdirSync(join(root, 'bus', 'pci', 'drivers', driver), { recursive: true });
      symlinkSync(join(root, 'bus', 'pci', 'drivers', driver), join(dev, 'driver'));
      mkdirSync(join(root, 'bus', 'pci', 'devices'), { recursive: true });
      symlinkSync(dev, join(root, 'bus', 'pci', 'devices', addr));
    };
    pci('0000:03:00.0', 'ixgbe', 'hd0');
    pci('0000:04:00.0', 'virtio-pci', 'hd0', true);
    pci('0000:05:00.0', 'vfio-pci', undefined);
    pci('0000:06:00.0', 'ixgbe', undefined);
    mkdirSync(join(root, 'bus', 'auxiliary', 'devices', 'mlx5_core.sf.2', 'net', 'hd0'), { recursive: true });

    const roundTrip = async (c: J, expectAlias = 'hd0') => {
      makeDevice('hd0', '0a:72:00:00:00:05');
      sysfs.root = root;
      try {
        const r = await call('ADD', c);
        assert.equal(r.code, 0, r.stdout);
        assert.equal(link(0, 'net1').ifalias, expectAlias);
        assert.equal((await call('DEL', c)).code, 0);
        assertBack('hd0', '0a:72:00:00:00:05');
      } finally {
        sysfs.root = '/sys';
      }
    };
    test('kernelpath', () => roundTrip(conf({ kernelpath: '/sys/devices/pci0000:00/0000:03:00.0' })));
    test('pciBusID', () => roundTrip(conf({ pciBusID: '0000:03:00.0' })));
    test('pciBusID of a virtio device (net under virtio*/)', () =>
      roundTrip(conf({ pciBusID: '0000:04:00.0' })));
    test('runtimeConfig.deviceID: a PCI address', () =>
      roundTrip(conf({ runtimeConfig: { deviceID: '0000:03:00.0' } })));
    test('runtimeConfig.deviceID: an auxiliary device', () =>
      roundTrip(conf({ runtimeConfig: { deviceID: 'mlx5_core.sf.2' } })));

    test('a returned device is found by its parent PCI device whatever the container did to its MAC and alias', async () => {
      const mac = '0a:72:00:00:00:0c';
      makeDevice('hd0', mac);
      const dev = join(root, 'devices', 'pci0000:00', '0000:03:00.0');
      mkdirSync(join(root, 'bus', 'pci'), { recursive: true });
      if (!existsSync(join(dev, 'subsystem'))) symlinkSync(join(root, 'bus', 'pci'), join(dev, 'subsystem'));
      /** sysfs's class/net entry of a host link (the kernel's: ifindex, address, device → its PCI function). */
      const classNet = (name: string) => {
        const l = link('host', name);
        const d = join(root, 'class', 'net', name);
        mkdirSync(d, { recursive: true });
        writeFileSync(join(d, 'ifindex'), `${l.ifindex}\n`);
        writeFileSync(join(d, 'address'), `${l.address}\n`);
        if (!existsSync(join(d, 'device'))) symlinkSync(dev, join(d, 'device'));
      };
      classNet('hd0');
      const cn = env.sb.newContainer();
      const c = conf({ device: 'hd0' });
      sysfs.root = root;
      try {
        assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'died' })).code, 0);
        const saved = JSON.parse(readFileSync(join(env.dir, 'state', 'hdnet', 'died-net1'), 'utf8'));
        assert.deepEqual([saved.parentBus, saved.parentDev, saved.mac], ['pci', '0000:03:00.0', mac]);
        const ns = { ns: cn };
        env.sb.exec('ip', ['link', 'set', 'net1', 'down'], ns);
        env.sb.exec('ip', ['link', 'set', 'net1', 'address', '0a:72:00:00:00:99', 'alias', 'workload'], ns);
        env.sb.exec('ip', ['link', 'set', 'net1', 'netns', env.sb.host.name], ns);
        deleteNamedNetns(cn);
        classNet('net1');
        const d = await call('DEL', c, { netns: cn.path, containerId: 'died' });
        assert.equal(d.code, 0, d.stdout);
        assertBack('hd0', mac);
        assert.equal(link('host', 'net1'), undefined, 'renamed back');
        assert.deepEqual(states(), []);
      } finally {
        sysfs.root = '/sys';
      }
    });

    test('DPDK (vfio-pci): nothing is moved, IPAM still runs, DEL releases', async () => {
      sysfs.root = root;
      try {
        const before = env.sb.snapshot(env.sb.containers[0]!);
        const c = conf({ pciBusID: '0000:05:00.0', ipam: staticIpam() });
        const r = await call('ADD', c);
        assert.equal(r.code, 0, r.stdout);
        assert.deepEqual(r.json.interfaces, [{ name: 'net1', sandbox: env.sb.containers[0]!.path }]);
        assert.equal(r.json.ips[0].address, '10.72.0.5/24');
        assert.deepEqual(env.sb.snapshot(env.sb.containers[0]!), before);
        assert.equal((await call('CHECK', { ...c, prevResult: r.json })).code, 0);
        assert.equal((await call('DEL', c)).code, 0);
      } finally {
        sysfs.root = '/sys';
      }
    });

    test('lookup errors: the reference texts', async () => {
      sysfs.root = root;
      try {
        expectCniError(
          await call('ADD', conf({ runtimeConfig: { deviceID: '0000:09:00.0' } })),
          7,
          'runtime config DeviceID 0000:09:00.0 not found or unsupported',
        );
        expectCniError(
          await call('ADD', conf({ pciBusID: '0000:09:00.0' })),
          7,
          'error with host device: lstat /sys/bus/pci/devices/0000:09:00.0: no such file or directory',
        );
        expectCniError(
          await call('ADD', conf({ pciBusID: '0000:06:00.0' })),
          999,
          'failed to find host device: no net directory under pci device 0000:06:00.0',
        );
        expectCniError(
          await call('ADD', conf({ kernelpath: '/sys/devices/pci0000:00/0000:09:00.0' })),
          999,
          'failed to find host device: failed to read directory /sys/devices/pci0000:00/0000:09:00.0/net: "open /sys/devices/pci0000:00/0000:09:00.0/net: no such file or directory"',
        );
        expectCniError(
          await call('ADD', conf({ kernelpath: '/sys/devices/pci0000:00/0000:03:00.0' })),
          999,
          'failed to find host device: Link not found',
        );
      } finally {
        sysfs.root = '/sys';
      }
    });
  });

  test('rollback: a failing IPAM route leaves the device in the host as it was, no state, no reservation', async () => {
    makeDevice('hd0', '0a:72:00:00:00:06');
    const before = stableHost();
    const c = conf({ device: 'hd0', ipam: staticIpam([{ dst: '10.98.0.0/16', gw: '172.31.0.1' }]) });
    const r = await call('ADD', c);
    assert.notEqual(r.code, 0);
    assert.match(r.json.msg, /failed to add route '10\.98\.0\.0\/16 via 172\.31\.0\.1 dev net1/);
    assertBack('hd0', '0a:72:00:00:00:06');
    // the link-local address comes back after the move with a new DAD round; the rest is identical at once
    assert.equal(formatDiff(diffSnapshots(before, stableHost())), '');
    assert.deepEqual(states(), []);
  });

  test('DEL with the namespace gone, GC of stale states, STATUS', async () => {
    makeDevice('hd0', '0a:72:00:00:00:07');
    const cn = env.sb.newContainer();
    const c = conf({ device: 'hd0', cniVersion: '1.1.0' });
    assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'gone' })).code, 0);
    deleteNamedNetns(cn);
    const d = await call('DEL', c, { netns: cn.path, containerId: 'gone' });
    assert.equal(d.code, 0, d.stdout);
    assert.deepEqual(states(), []);

    makeDevice('hd1', '0a:72:00:00:00:08');
    const c1 = conf({ device: 'hd1', cniVersion: '1.1.0' });
    assert.equal((await call('ADD', c1, { containerId: 'stale' })).code, 0);
    assert.deepEqual(states(), ['stale-net1']);
    // an ADD killed between writing its state's temp file and the rename (a writer pid above pid_max: not alive)
    const deadTemp = `.stale-net1.${statSync('/proc/self/ns/pid').ino}-4194305.0123456789ab.tmp`;
    writeFileSync(join(env.dir, 'state', 'hdnet', deadTemp), '{');
    const g = await cniCall(
      plugin,
      'GC',
      { ...c1, 'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'net1' }] },
      { path: DIST },
    );
    assert.equal(g.code, 0, g.stdout);
    assert.deepEqual(states(), []);
    assert.ok(
      !existsSync(join(env.dir, 'state', 'hdnet', deadTemp)),
      "GC removes the dead writer's temp file",
    );
    assert.equal((await cniCall(plugin, 'STATUS', c1, { path: DIST })).code, 0);
    const st = await cniCall(plugin, 'STATUS', { ...c1, ipam: { type: 'nope' } }, { path: DIST });
    assert.match(st.json.msg, /failed to find plugin "nope"/);
    // without its state the device still comes back by its alias (like the reference: down, no addresses)
    assert.equal((await call('DEL', c1, { containerId: 'stale' })).code, 0);
    const l = link('host', 'hd1');
    assert.ok(l);
    assert.ok(!l.flags.includes('UP'));
  });

  test('the namespace died without DEL: the device the kernel returned (container name or dev%d) comes back by DEL', async () => {
    // what the kernel does to a physical device of a dying namespace (default_device_exit): it goes to the
    // initial namespace, down, alias kept, under its container-side name or dev%d when that is taken there
    for (const [i, returnedAs] of [
      [0, 'net1'],
      [1, 'dev7'],
    ] as const) {
      const mac = `0a:72:00:00:00:1${i}`;
      makeDevice('hd0', mac);
      const cn = env.sb.newContainer();
      const c = conf({ device: 'hd0' });
      assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'died' })).code, 0);
      env.sb.exec('ip', ['link', 'set', 'net1', 'down'], { ns: cn });
      if (returnedAs !== 'net1') env.sb.exec('ip', ['link', 'set', 'net1', 'name', returnedAs], { ns: cn });
      env.sb.exec('ip', ['link', 'set', returnedAs, 'netns', env.sb.host.name], { ns: cn });
      deleteNamedNetns(cn);
      assert.equal(link('host', returnedAs).ifalias, 'hd0');
      const d = await call('DEL', c, { netns: cn.path, containerId: 'died' });
      assert.equal(d.code, 0, d.stdout);
      assertBack('hd0', mac);
      assert.equal(link('host', returnedAs), undefined, `${returnedAs} renamed back`);
      assert.deepEqual(states(), []);
      host(['link', 'del', 'hd0']);
    }
    // another link with the saved MAC but without the alias is not touched
    makeDevice('hd0', '0a:72:00:00:00:12');
    const cn = env.sb.newContainer();
    const c = conf({ device: 'hd0' });
    assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'died' })).code, 0);
    deleteNamedNetns(cn);
    host(['link', 'add', 'net1', 'address', '0a:72:00:00:00:12', 'type', 'veth', 'peer', 'name', 'net1p']);
    assert.equal((await call('DEL', c, { netns: cn.path, containerId: 'died' })).code, 0);
    assert.ok(link('host', 'net1'), 'a link without the alias keeps its name');
    host(['link', 'del', 'net1']);
  });

  test('DEL restores the MAC, MTU, alias and up state the container changed', async () => {
    makeDevice('hd0', '0a:72:00:00:00:20');
    host(['link', 'set', 'hd0', 'alias', 'uplink', 'mtu', '1400']);
    const c = conf({ device: 'hd0' });
    assert.equal((await call('ADD', c)).code, 0);
    assert.equal(link(0, 'net1').ifalias, 'hd0');
    const ns = { ns: env.sb.containers[0]! };
    env.sb.exec('ip', ['link', 'set', 'net1', 'down'], ns);
    env.sb.exec('ip', ['link', 'set', 'net1', 'address', '0a:72:00:00:00:99', 'mtu', '1280'], ns);
    assert.equal((await call('DEL', c)).code, 0);
    const l = link('host', 'hd0');
    assert.ok(l, 'back under its name');
    assert.equal(l.address, '0a:72:00:00:00:20');
    assert.equal(l.mtu, 1400);
    assert.equal(l.ifalias, 'uplink', 'its own alias again');
    assert.ok(l.flags.includes('UP'));
    assert.deepEqual(addrs(l).sort(), ['192.168.90.7/24', 'fd90::7/64']);
  });

  test('the namespace died without DEL after the container changed MTU and up state: DEL or GC restores it', async () => {
    for (const verb of ['DEL', 'GC'] as const) {
      const mac = '0a:72:00:00:00:21';
      makeDevice('hd0', mac);
      const cn = env.sb.newContainer();
      const c = conf({ device: 'hd0', cniVersion: '1.1.0' });
      assert.equal((await call('ADD', c, { netns: cn.path, containerId: 'died' })).code, 0);
      assert.deepEqual(states(), ['died-net1']);
      env.sb.exec('ip', ['link', 'set', 'net1', 'down', 'mtu', '1280'], { ns: cn });
      // what the kernel does to a physical device when its namespace dies: back to the host under the
      // container-side name, down, alias kept (a veth would be destroyed; its peer keeps this one alive here)
      env.sb.exec('ip', ['link', 'set', 'net1', 'netns', env.sb.host.name], { ns: cn });
      deleteNamedNetns(cn);
      assert.equal(link('host', 'net1').mtu, 1280);
      const r =
        verb === 'DEL'
          ? await call('DEL', c, { netns: cn.path, containerId: 'died' })
          : await cniCall(plugin, 'GC', { ...c, 'cni.dev/valid-attachments': [] }, { path: DIST });
      assert.equal(r.code, 0, `${verb}: ${r.stdout}`);
      assertBack('hd0', mac);
      assert.equal(link('host', 'hd0').mtu, 1500, `${verb} restores the MTU`);
      assert.equal(link('host', 'net1'), undefined, `${verb}: renamed back`);
      assert.deepEqual(states(), [], `${verb} drops the state`);
      host(['link', 'del', 'hd0']);
    }
  });

  test('a name taken on the other side: ADD and DEL fail and leave the device where it was, as it was', async () => {
    const mac = '0a:72:00:00:00:22';
    makeDevice('hd0', mac);
    const ns = { ns: env.sb.containers[0]! };
    // refused before the move (the kernel would move first and fail the rename after, and the device could come
    // back under a new ifindex); the messages are the reference's
    env.sb.exec('ip', ['link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'net1p'], ns);
    const index = link('host', 'hd0').ifindex;
    const before = stableHost();
    const c = conf({ device: 'hd0' });
    expectCniError(
      await call('ADD', c),
      999,
      'failed to move link failed to move "net1" (host: "hd0") to container NS: file exists',
    );
    assert.equal(link(0, 'hd0'), undefined, 'not left in the container under its host name');
    env.sb.exec('ip', ['link', 'del', 'net1'], ns);
    assertBack('hd0', mac);
    assert.equal(link('host', 'hd0').ifindex, index, 'never moved: same ifindex');
    assert.equal(formatDiff(diffSnapshots(before, stableHost())), '');
    assert.deepEqual(states(), []);

    assert.equal((await call('ADD', c)).code, 0);
    host(['link', 'add', 'hd0', 'type', 'veth', 'peer', 'name', 'hd0x']);
    expectCniError(await call('DEL', c), 999, 'failed to move "hd0" to hostNS: file exists');
    const l = link(0, 'net1');
    assert.ok(l, 'still in the container');
    assert.equal(l.ifalias, 'hd0');
    assert.ok(l.flags.includes('UP'), 'up again');
    assert.equal(link('host', 'net1'), undefined);
    assert.deepEqual(states(), ['hd1-net1'], 'the state stays for the retry');
    host(['link', 'del', 'hd0']);
    assert.equal((await call('DEL', c)).code, 0);
    assertBack('hd0', mac);
    assert.deepEqual(states(), []);
  });

  describe('SIGKILL at any point of ADD or DEL never loses the device', () => {
    const killable = { source: join(import.meta.dirname, 'testenv.ts') };
    /** After a kill: DEL brings it back, a fresh ADD and DEL work, nothing is left over. */
    const recovers = async (c: J, mac: string, what: string) => {
      const d = await call('DEL', c);
      assert.equal(d.code, 0, `${what}: DEL ${d.stdout}`);
      assertBack('hd0', mac);
      assert.deepEqual(states(), [], `${what}: no state left`);
      const r = await call('ADD', c);
      assert.equal(r.code, 0, `${what}: fresh ADD ${r.stdout}`);
      assert.equal(link(0, 'net1').ifalias, 'hd0');
      assert.equal((await call('DEL', c)).code, 0);
      assertBack('hd0', mac);
    };

    for (const step of ['alias set', 'moved in', 'up'])
      test(`ADD killed right after "${step}"`, async () => {
        const mac = '0a:72:00:00:00:30';
        makeDevice('hd0', mac);
        const c = conf({ device: 'hd0' });
        const k = await cniCall(killable, 'ADD', c, {
          netns: env.sb.containers[0]!.path,
          ifName: 'net1',
          containerId: 'hd1',
          env: { CNIKIT_TEST_KILL_AT: step },
        });
        assert.equal(k.signal, 'SIGKILL', `killed at ${step}: ${k.stdout}${k.stderr}`);
        assert.ok(link('host', 'hd0') ?? link(0, 'net1'), 'the device is in the host or the container');
        await recovers(c, mac, step);
      });

    test('DEL killed right after "moved out"', async () => {
      const mac = '0a:72:00:00:00:31';
      makeDevice('hd0', mac);
      const c = conf({ device: 'hd0' });
      assert.equal((await call('ADD', c)).code, 0);
      const k = await cniCall(killable, 'DEL', c, {
        netns: env.sb.containers[0]!.path,
        ifName: 'net1',
        containerId: 'hd1',
        env: { CNIKIT_TEST_KILL_AT: 'moved out' },
      });
      assert.equal(k.signal, 'SIGKILL', k.stdout + k.stderr);
      await recovers(c, mac, 'moved out');
    });

    test('the compiled plugin SIGKILLed at 20 spread-out delays during ADD', async (t) => {
      const mac = '0a:72:00:00:00:32';
      makeDevice('hd0', mac);
      const c = conf({ device: 'hd0' });
      const bin = { binary: join(DIST, 'host-device') };
      const o = { netns: env.sb.containers[0]!.path, ifName: 'net1', containerId: 'hd1', path: DIST };
      // calibrate: the fastest of 3 ADDs (the first one after a build is slower: cold page cache)
      let span = Infinity;
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        assert.equal((await cniCall(bin, 'ADD', c, o)).code, 0);
        span = Math.min(span, performance.now() - t0);
        assert.equal((await cniCall(bin, 'DEL', c, o)).code, 0);
        assertBack('hd0', mac);
      }
      span = Math.max(20, span);
      let killed = 0;
      for (let i = 0; i < 20; i++) {
        const delay = (i / 19) * span * 1.3;
        const k = await cniCall(bin, 'ADD', c, { ...o, timeoutMs: delay });
        if (k.signal === 'SIGKILL') killed++;
        else assert.equal(k.code, 0, k.stdout);
        await recovers(c, mac, `kill at ${delay.toFixed(0)} ms`);
      }
      t.diagnostic(`one ADD took ${span.toFixed(0)} ms; ${killed} of 20 ADDs were killed`);
      assert.ok(killed >= 8, `only ${killed} of 20 ADDs were killed`);
    });
  });

  describe('interoperability with the Go reference host-device', () => {
    assert.ok(existsSync(GO), 'Go reference plugins not installed in /usr/lib/cni');
    const goCall = (cmd: 'ADD' | 'DEL' | 'CHECK', c: object) =>
      cniCall({ binary: GO }, cmd, c, {
        path: '/usr/lib/cni',
        netns: env.sb.containers[1]!.path,
        ifName: 'net1',
        containerId: 'io',
      });
    const ours = (cmd: 'ADD' | 'DEL' | 'CHECK', c: object) =>
      call(cmd, c, { path: '/usr/lib/cni', netns: env.sb.containers[1]!.path, containerId: 'io' });
    const c = () => conf({ device: 'hd0', ipam: staticIpam() });

    test('ADD by Go, CHECK and DEL by cnikit', async () => {
      makeDevice('hd0', '0a:72:00:00:00:09');
      const r = await goCall('ADD', c());
      assert.equal(r.code, 0, r.stdout);
      assert.equal(link(1, 'net1').ifalias, 'hd0');
      const chk = await ours('CHECK', { ...c(), prevResult: r.json });
      assert.equal(chk.code, 0, chk.stdout);
      const d = await ours('DEL', c());
      assert.equal(d.code, 0, d.stdout);
      const l = link('host', 'hd0');
      assert.ok(l, 'back under its name');
      assert.equal(l.ifalias, undefined);
      assert.equal(link(1, 'net1'), undefined);
    });

    test('ADD by cnikit, CHECK and DEL by Go', async () => {
      makeDevice('hd0', '0a:72:00:00:00:0a');
      const r = await ours('ADD', c());
      assert.equal(r.code, 0, r.stdout);
      const chk = await goCall('CHECK', { ...c(), prevResult: r.json });
      assert.equal(chk.code, 0, chk.stdout + chk.stderr);
      const d = await goCall('DEL', c());
      assert.equal(d.code, 0, d.stdout + d.stderr);
      const l = link('host', 'hd0');
      assert.ok(l, 'back under its name');
      assert.equal(l.address, '0a:72:00:00:00:0a');
      assert.equal(link(1, 'net1'), undefined);
      // the Go DEL leaves our saved state: GC drops it
      const g = await cniCall(
        plugin,
        'GC',
        { ...c(), cniVersion: '1.1.0', 'cni.dev/valid-attachments': [] },
        { path: DIST },
      );
      assert.equal(g.code, 0, g.stdout);
      assert.deepEqual(states(), []);
    });
  });
});
