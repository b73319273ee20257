// Side by side with the Go reference plugins (Debian containernetworking-plugins in /usr/lib/cni):
// the kernel state we produce must be the same, so a node can switch implementations with
// containers running. Skipped (with the reason) when the reference binaries are not installed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cniEnv, sandboxForFile } from '@cnikit/testing';
import { setupIPMasq, teardownIPMasq } from './ipmasq.ts';
import { iptnftStats, restoreIsNft189 } from './iptnft.ts';
import { formatChainName } from './names.ts';
import { setupSpoofCheck, teardownSpoofCheck } from './spoofcheck.ts';

const GO = '/usr/lib/cni';
const haveGo = existsSync(join(GO, 'bridge')) && existsSync(join(GO, 'host-local'));

describe('compatibility with the Go reference bridge plugin (ipMasq, macspoofchk)', () => {
  assert.ok(
    haveGo,
    `no reference plugins in ${GO}` + ' (Debian package containernetworking-plugins; .ci/run installs it)',
  );
  const env = sandboxForFile();

  const conf = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'refnet',
      type: 'bridge',
      bridge: 'cniref0',
      isGateway: true,
      ipMasq: true,
      ipam: { type: 'host-local', subnet: '10.33.0.0/24', dataDir: env.dir },
      ...extra,
    });
  const goBridge = (command: 'ADD' | 'DEL', containerID: string, extra: Record<string, unknown> = {}) =>
    env.sb.exec(join(GO, 'bridge'), [], {
      input: conf(extra),
      env: cniEnv(command, { containerId: containerID, netns: env.sb.container.path, path: GO }),
    }).stdout;
  const natRules = () =>
    env.sb
      .exec('iptables-save', ['-t', 'nat'])
      .stdout.split('\n')
      .filter((l) => l.startsWith('-A ') || /^:CNI-/.test(l));

  test('the Go plugin and setupIPMasq write identical rules; our teardown removes the Go ones', () => {
    const result = JSON.parse(goBridge('ADD', 'gocontainer')) as { ips: { address: string }[] };
    const ip = result.ips[0]!.address; // e.g. 10.33.0.2/24
    const goRules = natRules();
    const chain = formatChainName('refnet', 'gocontainer');
    assert.ok(
      goRules.some((l) => l.includes(chain)),
      `Go created ${chain}:\n${goRules.join('\n')}`,
    );

    // Remove the Go rules with our teardown: nothing of this container remains.
    teardownIPMasq({
      ips: [ip],
      network: 'refnet',
      ifName: 'eth0',
      containerID: 'gocontainer',
      netns: env.sb.host.path,
    });
    assert.ok(!natRules().some((l) => l.includes(chain)));

    // Re-create them with our setup: byte-identical iptables-save output (with iptables-nft 1.8.9 written in
    // process, iptnft.ts, so the Go DEL below works on the in-process writer's rules).
    const applied = iptnftStats.applied;
    setupIPMasq({
      backend: 'iptables',
      ips: [ip],
      network: 'refnet',
      ifName: 'eth0',
      containerID: 'gocontainer',
      netns: env.sb.host.path,
    });
    assert.deepEqual(natRules(), goRules);
    if (restoreIsNft189(4) && process.env.CNIKIT_IPTABLES_RESTORE !== 'exec')
      assert.equal(iptnftStats.applied - applied, 1, `not written in process: ${iptnftStats.lastReason}`);

    // The Go DEL cleans up what we wrote.
    goBridge('DEL', 'gocontainer');
    assert.ok(!natRules().some((l) => l.includes(chain)));
  });

  test('spoof check: the Go plugin (macspoofchk) and setupSpoofCheck produce the same nft table; our teardown removes the Go rules', () => {
    const result = JSON.parse(goBridge('ADD', 'spoofer', { macspoofchk: true, ipMasq: false })) as {
      interfaces: { name: string; mac: string; sandbox?: string }[];
    };
    const hostIf = result.interfaces.find((i) => i.name.startsWith('veth') && !i.sandbox)!;
    const cont = result.interfaces.find((i) => i.sandbox)!;
    const goTable = env.sb.exec('nft', ['list', 'table', 'bridge', 'nat']).stdout;
    assert.match(goTable, /macspoofchk-spoofer-eth0/);
    teardownSpoofCheck('spoofer-eth0', { netns: env.sb.host.path });
    assert.doesNotMatch(env.sb.exec('nft', ['list', 'table', 'bridge', 'nat']).stdout, /spoofer/);
    setupSpoofCheck({ iface: hostIf.name, mac: cont.mac, refID: 'spoofer-eth0', netns: env.sb.host.path });
    assert.equal(env.sb.exec('nft', ['list', 'table', 'bridge', 'nat']).stdout, goTable);
    goBridge('DEL', 'spoofer', { macspoofchk: true, ipMasq: false });
    assert.doesNotMatch(env.sb.exec('nft', ['list', 'table', 'bridge', 'nat']).stdout, /spoofer/);
  });
});
