/**
 * tap: a persistent tap device in the container (owner, group, multiqueue, MTU, MAC, optional bridge port), for
 * VM-based runtimes (drop-in for the reference plugin). ADD, DEL, CHECK, GC and STATUS in the reference's order;
 * cnikit also rolls back a failed ADD completely, keeps DEL going after a failure, and checks in CHECK that the tap
 * itself is still there.
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { type Request, type Result, validateDelegate } from '@cnikit/skel';
import { parseConf, type TapConf } from './config.ts';
import { createTap, deleteTempTap } from './kernel.ts';

async function add(req: Request<TapConf>): Promise<Result> {
  const conf = req.conf;
  // configuration errors, the IPAM's included, are raised before the first change
  if (conf.ipamType !== '') await validateDelegate(conf.ipamType, req, { ipam: true });
  return link.addContainerLink(req, {
    kind: 'tap',
    create: (fd) => nl.withNetnsFd(fd, () => createTap(conf, req.ifName, req.netns)),
    notify: 'arp',
    // the reference replaces the IPAM's DNS with the network config's, set or not
    dns: () => (conf.dns ? structuredClone(conf.dns) : undefined),
  });
}

async function del(req: Request<TapConf>): Promise<void> {
  await link.delContainerLink(req, {
    remove: (ifName) => {
      nl.deleteLinkIfExists(ifName);
      deleteTempTap(ifName);
    },
  });
}

async function check(req: Request<TapConf>): Promise<void> {
  await link.checkContainerLink(req, {
    missingPrevResult: 'Required prevResult missing',
    // not in the reference: the tap itself must still be there, with its MAC
    link: { kind: { kind: 'tun', label: 'tap' } },
  });
}

// GC (none in the reference) and STATUS: the IPAM's (linkPlugin's); a tap has no state outside its namespace
export const plugin = link.linkPlugin('tap', { conf: parseConf, add, del, check });
