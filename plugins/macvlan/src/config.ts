/**
 * macvlan network configuration: decoding with the reference's messages, the container MAC choice (CNI_ARGS MAC,
 * then runtimeConfig.mac), the mode names and the MTU bound. Pure: no system access (the master's lookup and the
 * default-route master are the ADD/CHECK's, in link.ts).
 */
import { invalidMacMessage, type MacvlanMode, parseMac } from '@cnikit/netlink';
import {
  CniError,
  DNSSchema,
  decode,
  ErrorCode,
  type Infer,
  loadArgs,
  type RequestBase,
  s,
} from '@cnikit/skel';

export const macvlanSchema = s.object({
  cniVersion: s.string().default(''),
  name: s.string().default(''),
  type: s.string().default(''),
  master: s.string().default(''),
  mode: s.string().default(''),
  mtu: s.int().default(0),
  mac: s.string().default(''),
  linkInContainer: s.bool().default(false),
  bcqueuelen: s.uint({ max: 0xffffffff }).default(0),
  ipam: s.object({ type: s.string().default('') }).optional(),
  dns: DNSSchema.optional(),
  runtimeConfig: s.object({ mac: s.string().optional() }).optional(),
});

export type MacvlanRaw = Infer<typeof macvlanSchema>;

export interface MacvlanConf {
  cniVersion: string;
  name: string;
  /** As configured; '' = the interface of the default route (resolved by ADD/CHECK). */
  master: string;
  /** As configured ('' = bridge); checked by `modeFromString` when the link is made or checked. */
  mode: string;
  /** As configured (checked against the master's MTU by ADD/CHECK: `checkMtu`). */
  mtu: number;
  /** The container MAC: CNI_ARGS MAC, overridden by runtimeConfig.mac; '' = the kernel's choice. */
  mac: string;
  /** The master is in the container namespace (the macvlan is created there). */
  linkInContainer: boolean;
  /** IFLA_MACVLAN_BC_QUEUE_LEN; 0 = kernel default. */
  bcQueueLen: number;
  /** '' = L2 only (no addresses). */
  ipamType: string;
  dns: MacvlanRaw['dns'];
}

/**
 * The config decoder. Decode errors read "failed to load netconf: …" (DEL: "failed to load netConf: …", the
 * reference's spelling there), code 6 unless more specific. CNI_ARGS is read for ADD and CHECK only (the reference's
 * DEL decodes nothing else); a bad CNI_ARGS fails with the SDK's `loadArgs` message, like the reference's LoadArgs.
 */
export function parseConf(raw: unknown, req: Pick<RequestBase, 'args' | 'command'>): MacvlanConf {
  let c: MacvlanRaw;
  try {
    c = decode(macvlanSchema, raw, 'config');
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(
      e.code === ErrorCode.Internal ? ErrorCode.DecodingFailure : e.code,
      `failed to load ${req.command === 'DEL' ? 'netConf' : 'netconf'}: ${e.msg}`,
      e.details,
    );
  }
  let mac = c.mac;
  if ((req.command === 'ADD' || req.command === 'CHECK') && req.args !== '') {
    const a = loadArgs(req.args, { MAC: 'string' });
    if (a.MAC) mac = a.MAC;
  }
  if (c.runtimeConfig?.mac) mac = c.runtimeConfig.mac;
  return {
    cniVersion: c.cniVersion,
    name: c.name,
    master: c.master,
    mode: c.mode,
    mtu: c.mtu,
    mac,
    linkInContainer: c.linkInContainer,
    bcQueueLen: c.bcqueuelen,
    ipamType: c.ipam?.type ?? '',
    dns: c.dns,
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

/** The MTU must lie in [0, master MTU] (0 = inherit the master's). */
export function checkMtu(mtu: number, masterMtu: number): void {
  if (mtu < 0 || mtu > masterMtu)
    throw new Error(`invalid MTU ${mtu}, must be [0, master MTU(${masterMtu})]`);
}

/** The configured MAC as the kernel gets it; the reference's message for a bad one. */
export function macBytes(mac: string): string | undefined {
  if (mac === '') return undefined;
  if (!parseMac(mac)) throw new Error(`invalid args ${mac} for MAC addr: ${invalidMacMessage(mac)}`);
  return mac;
}
