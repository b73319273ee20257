/**
 * DEL: idempotent. Removes the container interface (and with it the host veth), releases the IPAM allocation,
 * removes masquerade rules of both backends and the spoof-check rules — also when the namespace or interface is
 * already gone (the firewall teardown does not need the addresses). Keeps going after a failure and reports every
 * failure at the end.
 */
import * as fw from '@cnikit/firewall';
import * as nl from '@cnikit/netlink';
import { delegateDel, ErrorList, errorReason, type Request } from '@cnikit/skel';
import { type BridgeConf, uniqueID } from './config.ts';

export async function cmdDel(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  const l3 = conf.ipamType !== '';
  const errors = new ErrorList();
  let addrs: string[] = [];
  if (req.netns !== '') {
    // any other netns or netlink error is reported at the end: IPAM DEL and the firewall teardown still run
    errors.run('', () => {
      try {
        addrs = nl.withNetns(req.netns, () => nl.delLinkByNameAddr(req.ifName));
      } catch (err) {
        // a missing namespace, or the empty file left by an unmounted bind mount: nothing to delete in it
        if (!nl.isNetnsGoneForDel(err, req.netns)) throw err;
      }
    });
  }
  if (l3) await errors.run('', () => delegateDel(conf.ipamType, req));
  if (conf.macspoofchk) {
    // like the reference, a spoof-check teardown failure is reported on stderr and does not fail DEL
    // (GC removes what is left once the interface is gone)
    try {
      fw.teardownSpoofCheck(uniqueID(req.containerId, req.ifName));
    } catch (err) {
      req.log.warn(errorReason(err));
    }
  }
  if (l3 && conf.ipMasq) {
    errors.run('', () =>
      fw.teardownIPMasq({ ips: addrs, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
    );
  }
  errors.throwIfAny();
}
