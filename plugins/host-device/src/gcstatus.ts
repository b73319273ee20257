/**
 * GC (the reference has none): the IPAM's GC, and the saved device states of attachments that are not in the valid
 * list. STATUS: the IPAM's STATUS (the device itself is in a container while attachments exist, so its absence from
 * the host says nothing).
 */
import { delegateGc, delegateStatus, ErrorList, type Request } from '@cnikit/skel';
import type { HostDeviceConf } from './config.ts';
import { gcStates, stateName } from './state.ts';

export async function cmdGc(req: Request<HostDeviceConf>): Promise<void> {
  const conf = req.conf;
  const errors = new ErrorList();
  if (conf.ipamType !== '') await errors.run('', () => delegateGc(conf.ipamType, req));
  const valid = new Set((req.validAttachments ?? []).map((a) => stateName(a.containerID, a.ifname)));
  errors.run('', () => {
    gcStates(conf.dataDir, conf.name, valid);
  });
  errors.throwIfAny();
}

export async function cmdStatus(req: Request<HostDeviceConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateStatus(req.conf.ipamType, req);
}
