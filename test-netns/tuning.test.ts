/**
 * tuning through the compiled executable: the sysctl allow-list (a file that exists only inside a private mount
 * namespace of the test: an overlay on /etc, so the machine's /etc is never written), and a kubelet-style chain
 * bridge + host-local → tuning run like a runtime (prevResult, CHECK, DEL in reverse order).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ConfList, Runtime } from '@cnikit/libcni';
import {
  type CniOutcome,
  cniEnv,
  createSandbox,
  expectCniError,
  expectOk,
  withSandbox,
} from '@cnikit/testing';
import { DIST, ensureBuilt } from './dist.ts';

const info = ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-tuning-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * Run dist-bin/tuning with `allowlist` as /etc/cni/tuning/allowlist.conf: `unshare -m` gives the child a private
 * mount namespace, where /etc is an overlay whose upper layer lives in the scratch directory.
 */
function tuningWithAllowlist(allowlist: string, conf: object, env: Record<string, string>): CniOutcome {
  const dir = mkdtempSync(join(scratch, 'ovl-'));
  mkdirSync(join(dir, 'up'));
  mkdirSync(join(dir, 'work'));
  const script = [
    'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/up,workdir=$1/work" /etc',
    'mkdir -p /etc/cni/tuning',
    'printf %s "$2" > /etc/cni/tuning/allowlist.conf',
    'exec "$3"',
  ].join(' && ');
  const r = spawnSync(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      script,
      'sh',
      dir,
      allowlist,
      join(DIST, 'tuning'),
    ],
    { input: JSON.stringify(conf), encoding: 'utf8', env: { PATH: process.env.PATH, ...env } },
  );
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr, json };
}

describe('tuning sysctl allow-list (compiled binary, private mount namespace)', () => {
  assert.ok(info.plugins.includes('tuning'), 'tuning not built (npm test runs npm run build first)');
  assert.ok(
    !existsSync('/etc/cni/tuning/allowlist.conf'),
    'this machine has its own allow-list; the test would not be private',
  );

  test('a key matching an expression is applied; one matching none is refused before any change', async () => {
    await withSandbox((sb) => {
      sb.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0'], { ns: 'container' });
      const env = cniEnv('ADD', { netns: sb.container.path, containerId: 'al', ifName: 'eth0', path: DIST });
      const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: sb.container.path }] };
      const conf = (sysctl: Record<string, string>) => ({
        cniVersion: '1.0.0',
        name: 'al',
        type: 'tuning',
        dataDir: join(scratch, 'al'),
        sysctl,
        prevResult,
      });
      const allow = '^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$\n  \n^net\\.core\\.somaxconn$\n';
      expectOk(tuningWithAllowlist(allow, conf({ 'net.ipv4.conf.IFNAME.arp_filter': '1' }), env));
      const read = (p: string) => sb.exec('cat', [`/proc/sys/${p}`], { ns: 'container' }).stdout.trim();
      assert.equal(read('net/ipv4/conf/eth0/arp_filter'), '1');
      const before = read('net/ipv4/conf/all/arp_filter');
      const r = tuningWithAllowlist(
        allow,
        conf({ 'net.ipv4.conf.IFNAME.arp_ignore': '1', 'net.ipv4.conf.all.arp_filter': '1' }),
        env,
      );
      expectCniError(
        r,
        999,
        'Sysctl net.ipv4.conf.all.arp_filter is not allowed. Only the following sysctls are allowed: [^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$ ^net\\.core\\.somaxconn$]',
      );
      assert.equal(read('net/ipv4/conf/eth0/arp_ignore'), '0', 'nothing applied');
      assert.equal(read('net/ipv4/conf/all/arp_filter'), before);
      // an expression RE2 rejects fails the ADD the way the reference does
      expectCniError(
        tuningWithAllowlist('(a\n', conf({ 'net.core.somaxconn': '1' }), env),
        999,
        /error parsing regexp: missing closing \)/,
      );
      assert.ok(!existsSync('/etc/cni/tuning'), "the machine's /etc was not written");
    });
  });
});

describe('bridge + host-local → tuning, as a runtime runs the chain', () => {
  test('ADD applies sysctl/MTU/MAC on the bridge veth, CHECK passes, DEL in reverse leaves nothing', () => {
    const sb = createSandbox();
    try {
      const rt = new Runtime({ path: [DIST], cacheDir: join(scratch, 'cache'), hostNetns: sb.host.name });
      const dataDir = join(scratch, 'tuning-data');
      const list: ConfList = {
        cniVersion: '1.0.0',
        name: 'tchain',
        plugins: [
          {
            type: 'bridge',
            bridge: 'cnitun0',
            isGateway: true,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: '10.78.1.0/24' }]],
              dataDir: join(scratch, 'ipam'),
            },
          },
          {
            type: 'tuning',
            dataDir,
            mtu: 1400,
            mac: 'c2:00:00:00:aa:01',
            promisc: true,
            sysctl: { 'net.ipv4.conf.IFNAME.arp_ignore': '2', 'net.core.somaxconn': '500' },
          },
        ],
      };
      const att = { containerId: 'tchain1', netns: sb.container.path, ifName: 'eth0' };
      const before = sb.snapshot('host');
      const result = rt.addNetworkList(list, att);
      const eth0 = (
        JSON.parse(sb.exec('ip', ['-j', 'link', 'show', 'eth0'], { ns: 'container' }).stdout) as Array<{
          mtu: number;
          address: string;
          flags: string[];
        }>
      )[0];
      assert.equal(eth0?.mtu, 1400);
      assert.equal(eth0?.address, 'c2:00:00:00:aa:01');
      assert.ok(eth0?.flags.includes('PROMISC'), "eth0?.flags.includes('PROMISC')");
      const read = (p: string) => sb.exec('cat', [`/proc/sys/${p}`], { ns: 'container' }).stdout.trim();
      assert.equal(read('net/ipv4/conf/eth0/arp_ignore'), '2');
      assert.equal(read('net/core/somaxconn'), '500');
      const iface = (result.interfaces as Array<{ name: string; mac: string; sandbox?: string }>).find(
        (i) => i.name === 'eth0' && i.sandbox,
      );
      assert.equal(iface?.mac, 'c2:00:00:00:aa:01', 'the result carries the new MAC');
      assert.deepEqual(readdirSync(dataDir), ['tchain1_eth0.json', 'tchain1_eth0.json.network']);
      rt.checkNetworkList(list, att);
      rt.delNetworkList(list, att);
      assert.deepEqual(readdirSync(dataDir), [], 'backup removed by DEL');
      const after = sb.snapshot('host');
      const links = (s: typeof before) =>
        s.links.filter((l) => !l.includes('cnitun0')).map((l) => l.replace(/"[a-z_]*_timer":[0-9.]+,?/g, ''));
      assert.deepEqual(links(after), links(before), 'only the bridge (kept like the reference) remains');
    } finally {
      sb.destroy();
    }
  });
});
