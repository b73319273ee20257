import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseCIDR } from '@cnikit/ip';
import * as nl from '@cnikit/netlink';
import { type CniCallOptions, type CniCommand, cniCall, eventually, sandboxForFile } from '@cnikit/testing';
import { ensureAddr, ensureBridge, ensureVlanInterface, type PortOps, removeCreatedBridge } from './add.ts';
import { loadNetConf } from './config.ts';
import { plugin } from './index.ts';
import * as kernel from './kernel.ts';
import { hostLocal, run, snapshot, withoutBridge } from './testenv.ts';

const env = sandboxForFile({ enterHost: true, containers: 2 });

let n = 0;
function conf(version: string, subnet: string | string[][], extra: object = {}) {
  const name = `net${n++}`;
  return {
    cniVersion: version,
    name,
    type: 'bridge',
    bridge: `brl3x${n}`,
    ipam: hostLocal(env.dir, subnet),
    ...extra,
  };
}

function reservations(name: string): string[] {
  try {
    return readdirSync(join(env.dir, name)).filter((f) => !f.startsWith('last_reserved') && f !== 'lock');
  } catch {
    return [];
  }
}

async function ok(cmd: CniCommand, cf: object, o: CniCallOptions) {
  const r = await cniCall(plugin, cmd, cf, o);
  assert.equal(r.code, 0, `${cmd}: ${r.stdout}${r.stderr}`);
  return r.stdout ? JSON.parse(r.stdout) : undefined;
}

describe('bridge L3 with host-local', () => {
  for (const version of ['0.3.0', '0.3.1', '0.4.0', '1.0.0']) {
    test(`IPv4 default gateway ADD/CHECK/DEL (${version})`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf(version, '10.10.0.0/24', { isDefaultGateway: true });
      const before = snapshot();
      const beforeC = snapshot(cn.name);
      const res = await ok('ADD', cf, { netns: c });
      assert.equal(res.cniVersion, version);
      assert.equal(res.interfaces.length, 3);
      assert.equal(res.ips.length, 1);
      assert.equal(res.ips[0].address, '10.10.0.2/24');
      assert.equal(res.ips[0].gateway, '10.10.0.1');
      assert.equal(res.ips[0].interface, 2);
      if (version !== '1.0.0') assert.equal(res.ips[0].version, '4');
      assert.deepEqual(res.routes, [{ dst: '0.0.0.0/0', gw: '10.10.0.1' }]);
      // the bridge keeps its own MAC (frozen when the gateway address is added), not the port's
      assert.notEqual(res.interfaces[0].mac, res.interfaces[1].mac);
      assert.equal(res.interfaces[0].mac, nl.getLink(cf.bridge)?.mac);
      // kernel state
      assert.ok(nl.listAddrs({ link: cf.bridge, family: 4 }).some((a) => a.cidr === '10.10.0.1/24'));
      assert.equal(nl.sysctlGet('net.ipv4.ip_forward').trim(), '1');
      assert.equal(nl.sysctlGet(`net/ipv6/conf/${cf.bridge}/accept_ra`).trim(), '0');
      nl.withNetns(c, () => {
        assert.ok(nl.listAddrs({ link: 'eth0', family: 4 }).some((a) => a.cidr === '10.10.0.2/24'));
        assert.ok(nl.listRoutes({ family: 4 }).some((r) => r.dst === '0.0.0.0/0' && r.gw === '10.10.0.1'));
        assert.equal(nl.sysctlGet('net/ipv6/conf/eth0/accept_dad').trim(), '0');
        assert.equal(nl.sysctlGet('net/ipv4/conf/eth0/arp_notify').trim(), '1');
      });
      assert.deepEqual(reservations(cf.name), ['10.10.0.2']);
      if (version === '0.4.0' || version === '1.0.0') {
        await ok('CHECK', { ...cf, prevResult: res }, { netns: c });
        const bad = structuredClone(res);
        bad.ips[0].address = '10.10.0.99/24';
        const r = await cniCall(plugin, 'CHECK', { ...cf, prevResult: bad }, { netns: c });
        assert.notEqual(r.code, 0);
      }
      await ok('DEL', cf, { netns: c });
      assert.deepEqual(reservations(cf.name), []);
      assert.equal(withoutBridge(snapshot(), cf.bridge), withoutBridge(before, cf.bridge));
      assert.equal(snapshot(cn.name), beforeC);
      await ok('DEL', cf, { netns: c });
    });
  }

  for (const version of ['0.1.0', '0.2.0']) {
    test(`IPv4 ADD/DEL (${version})`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf(version, '10.11.0.0/24', { isGateway: true });
      const res = await ok('ADD', cf, { netns: c });
      assert.deepEqual(res.ip4, { ip: '10.11.0.2/24', gateway: '10.11.0.1' });
      await ok('DEL', cf, { netns: c });
      assert.deepEqual(reservations(cf.name), []);
    });
  }

  for (const version of ['0.3.0', '0.3.1', '0.4.0', '1.0.0']) {
    test(`IPv6 and dual-stack with default routes (${version})`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf(version, [['10.12.0.0/24'], ['fd12::/64'], ['fd13::/64']], { isDefaultGateway: true });
      const before = snapshot();
      const res = await ok('ADD', cf, { netns: c });
      assert.deepEqual(
        res.ips.map((i: { address: string; gateway: string }) => [i.address, i.gateway]),
        [
          ['10.12.0.2/24', '10.12.0.1'],
          ['fd12::2/64', 'fd12::1'],
          ['fd13::2/64', 'fd13::1'],
        ],
      );
      assert.deepEqual(res.routes, [
        { dst: '0.0.0.0/0', gw: '10.12.0.1' },
        { dst: '::/0', gw: 'fd12::1' },
      ]);
      const brAddrs = nl.listAddrs({ link: cf.bridge }).map((a) => a.cidr);
      for (const a of ['10.12.0.1/24', 'fd12::1/64', 'fd13::1/64']) assert.ok(brAddrs.includes(a), a);
      assert.equal(nl.sysctlGet('net/ipv6/conf/all/forwarding').trim(), '1');
      nl.withNetns(c, () => {
        assert.equal(nl.sysctlGet('net/ipv6/conf/eth0/keep_addr_on_down').trim(), '1');
        assert.ok(nl.listRoutes({ family: 6 }).some((r) => r.dst === '::/0' && r.gw === 'fd12::1'));
        const v6 = nl.listAddrs({ link: 'eth0', family: 6 }).map((a) => a.cidr);
        assert.ok(v6.includes('fd12::2/64') && v6.includes('fd13::2/64'));
      });
      if (version === '0.4.0' || version === '1.0.0')
        await ok('CHECK', { ...cf, prevResult: res }, { netns: c });
      await ok('DEL', cf, { netns: c });
      assert.equal(withoutBridge(snapshot(), cf.bridge), withoutBridge(before, cf.bridge));
    });
  }

  test('enabledad: enhanced_dad and accept_dad on, addresses settled (not tentative) when ADD returns', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', 'fd19::/64', { isGateway: true, enabledad: true });
    await ok('ADD', cf, { netns: c });
    nl.withNetns(c, () => {
      assert.equal(nl.sysctlGet('net/ipv6/conf/eth0/enhanced_dad').trim(), '1');
      assert.equal(nl.sysctlGet('net/ipv6/conf/eth0/accept_dad').trim(), '1');
      const a = nl.listAddrs({ link: 'eth0', family: 6 }).find((x) => x.cidr === 'fd19::2/64');
      assert.ok(a && !a.tentative && !a.dadFailed);
    });
    await ok('DEL', cf, { netns: c });
  });

  test('IPAM routes: ECMP (same dst, two gateways), gateway-less routes use the address gateway', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', [['10.21.0.0/24'], ['fd21::/64']], { isGateway: true });
    cf.ipam = {
      ...cf.ipam,
      routes: [
        { dst: '192.168.50.0/24', gw: '10.21.0.253' },
        { dst: '192.168.50.0/24', gw: '10.21.0.254' },
        { dst: '192.168.60.0/24' },
        { dst: 'fd99::/64', gw: 'fd21::fd' },
        { dst: 'fd99::/64', gw: 'fd21::fe' },
      ],
    } as typeof cf.ipam;
    const res = await ok('ADD', cf, { netns: c });
    try {
      nl.withNetns(c, () => {
        const v4 = nl.listRoutes({ family: 4 });
        const gws = v4.filter((r) => r.dst === '192.168.50.0/24').map((r) => r.gw);
        assert.deepEqual(gws.sort(), ['10.21.0.253', '10.21.0.254']);
        assert.equal(v4.find((r) => r.dst === '192.168.60.0/24')?.gw, '10.21.0.1');
        const v6 = nl.listRoutes({ family: 6 }).filter((r) => r.dst === 'fd99::/64');
        const hops = v6.flatMap((r) => (r.multipath ? r.multipath.map((h) => h.gw) : [r.gw]));
        assert.deepEqual(hops.sort(), ['fd21::fd', 'fd21::fe']);
      });
      await ok('CHECK', { ...cf, prevResult: res }, { netns: c });
    } finally {
      await ok('DEL', cf, { netns: c });
    }
  });

  test('IPAM DNS (host-local resolvConf) passes through; 3 subnets with 0.2.0 fail in IPAM and leave nothing', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const resolv = join(env.dir, 'resolv.conf');
    writeFileSync(resolv, 'nameserver 192.0.2.53\nsearch example.test\n');
    const cf = conf('1.0.0', '10.23.0.0/24', { isGateway: true });
    cf.ipam = { ...cf.ipam, resolvConf: resolv } as typeof cf.ipam;
    const res = await ok('ADD', cf, { netns: c });
    assert.deepEqual(res.dns, { nameservers: ['192.0.2.53'], search: ['example.test'] });
    await ok('DEL', cf, { netns: c });
    const cf3 = conf('0.2.0', [['10.24.0.0/24'], ['fd24::/64'], ['fd25::/64']], { isGateway: true });
    const r = await cniCall(plugin, 'ADD', cf3, { netns: c });
    assert.notEqual(r.code, 0, r.stdout);
    assert.match(JSON.parse(r.stdout).msg, /0\.2\.0 does not support more than 1 address per family/);
    assert.deepEqual(reservations(cf3.name), []);
    assert.equal(
      nl.withNetns(c, () => nl.getLink('eth0')),
      undefined,
      'veth removed after the IPAM failure',
    );
  });

  test('VLAN gateway interface <bridge>.<vlan>: real veth pair and address, VLAN entries recorded (no VLAN filtering here)', () => {
    const c = loadNetConf({ cniVersion: '1.0.0', name: 'vgw', bridge: 'brvg', vlan: 42 }, '');
    // the bridge is created without vlan_filtering: this kernel cannot do it
    const br = ensureBridge({ ...c, vlan: 0 });
    const vlanCalls: string[] = [];
    const ops: PortOps = {
      ...kernel,
      vlanList: () => [1],
      vlanDel: (n, vid) => void vlanCalls.push(`del ${n.replace(/^veth[0-9a-f]{8}$/, 'vethX')} ${vid}`),
      vlanAdd: (n, vid, o) =>
        void vlanCalls.push(`add ${n.replace(/^veth[0-9a-f]{8}$/, 'vethX')} ${vid} ${o.pvid}`),
    };
    const vif = ensureVlanInterface(c, br, ops);
    assert.equal(vif.name, 'brvg.42');
    assert.equal(vif.kind, 'veth');
    assert.equal(vif.up, true);
    const peer = nl.listLinks().find((l) => l.index === vif.peerIndex);
    assert.equal(peer?.masterIndex, br.index, 'the other end is a port of the bridge');
    assert.deepEqual(vlanCalls, ['del vethX 1', 'add vethX 42 true']);
    // idempotent: a second ADD finds it
    assert.equal(ensureVlanInterface(c, br, ops).index, vif.index);
    ensureAddr(vif.name, parseCIDR('10.28.0.1/24')!, false, vif.mac);
    assert.deepEqual(
      nl.listAddrs({ link: 'brvg.42', family: 4 }).map((a) => a.cidr),
      ['10.28.0.1/24'],
    );
    nl.deleteLink('brvg.42');
  });

  test('bridge keeps a stable MAC across ADD/DEL', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.13.0.0/24', { bridge: 'brmac', isGateway: true });
    const res = await ok('ADD', cf, { netns: c });
    const mac = nl.getLink('brmac')?.mac;
    assert.equal(res.interfaces[0].mac, mac);
    await ok('DEL', cf, { netns: c });
    assert.equal(nl.getLink('brmac')?.mac, mac);
    const res2 = await ok('ADD', cf, { netns: c });
    assert.equal(res2.interfaces[0].mac, mac);
    await ok('DEL', cf, { netns: c });
  });

  test('ensure bridge address: IPv4 conflict needs forceAddress; IPv6 overlap likewise; non-overlapping v6 coexist', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    nl.createBridge({ name: 'braddr' });
    nl.addAddr('braddr', '10.14.0.1/16');
    const cf = conf('1.0.0', '10.14.1.0/24', { bridge: 'braddr', isGateway: true });
    const r = await cniCall(plugin, 'ADD', cf, { netns: c });
    assert.notEqual(r.code, 0);
    assert.equal(
      JSON.parse(r.stdout).msg,
      'failed to set bridge addr: "braddr" already has an IP address different from 10.14.1.1/24',
    );
    assert.deepEqual(reservations(cf.name), [], 'IP released after failure');
    assert.equal(
      nl.withNetns(c, () => nl.getLink('eth0')),
      undefined,
      'veth removed after failure',
    );
    const forced = { ...cf, forceAddress: true };
    // the failed ADD removed the only port: the bridge now has the zero MAC (the reference fails to
    // freeze it with EADDRNOTAVAIL here; we freeze the MAC it gets from the new port)
    assert.equal(nl.getLink('braddr')?.mac, '00:00:00:00:00:00');
    const fres = await ok('ADD', forced, { netns: c });
    assert.equal(fres.interfaces[0].mac, nl.getLink('braddr')?.mac);
    assert.notEqual(fres.interfaces[0].mac, '00:00:00:00:00:00');
    assert.deepEqual(
      nl.listAddrs({ link: 'braddr', family: 4 }).map((a) => a.cidr),
      ['10.14.1.1/24'],
    );
    await ok('DEL', forced, { netns: c });

    nl.addAddr('braddr', 'fd14::1/48');
    const cf6 = conf('1.0.0', 'fd14:0:0:1::/64', { bridge: 'braddr', isGateway: true });
    const r6 = await cniCall(plugin, 'ADD', cf6, { netns: c });
    assert.match(JSON.parse(r6.stdout).msg, /already has an IP address different from fd14:0:0:1::1\/64/);
    const cf6b = conf('1.0.0', 'fd15::/64', { bridge: 'braddr', isGateway: true });
    await ok('ADD', cf6b, { netns: c });
    const v6 = nl.listAddrs({ link: 'braddr', family: 6 }).map((a) => a.cidr);
    assert.ok(v6.includes('fd14::1/48') && v6.includes('fd15::1/64'));
    await ok('DEL', cf6b, { netns: c });
  });

  test('IP released, veth and firewall rules removed on a post-IPAM error', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.15.0.0/24', { isGateway: true, ipMasq: true, macspoofchk: true });
    // a real failure after IPAM: an IPAM route whose gateway is off-link cannot be added in the container
    cf.ipam = { ...cf.ipam, routes: [{ dst: '10.99.0.0/16', gw: '192.0.2.1' }] } as typeof cf.ipam;
    const before = snapshot(cn.name);
    const r = await cniCall(plugin, 'ADD', cf, { netns: c });
    assert.notEqual(r.code, 0);
    assert.match(
      JSON.parse(r.stdout).msg,
      /^failed to add route '10\.99\.0\.0\/16 via 192\.0\.2\.1 dev eth0 /,
    );
    assert.deepEqual(reservations(cf.name), []);
    assert.equal(snapshot(cn.name), before);
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /10\.15\.0\./);
    assert.doesNotMatch(run('nft', ['list', 'ruleset']), /cni-br-iface-ctr1-eth0/);
    assert.ok(
      !nl.listLinks().some((l) => l.kind === 'veth' && l.masterIndex === nl.getLink(cf.bridge)?.index),
    );
  });

  test('a bridge this ADD created is removed by its rollback; a bridge it found stays', async () => {
    const cn = env.sb.newContainer();
    const cf = conf('1.0.0', '10.31.0.0/24', { isGateway: true });
    // a real failure after IPAM and after the gateway address went on the bridge: an off-link route gateway
    cf.ipam = { ...cf.ipam, routes: [{ dst: '10.99.0.0/16', gw: '192.0.2.1' }] } as typeof cf.ipam;
    const r = await cniCall(plugin, 'ADD', cf, { netns: cn.path });
    assert.notEqual(r.code, 0, r.stdout);
    assert.equal(nl.getLink(cf.bridge), undefined, 'the bridge this ADD created is gone with its rollback');
    assert.doesNotMatch(r.stderr, /rollback: .* failed/);
    assert.deepEqual(reservations(cf.name), []);
    // the same failure on a bridge that was there before: kept as it was
    run('ip', ['link', 'add', cf.bridge, 'type', 'bridge']);
    const index = nl.getLink(cf.bridge)!.index;
    try {
      const again = await cniCall(plugin, 'ADD', cf, { netns: cn.path });
      assert.notEqual(again.code, 0, again.stdout);
      assert.equal(nl.getLink(cf.bridge)?.index, index, 'a bridge the ADD found is never removed');
    } finally {
      nl.deleteLink(cf.bridge);
    }
  });

  test('removeCreatedBridge: only the same link, and only without ports (a concurrent ADD keeps it)', () => {
    run('ip', ['link', 'add', 'brrm0', 'type', 'bridge']);
    run('ip', ['link', 'add', 'brrmp0', 'type', 'veth', 'peer', 'name', 'brrmp1']);
    try {
      const index = nl.getLink('brrm0')!.index;
      removeCreatedBridge('brrm0', index + 1000);
      assert.equal(nl.getLink('brrm0')?.index, index, 'another link of that name is kept');
      run('ip', ['link', 'set', 'brrmp0', 'master', 'brrm0']);
      removeCreatedBridge('brrm0', index);
      assert.equal(nl.getLink('brrm0')?.index, index, 'a bridge with a port is kept');
      run('ip', ['link', 'set', 'brrmp0', 'nomaster']);
      removeCreatedBridge('brrm0', index);
      assert.equal(nl.getLink('brrm0'), undefined, 'the port-less bridge is removed');
      removeCreatedBridge('brrm0', index); // already gone: nothing to do
    } finally {
      for (const l of ['brrm0', 'brrmp0']) if (nl.getLink(l)) nl.deleteLink(l);
    }
  });

  for (const backend of ['iptables', 'nftables']) {
    test(`masquerade rules (${backend}) are rolled back when ADD fails after setting them up`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf('1.0.0', '10.17.0.0/24', { isGateway: true, ipMasq: true, ipMasqBackend: backend });
      // An IPAM executable that, like a misbehaving neighbour, sets the new host port down before answering:
      // everything up to and including the masquerade succeeds, then the port never comes up.
      const dir = join(env.dir, `masqrb-${backend}`);
      mkdirSync(dir);
      const log = join(dir, 'calls');
      writeFileSync(
        join(dir, 'fake-ipam'),
        [
          '#!/bin/sh',
          `echo "$CNI_COMMAND" >> ${log}`,
          'if [ "$CNI_COMMAND" = ADD ]; then',
          `  for l in $(ip -o link show master ${cf.bridge} | cut -d: -f2 | cut -d@ -f1); do ip link set "$l" down; done`,
          `  echo '{"cniVersion":"1.0.0","ips":[{"address":"10.17.0.5/24","gateway":"10.17.0.1"}]}'`,
          'fi',
        ].join('\n'),
        { mode: 0o755 },
      );
      cf.ipam = { type: 'fake-ipam' } as typeof cf.ipam;
      const before = snapshot(cn.name);
      const r = await cniCall(plugin, 'ADD', cf, { netns: c, path: dir });
      assert.notEqual(r.code, 0);
      assert.equal(JSON.parse(r.stdout).msg, 'bridge port in error state: down');
      assert.deepEqual(readFileSync(log, 'utf8').split('\n').filter(Boolean), ['ADD', 'DEL']);
      assert.doesNotMatch(run('iptables-save', ['-t', 'nat']), /10\.17\.0\.5/);
      assert.doesNotMatch(run('nft', ['list', 'ruleset']), /10\.17\.0\.5/);
      assert.equal(snapshot(cn.name), before);
      assert.ok(
        !nl.listLinks().some((l) => l.kind === 'veth' && l.masterIndex === nl.getLink(cf.bridge)?.index),
      );
    });
  }

  for (const backend of ['iptables', 'nftables', undefined]) {
    test(`ipMasq with backend ${backend ?? 'default'}: rules present, then gone after DEL (also when the interface is gone)`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const cf = conf('1.0.0', '10.16.0.0/24', {
        isGateway: true,
        ipMasq: true,
        ...(backend ? { ipMasqBackend: backend } : {}),
      });
      const before = snapshot();
      await ok('ADD', cf, { netns: c, containerId: 'masq1' });
      if (backend === 'nftables') {
        const rules = run('nft', ['list', 'chain', 'inet', 'cni_plugins_masquerade', 'masq_checks']);
        assert.match(rules, /ip saddr 10\.16\.0\.2 ip daddr != 10\.16\.0\.0\/24 masquerade/);
      } else {
        const nat = run('iptables', ['-t', 'nat', '-S']);
        assert.match(nat, /-A POSTROUTING -s 10\.16\.0\.2\/32 .*-j CNI-/);
        assert.match(nat, /! -d 224\.0\.0\.0\/4 .*-j MASQUERADE/);
      }
      await ok('DEL', cf, { netns: c, containerId: 'masq1' });
      // iptables-nft leaves the (empty) built-in nat chains and the reference keeps its nft table: compare the rest
      const core = (x: string) => JSON.stringify({ ...JSON.parse(withoutBridge(x)), nft: undefined });
      assert.equal(core(snapshot()), core(before));
      assert.doesNotMatch(run('nft', ['list', 'ruleset']), /10\.16\.0\./);
      assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
      // interface already gone before DEL: rules must still go
      await ok('ADD', cf, { netns: c, containerId: 'masq2' });
      nl.withNetns(c, () => nl.deleteLink('eth0'));
      await ok('DEL', cf, { netns: c, containerId: 'masq2' });
      assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
      const nft = run('nft', ['list', 'ruleset']);
      assert.doesNotMatch(nft, /10\.16\.0\./);
      assert.deepEqual(reservations(cf.name), []);
    });
  }

  test('DEL with an empty CNI_NETNS still removes masquerade and spoof-check rules and releases the IP', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.25.0.0/24', { isGateway: true, ipMasq: true, macspoofchk: true });
    await ok('ADD', cf, { netns: c, containerId: 'nons' });
    assert.match(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
    await ok('DEL', cf, { netns: '', containerId: 'nons' });
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
    assert.doesNotMatch(run('nft', ['list', 'table', 'bridge', 'nat']), /cni-br-iface-nons-eth0/);
    assert.deepEqual(reservations(cf.name), []);
    await ok('DEL', cf, { netns: c, containerId: 'nons' });
  });

  test('DEL keeps going when IPAM DEL fails: interface and rules removed, the IPAM error reported', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.26.0.0/24', { isGateway: true, ipMasq: true });
    await ok('ADD', cf, { netns: c, containerId: 'ipamfail' });
    const broken = { ...cf, ipam: { ...cf.ipam, type: 'no-such-ipam' } };
    const r = await cniCall(plugin, 'DEL', broken, { netns: c, containerId: 'ipamfail' });
    assert.notEqual(r.code, 0);
    assert.match(JSON.parse(r.stdout).msg, /failed to find plugin "no-such-ipam"/);
    assert.equal(
      nl.withNetns(c, () => nl.getLink('eth0')),
      undefined,
    );
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /10\.26\.0\./);
    // the runtime retries DEL with a working IPAM: the IP is released
    await ok('DEL', cf, { netns: c, containerId: 'ipamfail' });
    assert.deepEqual(reservations(cf.name), []);
  });

  test('DEL without a prior ADD succeeds (L3, masquerade, spoof check) and changes nothing', async () => {
    const cn = env.sb.newContainer();
    const cf = conf('1.0.0', '10.27.0.0/24', { isGateway: true, ipMasq: true, macspoofchk: true });
    // state DEL must leave alone: an address on the container's lo (set up by the test, before the snapshots)
    nl.withNetns(cn.path, () => nl.addAddr('lo', '192.0.2.27/32'));
    // earlier tests' bridges change carrier/DAD state asynchronously: compare the host without bridge lines, plus
    // the full list of link names (a created or deleted link of any kind shows there)
    const linkNames = () => nl.listLinks().map((l) => `${l.name}/${l.kind ?? ''}`);
    const namesBefore = linkNames();
    const hostBefore = withoutBridge(snapshot());
    const ctrBefore = snapshot(cn.name);
    assert.match(ctrBefore, /192\.0\.2\.27\/32/);
    await ok('DEL', cf, { netns: cn.path, containerId: 'never' });
    await ok('DEL', cf, { netns: '', containerId: 'never' });
    assert.deepEqual(linkNames(), namesBefore, 'no host link created or deleted');
    assert.equal(
      withoutBridge(snapshot()),
      hostBefore,
      'host namespace unchanged (addresses, routes, iptables, nft)',
    );
    assert.equal(snapshot(cn.name), ctrBefore, 'container namespace unchanged');
    assert.equal(nl.getLink(cf.bridge), undefined, 'no bridge created by DEL');
    assert.deepEqual(reservations(cf.name), []);
  });

  test('DEL on the empty file left by an unmounted netns releases the IP and removes the rules', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.28.0.0/24', { isGateway: true, ipMasq: true, macspoofchk: true });
    const core = (x: string) => JSON.stringify({ ...JSON.parse(withoutBridge(x)), nft: undefined });
    const before = snapshot();
    const res = await ok('ADD', cf, { netns: c, containerId: 'unmounted' });
    const hostVeth = res.interfaces[1].name as string;
    assert.deepEqual(reservations(cf.name), ['10.28.0.2']);
    assert.match(run('iptables', ['-t', 'nat', '-S']), /-A POSTROUTING -s 10\.28\.0\.2\/32 .*-j CNI-/);
    assert.match(run('nft', ['list', 'table', 'bridge', 'nat']), /cni-br-iface-unmounted-eth0/);
    // what a runtime leaves behind after it unmounted the namespace but did not remove the mount point: an
    // empty regular file (the namespace, and with it the veth pair, is destroyed)
    run('umount', [c]);
    assert.equal(statSync(c).size, 0);
    assert.ok(statSync(c).isFile());
    // the kernel destroys the namespace asynchronously (its cleanup work is late on a loaded machine)
    await eventually(
      () => nl.getLink(hostVeth) === undefined,
      'host veth went away with the namespace',
      30_000,
    );

    // a non-empty file is not a leftover mount point: DEL reports the error (code 999) but keeps going
    const notNs = join(env.dir, 'not-a-netns');
    writeFileSync(notNs, 'x');
    const bad = await cniCall(plugin, 'DEL', cf, { netns: notNs, containerId: 'unmounted' });
    assert.equal(bad.code, 1);
    assert.equal(JSON.parse(bad.stdout).code, 999);
    assert.match(JSON.parse(bad.stdout).msg, new RegExp(`^unknown FS magic on "${notNs}": [0-9a-f]+$`));
    assert.deepEqual(reservations(cf.name), [], 'IP released by the failed DEL');
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-|10\.28\.0\./);

    await ok('DEL', cf, { netns: c, containerId: 'unmounted' });
    assert.deepEqual(reservations(cf.name), [], 'IP released');
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-|10\.28\.0\./);
    assert.doesNotMatch(run('nft', ['list', 'ruleset']), /cni-br-iface-unmounted-eth0|10\.28\.0\./);
    assert.equal(core(snapshot()), core(before), 'host back to its state before ADD (bridge aside)');
    await ok('DEL', cf, { netns: c, containerId: 'unmounted' }); // again: idempotent
  });

  test('DEL with CNI_NETNS on a non-network namespace reports the error and still releases the IP and removes the rules', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.29.0.0/24', { isGateway: true, ipMasq: true, macspoofchk: true });
    await ok('ADD', cf, { netns: c, containerId: 'mntns' });
    assert.deepEqual(reservations(cf.name), ['10.29.0.2']);
    assert.match(run('iptables', ['-t', 'nat', '-S']), /-A POSTROUTING -s 10\.29\.0\.2\/32 .*-j CNI-/);
    assert.match(run('nft', ['list', 'table', 'bridge', 'nat']), /cni-br-iface-mntns-eth0/);
    const r = await cniCall(plugin, 'DEL', cf, { netns: '/proc/self/ns/mnt', containerId: 'mntns' });
    assert.equal(r.code, 1, r.stdout);
    const err = JSON.parse(r.stdout);
    assert.equal(err.code, 999);
    assert.match(err.msg, /\/proc\/self\/ns\/mnt/);
    assert.deepEqual(reservations(cf.name), [], 'IP released');
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-|10\.29\.0\./);
    assert.doesNotMatch(run('nft', ['list', 'ruleset']), /10\.29\.0\.|cni-br-iface-mntns-eth0/);
    // the interface in the real namespace was not reachable: a retried DEL with the right path removes it
    assert.ok(nl.withNetns(c, () => nl.getLink('eth0')));
    await ok('DEL', cf, { netns: c, containerId: 'mntns' });
    assert.equal(
      nl.withNetns(c, () => nl.getLink('eth0')),
      undefined,
    );
  });

  test('macspoofchk: nft rules present after ADD, gone after DEL', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.17.0.0/24', { macspoofchk: true });
    const res = await ok('ADD', cf, { netns: c, containerId: 'dummy' });
    const table = run('nft', ['list', 'table', 'bridge', 'nat']);
    assert.match(table, new RegExp(`iifname "${res.interfaces[1].name}" jump cni-br-iface-dummy-eth0`));
    assert.match(table, new RegExp(`ether saddr ${res.interfaces[2].mac} return`));
    assert.match(table, /comment "macspoofchk-dummy-eth0"/);
    await ok('DEL', cf, { netns: c, containerId: 'dummy' });
    assert.doesNotMatch(run('nft', ['list', 'table', 'bridge', 'nat']), /cni-br-iface-dummy-eth0/);
  });

  test('IPAM + disableContainerInterface is rejected before anything is created', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = conf('1.0.0', '10.18.0.0/24', { bridge: 'brnever', disableContainerInterface: true });
    const r = await cniCall(plugin, 'ADD', cf, { netns: c });
    assert.equal(JSON.parse(r.stdout).msg, 'cannot use IPAM when DisableContainerInterface flag is set');
    assert.equal(nl.getLink('brnever'), undefined);
  });
});
