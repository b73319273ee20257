import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniCall, deleteNamedNetns, eventually, sandboxForFile } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { plugin } from './index.ts';
import { hostLocal, run, tryRun } from './testenv.ts';

const DIST = distBin();
const haveDist = existsSync(join(DIST, 'host-local'));

const env = sandboxForFile({ enterHost: true, containers: 3 });

describe('STATUS / GC (spec 1.1.0, with cnikit host-local from dist-bin)', () => {
  assert.ok(
    haveDist,
    'dist-bin/host-local not built (npm run build)' + ' (npm test runs npm run build before the tests)',
  );
  const conf = (backend: string, extra: object = {}) => ({
    cniVersion: '1.1.0',
    name: `gcnet-${backend}`,
    type: 'bridge',
    bridge: `brgc${backend.slice(0, 3)}`,
    isGateway: true,
    ipMasq: true,
    ipMasqBackend: backend,
    ipam: hostLocal(env.dir, backend === 'iptables' ? '10.80.0.0/24' : '10.81.0.0/24'),
    ...extra,
  });
  const opts = { path: DIST };

  test('STATUS delegates to IPAM; L2 STATUS succeeds; missing IPAM fails', async () => {
    assert.equal((await cniCall(plugin, 'STATUS', conf('iptables'), opts)).code, 0);
    assert.equal(
      (await cniCall(plugin, 'STATUS', { cniVersion: '1.1.0', name: 'l2', type: 'bridge' }, opts)).code,
      0,
    );
    const r = await cniCall(plugin, 'STATUS', { ...conf('iptables'), ipam: { type: 'nope' } }, opts);
    assert.notEqual(r.code, 0);
    assert.match(JSON.parse(r.stdout).msg, /failed to find plugin "nope"/);
  });

  for (const backend of ['iptables', 'nftables']) {
    test(`GC (${backend}): IPAM GC and masquerade rules of invalid attachments removed, valid ones kept`, async () => {
      const cf = conf(backend);
      const ids = ['gc-keep', 'gc-drop'];
      const ips: string[] = [];
      for (const [k, id] of ids.entries()) {
        const r = await cniCall(plugin, 'ADD', cf, {
          ...opts,
          netns: env.sb.containers[k]!.path,
          containerId: id,
        });
        assert.equal(r.code, 0, r.stdout);
        ips.push(JSON.parse(r.stdout).ips[0].address.split('/')[0]);
      }
      const rules = () =>
        backend === 'iptables'
          ? run('iptables', ['-t', 'nat', '-S'])
          : run('nft', ['list', 'table', 'inet', 'cni_plugins_masquerade']);
      assert.match(rules(), new RegExp(ips[1]!.replaceAll('.', '\\.')));
      const g = await cniCall(
        plugin,
        'GC',
        { ...cf, 'cni.dev/valid-attachments': [{ containerID: 'gc-keep', ifname: 'eth0' }] },
        opts,
      );
      assert.equal(g.code, 0, g.stdout + g.stderr);
      assert.doesNotMatch(rules(), new RegExp(`${ips[1]!.replaceAll('.', '\\.')}\\b`));
      assert.match(rules(), new RegExp(ips[0]!.replaceAll('.', '\\.')));
      const files = readdirSync(join(env.dir, cf.name)).filter((f) => /^\d/.test(f));
      assert.deepEqual(files, [ips[0]]);
      for (const [k, id] of ids.entries()) {
        const d = await cniCall(plugin, 'DEL', cf, {
          ...opts,
          netns: env.sb.containers[k]!.path,
          containerId: id,
        });
        assert.equal(d.code, 0, d.stdout);
      }
      assert.doesNotMatch(rules(), /10\.8[01]\./);
    });
  }

  test('GC removes stale spoof-check rules (interface gone, attachment not valid), keeps valid ones', async () => {
    const cf = {
      ...conf('nftables'),
      name: 'gcspoof',
      bridge: 'brgcsp',
      ipMasq: false,
      macspoofchk: true,
      ipam: hostLocal(env.dir, '10.83.0.0/24'),
    };
    const a = env.sb.newContainer();
    const b = env.sb.newContainer();
    assert.equal(
      (await cniCall(plugin, 'ADD', cf, { ...opts, netns: a.path, containerId: 'sp-keep' })).code,
      0,
    );
    const gone = await cniCall(plugin, 'ADD', cf, { ...opts, netns: b.path, containerId: 'sp-gone' });
    assert.equal(gone.code, 0, gone.stdout);
    const goneVeth: string = JSON.parse(gone.stdout).interfaces[1].name;
    deleteNamedNetns(b); // the runtime lost it: no DEL
    // the kernel destroys the namespace (and with it the host-side veth) asynchronously
    await eventually(
      () => tryRun('ip', ['link', 'show', 'dev', goneVeth]).status !== 0,
      `${goneVeth} still exists`,
    );
    const g = await cniCall(
      plugin,
      'GC',
      { ...cf, 'cni.dev/valid-attachments': [{ containerID: 'sp-keep', ifname: 'eth0' }] },
      opts,
    );
    assert.equal(g.code, 0, g.stdout);
    const table = run('nft', ['list', 'table', 'bridge', 'nat']);
    assert.match(table, /cni-br-iface-sp-keep-eth0/);
    assert.doesNotMatch(table, /sp-gone/);
    assert.equal(
      (await cniCall(plugin, 'DEL', cf, { ...opts, netns: a.path, containerId: 'sp-keep' })).code,
      0,
    );
    assert.doesNotMatch(run('nft', ['list', 'table', 'bridge', 'nat']), /cni-br-iface-/);
  });

  test('1.1.0 dual-stack ADD/CHECK/DEL with cnikit host-local', async () => {
    const cn = env.sb.newContainer();
    const c = cn.path;
    const cf = {
      cniVersion: '1.1.0',
      name: 'v11',
      type: 'bridge',
      bridge: 'brv11',
      isDefaultGateway: true,
      ipam: hostLocal(env.dir, [['10.84.0.0/24'], ['fd84::/64']]),
    };
    const r = await cniCall(plugin, 'ADD', cf, { ...opts, netns: c, containerId: 'v11' });
    assert.equal(r.code, 0, r.stdout);
    const res = JSON.parse(r.stdout);
    assert.equal(res.cniVersion, '1.1.0');
    assert.deepEqual(
      res.ips.map((i: { address: string }) => i.address),
      ['10.84.0.2/24', 'fd84::2/64'],
    );
    const chk = await cniCall(
      plugin,
      'CHECK',
      { ...cf, prevResult: res },
      { ...opts, netns: c, containerId: 'v11' },
    );
    assert.equal(chk.code, 0, chk.stdout);
    assert.equal((await cniCall(plugin, 'DEL', cf, { ...opts, netns: c, containerId: 'v11' })).code, 0);
    assert.deepEqual(
      readdirSync(join(env.dir, 'v11')).filter((f) => /^\d|:/.test(f)),
      [],
    );
  });

  test('DNS from netconf replaces IPAM DNS; CHECK without prevResult fails', async () => {
    const cf = {
      ...conf('iptables'),
      cniVersion: '1.0.0',
      name: 'dnsnet',
      bridge: 'brdns',
      ipMasq: false,
      ipam: hostLocal(env.dir, '10.82.0.0/24'),
    };
    const c = env.sb.containers[2]!.path;
    const r = await cniCall(plugin, 'ADD', cf, { ...opts, netns: c, containerId: 'dns' });
    assert.equal(r.code, 0, r.stdout);
    // the reference prints "dns": {} for 1.0.0; printing is the SDK's job (it omits an empty dns object)
    assert.ok([undefined, '{}'].includes(JSON.stringify(JSON.parse(r.stdout).dns)));
    const withDns = { ...cf, dns: { nameservers: ['192.0.2.53'], search: ['example.org'] } };
    const chk = await cniCall(plugin, 'CHECK', cf, { ...opts, netns: c, containerId: 'dns' });
    assert.notEqual(chk.code, 0);
    assert.match(JSON.parse(chk.stdout).msg, /prevResult/);
    assert.equal((await cniCall(plugin, 'DEL', cf, { ...opts, netns: c, containerId: 'dns' })).code, 0);
    const r2 = await cniCall(plugin, 'ADD', withDns, { ...opts, netns: c, containerId: 'dns' });
    assert.deepEqual(JSON.parse(r2.stdout).dns, { nameservers: ['192.0.2.53'], search: ['example.org'] });
    assert.equal((await cniCall(plugin, 'DEL', withDns, { ...opts, netns: c, containerId: 'dns' })).code, 0);
  });
});
