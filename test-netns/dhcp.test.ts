/**
 * dhcp through the compiled executables (both back-ends), like a runtime and an operator would use them: the daemon
 * started as `dhcp daemon` through the hard link, ADD/CHECK/DEL/STATUS through the plugin executable against dnsmasq
 * in a private namespace behind a bridge, `dhcp status` and `cnikit dhcp status` listing the lease, DHCPRELEASE seen
 * in dnsmasq's lease file.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniCall } from '@cnikit/testing';
import { dnsmasqClientId, Lab, ROUTER, startDaemon, stopProcess } from '../plugins/dhcp/src/testlab.ts';
import { type Backend, DIST, ensureBuilt, ensureLinks } from './dist.ts';

const info = ensureBuilt();
let lab: Lab;

before(async () => {
  lab = new Lab();
  await lab.startServer();
});
after(async () => {
  await lab?.destroy();
});

for (const backend of ['bun', 'sea'] as Backend[]) {
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
