// Interoperability with the Go reference ptp (Debian's /usr/lib/cni, 1.1.1): ADD by one, CHECK and DEL by the
// other, both ways, with the same kernel state after ADD and nothing left after DEL.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type CniCommand, cniCall, sandboxForFile } from '@cnikit/testing';
import { plugin } from './index.ts';

const GO = '/usr/lib/cni/ptp';
const env = sandboxForFile({ enterHost: true, containers: 2 });

// biome-ignore lint/suspicious/noExplicitAny: ip -json output
type J = any;

/** The container's and the host's view of one attachment, without names and MACs (random per ADD). */
function state(k: number, hostVeth: string): string[] {
  const c = env.sb.containers[k]!;
  const lines: string[] = [];
  for (const fam of ['-4', '-6']) {
    for (const r of JSON.parse(
      env.sb.exec('ip', ['-j', fam, 'route', 'show', 'dev', 'eth0'], { ns: c }).stdout,
    ) as J[])
      if (!String(r.dst).startsWith('fe80'))
        lines.push(`c ${r.dst} ${r.gateway ?? ''} ${r.scope} ${r.prefsrc ?? ''}`);
    for (const r of JSON.parse(
      env.sb.exec('ip', ['-j', fam, 'route', 'show', 'dev', hostVeth]).stdout,
    ) as J[])
      if (!String(r.dst).startsWith('fe80')) lines.push(`h ${r.dst} ${r.scope}`);
  }
  for (const [who, ns, dev] of [
    ['c', c, 'eth0'],
    ['h', 'host', hostVeth],
  ] as const) {
    const l = JSON.parse(env.sb.exec('ip', ['-j', '-d', 'addr', 'show', 'dev', dev], { ns }).stdout)[0];
    lines.push(`${who} link ${l.linkinfo?.info_kind} mtu ${l.mtu} ${l.flags.includes('UP') ? 'up' : 'down'}`);
    for (const a of l.addr_info) if (a.scope !== 'link') lines.push(`${who} addr ${a.local}/${a.prefixlen}`);
  }
  return lines.sort();
}

describe('interoperability with the Go reference ptp', () => {
  assert.ok(
    existsSync(GO),
    'Go reference plugins not installed in /usr/lib/cni (Debian containernetworking-plugins)',
  );
  const conf = (net: string) => ({
    cniVersion: '1.0.0',
    name: net,
    type: 'ptp',
    ipMasq: true,
    mtu: 1450,
    ipam: {
      type: 'host-local',
      ranges: [[{ subnet: '10.71.0.0/24' }], [{ subnet: 'fd71::/64' }]],
      dataDir: env.dir,
      routes: [{ dst: '0.0.0.0/0' }],
    },
  });
  const go = { binary: GO };
  const run = (who: 'Go' | 'ours', cmd: CniCommand, c: object, k: number, id: string) =>
    cniCall(who === 'Go' ? go : plugin, cmd, c, {
      path: '/usr/lib/cni',
      netns: env.sb.containers[k]!.path,
      containerId: id,
    });
  const reservations = (net: string) =>
    existsSync(join(env.dir, net)) ? readdirSync(join(env.dir, net)).filter((f) => /^\d|:/.test(f)) : [];

  let goState: string[] = [];
  for (const [adder, other] of [
    ['Go', 'ours'],
    ['ours', 'Go'],
  ] as const) {
    test(`ADD by ${adder}, CHECK and DEL by ${other}: same state, nothing left`, async () => {
      const net = `io${adder}`;
      const c = conf(net);
      const hostBefore = env.sb.snapshot('host', {
        sections: ['links', 'addresses', 'routes'],
      });
      const add = await run(adder, 'ADD', c, 0, `io-${adder}`);
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const res = add.json;
      assert.equal(res.interfaces.length, 2);
      assert.deepEqual(
        res.ips.map((i: J) => [i.address, i.gateway, i.interface]),
        [
          ['10.71.0.2/24', '10.71.0.1', 1],
          ['fd71::2/64', 'fd71::1', 1],
        ],
      );
      const st = state(0, res.interfaces[0].name);
      if (adder === 'Go') goState = st;
      else assert.deepEqual(st, goState, 'cnikit ADD leaves the same kernel state as the Go plugin');
      assert.match(env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout, /10\.71\.0\.2\/32/);

      const chk = await run(other, 'CHECK', { ...c, prevResult: res }, 0, `io-${adder}`);
      assert.equal(chk.code, 0, chk.stdout + chk.stderr);
      const del = await run(other, 'DEL', c, 0, `io-${adder}`);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      assert.deepEqual(reservations(net), []);
      assert.doesNotMatch(env.sb.exec('iptables', ['-t', 'nat', '-S']).stdout, /10\.71\.0\./);
      assert.deepEqual(env.sb.snapshot('host', { sections: ['links', 'addresses', 'routes'] }), hostBefore);
      assert.equal(
        JSON.parse(env.sb.exec('ip', ['-j', 'link'], { ns: env.sb.containers[0]! }).stdout).filter(
          (l: J) => l.ifname === 'eth0',
        ).length,
        0,
      );
    });
  }
});
