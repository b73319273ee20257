/**
 * The daemon (in this process) and the plugin (in-process through skel's dispatcher) against a real dnsmasq in a
 * private namespace behind a bridge. dnsmasq's shortest lease is 2 minutes, so renewal and rebinding are driven by
 * its T1/T2 options (3 s / 6 s).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniCall, eventually, scaled } from '@cnikit/testing';
import { attach, DhcpDaemon } from './daemon.ts';
import { plugin } from './index.ts';
import type { LeaseRecord } from './lease.ts';
import { leaseFileName } from './lease.ts';
import { type Container, dnsmasqClientId, Lab, ROUTER, SUBNET } from './testenv.ts';

const T1 = 3;
const T2 = 6;
let lab: Lab;
let daemon: DhcpDaemon;
let server: net.Server;
let sock: string;
let stateDir: string;

function conf(extra: Record<string, unknown> = {}, version = '1.0.0') {
  return {
    cniVersion: version,
    name: 'dhnet',
    type: 'macvlan',
    ipam: { type: 'dhcp', daemonSocketPath: sock, ...extra },
  };
}

function record(containerId: string, ifName = 'eth0'): LeaseRecord | undefined {
  return daemon.status().find((r) => r.clientId === `${containerId}/dhnet/${ifName}`);
}

function addAddress(c: Container, cidr: string): void {
  const r = spawnSync('ip', ['-n', c.name, 'addr', 'add', cidr, 'dev', 'eth0']);
  assert.equal(r.status, 0, String(r.stderr));
}

function serverLease(containerId: string) {
  return lab.leases().find((l) => l.clientId === dnsmasqClientId(`${containerId}/dhnet/eth0`));
}

before(async () => {
  lab = new Lab();
  await lab.startServer({ t1: T1, t2: T2 });
  sock = join(lab.dir, 'dhcp.sock');
  stateDir = join(lab.dir, 'state');
  daemon = new DhcpDaemon({
    settings: { timeoutMs: 1000, resendMaxMs: 2000, resendTimeoutMs: 15_000, broadcast: false },
    hostPrefix: '',
    stateDir,
    log: () => {},
  });
  server = net.createServer();
  attach(server, daemon, () => {});
  await new Promise<void>((r) => server.listen(sock, r));
});

after(async () => {
  server?.close();
  await daemon?.shutdown();
  await lab?.destroy();
});

describe('dhcp against dnsmasq', { concurrency: false }, () => {
  test('ADD: address, gateway, routes and DNS from the server; the lease is in the server and the state dir', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-add' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const res = r.json;
    assert.equal(res.cniVersion, '1.0.0');
    assert.equal(res.ips.length, 1);
    assert.match(res.ips[0].address, new RegExp(`^${SUBNET.replaceAll('.', '\\.')}\\.\\d+/24$`));
    assert.equal(res.ips[0].gateway, ROUTER);
    assert.deepEqual(res.routes, [{ dst: '0.0.0.0/0', gw: ROUTER }]);
    assert.deepEqual(res.dns, {
      nameservers: [`${SUBNET}.53`, `${SUBNET}.54`],
      domain: 'corp.test',
      search: ['corp.test', 'lab.test'],
    });
    const addr = res.ips[0].address.split('/')[0];
    const link = (
      lab.ipJson(c!, ['link', 'show', 'eth0']) as Array<{ address: string; flags: string[] }>
    )[0]!;
    assert.ok(link.flags.includes('UP'), 'the daemon set eth0 up');
    const sl = serverLease('c-add');
    assert.ok(sl, `dnsmasq has the lease: ${JSON.stringify(lab.leases())}`);
    assert.equal(sl.address, addr);
    assert.equal(sl.mac, link.address);
    const rec = record('c-add');
    assert.equal(rec?.state, 'bound');
    assert.equal(rec?.address, addr);
    assert.ok(existsSync(join(stateDir, leaseFileName('c-add/dhnet/eth0'))), 'lease persisted');

    // a second ADD for the same attachment returns the lease held (no second lease at the server)
    const again = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-add' });
    assert.equal(again.json.ips[0].address, res.ips[0].address);
    assert.equal(lab.leases().filter((l) => l.clientId === sl.clientId).length, 1);

    // 0.4.0 result shape from the same lease
    const old = await cniCall(plugin, 'ADD', conf({}, '0.4.0'), { netns: c!.path, containerId: 'c-add' });
    assert.equal(old.json.ips[0].version, '4');
  });

  test('renewal at T1: unicast REQUEST, new expiry at the server and in the lease', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-renew' });
    assert.equal(r.code, 0, r.stdout);
    addAddress(c!, r.json.ips[0].address); // what the main plugin does with the result
    const first = record('c-renew')!;
    const firstExpiry = serverLease('c-renew')!.expires;
    await eventually(() => (record('c-renew')?.renewals ?? 0) >= 1, 'lease renewed', 10_000);
    const now = record('c-renew')!;
    assert.equal(now.state, 'bound');
    assert.equal(now.address, first.address);
    assert.ok(Date.parse(now.expiresAt) > Date.parse(first.expiresAt));
    await eventually(() => (serverLease('c-renew')?.expires ?? 0) > firstExpiry, 'server expiry moved', 5000);
    assert.match(lab.serverLog(), new RegExp(`DHCPREQUEST\\(srv0\\) ${now.address.replaceAll('.', '\\.')} `));
  });

  test('CHECK passes for the lease held and fails for another address or no lease', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-check' });
    const prev = r.json;
    const ok = await cniCall(
      plugin,
      'CHECK',
      { ...conf(), prevResult: prev },
      { netns: c!.path, containerId: 'c-check' },
    );
    assert.equal(ok.code, 0, ok.stdout);
    const wrong = structuredClone(prev);
    wrong.ips[0].address = `${SUBNET}.251/24`;
    const bad = await cniCall(
      plugin,
      'CHECK',
      { ...conf(), prevResult: wrong },
      { netns: c!.path, containerId: 'c-check' },
    );
    assert.equal(bad.code, 1);
    assert.match(bad.json.msg, /DHCP lease of c-check\/dhnet\/eth0 is .* prevResult has 10\.77\.0\.251\/24/);
    const none = await cniCall(
      plugin,
      'CHECK',
      { ...conf(), prevResult: prev },
      { netns: c!.path, containerId: 'nobody' },
    );
    assert.equal(none.json.msg, 'no DHCP lease for nobody/dhnet/eth0');
  });

  test('DEL sends DHCPRELEASE (gone from the lease file), forgets the lease, and is idempotent', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-del' });
    addAddress(c!, r.json.ips[0].address);
    assert.ok(serverLease('c-del'));
    const d = await cniCall(plugin, 'DEL', conf(), { netns: c!.path, containerId: 'c-del' });
    assert.equal(d.code, 0, d.stdout);
    await eventually(() => serverLease('c-del') === undefined, 'dnsmasq dropped the lease', 5000);
    assert.match(lab.serverLog(), /DHCPRELEASE\(srv0\)/);
    assert.equal(record('c-del'), undefined);
    assert.ok(!existsSync(join(stateDir, leaseFileName('c-del/dhnet/eth0'))));
    const d2 = await cniCall(plugin, 'DEL', conf(), { netns: c!.path, containerId: 'c-del' });
    assert.equal(d2.code, 0);
  });

  test('DEL without CNI_NETNS releases by container ID, network and interface (daemon, state file, server)', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-del-nons' });
    assert.equal(r.code, 0, r.stdout);
    addAddress(c!, r.json.ips[0].address);
    await daemon.flush();
    const file = join(stateDir, leaseFileName('c-del-nons/dhnet/eth0'));
    assert.ok(existsSync(file) && serverLease('c-del-nons'));
    const d = await cniCall(plugin, 'DEL', conf(), {
      containerId: 'c-del-nons',
      env: { CNI_NETNS: undefined },
    });
    assert.equal(d.code, 0, d.stdout);
    assert.equal(record('c-del-nons'), undefined, 'the daemon forgot the lease');
    assert.ok(!existsSync(file), 'the state file is removed');
    await eventually(() => serverLease('c-del-nons') === undefined, 'released at the server', 5000);
    // again, and for an attachment the daemon never had: success
    const again = await cniCall(plugin, 'DEL', conf(), {
      containerId: 'c-del-nons',
      env: { CNI_NETNS: undefined },
    });
    assert.equal(again.code, 0, again.stdout);
  });

  test('DEL without the address on the interface still releases (broadcast)', async () => {
    const [c] = lab.addContainers(1);
    await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-del-bc' });
    assert.ok(serverLease('c-del-bc'));
    await cniCall(plugin, 'DEL', conf(), { netns: c!.path, containerId: 'c-del-bc' });
    await eventually(() => serverLease('c-del-bc') === undefined, 'dnsmasq dropped the lease', 5000);
  });

  test('a lease whose namespace is gone is dropped at its next renewal; DEL afterwards succeeds', async () => {
    const [c] = lab.addContainers(1);
    await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-gone' });
    assert.ok(record('c-gone'));
    lab.removeContainer(c!);
    await eventually(() => record('c-gone') === undefined, 'lease dropped', 10_000);
    await daemon.flush();
    assert.ok(!existsSync(join(stateDir, leaseFileName('c-gone/dhnet/eth0'))));
    const d = await cniCall(plugin, 'DEL', conf(), { netns: c!.path, containerId: 'c-gone' });
    assert.equal(d.code, 0, d.stdout);
  });

  test('GC releases the leases of attachments that are not valid any more', async () => {
    const [a, b] = lab.addContainers(2);
    await cniCall(plugin, 'ADD', conf(), { netns: a!.path, containerId: 'c-gc-keep' });
    await cniCall(plugin, 'ADD', conf(), { netns: b!.path, containerId: 'c-gc-drop' });
    const gc = await cniCall(
      plugin,
      'GC',
      { ...conf({}, '1.1.0'), 'cni.dev/valid-attachments': [{ containerID: 'c-gc-keep', ifname: 'eth0' }] },
      {},
    );
    assert.equal(gc.code, 0, gc.stdout);
    assert.ok(record('c-gc-keep'));
    assert.equal(record('c-gc-drop'), undefined);
    await eventually(() => serverLease('c-gc-drop') === undefined, 'dropped lease released', 5000);
    assert.ok(serverLease('c-gc-keep'));
    await cniCall(plugin, 'DEL', conf(), { netns: a!.path, containerId: 'c-gc-keep' });
  });

  test('provide: host-name from CNI_ARGS reaches the server; priority sets the route metric', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(
      plugin,
      'ADD',
      conf({ provide: [{ option: 'host-name', fromArg: 'K8S_POD_NAME' }], priority: 300 }),
      { netns: c!.path, containerId: 'c-opts', args: 'IgnoreUnknown=1;K8S_POD_NAME=web-7' },
    );
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(r.json.routes, [{ dst: '0.0.0.0/0', gw: ROUTER, priority: 300 }]);
    const line = lab.leases().find((l) => l.clientId === dnsmasqClientId('c-opts/dhnet/eth0'));
    assert.equal(line?.hostname, 'web-7');
  });

  test('server gone during renewal: renewing, then rebinding at T2, then bound again when it is back', async () => {
    const [c] = lab.addContainers(1);
    const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-outage' });
    addAddress(c!, r.json.ips[0].address);
    await lab.stopServer();
    try {
      await eventually(() => record('c-outage')?.state === 'renewing', 'renewing', 6000);
      await eventually(() => record('c-outage')?.state === 'rebinding', 'rebinding after T2', 8000);
      assert.ok(record('c-outage')?.lastError, 'the failure is recorded');
    } finally {
      await lab.startServer({ t1: T1, t2: T2 });
    }
    await eventually(() => record('c-outage')?.state === 'bound', 'rebound with the server back', 10_000);
    assert.equal(record('c-outage')?.address, r.json.ips[0].address.split('/')[0]);
    const link = (lab.ipJson(c!, ['link', 'show', 'eth0']) as Array<{ flags: string[] }>)[0]!;
    assert.ok(link.flags.includes('UP'));
  });

  test('ADD for an interface or namespace that does not exist fails with the reference text', async () => {
    const [c] = lab.addContainers(1);
    const noIf = await cniCall(plugin, 'ADD', conf(), {
      netns: c!.path,
      containerId: 'c-noif',
      ifName: 'eth9',
    });
    assert.equal(noIf.code, 1);
    assert.equal(noIf.json.msg, 'error looking up "eth9": Link not found');
    const noNs = await cniCall(plugin, 'ADD', conf(), { netns: `${c!.path}-missing`, containerId: 'c-nons' });
    assert.equal(noNs.code, 1);
    assert.match(noNs.json.msg, /-missing/);
    assert.equal(record('c-noif', 'eth9'), undefined);
    const bad = await cniCall(plugin, 'ADD', conf({ provide: [{ option: 'nope', value: 'x' }] }), {
      netns: c!.path,
      containerId: 'c-bad',
    });
    assert.equal(bad.json.code, 7);
    assert.match(bad.json.msg, /^Can not parse option "nope"/);
  });

  test('ADD on an interface that cannot do DHCP (loopback, no broadcast) fails at once with code 7, changing nothing', async () => {
    const [c] = lab.addContainers(1);
    spawnSync('ip', ['-n', c!.name, 'tuntap', 'add', 'tun0', 'mode', 'tun']);
    for (const [ifName, why] of [
      ['lo', /cannot run DHCP on "lo": lo is a loopback interface/],
      ['tun0', /cannot run DHCP on "tun0": tun0 cannot broadcast \(no IFF_BROADCAST/],
    ] as const) {
      const t0 = Date.now();
      const r = await cniCall(plugin, 'ADD', conf(), { netns: c!.path, containerId: 'c-unfit', ifName });
      const ms = Date.now() - t0;
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json.code, 7, r.stdout);
      assert.match(r.json.msg, why);
      assert.ok(ms < scaled(1000), `${ifName}: failed after ${ms} ms`);
      const link = (lab.ipJson(c!, ['link', 'show', ifName]) as Array<{ flags: string[] }>)[0]!;
      assert.ok(!link.flags.includes('UP'), `${ifName} left down`);
      assert.equal(record('c-unfit', ifName), undefined);
    }
    // a missing interface fails as fast, with the reference's text
    const t0 = Date.now();
    const none = await cniCall(plugin, 'ADD', conf(), {
      netns: c!.path,
      containerId: 'c-unfit',
      ifName: 'eth7',
    });
    assert.equal(none.json.msg, 'error looking up "eth7": Link not found');
    assert.ok(Date.now() - t0 < scaled(1000), `missing interface: failed after ${Date.now() - t0} ms`);
  });

  test('provide: an option the client owns (53, 50, 54, 55, 57, pad, end) is error 7 before any DHCP traffic', async () => {
    const [c] = lab.addContainers(1);
    const before = lab.serverLog().split('DHCPDISCOVER').length;
    for (const option of ['53', '50', '54', '55', '57', '0', '255']) {
      const t0 = Date.now();
      const r = await cniCall(
        plugin,
        'ADD',
        conf({
          provide: [
            { option: 'host-name', value: 'h' },
            { option, value: '1' },
          ],
        }),
        {
          netns: c!.path,
          containerId: 'c-owned',
        },
      );
      assert.equal(r.json?.code, 7, `option ${option}: ${r.stdout}`);
      assert.match(
        r.json.msg,
        new RegExp(
          `^ipam\\.provide\\[1\\]: option "${option}" cannot be provided: option ${option} is the DHCP client's own`,
        ),
      );
      assert.ok(Date.now() - t0 < scaled(1000), `option ${option}: failed after ${Date.now() - t0} ms`);
    }
    assert.equal(record('c-owned'), undefined);
    assert.equal(lab.serverLog().split('DHCPDISCOVER').length, before, 'no DISCOVER sent');
    const link = (lab.ipJson(c!, ['link', 'show', 'eth0']) as Array<{ flags: string[] }>)[0]!;
    assert.ok(!link.flags.includes('UP'), 'eth0 left down');
  });

  test('STATUS succeeds with the daemon, fails with code 50 without it', async () => {
    const ok = await cniCall(plugin, 'STATUS', conf({}, '1.1.0'), {});
    assert.equal(ok.code, 0, ok.stdout);
    const missing = await cniCall(
      plugin,
      'STATUS',
      conf({ daemonSocketPath: join(lab.dir, 'nope.sock') }, '1.1.0'),
      {},
    );
    assert.equal(missing.code, 1);
    assert.equal(missing.json.code, 50);
    assert.match(missing.json.msg, /DHCP daemon not available at .*nope\.sock: error dialing DHCP daemon/);
  });
});
