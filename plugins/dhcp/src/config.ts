/**
 * The dhcp IPAM's configuration: the raw network configuration (the daemon gets it as sent) and its `ipam` section
 * (daemonSocketPath, provide, request, priority) as options.ts reads it.
 */
import type { RequestBase } from '@cnikit/skel';
import { type DhcpIpamConfig, providedCodes, readIpamConfig } from './options.ts';

export interface DhcpConf {
  raw: Record<string, unknown>;
  ipam: DhcpIpamConfig;
}

export function parseConf(raw: Record<string, unknown>, req: Pick<RequestBase, 'command'>): DhcpConf {
  const ipam = readIpamConfig(raw);
  // options the client owns are refused on ADD (DEL, CHECK and GC of such a config still release what they can)
  if (req.command === 'ADD') providedCodes(ipam);
  return { raw, ipam };
}
