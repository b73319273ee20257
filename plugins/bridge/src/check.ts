/** CHECK: the IPAM CHECK, then the attachment against prevResult (check-logic.ts) over the kernel's view. */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import { CniError, delegateCheck, ErrorCode, errorReason, internalError, type Request } from '@cnikit/skel';
import { type CheckEnv, checkAttachment } from './check-logic.ts';
import type { BridgeConf } from './config.ts';
import { linkByName } from './kernel.ts';

/** The real views: host links here, the container's links, addresses and routes inside its namespace. */
export function checkEnv(netns: string): CheckEnv {
  return {
    hostLink: (name) => linkByName(name),
    containerLink: (name) => nl.withNetns(netns, () => linkByName(name)),
    containerAddrs: (name) => nl.withNetns(netns, () => nl.addrViews(name)),
    containerRoutes: (family) => nl.withNetns(netns, () => nl.routeViews(family)),
  };
}

export async function cmdCheck(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  if (!nl.isNetns(req.netns)) {
    // reproduce the reference's message for a bad path
    try {
      closeSync(nl.openNetnsFd(req.netns));
    } catch (err) {
      throw internalError(`failed to open netns ${JSON.stringify(req.netns)}: ${errorReason(err)}`, err);
    }
  }
  if (conf.ipamType === '') {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      'CHECK is not supported for a bridge without IPAM (ipam.type is empty)',
      'the reference plugin fails here with "no plugin name provided"; CHECK validates the IPAM allocation',
    );
  }
  await delegateCheck(conf.ipamType, req);
  if (!req.prevResult) throw internalError('Required prevResult missing');
  checkAttachment(
    checkEnv(req.netns),
    { bridge: conf.bridge, promiscMode: conf.promiscMode, ifName: req.ifName, netns: req.netns },
    req.prevResult,
  );
}
