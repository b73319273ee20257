// The probes against the running kernel: each answer is checked independently (the link really can or cannot be
// created), requireKernelFeatures fails with the reason, and no probe namespace is left behind.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  KERNEL_FEATURES,
  type KernelFeatureName,
  missingKernelFeatures,
  probeKernelFeatures,
  requireKernelFeatures,
} from './kernel-features.ts';
import { createNamedNetns, deleteNamedNetns } from './sandbox.ts';

const names = Object.keys(KERNEL_FEATURES) as KernelFeatureName[];

function probeNamespaces(): string[] {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return r.stdout.split('\n').filter((l) => l.startsWith(`cnikit-probe-${process.pid}-`));
}

describe('kernel feature probes', () => {
  test('each answer matches an independent attempt; requireKernelFeatures fails exactly for the missing ones', () => {
    const r = probeKernelFeatures();
    assert.deepEqual(Object.keys(r).sort(), [...names].sort());
    const ns = createNamedNetns('cnikit-kf');
    try {
      const ip = (...a: string[]) =>
        spawnSync('ip', ['-n', ns.name, ...a], { encoding: 'utf8' }).status === 0;
      assert.ok(ip('link', 'add', 'p0', 'type', 'veth', 'peer', 'name', 'p1'));
      // ipvlan gets a parent of its own: a link that already carries macvlan/macvtap ports refuses ipvlan (EBUSY)
      assert.ok(ip('link', 'add', 'p2', 'type', 'veth', 'peer', 'name', 'p3'));
      const independent: Record<string, boolean> = {
        dummy: ip('link', 'add', 'd0', 'type', 'dummy'),
        vlan: ip('link', 'add', 'link', 'p0', 'name', 'p0.7', 'type', 'vlan', 'id', '7'),
        macvlan: ip('link', 'add', 'link', 'p0', 'name', 'm0', 'type', 'macvlan'),
        macvtap: ip('link', 'add', 'link', 'p0', 'name', 'mt0', 'type', 'macvtap'),
        ipvlan: ip('link', 'add', 'link', 'p2', 'name', 'i0', 'type', 'ipvlan'),
        vrf: ip('link', 'add', 'v0', 'type', 'vrf', 'table', '7'),
        tun: ip('tuntap', 'add', 'dev', 't0', 'mode', 'tun'),
      };
      ip('link', 'add', 'b0', 'type', 'bridge', 'vlan_filtering', '1');
      const b0 = spawnSync('ip', ['-n', ns.name, '-d', '-j', 'link', 'show', 'b0'], { encoding: 'utf8' });
      independent['bridge-vlan-filtering'] =
        b0.status === 0 && JSON.parse(b0.stdout)[0]?.linkinfo?.info_data?.vlan_filtering === 1;
      independent.br_netfilter = existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables');
      spawnSync('tc', ['-n', ns.name, 'qdisc', 'add', 'dev', 'p0', 'clsact']);
      independent.cls_matchall =
        spawnSync('tc', ['-n', ns.name, 'filter', 'add', 'dev', 'p0', 'egress', 'matchall', 'action', 'pass'])
          .status === 0;
      for (const n of names) assert.equal(r[n].present, independent[n], `${n}: ${r[n].reason ?? 'present'}`);
    } finally {
      deleteNamedNetns(ns);
    }
    for (const n of names) {
      if (r[n].present) {
        assert.equal(r[n].reason, undefined);
        requireKernelFeatures(n);
      } else {
        assert.match(r[n].reason!, /\S/);
        assert.throws(() => requireKernelFeatures('tun', n), {
          message: new RegExp(`^this kernel lacks ${n} — .*// cnikit-kernel-features: tun ${n}.*npm run vm`),
        });
      }
    }
    assert.deepEqual(
      missingKernelFeatures(names),
      names.filter((n) => !r[n].present),
    );
    assert.deepEqual(probeNamespaces(), []);
  });

  test('an unknown name is rejected', () => {
    assert.throws(() => probeKernelFeatures(['nope' as KernelFeatureName]), /unknown kernel feature "nope"/);
  });
});
