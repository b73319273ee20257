import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import {
  type CniCommand,
  type CniTarget,
  cniCall,
  deleteNamedNetns,
  eventually,
  sandboxForFile,
} from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';
import { hostLocal, run, snapshot, withoutBridge } from './testenv.ts';

const GO = '/usr/lib/cni/bridge';
const haveGo = existsSync(GO) && existsSync('/usr/lib/cni/host-local');

const env = sandboxForFile({ enterHost: true, containers: 4 });

async function call(target: CniTarget, cmd: CniCommand, conf: object, netns: string, id: string) {
  const r = await cniCall(target, cmd, conf, { netns, containerId: id });
  return { code: r.code, out: r.stdout + r.stderr };
}
const goCall = (cmd: CniCommand, conf: object, netns: string, id: string) =>
  call({ binary: GO }, cmd, conf, netns, id);
const ours = (cmd: CniCommand, conf: object, netns: string, id: string) => call(plugin, cmd, conf, netns, id);

// iptables-nft leaves empty built-in nat chains; compare links/addresses/routes and the CNI rules explicitly
const core = (s: string) =>
  JSON.stringify({ ...JSON.parse(withoutBridge(s)), nft: undefined, ipt4: undefined, ipt6: undefined });

describe('interoperability with the Go reference bridge (Debian 1.1.1)', () => {
  assert.ok(
    haveGo,
    'Go reference plugins not installed in /usr/lib/cni' +
      ' (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  const conf = () => ({
    cniVersion: '1.0.0',
    name: 'ionet',
    type: 'bridge',
    bridge: 'brio',
    isDefaultGateway: true,
    ipMasq: true,
    hairpinMode: true,
    ipam: hostLocal(env.dir, '10.40.0.0/24'),
  });
  const reservations = () => readdirSync(join(env.dir, 'ionet')).filter((f) => /^\d/.test(f));

  for (const [adder, deleter] of [
    ['Go', 'ours'],
    ['ours', 'Go'],
  ] as const) {
    test(`ADD by ${adder}, DEL by ${deleter}: no leftovers`, async () => {
      const cn = env.sb.newContainer();
      const c = cn.path;
      const before = snapshot();
      const beforeC = snapshot(cn.name);
      const add =
        adder === 'Go'
          ? await goCall('ADD', conf(), c, `io-${adder}`)
          : await ours('ADD', conf(), c, `io-${adder}`);
      assert.equal(add.code, 0, add.out);
      const res = JSON.parse(add.out);
      assert.equal(res.interfaces[0].name, 'brio');
      assert.match(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
      assert.equal(reservations().length, 1);
      const del =
        deleter === 'Go'
          ? await goCall('DEL', conf(), c, `io-${adder}`)
          : await ours('DEL', conf(), c, `io-${adder}`);
      assert.equal(del.code, 0, del.out);
      assert.equal(core(snapshot()), core(before));
      assert.equal(snapshot(cn.name), beforeC);
      assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
      assert.deepEqual(reservations(), []);
    });
  }

  test('both on the same bridge and store at once; cross DEL; CHECK of a Go attachment by ours', async () => {
    const [a, b] = [env.sb.newContainer(), env.sb.newContainer()];
    const ga = await goCall('ADD', conf(), a.path, 'io-a');
    const ob = await ours('ADD', conf(), b.path, 'io-b');
    assert.equal(ga.code, 0, ga.out);
    assert.equal(ob.code, 0, ob.out);
    const ipA = JSON.parse(ga.out).ips[0].address;
    const ipB = JSON.parse(ob.out).ips[0].address;
    assert.notEqual(ipA, ipB);
    assert.equal(JSON.parse(ga.out).interfaces[0].mac, nl.getLink('brio')?.mac);
    const chk = await cniCall(
      plugin,
      'CHECK',
      { ...conf(), prevResult: JSON.parse(ga.out) },
      { netns: a.path, containerId: 'io-a' },
    );
    assert.equal(chk.code, 0, chk.stdout);
    const goChk = await cniCall(
      { binary: GO },
      'CHECK',
      { ...conf(), prevResult: JSON.parse(ob.out) },
      {
        netns: b.path,
        containerId: 'io-b',
      },
    );
    assert.equal(goChk.code, 0, goChk.stdout);
    assert.equal((await ours('DEL', conf(), a.path, 'io-a')).code, 0);
    assert.equal((await goCall('DEL', conf(), b.path, 'io-b')).code, 0);
    assert.deepEqual(reservations(), []);
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
  });

  test('the Go bridge with cnikit host-local (dist-bin) as its IPAM, and back', async () => {
    const dist = distBin();
    assert.ok(
      existsSync(join(dist, 'host-local')),
      'dist-bin/host-local not built (npm test runs npm run build before the tests)',
    );
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = { ...conf(), name: 'iohl', bridge: 'brio2', ipam: hostLocal(env.dir, '10.41.0.0/24') };
    const go = (cmd: CniCommand) =>
      cniCall({ binary: GO }, cmd, cf, { netns: c, containerId: 'io-hl', path: dist });
    const add = await go('ADD');
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.equal(JSON.parse(add.stdout).ips[0].address, '10.41.0.2/24');
    assert.deepEqual(
      readdirSync(join(env.dir, 'iohl')).filter((f) => /^\d/.test(f)),
      ['10.41.0.2'],
    );
    // our bridge (delegating to the same cnikit host-local binary) removes it
    const del = await cniCall(plugin, 'DEL', cf, { netns: c, containerId: 'io-hl', path: dist });
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(
      readdirSync(join(env.dir, 'iohl')).filter((f) => /^\d/.test(f)),
      [],
    );
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
  });

  test('DEL after the namespace is gone removes the masquerade rules (the reference leaks them)', async () => {
    const cn = env.sb.newContainer();
    const add = await ours('ADD', conf(), cn.path, 'io-gone');
    assert.equal(add.code, 0, add.out);
    deleteNamedNetns(cn);
    const del = await ours('DEL', conf(), cn.path, 'io-gone');
    assert.equal(del.code, 0, del.out);
    assert.doesNotMatch(run('iptables', ['-t', 'nat', '-S']), /CNI-/);
    assert.deepEqual(reservations(), []);
    // and the host veth goes with the namespace (the kernel destroys it asynchronously)
    await eventually(
      () => nl.listLinks().filter((l) => l.masterIndex === nl.getLink('brio')?.index).length === 0,
      'the host veth of the deleted namespace is still a port of brio',
    );
  });
});
