/**
 * The fixture of a stacked link plugin's kernel test (macvlan, ipvlan, vlan): a sandbox whose host namespace plays
 * the node (entered for the whole file) with `containers` containers, the plugin's network config, host-local IPAM on
 * the test's subnet (data in the sandbox), the reservations it holds, the container interfaces removed after every
 * test, and `clean()`: what a failed or undone call must leave (only `lo` in the container, the host's links as set
 * up, no reservation); and the steps every stacked plugin's file repeats (each spec version through ADD/CHECK/DEL,
 * the master's errors, DEL with the namespace gone, GC, STATUS without the master), each asserting the reference's
 * texts.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, before, test } from 'node:test';
import { deleteLinkIfExists, withNetns } from '@cnikit/netlink';
import { type CniCallOptions, type CniTarget, cniCall, expectCniError, expectOk } from './cni.ts';
import { type IpJson, linkNames } from './ip.ts';
import { createNamedNetns, deleteNamedNetns, type NamedNetns, sandboxForFile } from './sandbox.ts';

export interface LinkLabOptions {
  /** The plugin under test (in-process). */
  plugin: CniTarget;
  /** The executables' directory (dist-bin): the delegates' CNI_PATH (host-local and static must be there). */
  dist: string;
  /** The network name and plugin type of the config. */
  network: string;
  type: string;
  /** Keys every config of the file has (vlan: master, vlanId). */
  base?: object;
  /** host-local's range: `subnet` with addresses from `rangeStart`. */
  subnet: string;
  rangeStart: string;
  containers?: number;
}

/** The host-local reservations (addresses) of `network` under `dataDir`, sorted; [] before the first. */
export function hostLocalReservations(dataDir: string, network: string): string[] {
  const d = join(dataDir, network);
  return existsSync(d)
    ? readdirSync(d)
        .filter((f) => /^\d/.test(f))
        .sort()
    : [];
}

export function linkLab(o: LinkLabOptions) {
  const env = sandboxForFile({ enterHost: true, containers: o.containers ?? 3 });
  before(() => {
    for (const ipam of ['host-local', 'static'])
      assert.ok(existsSync(join(o.dist, ipam)), `dist-bin/${ipam} not built (npm run build)`);
  });
  const ipamDir = () => join(env.dir, 'ipam');
  // a failed test must not leave its interface to the next one
  afterEach(() => {
    for (const ns of env.sb.containers)
      for (const name of ['eth0', 'net1']) withNetns(ns.path, () => deleteLinkIfExists(name));
  });
  const opts = { path: o.dist };
  const c = (i: number): NamedNetns => env.sb.containers[i]!;
  const conf = (extra: object = {}) => ({
    cniVersion: '1.1.0',
    name: o.network,
    type: o.type,
    ...o.base,
    ...extra,
  });
  const hostLocal = (extra: object = {}) => ({
    ipam: {
      type: 'host-local',
      dataDir: ipamDir(),
      ranges: [[{ subnet: o.subnet, rangeStart: o.rangeStart }]],
      ...extra,
    },
  });
  const reservations = () => hostLocalReservations(ipamDir(), o.network);
  const call = (cmd: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS', cf: object, co: CniCallOptions = {}) =>
    cniCall(o.plugin, cmd, cf, { ...opts, ...co });
  return {
    env,
    /** cniCall options: the delegates from `dist`. */
    opts,
    c,
    conf,
    hostLocal,
    reservations,
    /**
     * A test per spec version: ADD with `ipam` in container 0 answers in that version with `address` (spec 0.1/0.2:
     * `ip4.ip`), CHECK passes from 0.4.0 on, DEL leaves only lo.
     */
    versions: (versions: readonly string[], ipam: object, address: string) => {
      for (const v of versions)
        test(`cniVersion ${v}`, async () => {
          const cf = { ...conf(ipam), cniVersion: v };
          const co = { netns: c(0).path };
          const res = expectOk<IpJson>(await call('ADD', cf, co));
          assert.equal(res.cniVersion, v);
          if (v === '0.1.0' || v === '0.2.0') assert.equal(res.ip4.ip, address);
          else assert.equal(res.ips[0].address, address);
          // CHECK exists from spec 0.4.0 on
          if (v === '0.4.0' || v.startsWith('1.'))
            expectOk<IpJson>(await call('CHECK', { ...cf, prevResult: res }, co));
          expectOk<IpJson>(await call('DEL', cf, co));
          assert.deepEqual(linkNames(c(0).name), ['lo']);
        });
    },
    /**
     * ADD in container 0 with master `nope` (the reference's lookup error) and, with `mtu`, an MTU above the master's
     * 1500; `extra` goes into both configs.
     */
    masterErrors: async (o2: { mtu: boolean; extra?: object }) => {
      const co = { netns: c(0).path };
      expectCniError(
        await call('ADD', conf({ master: 'nope', ...o2.extra }), co),
        999,
        'failed to lookup master "nope": Link not found',
      );
      if (o2.mtu)
        expectCniError(
          await call('ADD', conf({ mtu: 9000, ...o2.extra }), co),
          999,
          'invalid MTU 9000, must be [0, master MTU(1500)]',
        );
    },
    /** ADD `cf` in a namespace `name` that is then deleted: DEL succeeds and releases the reservation. */
    delNetnsGone: async (name: string, cf: object) => {
      const ns = createNamedNetns(name);
      const co = { netns: ns.path, containerId: 'gone' };
      try {
        expectOk<IpJson>(await call('ADD', cf, co));
        assert.ok(reservations().length >= 1);
      } finally {
        deleteNamedNetns(ns);
      }
      expectOk<IpJson>(await call('DEL', cf, co));
      assert.deepEqual(reservations(), []);
    },
    /**
     * GC with `keep` (container 1, `cf`) valid releases `drop`'s reservation (container 2, `dropConf`, default `cf`);
     * then both DELs leave none.
     */
    gcKeepsValid: async (cf: object, dropConf: object = cf) => {
      expectOk<IpJson>(await call('ADD', cf, { netns: c(1).path, containerId: 'keep' }));
      expectOk<IpJson>(await call('ADD', dropConf, { netns: c(2).path, containerId: 'drop' }));
      assert.equal(reservations().length, 2);
      const gc = { ...cf, 'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'eth0' }] };
      expectOk<IpJson>(await call('GC', gc));
      assert.equal(reservations().length, 1);
      expectOk<IpJson>(await call('DEL', cf, { netns: c(1).path, containerId: 'keep' }));
      expectOk<IpJson>(await call('DEL', dropConf, { netns: c(2).path, containerId: 'drop' }));
      assert.deepEqual(reservations(), []);
    },
    /** STATUS with master `nope` (and `extra`): code 50, "not available". */
    statusMasterMissing: async (extra: object = {}) => {
      expectCniError(await call('STATUS', conf({ master: 'nope', ...extra })), 50, 'master "nope" not found');
    },
    /** Nothing left: only lo in container 0, exactly `hostLinks` (sorted) in the host namespace, no reservation. */
    clean: (hostLinks: string[]) => {
      assert.deepEqual(linkNames(env.sb.containers[0]!.name), ['lo']);
      assert.deepEqual(linkNames(env.sb.host.name), hostLinks);
      assert.deepEqual(hostLocalReservations(ipamDir(), o.network), []);
    },
  };
}
