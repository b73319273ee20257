/**
 * Hardening found by probing the binaries from outside (issue "Hardening"), checked through the compiled executables:
 * - a configuration whose IPAM delegation leads back to the plugin itself (`"ipam": {"type": "bridge"}` in a bridge
 *   config) recursed in-process until memory ran out; it must end at once with a configuration error and leave no
 *   interface behind;
 * - a failed bridge + host-local ADD must change nothing, last_reserved_ip included;
 * - every plugin with an IPAM section raises the IPAM's configuration errors (and a main plugin named as IPAM)
 *   before its first change, and its DEL of a container never added creates no IPAM state;
 * - container IDs: ADD refuses more than 128 bytes (every plugin), and 128 bytes work end to end;
 * - an ADD whose result cannot be written (stdout closed, or a pipe without reader) fails and is rolled back.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { confListFromObject } from '@cnikit/libcni';
import { cniEnv, cniRunner, expectCniError, expectOk, scaled, tempDir, withSandbox } from '@cnikit/testing';
import { DIST, ensureBuilt, ensureLinks, runtime } from './dist.ts';

const info = ensureBuilt();

describe('delegation cycles through the compiled executable', () => {
  test('bridge delegating its IPAM to bridge: code 7 within seconds, no veth left', async () => {
    await withSandbox(
      async (sb) => {
        const cni = cniRunner(
          { binary: join(DIST, 'bridge') },
          { netns: sb.container.path, path: DIST, containerId: 'cyc', timeoutMs: 20_000 },
        );
        const before = sb.snapshot('host').links;
        const t0 = Date.now();
        const r = await cni.add({
          cniVersion: '1.0.0',
          name: 'cyc',
          type: 'bridge',
          bridge: 'cnicyc0',
          ipam: { type: 'bridge' },
        });
        expectCniError(
          r,
          7,
          /delegation cycle: plugin "bridge" is reached again through its own delegation \(bridge → bridge\)/,
        );
        assert.ok(Date.now() - t0 < scaled(10_000), `answered in ${Date.now() - t0} ms`);
        // the cycle is found before the first change: not even the bridge is created
        assert.deepEqual(sb.snapshot('host').links, before, 'no bridge, no host veth left');
        const ctr = sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout;
        assert.doesNotMatch(ctr, /eth0/, 'no container interface left');
      },
      { enterHost: true },
    );
  });
});

/** Every plugin with an IPAM section, with the least configuration that reaches its IPAM. */
const IPAM_USERS: Array<{ type: string; conf: Record<string, unknown>; wraps?: boolean }> = [
  { type: 'bridge', conf: { bridge: 'cnirb0', isGateway: true } },
  { type: 'ptp', conf: {} },
  { type: 'macvlan', conf: { master: 'rbmaster0' } },
  { type: 'ipvlan', conf: { master: 'rbmaster0' } },
  // vlan words a delegate's error like the reference: code 999, "failed to execute IPAM delegate: …"
  { type: 'vlan', conf: { master: 'rbmaster0', vlanId: 7 }, wraps: true },
  { type: 'host-device', conf: { device: 'rbdev0' } },
  { type: 'dummy', conf: {} },
  { type: 'tap', conf: {} },
];

describe('configuration errors of the IPAM section are raised before any change (every plugin with IPAM)', () => {
  for (const { type, conf, wraps } of IPAM_USERS) {
    test(`${type}: bad host-local config, a main plugin named as IPAM, DEL of a never-added container: nothing created`, async () => {
      await withSandbox(
        async (sb) => {
          using data = tempDir('bb-ipam-first');
          // host-device's device: the rollback of the old code moved it into the container and deleted it there
          sb.exec('ip', ['link', 'add', 'rbdev0', 'type', 'veth', 'peer', 'name', 'rbdev1'], { ns: 'host' });
          // the master of macvlan, ipvlan and vlan: found, so that the IPAM's errors are what stops the ADD
          sb.exec('ip', ['link', 'add', 'rbmaster0', 'type', 'veth', 'peer', 'name', 'rbmaster1'], {
            ns: 'host',
          });
          const hostBefore = sb.snapshot('host').links;
          const ctrBefore = sb.snapshot('container').links;
          const unchanged = (what: string) => {
            assert.deepEqual(sb.snapshot('host').links, hostBefore, `${what}: host links unchanged`);
            assert.deepEqual(sb.snapshot('container').links, ctrBefore, `${what}: container links unchanged`);
            assert.deepEqual(readdirSync(data.path), [], `${what}: no IPAM state created`);
          };
          const cni = cniRunner(
            { binary: join(DIST, type) },
            { netns: sb.container.path, path: DIST, containerId: `rb-${type}` },
          );
          const net = (ipam: object) => ({ cniVersion: '1.0.0', name: 'rbnet', type, ...conf, ipam });
          const dataDir = join(data.path, type);
          const prefix = wraps ? 'failed to execute IPAM delegate: ' : '';

          const bad = await cni.add(net({ type: 'host-local', subnet: 1, dataDir }));
          expectCniError(bad, wraps ? 999 : 7, `${prefix}ipam.subnet: expected string, got number 1`);
          assert.doesNotMatch(bad.stderr, /rollback/, `${type}: nothing to roll back`);
          unchanged(`${type} with ipam.subnet 1`);

          const main = await cni.add(net({ type: 'bridge' }));
          expectCniError(
            main,
            wraps ? 999 : 7,
            type === 'bridge'
              ? /delegation cycle: plugin "bridge" is reached again through its own delegation \(bridge → bridge\)/
              : wraps
                ? /^failed to execute IPAM delegate: "ipam": \{"type": "bridge"\}: plugin "bridge" is not an IPAM plugin/
                : '"ipam": {"type": "bridge"}: plugin "bridge" is not an IPAM plugin',
          );
          assert.doesNotMatch(main.stderr, /rollback/, `${type}: nothing to roll back`);
          unchanged(`${type} with "ipam": {"type": "bridge"}`);

          // the options dhcp's client owns are refused by dhcp's ADD decoder, so before the delegating plugin's change
          const owned = await cni.add(net({ type: 'dhcp', provide: [{ option: '53', value: '1' }] }));
          expectCniError(owned, wraps ? 999 : 7, /ipam\.provide\[0\]: option "53" cannot be provided/);
          assert.doesNotMatch(owned.stderr, /rollback/, `${type}: nothing to roll back`);
          unchanged(`${type} with dhcp providing option 53`);

          // DEL releases, it never creates: a container that was never added leaves no dataDir, no lock file
          const del = await cni.del(
            net({ type: 'host-local', ranges: [[{ subnet: '10.83.0.0/24' }]], dataDir }),
          );
          expectOk(del, `${type} DEL of a never-added container`);
          unchanged(`${type} DEL of a never-added container`);
        },
        { enterHost: true },
      );
    });
  }
});

describe('which plugins may be named as IPAM (Plugin.ipam of every plugin in the executable)', () => {
  test('every main and chained plugin is refused as ipam.type before any change; host-local, static, dhcp, cluster-ipam are not', async () => {
    await withSandbox(
      async (sb) => {
        const cni = cniRunner(
          { binary: join(DIST, 'ptp') },
          { netns: sb.container.path, path: DIST, containerId: 'which-ipam' },
        );
        const hostBefore = sb.snapshot('host').links;
        const ipams = ['host-local', 'static', 'dhcp', 'cluster-ipam'];
        for (const type of info.plugins) {
          const r = await cni.add({ cniVersion: '1.0.0', name: 'wi', type: 'ptp', ipam: { type } });
          if (ipams.includes(type)) {
            // accepted as IPAM: whatever it answers then, it is not the refusal
            assert.doesNotMatch(r.stdout, /is not an IPAM plugin|delegation cycle/, `${type}: ${r.stdout}`);
            continue;
          }
          expectCniError(
            r,
            7,
            type === 'ptp'
              ? /delegation cycle: plugin "ptp" is reached again/
              : `"ipam": {"type": ${JSON.stringify(type)}}: plugin ${JSON.stringify(type)} is not an IPAM plugin`,
          );
        }
        assert.deepEqual(sb.snapshot('host').links, hostBefore, 'no host link created');
        assert.doesNotMatch(sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout, /eth0/);
      },
      { enterHost: true },
    );
  });
});

describe('a failed bridge + host-local ADD changes nothing', () => {
  test('requested address outside the range: no veth, no reservation, last_reserved_ip not advanced', async () => {
    await withSandbox(
      async (sb) => {
        using data = tempDir('bb-failed-add');
        const cni = cniRunner(
          { binary: join(DIST, 'bridge') },
          { netns: sb.container.path, path: DIST, containerId: 'fa' },
        );
        const conf = (ips?: string[]) => ({
          cniVersion: '1.0.0',
          name: 'fanet',
          type: 'bridge',
          bridge: 'cnifa0',
          ipam: { type: 'host-local', ranges: [[{ subnet: '10.81.0.0/24' }]], dataDir: data.path },
          ...(ips ? { args: { cni: { ips } } } : {}),
        });
        expectOk(await cni.add(conf()), 'first ADD');
        expectOk(await cni.del(conf()), 'first DEL');
        const store = join(data.path, 'fanet');
        const last = readFileSync(join(store, 'last_reserved_ip.0'), 'utf8');
        const before = sb.snapshot('host').links.filter((l) => !l.includes('cnifa0'));
        expectCniError(
          await cni.add(conf(['10.99.0.5'])),
          999,
          /failed to allocate all requested IPs: 10\.99\.0\.5/,
        );
        assert.equal(
          readFileSync(join(store, 'last_reserved_ip.0'), 'utf8'),
          last,
          'last_reserved_ip unchanged',
        );
        assert.deepEqual(
          readdirSync(store).filter((n) => n !== 'lock' && !n.startsWith('last_reserved_ip.')),
          [],
          'no reservation left',
        );
        assert.deepEqual(
          sb.snapshot('host').links.filter((l) => !l.includes('cnifa0')),
          before,
          'no host veth left',
        );
        assert.doesNotMatch(
          sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout,
          /eth0/,
          'no container eth0',
        );
      },
      { enterHost: true },
    );
  });
});

describe('container ID length (128 bytes at most on ADD, every plugin)', () => {
  test('a 129-byte ID is refused by every plugin before any change; 128 bytes work end to end', async () => {
    await withSandbox(
      async (sb) => {
        using data = tempDir('bb-long-id');
        const long = `c${'x'.repeat(128)}`;
        const ok = `c${'y'.repeat(127)}`;
        for (const p of ['bridge', 'host-local', 'loopback', 'portmap', 'static', 'tuning']) {
          const r = await cniRunner({ binary: join(DIST, p) }, { netns: sb.container.path, path: DIST }).add(
            { cniVersion: '1.0.0', name: 'lid', type: p, ipam: { type: 'static' } },
            { containerId: long },
          );
          expectCniError(r, 4, 'containerID is too long');
        }
        // bridge with ipMasq (iptables comment carries the ID) + host-local + portmap (nftables: the comment IS the ID)
        const rt = runtime(join(data.path, 'cache'));
        const list = confListFromObject({
          cniVersion: '1.0.0',
          name: 'lid',
          plugins: [
            {
              type: 'bridge',
              bridge: 'cnilid0',
              isGateway: true,
              ipMasq: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: '10.82.0.0/24' }]],
                dataDir: join(data.path, 'ipam'),
              },
            },
            { type: 'portmap', backend: 'nftables', capabilities: { portMappings: true } },
            { type: 'tuning', mtu: 1400, dataDir: join(data.path, 'tuning') },
          ],
        });
        const att = {
          containerId: ok,
          netns: sb.container.path,
          ifName: 'eth0',
          capabilityArgs: { portMappings: [{ hostPort: 18081, containerPort: 80, protocol: 'tcp' }] },
        };
        await rt.addNetworkList(list, att);
        assert.match(
          sb.exec('nft', ['list', 'table', 'ip', 'cni_hostport'], { ns: 'host' }).stdout,
          new RegExp(`comment "${ok}"`),
        );
        assert.equal(
          readdirSync(join(data.path, 'ipam', 'lid')).filter((n) => /^10\./.test(n)).length,
          1,
          'one reservation',
        );
        await rt.checkNetworkList(list, att);
        await rt.delNetworkList(list, att);
        assert.deepEqual(
          readdirSync(join(data.path, 'ipam', 'lid')).filter((n) => /^10\./.test(n)),
          [],
          'reservation released',
        );
        assert.doesNotMatch(
          sb.exec('iptables-save', ['-t', 'nat'], { ns: 'host' }).stdout,
          new RegExp(ok),
          'masquerade removed',
        );
        assert.doesNotMatch(
          sb.exec('nft', ['list', 'ruleset'], { ns: 'host' }).stdout,
          new RegExp(ok),
          'nft rules removed',
        );
        assert.deepEqual(readdirSync(join(data.path, 'tuning')), [], 'tuning backup removed');
      },
      { enterHost: true },
    );
  });
});

describe('an ADD whose result cannot be delivered is rolled back', () => {
  for (const backend of ['bun', 'sea'] as const) {
    // (a closed stdout, `>&-`, cannot be told from /dev/null: Node and Bun reopen fd 1 on it, so it is not here)
    for (const how of ['stdout on /dev/full (ENOSPC)', 'stdout a pipe without reader (EPIPE)']) {
      test(`${backend}: ${how} → non-zero exit, no veth, no reservation`, async () => {
        const dir = ensureLinks(backend, info);
        await withSandbox(
          async (sb) => {
            using data = tempDir('bb-stdout');
            const conf = JSON.stringify({
              cniVersion: '1.0.0',
              name: 'so',
              type: 'bridge',
              bridge: 'cniso0',
              ipam: { type: 'host-local', ranges: [[{ subnet: '10.83.0.0/24' }]], dataDir: data.path },
            });
            // the plugin's exit status is written to fd 3 (a file), since its stdout is what is broken
            const status = join(data.path, 'status');
            const script = how.includes('/dev/full')
              ? '"$0" >/dev/full; echo $? > "$1"'
              : // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
                '"$0" | (exec 0<&-; sleep 1); echo "${PIPESTATUS[0]}" > "$1"';
            spawnSync('bash', ['-c', script, join(dir, 'bridge'), status], {
              input: conf,
              env: {
                PATH: process.env.PATH,
                ...cniEnv('ADD', { containerId: 'so', netns: sb.container.path, path: dir }),
              },
              timeout: scaled(30_000),
            });
            assert.equal(readFileSync(status, 'utf8').trim(), '1', 'the plugin exits 1');
            assert.doesNotMatch(
              sb.exec('ip', ['-o', 'link', 'show'], { ns: 'host' }).stdout,
              /veth/,
              'no host veth',
            );
            assert.doesNotMatch(
              sb.exec('ip', ['-o', 'link', 'show'], { ns: 'container' }).stdout,
              /eth0/,
              'no eth0',
            );
            assert.deepEqual(
              readdirSync(join(data.path, 'so')).filter((n) => n.startsWith('10.')),
              [],
              'reservation released',
            );
          },
          { enterHost: true },
        );
      });
    }
  }
});
