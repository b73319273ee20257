/**
 * The macvlan's kernel side: the master (configured, or the interface of the default route — in the container with
 * linkInContainer), its MTU bound, and the link itself (created in the container namespace under a temporary name,
 * renamed to CNI_IFNAME there).
 */
import { addStackedLinkToContainer, inMasterNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { internalError } from '@cnikit/skel';
import { checkMtu, type MacvlanConf, macBytes, modeFromString } from './config.ts';

/** The reference's loadConf checks: the master (default route's interface when unset), found, MTU within its MTU. */
export function resolveMaster(conf: MacvlanConf, netns: string): string {
  const master = conf.master || inMasterNetns(netns, conf.linkInContainer, () => nl.defaultRouteInterface());
  const link = inMasterNetns(netns, conf.linkInContainer, () => nl.getLinkDetails(master));
  // clearer than the reference's bare "Link not found": which link (the words of its createMacvlan lookup)
  if (!link) throw internalError(`failed to lookup master ${JSON.stringify(master)}: Link not found`);
  checkMtu(conf.mtu, link.mtu);
  return master;
}

/** Creates the macvlan as CNI_IFNAME in the container namespace open on `netnsFd`; returns its MAC. */
export function createContainerMacvlan(
  conf: MacvlanConf,
  master: string,
  ifName: string,
  netnsFd: number,
): { mac: string } {
  const mode = modeFromString(conf.mode);
  const mac = macBytes(conf.mac);
  return addStackedLinkToContainer({
    kind: 'macvlan',
    master,
    linkInContainer: conf.linkInContainer,
    netnsFd,
    ifName,
    create: (name, parent, fd) =>
      nl.createMacvlan({
        name,
        parent,
        netnsFd: fd,
        mode,
        mtu: conf.mtu > 0 ? conf.mtu : undefined,
        mac,
        bcQueueLen: conf.bcQueueLen > 0 ? conf.bcQueueLen : undefined,
      }),
  });
}
