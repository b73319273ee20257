/**
 * tuning through the compiled executable: the sysctl allow-list (a file that exists only inside a private mount
 * namespace of the test: an overlay on /etc, so the machine's /etc is never written), and a kubelet-style chain
 * bridge + host-local → tuning run like a runtime (prevResult, CHECK, DEL in reverse order).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import {
  type CniCallOptions,
  type CniOutcome,
  cniCall,
  expectCniError,
  expectOk,
  tempDir,
  withSandbox,
} from '@cnikit/testing';
import { DIST, ensureBuilt, runtime } from './dist.ts';

const info = ensureBuilt();
const scratch = tempDir('bb-tuning');
after(() => scratch.remove());

/**
 * Run dist-bin/tuning with `allowlist` as /etc/cni/tuning/allowlist.conf: `unshare -m` gives the child a private
 * mount namespace, where /etc is an overlay whose upper layer is a tmpfs mounted on a scratch directory.
 */
function tuningWithAllowlist(allowlist: string, conf: object, o: CniCallOptions): Promise<CniOutcome> {
  const dir = mkdtempSync(join(scratch.path, 'ovl-'));
  const script = [
    // the upper layer on a tmpfs of its own: an overlay cannot be the upper layer of another one (the kernel lab's
    // root, and so its /tmp, is an overlay)
    'mount -t tmpfs tmpfs "$1"',
    'mkdir "$1/up" "$1/work"',
    'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/up,workdir=$1/work" /etc',
    'mkdir -p /etc/cni/tuning',
    'printf %s "$2" > /etc/cni/tuning/allowlist.conf',
    'exec "$3"',
  ].join(' && ');
  const args = ['--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'sh', dir, allowlist];
  return cniCall({ binary: 'unshare', args: [...args, join(DIST, 'tuning')] }, 'ADD', conf, o);
}

describe('tuning sysctl allow-list (compiled binary, private mount namespace)', () => {
  assert.ok(info.plugins.includes('tuning'), 'tuning not built (npm test runs npm run build first)');
  assert.ok(
    !existsSync('/etc/cni/tuning/allowlist.conf'),
    'this machine has its own allow-list; the test would not be private',
  );

  test('a key matching an expression is applied; one matching none is refused before any change', async () => {
    await withSandbox(async (sb) => {
      sb.exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0'], { ns: 'container' });
      const o = { netns: sb.container.path, containerId: 'al', ifName: 'eth0', path: DIST };
      const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: sb.container.path }] };
      const conf = (sysctl: Record<string, string>) => ({
        cniVersion: '1.0.0',
        name: 'al',
        type: 'tuning',
        dataDir: join(scratch.path, 'al'),
        sysctl,
        prevResult,
      });
      const allow = '^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$\n  \n^net\\.core\\.somaxconn$\n';
      expectOk(await tuningWithAllowlist(allow, conf({ 'net.ipv4.conf.IFNAME.arp_filter': '1' }), o));
      const read = (p: string) => sb.exec('cat', [`/proc/sys/${p}`], { ns: 'container' }).stdout.trim();
      assert.equal(read('net/ipv4/conf/eth0/arp_filter'), '1');
      const before = read('net/ipv4/conf/all/arp_filter');
      const r = await tuningWithAllowlist(
        allow,
        conf({ 'net.ipv4.conf.IFNAME.arp_ignore': '1', 'net.ipv4.conf.all.arp_filter': '1' }),
        o,
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
        await tuningWithAllowlist('(a\n', conf({ 'net.core.somaxconn': '1' }), o),
        999,
        /error parsing regexp: missing closing \)/,
      );
      assert.ok(!existsSync('/etc/cni/tuning'), "the machine's /etc was not written");
    });
  });
});

describe('bridge + host-local → tuning, as a runtime runs the chain', () => {
  test('ADD applies sysctl/MTU/MAC on the bridge veth, CHECK passes, DEL in reverse leaves nothing', async () => {
    // plugins run as processes from this thread, moved into the sandbox's host namespace (like on a node)
    await withSandbox(
      async (sb) => {
        const rt = runtime(join(scratch.path, 'cache'));
        const dataDir = join(scratch.path, 'tuning-data');
        const list = confListFromObject({
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
                dataDir: join(scratch.path, 'ipam'),
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
        });
        const att = { containerId: 'tchain1', netns: sb.container.path, ifName: 'eth0' };
        const before = sb.snapshot('host');
        const result = await rt.addNetworkList(list, att);
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
        const iface = (result.interfaces ?? []).find((i) => i.name === 'eth0' && i.sandbox);
        assert.equal(iface?.mac, 'c2:00:00:00:aa:01', 'the result carries the new MAC');
        assert.deepEqual(readdirSync(dataDir), ['tchain1_eth0.json', 'tchain1_eth0.json.network']);
        await rt.checkNetworkList(list, att);
        await rt.delNetworkList(list, att);
        assert.deepEqual(readdirSync(dataDir), [], 'backup removed by DEL');
        const after = sb.snapshot('host');
        const links = (s: typeof before) =>
          s.links
            .filter((l) => !l.includes('cnitun0'))
            .map((l) => l.replace(/"[a-z_]*_timer":[0-9.]+,?/g, ''));
        assert.deepEqual(links(after), links(before), 'only the bridge (kept like the reference) remains');
      },
      { enterHost: true },
    );
  });
});
