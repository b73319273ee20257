/** CHECK in the reference's order: netns, IPAM CHECK, prevResult, then the container's veth, addresses and routes. */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import { delegateCheck, internalError, type Request } from '@cnikit/skel';
import type { PtpConf } from './config.ts';

export async function cmdCheck(req: Request<PtpConf>): Promise<void> {
  const conf = req.conf;
  closeSync(nl.openContainerNetns(req.netns));
  await delegateCheck(conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('ptp: Required prevResult missing');
  const intf = nl.findSandboxInterface(prev.interfaces, req.ifName, req.netns);
  nl.withNetns(req.netns, () => {
    nl.validateContainerInterface(intf, { prefix: 'ptp: ', kind: { kind: 'veth', label: 'veth/p2p' } });
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    nl.validateExpectedRoutes(prev.routes ?? []);
  });
}
