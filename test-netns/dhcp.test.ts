/**
 * dhcp through the compiled executables (both back-ends), like a runtime and an operator would use them: the daemon
 * started as `dhcp daemon` through the hard link, ADD/CHECK/DEL/STATUS through the plugin executable against dnsmasq
 * in a private namespace behind a bridge, `dhcp status` and `cnikit dhcp status` listing the lease, DHCPRELEASE seen
 * in dnsmasq's lease file. Then the daemon hosted by the warm service (`cnikit serve --dhcp-daemon-flags …`): the
 * plugin's ADD/DEL through the warm client, every lease held by the service's own process, resumed across a restart.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniCall, eventually, scaled } from '@cnikit/testing';
import { callDaemon } from '../plugins/dhcp/src/protocol.ts';
import { dnsmasqClientId, Lab, ROUTER, startDaemon, stopProcess } from '../plugins/dhcp/src/testenv.ts';
import { type Backend, DIST, ensureBuilt, ensureLinks, testBackends } from './dist.ts';

const info = ensureBuilt();
let lab: Lab;

before(async () => {
  lab = new Lab();
  await lab.startServer();
});
after(async () => {
  await lab?.destroy();
});

for (const backend of testBackends() as Backend[]) {
  describe(`dhcp executable (${backend})`, { concurrency: false }, () => {
    const dir = ensureLinks(backend, info);
    const dhcp = join(dir, 'dhcp');
    const cnikit = backend === info.default ? join(DIST, 'cnikit') : join(DIST, backend, 'cnikit');

    test('dhcp daemon via the hard link; ADD, CHECK, status, DEL, STATUS through the executables', async () => {
      const sock = join(lab.dir, `${backend}.sock`);
      const daemon = await startDaemon(sock, ['-statedir', join(lab.dir, `${backend}-state`)], dhcp);
      try {
        const conf = {
          cniVersion: '1.1.0',
          name: 'bbnet',
          type: 'macvlan',
          ipam: { type: 'dhcp', daemonSocketPath: sock },
        };
        const [c] = lab.addContainers(1);
        const id = `bb-${backend}`;
        const add = await cniCall({ binary: dhcp }, 'ADD', conf, { netns: c!.path, containerId: id });
        assert.equal(add.code, 0, add.stdout + add.stderr);
        const address = add.json.ips[0].address as string;
        assert.match(address, /^10\.77\.0\.\d+\/24$/);
        assert.equal(add.json.ips[0].gateway, ROUTER);
        assert.deepEqual(add.json.routes, [{ dst: '0.0.0.0/0', gw: ROUTER }]);
        const server = lab.leases().find((l) => l.clientId === dnsmasqClientId(`${id}/bbnet/eth0`));
        assert.equal(`${server?.address}/24`, address);

        const check = await cniCall(
          { binary: dhcp },
          'CHECK',
          { ...conf, prevResult: add.json },
          {
            netns: c!.path,
            containerId: id,
          },
        );
        assert.equal(check.code, 0, check.stdout);

        for (const argv of [
          [dhcp, ['status', '-socketpath', sock]],
          [cnikit, ['dhcp', 'status', `--socketpath=${sock}`]],
        ] as const) {
          const st = spawnSync(argv[0], [...argv[1]], { encoding: 'utf8' });
          assert.equal(st.status, 0, st.stderr);
          const out = JSON.parse(st.stdout);
          assert.equal(out.pid, daemon.child.pid);
          assert.deepEqual(
            out.leases.map((l: { clientId: string; address: string; state: string }) => [
              l.clientId,
              l.address,
              l.state,
            ]),
            [[`${id}/bbnet/eth0`, address.split('/')[0], 'bound']],
          );
        }

        const status = await cniCall({ binary: dhcp }, 'STATUS', conf, {});
        assert.equal(status.code, 0, status.stdout);

        const del = await cniCall({ binary: dhcp }, 'DEL', conf, { netns: c!.path, containerId: id });
        assert.equal(del.code, 0, del.stdout);
        for (let i = 0; i < 50 && lab.leases().some((l) => l.clientId === server?.clientId); i++)
          await new Promise((r) => setTimeout(r, 100));
        assert.ok(!lab.leases().some((l) => l.clientId === server?.clientId), 'released at the server');
      } finally {
        await stopProcess(daemon.child);
      }
      const gone = await cniCall(
        { binary: dhcp },
        'STATUS',
        {
          cniVersion: '1.1.0',
          name: 'bbnet',
          type: 'macvlan',
          ipam: { type: 'dhcp', daemonSocketPath: sock },
        },
        {},
      );
      assert.equal(gone.code, 1);
      assert.equal(gone.json.code, 50);
      const st = spawnSync(dhcp, ['status', '-socketpath', sock], { encoding: 'utf8' });
      assert.equal(st.status, 1);
      assert.match(
        st.stderr,
        /dhcp status: error dialing DHCP daemon: dial unix .*: connect: no such file or directory/,
      );
    });
  });
}

describe('dhcp daemon hosted by the warm service', { concurrency: false }, () => {
  const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
  let run: string;
  let dhcpSock: string;
  let flags: string;

  /** `cnikit serve` hosting the daemon; its log in a file (a pipe the busy service does not drain could block it). */
  async function serve(extra: string[] = []): Promise<{ proc: ChildProcess; log: () => string }> {
    const logFile = join(run, 'serve.log');
    const fd = openSync(logFile, 'a');
    const start = readFileSync(logFile, 'utf8').length;
    let proc: ChildProcess;
    try {
      proc = spawn(
        join(DIST, 'cnikit'),
        ['serve', '--socket', join(run, 'cnikit.sock'), '--verbose', '--dhcp-daemon-flags', flags, ...extra],
        { stdio: ['ignore', 'ignore', fd], env: { PATH } },
      );
    } finally {
      closeSync(fd);
    }
    const log = () => readFileSync(logFile, 'utf8').slice(start);
    await eventually(
      () => /dhcp daemon: listening on /.test(log()) || proc.exitCode !== null,
      'the service hosts the daemon',
      scaled(20_000),
    );
    assert.equal(proc.exitCode, null, log());
    return { proc, log };
  }

  async function leases(): Promise<{ pid: number; leases: Array<{ clientId: string; address: string }> }> {
    return (await callDaemon(dhcpSock, 'status', {})) as {
      pid: number;
      leases: Array<{ clientId: string; address: string }>;
    };
  }

  before(() => {
    run = join(lab.dir, 'warm-run');
    mkdirSync(run, { mode: 0o700 });
    dhcpSock = join(lab.dir, 'hosted', 'dhcp.sock');
    flags = `-socketpath ${dhcpSock} -statedir ${join(lab.dir, 'hosted-state')} -timeout 2s -resendmax 2s`;
  });

  test('ADD and DEL through the warm client: the service process holds the lease, no other daemon runs', async () => {
    const conf = {
      cniVersion: '1.1.0',
      name: 'warmnet',
      type: 'macvlan',
      ipam: { type: 'dhcp', daemonSocketPath: dhcpSock },
    };
    const client = join(DIST, 'warm', 'dhcp');
    const env = { CNIKIT_SOCKET: join(run, 'cnikit.sock') };
    let svc = await serve();
    try {
      const [c] = lab.addContainers(1);
      const add = await cniCall({ binary: client }, 'ADD', conf, {
        netns: c!.path,
        containerId: 'warm-1',
        env,
      });
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const address = (add.json.ips[0].address as string).split('/')[0];
      // the service logs the request after its reply: the client may have exited before the line is written
      await eventually(
        () => /dhcp ADD → exit 0/.test(svc.log()),
        'the ADD ran in the service (not the cold fallback)',
        scaled(5000),
      );
      const server = lab.leases().find((l) => l.clientId === dnsmasqClientId('warm-1/warmnet/eth0'));
      assert.equal(server?.address, address);
      // the lease is held by the service's own process: the daemon answering on the socket is that pid
      const st = await leases();
      assert.equal(st.pid, svc.proc.pid);
      assert.deepEqual(
        st.leases.map((l) => [l.clientId, l.address]),
        [['warm-1/warmnet/eth0', address]],
      );
      const listeners = spawnSync('ss', ['-xlpn'], { encoding: 'utf8' }).stdout.split('\n');
      const owner = listeners.find((l) => l.includes(dhcpSock));
      assert.match(owner ?? '', new RegExp(`pid=${svc.proc.pid},`), `listener of ${dhcpSock}: ${owner}`);

      // a restart of the service keeps the lease (persisted, resumed by the hosted daemon)
      await stopProcess(svc.proc);
      assert.ok(!existsSync(dhcpSock), 'the hosted daemon removed its socket on SIGTERM');
      svc = await serve();
      assert.match(svc.log(), /dhcp daemon: listening on .*, 1 lease\(s\) resumed/);
      assert.deepEqual(
        (await leases()).leases.map((l) => l.address),
        [address],
      );

      const del = await cniCall({ binary: client }, 'DEL', conf, {
        netns: c!.path,
        containerId: 'warm-1',
        env,
      });
      assert.equal(del.code, 0, del.stdout + del.stderr);
      await eventually(() => /dhcp DEL → exit 0/.test(svc.log()), 'the DEL ran in the service', scaled(5000));
      assert.deepEqual((await leases()).leases, []);
      await eventually(
        () => !lab.leases().some((l) => l.clientId === dnsmasqClientId('warm-1/warmnet/eth0')),
        'released at the server',
        scaled(5000),
      );
    } finally {
      await stopProcess(svc.proc);
    }
  });

  test('a re-execution of the service (a request past its deadline) stops the hosted daemon first; the new image resumes the lease', async () => {
    const conf = {
      cniVersion: '1.1.0',
      name: 'warmnet',
      type: 'macvlan',
      ipam: { type: 'dhcp', daemonSocketPath: dhcpSock },
    };
    const client = join(DIST, 'warm', 'dhcp');
    const env = { CNIKIT_SOCKET: join(run, 'cnikit.sock') };
    const svc = await serve(['--deadline-ms', String(scaled(4000))]);
    try {
      const [a, b] = lab.addContainers(2);
      const add = await cniCall({ binary: client }, 'ADD', conf, {
        netns: a!.path,
        containerId: 'warm-a',
        env,
      });
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const address = (add.json.ips[0].address as string).split('/')[0];
      // no server: B's acquisition outlives the deadline, the service answers 11 and re-executes itself
      await lab.stopServer();
      const hung = await cniCall({ binary: client }, 'ADD', conf, {
        netns: b!.path,
        containerId: 'warm-b',
        env,
      });
      assert.equal(hung.json?.code, 11, hung.stdout);
      await eventually(
        () => (svc.log().match(/dhcp daemon: listening on /g) ?? []).length >= 2,
        `the re-executed service hosts the daemon again (log:\n${svc.log()})`,
        scaled(20_000),
      );
      assert.match(svc.log(), /re-executing .*: a request exceeded its deadline/);
      assert.match(svc.log(), /dhcp daemon: listening on .*, 1 lease\(s\) resumed/);
      const st = await leases();
      assert.equal(st.pid, svc.proc.pid, 'same pid: the process image was replaced, not the process');
      assert.deepEqual(
        st.leases.map((l) => [l.clientId, l.address]),
        [['warm-a/warmnet/eth0', address]],
        'the held lease is resumed; the abandoned acquisition is not',
      );
      await lab.startServer();
      const del = await cniCall({ binary: client }, 'DEL', conf, {
        netns: a!.path,
        containerId: 'warm-a',
        env,
      });
      assert.equal(del.code, 0, del.stdout + del.stderr);
      assert.deepEqual((await leases()).leases, []);
    } finally {
      await stopProcess(svc.proc);
    }
  });

  test('bad daemon flags: the service does not start (exit 1, the reason logged)', () => {
    const r = spawnSync(
      join(DIST, 'cnikit'),
      ['serve', '--socket', join(run, 'bad.sock'), '--dhcp-daemon-flags', '-nosuchflag'],
      { encoding: 'utf8', env: { PATH }, timeout: scaled(20_000) },
    );
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /cannot start: --dhcp-daemon: flag provided but not defined: -nosuchflag/);
    assert.ok(!existsSync(join(run, 'bad.sock')), 'no socket left behind');
  });
});
