/**
 * tap network configuration: decoding with the reference's messages, the container MAC choice (runtimeConfig.mac >
 * CNI_ARGS MAC > mac), and the TUNSETIFF flags the reference ends up with. Pure.
 */

import { IPAM_KEYS, type LinkConfBase, linkConfBase, NETCONF_KEYS } from '@cnikit/link';
import { formatMac, invalidMacMessage, parseMac } from '@cnikit/netlink';
import { CniError, decodeNetconf, ErrorCode, loadArgs, type RequestBase, s } from '@cnikit/skel';
import { IFF_MULTI_QUEUE, IFF_NO_PI, IFF_TAP, IFF_VNET_HDR } from '@cnikit/sys';

const uint32 = () => s.int({ min: 0, max: 0xffffffff });

export const tapSchema = s.object({
  ...NETCONF_KEYS,
  multiQueue: s.bool().default(false),
  mtu: s.int().default(0),
  mac: s.string().default(''),
  owner: uint32().optional(),
  group: uint32().optional(),
  selinuxContext: s.string().default(''),
  bridge: s.string().default(''),
  runtimeConfig: s.object({ mac: s.string().default('') }).optional(),
  ...IPAM_KEYS,
});

export interface TapConf extends LinkConfBase {
  multiQueue: boolean;
  /** 0 = kernel default. */
  mtu: number;
  /** Canonical MAC ('' = kernel's random one), validated on ADD. */
  mac: string;
  owner: number | undefined;
  group: number | undefined;
  selinuxContext: string;
  bridge: string;
}

function configError(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

/** Decode; the MAC of CNI_ARGS (`MAC=`) and runtimeConfig.mac override `mac`, in that order (the reference's loadConf). */
export function parseConf(raw: unknown, req?: Pick<RequestBase, 'args' | 'command'>): TapConf {
  const c = decodeNetconf(tapSchema, raw);
  let mac = c.mac;
  if (req?.args) {
    const a = loadArgs(req.args, { MAC: 'string' });
    if (a.MAC) mac = a.MAC;
  }
  if (c.runtimeConfig?.mac) mac = c.runtimeConfig.mac;
  if (mac !== '' && req?.command === 'ADD') {
    const b = parseMac(mac);
    if (!b) throw configError(`invalid args ${mac} for MAC addr: ${invalidMacMessage(mac)}`);
    mac = formatMac(b);
  }
  return {
    ...linkConfBase(c),
    multiQueue: c.multiQueue,
    mtu: Math.max(c.mtu, 0),
    mac,
    owner: c.owner,
    group: c.group,
    selinuxContext: c.selinuxContext,
    bridge: c.bridge,
  };
}

/**
 * The TUNSETIFF flags of the reference: with both owner and group it creates the device through the netlink library
 * (IFF_VNET_HDR; multiQueue adds IFF_MULTI_QUEUE|IFF_NO_PI), otherwise with `ip tuntap add mode tap` (IFF_NO_PI;
 * multiQueue adds IFF_MULTI_QUEUE). The two differ in the vnet header and packet-information flags, so a guest
 * sees the same device as with the reference.
 */
export function tapFlags(conf: Pick<TapConf, 'owner' | 'group' | 'multiQueue' | 'selinuxContext'>): number {
  const viaNetlink = conf.selinuxContext === '' && conf.owner !== undefined && conf.group !== undefined;
  let flags = IFF_TAP;
  if (viaNetlink) {
    flags |= IFF_VNET_HDR;
    if (conf.multiQueue) flags |= IFF_MULTI_QUEUE | IFF_NO_PI;
  } else {
    flags |= IFF_NO_PI;
    if (conf.multiQueue) flags |= IFF_MULTI_QUEUE;
  }
  return flags;
}
