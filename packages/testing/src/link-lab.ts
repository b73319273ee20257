/**
 * The fixture of a stacked link plugin's kernel test (macvlan, ipvlan, vlan): a sandbox whose host namespace plays
 * the node (entered for the whole file) with `containers` containers, the plugin's network config, host-local IPAM on
 * the test's subnet (data in the sandbox), the reservations it holds, the container interfaces removed after every
 * test, and `clean()`: what a failed or undone call must leave (only `lo` in the container, the host's links as set
 * up, no reservation).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'node:test';
import { deleteLinkIfExists, withNetns } from '@cnikit/netlink';
import { linkNames } from './ip.ts';
import { type NamedNetns, sandboxForFile } from './sandbox.ts';

export interface LinkLabOptions {
  /** The executables' directory (dist-bin): the delegates' CNI_PATH. */
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
  const ipamDir = () => join(env.dir, 'ipam');
  // a failed test must not leave its interface to the next one
  afterEach(() => {
    for (const ns of env.sb.containers)
      for (const name of ['eth0', 'net1']) withNetns(ns.path, () => deleteLinkIfExists(name));
  });
  return {
    env,
    /** cniCall options: the delegates from `dist`. */
    opts: { path: o.dist },
    c: (i: number): NamedNetns => env.sb.containers[i]!,
    conf: (extra: object = {}) => ({
      cniVersion: '1.1.0',
      name: o.network,
      type: o.type,
      ...o.base,
      ...extra,
    }),
    hostLocal: (extra: object = {}) => ({
      ipam: {
        type: 'host-local',
        dataDir: ipamDir(),
        ranges: [[{ subnet: o.subnet, rangeStart: o.rangeStart }]],
        ...extra,
      },
    }),
    reservations: () => hostLocalReservations(ipamDir(), o.network),
    /** Nothing left: only lo in container 0, exactly `hostLinks` (sorted) in the host namespace, no reservation. */
    clean: (hostLinks: string[]) => {
      assert.deepEqual(linkNames(env.sb.containers[0]!.name), ['lo']);
      assert.deepEqual(linkNames(env.sb.host.name), hostLinks);
      assert.deepEqual(hostLocalReservations(ipamDir(), o.network), []);
    },
  };
}
