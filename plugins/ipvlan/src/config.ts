/**
 * ipvlan network configuration: decoding with the reference's messages, the mode names, and the chained master
 * (the single interface of prevResult when `master` is unset). Pure: no system access.
 */

import { IPAM_KEYS, NETCONF_KEYS, type StackedLinkConf, stackedLinkConf } from '@cnikit/link';
import type { IpvlanMode } from '@cnikit/netlink';
import { decodeNetconf, type RequestBase, type Result, s } from '@cnikit/skel';

export const ipvlanSchema = s.object({
  ...NETCONF_KEYS,
  master: s.string().default(''),
  mode: s.string().default(''),
  mtu: s.int().default(0),
  linkInContainer: s.bool().default(false),
  ...IPAM_KEYS,
});

/**
 * master '' = prevResult's single interface when chained, else the default route's interface; mtu: the reference does
 * not bound it (the kernel does); ipamType '' = take the addresses of prevResult (chained after an IPAM-only plugin).
 */
export interface IpvlanConf extends StackedLinkConf {
  /** As configured ('' = l2); checked by `modeFromString`. */
  mode: string;
}

/** The config decoder: "failed to load netconf: …" like the reference (code 6 unless more specific). */
export function parseConf(raw: unknown, _req?: Pick<RequestBase, 'command'>): IpvlanConf {
  const c = decodeNetconf(ipvlanSchema, raw);
  return { ...stackedLinkConf(c), mode: c.mode };
}

/** The reference's `modeFromString`: '' and 'l2' are l2. */
export function modeFromString(mode: string): IpvlanMode {
  switch (mode) {
    case '':
    case 'l2':
      return 'l2';
    case 'l3':
    case 'l3s':
      return mode;
    default:
      throw new Error(`unknown ipvlan mode: ${JSON.stringify(mode)}`);
  }
}

/**
 * The master of a chained ADD (no `master`, a prevResult): prevResult's interface when it has exactly one, named;
 * undefined when there is no prevResult (the caller then takes the default route's interface).
 */
export function chainedMaster(prev: Result | undefined): string | undefined {
  if (!prev) return undefined;
  const ifs = prev.interfaces ?? [];
  if (ifs.length === 1 && ifs[0]!.name !== '') return ifs[0]!.name;
  throw new Error('chained master failure. PrevResult lacks a single named interface');
}
