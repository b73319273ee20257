/**
 * @cnikit/libcni's CniConfig on real chains (bridge + host-local → tuning → portmap, spec 1.1.0) inside a private
 * "host" namespace that this process's main thread enters: every operation through the compiled executables (exec)
 * and with the plugin objects in this process (in-process), with the same results and errors; cache interop with
 * the Go reference plugins (/usr/lib/cni): an entry written by a cnikit ADD is used by a DEL through the Go plugins
 * and the other way round.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  CniConfig,
  confListFromObject,
  type NetworkConfigList,
  PluginError,
  type RuntimeConf,
} from '@cnikit/libcni';
import { plugin as bridge } from '@cnikit/plugin-bridge';
import { plugin as hostLocal } from '@cnikit/plugin-host-local';
import { plugin as portmap } from '@cnikit/plugin-portmap';
import { plugin as tuning } from '@cnikit/plugin-tuning';
import { createNamedNetns, deleteNamedNetns, sandboxForFile } from '@cnikit/testing';
import { DIST, ensureBuilt, GO_CNI, goAvailable } from './dist.ts';

ensureBuilt();
// this file's main thread enters the sandbox's host namespace: exec'd plugins inherit it, in-process ones run there
const env = sandboxForFile({ enterHost: true });

function chain(name: string, subnet: string, cniVersion = '1.1.0'): NetworkConfigList {
  return confListFromObject({
    cniVersion,
    name,
    plugins: [
      {
        type: 'bridge',
        bridge: `br-${name}`.slice(0, 15),
        isGateway: true,
        ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: join(env.dir, 'ipam') },
      },
      {
        type: 'tuning',
        dataDir: join(env.dir, 'tuning'),
        sysctl: { 'net.ipv4.conf.IFNAME.arp_ignore': '1' },
      },
      { type: 'portmap', backend: 'iptables', capabilities: { portMappings: true } },
    ],
  });
}

/** `ip -j addr` of a named namespace (default: this thread's namespace, the sandbox host). */
function addrs(
  netns?: string,
): Array<{ ifname: string; addr_info: Array<{ local: string; prefixlen: number }> }> {
  const args = netns ? ['-n', netns, '-j', 'addr'] : ['-j', 'addr'];
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

function natRules(): string {
  const r = spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

const modes = [
  {
    mode: 'exec' as const,
    make: (cacheDir: string) => new CniConfig({ path: [DIST], cacheDir, inProcess: false }),
  },
  {
    mode: 'in-process' as const,
    make: (cacheDir: string) =>
      new CniConfig({ path: [DIST], cacheDir, plugins: [bridge, hostLocal, tuning, portmap] }),
  },
];

describe('CniConfig on a bridge + host-local → tuning → portmap chain', () => {
  const errors: Record<string, unknown[]> = { exec: [], 'in-process': [] };
  for (const [i, { mode, make }] of modes.entries()) {
    test(`${mode}: ADD, cache, CHECK, STATUS, VERSION, validate, GC of a stale attachment, DEL`, async () => {
      const cacheDir = join(env.dir, `cache-${mode}`);
      const cni = make(cacheDir);
      for (const t of ['bridge', 'host-local', 'tuning', 'portmap']) assert.equal(cni.runMode(t), mode, t);
      const list = chain(`lc${i}`, `10.91.${i}.0/24`);
      const second = createNamedNetns(`cnikit-lc${i}`);
      try {
        const rt: RuntimeConf = {
          containerId: `ctr-${mode}`,
          netns: env.sb.container.path,
          ifName: 'eth0',
          args: [['IgnoreUnknown', '1']],
          capabilityArgs: {
            portMappings: [{ hostPort: 18080 + i, containerPort: 80, protocol: 'tcp' }],
            bandwidth: {},
          },
        };
        const result = await cni.addNetworkList(list, rt);
        assert.equal(result.cniVersion, '1.1.0');
        const ip = result.ips?.[0]?.address;
        assert.match(ip ?? '', new RegExp(`^10\\.91\\.${i}\\.\\d+/24$`));
        const eth0 = addrs(env.sb.container.name).find((l) => l.ifname === 'eth0');
        assert.equal(
          `${eth0?.addr_info.find((a) => a.local.includes('.'))?.local}/24`,
          ip,
          'container address',
        );
        assert.match(
          natRules(),
          new RegExp(`--dport ${18080 + i} .*-j DNAT --to-destination ${ip?.split('/')[0]}:80`),
        );
        // tuning ran on the container interface
        const sysctl = spawnSync(
          'ip',
          ['netns', 'exec', env.sb.container.name, 'cat', '/proc/sys/net/ipv4/conf/eth0/arp_ignore'],
          {
            encoding: 'utf8',
          },
        );
        assert.equal(sysctl.stdout.trim(), '1');

        const entry = JSON.parse(
          readFileSync(join(cacheDir, 'results', `${list.name}-${rt.containerId}-eth0`), 'utf8'),
        );
        assert.deepEqual(Object.keys(entry), [
          'kind',
          'containerId',
          'config',
          'ifName',
          'networkName',
          'netns',
          'cniArgs',
          'capabilityArgs',
          'result',
        ]);
        assert.equal(Buffer.from(entry.config, 'base64').toString(), new TextDecoder().decode(list.bytes));
        assert.deepEqual(await cni.getNetworkListCachedResult(list, rt), result);
        assert.deepEqual(
          (await cni.getCachedAttachments(rt.containerId)).map((a) => [a.network, a.ifName, a.netns]),
          [[list.name, 'eth0', env.sb.container.path]],
        );

        await cni.checkNetworkList(list, rt);
        await cni.getStatusNetworkList(list);
        assert.ok((await cni.getVersionInfo('bridge')).supportedVersions.includes('1.1.0'));
        assert.deepEqual(await cni.validateNetworkList(list), ['portMappings']);

        // CHECK notices a removed address, with the same error either way
        spawnSync('ip', ['-n', env.sb.container.name, 'addr', 'flush', 'dev', 'eth0']);
        const err = await cni.checkNetworkList(list, rt).catch((e) => e);
        assert.ok(PluginError.is(err), String(err));
        // (each mode has its own subnet)
        errors[mode]?.push({
          code: err.code,
          msg: err.msg.replace(/10\.91\.\d+\./, '10.91.x.'),
          plugin: err.plugin,
          command: err.command,
        });
        assert.match(err.msg, /^Failed to match addr /);

        // a second attachment whose namespace disappears; GC with the first one valid deletes it
        const rt2: RuntimeConf = { containerId: `stale-${mode}`, netns: second.path, ifName: 'eth0' };
        await cni.addNetworkList(list, rt2);
        const hostVeths = () => addrs().filter((l) => l.ifname.startsWith('veth')).length;
        assert.equal(hostVeths(), 2);
        deleteNamedNetns(second);
        await cni.gcNetworkList(list, {
          validAttachments: [{ containerID: rt.containerId, ifname: 'eth0' }],
        });
        assert.ok(
          !existsSync(join(cacheDir, 'results', `${list.name}-${rt2.containerId}-eth0`)),
          'stale entry gone',
        );
        assert.ok(
          existsSync(join(cacheDir, 'results', `${list.name}-${rt.containerId}-eth0`)),
          'valid entry kept',
        );
        const reserved = readdirSync(join(env.dir, 'ipam', list.name)).filter((f) => /^10\./.test(f));
        assert.equal(reserved.length, 1, `only the valid attachment keeps its address: ${reserved}`);

        await cni.delNetworkList(list, rt);
        assert.equal(
          addrs(env.sb.container.name).find((l) => l.ifname === 'eth0'),
          undefined,
          'container eth0 gone',
        );
        assert.ok(
          !existsSync(join(cacheDir, 'results', `${list.name}-${rt.containerId}-eth0`)),
          'cache entry gone',
        );
        assert.doesNotMatch(natRules(), new RegExp(`--dport ${18080 + i} `), 'port mapping gone');
        assert.equal(readdirSync(join(env.dir, 'ipam', list.name)).filter((f) => /^10\./.test(f)).length, 0);
        await cni.delNetworkList(list, rt); // idempotent
      } finally {
        deleteNamedNetns(second);
        await cni
          .delNetworkList(list, { containerId: `ctr-${mode}`, netns: env.sb.container.path, ifName: 'eth0' })
          .catch(() => undefined);
      }
    });
  }
  test("errors are the same in-process and exec'd (CHECK after the address was removed; a bad config)", async () => {
    assert.equal(errors.exec?.length, 1);
    assert.deepEqual(errors['in-process'], errors.exec);
    const bad = confListFromObject({
      cniVersion: '1.1.0',
      name: 'bad',
      plugins: [{ type: 'bridge', mtu: 'x', ipam: {} }],
    });
    const rt: RuntimeConf = { containerId: 'c-bad', netns: env.sb.container.path, ifName: 'eth9' };
    const seen = [];
    for (const { make } of modes) {
      const e = await make(join(env.dir, 'cache-bad'))
        .addNetworkList(bad, rt)
        .catch((x) => x);
      assert.ok(PluginError.is(e), String(e));
      assert.match(e.message, /^plugin type="bridge" failed \(add\): /);
      seen.push(e.toJSON());
    }
    assert.deepEqual(seen[0], seen[1]);
    assert.equal((seen[0] as { code: number }).code, 7);
  });
});

describe('cache interop with the Go reference plugins', () => {
  // a missing prerequisite is a failure that says what to install, never a skip
  assert.ok(
    goAvailable('bridge'),
    `no Go plugins in ${GO_CNI} (Debian package containernetworking-plugins; .ci/run installs it)`,
  );
  // Debian's Go plugins speak up to 1.0.0: a 1.0.0 list, host-local store shared by both implementations
  const list = (name: string) =>
    confListFromObject({
      cniVersion: '1.0.0',
      name,
      plugins: [
        {
          type: 'bridge',
          bridge: `br-${name}`,
          isGateway: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.92.0.0/24' }]],
            dataDir: join(env.dir, 'ipam-go'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    });
  const cacheDir = join(env.dir, 'cache-interop');
  const ours = () => new CniConfig({ path: [DIST], cacheDir, plugins: [bridge, hostLocal, portmap] });
  const go = () => new CniConfig({ path: [GO_CNI], cacheDir, inProcess: false });

  for (const [adder, deleter, tag] of [
    [ours, go, 'cnikit ADD → Go DEL'],
    [go, ours, 'Go ADD → cnikit DEL'],
  ] as const) {
    test(tag, async () => {
      const l = list(tag.startsWith('cnikit') ? 'iop1' : 'iop2');
      const rt: RuntimeConf = {
        containerId: `iop-${l.name}`,
        netns: env.sb.container.path,
        ifName: 'net1',
        capabilityArgs: { portMappings: [{ hostPort: 19090, containerPort: 90, protocol: 'tcp' }] },
      };
      const result = await adder().addNetworkList(l, rt);
      const file = join(cacheDir, 'results', `${l.name}-${rt.containerId}-net1`);
      const entry = JSON.parse(readFileSync(file, 'utf8'));
      assert.equal(entry.kind, 'cniCacheV1');
      assert.equal(entry.result.cniVersion, '1.0.0');
      assert.deepEqual(
        await deleter().getNetworkListCachedResult(l, rt),
        result,
        'the other side reads the entry',
      );
      assert.ok(addrs(env.sb.container.name).some((x) => x.ifname === 'net1'));
      assert.match(natRules(), /--dport 19090 /);
      try {
        await deleter().delNetworkList(l, rt);
      } finally {
        await adder()
          .delNetworkList(l, rt)
          .catch(() => undefined);
      }
      assert.ok(
        !addrs(env.sb.container.name).some((x) => x.ifname === 'net1'),
        'interface removed by the other side',
      );
      assert.doesNotMatch(
        natRules(),
        /--dport 19090 /,
        'mapping removed (portmap DEL used the cached prevResult)',
      );
      assert.equal(readdirSync(join(env.dir, 'ipam-go', l.name)).filter((f) => /^10\./.test(f)).length, 0);
      assert.ok(!existsSync(file), 'cache entry removed');
    });
  }
});
