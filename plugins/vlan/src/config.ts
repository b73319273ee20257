/**
 * vlan network configuration: decoding with the reference's messages and the ADD-time checks (master required,
 * VLAN ID range, MTU within the master's). Pure: no system access.
 */
import { CniError, DNSSchema, decodeNetconf, ErrorCode, type Infer, type RequestBase, s } from '@cnikit/skel';

export const vlanSchema = s.object({
  cniVersion: s.string().default(''),
  name: s.string().default(''),
  type: s.string().default(''),
  master: s.string().default(''),
  vlanId: s.int().default(0),
  mtu: s.int().default(0),
  linkInContainer: s.bool().default(false),
  ipam: s.object({ type: s.string().default('') }).optional(),
  dns: DNSSchema.optional(),
});

export type VlanRaw = Infer<typeof vlanSchema>;

export interface VlanConf {
  cniVersion: string;
  name: string;
  /** The parent device (required for ADD: there is no default, like the reference). */
  master: string;
  vlanId: number;
  /** 0 = inherit the master's; checked against the master's MTU by `checkMtu`. */
  mtu: number;
  linkInContainer: boolean;
  /** The IPAM plugin (the reference always delegates: '' fails ADD, CHECK and STATUS with "no plugin name provided"). */
  ipamType: string;
  dns: VlanRaw['dns'];
}

function configError(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

/**
 * The config decoder: "failed to load netconf: …" (code 6 unless more specific). ADD also checks the master and
 * the VLAN ID (code 7, the reference's texts); DEL, CHECK, GC and STATUS decode only, so a DEL always cleans up.
 */
export function parseConf(raw: unknown, req: Pick<RequestBase, 'command'>): VlanConf {
  const c = decodeNetconf(vlanSchema, raw);
  if (req.command === 'ADD') {
    if (c.master === '')
      throw configError(
        '"master" field is required. It specifies the host interface name to create the VLAN for',
      );
    if (c.vlanId < 0 || c.vlanId > 4094)
      throw configError(`invalid VLAN ID ${c.vlanId} (must be between 0 and 4094 inclusive)`);
  }
  return {
    cniVersion: c.cniVersion,
    name: c.name,
    master: c.master,
    vlanId: c.vlanId,
    mtu: c.mtu,
    linkInContainer: c.linkInContainer,
    ipamType: c.ipam?.type ?? '',
    dns: c.dns,
  };
}

/** The MTU must lie in [0, master MTU] (0 = inherit the master's). */
export function checkMtu(mtu: number, masterMtu: number): void {
  if (mtu < 0 || mtu > masterMtu)
    throw new Error(`invalid MTU ${mtu}, must be [0, master MTU(${masterMtu})]`);
}
