/**
 * host-device: moves an existing host link (by name, MAC, kernel path, PCI address or runtimeConfig.deviceID) into
 * the container and back on DEL (drop-in for the reference plugin; Multus/OpenShift/KubeVirt secondary networks).
 */
import { checkContainerLink, ipamGc, linkPlugin } from '@cnikit/link';
import { ErrorList, type Request } from '@cnikit/skel';
import { add, resolveSelection } from './add.ts';
import { type HostDeviceConf, parseConf } from './config.ts';
import { del } from './del.ts';
import { reclaimReturned } from './move.ts';
import { gcStates, restoreDevice, stateName } from './state.ts';

/** CHECK in the reference's order: netns, IPAM CHECK, prevResult, then the device, addresses and routes. */
async function check(req: Request<HostDeviceConf>): Promise<void> {
  const { dpdkMode } = resolveSelection(req.conf);
  await checkContainerLink(req, { missingPrevResult: 'Required prevResult missing', noInterface: dpdkMode });
}

/**
 * GC (the reference has none): the IPAM's GC, and the saved device states of attachments that are not in the valid
 * list. A device such an attachment left in the host (its namespace died without DEL, and the kernel returned it
 * under its container-side name) gets its name and state back first, as DEL would.
 */
async function gc(req: Request<HostDeviceConf>): Promise<void> {
  const conf = req.conf;
  const errors = new ErrorList();
  await errors.run('', () => ipamGc(req));
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

// STATUS: the IPAM's STATUS (linkPlugin's; the device itself is in a container while attachments exist, so its
// absence from the host says nothing)
export const plugin = linkPlugin('host-device', { conf: parseConf, add, del, check, gc });
