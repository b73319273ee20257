/**
 * DEL: idempotent, also with the namespace or the interface gone. Deletes the container veth (the host end, its
 * addresses and routes go with it), releases the IPAM allocation and removes the masquerade rules of both
 * backends (they are found by network, interface and container id, so the addresses are not needed). Keeps going
 * after a failure and reports every failure at the end.
 */
import * as fw from '@cnikit/firewall';
import { removeInNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { delegateDel, ErrorList, type Request } from '@cnikit/skel';
import type { PtpConf } from './config.ts';

export async function del(req: Request<PtpConf>): Promise<void> {
  const conf = req.conf;
  const errors = new ErrorList();
  // the reference releases the address first and stops at the first failure
  await errors.run('', () => delegateDel(conf.ipamType, req));
  let addrs: string[] = [];
  if (req.netns !== '') {
    // a namespace that is gone (or the empty file of an unmounted bind mount) has nothing to delete in it
    errors.run('', () =>
      removeInNetns(req.netns, () => {
        addrs = nl.delLinkByNameAddr(req.ifName);
      }),
    );
  }
  if (conf.ipMasq) {
    errors.run('', () =>
      fw.teardownIPMasq({ ips: addrs, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
    );
  }
  errors.throwIfAny();
}
