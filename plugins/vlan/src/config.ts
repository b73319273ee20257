/**
 * vlan network configuration: decoding with the reference's messages and the ADD-time checks (master required,
 * VLAN ID range, MTU within the master's). Pure: no system access.
 */
import { IPAM_KEYS, NETCONF_KEYS, type StackedLinkConf, stackedLinkConf } from '@cnikit/link';
import { CniError, decodeNetconf, ErrorCode, type RequestBase, s } from '@cnikit/skel';

export const vlanSchema = s.object({
  ...NETCONF_KEYS,
  master: s.string().default(''),
  vlanId: s.int().default(0),
  mtu: s.int().default(0),
  linkInContainer: s.bool().default(false),
  ...IPAM_KEYS,
});

/**
 * master: required for ADD (there is no default, like the reference); mtu: checked against the master's by
 * `checkMtu`; ipamType: the reference always delegates ('' fails ADD, CHECK and STATUS with "no plugin name provided").
 */
export interface VlanConf extends StackedLinkConf {
  vlanId: number;
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
    ...stackedLinkConf(c),
    vlanId: c.vlanId,
  };
}
