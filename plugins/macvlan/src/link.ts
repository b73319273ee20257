/**
 * The macvlan's kernel side: the master (configured, or the interface of the default route — in the container with
 * linkInContainer), its MTU bound, and the link itself (created in the container namespace under a temporary name,
 * renamed to CNI_IFNAME there).
 */
import { checkMtu, inMasterNetns, lookupMaster, type StackedLink } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { type MacvlanConf, macBytes, modeFromString } from './config.ts';

/** The reference's loadConf checks: the master (default route's interface when unset), found, MTU within its MTU. */
export function resolveMaster(conf: MacvlanConf, netns: string): string {
  const master = conf.master || inMasterNetns(netns, conf.linkInContainer, () => nl.defaultRouteInterface());
  // clearer than the reference's bare "Link not found": which link (the words of its createMacvlan lookup)
  checkMtu(conf.mtu, lookupMaster(netns, conf.linkInContainer, master).mtu);
  return master;
}

/** The macvlan on `master` as addContainerLink creates it (in the container namespace, renamed to CNI_IFNAME). */
export function macvlanLink(conf: MacvlanConf, master: string): StackedLink {
  const mode = modeFromString(conf.mode);
  const mac = macBytes(conf.mac);
  return {
    master,
    linkInContainer: conf.linkInContainer,
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
  };
}
