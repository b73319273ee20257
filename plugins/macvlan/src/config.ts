/**
 * macvlan network configuration: decoding with the reference's messages, the container MAC choice (CNI_ARGS MAC,
 * then runtimeConfig.mac), the mode names and the MTU bound. Pure: no system access (the master's lookup and the
 * default-route master are the ADD/CHECK's, in link.ts).
 */

import { IPAM_KEYS, NETCONF_KEYS, type StackedLinkConf, stackedLinkConf } from '@cnikit/link';
import { invalidMacMessage, type MacvlanMode, parseMac } from '@cnikit/netlink';
import { decodeNetconf, loadArgs, type RequestBase, s } from '@cnikit/skel';

export const macvlanSchema = s.object({
  ...NETCONF_KEYS,
  master: s.string().default(''),
  mode: s.string().default(''),
  mtu: s.int().default(0),
  mac: s.string().default(''),
  linkInContainer: s.bool().default(false),
  bcqueuelen: s.uint({ max: 0xffffffff }).default(0),
  ...IPAM_KEYS,
  runtimeConfig: s.object({ mac: s.string().optional() }).optional(),
});

/**
 * master '' = the interface of the default route (resolved by ADD/CHECK); mtu: checked against the master's by
 * ADD/CHECK (`checkMtu`); ipamType '' = L2 only (no addresses).
 */
export interface MacvlanConf extends StackedLinkConf {
  /** As configured ('' = bridge); checked by `modeFromString` when the link is made or checked. */
  mode: string;
  /** The container MAC: CNI_ARGS MAC, overridden by runtimeConfig.mac; '' = the kernel's choice. */
  mac: string;
  /** IFLA_MACVLAN_BC_QUEUE_LEN; 0 = kernel default. */
  bcQueueLen: number;
}

/**
 * The config decoder. Decode errors read "failed to load netconf: …" (DEL: "failed to load netConf: …", the
 * reference's spelling there), code 6 unless more specific. CNI_ARGS is read for ADD and CHECK only (the reference's
 * DEL decodes nothing else); a bad CNI_ARGS fails with the SDK's `loadArgs` message, like the reference's LoadArgs.
 */
export function parseConf(raw: unknown, req: Pick<RequestBase, 'args' | 'command'>): MacvlanConf {
  const c = decodeNetconf(
    macvlanSchema,
    raw,
    `failed to load ${req.command === 'DEL' ? 'netConf' : 'netconf'}`,
  );
  let mac = c.mac;
  if ((req.command === 'ADD' || req.command === 'CHECK') && req.args !== '') {
    const a = loadArgs(req.args, { MAC: 'string' });
    if (a.MAC) mac = a.MAC;
  }
  if (c.runtimeConfig?.mac) mac = c.runtimeConfig.mac;
  return {
    ...stackedLinkConf(c),
    mode: c.mode,
    mac,
    bcQueueLen: c.bcqueuelen,
  };
}

/** The reference's `modeFromString`: '' and 'bridge' are bridge. */
export function modeFromString(mode: string): MacvlanMode {
  switch (mode) {
    case '':
    case 'bridge':
      return 'bridge';
    case 'private':
    case 'vepa':
    case 'passthru':
      return mode;
    default:
      throw new Error(`unknown macvlan mode: ${JSON.stringify(mode)}`);
  }
}

/** The configured MAC as the kernel gets it; the reference's message for a bad one. */
export function macBytes(mac: string): string | undefined {
  if (mac === '') return undefined;
  if (!parseMac(mac)) throw new Error(`invalid args ${mac} for MAC addr: ${invalidMacMessage(mac)}`);
  return mac;
}
