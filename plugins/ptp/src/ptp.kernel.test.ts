import assert from 'node:assert/strict';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, test } from 'node:test';
import { ALL_VERSIONS } from '@cnikit/skel';
import { cniCall, deleteNamedNetns, eventually, expectCniError, sandboxForFile } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';

const DIST = distBin();
const env = sandboxForFile({ enterHost: true, containers: 3 });

// biome-ignore lint/suspicious/noExplicitAny: ip -json output
type J = any;
const ipj = (ns: 'host' | number, args: string[]): J =>
  JSON.parse(
    env.sb.exec('ip', ['-j', ...args], { ns: ns === 'host' ? 'host' : env.sb.containers[ns]! }).stdout ||
      '[]',
  );
const addrsOf = (ns: 'host' | number, dev: string) =>
  (ipj(ns, ['addr', 'show', 'dev', dev])[0]?.addr_info ?? [])
    .filter((a: J) => a.scope !== 'link')
    .map((a: J) => `${a.local}/${a.prefixlen}`);
const routes = (ns: 'host' | number, fam: '-4' | '-6', dev: string) =>
  (
    JSON.parse(
      env.sb.exec('ip', ['-j', fam, 'route', 'show', 'dev', dev], {
        ns: ns === 'host' ? 'host' : env.sb.containers[ns]!,
      }).stdout || '[]',
    ) as J[]
  )
    .filter((r) => !String(r.dst).startsWith('fe80'))
    .map((r) =>
      [
        r.dst,
        r.gateway ? `via ${r.gateway}` : '',
        `scope ${r.scope ?? 'global'}`,
        r.prefsrc ? `src ${r.prefsrc}` : '',
      ]
        .filter(Boolean)
        .join(' '),
    )
    .sort();
const reservations = (net: string) => {
  const d = join(env.dir, net);
  return existsSync(d) ? readdirSync(d).filter((f) => /^(\d+\.){3}\d+$/.test(f) || f.includes(':')) : [];
};

function conf(net: string, subnets: string[], extra: object = {}): J {
  return {
    cniVersion: '1.0.0',
    name: net,
    type: 'ptp',
    ipam: { type: 'host-local', ranges: subnets.map((s) => [{ subnet: s }]), dataDir: env.dir },
    ...extra,
  };
}
const call = (
  cmd: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS',
  c: object,
  k = 0,
  id = 'ptp1',
  o: object = {},
) => cniCall(plugin, cmd, c, { path: DIST, netns: env.sb.containers[k]!.path, containerId: id, ...o });

describe('ptp ADD/CHECK/DEL on the real kernel (in-process, cnikit host-local)', () => {
  // a failed test must not leave its eth0 to the next one
  beforeEach(() => {
    for (const c of env.sb.containers)
      env.sb.exec('ip', ['-n', c.name, 'link', 'del', 'eth0'], { check: false });
  });
  assert.ok(existsSync(join(DIST, 'host-local')), 'dist-bin/host-local not built (npm run build)');

  test('IPv4: veth pair, /32 gateway routing in the container, gateway /32 + host route on the host', async () => {
    const c = conf('ptpv4', ['10.61.0.0/24'], { mtu: 1400 });
    const r = await call('ADD', c);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const res = r.json;
    assert.equal(res.cniVersion, '1.0.0');
    assert.equal(res.interfaces.length, 2);
    const [hostIf, contIf] = res.interfaces;
    assert.match(hostIf.name, /^veth[0-9a-f]{8}$/);
    assert.equal(hostIf.sandbox, undefined);
    assert.deepEqual(contIf, { name: 'eth0', mac: contIf.mac, sandbox: env.sb.containers[0]!.path });
    assert.deepEqual(res.ips, [{ address: '10.61.0.2/24', gateway: '10.61.0.1', interface: 1 }]);
    // 1.x results carry no empty dns object (skel prints them like the reference's types)
    assert.equal(res.dns, undefined);

    const cl = ipj(0, ['-d', 'link', 'show', 'eth0'])[0];
    assert.equal(cl.linkinfo.info_kind, 'veth');
    assert.equal(cl.mtu, 1400);
    assert.equal(cl.address, contIf.mac);
    assert.ok(cl.flags.includes('UP'));
    assert.deepEqual(addrsOf(0, 'eth0'), ['10.61.0.2/24']);
    // the kernel's prefix route is gone: the subnet is reached via the gateway, the gateway by a link route
    assert.deepEqual(routes(0, '-4', 'eth0'), [
      '10.61.0.0/24 via 10.61.0.1 scope global src 10.61.0.2',
      '10.61.0.1 scope link src 10.61.0.2',
    ]);
    const hl = ipj('host', ['-d', 'link', 'show', hostIf.name])[0];
    assert.equal(hl.mtu, 1400);
    assert.equal(hl.address, hostIf.mac);
    assert.ok(hl.flags.includes('UP'));
    assert.deepEqual(addrsOf('host', hostIf.name), ['10.61.0.1/32']);
    assert.deepEqual(routes('host', '-4', hostIf.name), ['10.61.0.2 scope host']);
    assert.equal(env.sb.exec('sysctl', ['-n', 'net.ipv4.ip_forward']).stdout.trim(), '1');
    assert.equal(env.sb.exec('sysctl', ['-n', `net.ipv6.conf.${hostIf.name}.accept_ra`]).stdout.trim(), '0');
    // the kernel's own route lookup from the container: the host end's gateway address, through eth0
    const get = ipj(0, ['route', 'get', '10.61.0.77'])[0];
    assert.equal(get.gateway, '10.61.0.1');
    assert.equal(get.dev, 'eth0');

    const chk = await call('CHECK', { ...c, prevResult: res });
    assert.equal(chk.code, 0, chk.stdout);

    const d = await call('DEL', c);
    assert.equal(d.code, 0, d.stdout);
    assert.equal(ipj(0, ['link', 'show']).filter((l: J) => l.ifname === 'eth0').length, 0);
    assert.equal(ipj('host', ['link', 'show']).filter((l: J) => l.ifname === hostIf.name).length, 0);
    assert.deepEqual(reservations('ptpv4'), []);
    const again = await call('DEL', c);
    assert.equal(again.code, 0, again.stdout);
  });

  test('dual stack: both families routed via their gateways, forwarding on for both', async () => {
    const c = conf('ptpds', ['10.62.0.0/24', 'fd62::/64']);
    const r = await call('ADD', c, 1);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const hostName = r.json.interfaces[0].name;
    assert.deepEqual(
      r.json.ips.map((i: J) => i.address),
      ['10.62.0.2/24', 'fd62::2/64'],
    );
    assert.deepEqual(routes(1, '-6', 'eth0'), [
      'fd62::/64 via fd62::1 scope global src fd62::2',
      // the kernel reports every IPv6 route as global scope
      'fd62::1 scope global src fd62::2',
    ]);
    assert.deepEqual(addrsOf('host', hostName).sort(), ['10.62.0.1/32', 'fd62::1/128']);
    // (the kernel keeps no scope on IPv6 routes; fd62::1 is the prefix route of the /128 address)
    assert.deepEqual(routes('host', '-6', hostName), ['fd62::1 scope global', 'fd62::2 scope global']);
    assert.equal(env.sb.exec('sysctl', ['-n', 'net.ipv6.conf.all.forwarding']).stdout.trim(), '1');
    assert.equal((await call('CHECK', { ...c, prevResult: r.json }, 1)).code, 0);
    assert.equal((await call('DEL', c, 1)).code, 0);
    assert.deepEqual(reservations('ptpds'), []);
  });

  test('every spec version the reference accepts: ADD prints that version, CHECK (≥0.4.0) and DEL work', async () => {
    assert.deepEqual(plugin.versions, ALL_VERSIONS);
    for (const v of ALL_VERSIONS) {
      const c = { ...conf('ptpver', ['10.63.0.0/24']), cniVersion: v };
      const r = await call('ADD', c, 2, `ver-${v}`);
      assert.equal(r.code, 0, `${v}: ${r.stdout}`);
      assert.equal(r.json.cniVersion, v);
      if (v.startsWith('0.1') || v.startsWith('0.2')) {
        assert.match(r.json.ip4.ip, /^10\.63\.0\.\d+\/24$/);
        assert.equal(r.json.interfaces, undefined);
      } else {
        assert.equal(r.json.interfaces[1].name, 'eth0');
      }
      if (!['0.1.0', '0.2.0', '0.3.0', '0.3.1'].includes(v)) {
        const chk = await call('CHECK', { ...c, prevResult: r.json }, 2, `ver-${v}`);
        assert.equal(chk.code, 0, `${v}: ${chk.stdout}`);
      }
      const d = await call('DEL', c, 2, `ver-${v}`);
      assert.equal(d.code, 0, `${v}: ${d.stdout}`);
      assert.deepEqual(reservations('ptpver'), []);
    }
  });

  test('dns of the network config replaces the IPAM DNS; otherwise the IPAM one passes through', async () => {
    const dns = { nameservers: ['10.64.0.53'], search: ['cluster.local'] };
    const c = conf('ptpdns', ['10.64.0.0/24'], { dns });
    const r = await call('ADD', c, 0, 'dns');
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(r.json.dns, dns);
    assert.equal((await call('DEL', c, 0, 'dns')).code, 0);
    const c2 = conf('ptpdns', ['10.64.0.0/24']);
    c2.ipam.resolvConf = join(env.dir, 'resolv.conf');
    writeFileSync(c2.ipam.resolvConf, 'nameserver 10.64.0.99\n');
    const r2 = await call('ADD', c2, 0, 'dns2');
    assert.equal(r2.code, 0, r2.stdout);
    assert.deepEqual(r2.json.dns, { nameservers: ['10.64.0.99'] });
    assert.equal((await call('DEL', c2, 0, 'dns2')).code, 0);
  });

  for (const backend of [undefined, 'iptables', 'nftables'] as const) {
    test(`ipMasq (backend ${backend ?? 'detected'}): rules on ADD, gone after DEL`, async () => {
      const c = conf(`ptpmasq${backend ?? ''}`, ['10.65.0.0/24'], {
        ipMasq: true,
        ...(backend ? { ipMasqBackend: backend } : {}),
      });
      const rules = () =>
        env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout + env.sb.exec('nft', ['list', 'ruleset']).stdout;
      const r = await call('ADD', c, 0, `masq-${backend}`);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      if (backend === 'nftables') assert.match(rules(), /cni_plugins_masquerade[\s\S]*10\.65\.0\.2/);
      else
        assert.match(env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout, /-s 10\.65\.0\.2\/32 -m comment/);
      const d = await call('DEL', c, 0, `masq-${backend}`);
      assert.equal(d.code, 0, d.stdout);
      assert.doesNotMatch(rules(), /10\.65\.0\.2/);
    });
  }

  test('CHECK after tampering: the reference messages', async () => {
    const c = conf('ptpchk', ['10.66.0.0/24', 'fd66::/64']);
    const r = await call('ADD', c, 1, 'chk');
    assert.equal(r.code, 0, r.stdout);
    const prev = r.json;
    const check = (p: J, o: object = {}) => call('CHECK', { ...c, prevResult: p }, 1, 'chk', o);
    const ns = env.sb.containers[1]!;
    expectCniError(await call('CHECK', c, 1, 'chk'), 999, 'ptp: Required prevResult missing');
    const otherNs = structuredClone(prev);
    otherNs.interfaces[1].sandbox = '/run/netns/other';
    expectCniError(
      await check(otherNs),
      999,
      `Sandbox in prevResult  doesn't match configured netns: ${ns.path}`,
    );
    const wrongMac = structuredClone(prev);
    wrongMac.interfaces[1].mac = '02:00:00:00:00:01';
    expectCniError(
      await check(wrongMac),
      999,
      `ptp: Interface eth0 Mac 02:00:00:00:00:01 doesn't match container Mac: ${prev.interfaces[1].mac}`,
    );
    const extraRoute = structuredClone(prev);
    extraRoute.routes = [{ dst: '192.168.77.0/24', gw: '10.66.0.1' }];
    expectCniError(
      await check(extraRoute),
      999,
      'Expected Route {Dst:{IP:192.168.77.0 Mask:ffffff00} GW:10.66.0.1} not found in routing table',
    );
    env.sb.exec('ip', ['-n', ns.name, 'addr', 'del', '10.66.0.2/24', 'dev', 'eth0']);
    expectCniError(await check(prev), 999, 'Failed to match addr 10.66.0.2/24 on interface eth0');
    env.sb.exec('ip', ['-n', ns.name, 'link', 'del', 'eth0']);
    env.sb.exec('ip', ['-n', ns.name, 'link', 'add', 'eth0', 'type', 'bridge']);
    env.sb.exec('ip', ['-n', ns.name, 'link', 'set', 'eth0', 'address', prev.interfaces[1].mac]);
    expectCniError(await check(prev), 999, 'Error: Container interface eth0 not of type veth/p2p');
    env.sb.exec('ip', ['-n', ns.name, 'link', 'del', 'eth0']);
    expectCniError(await check(prev), 999, 'ptp: Container Interface name in prevResult: eth0 not found');
    // the IPAM CHECK runs before: a released reservation fails with host-local's message
    assert.equal((await call('DEL', c, 1, 'chk')).code, 0);
    const gone = await check(prev);
    assert.notEqual(gone.code, 0);
    assert.match(gone.json.msg, /host-local: Failed to find address added by container chk/);
  });

  test('bad input: reference messages, nothing changed', async () => {
    const before = env.sb.snapshot('host');
    const beforeC = env.sb.snapshot(env.sb.containers[0]!);
    expectCniError(
      await call('ADD', { cniVersion: '1.0.0', name: 'x', type: 'ptp' }),
      999,
      'no plugin name provided',
    );
    expectCniError(
      await call('ADD', conf('ptpbad', ['10.67.0.0/24'], { mtu: 'big' })),
      7,
      /^failed to load netconf: config\.mtu: expected int/,
    );
    expectCniError(
      await call('ADD', conf('ptpbad', ['10.67.0.0/24'], { ipMasq: true, ipMasqBackend: 'auto' })),
      7,
      'unknown ipmasq backend "auto"',
    );
    expectCniError(
      await call('ADD', conf('ptpbad', ['10.67.0.0/24']), 0, 'bad', { netns: '/run/netns/does-not-exist' }),
      999,
      /^failed to open netns "\/run\/netns\/does-not-exist"/,
    );
    expectCniError(
      await call('CHECK', conf('ptpbad', ['10.67.0.0/24']), 0, 'bad', { netns: '/run/netns/does-not-exist' }),
      999,
      /^failed to open netns "\/run\/netns\/does-not-exist"/,
    );
    assert.deepEqual(env.sb.snapshot('host'), before);
    assert.deepEqual(env.sb.snapshot(env.sb.containers[0]!), beforeC);
    assert.deepEqual(reservations('ptpbad'), []);
  });

  test('rollback: a failing route after the veth exists leaves nothing (links, addresses, rules, reservation)', async () => {
    const before = env.sb.snapshot('host');
    const beforeC = env.sb.snapshot(env.sb.containers[2]!);
    const c = conf('ptprb', ['10.68.0.0/24'], { ipMasq: true });
    // an unreachable gateway makes the IPAM route fail inside the container, after the pair exists
    c.ipam.routes = [{ dst: '192.168.68.0/24', gw: '172.31.68.1' }];
    const r = await call('ADD', c, 2, 'rb');
    assert.notEqual(r.code, 0);
    assert.match(r.json.msg, /failed to add route '192\.168\.68\.0\/24 via 172\.31\.68\.1 dev eth0/);
    assert.deepEqual(env.sb.snapshot('host'), before);
    assert.deepEqual(env.sb.snapshot(env.sb.containers[2]!), beforeC);
    assert.deepEqual(reservations('ptprb'), []);
  });

  test('DEL with the namespace gone: reservation released, masquerade rules removed', async () => {
    const cn = env.sb.newContainer();
    const c = conf('ptpgone', ['10.69.0.0/24'], { ipMasq: true });
    const r = await cniCall(plugin, 'ADD', c, { path: DIST, netns: cn.path, containerId: 'gone' });
    assert.equal(r.code, 0, r.stdout);
    const hostName = r.json.interfaces[0].name;
    deleteNamedNetns(cn);
    // the kernel destroys the namespace (and with it the host-side veth) asynchronously
    await eventually(
      () => ipj('host', ['link', 'show']).filter((l: J) => l.ifname === hostName).length === 0,
      `${hostName} still exists after its namespace was deleted`,
    );
    for (const netns of [cn.path, '']) {
      const d = await cniCall(plugin, 'DEL', c, { path: DIST, netns, containerId: 'gone' });
      assert.equal(d.code, 0, d.stdout);
    }
    assert.deepEqual(reservations('ptpgone'), []);
    assert.doesNotMatch(env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout, /10\.69\.0\./);
  });

  test('GC: reservations and masquerade rules of attachments not in the valid list go; STATUS delegates', async () => {
    const c = conf('ptpgc', ['10.70.0.0/24'], { ipMasq: true, cniVersion: '1.1.0' });
    for (const [k, id] of ['keep', 'drop'].entries()) {
      const r = await call('ADD', c, k, `gc-${id}`);
      assert.equal(r.code, 0, r.stdout);
    }
    assert.match(env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout, /10\.70\.0\.3/);
    const g = await cniCall(
      plugin,
      'GC',
      { ...c, 'cni.dev/valid-attachments': [{ containerID: 'gc-keep', ifname: 'eth0' }] },
      { path: DIST },
    );
    assert.equal(g.code, 0, g.stdout + g.stderr);
    const nat = env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout;
    assert.doesNotMatch(nat, /10\.70\.0\.3\//);
    assert.match(nat, /10\.70\.0\.2\//);
    assert.deepEqual(reservations('ptpgc'), ['10.70.0.2']);
    assert.equal((await cniCall(plugin, 'STATUS', c, { path: DIST })).code, 0);
    const st = await cniCall(plugin, 'STATUS', { ...c, ipam: { type: 'nope' } }, { path: DIST });
    assert.match(st.json.msg, /failed to find plugin "nope"/);
    for (const [k, id] of ['keep', 'drop'].entries())
      assert.equal((await call('DEL', c, k, `gc-${id}`)).code, 0);
    assert.deepEqual(reservations('ptpgc'), []);
  });
});
