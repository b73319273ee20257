/**
 * GC (the reference has none): the IPAM's GC, and the saved device states of attachments that are not in the valid
 * list. A device such an attachment left in the host (its namespace died without DEL, and the kernel returned it
 * under its container-side name) gets its name and state back first, as DEL would. STATUS: the IPAM's STATUS (the
 * device itself is in a container while attachments exist, so its absence from the host says nothing).
 */
import { delegateGc, delegateStatus, ErrorList, type Request } from '@cnikit/skel';
import type { HostDeviceConf } from './config.ts';
import { reclaimReturned } from './move.ts';
import { gcStates, restoreDevice, stateName } from './state.ts';

export async function cmdGc(req: Request<HostDeviceConf>): Promise<void> {
  const conf = req.conf;
  const errors = new ErrorList();
  if (conf.ipamType !== '') await errors.run('', () => delegateGc(conf.ipamType, req));
  const valid = new Set((req.validAttachments ?? []).map((a) => stateName(a.containerID, a.ifname)));
  errors.run('', () => {
    const failed: string[] = [];
    gcStates(
      conf.dataDir,
      conf.name,
      valid,
      (saved) => {
        if (!reclaimReturned(saved)) return;
        const errs = restoreDevice(saved);
        if (errs.length) throw new Error(errs.join('; '));
      },
      failed,
    );
    if (failed.length) throw new Error(failed.join('; '));
  });
  errors.throwIfAny();
}

export async function cmdStatus(req: Request<HostDeviceConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateStatus(req.conf.ipamType, req);
}
