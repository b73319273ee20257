/**
 * ipvlan: an ipvlan (l2, l3 or l3s) of the master as the container's interface, addressed by the IPAM plugin or,
 * chained without IPAM, with prevResult's addresses (drop-in for the reference plugin at HEAD).
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { type Request, type Result, validateDelegate } from '@cnikit/skel';
import { ipvlanLinkCheck } from './check-logic.ts';
import { chainedMaster, type IpvlanConf, modeFromString, parseConf } from './config.ts';

async function add(req: Request<IpvlanConf>): Promise<Result> {
  const conf = req.conf;
  // chained after a plugin that already chose the addresses, no IPAM runs
  const chained = conf.ipamType === '' && (req.prevResult?.ips?.length ?? 0) > 0;
  // configuration errors, the IPAM's included, are raised before the first change
  if (!chained) await validateDelegate(conf.ipamType, req, { ipam: true });
  const master =
    conf.master ||
    chainedMaster(req.prevResult) ||
    link.inMasterNetns(req.netns, conf.linkInContainer, () => nl.defaultRouteInterface());
  return link.addContainerLink(req, {
    kind: 'ipvlan',
    stacked: () => {
      const mode = modeFromString(conf.mode);
      return {
        master,
        linkInContainer: conf.linkInContainer,
        create: (name, parent, fd) =>
          nl.createIpvlan({ name, parent, netnsFd: fd, mode, mtu: conf.mtu > 0 ? conf.mtu : undefined }),
      };
    },
    chained: chained ? req.prevResult : undefined,
    notify: 'arp+ndisc',
    // like the reference, the result carries the config's DNS object (printed as {} when empty)
    dns: () => conf.dns ?? {},
  });
}

async function check(req: Request<IpvlanConf>): Promise<void> {
  const conf = req.conf;
  await link.checkContainerLink(req, {
    missingPrevResult: 'Required prevResult missing',
    // Without `master` the reference fails here (it looks up ""); the ipvlan cannot outlive its master, so the
    // interface check covers it.
    master: () => {
      if (conf.master !== '') link.lookupMaster(req.netns, conf.linkInContainer, conf.master);
    },
    link: ipvlanLinkCheck(conf.mode),
    lookup: (name) => nl.getLinkDetails(name),
  });
}

/**
 * STATUS: the IPAM's STATUS, then (beyond the reference, which leaves it unimplemented) a configured master in the host
 * namespace must exist (code 50 otherwise). Without `master` the master may come from prevResult, which STATUS does
 * not have. GC (the reference has none) is the IPAM's.
 */
async function status(req: Request<IpvlanConf>): Promise<void> {
  await link.ipamStatus(req);
  if (!req.conf.linkInContainer && req.conf.master !== '') link.requireMaster(req.conf.master);
}

/**
 * DEL is linkPlugin's: IPAM DEL (when configured) and the link's removal both run, every failure reported at the end;
 * a missing link, an empty CNI_NETNS and a namespace that is gone are success. Unlike the reference, DEL resolves no
 * master (the reference looks up the default route when `master` is unset, and fails without one).
 */
export const plugin = link.linkPlugin('ipvlan', {
  prevResultErrorPrefix: 'could not parse prevResult: ',
  conf: parseConf,
  add,
  check,
  status,
});
