/**
 * bridge: a Linux bridge in the host namespace, a veth pair into the container, optional delegated
 * IPAM, gateway addresses, masquerade and MAC spoof checking (drop-in for the reference plugin).
 */
import * as fw from '@cnikit/firewall';
import {
  ALL_VERSIONS,
  delegateGc,
  delegateStatus,
  ErrorList,
  type Plugin,
  type Request,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import { cmdAdd } from './add.ts';
import { cmdCheck } from './check.ts';
import { type BridgeConf, parseConf, uniqueID } from './config.ts';
import { cmdDel } from './del.ts';

/**
 * GC (the reference implements none for bridge): IPAM GC, then masquerade rules of attachments that are not in the
 * valid list (also when ipMasq is now off: rules of earlier attachments may remain), and stale spoof-check rules.
 * Every failure is reported; the IPAM's error code wins.
 */
async function gc(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  const valid = req.validAttachments ?? [];
  const errors = new ErrorList();
  if (conf.ipamType !== '') {
    await errors.run('', () => delegateGc(conf.ipamType, req));
    errors.run('', () =>
      fw.gcIPMasq(
        conf.name,
        valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
      ),
    );
  }
  if (conf.macspoofchk) {
    errors.run('', () => fw.gcSpoofCheck(new Set(valid.map((a) => uniqueID(a.containerID, a.ifname)))));
  }
  errors.throwIfAny();
}

/** STATUS: the IPAM's STATUS (the bridge itself has no prerequisite to report). */
async function status(req: Request<BridgeConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateStatus(req.conf.ipamType, req);
}

export const plugin: Plugin<BridgeConf> = {
  name: 'bridge',
  about: `CNI bridge plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  status,
  gc,
};
