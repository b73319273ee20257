/**
 * The configuration keys every interface plugin decodes, as schema fragments spread into the plugin's own
 * `s.object({ ...NETCONF_KEYS, <its keys>, ...IPAM_KEYS })` (decoding reports the first bad key in the schema's
 * order, so each plugin keeps its keys where the reference's struct has them), and the decoded part they share.
 */
import { type DNS, DNSSchema, s } from '@cnikit/skel';

/** cniVersion, name, type: the spec's keys, first in every reference NetConf. */
export const NETCONF_KEYS = {
  cniVersion: s.string().default(''),
  name: s.string().default(''),
  type: s.string().default(''),
};

/** The IPAM's type (its other keys are the IPAM's to decode). */
export const IPAM_KEY = { ipam: s.object({ type: s.string().default('') }).optional() };

/** The IPAM's type and the config's DNS. */
export const IPAM_KEYS = { ...IPAM_KEY, dns: DNSSchema.optional() };

/** The decoded keys an interface plugin's configuration has: ipamType '' = no IPAM configured. */
export interface LinkConfBase {
  cniVersion: string;
  name: string;
  ipamType: string;
  dns: DNS | undefined;
}

/** A stacked link's (macvlan, ipvlan, vlan): its master (in the host, or the container's with `linkInContainer`). */
export interface StackedLinkConf extends LinkConfBase {
  master: string;
  /** 0 = inherit the master's. */
  mtu: number;
  /** The master is in the container namespace (the link is created there). */
  linkInContainer: boolean;
}

/** The shared keys of a decoded `{ ...NETCONF_KEYS, ...IPAM_KEYS }` object. */
export function linkConfBase(c: {
  cniVersion: string;
  name: string;
  ipam?: { type: string };
  dns?: DNS;
}): LinkConfBase {
  return { cniVersion: c.cniVersion, name: c.name, ipamType: c.ipam?.type ?? '', dns: c.dns };
}

/** The shared keys of a stacked link's decoded configuration. */
export function stackedLinkConf(
  c: Parameters<typeof linkConfBase>[0] & { master: string; mtu: number; linkInContainer: boolean },
): StackedLinkConf {
  return { ...linkConfBase(c), master: c.master, mtu: c.mtu, linkInContainer: c.linkInContainer };
}

/** The MTU must lie in [0, master MTU] (0 = inherit the master's). */
export function checkMtu(mtu: number, masterMtu: number): void {
  if (mtu < 0 || mtu > masterMtu)
    throw new Error(`invalid MTU ${mtu}, must be [0, master MTU(${masterMtu})]`);
}
