/** dummy network configuration: the generic CNI keys only (decoding errors as the reference words them). */
import { IPAM_KEY, NETCONF_KEYS } from '@cnikit/link';
import { decodeNetconf, s } from '@cnikit/skel';

export const dummySchema = s.object({
  ...NETCONF_KEYS,
  ...IPAM_KEY,
});

export interface DummyConf {
  cniVersion: string;
  name: string;
  /** '' when the config has no IPAM: ADD and CHECK refuse it like the reference. */
  ipamType: string;
}

export const IPAM_REQUIRED = 'dummy interface requires an IPAM configuration';

export function parseConf(raw: unknown): DummyConf {
  const c = decodeNetconf(dummySchema, raw, 'failed to parse network config');
  return { cniVersion: c.cniVersion, name: c.name, ipamType: c.ipam?.type ?? '' };
}
