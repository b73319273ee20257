/**
 * DEL: idempotent, also with the namespace or the interface gone. Deletes the container veth (the host end, its
 * addresses and routes go with it), releases the IPAM allocation and removes the masquerade rules of both
 * backends (they are found by network, interface and container id, so the addresses are not needed). Keeps going
 * after a failure and reports every failure at the end.
 */
import * as fw from '@cnikit/firewall';
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
    errors.run('', () => {
      try {
        addrs = nl.withNetns(req.netns, () => nl.delLinkByNameAddr(req.ifName));
      } catch (err) {
        // a missing namespace, or the empty file left by an unmounted bind mount: nothing to delete in it
        if (!nl.isNetnsGoneForDel(err, req.netns)) throw err;
      }
    });
  }
  if (conf.ipMasq) {
    errors.run('', () =>
      fw.teardownIPMasq({ ips: addrs, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
    );
  }
  errors.throwIfAny();
}
