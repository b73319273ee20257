/**
 * GC (the reference has none for ptp): the IPAM's GC, then the masquerade rules of attachments that are not in
 * the valid list (also when ipMasq is now off: earlier attachments may have rules). STATUS: the IPAM's STATUS.
 */
import * as fw from '@cnikit/firewall';
import { delegateGc, delegateStatus, ErrorList, type Request } from '@cnikit/skel';
import type { PtpConf } from './config.ts';

export async function cmdGc(req: Request<PtpConf>): Promise<void> {
  const valid = req.validAttachments ?? [];
  const errors = new ErrorList();
  await errors.run('', () => delegateGc(req.conf.ipamType, req));
  errors.run('', () =>
    fw.gcIPMasq(
      req.conf.name,
      valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
    ),
  );
  errors.throwIfAny();
}

export async function cmdStatus(req: Request<PtpConf>): Promise<void> {
  await delegateStatus(req.conf.ipamType, req);
}
