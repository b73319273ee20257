/**
 * The daemon as a process (`dhcp daemon` from source, as the executable runs it): flags, pidfile, a restart while a
 * lease is held (the lease is resumed from the state directory and renewed), and meeting the reference's Go
 * daemon/plugin (Debian's /usr/lib/cni/dhcp) on the socket, which must fail at once with a message saying so.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniCall, eventually, scaled } from '@cnikit/testing';
import { plugin } from './index.ts';
import { type LeaseRecord, leaseFileName } from './lease.ts';
import { callDaemon } from './protocol.ts';
import { dnsmasqClientId, Lab, startDaemon, stopProcess } from './testenv.ts';

const GO_DHCP = '/usr/lib/cni/dhcp';
let lab: Lab;
const children: ChildProcess[] = [];

function conf(sock: string, version = '1.0.0') {
  return {
    cniVersion: version,
    name: 'dhnet',
    type: 'macvlan',
    ipam: { type: 'dhcp', daemonSocketPath: sock },
  };
}

async function leases(sock: string): Promise<LeaseRecord[]> {
  return ((await callDaemon(sock, 'status', {})) as { leases: LeaseRecord[] }).leases;
}

before(async () => {
  assert.ok(existsSync(GO_DHCP), `${GO_DHCP} missing: install Debian's containernetworking-plugins`);
  lab = new Lab();
  await lab.startServer({ t1: 3, t2: 6 });
});

after(async () => {
  for (const c of children) await stopProcess(c, 'SIGKILL');
  await lab?.destroy();
});

describe('dhcp daemon process', { concurrency: false }, () => {
  test('killed and restarted while a lease is held: the lease is resumed, renewed, then released on DEL', async () => {
    const sock = join(lab.dir, 'restart.sock');
    const state = join(lab.dir, 'restart-state');
    const args = ['-statedir', state, '-timeout', '1s', '-resendmax', '2s'];
    const first = await startDaemon(sock, args);
    children.push(first.child);
    const [c] = lab.addContainers(1);
    const add = await cniCall(plugin, 'ADD', conf(sock), { netns: c!.path, containerId: 'c-restart' });
    assert.equal(add.code, 0, add.stdout);
    const address = add.json.ips[0].address as string;
    spawnSync('ip', ['-n', c!.name, 'addr', 'add', address, 'dev', 'eth0']);
    const file = join(state, leaseFileName('c-restart/dhnet/eth0'));
    const saved = JSON.parse(readFileSync(file, 'utf8')) as LeaseRecord;
    assert.equal(`${saved.address}/24`, address);

    await stopProcess(first.child, 'SIGKILL');
    const second = await startDaemon(sock, args);
    children.push(second.child);
    assert.match(second.stderr(), /1 lease\(s\) resumed/);
    const [resumed] = await leases(sock);
    assert.equal(resumed?.clientId, 'c-restart/dhnet/eth0');
    assert.equal(resumed?.address, saved.address);
    // the resumed lease is maintained: it is renewed at T1 (3 s) and the server sees the renewal
    const expiry = lab.leases().find((l) => l.address === saved.address)!.expires;
    let renewed: LeaseRecord | undefined;
    for (const deadline = Date.now() + scaled(20_000); Date.now() < deadline; ) {
      renewed = (await leases(sock))[0];
      if ((renewed?.renewals ?? 0) >= 1) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok((renewed?.renewals ?? 0) >= 1, 'resumed lease renewed');
    await eventually(
      () => (lab.leases().find((l) => l.address === saved.address)?.expires ?? 0) > expiry,
      'server expiry moved',
      5000,
    );
    // ADD again after the restart returns the resumed lease, not a new one
    const again = await cniCall(plugin, 'ADD', conf(sock), { netns: c!.path, containerId: 'c-restart' });
    assert.equal(again.json.ips[0].address, address);

    const del = await cniCall(plugin, 'DEL', conf(sock), { netns: c!.path, containerId: 'c-restart' });
    assert.equal(del.code, 0, del.stdout);
    await eventually(
      () => !lab.leases().some((l) => l.clientId === dnsmasqClientId('c-restart/dhnet/eth0')),
      'released at the server',
      5000,
    );
    assert.ok(!existsSync(file));
    await stopProcess(second.child);
  });

  test('a lease that expired while no daemon ran (the server forgot it too) is requested again for its address', async () => {
    const sock = join(lab.dir, 'expired.sock');
    const state = join(lab.dir, 'expired-state');
    const args = ['-statedir', state, '-timeout', '1s', '-resendmax', '2s'];
    const first = await startDaemon(sock, args);
    children.push(first.child);
    const [c] = lab.addContainers(1);
    const add = await cniCall(plugin, 'ADD', conf(sock), { netns: c!.path, containerId: 'c-expired' });
    assert.equal(add.code, 0, add.stdout);
    const address = add.json.ips[0].address as string;
    spawnSync('ip', ['-n', c!.name, 'addr', 'add', address, 'dev', 'eth0']);
    await stopProcess(first.child, 'SIGKILL');
    // the daemon stayed down past the lease's end: the client's record is over, the server's lease file is empty
    const file = join(state, leaseFileName('c-expired/dhnet/eth0'));
    const saved = JSON.parse(readFileSync(file, 'utf8')) as LeaseRecord;
    const past = new Date(Date.now() - 60_000).toISOString();
    writeFileSync(file, `${JSON.stringify({ ...saved, renewAt: past, rebindAt: past, expiresAt: past })}\n`);
    await lab.stopServer();
    writeFileSync(lab.leaseFile, '');
    // not authoritative: a REBINDING request for a lease the server does not know gets no answer, a DISCOVER does
    await lab.startServer({ t1: 3, t2: 6, authoritative: false });
    const second = await startDaemon(sock, args);
    children.push(second.child);
    let now: LeaseRecord | undefined;
    for (const deadline = Date.now() + scaled(30_000); Date.now() < deadline; ) {
      now = (await leases(sock))[0];
      if (now?.state === 'bound' && Date.parse(now.expiresAt) > Date.now()) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(now?.state, 'bound', `lease bound again: ${JSON.stringify(now)}`);
    assert.equal(now?.address, saved.address);
    assert.ok(Date.parse(now!.expiresAt) > Date.now());
    assert.ok(
      lab
        .leases()
        .some((l) => l.address === saved.address && l.clientId === dnsmasqClientId('c-expired/dhnet/eth0')),
    );
    const link = JSON.parse(
      spawnSync('ip', ['-n', c!.name, '-j', 'link', 'show', 'eth0'], { encoding: 'utf8' }).stdout,
    );
    assert.ok(link[0].flags.includes('UP'), 'the interface stays up');
    const del = await cniCall(plugin, 'DEL', conf(sock), { netns: c!.path, containerId: 'c-expired' });
    assert.equal(del.code, 0, del.stdout);
    await stopProcess(second.child);
    await lab.stopServer();
    await lab.startServer({ t1: 3, t2: 6 });
  });

  test('a restarted daemon forgets persisted leases whose namespace is gone', async () => {
    const sock = join(lab.dir, 'forget.sock');
    const state = join(lab.dir, 'forget-state');
    const d1 = await startDaemon(sock, ['-statedir', state]);
    children.push(d1.child);
    const [c] = lab.addContainers(1);
    assert.equal(
      (await cniCall(plugin, 'ADD', conf(sock), { netns: c!.path, containerId: 'c-forget' })).code,
      0,
    );
    await stopProcess(d1.child, 'SIGKILL');
    lab.removeContainer(c!);
    const d2 = await startDaemon(sock, ['-statedir', state]);
    children.push(d2.child);
    assert.deepEqual(await leases(sock), []);
    assert.ok(!existsSync(join(state, leaseFileName('c-forget/dhnet/eth0'))));
    await stopProcess(d2.child);
  });

  test('flags: -pidfile written and removed with the socket on SIGTERM; bad flags exit 2', async () => {
    const sock = join(lab.dir, 'flags.sock');
    const pidfile = join(lab.dir, 'dhcp.pid');
    const d = await startDaemon(sock, [
      '-statedir',
      join(lab.dir, 'flags-state'),
      '-pidfile',
      pidfile,
      '-broadcast',
    ]);
    children.push(d.child);
    assert.equal(readFileSync(pidfile, 'utf8'), String(d.child.pid));
    assert.equal(await stopProcess(d.child, 'SIGTERM'), 0);
    assert.ok(!existsSync(pidfile), 'pidfile removed');
    assert.ok(!existsSync(sock), 'socket removed');
    await assert.rejects(
      startDaemon(join(lab.dir, 'x.sock'), ['-nosuchflag']),
      /exited 2: flag provided but not defined: -nosuchflag/,
    );
    await assert.rejects(
      startDaemon(join(lab.dir, 'x.sock'), ['-timeout', 'soon']),
      /invalid value "soon" for flag -timeout/,
    );
    await assert.rejects(
      startDaemon(join(lab.dir, 'x.sock'), ['-pidfile', 'rel.pid']),
      /exited 1: .*path not absolute/,
    );
  });

  test('a second daemon on a live socket refuses to start; a stale socket file is replaced', async () => {
    const sock = join(lab.dir, 'twice.sock');
    const d = await startDaemon(sock, ['-statedir', join(lab.dir, 'twice-state')]);
    children.push(d.child);
    await assert.rejects(
      startDaemon(sock, ['-statedir', join(lab.dir, 'twice-state2')]),
      /another daemon is running/,
    );
    await stopProcess(d.child, 'SIGKILL'); // leaves the socket file behind
    assert.ok(existsSync(sock));
    const d2 = await startDaemon(sock, ['-statedir', join(lab.dir, 'twice-state')]);
    children.push(d2.child);
    assert.match(d2.stderr(), /removing stale socket/);
    await stopProcess(d2.child);
  });

  test("our plugin meeting the Go daemon fails at once, saying it is the reference's Go net/rpc daemon", async () => {
    const sock = join(lab.dir, 'go.sock');
    const go = spawn(GO_DHCP, ['daemon', '-socketpath', sock], { stdio: 'ignore' });
    children.push(go);
    await eventually(() => existsSync(sock), 'Go daemon socket', 10_000);
    const [c] = lab.addContainers(1);
    const t0 = Date.now();
    const r = await cniCall(plugin, 'ADD', conf(sock), { netns: c!.path, containerId: 'c-go' });
    assert.ok(Date.now() - t0 < scaled(3000), `failed in ${Date.now() - t0} ms`);
    assert.equal(r.code, 1);
    assert.match(
      r.json.msg,
      /answered with HTTP \(HTTP\/1\.1 400 Bad Request\): it is the reference \(Go net\/rpc\) dhcp daemon/,
    );
    await stopProcess(go);
  });

  test('the Go plugin meeting our daemon fails at once with a message naming the mismatch', async () => {
    const sock = join(lab.dir, 'ours.sock');
    const d = await startDaemon(sock, ['-statedir', join(lab.dir, 'ours-state')]);
    children.push(d.child);
    const [c] = lab.addContainers(1);
    const t0 = Date.now();
    const r = await cniCall({ binary: GO_DHCP }, 'ADD', conf(sock), {
      netns: c!.path,
      containerId: 'c-go2',
      timeoutMs: 20_000,
    });
    assert.ok(Date.now() - t0 < scaled(3000), `failed in ${Date.now() - t0} ms`);
    assert.equal(r.code, 1);
    assert.match(
      r.json.msg,
      /error dialing DHCP daemon: dial-http unix .*ours\.sock: unexpected HTTP response: 400 cnikit dhcp daemon: this socket speaks cnikit's JSON protocol, not Go net\/rpc/,
    );
    assert.match(d.stderr(), /refused a Go net\/rpc client/);
    await stopProcess(d.child);
  });
});
