/**
 * vlan: an 802.1Q vlan of the master as the container's interface, addressed by the IPAM plugin (drop-in for the
 * reference plugin at HEAD).
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CniError,
  delegateGc,
  delegateStatus,
  ErrorCode,
  internalError,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
  validateDelegate,
} from '@cnikit/skel';
import { vlanLinkCheck } from './check-logic.ts';
import { checkMtu, parseConf, type VlanConf } from './config.ts';

/** Go wraps the delegate's error with fmt.Errorf: code 999, its text (msg; details). */
function ipamDelegateError(err: unknown): CniError {
  const e = CniError.from(err);
  return internalError(`failed to execute IPAM delegate: ${e.msg}${e.details ? `; ${e.details}` : ''}`, err);
}

async function add(req: Request<VlanConf>): Promise<Result> {
  const conf = req.conf;
  const masterLink = link.inMasterNetns(req.netns, conf.linkInContainer, () =>
    nl.getLinkDetails(conf.master),
  );
  // clearer than the reference's bare "Link not found": which link (the words of its createVlan lookup)
  if (!masterLink)
    throw internalError(`failed to lookup master ${JSON.stringify(conf.master)}: Link not found`);
  checkMtu(conf.mtu, masterLink.mtu);
  // configuration errors, the IPAM's included, are raised before the first change (worded like the ADD's), after
  // the master's lookup and MTU check as in the reference's order
  try {
    await validateDelegate(conf.ipamType, req, { ipam: true });
  } catch (err) {
    throw ipamDelegateError(err);
  }
  return link.addContainerLink(req, {
    kind: 'vlan',
    create: (netnsFd) => {
      const l = link.addStackedLinkToContainer({
        kind: 'vlan',
        master: conf.master,
        linkInContainer: conf.linkInContainer,
        netnsFd,
        ifName: req.ifName,
        create: (name, parent, fd) =>
          nl.createVlan({
            name,
            parent,
            netnsFd: fd,
            id: conf.vlanId,
            mtu: conf.mtu > 0 ? conf.mtu : undefined,
          }),
      });
      return { name: req.ifName, mac: l.mac, sandbox: req.netns };
    },
    ipamError: ipamDelegateError,
    // like the reference, the result carries the config's DNS object (printed as {} when empty)
    dns: () => conf.dns ?? {},
  });
}

/**
 * DEL: IPAM DEL (when configured) and the link's removal both run, every failure reported at the end; a missing
 * link, an empty CNI_NETNS and a namespace that is gone are success. Unlike the reference, DEL needs neither the
 * master nor an IPAM type (the reference's DEL looks the master up and fails when it is gone).
 */
async function del(req: Request<VlanConf>): Promise<void> {
  await link.delContainerLink(req);
}

async function check(req: Request<VlanConf>): Promise<void> {
  const conf = req.conf;
  await link.checkContainerLink(req, {
    ipamAlways: true,
    missingPrevResult: 'vlan: Required prevResult missing',
    master: () => {
      const master =
        conf.master === ''
          ? undefined
          : link.inMasterNetns(req.netns, conf.linkInContainer, () => nl.getLinkDetails(conf.master));
      if (!master)
        throw internalError(`failed to lookup master ${JSON.stringify(conf.master)}: Link not found`);
    },
    link: vlanLinkCheck(conf.vlanId, conf.mtu),
    lookup: (name) => nl.getLinkDetails(name),
  });
}

/** GC (the reference has none): the IPAM's GC. */
async function gc(req: Request<VlanConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

/**
 * STATUS: the IPAM's STATUS (like the reference, also when no IPAM is configured: "no plugin name provided"), then
 * (beyond the reference, which leaves it unimplemented) a master in the host namespace must exist (code 50 otherwise).
 */
async function status(req: Request<VlanConf>): Promise<void> {
  const conf = req.conf;
  await delegateStatus(conf.ipamType, req);
  if (conf.linkInContainer) return;
  if (conf.master === '' || !nl.getLinkDetails(conf.master))
    throw new CniError(ErrorCode.PluginNotAvailable, `master ${JSON.stringify(conf.master)} not found`);
}

export const plugin: Plugin<VlanConf> = {
  name: 'vlan',
  ipam: false,
  about: `CNI vlan plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
