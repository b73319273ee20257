/**
 * macvlan: a macvlan of the master (configured, or the interface of the default route) as the container's
 * interface, with optional delegated IPAM (drop-in for the reference plugin at HEAD).
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { CniError, ErrorCode, errorReason, type Request, type Result, validateDelegate } from '@cnikit/skel';
import { macvlanLinkCheck } from './check-logic.ts';
import { type MacvlanConf, parseConf } from './config.ts';
import { macvlanLink, resolveMaster } from './link.ts';

async function add(req: Request<MacvlanConf>): Promise<Result> {
  const conf = req.conf;
  // configuration errors, the IPAM's included, are raised before the first change
  if (conf.ipamType !== '') await validateDelegate(conf.ipamType, req, { ipam: true });
  const master = resolveMaster(conf, req.netns);
  return link.addContainerLink(req, {
    kind: 'macvlan',
    stacked: () => macvlanLink(conf, master),
    notify: 'arp+ndisc',
    upWithoutIpam: true,
    // like the reference, the result always carries the config's DNS object (printed as {} when empty)
    dns: () => conf.dns ?? {},
  });
}

async function check(req: Request<MacvlanConf>): Promise<void> {
  const conf = req.conf;
  const master = resolveMaster(conf, req.netns);
  await link.checkContainerLink(req, {
    missingPrevResult: 'required prevResult missing',
    master: () => link.lookupMaster(req.netns, conf.linkInContainer, master),
    link: macvlanLinkCheck(conf.mode),
    lookup: (name) => nl.getLinkDetails(name),
  });
}

/**
 * STATUS: the IPAM's STATUS, then (beyond the reference, which leaves it unimplemented) the master: a master in the
 * host namespace that does not exist, or no default route to take it from, is "not available" (code 50). A master in
 * the container (linkInContainer) cannot be checked without a container. GC (the reference has none) is the IPAM's:
 * the macvlan itself leaves nothing outside the container.
 */
async function status(req: Request<MacvlanConf>): Promise<void> {
  const conf = req.conf;
  await link.ipamStatus(req);
  if (conf.linkInContainer) return;
  let master = conf.master;
  try {
    master ||= nl.defaultRouteInterface();
  } catch (err) {
    throw new CniError(ErrorCode.PluginNotAvailable, `no master: ${errorReason(err)}`);
  }
  link.requireMaster(master);
}

/**
 * DEL is linkPlugin's: IPAM DEL and the link's removal both run (each failure is reported at the end); a missing link,
 * an empty CNI_NETNS and a namespace that is gone are success. Needs no master (the reference's DEL does not look it
 * up).
 */
export const plugin = link.linkPlugin('macvlan', { conf: parseConf, add, check, status });
