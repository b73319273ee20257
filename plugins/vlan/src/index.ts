/**
 * vlan: an 802.1Q vlan of the master as the container's interface, addressed by the IPAM plugin (drop-in for the
 * reference plugin at HEAD).
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { CniError, internalError, type Request, type Result, validateDelegate } from '@cnikit/skel';
import { vlanLinkCheck } from './check-logic.ts';
import { parseConf, type VlanConf } from './config.ts';

/** Go wraps the delegate's error with fmt.Errorf: code 999, its text (msg; details). */
function ipamDelegateError(err: unknown): CniError {
  const e = CniError.from(err);
  return internalError(`failed to execute IPAM delegate: ${e.msg}${e.details ? `; ${e.details}` : ''}`, err);
}

async function add(req: Request<VlanConf>): Promise<Result> {
  const conf = req.conf;
  // clearer than the reference's bare "Link not found": which link (the words of its createVlan lookup)
  const masterLink = link.lookupMaster(req.netns, conf.linkInContainer, conf.master);
  link.checkMtu(conf.mtu, masterLink.mtu);
  // configuration errors, the IPAM's included, are raised before the first change (worded like the ADD's), after
  // the master's lookup and MTU check as in the reference's order
  try {
    await validateDelegate(conf.ipamType, req, { ipam: true });
  } catch (err) {
    throw ipamDelegateError(err);
  }
  return link.addContainerLink(req, {
    kind: 'vlan',
    stacked: () => ({
      master: conf.master,
      linkInContainer: conf.linkInContainer,
      create: (name, parent, fd) =>
        nl.createVlan({
          name,
          parent,
          netnsFd: fd,
          id: conf.vlanId,
          mtu: conf.mtu > 0 ? conf.mtu : undefined,
        }),
    }),
    ipamError: ipamDelegateError,
    // like the reference, the result carries the config's DNS object (printed as {} when empty)
    dns: () => conf.dns ?? {},
  });
}

async function check(req: Request<VlanConf>): Promise<void> {
  const conf = req.conf;
  await link.checkContainerLink(req, {
    ipamAlways: true,
    missingPrevResult: 'vlan: Required prevResult missing',
    master: () => link.lookupMaster(req.netns, conf.linkInContainer, conf.master),
    link: vlanLinkCheck(conf.vlanId, conf.mtu),
    lookup: (name) => nl.getLinkDetails(name),
  });
}

/**
 * STATUS: the IPAM's STATUS (like the reference, also when no IPAM is configured: "no plugin name provided"), then
 * (beyond the reference, which leaves it unimplemented) a master in the host namespace must exist (code 50
 * otherwise). GC (the reference has none) is the IPAM's.
 */
async function status(req: Request<VlanConf>): Promise<void> {
  await link.ipamStatus(req, true);
  if (!req.conf.linkInContainer) link.requireMaster(req.conf.master);
}

/**
 * DEL is linkPlugin's: IPAM DEL (when configured) and the link's removal both run, every failure reported at the end;
 * a missing link, an empty CNI_NETNS and a namespace that is gone are success. Unlike the reference, DEL needs neither
 * the master nor an IPAM type (the reference's DEL looks the master up and fails when it is gone).
 */
export const plugin = link.linkPlugin('vlan', { conf: parseConf, add, check, status });
