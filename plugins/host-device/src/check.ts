/** CHECK in the reference's order: netns, IPAM CHECK, prevResult, then the device, addresses and routes. */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import { delegateCheck, internalError, type Request } from '@cnikit/skel';
import { resolveSelection } from './add.ts';
import type { HostDeviceConf } from './config.ts';

export async function cmdCheck(req: Request<HostDeviceConf>): Promise<void> {
  const conf = resolveSelection(req.conf);
  closeSync(nl.openContainerNetns(req.netns));
  if (conf.ipamType !== '') await delegateCheck(conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('Required prevResult missing');
  if (conf.dpdkMode) return;
  const intf = nl.findSandboxInterface(prev.interfaces, req.ifName, req.netns);
  nl.withNetns(req.netns, () => {
    nl.validateContainerInterface(intf);
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    nl.validateExpectedRoutes(prev.routes ?? []);
  });
}
