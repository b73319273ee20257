import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import { type CniCommand, cniCall, sandboxForFile } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { hostLocal, run } from './testenv.ts';

// The compiled multicall binary, as a runtime runs it: exec with env + stdin, from the host namespace,
// IPAM resolved through CNI_PATH to the same executable (host-local is a hard link: delegated in-process).
const DIST = distBin();
const BIN = join(DIST, 'bridge');
const have = existsSync(BIN) && existsSync(join(DIST, 'host-local'));

const env = sandboxForFile({ enterHost: true, containers: 8 });

async function exec(cmd: CniCommand, conf: object, netns: string, id: string) {
  const r = await cniCall({ binary: BIN }, cmd, conf, { netns, containerId: id, path: DIST });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

describe('compiled binary (dist-bin/bridge)', () => {
  assert.ok(have, 'dist-bin not built (npm run build)' + ' (npm test runs npm run build before the tests)');
  test('1.1.0 ADD/CHECK/DEL with nftables masquerade and spoof check', async () => {
    const conf = {
      cniVersion: '1.1.0',
      name: 'binnet',
      type: 'bridge',
      bridge: 'brbin',
      isDefaultGateway: true,
      ipMasq: true,
      ipMasqBackend: 'nftables',
      macspoofchk: true,
      ipam: hostLocal(env.dir, '10.85.0.0/24'),
    };
    const c = env.sb.containers[0]!.path;
    const add = await exec('ADD', conf, c, 'bin1');
    assert.equal(add.code, 0, add.out + add.err);
    const res = JSON.parse(add.out);
    assert.equal(res.ips[0].address, '10.85.0.2/24');
    assert.match(run('nft', ['list', 'table', 'inet', 'cni_plugins_masquerade']), /ip saddr 10\.85\.0\.2/);
    const chk = await exec('CHECK', { ...conf, prevResult: res }, c, 'bin1');
    assert.equal(chk.code, 0, chk.out);
    const del = await exec('DEL', conf, c, 'bin1');
    assert.equal(del.code, 0, del.out);
    assert.doesNotMatch(run('nft', ['list', 'ruleset']), /10\.85\.0\.2|cni-br-iface-bin1/);
    assert.deepEqual(
      readdirSync(join(env.dir, 'binnet')).filter((f) => /^\d/.test(f)),
      [],
    );
    const err = await exec('ADD', { ...conf, vlan: 9999 }, c, 'bin2');
    assert.equal(err.code, 1);
    assert.deepEqual(JSON.parse(err.out), {
      code: 7,
      msg: 'invalid VLAN ID 9999 (must be between 0 and 4094)',
    });
  });

  test('7 concurrent ADDs of the binary on a new bridge all succeed, then 7 concurrent DELs', async () => {
    const conf = {
      cniVersion: '1.0.0',
      name: 'binpar',
      type: 'bridge',
      bridge: 'brpar',
      isGateway: true,
      ipam: hostLocal(env.dir, '10.86.0.0/24'),
    };
    const runAll = (cmd: CniCommand) =>
      Promise.all(
        env.sb.containers.slice(1).map(async (ns, i) => {
          const r = await cniCall({ binary: BIN }, cmd, conf, {
            netns: ns.path,
            containerId: `par${i}`,
            path: DIST,
          });
          return { code: r.code, out: r.stdout };
        }),
      );
    const adds = await runAll('ADD');
    for (const a of adds) assert.equal(a.code, 0, a.out);
    assert.equal(new Set(adds.map((a) => JSON.parse(a.out).ips[0].address)).size, adds.length);
    assert.deepEqual(
      nl.listAddrs({ link: 'brpar', family: 4 }).map((a) => a.cidr),
      ['10.86.0.1/24'],
    );
    const dels = await runAll('DEL');
    for (const d of dels) assert.equal(d.code, 0, d.out);
    assert.deepEqual(
      readdirSync(join(env.dir, 'binpar')).filter((f) => /^\d/.test(f)),
      [],
    );
    assert.equal(nl.listLinks().filter((l) => l.masterIndex === nl.getLink('brpar')?.index).length, 0);
  });
});
